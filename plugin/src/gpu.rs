//! A job's GPUs on this node, for the prolog and the epilog: the GPUs Slurm gave the job
//! (`SLURM_JOB_GPUS`) have their counters saved at the start, are held at their part of
//! the node's power share when the decision gives one, and are measured and restored at
//! the end. A job without GPUs, or a node without NVML, is left exactly as before; a job
//! with GPUs on a node where NVML fails gets one warning line.

use std::path::Path;

use greenup::power::split::GpuPart;
use greenup::record::{GpuSource, NodeGpu, NodePower};
use greenup::site::node::NodeConfig;
use greenup_platform::gpu::hold::{self, GpuEnd, Request};
use greenup_platform::gpu::{Control, Nvml, parse_job_gpus, samples};

use crate::job_env::JobEnv;

/// Save the job's GPUs' counters (and end any earlier job's record that names one of
/// them: that job is over, since Slurm gave its GPU to this one), then set each one's
/// power limit to `power`'s limit clamped into the range NVML accepts, when the decision
/// gives one and the prolog runs as root. Returns a warning for the job's owner when its
/// GPUs cannot be measured or held, and a line for the log.
pub fn start(
    site: &NodeConfig,
    run_dir: &Path,
    job: &JobEnv,
    power: Option<GpuPart>,
) -> (Option<String>, Option<String>) {
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
    let mut request = Request::default();
    if let Some(part) = power {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            log.push("GPU power limits not set: the prolog does not run as root".into());
        } else {
            let part = part.clamped(nvml_range_w(&nvml, &minors));
            request.power_limit_mw = Some((part.limit_w * 1e3).round() as u32);
            log.push(format!(
                "GPU power limit {:.1} W each ({:.1} W part of the node's share){}",
                part.limit_w,
                part.part_w,
                part.note().map(|n| format!(": {n}")).unwrap_or_default()
            ));
        }
    }
    let warning = match hold::begin(&nvml, &file, job.job_id, &minors, request, lock_before) {
        Ok(rec) => {
            let mut problems: Vec<String> = rec.missing.clone();
            problems.extend(rec.gpus.iter().filter_map(|g| match &g.power_limit {
                Control::NotHeld(why) => Some(format!(
                    "/dev/nvidia{}: power limit not set: {why}",
                    g.minor
                )),
                _ => None,
            }));
            (!problems.is_empty())
                .then(|| format!("GPUs not all measured or held: {}", problems.join("; ")))
        }
        Err(e) => Some(format!("GPUs not measured: {e}")),
    };
    let note = (!log.is_empty()).then(|| log.join("; "));
    (warning, note)
}

/// The power limits, in watts, that every one of the GPUs `minors` accepts (None when
/// none of them says): a limit inside it is refused by none.
fn nvml_range_w(nvml: &Nvml, minors: &[u32]) -> Option<(f64, f64)> {
    let found = nvml.gpus_by_minor(minors).ok()?;
    let mut range: Option<(f64, f64)> = None;
    for r in found
        .iter()
        .filter_map(|(_, g)| g.as_ref().ok()?.power_limit_range().ok())
    {
        let (lo, hi) = (f64::from(r.min_mw) / 1e3, f64::from(r.max_mw) / 1e3);
        range = Some(range.map_or((lo, hi), |(l, h)| (l.max(lo), h.min(hi))));
    }
    range
}

/// Measure and restore the job's GPUs on this node; None when the job held none here.
pub fn end(site: &NodeConfig, run_dir: &Path, job: &JobEnv) -> Option<NodeGpu> {
    end_held(site, run_dir, job, None).0
}

/// [`end`], and the GPUs' power limits as held during the job when the decision gave
/// them `part` (None: nothing asked, or no GPUs here).
pub fn end_held(
    site: &NodeConfig,
    run_dir: &Path,
    job: &JobEnv,
    part: Option<GpuPart>,
) -> (Option<NodeGpu>, Option<NodePower>) {
    let file = hold::record_path(run_dir, job.job_id, &job.node);
    let rec = match hold::load(&file) {
        Ok(Some(rec)) => rec,
        Ok(None) => return (None, None),
        Err(e) => return (Some(unmeasured(0, format!("{e}"))), None),
    };
    let count = (rec.gpus.len() + rec.missing.len()) as u32;
    let power = part.map(|p| held_power(p, &rec));
    // The library the start used, so the end measures with the same one.
    let library = rec
        .library
        .clone()
        .unwrap_or_else(|| site.dvfs.nvml_library.clone());
    let nvml = match Nvml::open(&library) {
        Ok(n) => n,
        Err(e) => {
            let why = format!("{e}; settings kept for a retry");
            return (Some(unmeasured(count, why)), power);
        }
    };
    let ends: Vec<GpuEnd> = match hold::end(&nvml, &file) {
        Ok(Some(ends)) => ends,
        Ok(None) => return (None, None),
        Err(e) => return (Some(unmeasured(count, e.to_string())), power),
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
    let gpu = NodeGpu {
        gpus: count,
        source: GpuSource::Nvml,
        energy_j,
        avg_power_w: energy_j.filter(|_| elapsed > 0.0).map(|e| e / elapsed),
        sm_mhz: sampled.sm_mhz(),
        util_pct: sampled.util_pct(),
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    };
    (Some(gpu), power)
}

/// The GPUs' power limits as the record says they were held: asked, each GPU's part;
/// held, the sum of the limits set, only when every GPU's was.
fn held_power(part: GpuPart, rec: &hold::GpuRecord) -> NodePower {
    let count = rec.gpus.len() + rec.missing.len();
    let asked_w = part.part_w * count as f64;
    let Some(set_w) = rec.request.power_limit_mw.map(|mw| f64::from(mw) / 1e3) else {
        return NodePower {
            asked_w,
            held_w: None,
            note: Some(format!(
                "{count} GPU(s): power limits not set by the prolog"
            )),
        };
    };
    let mut notes: Vec<String> = rec
        .missing
        .iter()
        .map(|m| format!("not held: {m}"))
        .collect();
    for g in &rec.gpus {
        match &g.power_limit {
            Control::Held => {}
            Control::NotHeld(why) => notes.push(format!("/dev/nvidia{} not held: {why}", g.minor)),
            Control::NotAsked => notes.push(format!("/dev/nvidia{} not asked", g.minor)),
        }
    }
    let all_held = notes.is_empty();
    if let Some(n) = (GpuPart {
        limit_w: set_w,
        ..part
    })
    .note()
    {
        notes.push(n);
    }
    NodePower {
        asked_w,
        held_w: all_held.then_some(set_w * count as f64),
        note: (!notes.is_empty()).then(|| format!("{count} GPU(s): {}", notes.join("; "))),
    }
}

/// A node's power limits as one: its CPU package's (RAPL) and its GPUs', asked and held
/// added up (held only when both are), with both notes.
pub fn node_power(cpu: Option<NodePower>, gpus: Option<NodePower>) -> Option<NodePower> {
    match (cpu, gpus) {
        (Some(c), Some(g)) => {
            let split = format!("CPU {:.1} W + GPUs {:.1} W asked", c.asked_w, g.asked_w);
            let notes: Vec<String> = [Some(split), c.note, g.note]
                .into_iter()
                .flatten()
                .collect();
            Some(NodePower {
                asked_w: c.asked_w + g.asked_w,
                held_w: c.held_w.zip(g.held_w).map(|(c, g)| c + g),
                note: Some(notes.join("; ")),
            })
        }
        (c, g) => c.or(g),
    }
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
