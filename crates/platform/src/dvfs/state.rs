//! What a node saved at job start, kept in the job's directory ([`super::run_dir`]) so
//! that the job's end (or a later retry) can restore exactly those settings. `run_dir` is
//! on tmpfs (/run), so after a reboot nothing stale remains and the boot defaults hold.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cpufreq::{Applied, PolicySettings};
use super::powercap::{LimitSettings, PowerHeld};
use super::run_dir::JobDir;
use crate::meter::Reading;

/// Everything one node (or one step's cores) must restore and report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Slurm job id.
    pub job_id: u32,
    /// Slurm node name.
    pub node: String,
    /// The cpufreq settings found before the job.
    pub cpufreq: Vec<PolicySettings>,
    /// The power limits found before the job, saved only when the job sets one.
    #[serde(default)]
    pub powercap: Vec<LimitSettings>,
    /// The energy counters at job start.
    pub energy_start: Reading,
    /// The frequency greenup was asked to set, in kHz.
    pub requested_khz: Option<u64>,
    /// What was applied; None when nothing was.
    pub applied: Option<Applied>,
    /// `applied`, or why not (e.g. `not applied: shared node`).
    pub note: String,
    /// Whether the power limit the decision asked for is held; None: none was asked
    /// (and in records saved before limits were set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<PowerHeld>,
}

/// The file holding `key`'s record for `job_id` (key is the node name, or node.stepN).
pub fn path(run_dir: &Path, job_id: u32, key: &str) -> PathBuf {
    JobDir::new(run_dir, job_id).record(key)
}

/// Save a record atomically; the job directory is created root-only.
pub fn save(run_dir: &Path, key: &str, rec: &NodeRecord) -> std::io::Result<()> {
    let dir = JobDir::new(run_dir, rec.job_id);
    dir.create()?;
    let json = serde_json::to_vec_pretty(rec).map_err(std::io::Error::other)?;
    greenup_core::fs::write_atomic_volatile(&dir.record(key), &json, 0o666)
}

/// Load `key`'s record for `job_id`; Ok(None) when there is none.
pub fn load(run_dir: &Path, job_id: u32, key: &str) -> std::io::Result<Option<NodeRecord>> {
    load_json(&path(run_dir, job_id, key))
}

/// Read one of a job's JSON files; Ok(None) when it does not exist.
pub fn load_json<T: serde::de::DeserializeOwned>(file: &Path) -> std::io::Result<Option<T>> {
    match std::fs::read(file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(std::io::Error::other),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Remove `key`'s record, and the job directory once it is empty.
pub fn remove(run_dir: &Path, job_id: u32, key: &str) -> std::io::Result<()> {
    let dir = JobDir::new(run_dir, job_id);
    greenup_core::fs::remove_if_present(&dir.record(key))?;
    dir.remove_if_empty();
    Ok(())
}

/// Take an exclusive `flock` on `file` (a run-directory entry), waiting at most `patience`
/// (None: as long as it takes). Ok(false) when the patience ran out; each caller decides
/// what a prolog or epilog does then, since neither may be held past Slurm's timeout.
pub fn lock_within(
    file: &std::fs::File,
    patience: Option<std::time::Duration>,
) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let give_up = patience.map(|p| std::time::Instant::now() + p);
    let mode = if give_up.is_some() {
        libc::LOCK_EX | libc::LOCK_NB
    } else {
        libc::LOCK_EX
    };
    loop {
        // SAFETY: flock on a descriptor the caller keeps open; the lock ends when it closes.
        if unsafe { libc::flock(file.as_raw_fd(), mode) } == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match (e.kind(), give_up) {
            (std::io::ErrorKind::Interrupted, _) => {}
            (std::io::ErrorKind::WouldBlock, Some(t)) if std::time::Instant::now() < t => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            (std::io::ErrorKind::WouldBlock, Some(_)) => return Ok(false),
            _ => return Err(e),
        }
    }
}
