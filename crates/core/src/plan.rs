//! A decision as greenup states it: the nodes to use, each node's type and frequency,
//! the predicted cost against the all-f_max baseline, and how the optimizer searched.
//! The decision library makes these; the protocol, the store, reports and the plugin
//! carry them.

use serde::{Deserialize, Serialize};

use crate::quantity::{Ghz, Joules, Seconds, Watts};

/// Which optimizer searches the frequencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// The exact sweep over sorted makespan bounds (the default).
    #[default]
    Exact,
    /// Paper 004's Algorithm 1, as published (a heuristic, for comparison).
    Paper,
    /// Every combination; only for small node counts.
    Brute,
}

/// Predicted totals of one configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Wall time.
    pub time_s: Seconds,
    /// Energy.
    pub energy_j: Joules,
    /// Average power.
    pub avg_power_w: Watts,
}

/// One node of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedNode {
    /// Slurm node name.
    pub name: String,
    /// Node type from the site config.
    #[serde(rename = "type")]
    pub node_type: String,
    /// Chosen CPU frequency.
    pub freq_ghz: Ghz,
    /// SM clock the node's GPUs are locked at, in MHz; absent: left at their top clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_mhz: Option<u32>,
}

/// How the search went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchInfo {
    /// `exact`, `paper` or `brute`.
    pub algorithm: Algorithm,
    /// Configurations the optimizer evaluated.
    pub candidates: u64,
    /// Microseconds the search took (the lookup's, when the plan was reused).
    pub elapsed_us: u64,
    /// Whether the plan was reused from an earlier job of the same shape instead of searched.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

/// A decision: what to run, what it is predicted to cost, and against what baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The policy applied.
    pub policy: String,
    /// Whether every constraint is met.
    pub feasible: bool,
    /// Why the plan is infeasible or was limited; empty when there is nothing to say.
    pub reason: String,
    /// Nodes the job should use.
    pub node_count: usize,
    /// Each node's type and frequency.
    pub nodes: Vec<PlannedNode>,
    /// Predicted outcome of the plan.
    pub predicted: Estimate,
    /// Predicted outcome with every allocated node at its maximum frequency.
    pub baseline: Estimate,
    /// The objective's value (lower is better for min_*, higher for max_*).
    pub objective: f64,
    /// How the search went.
    pub search: SearchInfo,
    /// What the plan counts for its nodes' GPUs, within `predicted` and `baseline`;
    /// None when its nodes have no GPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<PlannedGpus>,
}

/// The average watts a plan counts for GPUs: each GPU node's GPUs flat out at their top
/// clock for the whole job, or busy as long as the profile says at the clock chosen. The
/// models predict what RAPL measures; these come on top, and NVML measures them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlannedGpus {
    /// The GPUs of the plan's nodes, within `predicted`.
    pub planned_w: Watts,
    /// The GPUs of the baseline's nodes, within `baseline`.
    pub baseline_w: Watts,
}

impl Plan {
    /// The predicted and baseline estimates without the GPUs: what the models predict
    /// and RAPL measures, to compare with a job's RAPL energy.
    pub fn without_gpus(&self) -> (Estimate, Estimate) {
        let less = |e: Estimate, w: Watts| Estimate {
            time_s: e.time_s,
            energy_j: Joules(e.energy_j.0 - w.0 * e.time_s.0),
            avg_power_w: Watts(e.avg_power_w.0 - w.0),
        };
        match self.gpus {
            Some(g) => (
                less(self.predicted, g.planned_w),
                less(self.baseline, g.baseline_w),
            ),
            None => (self.predicted, self.baseline),
        }
    }
}
