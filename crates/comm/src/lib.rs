//! The contract between greenup's in-job MPI runtime (`libgreenup_mpi.so`, preloaded into
//! a job's tasks) and the node that runs it: the settings of communication-phase DVFS
//! (paper 002) and of the in-job guard ([`guard`]), the environment that carries them
//! into the tasks, and the per-rank measurements the runtime leaves behind for the epilog.
//!
//! The runtime writes one file per rank, `rank-R.json`, into the directory named by
//! [`env::DIR`]. That directory belongs to the job's user, so the epilog (root) reads
//! it as untrusted input: no links, bounded sizes and counts, and times that must fit
//! inside the job's wall time.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The units a rank's file and the runtime's settings carry, greenup-core's own, named
/// here too for the runtime, which links this crate alone.
pub use greenup_core::quantity::{Ghz, Joules, Seconds};

pub mod steps;

pub use steps::StepTimes;

/// Names of the environment variables the plugin sets in a task for the runtime.
pub mod env {
    /// Directory where each rank writes `rank-R.json`. Unset: the runtime measures nothing.
    pub const DIR: &str = "GREENUP_MPI_DIR";
    /// The [`super::CommDvfs`] settings, as one line of JSON. Unset: no frequency changes.
    pub const COMM_DVFS: &str = "GREENUP_COMM_DVFS";
    /// The sysfs root the runtime writes cpufreq controls under (tests set a stand-in).
    pub const SYSFS_ROOT: &str = "GREENUP_SYSFS_ROOT";
    /// The sysfs root when [`SYSFS_ROOT`] is unset.
    pub const DEFAULT_SYSFS_ROOT: &str = "/sys";
    /// The in-job guard's settings ([`super::Guard`]), as one line of JSON. Unset: no guard.
    pub const GUARD: &str = "GREENUP_GUARD";
}

pub mod guard;
pub use guard::{
    Guard, GuardOff, GuardRecord, GuardTerms, NodeGuard, job_line as guard_line, leads,
};

/// The cpufreq files (in `devices/system/cpu/cpufreq/policyN/`) the runtime writes: the
/// set speed when the policy's governor is `userspace`, otherwise the frequency ceiling.
/// greenup's prolog lends only the first, for the job's own CPUs (`dvfs::lend`): a
/// ceiling the user could write would lift the decision, so where there is no
/// userspace governor the runtime measures and lowers nothing.
pub const CONTROL_FILES: [&str; 2] = ["scaling_setspeed", "scaling_max_freq"];

/// How a rank waits in a long blocking call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitMode {
    /// The MPI library's own wait: usually a busy poll.
    Poll,
    /// Test, then sleep with a growing back-off: the core idles (paper 002's interrupt mode).
    #[default]
    Block,
}

/// Communication-phase DVFS, as a policy asks for it (`comm_dvfs:` in a policy file).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CommDvfs {
    /// Whether the runtime lowers the frequency at all; it measures either way.
    pub enabled: bool,
    /// A contiguous transfer of at least this many bytes is lowered at once (paper 002: 16 KiB).
    pub threshold_bytes: u64,
    /// The same for strided or non-contiguous transfers (paper 002: 64 KiB).
    pub strided_threshold_bytes: u64,
    /// Any blocking call that has lasted this long is lowered (COUNTDOWN: 500 µs).
    pub timeout_us: u64,
    /// The frequency to lower to, in GHz; unset means the node type's lowest gear.
    pub low_ghz: Option<Ghz>,
    /// How a long blocking call waits.
    pub wait: WaitMode,
}

impl Default for CommDvfs {
    fn default() -> CommDvfs {
        CommDvfs {
            enabled: true,
            threshold_bytes: 16 * 1024,
            strided_threshold_bytes: 64 * 1024,
            timeout_us: 500,
            low_ghz: None,
            wait: WaitMode::Block,
        }
    }
}

impl CommDvfs {
    /// Whether a transfer of `bytes` (strided or not) is large enough to lower at once.
    pub fn lowers_at_once(&self, bytes: u64, strided: bool) -> bool {
        let threshold = if strided {
            self.strided_threshold_bytes
        } else {
            self.threshold_bytes
        };
        self.enabled && bytes >= threshold
    }

    /// Why these settings cannot be used, if they cannot.
    pub fn invalid(&self) -> Option<String> {
        if let Some(Ghz(f)) = self.low_ghz
            && !(f.is_finite() && f > 0.0)
        {
            return Some(format!("low_ghz {f} is not a positive frequency"));
        }
        if self.timeout_us > 60_000_000 {
            return Some(format!(
                "timeout_us {} is over a minute; a value from 0 to 60000000 is valid",
                self.timeout_us
            ));
        }
        None
    }
}

/// What one rank measured, written by the runtime at MPI_Finalize (or at exit).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankStats {
    /// The rank in MPI_COMM_WORLD.
    pub rank: u32,
    /// Seconds from MPI_Init to the write.
    pub wall_s: Seconds,
    /// Seconds inside intercepted MPI calls.
    pub mpi_s: Seconds,
    /// Bytes the rank's intercepted calls moved (sent, received or accessed remotely).
    pub bytes: u64,
    /// Intercepted calls.
    pub calls: u64,
    /// Of those, the synchronising ones (blocking point-to-point, waits, collectives,
    /// one-sided synchronisations): the progress the in-job guard counts.
    #[serde(default)]
    pub sync_calls: u64,
    /// Seconds the rank's core spent at the lowered frequency.
    pub low_s: Seconds,
    /// Times the core was lowered (each is also restored).
    pub transitions: u64,
    /// The runtime's own estimate of the joules that lowering saved, when it has a power model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_j: Option<Joules>,
    /// False when written at an abnormal exit rather than at MPI_Finalize.
    pub complete: bool,
    /// Times the runtime failed at something (a control it could not write, a file it
    /// could not read) and let the MPI call go ahead unchanged.
    #[serde(default)]
    pub errors: u64,
    /// What the in-job guard did on this rank; absent when it was not asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<GuardRecord>,
    /// The rank's compute seconds per window of wall time (what the step model learns
    /// from); absent from runtimes that do not count them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<StepTimes>,
}

/// One node's ranks added up: what the epilog sends with the node's outcome.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NodeComm {
    /// Ranks that left a file.
    pub ranks: u32,
    /// Ranks whose file was written at an abnormal exit.
    pub incomplete: u32,
    /// Mean seconds per rank outside MPI (the models' T_cp).
    pub compute_s: Seconds,
    /// Mean seconds per rank inside MPI (the models' T_cm).
    pub comm_s: Seconds,
    /// Bytes moved by all ranks.
    pub bytes: u64,
    /// Calls made by all ranks.
    pub calls: u64,
    /// Synchronising calls made by all ranks (0 from runtimes that did not count them).
    #[serde(default)]
    pub sync_calls: u64,
    /// Mean seconds per rank at the lowered frequency.
    pub low_s: Seconds,
    /// Lowerings by all ranks.
    pub transitions: u64,
    /// The runtime's failures by all ranks (each let its MPI call go ahead unchanged).
    #[serde(default)]
    pub errors: u64,
    /// The ranks' summed estimate of joules saved, when every rank gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_j: Option<Joules>,
    /// The node's CPUs under cpufreq, as the epilog counted them; absent from older nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// What the in-job guard did on this node, or why it was off; absent when the job's
    /// policy promised no `max_slowdown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<Box<NodeGuard>>,
    /// Compute seconds per window of wall time, window by window the most of any of the
    /// node's ranks (its slowest rank leads its steps); absent where no rank counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<StepTimes>,
}

impl NodeComm {
    /// Share of the ranks' time spent inside MPI, in percent (EAR's MPI%).
    pub fn mpi_percent(&self) -> f64 {
        let (compute, comm) = (self.compute_s.0, self.comm_s.0);
        let total = compute + comm;
        if total > 0.0 {
            100.0 * comm / total
        } else {
            0.0
        }
    }
}

/// A rank file the epilog could not take: which file (or directory) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct RankFileError {
    /// The rank file or the directory that holds them.
    pub path: PathBuf,
    /// What was wrong with it.
    pub why: String,
}

impl RankFileError {
    fn new(path: &Path, why: impl std::fmt::Display) -> Self {
        RankFileError {
            path: path.to_path_buf(),
            why: why.to_string(),
        }
    }
}

impl std::fmt::Display for RankFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.why)
    }
}

impl std::error::Error for RankFileError {}

/// The most rank files one node's directory may hold; more is refused, not read.
pub const MAX_RANK_FILES: usize = 4096;
/// The largest rank file read.
const MAX_RANK_FILE_BYTES: u64 = 16 * 1024;

/// The file rank `rank` writes in `dir`.
pub fn rank_file(dir: &Path, rank: u32) -> PathBuf {
    dir.join(format!("rank-{rank}.json"))
}

/// Write one rank's measurements atomically (temporary file, then rename).
pub fn write_rank(dir: &Path, stats: &RankStats) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(stats).map_err(std::io::Error::other)?;
    greenup_core::fs::write_atomic_volatile(&rank_file(dir, stats.rank), &bytes, 0o600)
}

/// Add up the rank files in `dir`, which the job's user could write. `wall_limit_s` is
/// the node's measured wall time: a rank claiming more time than that (plus a second) is
/// refused, so a job cannot teach a shared profile times it did not run. `Ok(None)`: no
/// rank left a file.
pub fn read_node(dir: &Path, wall_limit_s: f64) -> Result<Option<NodeComm>, RankFileError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(RankFileError::new(dir, e)),
    };
    let mut ranks = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| RankFileError::new(dir, e))?;
        let name = entry.file_name();
        let Some(rank) = name
            .to_str()
            .and_then(|n| n.strip_prefix("rank-"))
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if ranks.len() >= MAX_RANK_FILES {
            return Err(RankFileError::new(
                dir,
                format!("more than {MAX_RANK_FILES} rank files"),
            ));
        }
        let stats = read_rank(&entry.path())?;
        if stats.rank != rank {
            return Err(RankFileError::new(
                &entry.path(),
                format!("says rank {}, named for rank {rank}", stats.rank),
            ));
        }
        let limit = wall_limit_s + 1.0;
        let sane = |v: f64| v.is_finite() && (0.0..=limit).contains(&v);
        if !(sane(stats.wall_s.0)
            && sane(stats.mpi_s.0)
            && sane(stats.low_s.0)
            && stats.mpi_s <= stats.wall_s
            && stats
                .saved_j
                .is_none_or(|Joules(j)| j.is_finite() && j >= 0.0)
            && stats.guard.as_ref().is_none_or(|g| g.sane(limit))
            && stats.steps.as_ref().is_none_or(|s| s.fits(stats.wall_s.0)))
        {
            return Err(RankFileError::new(
                &entry.path(),
                format!(
                    "times outside 0..{limit:.1} s (the node's wall time), more MPI time than wall time, or compute windows no greenup runtime writes"
                ),
            ));
        }
        ranks.push(stats);
    }
    if ranks.is_empty() {
        return Ok(None);
    }
    let n = ranks.len() as f64;
    let mut sum = NodeComm {
        ranks: ranks.len() as u32,
        saved_j: Some(Joules(0.0)),
        ..NodeComm::default()
    };
    for r in &ranks {
        sum.incomplete += u32::from(!r.complete);
        sum.compute_s += (r.wall_s - r.mpi_s) / n;
        sum.comm_s += r.mpi_s / n;
        sum.low_s += r.low_s / n;
        sum.bytes = sum.bytes.saturating_add(r.bytes);
        sum.calls = sum.calls.saturating_add(r.calls);
        sum.sync_calls = sum.sync_calls.saturating_add(r.sync_calls);
        sum.transitions = sum.transitions.saturating_add(r.transitions);
        sum.errors = sum.errors.saturating_add(r.errors);
        sum.saved_j = sum.saved_j.zip(r.saved_j).map(|(a, b)| a + b);
        if let Some(s) = &r.steps {
            match &mut sum.steps {
                Some(all) => all.max_with(s),
                None => sum.steps = Some(s.clone()),
            }
        }
    }
    sum.guard = NodeGuard::of(&ranks).map(Box::new);
    Ok(Some(sum))
}

fn read_rank(path: &Path) -> Result<RankStats, RankFileError> {
    let file =
        greenup_core::fs::open_no_link(path, false).map_err(|e| RankFileError::new(path, e))?;
    let mut text = String::new();
    file.take(MAX_RANK_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| RankFileError::new(path, e))?;
    if text.len() as u64 > MAX_RANK_FILE_BYTES {
        return Err(RankFileError::new(
            path,
            format!("larger than {MAX_RANK_FILE_BYTES} bytes"),
        ));
    }
    serde_json::from_str(&text).map_err(|e| RankFileError::new(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(rank: u32, wall_s: f64, mpi_s: f64) -> RankStats {
        RankStats {
            rank,
            wall_s: Seconds(wall_s),
            mpi_s: Seconds(mpi_s),
            bytes: 1000,
            calls: 10,
            low_s: Seconds(mpi_s / 2.0),
            transitions: 3,
            saved_j: Some(Joules(1.5)),
            complete: true,
            errors: 0,
            sync_calls: 4,
            guard: None,
            steps: None,
        }
    }

    #[test]
    fn a_node_is_the_mean_of_its_ranks() {
        let dir = tempfile::tempdir().unwrap();
        write_rank(dir.path(), &rank(0, 10.0, 2.0)).unwrap();
        write_rank(dir.path(), &rank(1, 10.0, 4.0)).unwrap();
        let node = read_node(dir.path(), 10.0).unwrap().unwrap();
        assert_eq!(node.ranks, 2);
        assert!((node.compute_s.0 - 7.0).abs() < 1e-12);
        assert!((node.comm_s.0 - 3.0).abs() < 1e-12);
        assert!((node.mpi_percent() - 30.0).abs() < 1e-9);
        assert_eq!((node.bytes, node.calls, node.transitions), (2000, 20, 6));
        assert_eq!(node.saved_j, Some(Joules(3.0)));
    }

    #[test]
    fn claims_beyond_the_wall_time_and_links_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_rank(dir.path(), &rank(0, 100.0, 2.0)).unwrap();
        assert!(
            read_node(dir.path(), 10.0)
                .unwrap_err()
                .why
                .contains("wall time")
        );
        std::fs::remove_file(rank_file(dir.path(), 0)).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", rank_file(dir.path(), 0)).unwrap();
        assert!(read_node(dir.path(), 10.0).is_err());
    }

    #[test]
    fn errors_add_up_and_a_file_without_them_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        write_rank(
            dir.path(),
            &RankStats {
                errors: 2,
                ..rank(0, 10.0, 2.0)
            },
        )
        .unwrap();
        std::fs::write(
            rank_file(dir.path(), 1),
            r#"{"rank":1,"wall_s":5.0,"mpi_s":1.0,"bytes":8,"calls":1,"low_s":0.0,"transitions":0,"complete":true}"#,
        )
        .unwrap();
        let node = read_node(dir.path(), 10.0).unwrap().unwrap();
        assert_eq!((node.ranks, node.errors), (2, 2));
    }

    #[test]
    fn a_nodes_steps_are_its_slowest_ranks_window_by_window() {
        let dir = tempfile::tempdir().unwrap();
        let steps = |window_s: f64, compute_s: Vec<f64>| {
            Some(StepTimes {
                window_s: Seconds(window_s),
                compute_s,
            })
        };
        write_rank(
            dir.path(),
            &RankStats {
                steps: steps(0.01, vec![0.01, 0.002, 0.0, 0.007]),
                ..rank(0, 10.0, 2.0)
            },
        )
        .unwrap();
        write_rank(
            dir.path(),
            &RankStats {
                steps: steps(0.02, vec![0.005, 0.02]),
                ..rank(1, 10.0, 2.0)
            },
        )
        .unwrap();
        // Rank 0 at 20 ms windows: 12 and 7 ms; against rank 1's 5 and 20 ms.
        let node = read_node(dir.path(), 10.0).unwrap().unwrap();
        let s = node.steps.unwrap();
        assert_eq!(s.window_s, Seconds(0.02));
        assert!((s.compute_s[0] - 0.012).abs() < 1e-12 && (s.compute_s[1] - 0.02).abs() < 1e-12);
        // A window with more compute than its length is no runtime's.
        write_rank(
            dir.path(),
            &RankStats {
                steps: steps(0.01, vec![0.5]),
                ..rank(2, 10.0, 2.0)
            },
        )
        .unwrap();
        assert!(
            read_node(dir.path(), 10.0)
                .unwrap_err()
                .why
                .contains("windows")
        );
    }

    #[test]
    fn no_directory_is_no_measurement() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_node(&dir.path().join("none"), 1.0).unwrap(), None);
    }

    #[test]
    fn thresholds_follow_the_transfer_kind() {
        let c = CommDvfs::default();
        assert!(!c.lowers_at_once(16 * 1024 - 1, false));
        assert!(c.lowers_at_once(16 * 1024, false));
        assert!(!c.lowers_at_once(32 * 1024, true));
        let off = CommDvfs {
            enabled: false,
            ..c
        };
        assert!(!off.lowers_at_once(1 << 30, false));
    }

    #[test]
    fn a_ranks_times_and_the_low_gear_cross_files_as_bare_numbers() {
        let r = rank(3, 12.5, 2.5);
        let line = r#"{"rank":3,"wall_s":12.5,"mpi_s":2.5,"bytes":1000,"calls":10,"sync_calls":4,"low_s":1.25,"transitions":3,"saved_j":1.5,"complete":true,"errors":0}"#;
        assert_eq!(serde_json::to_string(&r).unwrap(), line);
        assert_eq!(serde_json::from_str::<RankStats>(line).unwrap(), r);
        let unsaved = RankStats {
            saved_j: None,
            ..rank(0, 0.0, 0.0)
        };
        let line = r#"{"rank":0,"wall_s":0.0,"mpi_s":0.0,"bytes":1000,"calls":10,"sync_calls":4,"low_s":0.0,"transitions":3,"complete":true,"errors":0}"#;
        assert_eq!(serde_json::to_string(&unsaved).unwrap(), line);
        assert_eq!(serde_json::from_str::<RankStats>(line).unwrap(), unsaved);

        let lowest = CommDvfs::default();
        let line = r#"{"enabled":true,"threshold_bytes":16384,"strided_threshold_bytes":65536,"timeout_us":500,"low_ghz":null,"wait":"block"}"#;
        assert_eq!(serde_json::to_string(&lowest).unwrap(), line);
        assert_eq!(serde_json::from_str::<CommDvfs>(line).unwrap(), lowest);
        let low: CommDvfs = serde_json::from_str(r#"{"low_ghz":1.4}"#).unwrap();
        let line = r#"{"enabled":true,"threshold_bytes":16384,"strided_threshold_bytes":65536,"timeout_us":500,"low_ghz":1.4,"wait":"block"}"#;
        assert_eq!(serde_json::to_string(&low).unwrap(), line);
        assert_eq!(serde_json::from_str::<CommDvfs>(line).unwrap(), low);
        assert_eq!(
            low.invalid(),
            None,
            "{line} is a valid setting, read as its own bare number"
        );
        assert_eq!(
            serde_json::from_str::<CommDvfs>(r#"{"low_ghz":-0.5}"#)
                .unwrap()
                .invalid()
                .as_deref(),
            Some("low_ghz -0.5 is not a positive frequency")
        );
    }

    // The epilog sends a node's sums to greenupd, which stores them as JSON in each
    // job's record: the string must not change when the fields change type.
    #[test]
    fn a_nodes_sums_and_its_guard_cross_the_wire_as_bare_numbers() {
        let node = NodeComm {
            ranks: 2,
            incomplete: 1,
            compute_s: Seconds(7.25),
            comm_s: Seconds(2.75),
            bytes: 2000,
            calls: 20,
            sync_calls: 8,
            low_s: Seconds(1.375),
            transitions: 6,
            errors: 1,
            saved_j: Some(Joules(3.5)),
            cpus: Some(64),
            guard: Some(Box::new(NodeGuard {
                armed: 2,
                acted: 1,
                first_s: Some(Seconds(3.5)),
                from_khz: Some(2_000_000),
                to_khz: Some(3_000_000),
                raised_s: Seconds(6.5),
                off: None,
            })),
            steps: Some(StepTimes {
                window_s: Seconds(0.02),
                compute_s: vec![0.012, 0.02],
            }),
        };
        let line = r#"{"ranks":2,"incomplete":1,"compute_s":7.25,"comm_s":2.75,"bytes":2000,"calls":20,"sync_calls":8,"low_s":1.375,"transitions":6,"errors":1,"saved_j":3.5,"cpus":64,"guard":{"armed":2,"acted":1,"first_s":3.5,"from_khz":2000000,"to_khz":3000000,"raised_s":6.5},"steps":{"window_s":0.02,"compute_s":[0.012,0.02]}}"#;
        assert_eq!(serde_json::to_string(&node).unwrap(), line);
        assert_eq!(serde_json::from_str::<NodeComm>(line).unwrap(), node);

        let unsaved = NodeComm {
            ranks: 1,
            compute_s: Seconds(9.0),
            comm_s: Seconds(1.0),
            low_s: Seconds(0.0),
            saved_j: None,
            ..NodeComm::default()
        };
        let line = r#"{"ranks":1,"incomplete":0,"compute_s":9.0,"comm_s":1.0,"bytes":0,"calls":0,"sync_calls":0,"low_s":0.0,"transitions":0,"errors":0}"#;
        assert_eq!(serde_json::to_string(&unsaved).unwrap(), line);
        assert_eq!(serde_json::from_str::<NodeComm>(line).unwrap(), unsaved);

        let raised = RankStats {
            guard: Some(GuardRecord {
                armed: true,
                off: None,
                acted_s: Some(Seconds(3.5)),
                from_khz: Some(2_000_000),
                to_khz: Some(3_000_000),
                raised_s: Seconds(8.25),
            }),
            ..rank(1, 10.0, 2.0)
        };
        let line = r#"{"rank":1,"wall_s":10.0,"mpi_s":2.0,"bytes":1000,"calls":10,"sync_calls":4,"low_s":1.0,"transitions":3,"saved_j":1.5,"complete":true,"errors":0,"guard":{"armed":true,"acted_s":3.5,"from_khz":2000000,"to_khz":3000000,"raised_s":8.25}}"#;
        assert_eq!(serde_json::to_string(&raised).unwrap(), line);
        assert_eq!(serde_json::from_str::<RankStats>(line).unwrap(), raised);
    }
}
