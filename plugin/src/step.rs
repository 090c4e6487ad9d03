//! Job steps on the nodes (slurmstepd, remote context): tell the job's owner once
//! about a problem the prolog met, enforce `strict`, shrink a job the decision does
//! not fully use, and on shared nodes set and restore a step's own cores where allowed.

use std::path::Path;

use greenup::dvfs::job::{self as dvfs_job, NodePaths, Scope};
use greenup::dvfs::run_dir::{self, JobDir};
use greenup::dvfs::{state, sysfs};
use greenup::site::Enforce;
use greenup::site::node::NodeConfig;

use crate::node;

/// Slurm's step id of the batch script.
pub const BATCH_STEP: u32 = 0xffff_fffb;

/// What a step knows about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepInfo {
    /// Slurm job id.
    pub job_id: u32,
    /// Slurm step id.
    pub step_id: u32,
    /// This node's name.
    pub node: String,
}

/// The warning the prolog left for this job on this node, the first time a step asks.
pub fn take_warning(run_dir: &Path, step: &StepInfo) -> Option<String> {
    let dir = JobDir::new(run_dir, step.job_id);
    let text = std::fs::read_to_string(dir.warning(&step.node)).ok()?;
    let marker = dir.warned(&step.node);
    // create_new: only one step of the job prints it, even when steps start together.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(marker)
        .ok()?;
    Some(text.trim().to_string())
}

/// Under `enforce: strict`, fail the step when the prolog could not apply the decision.
pub fn enforce(site: &NodeConfig, step: &StepInfo) -> Result<(), String> {
    let failed = JobDir::new(&site.dvfs.run_dir, step.job_id)
        .warning(&step.node)
        .exists();
    if failed && site.enforce == Enforce::Strict {
        return Err(format!(
            "greenup: job {}: greenup could not apply its decision and the site requires it",
            step.job_id
        ));
    }
    Ok(())
}

/// The nodes the decision keeps when it uses fewer than the job holds, in Slurm form.
pub fn shrink_target(site: &NodeConfig, step: &StepInfo, allocated: usize) -> Option<String> {
    // greenupd hands the used nodes to the job's first node only, where the batch step runs.
    let s = node::saved_decision(&site.dvfs.run_dir, step.job_id, &step.node)?;
    let used = s.used_nodes?;
    if !s.used || s.node_count == 0 || s.node_count >= allocated {
        return None;
    }
    Some(used)
}

/// The record key of one step's own cores on a shared node.
pub fn step_key(step: &StepInfo) -> String {
    run_dir::step_key(&step.node, step.step_id)
}

/// On a shared node where the site allows per-core DVFS, set the decided frequency on
/// this step's cores only (`cores` as Slurm lists them, e.g. `0-1`). Returns the note.
pub fn apply_step_cores(
    site: &NodeConfig,
    paths: &NodePaths,
    step: &StepInfo,
    cores: &str,
) -> Option<String> {
    if !site.dvfs.per_core_shared {
        return None;
    }
    let node_rec = state::load(&paths.run_dir, step.job_id, &step.node).ok()??;
    if node_rec.note != "not applied: shared node" {
        return None;
    }
    let khz = node_rec.requested_khz?;
    // Slurm numbers cores; with one thread per core these are the CPU numbers.
    let cpus = sysfs::parse_cpu_list(Path::new("step cores"), cores).ok()?;
    match dvfs_job::begin(
        paths,
        step.job_id,
        &step.node,
        &step_key(step),
        Some(khz),
        &Scope::Cpus(cpus),
    ) {
        Ok(rec) => Some(format!("step {} cores {cores}: {}", step.step_id, rec.note)),
        Err(e) => Some(format!(
            "step {} cores {cores}: not applied: {e}",
            step.step_id
        )),
    }
}

/// Restore what `apply_step_cores` set, when the step ends.
pub fn restore_step_cores(paths: &NodePaths, step: &StepInfo) -> Option<String> {
    match dvfs_job::end(paths, step.job_id, &step_key(step)) {
        Ok(Some(o)) => o.restore_error,
        Ok(None) => None,
        Err(e) => Some(e.to_string()),
    }
}
