//! One stored run as the models learn from it: what each node measured, the run's
//! decision and how it ended, and whether it is fit to learn from ([`check`]). Refinement
//! (`profile::refine`), first versions (`profile::learn`) and the iso_energy overhead fit
//! (`profile::iso_overheads`) all read runs through this one shape.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{Config, NodeSetting};
use crate::record::{JobRecord, Verdict};
use crate::record::{RunState, SHORT_FRACTION, ran_far_shorter};
use crate::site::Site;

/// What one node measured in one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeOutcome {
    /// Slurm node name.
    pub name: String,
    /// Node type from the site config.
    pub node_type: String,
    /// The frequency the node actually ran at, in GHz.
    pub freq_ghz: f64,
    /// Measured joules of this node; `None` when the node has no meter.
    pub energy_j: Option<f64>,
    /// Seconds this node spent computing (not blocked), when something measured it.
    pub compute_s: Option<f64>,
    /// Seconds this node spent inside MPI (blocked or communicating), when measured.
    #[serde(default)]
    pub comm_s: Option<f64>,
    /// MPI calls this node's ranks made, when the MPI runtime counted them.
    #[serde(default)]
    pub calls: Option<u64>,
    /// Bytes this node's ranks moved in MPI calls, when the MPI runtime counted them.
    #[serde(default)]
    pub bytes: Option<u64>,
    /// What the job's GPUs on this node did, when NVML measured them with their clock
    /// left alone.
    #[serde(default)]
    pub gpu: Option<GpuUse>,
}

/// The job's GPUs on one node, as a profile learns from them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GpuUse {
    /// Seconds they computed: NVML's mean utilization times the run.
    pub busy_s: f64,
    /// Their mean SM clock while the job ran, MHz.
    pub sm_mhz: Option<f64>,
    /// Watts one of them drew while busy: its mean power with the static power of its idle
    /// share taken out, over its busy share.
    pub busy_w: Option<f64>,
}

impl GpuUse {
    /// From a node's NVML readings over a run of `time_s` seconds, with `static_w` the
    /// static watts of one GPU of its type. None without a utilization to go by.
    pub fn of(g: &crate::record::NodeGpu, time_s: f64, static_w: f64) -> Option<GpuUse> {
        let u = g
            .util_pct
            .filter(|u| u.is_finite() && (0.0..=100.0).contains(u) && time_s > 0.0)?
            / 100.0;
        let per_gpu_w = g
            .avg_power_w
            .map(|w| w.0)
            .filter(|w| w.is_finite() && *w >= 0.0 && g.gpus > 0)
            .map(|w| w / f64::from(g.gpus));
        Some(GpuUse {
            busy_s: u * time_s,
            sm_mhz: g.sm_mhz.filter(|m| m.is_finite() && *m > 0.0),
            // A GPU mostly idle says little of its busy power.
            busy_w: per_gpu_w
                .filter(|_| u >= 0.1)
                .map(|w| ((w - static_w * (1.0 - u)) / u).max(0.0)),
        })
    }
}

/// One finished job, as refinement sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Slurm job id.
    pub job_id: u64,
    /// How the job ended.
    pub state: RunState,
    /// Measured wall time in seconds.
    pub time_s: f64,
    /// The wall time the decision predicted, in seconds.
    pub predicted_time_s: f64,
    /// Every node the job ran on.
    pub nodes: Vec<NodeOutcome>,
    /// Whether its decision locked GPU clocks: the models predict the CPUs' side of a
    /// run whose GPUs keep their own clock, so such a run cannot refine them.
    #[serde(default)]
    pub gpu_locked: bool,
}

impl Outcome {
    /// The configuration the run ran at: each node's type and frequency.
    pub(crate) fn config(&self) -> Config {
        Config {
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeSetting {
                    gpu_mhz: None,
                    name: n.name.clone(),
                    node_type: n.node_type.clone(),
                    freq_ghz: n.freq_ghz,
                })
                .collect(),
        }
    }

    /// The run's measured joules over all its nodes, when every node measured them.
    pub(crate) fn energy_j(&self) -> Option<f64> {
        self.nodes.iter().map(|n| n.energy_j).sum()
    }

    /// Node `n`'s compute and communication seconds in this run, when the MPI runtime
    /// measured its compute time (communication is the rest of the wall time where the
    /// runtime did not give it).
    pub(crate) fn split(&self, n: &NodeOutcome) -> Option<(f64, f64)> {
        n.compute_s
            .map(|c| (c, n.comm_s.unwrap_or(self.time_s - c).max(0.0)))
    }

    /// The run's communication time as paper 004 counts it: the least any measured node
    /// spent blocked. Every other node's blocked time adds its wait for the slowest
    /// node, which depends on the frequencies the run chose, not on the application.
    pub(crate) fn comm_floor_s(&self) -> Option<f64> {
        self.nodes
            .iter()
            .filter_map(|n| self.split(n).map(|(_, blocked)| blocked))
            .min_by(f64::total_cmp)
    }

    /// The run's time blocked in communication (amdahl's T_B), the mean over its nodes,
    /// when every node measured it.
    pub(crate) fn blocked_s(&self) -> Option<f64> {
        let all: Option<Vec<f64>> = self.nodes.iter().map(|n| n.comm_s).collect();
        all.filter(|v| !v.is_empty())
            .map(|v| v.iter().sum::<f64>() / v.len() as f64)
            .filter(|b| (0.0..=self.time_s).contains(b))
    }
}

/// Why an outcome does not refine the profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outlier {
    /// The job did not complete (failed, cancelled, timed out, still running).
    NotCompleted(RunState),
    /// The run was far shorter than predicted.
    TooShort {
        /// Measured seconds.
        time_s: f64,
        /// Predicted seconds.
        predicted_s: f64,
    },
    /// Some nodes have no energy measurement.
    Unmeasured(Vec<String>),
    /// A measured value is not a finite positive number.
    BadValue(String),
    /// Its decision locked GPU clocks, whose stretch of the run the models leave out.
    GpuLocked,
}

impl fmt::Display for Outlier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outlier::NotCompleted(s) => write!(f, "job ended {}", s.as_str()),
            Outlier::TooShort {
                time_s,
                predicted_s,
            } => write!(
                f,
                "ran {time_s:.0} s, under {:.0}% of the predicted {predicted_s:.0} s",
                SHORT_FRACTION * 100.0
            ),
            Outlier::Unmeasured(nodes) => write!(f, "unmeasured nodes ({})", nodes.join(",")),
            Outlier::BadValue(what) => write!(f, "{what}"),
            Outlier::GpuLocked => write!(
                f,
                "its decision locked the GPUs' clocks, which the models do not predict"
            ),
        }
    }
}

/// Whether an outcome may refine the profile, and if not, why.
pub fn check(o: &Outcome) -> Result<(), Outlier> {
    if o.state != RunState::Completed {
        return Err(Outlier::NotCompleted(o.state));
    }
    if o.nodes.is_empty() {
        return Err(Outlier::BadValue("the outcome lists no nodes".into()));
    }
    if o.gpu_locked {
        return Err(Outlier::GpuLocked);
    }
    if !(o.time_s.is_finite() && o.time_s > 0.0) {
        return Err(Outlier::BadValue(format!(
            "wall time {} s is not positive",
            o.time_s
        )));
    }
    if ran_far_shorter(o.time_s, o.predicted_time_s) {
        return Err(Outlier::TooShort {
            time_s: o.time_s,
            predicted_s: o.predicted_time_s,
        });
    }
    let unmeasured: Vec<String> = o
        .nodes
        .iter()
        .filter(|n| n.energy_j.is_none())
        .map(|n| n.name.clone())
        .collect();
    if !unmeasured.is_empty() {
        return Err(Outlier::Unmeasured(unmeasured));
    }
    for n in &o.nodes {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        if n.freq_ghz.is_nan() {
            return Err(Outlier::BadValue(format!(
                "node {} did not report the frequency it ran at",
                n.name
            )));
        }
        if !ok(n.freq_ghz)
            || !n.energy_j.is_some_and(ok)
            || n.compute_s.is_some_and(|c| !c.is_finite() || c < 0.0)
            || n.comm_s.is_some_and(|c| !c.is_finite() || c < 0.0)
        {
            return Err(Outlier::BadValue(format!(
                "node {} has a measurement that is not a positive number",
                n.name
            )));
        }
    }
    Ok(())
}

/// The outcomes that may refine, and the job ids left out with their reason.
pub fn usable(outcomes: &[Outcome]) -> (Vec<&Outcome>, Vec<(u64, Outlier)>) {
    let mut ok = Vec::new();
    let mut left_out = Vec::new();
    for o in outcomes {
        match check(o) {
            Ok(()) => ok.push(o),
            Err(why) => left_out.push((o.job_id, why)),
        }
    }
    (ok, left_out)
}

/// A stored job as refinement sees it. With an applied plan: the nodes it planned, each
/// at the frequency the node reported (else the planned one). Without one (a monitor run,
/// a baseline sample, a job run unchanged): every node the job held, of its type in
/// `site`, at the frequency the node reported it ran at, compared for length with the
/// all-f_max baseline greenup predicted when it made a plan. `None` for a refused job
/// (greenup did not manage it) and for a job on a node `site` does not know.
pub fn outcome_from_record(rec: &JobRecord, site: &Site) -> Option<Outcome> {
    if rec.decision.verdict == Verdict::Refused {
        return None;
    }
    let time_s = rec.elapsed_s().map_or(0.0, |t| t.0);
    let node = |name: &str, node_type: &str, planned_ghz: Option<f64>, gpu_top: bool| {
        let out = rec.outcomes.iter().find(|o| o.node == name);
        NodeOutcome {
            gpu: out
                .and_then(|o| o.gpu.as_deref())
                .filter(|_| gpu_top)
                .and_then(|g| {
                    let static_w = site.gpu_types.get(node_type).map_or(0.0, |t| t.static_w);
                    GpuUse::of(g, time_s, static_w)
                }),
            name: name.to_string(),
            node_type: node_type.to_string(),
            // NaN when nothing says: `check` then leaves the run out, naming the node.
            freq_ghz: out
                .and_then(|o| o.freq_ghz)
                .map(|f| f.0)
                .or(planned_ghz)
                .unwrap_or(f64::NAN),
            energy_j: out.and_then(|o| o.measured_energy_j()).map(|e| e.0),
            compute_s: out.and_then(|o| o.comm.as_ref()).map(|c| c.compute_s.0),
            comm_s: out.and_then(|o| o.comm.as_ref()).map(|c| c.comm_s.0),
            calls: out.and_then(|o| o.comm.as_ref()).map(|c| c.calls),
            bytes: out.and_then(|o| o.comm.as_ref()).map(|c| c.bytes),
        }
    };
    let (nodes, predicted_time_s) = match rec.decision.applied_plan() {
        Some(plan) => (
            plan.nodes
                .iter()
                .map(|n| {
                    node(
                        &n.name,
                        &n.node_type,
                        Some(n.freq_ghz.0),
                        n.gpu_mhz.is_none(),
                    )
                })
                .collect(),
            plan.predicted.time_s.0,
        ),
        None => (
            rec.request
                .nodes
                .iter()
                .map(|n| Some(node(n, site.nodes.get(n)?, None, true)))
                .collect::<Option<Vec<_>>>()?,
            rec.decision
                .plan
                .as_ref()
                .map_or(f64::NAN, |p| p.baseline.time_s.0),
        ),
    };
    let gpu_locked = rec
        .decision
        .applied_plan()
        .is_some_and(|p| p.nodes.iter().any(|n| n.gpu_mhz.is_some()));
    Some(Outcome {
        job_id: rec.job_id,
        state: rec.run_state(),
        time_s,
        predicted_time_s,
        nodes,
        gpu_locked,
    })
}
