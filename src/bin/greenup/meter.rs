//! `greenup meter`: count one job's RAPL energy on this node while the job runs. The
//! plugin's job prolog starts it as root; it stops by itself once the job's epilog has
//! taken the last reading, so a counter that wraps many times in a long job is counted
//! in full. Where the job holds GPUs, it also samples their SM clock and utilization, so
//! the end can report their means over the job.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use greenup::dvfs::job::{NodePaths, count_until_end};
use greenup::dvfs::state;

use crate::{Failure, Outcome};

/// Options of `greenup meter`.
#[derive(Args, Debug)]
pub struct MeterArgs {
    /// The Slurm job id.
    job_id: u32,
    /// This node's name, as Slurm knows it (the name its saved record is kept under).
    #[arg(long)]
    node: String,
    /// Where the job prolog saved the job's settings and first reading.
    #[arg(long, default_value = "/run/greenup")]
    run_dir: PathBuf,
    /// The sysfs root holding class/powercap.
    #[arg(long, default_value = "/sys")]
    sysfs_root: PathBuf,
    /// The longest wait between two readings, in seconds.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    every_at_most: u64,
}

/// Count until the job ends on this node.
pub fn run(a: MeterArgs) -> Outcome {
    if !state::path(&a.run_dir, a.job_id, &a.node).exists() {
        return Err(Failure::Input(format!(
            "{}: no saved record of job {} for node '{}': greenup meter counts a job its prolog has started (see --run-dir and --node)",
            a.run_dir.display(),
            a.job_id,
            a.node
        )));
    }
    let paths = NodePaths {
        sysfs_root: a.sysfs_root,
        run_dir: a.run_dir,
    };
    // The GPU sampler ends with this process: the CPU count below ends at the epilog.
    let (run_dir, node) = (paths.run_dir.clone(), a.node.clone());
    let _gpus = std::thread::spawn(move || sample_gpus(&run_dir, a.job_id, &node));
    count_until_end(
        &paths,
        a.job_id,
        &a.node,
        Duration::from_secs(a.every_at_most),
    )
    .map_err(|e| Failure::Runtime(e.to_string()))
}

/// How often the job's GPUs' SM clock and utilization are read.
const GPU_EVERY: Duration = Duration::from_secs(5);

/// Sample the job's GPUs until their record is gone (the epilog ended them), with the
/// NVML library the prolog used. A job without GPUs returns at once.
fn sample_gpus(run_dir: &std::path::Path, job_id: u32, node: &str) {
    use greenup_platform::gpu::{Nvml, hold, samples};
    let record = hold::record_path(run_dir, job_id, node);
    let Ok(Some(rec)) = hold::load(&record) else {
        return;
    };
    let Some(Ok(nvml)) = rec.library.as_deref().map(Nvml::open) else {
        return;
    };
    let out = hold::samples_path(run_dir, job_id, node);
    loop {
        if !record.exists() {
            return;
        }
        let _ = samples::sample(&nvml, &rec, &out);
        // The epilog may have read and removed the sums in the meantime: leave nothing behind.
        if !record.exists() {
            let _ = std::fs::remove_file(&out);
            return;
        }
        std::thread::sleep(GPU_EVERY);
    }
}
