//! The exact sweep against the brute-force oracle and against paper 004's Algorithm 1.

mod models_common;

use greenup::model::SweepTable;
use greenup::optimize::brute::brute;
use greenup::optimize::paper::algorithm1;
use greenup::optimize::sweep::sweep;
use greenup::optimize::{Assessment, Goal, Objective, Optimum};
use models_common::{goal_for, rounding_close, same_quality, sweep_node};
use proptest::prelude::*;

/// A node's row: (compute_s, dynamic_j) per choice, and its static watts.
type Row = (Vec<(f64, f64)>, f64);

fn table(rows: &[Row], fixed_time_s: f64, fixed_energy_j: f64) -> SweepTable {
    SweepTable {
        nodes: rows
            .iter()
            .enumerate()
            .map(|(i, (choices, static_w))| sweep_node(i, "t".into(), choices, *static_w))
            .collect(),
        fixed_time_s,
        fixed_energy_j,
        steps: None,
    }
}

/// Arbitrary rows: times and energies in any order, so the proof is tested beyond DVFS-shaped tables.
fn arbitrary_rows() -> impl Strategy<Value = Vec<Row>> {
    prop::collection::vec(
        (
            prop::collection::vec((0.5f64..20.0, 0.0f64..100.0), 1..=5),
            0.0f64..10.0,
        ),
        1..=6,
    )
}

/// DVFS-shaped rows: time ~ 1/f, dynamic energy ~ f^2 (paper 004, eq. 9).
fn dvfs_rows() -> impl Strategy<Value = Vec<Row>> {
    prop::collection::vec(
        (
            1.0f64..20.0,
            5.0f64..40.0,
            1.0f64..8.0,
            1usize..=5,
            0.05f64..0.3,
        ),
        1..=6,
    )
    .prop_map(|nodes| {
        nodes
            .into_iter()
            .map(|(tcp, pd, ps, f, step)| {
                let choices = (0..f)
                    .map(|k| {
                        let s = 1.0 / (1.0 - step * (f - 1 - k) as f64 / 2.0);
                        (tcp * s, pd * tcp / (s * s))
                    })
                    .collect();
                (choices, ps)
            })
            .collect()
    })
}

/// `a` is at least as good as `b`, allowing rounding.
fn at_least_as_good(a: &Optimum, b: &Optimum) -> bool {
    !b.assessment.better_than(&a.assessment) || same_quality(&a.assessment, &b.assessment)
}

fn cap() -> impl Strategy<Value = (bool, f64)> {
    (any::<bool>(), 0.4f64..1.6)
}

fn check(rows: Vec<Row>, fixed: (f64, f64), draw: [(bool, f64); 4]) -> Result<(), TestCaseError> {
    check_table(&table(&rows, fixed.0, fixed.1), draw)
}

/// The sweep against brute force under every objective, and never beaten by Algorithm 1.
fn check_table(t: &SweepTable, draw: [(bool, f64); 4]) -> Result<(), TestCaseError> {
    for objective in Objective::ALL {
        let goal = goal_for(t, objective, draw);
        let exact = sweep(t, &goal).unwrap();
        let oracle = brute(t, &goal).unwrap();
        let paper = algorithm1(t, &goal).unwrap();
        // The sweep's own numbers are those of the pick it returns.
        let (time, energy) = t.totals(&exact.pick);
        prop_assert!(rounding_close(time, exact.time_s) && rounding_close(energy, exact.energy_j));
        prop_assert!(
            same_quality(&exact.assessment, &oracle.assessment),
            "{objective:?}: sweep {:?} {:?} vs brute {:?} {:?}",
            exact.pick,
            exact.assessment,
            oracle.pick,
            oracle.assessment
        );
        prop_assert!(
            at_least_as_good(&exact, &paper),
            "{objective:?}: Algorithm 1 beat the sweep"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn sweep_equals_brute_force_on_arbitrary_tables(
        rows in arbitrary_rows(), fixed in (0.0f64..5.0, 0.0f64..50.0), draw in [cap(), cap(), cap(), cap()]
    ) {
        check(rows, fixed, draw)?;
    }

    #[test]
    fn sweep_equals_brute_force_with_nodes_of_one_kind(
        rows in prop::collection::vec((prop::collection::vec((0.5f64..20.0, 0.0f64..100.0), 1..=4), 0.0f64..10.0), 1..=3),
        copies in prop::collection::vec(0usize..3, 3),
        fixed in (0.0f64..5.0, 0.0f64..50.0),
        draw in [cap(), cap(), cap(), cap()]
    ) {
        // Identical rows, as a model gives for nodes of one type, interleaved with the others.
        let mut all = rows.clone();
        for (r, &c) in rows.iter().zip(&copies) {
            for _ in 0..c {
                all.insert(all.len() / 2, r.clone());
            }
        }
        check(all, fixed, draw)?;
    }

    #[test]
    fn sweep_equals_brute_force_on_dvfs_tables(
        rows in dvfs_rows(), fixed in (0.0f64..5.0, 0.0f64..50.0), draw in [cap(), cap(), cap(), cap()]
    ) {
        check(rows, fixed, draw)?;
    }
}

/// The sweep's definition computed naively, O((NF)^2): for every makespan tau in
/// the table, each node's cheapest choice within tau in a run of tau + T0 seconds (its
/// compute's joules and, where it draws while it waits, its waiting watts over the rest
/// of the run), one node forced to exactly tau.
fn naive_sweep(t: &SweepTable, goal: &Goal) -> Assessment {
    let static_w: f64 = t.nodes.iter().map(|n| n.static_w).sum();
    let mut best: Option<Assessment> = None;
    for row in &t.nodes {
        for c in &row.choices {
            let tau = c.compute_s;
            let wall = tau + t.fixed_time_s;
            let joules = |x: &greenup::model::Choice| x.dynamic_j + x.wait_w * (wall - x.compute_s);
            let mut sum = 0.0;
            let mut force = f64::INFINITY;
            let mut ok = true;
            for r in &t.nodes {
                let d = r
                    .choices
                    .iter()
                    .filter(|x| x.compute_s <= tau)
                    .map(joules)
                    .fold(f64::INFINITY, f64::min);
                if d.is_infinite() {
                    ok = false;
                    break;
                }
                sum += d;
                for x in r.choices.iter().filter(|x| x.compute_s == tau) {
                    force = force.min(joules(x) - d);
                }
            }
            if !ok {
                continue;
            }
            let a = goal.assess(wall, sum + force + wall * static_w + t.fixed_energy_j, None);
            if best.as_ref().is_none_or(|b| a.better_than(b)) {
                best = Some(a);
            }
        }
    }
    best.unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    /// Tables too large for brute force (and for the sweep's small-table sort path),
    /// with repeated rows and repeated times, against the naive sweep.
    #[test]
    fn sweep_equals_the_naive_sweep_on_larger_tables(
        rows in prop::collection::vec((prop::collection::vec(((1u32..40).prop_map(|x| x as f64 * 0.25), 0.0f64..100.0), 1..=6), 0.0f64..10.0), 10..=40),
        dup in 0usize..10,
        draw in [cap(), cap(), cap(), cap()]
    ) {
        let mut rows = rows;
        for i in 0..dup.min(rows.len()) {
            let r = rows[i].clone();
            rows.push(r);
        }
        let t = table(&rows, 1.0, 5.0);
        for objective in Objective::ALL {
            let goal = goal_for(&t, objective, draw);
            let exact = sweep(&t, &goal).unwrap();
            let naive = naive_sweep(&t, &goal);
            prop_assert!(same_quality(&exact.assessment, &naive), "{objective:?}: {:?} vs {:?}", exact.assessment, naive);
        }
    }
}

/// Rows whose choices also draw while they wait: (compute_s, dynamic_j, wait_w) per
/// choice, a wait of 0 now and then (a choice whose wait sleeps), and static watts.
type WaitRow = (Vec<(f64, f64, f64)>, f64);

fn waiting_table(rows: &[WaitRow], fixed_time_s: f64, fixed_energy_j: f64) -> SweepTable {
    let plain: Vec<Row> = rows
        .iter()
        .map(|(c, s)| (c.iter().map(|&(t, d, _)| (t, d)).collect(), *s))
        .collect();
    let mut t = table(&plain, fixed_time_s, fixed_energy_j);
    for (node, (c, _)) in t.nodes.iter_mut().zip(rows) {
        for (choice, &(_, _, w)) in node.choices.iter_mut().zip(c) {
            choice.wait_w = w;
        }
    }
    t
}

fn waiting_rows(nodes: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<WaitRow>> {
    prop::collection::vec(
        (
            prop::collection::vec(
                (
                    (1u32..40).prop_map(|x| x as f64 * 0.5),
                    0.0f64..100.0,
                    prop_oneof![Just(0.0), 0.0f64..30.0],
                ),
                1..=5,
            ),
            0.0f64..10.0,
        ),
        nodes,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Nodes that draw while they wait: the sweep's lower envelopes against every pick.
    #[test]
    fn sweep_equals_brute_force_when_waiting_draws(
        rows in waiting_rows(1..=5), fixed in (0.0f64..5.0, 0.0f64..50.0), draw in [cap(), cap(), cap(), cap()]
    ) {
        check_table(&waiting_table(&rows, fixed.0, fixed.1), draw)?;
    }

    /// Larger tables with repeated rows (kinds weighted by their count) and many
    /// crossings, against the naive waiting sweep.
    #[test]
    fn waiting_sweep_equals_the_naive_one_on_larger_tables(
        rows in waiting_rows(10..=30), dup in 0usize..10, draw in [cap(), cap(), cap(), cap()]
    ) {
        let mut rows = rows;
        for i in 0..dup.min(rows.len()) {
            let r = rows[i].clone();
            rows.push(r);
        }
        let t = waiting_table(&rows, 1.0, 5.0);
        for objective in Objective::ALL {
            let goal = goal_for(&t, objective, draw);
            let exact = sweep(&t, &goal).unwrap();
            let naive = naive_sweep(&t, &goal);
            prop_assert!(same_quality(&exact.assessment, &naive), "{objective:?}: {:?} vs {:?}", exact.assessment, naive);
        }
    }
}
