//! RAPL energy counters (`class/powercap/intel-rapl:N/energy_uj`), read at job start,
//! during the job and at its end ([`super::tally::Tally`] counts them). The counters wrap
//! at `max_energy_range_uj`; a node without counters is "unmeasured", never given an
//! invented number.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sysfs;

/// One top-level RAPL zone (a package or the platform), found under `class/powercap`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    /// The zone's directory name, e.g. `intel-rapl:0`.
    pub id: String,
    /// The zone's `name`, e.g. `package-0` or `psys`.
    pub name: String,
    /// The zone's directory.
    pub dir: PathBuf,
}

/// The top-level RAPL zones under `sysfs_root` (sub-zones such as `intel-rapl:0:0`
/// are parts of their package and would count twice), in directory-name order.
pub fn zones(sysfs_root: &Path) -> Vec<Zone> {
    let base = sysfs_root.join("class/powercap");
    let Ok(entries) = std::fs::read_dir(&base) else {
        return Vec::new();
    };
    let mut out: Vec<Zone> = entries
        .flatten()
        .filter_map(|e| {
            let id = e.file_name().to_string_lossy().into_owned();
            let rest = id.strip_prefix("intel-rapl:")?;
            if rest.contains(':') || rest.parse::<u32>().is_err() {
                return None;
            }
            let dir = e.path();
            let name = sysfs::read(&dir.join("name")).unwrap_or_default();
            Some(Zone { id, name, dir })
        })
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// One zone's counter at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneReading {
    /// The zone's directory name.
    pub id: String,
    /// The zone's `name`.
    pub name: String,
    /// `energy_uj`.
    pub energy_uj: u64,
    /// `max_energy_range_uj`: the value at which `energy_uj` wraps to zero.
    pub max_energy_range_uj: u64,
}

/// Every counted zone of a node at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// Seconds since the Unix epoch when the counters were read.
    pub unix_s: f64,
    /// The zones read; empty when the node has no RAPL counters.
    pub zones: Vec<ZoneReading>,
    /// Why a zone could not be read, if one could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Energy used between two readings, or why it is not known.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Energy {
    /// Measured by the counters.
    Measured {
        /// Joules.
        joules: f64,
    },
    /// No counter gave a trustworthy number.
    Unmeasured {
        /// Why, in words an admin can act on.
        reason: String,
    },
}

/// Read every top-level zone's counter. A psys zone is skipped when package zones
/// exist, since it already includes them.
pub fn read(sysfs_root: &Path) -> Reading {
    let unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let all = zones(sysfs_root);
    let has_package = all.iter().any(|z| z.name.starts_with("package"));
    let mut reading = Reading {
        unix_s,
        zones: Vec::new(),
        problem: None,
    };
    for z in all
        .into_iter()
        .filter(|z| !(has_package && z.name == "psys"))
    {
        let counter = sysfs::read_u64(&z.dir.join("energy_uj"))
            .and_then(|e| Ok((e, sysfs::read_u64(&z.dir.join("max_energy_range_uj"))?)));
        match counter {
            Ok((energy_uj, max_energy_range_uj)) => reading.zones.push(ZoneReading {
                id: z.id,
                name: z.name,
                energy_uj,
                max_energy_range_uj,
            }),
            Err(e) => {
                reading.problem.get_or_insert(e.to_string());
            }
        }
    }
    reading
}

/// Microjoules counted from `start` to `end` by a counter that wraps to zero at
/// `range`, assuming it wrapped at most once.
pub fn delta_uj(start: u64, end: u64, range: u64) -> u64 {
    if end >= start {
        end - start
    } else {
        range.saturating_sub(start).saturating_add(end)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::meter::Tally;
    use std::fs;

    /// The energy between two readings, as a job's start and end count it.
    fn energy_between(start: &Reading, end: &Reading) -> Energy {
        let mut tally = Tally::start(start.clone());
        tally.add(end.clone());
        tally.energy()
    }

    /// Write a RAPL zone `intel-rapl:N` named `name` with the given counter and range.
    pub(crate) fn zone(root: &Path, n: u32, name: &str, energy: u64, range: u64) {
        let d = root.join(format!("class/powercap/intel-rapl:{n}"));
        fs::create_dir_all(d.join(format!("intel-rapl:{n}:0"))).unwrap();
        fs::write(d.join("name"), format!("{name}\n")).unwrap();
        fs::write(d.join("energy_uj"), format!("{energy}\n")).unwrap();
        fs::write(d.join("max_energy_range_uj"), format!("{range}\n")).unwrap();
        fs::write(d.join("constraint_0_power_limit_uw"), "0\n").unwrap();
        let sub = d.join(format!("intel-rapl:{n}:0"));
        fs::write(sub.join("name"), "core\n").unwrap();
        fs::write(sub.join("energy_uj"), "7\n").unwrap();
        fs::write(sub.join("max_energy_range_uj"), format!("{range}\n")).unwrap();
    }

    fn set(root: &Path, n: u32, energy: u64) {
        fs::write(
            root.join(format!("class/powercap/intel-rapl:{n}/energy_uj")),
            format!("{energy}\n"),
        )
        .unwrap();
    }

    #[test]
    fn two_packages_sum_and_subzones_are_not_counted() {
        let t = tempfile::tempdir().unwrap();
        zone(t.path(), 0, "package-0", 1_000_000, 262_143_328_850);
        zone(t.path(), 1, "package-1", 2_000_000, 262_143_328_850);
        let a = read(t.path());
        assert_eq!(a.zones.len(), 2);
        set(t.path(), 0, 4_500_000);
        set(t.path(), 1, 2_250_000);
        let b = read(t.path());
        // (4.5 - 1.0) J + (2.25 - 2.0) J
        assert_eq!(energy_between(&a, &b), Energy::Measured { joules: 3.75 });
    }

    #[test]
    fn wrap_around_counts_the_distance_to_the_range_plus_the_new_value() {
        let t = tempfile::tempdir().unwrap();
        zone(t.path(), 0, "package-0", 999_000_000, 1_000_000_000);
        let a = read(t.path());
        set(t.path(), 0, 500_000);
        let b = read(t.path());
        // 1_000_000 uJ up to the range, then 500_000 uJ after the wrap.
        assert_eq!(energy_between(&a, &b), Energy::Measured { joules: 1.5 });
        assert_eq!(delta_uj(10, 10, 100), 0);
        assert_eq!(delta_uj(90, 5, 100), 15);
    }

    #[test]
    fn psys_is_skipped_when_packages_exist_and_used_alone_otherwise() {
        let t = tempfile::tempdir().unwrap();
        zone(t.path(), 0, "package-0", 0, 1_000_000_000);
        zone(t.path(), 1, "psys", 0, 1_000_000_000);
        assert_eq!(
            read(t.path())
                .zones
                .iter()
                .map(|z| z.name.as_str())
                .collect::<Vec<_>>(),
            vec!["package-0"]
        );
        let u = tempfile::tempdir().unwrap();
        zone(u.path(), 1, "psys", 0, 1_000_000_000);
        assert_eq!(read(u.path()).zones.len(), 1);
    }

    #[test]
    fn no_counter_is_unmeasured_never_zero() {
        let t = tempfile::tempdir().unwrap();
        let a = read(t.path());
        let b = read(t.path());
        assert!(
            matches!(energy_between(&a, &b), Energy::Unmeasured { ref reason } if reason.contains("no RAPL"))
        );
        zone(t.path(), 0, "package-0", 0, 1_000_000_000);
        let a = read(t.path());
        fs::write(
            t.path().join("class/powercap/intel-rapl:0/energy_uj"),
            "garbage\n",
        )
        .unwrap();
        let b = read(t.path());
        assert!(
            matches!(energy_between(&a, &b), Energy::Unmeasured { ref reason } if reason.contains("unreadable"))
        );
    }
}
