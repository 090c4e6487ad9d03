//! Who may do what with greenup's jobs, as the site config names them: root and the
//! SlurmUser open, record and close jobs; the admins it lists read every job; every
//! other user reads only their own. greenupd enforces it on each request, and the CLI
//! asks it before writing a file that jobs read.

use std::collections::HashSet;

use super::Site;

/// Who may do what, resolved from the site config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roles {
    slurm_uid: Option<u32>,
    admin_uids: HashSet<u32>,
}

impl Roles {
    /// Resolve the SlurmUser and admins to uids with `uid_of` (the caller's look-up in
    /// the system's user database). Names that do not exist are returned as warnings.
    pub fn from_site(site: &Site, uid_of: impl Fn(&str) -> Option<u32>) -> (Roles, Vec<String>) {
        let mut warnings = Vec::new();
        let slurm_uid = match uid_of(&site.daemon.slurm_user) {
            Some(u) => Some(u),
            None => {
                warnings.push(format!(
                    "daemon.slurm_user '{}' is not a known user",
                    site.daemon.slurm_user
                ));
                None
            }
        };
        let mut admin_uids = HashSet::new();
        for a in &site.daemon.admins {
            match uid_of(a) {
                Some(u) => {
                    admin_uids.insert(u);
                }
                None => warnings.push(format!("daemon.admins: '{a}' is not a known user")),
            }
        }
        (
            Roles {
                slurm_uid,
                admin_uids,
            },
            warnings,
        )
    }

    /// Whether `uid` may open, record and close jobs.
    pub fn may_write(&self, uid: u32) -> bool {
        uid == 0 || Some(uid) == self.slurm_uid
    }

    /// Whether `uid` may read every job.
    pub fn may_read_all(&self, uid: u32) -> bool {
        self.may_write(uid) || self.admin_uids.contains(&uid)
    }
}

impl Roles {
    /// Roles from uids already resolved: `slurm_uid` writes, `admin_uids` read all.
    pub fn from_uids(slurm_uid: Option<u32>, admin_uids: impl IntoIterator<Item = u32>) -> Roles {
        Roles {
            slurm_uid,
            admin_uids: admin_uids.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_the_slurm_user_write_admins_read_all() {
        let roles = Roles::from_uids(Some(64030), [1500]);
        assert!(roles.may_write(0));
        assert!(roles.may_write(64030));
        assert!(!roles.may_write(1500));
        assert!(roles.may_read_all(1500));
        assert!(!roles.may_read_all(1000));
    }
}
