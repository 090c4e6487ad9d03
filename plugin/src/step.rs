//! Job steps on the nodes (slurmstepd, remote context): tell the job's owner once
//! about a problem the prolog met, enforce `strict`, shrink a job the decision does
//! not fully use, and print the --energy-report summary at the end of the batch step.

use std::path::Path;

use greenup::dvfs::state;
use greenup::hostlist;
use greenup::meter::{self, Energy};
use greenup::site::{Enforce, Site};
use greenup::units;

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
    let text =
        std::fs::read_to_string(node::warning_path(run_dir, step.job_id, &step.node)).ok()?;
    let marker = run_dir
        .join(step.job_id.to_string())
        .join(format!("{}.warned", step.node));
    // create_new: only one step of the job prints it, even when steps start together.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(marker)
        .ok()?;
    Some(text.trim().to_string())
}

/// Under `enforce: strict`, fail the step when the prolog could not apply the decision.
pub fn enforce(site: &Site, step: &StepInfo) -> Result<(), String> {
    let failed = node::warning_path(&site.dvfs.run_dir, step.job_id, &step.node).exists();
    if failed && site.enforce == Enforce::Strict {
        return Err(format!(
            "greenup: job {}: greenup could not apply its decision and the site requires it",
            step.job_id
        ));
    }
    Ok(())
}

/// The nodes the decision keeps when it uses fewer than the job holds, in Slurm form.
pub fn shrink_target(site: &Site, step: &StepInfo, allocated: usize) -> Option<String> {
    let d = node::saved_decision(&site.dvfs.run_dir, step.job_id, &step.node)?;
    let plan = d.plan.as_ref()?;
    let used: Vec<String> = plan.nodes.iter().map(|n| n.name.clone()).collect();
    if used.is_empty() || used.len() >= allocated || !used.contains(&step.node) {
        return None;
    }
    Some(hostlist::compress(&used))
}

/// The --energy-report summary: the decision's prediction against this node's counters so far.
pub fn report(site: &Site, sysfs_root: &Path, step: &StepInfo) -> Option<String> {
    let d = node::saved_decision(&site.dvfs.run_dir, step.job_id, &step.node)?;
    let rec = state::load(&site.dvfs.run_dir, step.job_id, &step.node).ok()??;
    let now = meter::rapl::read(sysfs_root);
    let measured = match meter::rapl::energy_between(&rec.energy_start, &now) {
        Energy::Measured { joules } => units::format_energy(joules),
        Energy::Unmeasured { reason } => format!("unmeasured ({reason})"),
    };
    let elapsed = (now.unix_s - rec.energy_start.unix_s).max(0.0);
    let predicted = match &d.plan {
        Some(p) => format!(
            "predicted {} and {} on {} node(s)",
            units::format_duration(p.predicted.time_s),
            units::format_energy(p.predicted.energy_j),
            p.node_count
        ),
        None => "no prediction".to_string(),
    };
    Some(format!(
        "greenup: job {}: policy {}, {predicted}; measured on {}: {} and {} ({}); all nodes: greenup report {}",
        step.job_id,
        d.policy,
        step.node,
        units::format_duration(elapsed),
        measured,
        rec.note,
        step.job_id
    ))
}
