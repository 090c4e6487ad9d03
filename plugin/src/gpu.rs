//! A job's GPUs on this node, for the prolog and the epilog: the GPUs Slurm gave the job
//! (`SLURM_JOB_GPUS`) have their counters saved at the start and are measured and
//! restored at the end. A job without GPUs, or a node without NVML, is left exactly as
//! before; a job with GPUs on a node where NVML fails gets one warning line.

use std::path::Path;

use greenup::record::{GpuSource, NodeGpu};
use greenup::site::node::NodeConfig;
use greenup_platform::gpu::hold::{self, Request};
use greenup_platform::gpu::{Nvml, parse_job_gpus, samples};

use crate::job_env::JobEnv;

/// Save the job's GPUs' counters (and end any earlier job's record that names one of
/// them: that job is over, since Slurm gave its GPU to this one). Returns a warning for
/// the job's owner when its GPUs cannot be measured, and a line for the log.
pub fn start(site: &NodeConfig, run_dir: &Path, job: &JobEnv) -> (Option<String>, Option<String>) {
    let minors = match parse_job_gpus(job.gpus.as_deref().unwrap_or("")) {
        Ok(m) if m.is_empty() => return (None, None),
        Ok(m) => m,
        Err(e) => return (Some(format!("GPUs not measured: {e}")), None),
    };
    let nvml = match Nvml::open(&site.dvfs.nvml_library) {
        Ok(n) => n,
        Err(e) => return (Some(format!("GPUs not measured: {e}")), None),
    };
    let mut log = Vec::new();
    for earlier in hold::leftover_jobs(run_dir, &job.node) {
        let file = hold::record_path(run_dir, earlier, &job.node);
        let stale = earlier != job.job_id
            && hold::load(&file)
                .ok()
                .flatten()
                .is_some_and(|r| r.gpus.iter().any(|g| minors.contains(&g.minor)));
        if stale {
            let what = match hold::end(&nvml, &file) {
                Ok(_) => "restored".to_string(),
                Err(e) => format!("not restored: {e}"),
            };
            log.push(format!("GPUs of ended job {earlier} {what}"));
        }
    }
    let file = hold::record_path(run_dir, job.job_id, &job.node);
    let lock_before = |uuid: &str| hold::admin_lock(run_dir, uuid);
    let warning = match hold::begin(
        &nvml,
        &file,
        job.job_id,
        &minors,
        Request::default(),
        lock_before,
    ) {
        Ok(rec) if rec.missing.is_empty() => None,
        Ok(rec) => Some(format!("GPUs not all measured: {}", rec.missing.join("; "))),
        Err(e) => Some(format!("GPUs not measured: {e}")),
    };
    let note = (!log.is_empty()).then(|| log.join("; "));
    (warning, note)
}

/// Measure and restore the job's GPUs on this node; None when the job held none here.
pub fn end(site: &NodeConfig, run_dir: &Path, job: &JobEnv) -> Option<NodeGpu> {
    let file = hold::record_path(run_dir, job.job_id, &job.node);
    let rec = match hold::load(&file) {
        Ok(Some(rec)) => rec,
        Ok(None) => return None,
        Err(e) => return Some(unmeasured(0, format!("{e}"))),
    };
    let count = (rec.gpus.len() + rec.missing.len()) as u32;
    // The library the start used, so the end measures with the same one.
    let library = rec
        .library
        .clone()
        .unwrap_or_else(|| site.dvfs.nvml_library.clone());
    let nvml = match Nvml::open(&library) {
        Ok(n) => n,
        Err(e) => return Some(unmeasured(count, format!("{e}; settings kept for a retry"))),
    };
    let ends = match hold::end(&nvml, &file) {
        Ok(Some(ends)) => ends,
        Ok(None) => return None,
        Err(e) => return Some(unmeasured(count, e.to_string())),
    };
    let sampled_file = hold::samples_path(run_dir, job.job_id, &job.node);
    let sampled = samples::load(&sampled_file)
        .ok()
        .flatten()
        .unwrap_or_default();
    let _ = std::fs::remove_file(&sampled_file);
    let energies: Option<Vec<f64>> = if rec.missing.is_empty() {
        ends.iter().map(|e| e.energy_j()).collect()
    } else {
        None
    };
    let energy_j = energies.map(|e| e.iter().sum::<f64>());
    let elapsed = ends
        .iter()
        .filter_map(|e| e.elapsed_s())
        .fold(0.0_f64, f64::max);
    let mut notes: Vec<String> = rec.missing.clone();
    notes.extend(ends.iter().filter_map(|e| e.restore_error.clone()));
    notes.extend(
        ends.iter()
            .filter_map(|e| e.end.as_ref().and_then(|r| r.problem.clone())),
    );
    Some(NodeGpu {
        gpus: count,
        source: GpuSource::Nvml,
        energy_j,
        avg_power_w: energy_j.filter(|_| elapsed > 0.0).map(|e| e / elapsed),
        sm_mhz: sampled.sm_mhz(),
        util_pct: sampled.util_pct(),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    })
}

fn unmeasured(gpus: u32, why: String) -> NodeGpu {
    NodeGpu {
        gpus,
        source: GpuSource::Nvml,
        energy_j: None,
        avg_power_w: None,
        sm_mhz: None,
        util_pct: None,
        note: Some(why),
    }
}
