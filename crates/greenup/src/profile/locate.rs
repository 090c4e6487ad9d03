//! Which profile file a name means: one rule for the sbatch check, greenupd's
//! decisions, refinement and the CLI. A job uses the refined version in use (pinned,
//! else the newest) when greenupd keeps one, else the admin's `NAME.yaml` in the site's
//! profile directory. Either must resolve inside its own directory: a link out of it is
//! refused, never followed, since greenupd reads the file as root or SlurmUser.

use std::path::{Path, PathBuf};

use super::versions::{InUse, Versions};
use crate::input::{InputError, Origin, inside};
use crate::names;
use crate::site::Site;

/// The profile file a job uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The file, every link resolved.
    pub path: PathBuf,
    /// The refined version, or `None` for the admin's own file.
    pub refined: Option<u64>,
    /// Why the refined versions could not be consulted, when the admin's file was used
    /// for that reason.
    pub versions_unread: Option<String>,
}

/// The error for a profile name that breaks the naming rule; `origin` is the option or
/// request field it came from.
pub fn bad_name(name: &str, origin: Origin) -> InputError {
    InputError::bare(
        origin,
        format!(
            "invalid value '{name}': expected a profile name of {}",
            names::NAME_RULE
        ),
    )
}

/// The admin's file for profile `name` in `dir`: `dir/NAME.yaml`, which must exist and
/// resolve inside `dir`.
pub fn admin_file(dir: &Path, name: &str, origin: Origin) -> Result<PathBuf, InputError> {
    if !names::is_name(name) {
        return Err(bad_name(name, origin));
    }
    let path = dir.join(format!("{name}.yaml"));
    if std::fs::symlink_metadata(&path).is_err() {
        return Err(InputError::bare(
            origin,
            format!(
                "invalid value '{name}': expected the name of a profile in {} (no {} there)",
                dir.display(),
                path.display()
            ),
        ));
    }
    inside(dir, &path)
}

/// Whether `site` has any version of profile `name`: the admin's file or a refined one.
/// An application run under monitor before its first version exists has none.
pub fn exists(site: &Site, name: &str) -> bool {
    names::is_name(name)
        && (std::fs::symlink_metadata(site.profile_dir.join(format!("{name}.yaml"))).is_ok()
            || Versions::for_store(&site.daemon.store)
                .list(name)
                .is_ok_and(|v| !v.is_empty()))
}

/// The file a job naming profile `name` uses at `site`.
pub fn for_job(site: &Site, name: &str, origin: Origin) -> Result<Located, InputError> {
    if !names::is_name(name) {
        return Err(bad_name(name, origin));
    }
    let versions = Versions::for_store(&site.daemon.store);
    let (refined, versions_unread) = match versions.in_use(name) {
        Ok(InUse::Refined { version, path }) => (Some((version, path)), None),
        Ok(InUse::Admin) => (None, None),
        Err(e) => (None, Some(e.to_string())),
    };
    match refined {
        Some((version, path)) => {
            let dir = path.parent().unwrap_or(Path::new("/"));
            Ok(Located {
                path: inside(dir, &path)?,
                refined: Some(version),
                versions_unread: None,
            })
        }
        None => Ok(Located {
            path: admin_file(&site.profile_dir, name, origin)?,
            refined: None,
            versions_unread,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_name_is_a_file_in_the_directory_and_never_a_link_out_of_it() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("profiles");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("md.yaml"), "name: md\n").unwrap();
        std::fs::write(t.path().join("secret"), "root:x:0:0\n").unwrap();
        symlink(t.path().join("secret"), dir.join("shadow.yaml")).unwrap();
        symlink("md.yaml", dir.join("alias.yaml")).unwrap();
        let opt = || Origin::Option("--energy-profile".into());
        let real = std::fs::canonicalize(dir.join("md.yaml")).unwrap();
        assert_eq!(admin_file(&dir, "md", opt()).unwrap(), real);
        // A link to a file in the same directory is that file.
        assert_eq!(admin_file(&dir, "alias", opt()).unwrap(), real);
        let e = admin_file(&dir, "shadow", opt()).unwrap_err().to_string();
        assert!(
            e.contains("resolves outside") && e.contains("refused"),
            "{e}"
        );
        assert!(!e.contains("root:x"), "{e}");
        for bad in ["../secret", "../../etc/shadow", ".hidden", "", "a/b"] {
            let e = admin_file(&dir, bad, opt()).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("option --energy-profile: invalid value '{bad}'")),
                "{e}"
            );
        }
        let e = admin_file(&dir, "nosuch", opt()).unwrap_err().to_string();
        assert!(e.contains("no ") && e.contains("nosuch.yaml"), "{e}");
    }
}
