//! The decision entry point: a job request, a site, a profile and a policy in;
//! a node count, a frequency per node and the predicted outcome out.
//!
//! `greenup plan`, greenupd and the cluster tests all decide through [`plan`].

use serde::{Deserialize, Serialize};

/// Which optimizer searches the frequencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
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

/// Which nodes a job may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeRequest {
    /// Exactly these nodes (a job's allocation), in Slurm order; with `min` set the
    /// plan may use fewer of them, but never fewer than `min`.
    List { names: Vec<String>, min: Option<usize> },
    /// Any `min..=max` nodes of the partition (or of the site).
    Count { min: usize, max: usize },
}

/// What a job asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRequest {
    /// Policy name, e.g. `min-energy`.
    pub policy: String,
    /// The nodes the job has or may have.
    pub nodes: NodeRequest,
    /// Slurm partition, for per-partition caps.
    pub partition: Option<String>,
    /// The user's energy cap in joules.
    pub energy_cap_j: Option<f64>,
    /// The user's (or ledger's) power cap in watts.
    pub power_cap_w: Option<f64>,
    /// The job's time limit in seconds; the plan never goes past it.
    pub time_limit_s: Option<f64>,
    /// The optimizer.
    pub algorithm: Algorithm,
}

/// Predicted totals of one configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Wall time in seconds.
    pub time_s: f64,
    /// Energy in joules.
    pub energy_j: f64,
    /// Average power in watts.
    pub avg_power_w: f64,
}

/// One node of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedNode {
    /// Slurm node name.
    pub name: String,
    /// Node type from the site config.
    #[serde(rename = "type")]
    pub node_type: String,
    /// Chosen CPU frequency in GHz.
    pub freq_ghz: f64,
}

/// How the search went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchInfo {
    /// `exact`, `paper` or `brute`.
    pub algorithm: Algorithm,
    /// Configurations the optimizer evaluated.
    pub candidates: u64,
    /// Microseconds the search took.
    pub elapsed_us: u64,
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
}
