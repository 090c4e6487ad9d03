//! Searches over a model's [`SweepTable`]: which frequency each node runs at,
//! and (in [`nodes`]) how many nodes a job uses.
//!
//! Three optimizers share one notion of "better" ([`Goal`]):
//! - [`sweep::sweep`], the exact sweep over sorted makespan bounds (the default);
//! - [`paper::algorithm1`], paper 004's Algorithm 1 as published, for comparison;
//! - [`brute::brute`], every combination, the oracle for small instances.
//!
//! A table with synchronised steps ([`crate::model::StepTable`]) is searched exactly by
//! [`steps::exact`] instead of the sweep.

pub mod brute;
pub mod nodes;
pub mod paper;
pub mod steps;
pub mod sweep;
pub mod testbed;

use serde::{Deserialize, Serialize};

use crate::model::SweepTable;

pub use greenup_core::plan::Algorithm;

/// What a policy optimizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Least energy.
    MinEnergy,
    /// Shortest wall time.
    MinTime,
    /// Paper 004's MaxDist: largest P_norm - E_norm against the all-max baseline.
    MaxDist,
    /// Least energy x time.
    MinEdp,
    /// Least energy x time squared.
    MinEd2p,
    /// Highest iso-energy-efficiency EE = E1 / Ep (paper 000).
    MaxEe,
}

impl Objective {
    /// Every objective, in the order the docs list them.
    pub const ALL: [Objective; 6] = [
        Objective::MinEnergy,
        Objective::MinTime,
        Objective::MaxDist,
        Objective::MinEdp,
        Objective::MinEd2p,
        Objective::MaxEe,
    ];

    /// The name written in policy files.
    pub fn name(self) -> &'static str {
        match self {
            Objective::MinEnergy => "min_energy",
            Objective::MinTime => "min_time",
            Objective::MaxDist => "max_dist",
            Objective::MinEdp => "min_edp",
            Objective::MinEd2p => "min_ed2p",
            Objective::MaxEe => "max_ee",
        }
    }

    /// The objective called `name` in a policy file.
    pub fn parse(name: &str) -> Option<Objective> {
        Objective::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Whether a larger objective value is better.
    pub fn maximizes(self) -> bool {
        matches!(self, Objective::MaxDist | Objective::MaxEe)
    }
}

/// Upper bounds a plan must respect; `None` means no bound.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Limits {
    /// Most joules the job may use.
    pub energy_cap_j: Option<f64>,
    /// Most average watts the job may draw.
    pub power_cap_w: Option<f64>,
    /// The seconds the job may run, where it has a limit of seconds; never planned past.
    pub time_limit_s: Option<f64>,
    /// Most slowdown against the baseline, as a fraction (0.1 = 10 % longer).
    pub max_slowdown: Option<f64>,
}

/// An objective, its limits and the baseline it is measured against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Goal {
    /// What to optimize.
    pub objective: Objective,
    /// Bounds on energy, power and time.
    pub limits: Limits,
    /// Wall time of the baseline (every node at maximum frequency), for max_dist and max_slowdown.
    pub baseline_time_s: f64,
    /// Energy of the baseline, for max_dist.
    pub baseline_energy_j: f64,
}

/// How good one configuration is under a [`Goal`]; see [`Assessment::better_than`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Assessment {
    /// Whether every limit is met.
    pub feasible: bool,
    /// Relative excess over the power, time and energy bounds (0 when met), in that priority.
    pub excess: [f64; 3],
    /// The objective's value (higher is better for max_*).
    pub value: f64,
    /// Primary and secondary keys, lower is better.
    key: (f64, f64),
}

impl Assessment {
    /// Whether `self` is strictly better than `other`.
    ///
    /// A feasible configuration beats an infeasible one. Among infeasible ones the
    /// closest wins: least power excess first (a site cap protects the machine),
    /// then time (past the limit Slurm kills the job), then energy.
    pub fn better_than(&self, other: &Assessment) -> bool {
        match (self.feasible, other.feasible) {
            (true, false) => true,
            (false, true) => false,
            (true, true) => self.key < other.key,
            (false, false) => (self.excess, self.key) < (other.excess, other.key),
        }
    }
}

impl Goal {
    /// The tightest bound on wall time: the time limit and the allowed slowdown.
    pub fn time_cap_s(&self) -> Option<f64> {
        let slow = self
            .limits
            .max_slowdown
            .map(|s| self.baseline_time_s * (1.0 + s));
        match (self.limits.time_limit_s, slow) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Assess a configuration of wall time `t` and energy `e`. `ee` is its
    /// iso-energy-efficiency when the model defines it; max_ee ranks by it when
    /// given and by energy otherwise (E1 is fixed for a problem, so EE = E1/E).
    pub fn assess(&self, t: f64, e: f64, ee: Option<f64>) -> Assessment {
        let p = if t > 0.0 { e / t } else { 0.0 };
        let over = |v: f64, cap: Option<f64>| match cap {
            Some(c) if v > c => {
                if c > 0.0 {
                    v / c - 1.0
                } else {
                    f64::INFINITY
                }
            }
            _ => 0.0,
        };
        let excess = [
            over(p, self.limits.power_cap_w),
            over(t, self.time_cap_s()),
            over(e, self.limits.energy_cap_j),
        ];
        let feasible = excess.iter().all(|&x| x == 0.0);
        let (value, key) = match self.objective {
            Objective::MinEnergy => (e, (e, t)),
            Objective::MinTime => (t, (t, e)),
            Objective::MaxDist => {
                let d = ratio(self.baseline_time_s, t) - ratio(e, self.baseline_energy_j);
                (d, (-d, e))
            }
            Objective::MinEdp => (e * t, (e * t, t)),
            Objective::MinEd2p => (e * t * t, (e * t * t, t)),
            Objective::MaxEe => match ee {
                Some(ee) => (ee, (-ee, t)),
                None => (ratio(self.baseline_energy_j, e), (e, t)),
            },
        };
        Assessment {
            feasible,
            excess,
            value,
            key,
        }
    }

    /// Why an assessed configuration is infeasible, in words; empty when it is feasible.
    pub fn explain(&self, t: f64, e: f64) -> String {
        let p = if t > 0.0 { e / t } else { 0.0 };
        let mut parts = Vec::new();
        if let Some(c) = self.limits.power_cap_w.filter(|&c| p > c) {
            parts.push(format!("power cap {c:.1} W exceeded (closest {p:.1} W)"));
        }
        if let Some(c) = self.limits.time_limit_s.filter(|&c| t > c) {
            parts.push(format!("time limit {c:.1} s exceeded (closest {t:.1} s)"));
        }
        if let Some(s) = self.limits.max_slowdown {
            let c = self.baseline_time_s * (1.0 + s);
            if t > c {
                parts.push(format!(
                    "max slowdown {s} ({c:.1} s) exceeded (closest {t:.1} s)"
                ));
            }
        }
        if let Some(c) = self.limits.energy_cap_j.filter(|&c| e > c) {
            parts.push(format!("energy cap {c:.1} J exceeded (closest {e:.1} J)"));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(
                "no configuration meets every constraint: {}; planned the closest one \
                 (least power excess first, then time, then energy)",
                parts.join("; ")
            )
        }
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// The best configuration an optimizer found in one table.
#[derive(Debug, Clone, PartialEq)]
pub struct Optimum {
    /// One choice index per node of the table.
    pub pick: Vec<usize>,
    /// Predicted wall time in seconds.
    pub time_s: f64,
    /// Predicted energy in joules.
    pub energy_j: f64,
    /// How the pick scores under the goal.
    pub assessment: Assessment,
    /// Configurations evaluated.
    pub candidates: u64,
    /// Something the plan's reason should say about how the optimum was found.
    pub note: Option<String>,
}

impl Optimum {
    /// Build the result for `pick`, recomputing its totals exactly from the table.
    pub fn of(table: &SweepTable, goal: &Goal, pick: Vec<usize>, candidates: u64) -> Optimum {
        let (time_s, energy_j) = table.totals(&pick);
        let assessment = goal.assess(time_s, energy_j, None);
        Optimum {
            pick,
            time_s,
            energy_j,
            assessment,
            candidates,
            note: None,
        }
    }

    /// Average power in watts.
    pub fn avg_power_w(&self) -> f64 {
        if self.time_s > 0.0 {
            self.energy_j / self.time_s
        } else {
            0.0
        }
    }
}

/// Why an optimizer cannot search a table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptimizeError {
    /// A node offers no frequency.
    #[error("node {0} has no frequency to choose from")]
    NoChoices(String),
    /// A time, energy or power in the table is negative or not finite.
    #[error("node {node}: {what} is {value}, which is not a finite non-negative number")]
    BadValue {
        /// The node.
        node: String,
        /// Which quantity.
        what: &'static str,
        /// The value it had.
        value: f64,
    },
    /// Brute force was asked to search too many combinations.
    #[error(
        "brute force would evaluate {combinations} configurations (limit {limit}); use --algorithm exact"
    )]
    TooLarge {
        /// Configurations the search would evaluate.
        combinations: f64,
        /// The most it may.
        limit: u64,
    },
    /// A model error while building a table for a node count.
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    /// The policy needs a quantity the model does not define.
    #[error("{0}")]
    Unsupported(String),
    /// A table's step structure does not fit its nodes.
    #[error("step structure: {0}")]
    BadSteps(String),
}

/// Check that every number in `table` is usable by the optimizers.
pub fn check_table(table: &SweepTable) -> Result<(), OptimizeError> {
    let bad = |node: &str, what, value: f64| -> Result<(), OptimizeError> {
        if value.is_finite() && value >= 0.0 {
            Ok(())
        } else {
            Err(OptimizeError::BadValue {
                node: node.to_string(),
                what,
                value,
            })
        }
    };
    bad("(job)", "fixed time", table.fixed_time_s)?;
    bad("(job)", "fixed energy", table.fixed_energy_j)?;
    for n in &table.nodes {
        if n.choices.is_empty() {
            return Err(OptimizeError::NoChoices(n.name.clone()));
        }
        bad(&n.name, "static power", n.static_w)?;
        for c in &n.choices {
            bad(&n.name, "compute time", c.compute_s)?;
            bad(&n.name, "dynamic energy", c.dynamic_j)?;
        }
    }
    if let Some(s) = &table.steps {
        if s.group_of.len() != table.nodes.len() {
            return Err(OptimizeError::BadSteps(format!(
                "{} group indices for {} nodes",
                s.group_of.len(),
                table.nodes.len()
            )));
        }
        if let Some(g) = s.group_of.iter().find(|&&g| g >= s.groups.len()) {
            return Err(OptimizeError::BadSteps(format!(
                "group {g} of a node, but only {} groups",
                s.groups.len()
            )));
        }
        for (k, w) in s.weights.iter().enumerate() {
            if w.len() != s.groups.len() {
                return Err(OptimizeError::BadSteps(format!(
                    "class {k} has {} weights for {} groups",
                    w.len(),
                    s.groups.len()
                )));
            }
            if let Some(x) = w.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
                return Err(OptimizeError::BadSteps(format!(
                    "class {k} has weight {x}, not a finite number >= 0"
                )));
            }
        }
    }
    Ok(())
}
