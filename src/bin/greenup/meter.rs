//! `greenup meter`: count one job's RAPL energy on this node while the job runs. The
//! plugin's job prolog starts it as root; it stops by itself once the job's epilog has
//! taken the last reading, so a counter that wraps many times in a long job is counted
//! in full.

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
    count_until_end(
        &paths,
        a.job_id,
        &a.node,
        Duration::from_secs(a.every_at_most),
    )
    .map_err(|e| Failure::Runtime(e.to_string()))
}
