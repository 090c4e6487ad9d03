//! A job's directory on a node, `run_dir/JOBID/`, and every file greenup keeps in it:
//! the one place that knows the layout. `run_dir` is on tmpfs (/run), so a reboot leaves
//! nothing stale; the job directory is root's alone (0700).
//!
//! For each record key (the node's name, or `NODE.stepN` for one step's own cores on a
//! shared node):
//! - `KEY.json`: the settings and counters saved at the start ([`super::state`]);
//! - `KEY.meter.json`: the meter's running energy count;
//! - `KEY.lent.json`: the cpufreq files lent to the job's user, with their owner and
//!   mode from before ([`super::lend`]), until the end takes them back.
//!
//! For the node:
//! - `NODE.decision.json`: the decision as the prolog received it;
//! - `NODE.warning`: a warning for the job's owner, printed once by a step;
//! - `NODE.warned`: made by the step that printed it;
//! - `NODE.comm.json`: the communication-phase DVFS settings for the job's MPI ranks;
//! - `NODE.gpu.json`: the job's GPUs' saved settings and counters ([`crate::gpu::hold`]);
//! - `NODE.gpu-start.json`: the prolog's GPU work handed to a worker, then what came of
//!   it ([`crate::gpu::handoff`]);
//! - `NODE.gpu-samples.json`: the meter's running sums of their SM clock and utilization.
//!
//! Beside the job directory, because its user must reach it and the job directory is
//! root's alone: `run_dir/JOBID.NODE.mpi/`, where the job's MPI ranks leave their
//! measurements. It belongs to the job's user while the job runs; `run_dir` is then
//! 0711 (traversable, not listable), so the user reaches it only by its name.

use std::path::{Path, PathBuf};

/// One job's directory under a node's run directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobDir {
    dir: PathBuf,
}

/// The record key of one step's own cores on `node`.
pub fn step_key(node: &str, step_id: u32) -> String {
    format!("{node}.step{step_id}")
}

impl JobDir {
    /// The directory of `job_id` under `run_dir`.
    pub fn new(run_dir: &Path, job_id: u32) -> JobDir {
        JobDir {
            dir: run_dir.join(job_id.to_string()),
        }
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Whether greenup keeps anything for the job on this node.
    pub fn exists(&self) -> bool {
        self.dir.exists()
    }

    /// Create the directory (and `run_dir`), root's alone.
    pub fn create(&self) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
    }

    /// Remove the directory if nothing is left in it (other keys may still hold files).
    pub fn remove_if_empty(&self) {
        let _ = std::fs::remove_dir(&self.dir);
    }

    /// The settings saved for `key`.
    pub fn record(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.json"))
    }

    /// The meter's running count for `key`.
    pub fn tally(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.meter.json"))
    }

    /// The decision as `node`'s prolog received it.
    pub fn decision(&self, node: &str) -> PathBuf {
        self.dir.join(format!("{node}.decision.json"))
    }

    /// A warning for the job's owner from `node`'s prolog.
    pub fn warning(&self, node: &str) -> PathBuf {
        self.dir.join(format!("{node}.warning"))
    }

    /// Add `line` to the warnings for the job's owner from `node`; the job's first step
    /// prints them all. The job directory's lock keeps the prolog and the GPU worker from
    /// writing over each other's lines.
    pub fn add_warning(&self, node: &str, line: &str) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        self.create()?;
        let dir = greenup_core::fs::open_no_link(&self.dir, true)?;
        // SAFETY: flock on a descriptor owned here; closing it releases the lock.
        while unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(e);
            }
        }
        let file = self.warning(node);
        let before = std::fs::read_to_string(&file).unwrap_or_default();
        greenup_core::fs::write_atomic_volatile(
            &file,
            format!("{before}{line}\n").as_bytes(),
            0o666,
        )
    }

    /// Made once a step on `node` printed the warning.
    pub fn warned(&self, node: &str) -> PathBuf {
        self.dir.join(format!("{node}.warned"))
    }

    /// The cpufreq files lent to the job's user for `key`.
    pub fn lent(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.lent.json"))
    }

    /// The communication-phase DVFS settings for the job's MPI ranks on `node`.
    pub fn comm(&self, node: &str) -> PathBuf {
        self.dir.join(format!("{node}.comm.json"))
    }

    /// The in-job guard's settings for the job's MPI ranks on `node` (`GREENUP_GUARD`).
    pub fn guard(&self, node: &str) -> PathBuf {
        self.dir.join(format!("{node}.guard.json"))
    }

    /// Why the in-job guard is off on `node`, when the prolog found it could not act
    /// there (one `greenup_comm::GuardOff` word, as JSON): the epilog's note for the report.
    pub fn guard_off(&self, node: &str) -> PathBuf {
        self.dir.join(format!("{node}.guard-off.json"))
    }

    /// The saved settings and counters of the job's GPUs on `node`.
    pub fn gpu(&self, node: &str) -> PathBuf {
        self.dir.join(format!("{node}.gpu.json"))
    }

    /// Where `node`'s prolog hands the job's GPU work to a worker ([`crate::gpu::handoff`]).
    pub fn gpu_start(&self, node: &str) -> PathBuf {
        self.dir.join(format!("{node}.gpu-start.json"))
    }

    /// The meter's running sums of the job's GPUs' SM clock and utilization on `node`.
    pub fn gpu_samples(&self, node: &str) -> PathBuf {
        self.dir.join(format!("{node}.gpu-samples.json"))
    }

    /// The directory, beside this one, where the job's MPI ranks on `node` write.
    pub fn mpi_stats(&self, node: &str) -> PathBuf {
        let name = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.dir.with_file_name(format!("{name}.{node}.mpi"))
    }

    /// The keys of step records on `node` (a crashed step leaves its own).
    pub fn step_keys(&self, node: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let prefix = format!("{node}.step");
        let mut keys: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let key = name.strip_suffix(".json")?;
                (key.starts_with(&prefix) && !key.ends_with(".meter") && !key.ends_with(".lent"))
                    .then(|| key.to_string())
            })
            .collect();
        keys.sort();
        keys
    }
}

/// Job ids under `run_dir` that still have a saved record for `key` (e.g. after a
/// slurmd crash skipped an epilog), in order.
pub fn jobs_with_record(run_dir: &Path, key: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return Vec::new();
    };
    let mut jobs: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|j| JobDir::new(run_dir, *j).record(key).exists())
        .collect();
    jobs.sort_unstable();
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_a_job_is_in_its_directory() {
        let d = JobDir::new(Path::new("/run/greenup"), 42);
        assert_eq!(d.path(), Path::new("/run/greenup/42"));
        assert_eq!(d.record("n1"), Path::new("/run/greenup/42/n1.json"));
        assert_eq!(d.tally("n1"), Path::new("/run/greenup/42/n1.meter.json"));
        assert_eq!(
            d.decision("n1"),
            Path::new("/run/greenup/42/n1.decision.json")
        );
        assert_eq!(d.warning("n1"), Path::new("/run/greenup/42/n1.warning"));
        assert_eq!(d.warned("n1"), Path::new("/run/greenup/42/n1.warned"));
        assert_eq!(d.lent("n1"), Path::new("/run/greenup/42/n1.lent.json"));
        assert_eq!(d.comm("n1"), Path::new("/run/greenup/42/n1.comm.json"));
        assert_eq!(d.mpi_stats("n1"), Path::new("/run/greenup/42.n1.mpi"));
        assert_eq!(step_key("n1", 3), "n1.step3");
    }

    #[test]
    fn step_records_are_told_from_the_other_files() {
        let t = tempfile::tempdir().unwrap();
        let d = JobDir::new(t.path(), 7);
        d.create().unwrap();
        for f in [
            d.record("n1"),
            d.record(&step_key("n1", 0)),
            d.record(&step_key("n1", 2)),
            d.tally(&step_key("n1", 2)),
            d.lent(&step_key("n1", 2)),
            d.record(&step_key("n10", 1)),
            d.decision("n1"),
            d.warning("n1"),
        ] {
            std::fs::write(f, "{}").unwrap();
        }
        assert_eq!(d.step_keys("n1"), vec!["n1.step0", "n1.step2"]);
        assert_eq!(jobs_with_record(t.path(), "n1"), vec![7]);
        assert_eq!(jobs_with_record(t.path(), "n2"), Vec::<u32>::new());
    }
}
