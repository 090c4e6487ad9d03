//! Savings measured against measured baselines: runs of the same application on the
//! same allocation (node count and node types) that ran with every node at its highest
//! frequency (monitor runs and the site's baseline samples). Nothing here uses the
//! model: a figure is only as good as the runs it rests on, so each one says how many.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{JobReport, RunState, Warning};

/// Runs of a policy a verdict on its slowdown needs: one run may be noise.
pub const RUNS_TO_JUDGE: usize = 3;

/// The spread of a set of figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// How many figures.
    pub n: usize,
    /// The smallest.
    pub min: f64,
    /// The median.
    pub median: f64,
    /// The largest.
    pub max: f64,
}

impl Spread {
    /// The spread of `v`; `None` when it is empty.
    pub fn of(v: &[f64]) -> Option<Spread> {
        let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        if s.is_empty() {
            return None;
        }
        s.sort_by(f64::total_cmp);
        let median = greenup_core::stats::median_of_sorted(&s)?;
        Some(Spread {
            n: s.len(),
            min: s[0],
            median,
            max: s[s.len() - 1],
        })
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.n == 1 {
            write!(f, "{:.1}%", self.median)
        } else {
            write!(
                f,
                "{:.1}% (min {:.1}%, max {:.1}%)",
                self.median, self.min, self.max
            )
        }
    }
}

/// A run's measured wall time and energy, when it completed and both were measured.
fn measured(r: &JobReport) -> Option<(f64, f64)> {
    if r.state != RunState::Completed || r.ran_too_short_to_compare() {
        return None;
    }
    match (r.measured.time_s, r.measured.energy_j) {
        (Some(t), Some(e)) if t > 0.0 && e > 0.0 => Some((t, e)),
        _ => None,
    }
}

/// The measured baseline of one allocation shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// The allocation, e.g. `4 nodes: 2 epyc, 2 xeon`.
    pub shape: String,
    /// Wall times of the baseline runs, in seconds.
    pub time_s: Spread,
    /// Energies of the baseline runs, in joules.
    pub energy_j: Spread,
}

/// The measured baselines among `reports`, by allocation shape.
pub fn baselines(reports: &[JobReport]) -> BTreeMap<String, Baseline> {
    let mut runs: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for r in reports.iter().filter(|r| r.baseline_run) {
        if let Some((t, e)) = measured(r) {
            let slot = runs.entry(r.shape.as_str()).or_default();
            slot.0.push(t);
            slot.1.push(e);
        }
    }
    runs.into_iter()
        .filter_map(|(shape, (t, e))| {
            Some((
                shape.to_string(),
                Baseline {
                    shape: shape.to_string(),
                    time_s: Spread::of(&t)?,
                    energy_j: Spread::of(&e)?,
                },
            ))
        })
        .collect()
}

/// One run against the measured baseline of its allocation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Against {
    /// Baseline runs the figures rest on.
    pub baseline_runs: usize,
    /// Their median wall time, in seconds.
    pub baseline_time_s: f64,
    /// Their median energy, in joules.
    pub baseline_energy_j: f64,
    /// Energy saved against that median, in percent (negative: more was used).
    pub saving_pct: f64,
    /// Time lost against that median, in percent (negative: the run was faster).
    pub slowdown_pct: f64,
}

/// Run `r` against baseline `b`; `None` when `r` is itself a baseline or unmeasured.
pub fn against(r: &JobReport, b: &Baseline) -> Option<Against> {
    if r.baseline_run || r.shape != b.shape {
        return None;
    }
    let (t, e) = measured(r)?;
    Some(Against {
        baseline_runs: b.time_s.n,
        baseline_time_s: b.time_s.median,
        baseline_energy_j: b.energy_j.median,
        saving_pct: (b.energy_j.median - e) / b.energy_j.median * 100.0,
        slowdown_pct: (t - b.time_s.median) / b.time_s.median * 100.0,
    })
}

/// A policy's measured results for one allocation shape of an application.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyMeasured {
    /// Policy name.
    pub policy: String,
    /// The allocation, e.g. `4 nodes: 2 epyc, 2 xeon`.
    pub shape: String,
    /// Baseline runs the figures rest on.
    pub baseline_runs: usize,
    /// Measured saving of each run against the baselines' median, in percent.
    pub saving_pct: Spread,
    /// Measured slowdown of each run against the baselines' median, in percent.
    pub slowdown_pct: Spread,
    /// The saving the model predicted for the same runs against its predicted baseline.
    pub predicted_saving_pct: Option<Spread>,
    /// The policy's `max_slowdown`, in percent, if it has one.
    pub max_slowdown_pct: Option<f64>,
    /// Whether the median measured slowdown of at least [`RUNS_TO_JUDGE`] runs exceeds
    /// `max_slowdown_pct`.
    pub missed: bool,
}

impl PolicyMeasured {
    /// One line saying the policy missed its target, for reports and holds.
    pub fn miss_line(&self) -> Option<String> {
        let cap = self.max_slowdown_pct.filter(|_| self.missed)?;
        Some(format!(
            "policy {} missed its max_slowdown {cap:.1}% on {}: median measured slowdown {:.1}% over {} runs against {} measured baseline runs",
            self.policy,
            self.shape,
            self.slowdown_pct.median,
            self.slowdown_pct.n,
            self.baseline_runs
        ))
    }
}

/// Each policy's measured saving and slowdown among `reports` (one application's),
/// per allocation shape that has measured baselines; `max_slowdown` gives a policy's
/// target as a fraction (0.1 = 10 %).
pub fn by_policy(
    reports: &[JobReport],
    max_slowdown: impl Fn(&str) -> Option<f64>,
) -> Vec<PolicyMeasured> {
    let bases = baselines(reports);
    type Runs = (Vec<f64>, Vec<f64>, Vec<f64>);
    let mut groups: BTreeMap<(&str, &str), Runs> = BTreeMap::new();
    for r in reports.iter().filter(|r| ran_as_planned(r)) {
        let Some(a) = bases.get(&r.shape).and_then(|b| against(r, b)) else {
            continue;
        };
        let g = groups
            .entry((r.policy.as_str(), r.shape.as_str()))
            .or_default();
        g.0.push(a.saving_pct);
        g.1.push(a.slowdown_pct);
        if let Some(p) = r.predicted_saving_pct() {
            g.2.push(p);
        }
    }
    groups
        .into_iter()
        .filter_map(|((policy, shape), (saving, slowdown, predicted))| {
            let slowdown_pct = Spread::of(&slowdown)?;
            let max_slowdown_pct = max_slowdown(policy).map(|f| f * 100.0);
            let missed = slowdown_pct.n >= RUNS_TO_JUDGE
                && max_slowdown_pct.is_some_and(|cap| slowdown_pct.median > cap);
            Some(PolicyMeasured {
                policy: policy.to_string(),
                shape: shape.to_string(),
                baseline_runs: bases.get(shape).map_or(0, |b| b.time_s.n),
                saving_pct: Spread::of(&saving)?,
                slowdown_pct,
                predicted_saving_pct: Spread::of(&predicted),
                max_slowdown_pct,
                missed,
            })
        })
        .collect()
}

/// Whether the job's policy decided how it ran: a run greenup could not plan (it ran
/// unchanged or was refused) or that the power budget held back says nothing about
/// the policy.
fn ran_as_planned(r: &JobReport) -> bool {
    !r.warnings
        .iter()
        .any(|w| matches!(w, Warning::Fallback(_) | Warning::BudgetLimited(_)))
}

/// The allocation shape of a job: its node count and how many nodes of each type.
pub fn shape_of<'a>(types: impl IntoIterator<Item = &'a str>) -> String {
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    let mut n = 0;
    for t in types {
        *count.entry(t).or_default() += 1;
        n += 1;
    }
    let parts: Vec<String> = count.iter().map(|(t, c)| format!("{c} {t}")).collect();
    format!(
        "{n} node{}: {}",
        if n == 1 { "" } else { "s" },
        parts.join(", ")
    )
}
