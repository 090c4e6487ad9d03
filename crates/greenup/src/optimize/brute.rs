//! Brute force: every combination of choices. Only for small tables; it is the
//! oracle the tests hold the other optimizers to.

use super::{Goal, OptimizeError, Optimum, check_table};
use crate::model::SweepTable;

/// Most configurations brute force agrees to evaluate.
pub const LIMIT: u64 = 20_000_000;

/// The best configuration of `table` under `goal`, found by trying them all.
pub fn brute(table: &SweepTable, goal: &Goal) -> Result<Optimum, OptimizeError> {
    check_table(table)?;
    let combinations: f64 = table.nodes.iter().map(|r| r.choices.len() as f64).product();
    if combinations > LIMIT as f64 {
        return Err(OptimizeError::TooLarge {
            combinations,
            limit: LIMIT,
        });
    }
    let n = table.nodes.len();
    let mut pick = vec![0usize; n];
    let mut best = pick.clone();
    let mut best_a = None;
    let mut candidates = 0u64;
    loop {
        let (t, e) = table.totals(&pick);
        let a = goal.assess(t, e, None);
        candidates += 1;
        if best_a.as_ref().is_none_or(|b| a.better_than(b)) {
            best_a = Some(a);
            best.clone_from(&pick);
        }
        // Odometer: advance the first node that can, resetting those before it.
        let mut i = 0;
        while i < n {
            pick[i] += 1;
            if pick[i] < table.nodes[i].choices.len() {
                break;
            }
            pick[i] = 0;
            i += 1;
        }
        if i == n {
            break;
        }
    }
    Ok(Optimum::of(table, goal, best, candidates))
}
