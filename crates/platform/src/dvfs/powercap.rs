//! powercap: each RAPL zone's power limits (the long-term and short-term limit, their
//! time windows, and whether the zone enforces them), saved before a job, set to the
//! node's share of the job's watts and read back, and restored exactly at its end.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::meter::rapl;
use crate::sysfs::{self, SysfsError};

/// A zone's power limits as found before a job, or as read back after they were set.
/// Fields other than `limit_uw` are absent where the zone has no such file (and in
/// records saved before they were kept: those restore the long-term limit alone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitSettings {
    /// The zone's directory name, e.g. `intel-rapl:0`.
    pub zone: String,
    /// The long-term limit, `constraint_0_power_limit_uw`.
    pub limit_uw: u64,
    /// The long-term time window, `constraint_0_time_window_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_us: Option<u64>,
    /// The short-term limit, `constraint_1_power_limit_uw`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_limit_uw: Option<u64>,
    /// The short-term time window, `constraint_1_time_window_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_window_us: Option<u64>,
    /// Whether the zone enforces its limits, `enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// The limits a node is asked to hold for a job.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LimitRequest {
    /// The node's long-term limit in watts, split over its packages.
    pub watts: f64,
    /// The long-term time window in seconds.
    pub window_s: f64,
    /// The short-term limit; None leaves each zone's short-term limit as it is.
    pub short_term: Option<ShortTerm>,
}

/// A short-term limit for the whole node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ShortTerm {
    /// Watts, split over the node's packages like the long-term limit.
    pub watts: f64,
    /// The time window in seconds.
    pub window_s: f64,
}

/// What a node's zones hold after [`apply`], as read back from them.
#[derive(Debug, Clone, PartialEq)]
pub struct InForce {
    /// Each written zone's limits.
    pub zones: Vec<LimitSettings>,
    /// The node's long-term limit in watts: the sum over the written zones.
    pub watts: f64,
    /// Each limit lowered to its zone's maximum, in words (empty when none was).
    pub clamped: Vec<String>,
}

/// Whether a node holds the power limit its job's decision asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PowerHeld {
    /// The node's zones hold a long-term limit of `held_w` watts for the job.
    Held {
        /// The node's share of the job's watts, as asked.
        asked_w: f64,
        /// The long-term limit in force, read back from the zones.
        held_w: f64,
        /// How the limit was lowered to the zones' maxima, if it was.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// The limit is not held; the node's limits are as they were before the job.
    NotHeld {
        /// The node's share of the job's watts, as asked.
        asked_w: f64,
        /// Why, in words an admin can act on.
        reason: String,
    },
}

impl PowerHeld {
    /// The watts asked.
    pub fn asked_w(&self) -> f64 {
        match self {
            PowerHeld::Held { asked_w, .. } | PowerHeld::NotHeld { asked_w, .. } => *asked_w,
        }
    }
}

/// Why a node's limit could not be set.
#[derive(Debug, thiserror::Error)]
pub enum PowercapError {
    /// The node has no RAPL zone with a long-term limit.
    #[error("no RAPL zone with a power limit (class/powercap/intel-rapl:N)")]
    NoZones,
    /// The request was not a usable limit.
    #[error("{what} {value} is not valid: expected a positive finite number")]
    BadRequest {
        /// Which number.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// A file could not be read or written.
    #[error(transparent)]
    Sysfs(#[from] SysfsError),
    /// A limit was written but a higher one reads back.
    #[error("{file}: {reads_uw} uW in force after {asked_uw} uW was written")]
    Higher {
        /// The limit's file.
        file: PathBuf,
        /// What was written.
        asked_uw: u64,
        /// What reads back.
        reads_uw: u64,
    },
    /// The zone does not enforce its limits after `1` was written to `enabled`.
    #[error("{0}: limits not enforced after 1 was written")]
    NotEnabled(PathBuf),
}

/// How far above the written value a limit may read back and still hold: the hardware
/// keeps limits in its own power units (1/8 W on most Intel parts), so a value never
/// reads back exactly, but rounding never adds a watt.
const READBACK_SLACK_UW: u64 = 1_000_000;

/// The files of one constraint of a zone.
struct Constraint {
    limit: PathBuf,
    window: PathBuf,
    max: PathBuf,
}

/// Constraint `n` of the zone in `dir` when it exists and (where the zone names its
/// constraints) is named `name`; RAPL numbers them long_term 0, short_term 1.
fn constraint(dir: &Path, n: u32, name: &str) -> Option<Constraint> {
    let file = |what: &str| dir.join(format!("constraint_{n}_{what}"));
    let named = sysfs::read(&file("name")).ok();
    if !file("power_limit_uw").exists() || named.is_some_and(|s| s != name) {
        return None;
    }
    Some(Constraint {
        limit: file("power_limit_uw"),
        window: file("time_window_us"),
        max: file("max_power_uw"),
    })
}

fn long_term(dir: &Path) -> Option<Constraint> {
    constraint(dir, 0, "long_term")
}

fn short_term(dir: &Path) -> Option<Constraint> {
    constraint(dir, 1, "short_term")
}

/// Read `file` when it exists.
fn read_if_present(file: &Path) -> Result<Option<u64>, SysfsError> {
    if file.exists() {
        sysfs::read_u64(file).map(Some)
    } else {
        Ok(None)
    }
}

/// Every limit of the zone in `dir`; None when it has no long-term limit.
fn read_zone(id: &str, dir: &Path) -> Result<Option<LimitSettings>, SysfsError> {
    let Some(long) = long_term(dir) else {
        return Ok(None);
    };
    let short = short_term(dir);
    Ok(Some(LimitSettings {
        zone: id.to_string(),
        limit_uw: sysfs::read_u64(&long.limit)?,
        window_us: read_if_present(&long.window)?,
        short_limit_uw: short
            .as_ref()
            .map(|c| sysfs::read_u64(&c.limit))
            .transpose()?,
        short_window_us: match &short {
            Some(c) => read_if_present(&c.window)?,
            None => None,
        },
        enabled: read_if_present(&dir.join("enabled"))?.map(|e| e != 0),
    }))
}

/// The limits of every top-level zone that has a long-term limit.
pub fn snapshot(sysfs_root: &Path) -> Result<Vec<LimitSettings>, SysfsError> {
    let mut out = Vec::new();
    for z in rapl::zones(sysfs_root) {
        if let Some(s) = read_zone(&z.id, &z.dir)? {
            out.push(s);
        }
    }
    Ok(out)
}

/// Microwatts or microseconds from a positive finite `value` (in units of `scale`).
fn micro(what: &'static str, value: f64, scale: f64) -> Result<u64, PowercapError> {
    if !value.is_finite() || value <= 0.0 || value * scale >= u64::MAX as f64 {
        return Err(PowercapError::BadRequest { what, value });
    }
    Ok((value * scale).round().max(1.0) as u64)
}

/// `asked` microwatts, lowered to the constraint's maximum where it has one; the
/// lowering is said in `clamped`.
fn clamp(
    zone: &str,
    which: &str,
    c: &Constraint,
    asked: u64,
    clamped: &mut Vec<String>,
) -> Result<u64, SysfsError> {
    match read_if_present(&c.max)? {
        Some(max) if max > 0 && asked > max => {
            clamped.push(format!(
                "{zone}: {which} limit {:.1} W above the zone's maximum, set to {:.1} W",
                asked as f64 / 1e6,
                max as f64 / 1e6
            ));
            Ok(max)
        }
        _ => Ok(asked),
    }
}

/// Write `uw` to a limit file and check that no higher limit reads back.
fn write_limit(file: &Path, uw: u64) -> Result<(), PowercapError> {
    sysfs::write(file, &uw.to_string())?;
    let reads_uw = sysfs::read_u64(file)?;
    if reads_uw == 0 || reads_uw > uw.saturating_add(READBACK_SLACK_UW) {
        return Err(PowercapError::Higher {
            file: file.to_path_buf(),
            asked_uw: uw,
            reads_uw,
        });
    }
    Ok(())
}

/// Set the node's limits: `req`'s watts split evenly over its package zones (every zone
/// with a limit where it has no package zone, e.g. psys alone), each lowered to its
/// zone's maximum, with the windows, and the zones made to enforce them; then read
/// back. On an error some zones may be written: restore the [`snapshot`] taken before.
pub fn apply(sysfs_root: &Path, req: &LimitRequest) -> Result<InForce, PowercapError> {
    let zones = limited_zones(sysfs_root)?;
    let n = zones.len() as f64;
    let long_uw = micro("power limit (W)", req.watts / n, 1e6)?;
    let window_us = micro("power limit window (s)", req.window_s, 1e6)?;
    let short = req
        .short_term
        .map(|s| {
            Ok::<_, PowercapError>((
                micro("short-term limit (W)", s.watts / n, 1e6)?,
                micro("short-term window (s)", s.window_s, 1e6)?,
            ))
        })
        .transpose()?;
    let mut clamped = Vec::new();
    let mut out = Vec::new();
    for z in &zones {
        let long = long_term(&z.dir).ok_or(PowercapError::NoZones)?;
        let uw = clamp(&z.id, "long-term", &long, long_uw, &mut clamped)?;
        if long.window.exists() {
            sysfs::write(&long.window, &window_us.to_string())?;
        }
        write_limit(&long.limit, uw)?;
        if let (Some((s_uw, s_window)), Some(c)) = (short, short_term(&z.dir)) {
            let s_uw = clamp(&z.id, "short-term", &c, s_uw, &mut clamped)?;
            if c.window.exists() {
                sysfs::write(&c.window, &s_window.to_string())?;
            }
            write_limit(&c.limit, s_uw)?;
        }
        let enabled = z.dir.join("enabled");
        if read_if_present(&enabled)? == Some(0) {
            sysfs::write(&enabled, "1")?;
            if sysfs::read_u64(&enabled)? == 0 {
                return Err(PowercapError::NotEnabled(enabled));
            }
        }
        out.extend(read_zone(&z.id, &z.dir)?);
    }
    Ok(InForce {
        watts: out.iter().map(|s| s.limit_uw as f64 / 1e6).sum(),
        zones: out,
        clamped,
    })
}

/// The zones a node's limit is split over: its package zones, else every zone with a
/// long-term limit (psys alone).
fn limited_zones(sysfs_root: &Path) -> Result<Vec<rapl::Zone>, PowercapError> {
    let all: Vec<_> = rapl::zones(sysfs_root)
        .into_iter()
        .filter(|z| long_term(&z.dir).is_some())
        .collect();
    let packages: Vec<_> = all
        .iter()
        .filter(|z| z.name.starts_with("package"))
        .cloned()
        .collect();
    let zones = if packages.is_empty() { all } else { packages };
    if zones.is_empty() {
        return Err(PowercapError::NoZones);
    }
    Ok(zones)
}

/// Lower a running job's node to a long-term limit of `watts` (split evenly over the
/// zones [`apply`] writes), keeping each zone's window, short-term limit and `enabled`
/// as the job's prolog set them; a zone already at or below its part is left alone, so
/// this never raises a limit. Returns the node's long-term limit read back, in watts.
/// The job's epilog restores the limits saved before the job, as after [`apply`].
pub fn lower(sysfs_root: &Path, watts: f64) -> Result<f64, PowercapError> {
    let zones = limited_zones(sysfs_root)?;
    let part_uw = micro("power limit (W)", watts / zones.len() as f64, 1e6)?;
    let mut held_uw = 0;
    for z in &zones {
        let long = long_term(&z.dir).ok_or(PowercapError::NoZones)?;
        let now_uw = sysfs::read_u64(&long.limit)?;
        // 0 reads as "no limit set": anything is lower.
        if now_uw == 0 || now_uw > part_uw {
            write_limit(&long.limit, part_uw)?;
        }
        held_uw += sysfs::read_u64(&long.limit)?;
    }
    Ok(held_uw as f64 / 1e6)
}

/// Write `want` to `file` when it holds something else.
fn put_back(file: &Path, want: u64) -> Result<(), SysfsError> {
    if sysfs::read_u64(file)? != want {
        sysfs::write(file, &want.to_string())?;
    }
    Ok(())
}

/// Put back every saved value, only where it changed: windows and limits first, then
/// whether the zone enforces them. Every value is attempted; the first error is returned.
pub fn restore(sysfs_root: &Path, saved: &[LimitSettings]) -> Result<(), SysfsError> {
    let mut first_err = None;
    for s in saved {
        let dir = sysfs_root.join("class/powercap").join(&s.zone);
        let file = |name: &str| dir.join(name);
        let values = [
            ("constraint_0_time_window_us", s.window_us),
            ("constraint_0_power_limit_uw", Some(s.limit_uw)),
            ("constraint_1_time_window_us", s.short_window_us),
            ("constraint_1_power_limit_uw", s.short_limit_uw),
            ("enabled", s.enabled.map(u64::from)),
        ];
        for (name, want) in values {
            if let Some(want) = want
                && let Err(e) = put_back(&file(name), want)
            {
                first_err.get_or_insert(e);
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::meter::rapl::tests::zone;
    use std::fs;

    /// Give zone `n` the stand-in's full set of limit files (as tests/cluster/sysfs.sh
    /// writes them): long-term and short-term limits, windows and maxima, and `enabled`.
    pub(crate) fn limits(root: &Path, n: u32, long_max_uw: u64, short_max_uw: u64) {
        let d = root.join(format!("class/powercap/intel-rapl:{n}"));
        for (f, v) in [
            ("enabled", "1".to_string()),
            ("constraint_0_name", "long_term".into()),
            ("constraint_0_power_limit_uw", "0".into()),
            ("constraint_0_time_window_us", "976562".into()),
            ("constraint_0_max_power_uw", long_max_uw.to_string()),
            ("constraint_1_name", "short_term".into()),
            ("constraint_1_power_limit_uw", "0".into()),
            ("constraint_1_time_window_us", "2440".into()),
            ("constraint_1_max_power_uw", short_max_uw.to_string()),
        ] {
            fs::write(d.join(f), format!("{v}\n")).unwrap();
        }
    }

    fn read(root: &Path, n: u32, f: &str) -> String {
        fs::read_to_string(root.join(format!("class/powercap/intel-rapl:{n}/{f}")))
            .unwrap()
            .trim()
            .to_string()
    }

    fn write(root: &Path, n: u32, f: &str, v: &str) {
        fs::write(
            root.join(format!("class/powercap/intel-rapl:{n}/{f}")),
            format!("{v}\n"),
        )
        .unwrap();
    }

    fn two_packages() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        for n in 0..2 {
            zone(t.path(), n, &format!("package-{n}"), 0, 1_000_000);
            limits(t.path(), n, 200_000_000, 300_000_000);
        }
        t
    }

    #[test]
    fn limits_split_evenly_and_all_four_values_and_enabled_restore_exactly() {
        let t = two_packages();
        let root = t.path();
        // What an admin left: zone 1 with its own limits, windows, and not enforcing.
        for (f, v) in [
            ("constraint_0_power_limit_uw", "95000000"),
            ("constraint_0_time_window_us", "28000000"),
            ("constraint_1_power_limit_uw", "120000000"),
            ("constraint_1_time_window_us", "2441"),
            ("enabled", "0"),
        ] {
            write(root, 1, f, v);
        }
        let saved = snapshot(root).unwrap();
        assert_eq!(
            saved[1],
            LimitSettings {
                zone: "intel-rapl:1".into(),
                limit_uw: 95_000_000,
                window_us: Some(28_000_000),
                short_limit_uw: Some(120_000_000),
                short_window_us: Some(2441),
                enabled: Some(false),
            }
        );
        let req = LimitRequest {
            watts: 150.0,
            window_s: 1.0,
            short_term: Some(ShortTerm {
                watts: 180.0,
                window_s: 0.01,
            }),
        };
        let held = apply(root, &req).unwrap();
        // 150 W over two packages: 75 W each; 180 W short-term: 90 W each.
        assert_eq!(held.watts, 150.0);
        assert!(held.clamped.is_empty());
        for n in 0..2 {
            assert_eq!(read(root, n, "constraint_0_power_limit_uw"), "75000000");
            assert_eq!(read(root, n, "constraint_0_time_window_us"), "1000000");
            assert_eq!(read(root, n, "constraint_1_power_limit_uw"), "90000000");
            assert_eq!(read(root, n, "constraint_1_time_window_us"), "10000");
            assert_eq!(read(root, n, "enabled"), "1");
        }
        restore(root, &saved).unwrap();
        assert_eq!(snapshot(root).unwrap(), saved);
        assert_eq!(read(root, 1, "enabled"), "0");
        assert_eq!(read(root, 0, "constraint_0_power_limit_uw"), "0");
        assert_eq!(read(root, 0, "constraint_1_time_window_us"), "2440");
    }

    #[test]
    fn lowering_writes_only_the_long_term_limits_and_never_raises_one() {
        let t = two_packages();
        let root = t.path();
        let req = LimitRequest {
            watts: 200.0,
            window_s: 1.0,
            short_term: Some(ShortTerm {
                watts: 240.0,
                window_s: 0.01,
            }),
        };
        apply(root, &req).unwrap();
        let saved = snapshot(root).unwrap();
        // 200 W over two packages is 100 W each; 130 W is 65 W each.
        assert_eq!(lower(root, 130.0).unwrap(), 130.0);
        for n in 0..2 {
            assert_eq!(read(root, n, "constraint_0_power_limit_uw"), "65000000");
            assert_eq!(read(root, n, "constraint_1_power_limit_uw"), "120000000");
            assert_eq!(read(root, n, "constraint_0_time_window_us"), "1000000");
        }
        // Asked for more than it holds: nothing is written.
        assert_eq!(lower(root, 180.0).unwrap(), 130.0);
        assert_eq!(read(root, 0, "constraint_0_power_limit_uw"), "65000000");
        // One zone lower already (an admin's): only the other comes down.
        write(root, 1, "constraint_0_power_limit_uw", "40000000");
        assert_eq!(lower(root, 110.0).unwrap(), 95.0);
        assert_eq!(read(root, 0, "constraint_0_power_limit_uw"), "55000000");
        assert_eq!(read(root, 1, "constraint_0_power_limit_uw"), "40000000");
        assert!(lower(root, f64::NAN).is_err());
        // A restore puts back what was saved before the lowering, as after apply.
        restore(root, &saved).unwrap();
        assert_eq!(read(root, 0, "constraint_0_power_limit_uw"), "100000000");
        let bare = tempfile::tempdir().unwrap();
        assert!(matches!(
            lower(bare.path(), 50.0),
            Err(PowercapError::NoZones)
        ));
    }

    #[test]
    fn without_a_short_term_request_the_short_term_limit_is_left_as_found() {
        let t = two_packages();
        write(t.path(), 0, "constraint_1_power_limit_uw", "111000000");
        let req = LimitRequest {
            watts: 100.0,
            window_s: 0.5,
            short_term: None,
        };
        apply(t.path(), &req).unwrap();
        assert_eq!(
            read(t.path(), 0, "constraint_1_power_limit_uw"),
            "111000000"
        );
        assert_eq!(read(t.path(), 0, "constraint_0_time_window_us"), "500000");
    }

    #[test]
    fn a_limit_above_the_zones_maximum_is_clamped_and_said() {
        let t = two_packages();
        let req = LimitRequest {
            watts: 500.0,
            window_s: 1.0,
            short_term: Some(ShortTerm {
                watts: 1000.0,
                window_s: 0.01,
            }),
        };
        let held = apply(t.path(), &req).unwrap();
        // 250 W a package against a 200 W maximum; 500 W short-term against 300 W.
        assert_eq!(
            read(t.path(), 0, "constraint_0_power_limit_uw"),
            "200000000"
        );
        assert_eq!(
            read(t.path(), 1, "constraint_1_power_limit_uw"),
            "300000000"
        );
        assert_eq!(held.watts, 400.0);
        assert_eq!(held.clamped.len(), 4, "{:?}", held.clamped);
        assert!(
            held.clamped[0].contains("250.0 W above the zone's maximum, set to 200.0 W"),
            "{}",
            held.clamped[0]
        );
    }

    #[test]
    fn psys_alone_takes_the_limit_and_is_left_out_beside_packages() {
        let t = tempfile::tempdir().unwrap();
        zone(t.path(), 0, "package-0", 0, 1_000_000);
        limits(t.path(), 0, 0, 0);
        zone(t.path(), 1, "psys", 0, 1_000_000);
        limits(t.path(), 1, 0, 0);
        let req = LimitRequest {
            watts: 80.0,
            window_s: 1.0,
            short_term: None,
        };
        apply(t.path(), &req).unwrap();
        assert_eq!(read(t.path(), 0, "constraint_0_power_limit_uw"), "80000000");
        assert_eq!(read(t.path(), 1, "constraint_0_power_limit_uw"), "0");
        let u = tempfile::tempdir().unwrap();
        zone(u.path(), 1, "psys", 0, 1_000_000);
        limits(u.path(), 1, 0, 0);
        apply(u.path(), &req).unwrap();
        assert_eq!(read(u.path(), 1, "constraint_0_power_limit_uw"), "80000000");
    }

    #[test]
    fn records_saved_before_windows_were_kept_still_load_and_restore_the_limit() {
        let old: LimitSettings =
            serde_json::from_str(r#"{"zone":"intel-rapl:0","limit_uw":95000000}"#).unwrap();
        assert_eq!((old.window_us, old.enabled), (None, None));
        let t = two_packages();
        write(t.path(), 0, "constraint_0_time_window_us", "5000");
        restore(t.path(), &[old]).unwrap();
        assert_eq!(read(t.path(), 0, "constraint_0_power_limit_uw"), "95000000");
        assert_eq!(read(t.path(), 0, "constraint_0_time_window_us"), "5000");
    }

    #[test]
    fn nonsense_requests_and_nodes_without_rapl_are_errors() {
        let t = two_packages();
        for watts in [0.0, -5.0, f64::NAN, f64::INFINITY] {
            let req = LimitRequest {
                watts,
                window_s: 1.0,
                short_term: None,
            };
            assert!(
                matches!(apply(t.path(), &req), Err(PowercapError::BadRequest { .. })),
                "{watts}"
            );
        }
        assert_eq!(read(t.path(), 0, "constraint_0_power_limit_uw"), "0");
        let empty = tempfile::tempdir().unwrap();
        let req = LimitRequest {
            watts: 100.0,
            window_s: 1.0,
            short_term: None,
        };
        assert!(matches!(
            apply(empty.path(), &req),
            Err(PowercapError::NoZones)
        ));
    }

    /// Make zone `n`'s long-term limit a file no one may write, root included: a link to a
    /// read-only sysctl holding a number (65536), as a locked limit behaves.
    pub(crate) fn lock_limit(root: &Path, n: u32) {
        let file = root.join(format!(
            "class/powercap/intel-rapl:{n}/constraint_0_power_limit_uw"
        ));
        fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/proc/sys/kernel/ngroups_max", &file).unwrap();
    }

    #[test]
    fn a_limit_that_cannot_be_written_is_an_error_and_restore_leaves_it() {
        let t = two_packages();
        lock_limit(t.path(), 1);
        let saved = snapshot(t.path()).unwrap();
        assert_eq!(saved[1].limit_uw, 65_536);
        let req = LimitRequest {
            watts: 100.0,
            window_s: 1.0,
            short_term: None,
        };
        let e = apply(t.path(), &req).unwrap_err();
        assert!(
            e.to_string()
                .contains("constraint_0_power_limit_uw: write failed"),
            "{e}"
        );
        // Zone 0 was written before zone 1 failed; the snapshot puts it back.
        assert_eq!(read(t.path(), 0, "constraint_0_power_limit_uw"), "50000000");
        restore(t.path(), &saved).unwrap();
        assert_eq!(snapshot(t.path()).unwrap(), saved);
    }

    /// Where [`an_ordinary_user_cannot_raise_a_limit`] runs its child as an ordinary user.
    const CHILD_TREE: &str = "GREENUP_TEST_POWERCAP_TREE";

    /// An ordinary user's try, run by [`an_ordinary_user_cannot_raise_a_limit`]: greenup's
    /// own code raises no limit for them.
    #[test]
    #[ignore = "run by an_ordinary_user_cannot_raise_a_limit as an ordinary user"]
    fn ordinary_user_child() {
        let Some(root) = std::env::var_os(CHILD_TREE) else {
            return;
        };
        // SAFETY: geteuid has no preconditions and cannot fail.
        assert_ne!(unsafe { libc::geteuid() }, 0, "the child must not be root");
        let req = LimitRequest {
            watts: 400.0,
            window_s: 1.0,
            short_term: None,
        };
        let e = apply(Path::new(&root), &req).unwrap_err();
        assert!(e.to_string().contains("Permission denied"), "{e}");
        assert!(
            restore(
                Path::new(&root),
                &[LimitSettings {
                    zone: "intel-rapl:0".into(),
                    limit_uw: 400_000_000,
                    window_us: None,
                    short_limit_uw: None,
                    short_window_us: None,
                    enabled: None,
                }]
            )
            .is_err()
        );
    }

    #[test]
    fn an_ordinary_user_cannot_raise_a_limit() {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        // The limit files as the kernel (and the bench's stand-in) keeps them: root's,
        // mode 0644, in directories anyone may enter.
        let t = two_packages();
        let root = t.path();
        write(root, 0, "constraint_0_power_limit_uw", "50000000");
        for d in [
            root.to_path_buf(),
            root.join("class"),
            root.join("class/powercap"),
        ] {
            fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        }
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            let run = |exe: &Path| {
                std::process::Command::new(exe)
                    .args([
                        "--exact",
                        "dvfs::powercap::tests::ordinary_user_child",
                        "--ignored",
                        "--nocapture",
                    ])
                    .env(CHILD_TREE, root)
                    .uid(65534)
                    .gid(65534)
                    .output()
            };
            let exe = std::env::current_exe().unwrap();
            // A build directory the ordinary user cannot enter: run a copy from here.
            let out = run(&exe).unwrap_or_else(|_| {
                let copy = root.join("child");
                fs::copy(&exe, &copy).unwrap();
                fs::set_permissions(&copy, fs::Permissions::from_mode(0o755)).unwrap();
                run(&copy).unwrap()
            });
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && text.contains("1 passed"), "{text}");
        } else {
            // Not root: the files are this user's, so make them read-only as root's are to
            // everyone else.
            for n in 0..2 {
                for f in [
                    "constraint_0_power_limit_uw",
                    "constraint_0_time_window_us",
                    "enabled",
                ] {
                    let p = root.join(format!("class/powercap/intel-rapl:{n}/{f}"));
                    fs::set_permissions(&p, fs::Permissions::from_mode(0o444)).unwrap();
                }
            }
            let req = LimitRequest {
                watts: 400.0,
                window_s: 1.0,
                short_term: None,
            };
            assert!(apply(root, &req).is_err());
        }
        assert_eq!(read(root, 0, "constraint_0_power_limit_uw"), "50000000");
        assert_eq!(read(root, 1, "constraint_0_power_limit_uw"), "0");
    }
}
