//! A job's GPUs on this node, for the prolog and the epilog: the GPUs Slurm gave the job
//! (`SLURM_JOB_GPUS`) have their counters saved at the start, are held at their part of
//! the node's power share when the decision gives one, and are measured and restored at
//! the end. A job without GPUs, or a node without NVML, is left exactly as before; a job
//! with GPUs on a node where NVML fails gets one warning line.

use std::path::Path;

use greenup::power::split::GpuPart;
use greenup::record::{GpuSource, NodeGpu, NodePower};
use greenup::site::node::NodeConfig;
use greenup_core::quantity::{Joules, Watts};
use greenup_platform::dvfs::run_dir::JobDir;
use greenup_platform::gpu::handoff::{self, Settled};
use greenup_platform::gpu::hold::{self, GpuEnd};
use greenup_platform::gpu::start::GpuStart;
use greenup_platform::gpu::{Control, Nvml, samples};

use crate::job_env::JobEnv;
use greenup_proto::protocol::NodeSettings;

/// What greenupd's decision asks of the job's GPUs on this node.
#[derive(Debug, Clone, Copy, Default)]
pub struct Asked {
    /// Each GPU's part of the node's power share.
    power: Option<GpuPart>,
    /// The SM clock to lock them at.
    lock_mhz: Option<u32>,
}

impl Asked {
    /// From this node's settings, when greenupd decided (nothing without a decision).
    pub fn of(decided: Option<&NodeSettings>) -> Asked {
        decided.map_or_else(Asked::default, |d| Asked {
            power: d.gpu_power,
            lock_mhz: d.gpu_mhz,
        })
    }
}

/// Do the job's GPU start here and now ([`GpuStart::run`]); a prolog with a worker hands
/// it over instead ([`hand_off`]). Returns a warning for the job's owner when its GPUs
/// cannot be measured or held, and a line for the log.
pub fn start(
    site: &NodeConfig,
    run_dir: &Path,
    job: &JobEnv,
    asked: Asked,
) -> (Option<String>, Option<String>) {
    let s = ask(site, run_dir, job, asked).run();
    (s.warning, s.note)
}

/// What the job's start asks of its GPUs on this node.
fn ask(site: &NodeConfig, run_dir: &Path, job: &JobEnv, asked: Asked) -> GpuStart {
    GpuStart {
        job_id: job.job_id,
        node: job.node.clone(),
        gpus: job.gpus.clone().unwrap_or_default(),
        library: site.dvfs.nvml_library.clone(),
        run_dir: run_dir.to_path_buf(),
        power: asked.power,
        lock_mhz: asked.lock_mhz,
    }
}

/// Hand the job's GPU start to `worker` (`greenup`, run as `greenup gpu start-job FILE`)
/// so that the prolog does not wait for NVML: Ok(false) when the job has no GPUs here,
/// Ok(true) once the worker is started. On an error nothing was handed over, and the
/// caller does the start itself.
pub fn hand_off(
    worker: &Path,
    site: &NodeConfig,
    run_dir: &Path,
    job: &JobEnv,
    asked: Asked,
) -> std::io::Result<bool> {
    let ask = ask(site, run_dir, job, asked);
    if !ask.has_gpus() {
        return Ok(false);
    }
    let dir = JobDir::new(run_dir, job.job_id);
    dir.create()?;
    let file = dir.gpu_start(&job.node);
    handoff::post(&file, &ask)?;
    let argv = ["gpu".as_ref(), "start-job".as_ref(), file.as_os_str()];
    crate::command::start_later(worker, &argv, std::time::Duration::ZERO, &file).inspect_err(
        |_| {
            let _ = std::fs::remove_file(&file);
        },
    )?;
    Ok(true)
}

/// How long the epilog waits for a GPU worker still at work: NVML's start and a
/// node's GPUs take tens of milliseconds, so this is a hung driver, not a slow one.
const SETTLE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Settle the job's GPU handoff before its end is measured: waits for a worker still at
/// work, and makes sure a worker that had not started never does. Returns a line for
/// the node's log, if any.
pub fn settle(run_dir: &Path, job: &JobEnv) -> Option<String> {
    let file = JobDir::new(run_dir, job.job_id).gpu_start(&job.node);
    match handoff::settle(&file, SETTLE_WAIT) {
        Ok(Settled::Nothing) => None,
        Ok(Settled::Done(o)) => Some(format!(
            "GPU start done by its worker in {:.1} ms{}{}",
            o.took_ms,
            o.note.map(|n| format!("; {n}")).unwrap_or_default(),
            o.warning.map(|w| format!("; {w}")).unwrap_or_default()
        )),
        Ok(Settled::NotStarted) => Some(
            "GPU start never ran (its worker did not start before the job ended): the GPUs were neither read nor changed"
                .into(),
        ),
        Ok(Settled::Busy) => Some(format!(
            "GPU start still running after {} s: its GPUs are measured and restored by the next job given them",
            SETTLE_WAIT.as_secs()
        )),
        Err(e) => Some(format!("GPU start {}: {e}", file.display())),
    }
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
        energy_j: energy_j.map(Joules),
        avg_power_w: energy_j
            .filter(|_| elapsed > 0.0)
            .map(|e| Watts(e / elapsed)),
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
        limit_w: Watts(set_w),
        ..part
    })
    .note()
    {
        notes.push(n);
    }
    NodePower {
        asked_w,
        held_w: all_held.then_some(Watts(set_w * count as f64)),
        note: (!notes.is_empty()).then(|| format!("{count} GPU(s): {}", notes.join("; "))),
    }
}

/// A node's power limits as one: its CPU package's (RAPL) and its GPUs', asked and held
/// added up (held only when both are), with both notes.
pub fn node_power(cpu: Option<NodePower>, gpus: Option<NodePower>) -> Option<NodePower> {
    match (cpu, gpus) {
        (Some(c), Some(g)) => {
            let split = format!("CPU {:.1} W + GPUs {:.1} W asked", c.asked_w.0, g.asked_w.0);
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
