//! The exact sweep over sorted makespan bounds.
//!
//! Why it is exact. Write a pick k's wall time as T(k) = m(k) + T0, where
//! m(k) = max_i c_i(k_i) is the slowest node's compute time, and its energy as
//! E(k) = D(k) + T(k) * S + E0 with D(k) = sum_i d_i(k_i). Every m(k) is one of
//! the N*F compute times in the table. Fix a value tau of that set and let q(tau)
//! be the pick with the least D among picks whose slowest node takes exactly tau:
//! every node takes its least-d choice with c <= tau, except that one node whose
//! choice takes exactly tau is forced to it, the one for which forcing costs least.
//! For any pick k with m(k) = tau: T(q) = T(k) and D(q) <= D(k), hence
//! E(q) <= E(k) and E(q)/T(q) <= E(k)/T(k). So q(m(k)) is at least as good as k in
//! time, energy and average power at once. Every objective here is monotone in
//! (T, E) (min_energy, min_time, min_edp, min_ed2p, max_ee = E1/E at a fixed node
//! set, max_dist = T_base/T - E/E_base) and every limit is an upper bound on T, E or
//! E/T, so the best of the q(tau) is the best of all F^N picks, feasible or
//! closest. Sweeping tau upward, each node's least-d choice only improves as
//! choices enter, so the sums update in O(1) per entry: O(NF log NF) for the sort
//! plus O(NF) for the sweep.

use super::{Goal, OptimizeError, Optimum, check_table};
use crate::model::SweepTable;

/// One (node, choice) of the table, keyed by its compute time.
#[derive(Clone, Copy)]
struct Entry {
    /// The compute time's bits; non-negative finite floats order like their bits.
    key: u64,
    dynamic_j: f64,
    node: u32,
    choice: u32,
}

/// The exact optimum of `goal` over `table`, or the closest configuration when none is feasible.
pub fn sweep(table: &SweepTable, goal: &Goal) -> Result<Optimum, OptimizeError> {
    check_table(table)?;
    let n = table.nodes.len();
    if n == 0 {
        return Ok(Optimum::of(table, goal, Vec::new(), 1));
    }
    let total: usize = table.nodes.iter().map(|r| r.choices.len()).sum();
    let mut entries = Vec::with_capacity(total);
    for (i, row) in table.nodes.iter().enumerate() {
        for (k, c) in row.choices.iter().enumerate() {
            entries.push(Entry {
                key: c.compute_s.to_bits(),
                dynamic_j: c.dynamic_j,
                node: i as u32,
                choice: k as u32,
            });
        }
    }
    entries.sort_unstable_by_key(|e| e.key);

    let static_w = table.static_w();
    let mut best_d = vec![f64::INFINITY; n];
    let mut covered = 0usize;
    let mut sum_d = 0.0;
    // The winning bound and the forced entry, enough to rebuild the pick afterwards.
    let mut winner: Option<(f64, usize, crate::optimize::Assessment)> = None;
    let mut candidates = 0u64;

    let mut start = 0;
    while start < entries.len() {
        let key = entries[start].key;
        let mut end = start;
        while end < entries.len() && entries[end].key == key {
            let e = entries[end];
            let slot = &mut best_d[e.node as usize];
            if slot.is_infinite() {
                covered += 1;
                sum_d += e.dynamic_j;
                *slot = e.dynamic_j;
            } else if e.dynamic_j < *slot {
                sum_d += e.dynamic_j - *slot;
                *slot = e.dynamic_j;
            }
            end += 1;
        }
        if covered == n {
            // Force the cheapest entry of this group so the slowest node takes exactly tau.
            let mut forced = start;
            let mut extra = f64::INFINITY;
            for (j, e) in entries[start..end].iter().enumerate() {
                let cost = e.dynamic_j - best_d[e.node as usize];
                if cost < extra {
                    extra = cost;
                    forced = start + j;
                }
            }
            let tau = f64::from_bits(key);
            let t = tau + table.fixed_time_s;
            let en = sum_d + extra + t * static_w + table.fixed_energy_j;
            let a = goal.assess(t, en, None);
            candidates += 1;
            if winner.as_ref().is_none_or(|w| a.better_than(&w.2)) {
                winner = Some((tau, forced, a));
            }
        }
        start = end;
    }

    let (tau, forced, _) = winner.ok_or_else(|| OptimizeError::NoChoices("(every node)".into()))?;
    let mut pick = Vec::with_capacity(n);
    for row in &table.nodes {
        let mut k = 0;
        let mut d = f64::INFINITY;
        for (j, c) in row.choices.iter().enumerate() {
            if c.compute_s <= tau && c.dynamic_j < d {
                d = c.dynamic_j;
                k = j;
            }
        }
        pick.push(k);
    }
    let f = entries[forced];
    pick[f.node as usize] = f.choice as usize;
    Ok(Optimum::of(table, goal, pick, candidates))
}
