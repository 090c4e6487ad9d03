//! The exact search of a table with synchronised steps ([`crate::model::StepTable`]).
//!
//! Why it is exact. A pick's wall time is `T = sum_k max_g w[k][g] * m_g + T0`, where
//! `m_g` is the slowest compute time among the nodes of group g, and its energy is
//! `E = D + T * S + E0` with D the sum of the nodes' dynamic energies. T depends on
//! the pick only through the vector (m_g). Fix that vector: the pick of least D with
//! exactly these slowest times is found per group as in [`super::sweep`] (each node of
//! g takes its least-dynamic choice with compute <= m_g, and one node is forced to a
//! choice of exactly m_g, the one whose forcing costs least). Against any other pick
//! with the same vector it has the same T and no more D, so no more E and no more
//! E / T: it is at least as good under every objective and limit (each is monotone in
//! (T, E), and every limit bounds T, E or E / T from above). Each m_g is one of the
//! group's compute times, so trying every vector of per-group candidate times and
//! keeping the best under the [`Goal`] is exact.
//!
//! Pruning. A candidate time of a group is dropped when a smaller one of the same
//! group needs no more dynamic energy: T does not grow as m_g shrinks (weights are
//! non-negative), so both T and E are no larger. That argument fails for a power cap
//! alone (a shorter run at the same energy draws more watts), so with a power cap
//! nothing is pruned.

use super::sweep::least_energy;
use super::{Goal, OptimizeError, Optimum, check_table};
use crate::model::{StepTable, SweepTable};

/// Most vectors of per-group times the exact search agrees to try.
pub const LIMIT: u64 = 4_000_000;

/// Why the exact step search did not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepSearchError {
    /// The table is unusable (see [`check_table`]).
    #[error(transparent)]
    Table(#[from] OptimizeError),
    /// The search would try more vectors than [`LIMIT`].
    #[error("{vectors} combinations of per-group times (limit {limit})")]
    TooLarge {
        /// Vectors the search would try.
        vectors: f64,
        /// The most it may.
        limit: u64,
    },
    /// The table has no step structure; the plain sweep applies.
    #[error("the table has no step structure")]
    NoSteps,
}

/// One candidate slowest time of a group: the least dynamic energy of the group's
/// nodes with that slowest time, and the node and choice forced to reach it.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    time_s: f64,
    dynamic_j: f64,
    node: usize,
    choice: usize,
}

/// The exact optimum of `goal` over a table with steps, or the closest configuration
/// when none is feasible.
pub fn exact(table: &SweepTable, goal: &Goal) -> Result<Optimum, StepSearchError> {
    check_table(table)?;
    let steps = table.steps.as_ref().ok_or(StepSearchError::NoSteps)?;
    if table.waits_draw() {
        return exact_waiting(table, goal, steps);
    }
    if table.nodes.is_empty() {
        return Ok(Optimum::of(table, goal, Vec::new(), 1));
    }
    let members = members(table, steps);
    let prune = goal.limits.power_cap_w.is_none();
    let candidates: Vec<Vec<Candidate>> = members
        .iter()
        .map(|nodes| group_candidates(table, nodes, prune))
        .collect();
    let vectors: f64 = candidates
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| c.len() as f64)
        .product();
    if vectors > LIMIT as f64 {
        return Err(StepSearchError::TooLarge {
            vectors,
            limit: LIMIT,
        });
    }
    // Groups without nodes take no part; the rest are enumerated like an odometer whose
    // fastest wheel is the group with the most candidates: for each setting of the
    // others, each class's max over them is computed once and the inner loop costs
    // one max per class.
    let mut live: Vec<usize> = (0..candidates.len())
        .filter(|&g| !candidates[g].is_empty())
        .collect();
    live.sort_by_key(|&g| std::cmp::Reverse(candidates[g].len()));
    let static_w = table.static_w();
    let mut at = vec![0usize; live.len()];
    let mut best: Option<(Vec<usize>, super::Assessment)> = None;
    let mut tried = 0u64;
    let Some(&inner) = live.first() else {
        return Err(OptimizeError::NoChoices("(every node)".into()).into());
    };
    let inner_w: Vec<f64> = steps.weights.iter().map(|w| w[inner]).collect();
    let mut rest = vec![0.0f64; steps.weights.len()];
    loop {
        let mut d_rest = 0.0;
        rest.iter_mut().for_each(|r| *r = 0.0);
        for (slot, &g) in live.iter().enumerate().skip(1) {
            let c = candidates[g][at[slot]];
            d_rest += c.dynamic_j;
            for (r, w) in rest.iter_mut().zip(&steps.weights) {
                *r = r.max(w[g] * c.time_s);
            }
        }
        for (j, c) in candidates[inner].iter().enumerate() {
            let compute: f64 = rest
                .iter()
                .zip(&inner_w)
                .map(|(r, w)| r.max(w * c.time_s))
                .sum();
            let t = compute + table.fixed_time_s;
            let e = d_rest + c.dynamic_j + t * static_w + table.fixed_energy_j;
            let a = goal.assess(t, e, None);
            tried += 1;
            if best.as_ref().is_none_or(|b| a.better_than(&b.1)) {
                at[0] = j;
                best = Some((at.clone(), a));
            }
        }
        // The inner wheel (slot 0) was swept whole above.
        if !advance(&mut at[1..], |slot| candidates[live[slot + 1]].len()) {
            break;
        }
    }
    let (at, _) = best.ok_or_else(|| OptimizeError::NoChoices("(every node)".into()))?;
    let mut pick = vec![0usize; table.nodes.len()];
    for (slot, &g) in live.iter().enumerate() {
        let c = candidates[g][at[slot]];
        // No choice of this table draws while it waits, so the run's length
        // does not change which is cheapest.
        for &i in &members[g] {
            pick[i] = least_energy(table, i, c.time_s, 0.0);
        }
        pick[c.node] = c.choice;
    }
    Ok(Optimum::of(table, goal, pick, tried))
}

/// Most node-choice evaluations the search of a table whose nodes draw while they wait
/// agrees to make (each vector prices every kind of node at its wall time).
pub const WAITING_LIMIT: u64 = 40_000_000;

/// The exact search where some nodes draw while they wait. Fixing the vector (m_g)
/// still fixes T, and at a fixed T each node still picks alone (its cheapest choice
/// within m_g in a run of T seconds), so the argument of the module holds; but which
/// choice is cheapest now depends on T, hence on every group's time, so a group's cost
/// cannot be tabled once per candidate, and no candidate is pruned. Each vector prices
/// each group's kinds of node at its own T.
fn exact_waiting(
    table: &SweepTable,
    goal: &Goal,
    steps: &StepTable,
) -> Result<Optimum, StepSearchError> {
    let kinds = super::sweep::kinds(table);
    let ng = steps.groups.len();
    // Per group: (the group's first node of each kind, standing for it; how many of
    // the group's nodes the kind has). A kind may span groups (two types alike).
    let mut of_group: Vec<Vec<(usize, f64)>> = vec![Vec::new(); ng];
    // (group, kind) -> its place in of_group[group]: one lookup a node, not a scan of
    // the group's kinds, which would be quadratic where every node differs.
    let mut slot: std::collections::HashMap<(usize, u32), usize> = Default::default();
    for (i, &kind) in kinds.of.iter().enumerate() {
        let Some(&g) = steps.group_of.get(i) else {
            continue;
        };
        match slot.entry((g, kind)) {
            std::collections::hash_map::Entry::Occupied(at) => of_group[g][*at.get()].1 += 1.0,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(of_group[g].len());
                of_group[g].push((i, 1.0));
            }
        }
    }
    // Per group: every slowest time its nodes can all reach, ascending.
    let times: Vec<Vec<f64>> = of_group
        .iter()
        .map(|members| {
            let floor = members
                .iter()
                .map(|&(i, _)| {
                    let c = &table.nodes[i].choices;
                    c.iter().map(|c| c.compute_s).fold(f64::INFINITY, f64::min)
                })
                .fold(f64::NEG_INFINITY, f64::max);
            let mut t: Vec<f64> = members
                .iter()
                .flat_map(|&(i, _)| table.nodes[i].choices.iter().map(|c| c.compute_s))
                .filter(|&t| t >= floor)
                .collect();
            t.sort_by(f64::total_cmp);
            t.dedup();
            t
        })
        .collect();
    let live: Vec<usize> = (0..ng).filter(|&g| !times[g].is_empty()).collect();
    if live.is_empty() {
        return Err(OptimizeError::NoChoices("(every node)".into()).into());
    }
    let vectors: f64 = live.iter().map(|&g| times[g].len() as f64).product();
    let per_vector: f64 = live
        .iter()
        .flat_map(|&g| &of_group[g])
        .map(|&(i, _)| table.nodes[i].choices.len() as f64)
        .sum();
    if vectors * per_vector > WAITING_LIMIT as f64 {
        return Err(StepSearchError::TooLarge {
            vectors,
            limit: (WAITING_LIMIT as f64 / per_vector.max(1.0)) as u64,
        });
    }
    let static_w = table.static_w();
    let mut at = vec![0usize; live.len()];
    let mut m = vec![0.0f64; ng];
    let mut best: Option<(Vec<usize>, super::Assessment)> = None;
    let mut tried = 0u64;
    loop {
        for (slot, &g) in live.iter().enumerate() {
            m[g] = times[g][at[slot]];
        }
        let t = steps.compute_s(&m) + table.fixed_time_s;
        let mut e = t * static_w + table.fixed_energy_j;
        for &g in &live {
            e += group_cost(table, &of_group[g], m[g], t).0;
        }
        let a = goal.assess(t, e, None);
        tried += 1;
        if best.as_ref().is_none_or(|b| a.better_than(&b.1)) {
            best = Some((at.clone(), a));
        }
        if !advance(&mut at, |slot| times[live[slot]].len()) {
            break;
        }
    }
    let (at, _) = best.ok_or_else(|| OptimizeError::NoChoices("(every node)".into()))?;
    for (slot, &g) in live.iter().enumerate() {
        m[g] = times[g][at[slot]];
    }
    let t = steps.compute_s(&m) + table.fixed_time_s;
    let mut pick = vec![0usize; table.nodes.len()];
    let members = members(table, steps);
    for &g in &live {
        for &i in &members[g] {
            pick[i] = least_energy(table, i, m[g], t);
        }
        let (_, (node, choice)) = group_cost(table, &of_group[g], m[g], t);
        pick[node] = choice;
    }
    Ok(Optimum::of(table, goal, pick, tried))
}

/// Turn an odometer whose wheel `slot` has `len(slot)` positions one step, the first
/// wheel fastest; false once every setting has been seen.
fn advance(at: &mut [usize], len: impl Fn(usize) -> usize) -> bool {
    for (slot, a) in at.iter_mut().enumerate() {
        *a += 1;
        if *a < len(slot) {
            return true;
        }
        *a = 0;
    }
    false
}

/// A group's joules above static in a run of `wall_s` seconds whose slowest node of the
/// group computes exactly `tau`: each kind at its cheapest choice within `tau`, and one
/// node forced to a choice of exactly `tau`, the one whose forcing costs least (that
/// node and choice returned).
fn group_cost(
    table: &SweepTable,
    members: &[(usize, f64)],
    tau: f64,
    wall_s: f64,
) -> (f64, (usize, usize)) {
    let mut sum = 0.0;
    let mut force = (f64::INFINITY, (0, 0));
    for &(i, count) in members {
        let choices = &table.nodes[i].choices;
        let best = choices
            .iter()
            .filter(|c| c.compute_s <= tau)
            .map(|c| c.energy_j(wall_s))
            .fold(f64::INFINITY, f64::min);
        sum += count * best;
        for (k, c) in choices.iter().enumerate() {
            if c.compute_s == tau && c.energy_j(wall_s) - best < force.0 {
                force = (c.energy_j(wall_s) - best, (i, k));
            }
        }
    }
    (sum + force.0, force.1)
}

/// The node rows of each group; rows naming a group the table lacks are refused by
/// [`check_table`] before this runs.
fn members(table: &SweepTable, steps: &StepTable) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); steps.groups.len()];
    for (i, &g) in steps.group_of.iter().enumerate().take(table.nodes.len()) {
        if let Some(list) = out.get_mut(g) {
            list.push(i);
        }
    }
    out
}

/// Every slowest time a group can have, ascending, with the least dynamic energy that
/// reaches it (the sweep of [`super::sweep`] restricted to the group's nodes); with
/// `prune`, only the times no smaller time beats on dynamic energy.
fn group_candidates(table: &SweepTable, nodes: &[usize], prune: bool) -> Vec<Candidate> {
    let mut entries: Vec<(f64, usize, usize)> = nodes
        .iter()
        .flat_map(|&i| {
            table.nodes[i]
                .choices
                .iter()
                .enumerate()
                .map(move |(k, c)| (c.compute_s, i, k))
        })
        .collect();
    entries.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut best_d = vec![f64::INFINITY; table.nodes.len()];
    let mut covered = 0usize;
    let mut sum_d = 0.0;
    let mut out: Vec<Candidate> = Vec::new();
    let mut start = 0;
    while start < entries.len() {
        let tau = entries[start].0;
        let mut end = start;
        while end < entries.len() && entries[end].0 == tau {
            let (_, i, k) = entries[end];
            let d = table.nodes[i].choices[k].dynamic_j;
            if best_d[i].is_infinite() {
                covered += 1;
                sum_d += d;
                best_d[i] = d;
            } else if d < best_d[i] {
                sum_d += d - best_d[i];
                best_d[i] = d;
            }
            end += 1;
        }
        if covered == nodes.len() {
            let mut forced = (f64::INFINITY, 0, 0);
            for &(_, i, k) in &entries[start..end] {
                let cost = table.nodes[i].choices[k].dynamic_j - best_d[i];
                if cost < forced.0 {
                    forced = (cost, i, k);
                }
            }
            let c = Candidate {
                time_s: tau,
                dynamic_j: sum_d + forced.0,
                node: forced.1,
                choice: forced.2,
            };
            if !prune || out.last().is_none_or(|l| c.dynamic_j < l.dynamic_j) {
                out.push(c);
            }
        }
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Choice, NodeChoices};
    use crate::optimize::{Limits, Objective};

    fn node(name: &str, ty: &str, rows: &[(f64, f64)]) -> NodeChoices {
        NodeChoices {
            name: name.into(),
            node_type: ty.into(),
            choices: rows
                .iter()
                .enumerate()
                .map(|(k, &(compute_s, dynamic_j))| Choice {
                    wait_w: 0.0,
                    freq_ghz: 1.0 + k as f64,
                    gpu_mhz: None,
                    compute_s,
                    dynamic_j,
                })
                .collect(),
            static_w: 1.0,
        }
    }

    #[test]
    fn slowing_the_type_that_waits_on_average_still_costs_time() {
        // Two nodes, a and b, each at a slow (2x time, a quarter the dynamic energy) or
        // fast gear: a computes 4 s fast, b 5 s. Steps: a leads class 0 with share 0.75
        // (b 0.2), b leads class 1 with share 0.8 (a 0.25).
        let t = SweepTable {
            nodes: vec![
                node("a", "a", &[(8.0, 10.0), (4.0, 40.0)]),
                node("b", "b", &[(10.0, 10.0), (5.0, 40.0)]),
            ],
            fixed_time_s: 1.0,
            fixed_energy_j: 0.0,
            steps: Some(StepTable {
                groups: vec!["a".into(), "b".into()],
                group_of: vec![0, 1],
                weights: vec![vec![0.75, 0.2], vec![0.25, 0.8]],
            }),
        };
        // Closed forms. Both fast: 0.75*4 + 0.8*5 = 3 + 4 = 7 s compute, T = 8 s,
        // E = 80 + 2 W * 8 s = 96 J. a slow: max(6, 1) + max(2, 4) = 10, T = 11 s,
        // E = 50 + 22 = 72 J. b slow: max(3, 2) + max(1, 8) = 11, T = 12, E = 50 + 24 = 74 J.
        // Both slow: 6 + 8 = 14, T = 15, E = 20 + 30 = 50 J.
        // Under the max model slowing a would cost 3 s as well (max(8, 5) against 5) and
        // slowing b 5 s (max(4, 10)); with steps b's costs 4 s.
        assert_eq!(t.totals(&[1, 1]), (8.0, 96.0));
        assert_eq!(t.totals(&[0, 1]), (11.0, 72.0));
        assert_eq!(t.totals(&[1, 0]), (12.0, 74.0));
        assert_eq!(t.totals(&[0, 0]), (15.0, 50.0));
        let goal = |objective, max_slowdown| Goal {
            objective,
            limits: Limits {
                max_slowdown,
                ..Limits::default()
            },
            baseline_time_s: 8.0,
            baseline_energy_j: 96.0,
        };
        let o = exact(&t, &goal(Objective::MinEnergy, None)).unwrap();
        assert_eq!((o.pick, o.time_s, o.energy_j), (vec![0, 0], 15.0, 50.0));
        // At most 40% slower (11.2 s): only a may slow down.
        let o = exact(&t, &goal(Objective::MinEnergy, Some(0.4))).unwrap();
        assert_eq!((o.pick, o.time_s, o.energy_j), (vec![0, 1], 11.0, 72.0));
        let o = exact(&t, &goal(Objective::MinTime, None)).unwrap();
        assert_eq!(o.pick, vec![1, 1]);
    }

    #[test]
    fn too_many_vectors_is_a_typed_error() {
        // 4 groups of 50 distinct times whose dynamic energy falls with time: 50^4 > LIMIT.
        let rows: Vec<(f64, f64)> = (0..50)
            .map(|k| (1.0 + k as f64, 100.0 - k as f64))
            .collect();
        let t = SweepTable {
            nodes: (0..4).map(|g| node(&format!("n{g}"), "t", &rows)).collect(),
            fixed_time_s: 0.0,
            fixed_energy_j: 0.0,
            steps: Some(StepTable {
                groups: (0..4).map(|g| format!("g{g}")).collect(),
                group_of: vec![0, 1, 2, 3],
                weights: vec![vec![1.0; 4]],
            }),
        };
        let goal = Goal {
            objective: Objective::MinEnergy,
            limits: Limits::default(),
            baseline_time_s: 1.0,
            baseline_energy_j: 1.0,
        };
        assert!(matches!(
            exact(&t, &goal),
            Err(StepSearchError::TooLarge { .. })
        ));
    }
}
