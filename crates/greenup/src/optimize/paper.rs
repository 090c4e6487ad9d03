//! Paper 004's Algorithm 1 (Charr et al.), as published, kept to compare with the exact sweep.
//!
//! Read on a [`SweepTable`]: a node's gears are its choices, T_cp is its compute
//! time at the maximum frequency, and "one gear down" is the next lower choice.
//! 1. Initial frequency F_i = F_max_i * T_cp_i / max_j T_cp_j (eqs. 16-17),
//!    rounded to the nearest gear, then raised one gear unless it is the maximum.
//! 2. S_opt starts at every node at maximum frequency.
//! 3. While some node is above its minimum gear: every node except the slowest
//!    (largest scaled compute time, eq. 2) goes one gear down, if it can; the new
//!    vector is evaluated and kept if it scores better.
//!
//! Two points the paper leaves open, settled here: on a tie for slowest, only
//! the first such node keeps its gear; and when a round changes nothing (only
//! the slowest node is still above its minimum), the published loop would repeat
//! the same vector forever, so the search stops there. The starting vector of
//! step 1 is not itself evaluated, as in the published pseudocode. Each vector is
//! scored with the same [`Goal`] as the other optimizers; for max_dist without
//! limits that is exactly the published distance test.

use super::{Goal, OptimizeError, Optimum, check_table};
use crate::model::SweepTable;

/// The configuration Algorithm 1 selects for `goal` over `table`.
pub fn algorithm1(table: &SweepTable, goal: &Goal) -> Result<Optimum, OptimizeError> {
    check_table(table)?;
    let top = table.max_pick();
    let static_w = table.static_w();
    let tcp_max = table
        .nodes
        .iter()
        .zip(&top)
        .map(|(r, &k)| r.choices[k].compute_s)
        .fold(0.0, f64::max);

    let mut gear: Vec<usize> = table
        .nodes
        .iter()
        .zip(&top)
        .map(|(row, &kmax)| {
            let c = &row.choices[kmax];
            let target = if tcp_max > 0.0 {
                c.freq_ghz * c.compute_s / tcp_max
            } else {
                c.freq_ghz
            };
            let mut k = nearest(row.choices.iter().map(|c| c.freq_ghz), target);
            if k < kmax {
                k += 1;
            }
            k
        })
        .collect();

    let eval = |pick: &[usize]| {
        // Algorithm 1 walks gears as published; a step table still scores each vector
        // with its own time formula.
        if table.steps.is_some() {
            return table.totals(pick);
        }
        let mut m: f64 = 0.0;
        let mut d = 0.0;
        for (row, &k) in table.nodes.iter().zip(pick) {
            m = m.max(row.choices[k].compute_s);
            d += row.choices[k].dynamic_j;
        }
        let t = m + table.fixed_time_s;
        (t, d + t * static_w + table.fixed_energy_j)
    };

    let (t0, e0) = eval(&top);
    let mut best = top.clone();
    let mut best_a = goal.assess(t0, e0, None);
    let mut candidates = 1u64;

    while gear.iter().any(|&k| k > 0) {
        let mut slowest = 0;
        let mut slow_t = f64::NEG_INFINITY;
        for (i, (row, &k)) in table.nodes.iter().zip(&gear).enumerate() {
            if row.choices[k].compute_s > slow_t {
                slow_t = row.choices[k].compute_s;
                slowest = i;
            }
        }
        let mut changed = false;
        for (i, k) in gear.iter_mut().enumerate() {
            if *k > 0 && i != slowest {
                *k -= 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
        let (t, e) = eval(&gear);
        let a = goal.assess(t, e, None);
        candidates += 1;
        if a.better_than(&best_a) {
            best_a = a;
            best.clone_from(&gear);
        }
    }
    Ok(Optimum::of(table, goal, best, candidates))
}

/// Index of the value nearest to `target`; on a tie, the higher one.
fn nearest(values: impl Iterator<Item = f64>, target: f64) -> usize {
    let mut best = 0;
    let mut dist = f64::INFINITY;
    for (i, v) in values.enumerate() {
        let d = (v - target).abs();
        if d <= dist {
            dist = d;
            best = i;
        }
    }
    best
}
