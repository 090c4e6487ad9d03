//! How many nodes, and which: the frequency search repeated for each allowed node count.
//!
//! Models such as amdahl and iso_energy depend on the node count, so the table is
//! rebuilt through the [`Predictor`] for every count n. When a job may use fewer
//! nodes than it holds, the subset matters on a mixed cluster. Two subsets are
//! tried per n, each a prefix of a ranking of the nodes by their predicted
//! behaviour with every node at maximum frequency:
//! - fastest first (least compute time, then least energy): a bulk-synchronous
//!   job waits for its slowest node, so the n fastest nodes give the shortest
//!   makespan n nodes can give;
//! - most frugal first (least energy at maximum frequency, then least time): the
//!   n nodes that spend least on their share.
//!
//! Equal nodes keep the job's (Slurm's) order, so on a uniform cluster both
//! rankings give the first n nodes. Every candidate is scored with the same
//! [`Goal`] and baseline, so counts and subsets compare fairly; max_ee compares
//! with the model's EE where it defines one.

use super::Algorithm;
use super::{Goal, Limits, Objective, OptimizeError, Optimum};
use crate::model::{Config, NodeSlot, Prediction, Predictor, SweepTable};

/// What to search: candidate nodes, how many of them, and what for.
#[derive(Debug, Clone)]
pub struct Search<'a> {
    /// Candidate nodes in the job's order; the baseline runs the first `max_nodes` of them at maximum frequency.
    pub slots: &'a [NodeSlot],
    /// Fewest nodes to use (at least 1).
    pub min_nodes: usize,
    /// Most nodes to use (at most `slots.len()`).
    pub max_nodes: usize,
    /// What to optimize.
    pub objective: Objective,
    /// Bounds on energy, power and time.
    pub limits: Limits,
    /// Least iso-energy-efficiency allowed; needs a model that defines EE.
    pub min_ee: Option<f64>,
    /// Which optimizer searches the frequencies.
    pub algorithm: Algorithm,
    /// No node above this frequency in GHz (an energy budget's warning level); the
    /// baseline stays every node at its maximum.
    pub max_freq_ghz: Option<f64>,
}

/// The outcome of a [`Search`].
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The chosen nodes and frequencies, in the job's order.
    pub config: Config,
    /// What the model predicts for it.
    pub prediction: Prediction,
    /// Every candidate node at maximum frequency.
    pub baseline: Prediction,
    /// The objective's value.
    pub objective: f64,
    /// Whether every limit is met.
    pub feasible: bool,
    /// Why not, when infeasible.
    pub reason: String,
    /// Configurations evaluated over all node counts.
    pub candidates: u64,
}

/// Run one optimizer over one table.
pub fn optimize(
    algorithm: Algorithm,
    table: &SweepTable,
    goal: &Goal,
) -> Result<Optimum, OptimizeError> {
    match algorithm {
        Algorithm::Exact => super::sweep::sweep(table, goal),
        Algorithm::Paper => super::paper::algorithm1(table, goal),
        Algorithm::Brute => super::brute::brute(table, goal),
    }
}

/// Search node counts and frequencies for the best configuration.
pub fn decide(predictor: &dyn Predictor, search: &Search) -> Result<Decision, OptimizeError> {
    let all = search.slots.len();
    let hi = search.max_nodes.min(all);
    let lo = search.min_nodes.max(1);
    if all == 0 || lo > hi {
        return Err(OptimizeError::Unsupported(format!(
            "cannot use {}-{} nodes out of the {} available",
            search.min_nodes, search.max_nodes, all
        )));
    }
    let full = predictor.table(search.slots)?;
    super::check_table(&full)?;
    // The baseline is what the job would get unmanaged: its first `hi` nodes (the
    // whole allocation, or the first nodes Slurm would hand out) at maximum frequency.
    let baseline = if hi == all {
        full.evaluate(&full.max_pick())
    } else {
        let first = predictor.table(&search.slots[..hi])?;
        super::check_table(&first)?;
        first.evaluate(&first.max_pick())
    };
    let base_goal = Goal {
        objective: search.objective,
        limits: search.limits,
        baseline_time_s: baseline.time_s,
        baseline_energy_j: baseline.energy_j,
    };

    let rankings = rankings(&full);
    let mut best: Option<(super::Assessment, Decision, Goal)> = None;
    let mut candidates = 0u64;
    for n in lo..=hi {
        let mut tried: Vec<Vec<usize>> = Vec::new();
        for rank in &rankings {
            let mut subset: Vec<usize> = rank[..n].to_vec();
            subset.sort_unstable();
            if tried.contains(&subset) {
                continue;
            }
            let owned;
            let table = if n == all {
                &full
            } else {
                let slots: Vec<NodeSlot> =
                    subset.iter().map(|&i| search.slots[i].clone()).collect();
                owned = predictor.table(&slots)?;
                &owned
            };
            tried.push(subset);
            let goal = goal_for(predictor, table, &base_goal, search.min_ee)?;
            let opt = match search.max_freq_ghz {
                Some(ghz) => optimize(search.algorithm, &table.capped(ghz), &goal)?,
                None => optimize(search.algorithm, table, &goal)?,
            };
            candidates += opt.candidates;
            let config = table.config(&opt.pick);
            let prediction = table.evaluate(&opt.pick);
            let ee = predictor.efficiency(&config, &prediction);
            let a = goal.assess(prediction.time_s, prediction.energy_j, ee);
            if best.as_ref().is_none_or(|b| a.better_than(&b.0)) {
                let decision = Decision {
                    config,
                    prediction,
                    baseline: baseline.clone(),
                    objective: a.value,
                    feasible: a.feasible,
                    reason: String::new(),
                    candidates: 0,
                };
                best = Some((a, decision, goal));
            }
        }
    }
    let (_, mut decision, goal) =
        best.ok_or_else(|| OptimizeError::Unsupported("no node count to search".into()))?;
    decision.candidates = candidates;
    if !decision.feasible {
        decision.reason = goal.explain(decision.prediction.time_s, decision.prediction.energy_j);
    }
    Ok(decision)
}

/// The goal for one node set: min_ee becomes an energy cap, since EE = E1 / E and
/// E1 (the one-node energy of the problem) is fixed: EE >= m  <=>  E <= E1 / m.
fn goal_for(
    predictor: &dyn Predictor,
    table: &SweepTable,
    base: &Goal,
    min_ee: Option<f64>,
) -> Result<Goal, OptimizeError> {
    let Some(m) = min_ee else { return Ok(*base) };
    let top = table.max_pick();
    let config = table.config(&top);
    let prediction = table.evaluate(&top);
    let ee = predictor.efficiency(&config, &prediction).ok_or_else(|| {
        OptimizeError::Unsupported(format!(
            "the policy sets min_ee, but the {} model does not define iso-energy-efficiency; \
             use an iso_energy profile or a policy without min_ee",
            predictor.name()
        ))
    })?;
    let e1 = ee * prediction.energy_j;
    let mut goal = *base;
    let cap = e1 / m;
    goal.limits.energy_cap_j = Some(goal.limits.energy_cap_j.map_or(cap, |c| c.min(cap)));
    Ok(goal)
}

/// Node indices ranked fastest first and most frugal first, with every node at maximum frequency.
fn rankings(full: &SweepTable) -> [Vec<usize>; 2] {
    let at_max: Vec<(f64, f64)> = full
        .nodes
        .iter()
        .map(|row| {
            let c = row.choices[row.choices.len() - 1];
            (c.compute_s, c.dynamic_j + row.static_w * c.compute_s)
        })
        .collect();
    let mut fast: Vec<usize> = (0..full.nodes.len()).collect();
    let mut frugal = fast.clone();
    fast.sort_by(|&a, &b| {
        at_max[a]
            .0
            .total_cmp(&at_max[b].0)
            .then(at_max[a].1.total_cmp(&at_max[b].1))
            .then(a.cmp(&b))
    });
    frugal.sort_by(|&a, &b| {
        at_max[a]
            .1
            .total_cmp(&at_max[b].1)
            .then(at_max[a].0.total_cmp(&at_max[b].0))
            .then(a.cmp(&b))
    });
    [fast, frugal]
}
