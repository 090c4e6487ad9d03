//! Holding a job's GPUs: save each GPU's power limit before greenup changes anything,
//! set what the decision asked (power limit, locked SM clocks), and at the end put back
//! exactly what was saved. The record is a JSON file written through a temporary file and
//! a rename, so a crash at any point leaves either no record (nothing was changed yet) or
//! the whole saved state, which a later prolog or epilog restores.
//!
//! Locked clocks cannot be read back through NVML. The clocks "before" are therefore the
//! lock greenup itself last set on that GPU outside any job (`greenup gpu set`, kept in
//! the node's own record), or none, in which case the end unlocks.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::NvmlError;
use super::nvml::{Gpu, Nvml};
use super::reading::GpuReading;
use crate::dvfs::run_dir::JobDir;

/// What greenup is asked to set on each of the job's GPUs; None leaves it alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Power limit, milliwatts.
    pub power_limit_mw: Option<u32>,
    /// Locked SM clock range (min, max), MHz.
    pub lock_mhz: Option<(u32, u32)>,
}

/// What became of one control on one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "detail", rename_all = "snake_case")]
pub enum Control {
    /// Nothing was asked.
    NotAsked,
    /// Set as asked, and to be restored at the end.
    Held,
    /// Not set, and why (e.g. NVML_ERROR_NO_PERMISSION): nothing to restore.
    NotHeld(String),
}

impl Control {
    /// Whether greenup changed this control and must put it back.
    pub fn is_held(&self) -> bool {
        matches!(self, Control::Held)
    }
}

/// One GPU's saved state and what greenup did to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedGpu {
    /// `/dev/nvidia{minor}`, as Slurm named it.
    pub minor: u32,
    /// The GPU's UUID; the end finds the GPU by it, whatever NVML's order is then.
    pub uuid: String,
    /// The power limit found before, milliwatts.
    pub power_limit_mw: u32,
    /// The clock lock in force before, as far as greenup knows (None: unlocked).
    pub lock_before_mhz: Option<(u32, u32)>,
    /// The asked power limit and what became of it.
    pub power_limit: Control,
    /// The asked clock lock and what became of it.
    pub clocks: Control,
    /// The reading at the start (energy counter and time).
    pub start: GpuReading,
}

/// Everything one node saved for one holder (a job, or an admin's `greenup gpu set`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuRecord {
    /// Slurm job id (0 for an admin's hold).
    pub job_id: u32,
    /// What was asked.
    pub request: Request,
    /// The GPUs held, in Slurm's order.
    pub gpus: Vec<SavedGpu>,
    /// GPUs Slurm named that could not be found or read, and why.
    pub missing: Vec<String>,
    /// The NVML library the record was made with, so a meter during the job loads the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<PathBuf>,
}

/// Why a hold could not be saved, read or finished.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    /// The record file could not be written or read.
    #[error("{path}: {source}")]
    Record {
        /// The record file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// NVML failed before anything was saved or changed.
    #[error(transparent)]
    Nvml(#[from] NvmlError),
}

/// The record of `node`'s GPUs for `job_id` under `run_dir` (the job's directory, beside
/// its CPU record).
pub fn record_path(run_dir: &Path, job_id: u32, node: &str) -> PathBuf {
    JobDir::new(run_dir, job_id).gpu(node)
}

/// The running means of `node`'s GPUs' SM clock and utilization for `job_id`, kept by the meter.
pub fn samples_path(run_dir: &Path, job_id: u32, node: &str) -> PathBuf {
    JobDir::new(run_dir, job_id).gpu_samples(node)
}

/// The node's own record of an admin's `greenup gpu set`, outside any job.
pub fn admin_path(run_dir: &Path) -> PathBuf {
    run_dir.join("gpu-admin.json")
}

/// Read a record; Ok(None) when there is none.
pub fn load(file: &Path) -> Result<Option<GpuRecord>, HoldError> {
    let err = |source| HoldError::Record {
        path: file.to_path_buf(),
        source,
    };
    match std::fs::read(file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| err(std::io::Error::other(e))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(err(e)),
    }
}

/// Write a record through a temporary file and a rename; its directory is made root's alone.
pub fn save(file: &Path, rec: &GpuRecord) -> Result<(), HoldError> {
    write_json(file, rec)
}

/// Write `value` as JSON to `file` through a temporary file (0600) and a rename, making
/// its directory (0700) if needed.
pub(crate) fn write_json<T: Serialize>(file: &Path, value: &T) -> Result<(), HoldError> {
    let err = |source| HoldError::Record {
        path: file.to_path_buf(),
        source,
    };
    if let Some(dir) = file.parent() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(err)?;
    }
    let json = serde_json::to_vec_pretty(value).map_err(|e| err(std::io::Error::other(e)))?;
    greenup_core::fs::write_atomic_volatile(file, &json, 0o600).map_err(err)
}

/// The lock greenup last set on `uuid` outside jobs, from the node's admin record.
pub fn admin_lock(run_dir: &Path, uuid: &str) -> Option<(u32, u32)> {
    let rec = load(&admin_path(run_dir)).ok().flatten()?;
    let g = rec.gpus.iter().find(|g| g.uuid == uuid)?;
    match g.clocks {
        Control::Held => rec.request.lock_mhz,
        _ => g.lock_before_mhz,
    }
}

fn snapshot(gpu: &Gpu<'_>, minor: u32) -> Result<SavedGpu, NvmlError> {
    // Only what the end needs: who the GPU is, its limit, and its counter now. Clocks and
    // utilization at a job's first instant say nothing about the job.
    let uuid = gpu.uuid()?;
    let power_limit_mw = gpu.power_limit_mw()?;
    let start = GpuReading::counter(gpu, minor, uuid.clone());
    Ok(SavedGpu {
        minor,
        uuid,
        power_limit_mw,
        lock_before_mhz: None,
        power_limit: Control::NotAsked,
        clocks: Control::NotAsked,
        start,
    })
}

/// Save the GPUs `minors` (Slurm's `SLURM_JOB_GPUS`) to `file`, then set what `req` asks.
/// Only those GPUs are read or touched. Called again with a record already saved, it
/// returns that record unchanged, so a retried prolog never saves the job's own settings
/// as "before". `lock_before` says which lock a GPU (by UUID) had before, as far as
/// greenup knows.
pub fn begin(
    nvml: &Nvml,
    file: &Path,
    job_id: u32,
    minors: &[u32],
    req: Request,
    lock_before: impl Fn(&str) -> Option<(u32, u32)>,
) -> Result<GpuRecord, HoldError> {
    if let Some(existing) = load(file)? {
        return Ok(existing);
    }
    let mut rec = GpuRecord {
        job_id,
        request: req,
        gpus: Vec::new(),
        missing: Vec::new(),
        library: Some(nvml.path().to_path_buf()),
    };
    let mut handles = Vec::new();
    for (minor, found) in nvml.gpus_by_minor(minors)? {
        let saved = found.and_then(|g| snapshot(&g, minor).map(|s| (g, s)));
        match saved {
            Ok((g, mut saved)) => {
                saved.lock_before_mhz = lock_before(&saved.uuid);
                handles.push(g);
                rec.gpus.push(saved);
            }
            Err(e) => rec.missing.push(format!("/dev/nvidia{minor}: {e}")),
        }
    }
    if rec.gpus.is_empty() && rec.missing.is_empty() {
        return Ok(rec);
    }
    // Saved before anything changes, so a crash mid-apply still restores.
    save(file, &rec)?;
    if req == Request::default() {
        return Ok(rec);
    }
    for (g, saved) in handles.iter().zip(rec.gpus.iter_mut()) {
        if let Some(mw) = req.power_limit_mw {
            saved.power_limit = match g.set_power_limit_mw(mw) {
                Ok(()) => Control::Held,
                Err(e) => Control::NotHeld(e.to_string()),
            };
        }
        if let Some((lo, hi)) = req.lock_mhz {
            saved.clocks = match g.lock_clocks(lo, hi) {
                Ok(()) => Control::Held,
                Err(e) => Control::NotHeld(e.to_string()),
            };
        }
    }
    save(file, &rec)?;
    Ok(rec)
}

/// One GPU's part of a job's end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuEnd {
    /// What was saved at the start.
    pub saved: SavedGpu,
    /// The reading at the end; None when the GPU could not be found or read.
    pub end: Option<GpuReading>,
    /// Why a held control could not be put back, if so.
    pub restore_error: Option<String>,
}

impl GpuEnd {
    /// Joules between the start and end readings, when both counters were read.
    pub fn energy_j(&self) -> Option<f64> {
        let start = self.saved.start.energy_mj?;
        let end = self.end.as_ref()?.energy_mj?;
        // The counter is 64-bit and counts from the driver's load: a smaller end means the
        // driver was reloaded, and the job's energy is then unknown.
        (end >= start).then(|| (end - start) as f64 / 1000.0)
    }

    /// Seconds between the start and end readings.
    pub fn elapsed_s(&self) -> Option<f64> {
        Some((self.end.as_ref()?.unix_s - self.saved.start.unix_s).max(0.0))
    }
}

/// Put back what `saved` held on `gpu`: the power limit found before (only if it changed)
/// and the clock lock found before (or unlock).
fn restore_one(gpu: &Gpu<'_>, saved: &SavedGpu) -> Result<(), NvmlError> {
    let mut first = None;
    if saved.power_limit.is_held()
        && gpu.power_limit_mw().ok() != Some(saved.power_limit_mw)
        && let Err(e) = gpu.set_power_limit_mw(saved.power_limit_mw)
    {
        first.get_or_insert(e);
    }
    if saved.clocks.is_held() {
        let r = match saved.lock_before_mhz {
            Some((lo, hi)) => gpu.lock_clocks(lo, hi),
            None => gpu.unlock_clocks(),
        };
        if let Err(e) = r {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

/// Read the held GPUs' counters, restore what `file` saved, and remove the record once
/// everything is back (it stays for a retry otherwise). Ok(None) when there is no record.
pub fn end(nvml: &Nvml, file: &Path) -> Result<Option<Vec<GpuEnd>>, HoldError> {
    let Some(rec) = load(file)? else {
        return Ok(None);
    };
    let minors: Vec<u32> = rec.gpus.iter().map(|g| g.minor).collect();
    let mut by_minor = nvml.gpus_by_minor(&minors)?.into_iter();
    let mut out = Vec::new();
    for saved in rec.gpus {
        // Found by its minor number when that still names the same GPU (the usual case),
        // else by its UUID.
        let same = |g: &Gpu<'_>| g.uuid().is_ok_and(|u| u == saved.uuid);
        let gpu = match by_minor.next().map(|(_, g)| g) {
            Some(Ok(g)) if same(&g) => Ok(g),
            _ => nvml.gpus().and_then(|all| {
                all.into_iter()
                    .find(|g| same(g))
                    .ok_or(NvmlError::NoSuchMinor { minor: saved.minor })
            }),
        };
        let (end, restore_error) = match gpu {
            Ok(g) => (
                Some(GpuReading::counter(&g, saved.minor, saved.uuid.clone())),
                restore_one(&g, &saved)
                    .err()
                    .map(|e| format!("{}: {e}", saved.uuid)),
            ),
            Err(e) => {
                let held = saved.power_limit.is_held() || saved.clocks.is_held();
                (None, held.then(|| format!("{}: {e}", saved.uuid)))
            }
        };
        out.push(GpuEnd {
            saved,
            end,
            restore_error,
        });
    }
    if out.iter().all(|g| g.restore_error.is_none()) {
        remove(file)?;
    }
    Ok(Some(out))
}

/// Remove a record, and its directory once empty (a job directory holds other records too).
fn remove(file: &Path) -> Result<(), HoldError> {
    greenup_core::fs::remove_if_present(file).map_err(|source| HoldError::Record {
        path: file.to_path_buf(),
        source,
    })?;
    if let Some(dir) = file.parent() {
        let _ = std::fs::remove_dir(dir);
    }
    Ok(())
}

/// Job ids under `run_dir` that still hold a GPU record for `node` (an epilog that never
/// ran, e.g. after slurmd crashed), in order: a later prolog or epilog ends them.
pub fn leftover_jobs(run_dir: &Path, node: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return Vec::new();
    };
    let mut jobs: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|j| record_path(run_dir, *j, node).exists())
        .collect();
    jobs.sort_unstable();
    jobs
}
