//! A job's GPUs at its start on a node: the GPUs Slurm gave the job (`SLURM_JOB_GPUS`)
//! have their counters saved, any earlier job's record naming one of them is restored
//! first, and each is held at its part of the node's power share when the decision gives
//! one. The prolog hands this to a worker of its own (`greenup gpu start-job`, through
//! [`super::handoff`]) so that it does not wait for NVML; without a worker it does it
//! itself. What each GPU's part is, is the decision's (the library's power split); this
//! only sets it.

use std::path::PathBuf;

use greenup_core::quantity::Watts;
use greenup_wire::power::GpuPart;
use serde::{Deserialize, Serialize};

use super::hold::{self, Request};
use super::{Control, Nvml, parse_job_gpus};

/// What a job's start asks of its GPUs on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuStart {
    /// The job.
    pub job_id: u32,
    /// This node's name in Slurm.
    pub node: String,
    /// Slurm's `SLURM_JOB_GPUS` as given, `/dev/nvidiaN` numbers.
    pub gpus: String,
    /// The NVML library, from the site config (never from the job's environment).
    pub library: PathBuf,
    /// The node's run directory, where the GPUs' records are kept.
    pub run_dir: PathBuf,
    /// Each GPU's part of the node's power share, when the decision gives one.
    #[serde(default)]
    pub power: Option<GpuPart>,
    /// The SM clock the decision chose for the job's GPUs, in MHz, when it lowers them.
    #[serde(default)]
    pub lock_mhz: Option<u32>,
}

/// What a start came to: a line for the job's owner when its GPUs could not all be
/// measured or held, and a line for the node's log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Started {
    /// For the job's owner.
    pub warning: Option<String>,
    /// For the node's log.
    pub note: Option<String>,
}

impl GpuStart {
    /// Whether Slurm gave the job any GPU here (a bad list counts: it gets its warning).
    pub fn has_gpus(&self) -> bool {
        !matches!(parse_job_gpus(&self.gpus), Ok(m) if m.is_empty())
    }

    /// Save the job's GPUs' counters (ending first any earlier job's record that names
    /// one of them: Slurm gave its GPU to this job, so that job is over), then set each
    /// one's power limit to its part clamped into the range NVML accepts, when a part is
    /// given and this runs as root.
    pub fn run(&self) -> Started {
        let minors = match parse_job_gpus(&self.gpus) {
            Ok(m) if m.is_empty() => return Started::default(),
            Ok(m) => m,
            Err(e) => return unmeasured(e),
        };
        let nvml = match Nvml::open(&self.library) {
            Ok(n) => n,
            Err(e) => return unmeasured(e),
        };
        let mut log = Vec::new();
        for earlier in hold::leftover_jobs(&self.run_dir, &self.node) {
            let file = hold::record_path(&self.run_dir, earlier, &self.node);
            let stale = earlier != self.job_id
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
        let file = hold::record_path(&self.run_dir, self.job_id, &self.node);
        let lock_before = |uuid: &str| hold::admin_lock(&self.run_dir, uuid);
        let mut request = Request::default();
        if let Some(part) = self.power {
            // SAFETY: geteuid has no preconditions and cannot fail.
            if unsafe { libc::geteuid() } != 0 {
                log.push("GPU power limits not set: not run as root".into());
            } else {
                let part = part.clamped(nvml_range_w(&nvml, &minors));
                request.power_limit_mw = Some((part.limit_w.0 * 1e3).round() as u32);
                log.push(format!(
                    "GPU power limit {:.1} W each ({:.1} W part of the node's share){}",
                    part.limit_w.0,
                    part.part_w.0,
                    part.note().map(|n| format!(": {n}")).unwrap_or_default()
                ));
            }
        }
        if let Some(mhz) = self.lock_mhz {
            // Locked clocks, not application clocks: a lock holds for the whole job and
            // only root may lift it, where Slurm's --gpu-freq resets application clocks
            // at each step's end and a user may set them between steps.
            // SAFETY: geteuid has no preconditions and cannot fail.
            if unsafe { libc::geteuid() } != 0 {
                log.push("GPU clocks not locked: not run as root".into());
            } else {
                request.lock_mhz = Some((mhz, mhz));
                log.push(format!("GPU SM clock locked at {mhz} MHz"));
            }
        }
        let warning = match hold::begin(&nvml, &file, self.job_id, &minors, request, lock_before) {
            Ok(rec) => {
                let mut problems: Vec<String> = rec.missing.clone();
                problems.extend(rec.gpus.iter().filter_map(|g| match &g.power_limit {
                    Control::NotHeld(why) => Some(format!(
                        "/dev/nvidia{}: power limit not set: {why}",
                        g.minor
                    )),
                    _ => None,
                }));
                problems.extend(rec.gpus.iter().filter_map(|g| match &g.clocks {
                    Control::NotHeld(why) => {
                        Some(format!("/dev/nvidia{}: clocks not locked: {why}", g.minor))
                    }
                    _ => None,
                }));
                (!problems.is_empty())
                    .then(|| format!("GPUs not all measured or held: {}", problems.join("; ")))
            }
            Err(e) => Some(format!("GPUs not measured: {e}")),
        };
        Started {
            warning,
            note: (!log.is_empty()).then(|| log.join("; ")),
        }
    }
}

fn unmeasured(e: impl std::fmt::Display) -> Started {
    Started {
        warning: Some(format!("GPUs not measured: {e}")),
        note: None,
    }
}

/// The power limits, in watts, that every one of the GPUs `minors` accepts (None when
/// none of them says): a limit inside it is refused by none.
fn nvml_range_w(nvml: &Nvml, minors: &[u32]) -> Option<(Watts, Watts)> {
    let found = nvml.gpus_by_minor(minors).ok()?;
    let mut range: Option<(f64, f64)> = None;
    for r in found
        .iter()
        .filter_map(|(_, g)| g.as_ref().ok()?.power_limit_range().ok())
    {
        let (lo, hi) = (f64::from(r.min_mw) / 1e3, f64::from(r.max_mw) / 1e3);
        range = Some(range.map_or((lo, hi), |(l, h)| (l.max(lo), h.min(hi))));
    }
    range.map(|(lo, hi)| (Watts(lo), Watts(hi)))
}
