//! powercap: save and restore each RAPL zone's long-term power limit, and set one
//! when a decision carries a per-node power limit.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::meter::rapl;
use crate::sysfs::{self, SysfsError};

/// A zone's long-term power limit as found before a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitSettings {
    /// The zone's directory name, e.g. `intel-rapl:0`.
    pub zone: String,
    /// `constraint_0_power_limit_uw`.
    pub limit_uw: u64,
}

/// The long-term power limit of every top-level zone that has one.
pub fn snapshot(sysfs_root: &Path) -> Result<Vec<LimitSettings>, SysfsError> {
    let mut out = Vec::new();
    for z in rapl::zones(sysfs_root) {
        let file = z.dir.join("constraint_0_power_limit_uw");
        if file.exists() {
            out.push(LimitSettings {
                zone: z.id,
                limit_uw: sysfs::read_u64(&file)?,
            });
        }
    }
    Ok(out)
}

/// Split `watts` evenly over every zone's long-term limit.
pub fn apply(sysfs_root: &Path, watts: f64) -> Result<Vec<LimitSettings>, SysfsError> {
    let zones: Vec<_> = rapl::zones(sysfs_root)
        .into_iter()
        .filter(|z| z.dir.join("constraint_0_power_limit_uw").exists())
        .collect();
    let mut out = Vec::new();
    if zones.is_empty() || !watts.is_finite() || watts <= 0.0 {
        return Ok(out);
    }
    let each_uw = (watts * 1.0e6 / zones.len() as f64).round() as u64;
    for z in zones {
        sysfs::write(
            &z.dir.join("constraint_0_power_limit_uw"),
            &each_uw.to_string(),
        )?;
        out.push(LimitSettings {
            zone: z.id,
            limit_uw: each_uw,
        });
    }
    Ok(out)
}

/// Put back the saved limits, only where they changed. Every zone is attempted.
pub fn restore(sysfs_root: &Path, saved: &[LimitSettings]) -> Result<(), SysfsError> {
    let mut first_err = None;
    for s in saved {
        let file = sysfs_root
            .join("class/powercap")
            .join(&s.zone)
            .join("constraint_0_power_limit_uw");
        let result = sysfs::read_u64(&file).and_then(|now| {
            if now == s.limit_uw {
                Ok(())
            } else {
                sysfs::write(&file, &s.limit_uw.to_string())
            }
        });
        if let Err(e) = result {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::rapl::tests::zone;

    #[test]
    fn limits_split_evenly_and_restore_exactly() {
        let t = tempfile::tempdir().unwrap();
        zone(t.path(), 0, "package-0", 0, 1_000_000);
        zone(t.path(), 1, "package-1", 0, 1_000_000);
        std::fs::write(
            t.path()
                .join("class/powercap/intel-rapl:1/constraint_0_power_limit_uw"),
            "95000000\n",
        )
        .unwrap();
        let saved = snapshot(t.path()).unwrap();
        assert_eq!(
            saved[1],
            LimitSettings {
                zone: "intel-rapl:1".into(),
                limit_uw: 95_000_000
            }
        );
        let set = apply(t.path(), 150.0).unwrap();
        assert_eq!(
            set.iter().map(|s| s.limit_uw).collect::<Vec<_>>(),
            vec![75_000_000, 75_000_000]
        );
        restore(t.path(), &saved).unwrap();
        assert_eq!(snapshot(t.path()).unwrap(), saved);
    }
}
