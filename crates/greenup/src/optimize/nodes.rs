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
use super::steps::StepSearchError;
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
        Algorithm::Exact => exact(table, goal),
        Algorithm::Paper => super::paper::algorithm1(table, goal),
        Algorithm::Brute => super::brute::brute(table, goal),
    }
}

/// The exact optimum of a table: the step search when it has steps, else the sweep.
/// A step table too large to search exactly is swept as the max model would see it;
/// the pick is still scored with the steps, and the optimum's note says so.
pub fn exact(table: &SweepTable, goal: &Goal) -> Result<Optimum, OptimizeError> {
    if table.steps.is_none() {
        return super::sweep::sweep(table, goal);
    }
    match super::steps::exact(table, goal) {
        Ok(o) => Ok(o),
        Err(StepSearchError::Table(e)) => Err(e),
        Err(e) => {
            let flat = SweepTable {
                steps: None,
                ..table.clone()
            };
            let o = super::sweep::sweep(&flat, goal)?;
            let mut o = Optimum::of(table, goal, o.pick, o.candidates);
            o.note = Some(format!(
                "step model too large to search exactly: {e}; frequencies chosen by the max model's sweep"
            ));
            Ok(o)
        }
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
    // What the optimizers said of how they searched, for the reason.
    let mut notes: Vec<String> = Vec::new();
    // The job's own largest count is always tried: it is what the job runs on unmanaged.
    let counts = predictor.node_counts();
    let skips = |n: usize| n < hi && counts.is_some_and(|c| !c.allows(n));
    if let Some(c) = counts
        && (lo..hi).any(skips)
    {
        notes.push(format!("node counts: {c} (the profile's)"));
    }
    for n in lo..=hi {
        if skips(n) {
            continue;
        }
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
            let capped;
            let table = match search.max_freq_ghz {
                Some(ghz) => {
                    capped = table.capped(ghz);
                    &capped
                }
                None => table,
            };
            let scanned = match search.objective {
                Objective::MaxEe => ee_scan(predictor, table, &base_goal, search.min_ee),
                _ => None,
            };
            let Scored {
                config,
                prediction,
                assessment: a,
                goal,
                tried: evaluated,
            } = match scanned {
                Some(s) => s,
                None => {
                    let goal = goal_for(predictor, table, &base_goal, search.min_ee)?;
                    let opt = optimize(search.algorithm, table, &goal)?;
                    let config = table.config(&opt.pick);
                    let prediction = table.evaluate(&opt.pick);
                    let ee = predictor.efficiency(&config, &prediction);
                    if let Some(n) = opt.note
                        && !notes.contains(&n)
                    {
                        notes.push(n);
                    }
                    Scored {
                        assessment: goal.assess(prediction.time_s, prediction.energy_j, ee),
                        config,
                        prediction,
                        goal,
                        tried: opt.candidates,
                    }
                }
            };
            candidates += evaluated;
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
    for n in notes {
        if !decision.reason.is_empty() {
            decision.reason.push_str("; ");
        }
        decision.reason.push_str(&n);
    }
    Ok(decision)
}

/// One node set's best configuration under its goal.
struct Scored {
    config: Config,
    prediction: Prediction,
    assessment: super::Assessment,
    /// The goal it was assessed under (min_ee's cap included).
    goal: Goal,
    /// Configurations evaluated.
    tried: u64,
}

/// `base` with min_ee `m` as an energy cap: EE = E1 / E >= m  <=>  E <= E1 / m.
fn ee_capped(base: &Goal, e1: f64, m: f64) -> Goal {
    let mut goal = *base;
    let cap = e1 / m;
    goal.limits.energy_cap_j = Some(goal.limits.energy_cap_j.map_or(cap, |c| c.min(cap)));
    goal
}

/// max_ee on a model that defines EE: every node at one frequency, each level tried;
/// `None` when the model gives this node set no EE (then the sweep ranks by energy).
///
/// Paper 000's EE = E1 / Ep compares the parallel run with the sequential one *at the
/// same frequency*, so E1 changes with the frequency and the most efficient level is
/// not the one of least energy: an exact sweep over energy would pick the lowest gear,
/// where communication's fixed cost weighs most. At level f, min_ee is the energy cap
/// E1(f) / m. A level is each frequency some node offers; a node without it takes its
/// highest below (its lowest if none is).
fn ee_scan(
    predictor: &dyn Predictor,
    table: &SweepTable,
    base: &Goal,
    min_ee: Option<f64>,
) -> Option<Scored> {
    let mut levels: Vec<f64> = table
        .nodes
        .iter()
        .flat_map(|n| n.choices.iter().map(|c| c.freq_ghz))
        .collect();
    levels.sort_by(f64::total_cmp);
    levels.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    let tried = levels.len() as u64;
    let mut best: Option<Scored> = None;
    // Highest level first: every node at its maximum, where the model must define EE.
    for (i, &f) in levels.iter().rev().enumerate() {
        let pick: Vec<usize> = table
            .nodes
            .iter()
            .map(|n| {
                n.choices
                    .iter()
                    .rposition(|c| c.freq_ghz <= f + 1e-9)
                    .unwrap_or(0)
            })
            .collect();
        let config = table.config(&pick);
        let prediction = table.evaluate(&pick);
        let ee = predictor.efficiency(&config, &prediction);
        if i == 0 && ee.is_none() {
            return None;
        }
        let goal = match (min_ee, ee) {
            (Some(m), Some(ee)) => ee_capped(base, ee * prediction.energy_j, m),
            _ => *base,
        };
        let assessment = goal.assess(prediction.time_s, prediction.energy_j, ee);
        if best
            .as_ref()
            .is_none_or(|b| assessment.better_than(&b.assessment))
        {
            best = Some(Scored {
                config,
                prediction,
                assessment,
                goal,
                tried,
            });
        }
    }
    best
}

/// The goal for one node set under an objective other than max_ee: min_ee becomes an
/// energy cap from E1 at maximum frequency, EE >= m  <=>  E <= E1 / m. That is exact
/// at f_max only (E1 changes with the frequency; max_ee scans the levels, see
/// [`ee_scan`]), and it keeps the search separable.
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
    Ok(ee_capped(base, ee * prediction.energy_j, m))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;
    use crate::model::iso_energy::{AppVector, IsoEnergy, MachineVector};
    use crate::model::node_counts::NodeCounts;

    const GEARS: [f64; 5] = [1.2, 1.5, 1.8, 2.1, 2.5];

    /// An application whose 40 messages a processor cost the same at every frequency,
    /// on a processor of 4 W idle and 20 W more busy at 2.5 GHz (cubic in f).
    fn model() -> IsoEnergy {
        let m = |s: &str| Expr::parse(s, &["f"]).unwrap();
        let a = |s: &str| Expr::parse(s, &["n", "p"]).unwrap();
        IsoEnergy {
            n: 1.0,
            machine: MachineVector {
                t_c: m("1e-9 / f"),
                t_m: m("1e-9 / f"),
                t_msg: m("2.5e-3"),
                t_byte: m("0"),
                power: crate::model::iso_energy::MachinePower::Stated {
                    p_idle: m("4"),
                    dp_c: m("20 * (f / 2.5)^3"),
                    dp_m: m("0"),
                },
                wait_share: 0.0,
            },
            app: AppVector {
                alpha: a("1"),
                w_c: a("3.2e8"),
                w_m: a("0"),
                w_co: a("0"),
                w_mo: a("0"),
                m: a("40 * p"),
                b: a("0"),
            },
        }
    }

    /// Paper 000's EE at p processors and f GHz, written out from its definitions:
    /// E1 = W_c t_c (P_idle + dP_c), and Ep adds P_idle for the messages' time,
    /// M t_msg, so EE = E1 / (E1 + P_idle M t_msg).
    fn ee(p: f64, f: f64) -> f64 {
        let e1 = 3.2e8 * 1e-9 / f * (4.0 + 20.0 * (f / 2.5f64).powi(3));
        e1 / (e1 + 4.0 * 40.0 * p * 2.5e-3)
    }

    fn search(objective: Objective, slots: &[NodeSlot], min_ee: Option<f64>) -> Search<'_> {
        Search {
            slots,
            min_nodes: slots.len(),
            max_nodes: slots.len(),
            objective,
            limits: Limits::default(),
            min_ee,
            algorithm: Algorithm::Exact,
            max_freq_ghz: None,
        }
    }

    /// min-time under an energy cap of 6 J on up to 12 nodes. By paper 000's equations
    /// for [`model`], every node at f GHz on p nodes takes 0.32 / (f p) + 0.1 s and the
    /// job uses 0.32 / f (4 + 20 (f / 2.5)^3) + 0.4 p J (the messages' time at idle
    /// watts). Any count: 7 nodes at 2.5 GHz (5.87 J, 0.1183 s; 8 there would use 6.27 J
    /// s). A program that runs on powers of two: 8 nodes at 2.1 GHz (5.62 J, 0.1190 s),
    /// the fastest power of two within the cap at any gear; 12, the job's own count, is
    /// tried and over the cap at every gear.
    #[test]
    fn a_program_that_runs_on_some_counts_gets_the_best_of_those() {
        let time = |p: f64, f: f64| 0.32 / (f * p) + 0.1;
        let energy = |p: f64, f: f64| 0.32 / f * (4.0 + 20.0 * (f / 2.5f64).powi(3)) + 0.4 * p;
        // The brute-force oracle over every count the program allows and every gear.
        let best = |allowed: &dyn Fn(usize) -> bool| {
            let mut best: Option<(f64, usize, f64)> = None;
            for p in (1..=12).filter(|p| allowed(*p)) {
                for f in GEARS {
                    let (t, e) = (time(p as f64, f), energy(p as f64, f));
                    if e <= 6.0 && best.is_none_or(|b| t < b.0) {
                        best = Some((t, p, f));
                    }
                }
            }
            best.unwrap()
        };
        let slots: Vec<NodeSlot> = (1..=12)
            .map(|i| NodeSlot {
                name: format!("n{i}"),
                node_type: "t1".into(),
                freqs_ghz: GEARS.to_vec(),
            })
            .collect();
        let mut s = search(Objective::MinTime, &slots, None);
        s.min_nodes = 1;
        s.limits.energy_cap_j = Some(6.0);
        for (counts, want) in [(None, (7, 2.5)), (Some(NodeCounts::PowersOfTwo), (8, 2.1))] {
            let oracle = best(&|p| p == 12 || counts.as_ref().is_none_or(|c| c.allows(p)));
            assert_eq!((oracle.1, oracle.2), want);
            let model = crate::model::beside::wrap(Box::new(model()), None, counts.clone());
            let d = decide(model.as_ref(), &s).unwrap();
            assert_eq!(d.config.nodes.len(), want.0, "{counts:?}: {:?}", d.config);
            assert!(
                d.config.nodes.iter().all(|n| n.freq_ghz == want.1),
                "{:?}",
                d.config
            );
            assert!((d.prediction.time_s - oracle.0).abs() < 1e-12);
            assert_eq!(
                d.reason
                    .contains("node counts: powers of two (the profile's)"),
                counts.is_some(),
                "{}",
                d.reason
            );
        }
    }

    #[test]
    fn max_ee_picks_the_frequency_of_highest_e1_over_ep_not_of_least_energy() {
        let slots: Vec<NodeSlot> = (1..=4)
            .map(|i| NodeSlot {
                name: format!("n{i}"),
                node_type: "t1".into(),
                freqs_ghz: GEARS.to_vec(),
            })
            .collect();
        let by_ee = GEARS
            .iter()
            .copied()
            .max_by(|a, b| ee(4.0, *a).total_cmp(&ee(4.0, *b)))
            .unwrap();
        // Above 1.16 GHz E1 grows with f while the messages' cost stays: the highest gear.
        assert_eq!(by_ee, 2.5);
        let d = decide(&model(), &search(Objective::MaxEe, &slots, None)).unwrap();
        assert!(
            d.config.nodes.iter().all(|n| n.freq_ghz == by_ee),
            "{:?}",
            d.config
        );
        assert!(
            (d.objective - ee(4.0, by_ee)).abs() < 1e-9,
            "{}",
            d.objective
        );
        // The least energy is elsewhere: ranking by energy, as if E1 did not depend on
        // f, would have picked the lowest gear.
        let e = decide(&model(), &search(Objective::MinEnergy, &slots, None)).unwrap();
        assert!(
            e.config.nodes.iter().all(|n| n.freq_ghz == 1.2),
            "{:?}",
            e.config
        );

        // min_ee at each level: EE(f) >= m, so a bound between EE(2.1) and EE(2.5)
        // leaves 2.5 alone feasible, and one above EE(2.5) none (the closest is kept).
        let m = (ee(4.0, 2.1) + ee(4.0, 2.5)) / 2.0;
        let d = decide(&model(), &search(Objective::MaxEe, &slots, Some(m))).unwrap();
        assert!(d.feasible && d.config.nodes[0].freq_ghz == 2.5, "{d:?}");
        let d = decide(&model(), &search(Objective::MaxEe, &slots, Some(0.999))).unwrap();
        assert!(!d.feasible, "{d:?}");
        assert!(d.reason.contains("energy cap"), "{}", d.reason);
    }
}
