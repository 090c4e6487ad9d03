//! The exact search of tables with synchronised steps against the brute-force oracle
//! (which scores every pick with `SweepTable::totals`, the step formula itself).

mod models_common;

use greenup::model::{StepTable, SweepTable};
use greenup::optimize::Objective;
use greenup::optimize::brute::brute;
use greenup::optimize::nodes::exact;
use greenup::optimize::steps;
use greenup::optimize::sweep::sweep;
use models_common::{goal_for, rounding_close, same_quality, sweep_node};
use proptest::prelude::*;

/// A node's row: its group, (compute_s, dynamic_j) per choice, and its static watts.
type Row = (usize, Vec<(f64, f64)>, f64);

fn table(rows: &[Row], groups: usize, weights: Vec<Vec<f64>>, fixed: (f64, f64)) -> SweepTable {
    SweepTable {
        nodes: rows
            .iter()
            .enumerate()
            .map(|(i, (g, choices, static_w))| sweep_node(i, format!("t{g}"), choices, *static_w))
            .collect(),
        fixed_time_s: fixed.0,
        fixed_energy_j: fixed.1,
        steps: Some(StepTable {
            groups: (0..groups).map(|g| format!("t{g}")).collect(),
            group_of: rows.iter().map(|r| r.0).collect(),
            weights,
        }),
    }
}

fn cap() -> impl Strategy<Value = (bool, f64)> {
    (any::<bool>(), 0.4f64..1.6)
}

/// 2-3 groups, 1-6 nodes each in some group, 1-4 classes of weights in [0, 1.5].
fn instance() -> impl Strategy<Value = (Vec<Row>, usize, Vec<Vec<f64>>)> {
    (2usize..=3).prop_flat_map(|groups| {
        (
            prop::collection::vec(
                (
                    0..groups,
                    prop::collection::vec((0.5f64..20.0, 0.0f64..100.0), 1..=4),
                    0.0f64..10.0,
                ),
                1..=6,
            ),
            Just(groups),
            prop::collection::vec(prop::collection::vec(0.0f64..1.5, groups), 1..=4),
        )
    })
}

/// The step search against brute force under every objective, its numbers those of its
/// pick, and the exact algorithm's dispatch reaching the same search.
fn check(t: &SweepTable, draw: [(bool, f64); 4]) -> Result<(), TestCaseError> {
    for objective in Objective::ALL {
        let goal = goal_for(t, objective, draw);
        let got = steps::exact(t, &goal).unwrap();
        let oracle = brute(t, &goal).unwrap();
        let (time, energy) = t.totals(&got.pick);
        prop_assert!(rounding_close(time, got.time_s) && rounding_close(energy, got.energy_j));
        prop_assert!(
            same_quality(&got.assessment, &oracle.assessment),
            "{objective:?}: steps {:?} {:?} vs brute {:?} {:?}",
            got.pick,
            got.assessment,
            oracle.pick,
            oracle.assessment
        );
        let via = exact(t, &goal).unwrap();
        prop_assert!(same_quality(&via.assessment, &oracle.assessment));
        prop_assert!(via.note.is_none());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_step_search_equals_brute_force(
        (rows, groups, weights) in instance(),
        fixed in (0.0f64..5.0, 0.0f64..50.0),
        draw in [cap(), cap(), cap(), cap()],
    ) {
        check(&table(&rows, groups, weights, fixed), draw)?;
    }

    #[test]
    fn one_class_of_weight_one_is_the_sweep_of_the_max_model(
        (rows, groups, _) in instance(),
        fixed in (0.0f64..5.0, 0.0f64..50.0),
        draw in [cap(), cap(), cap(), cap()],
    ) {
        let t = table(&rows, groups, vec![vec![1.0; groups]], fixed);
        let flat = SweepTable { steps: None, ..t.clone() };
        for objective in Objective::ALL {
            let goal = goal_for(&t, objective, draw);
            let a = steps::exact(&t, &goal).unwrap();
            let b = sweep(&flat, &goal).unwrap();
            prop_assert!(same_quality(&a.assessment, &b.assessment));
        }
    }
}

#[test]
fn a_table_too_large_for_the_step_search_is_swept_as_the_max_model_with_a_note() {
    // 4 nodes in 4 groups, 50 times each whose dynamic energy falls as they grow: no time
    // is dominated, so 50^4 = 6,250,000 vectors, past the limit.
    let row: Vec<(f64, f64)> = (0..50)
        .map(|k| (1.0 + k as f64, 100.0 - k as f64))
        .collect();
    let rows: Vec<Row> = (0..4).map(|g| (g, row.clone(), 1.0)).collect();
    let t = table(&rows, 4, vec![vec![1.0, 0.5, 0.5, 0.5]], (0.0, 0.0));
    let goal = goal_for(&t, Objective::MinEnergy, [(false, 1.0); 4]);
    assert!(matches!(
        steps::exact(&t, &goal),
        Err(steps::StepSearchError::TooLarge { .. })
    ));
    let o = exact(&t, &goal).unwrap();
    let note = o.note.as_deref().unwrap();
    assert!(
        note.starts_with("step model too large to search exactly: 6250000 combinations"),
        "{note}"
    );
    // The pick is scored with the steps: its totals are the table's.
    assert_eq!(t.totals(&o.pick), (o.time_s, o.energy_j));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Nodes that draw while they wait: each vector's wall time prices every node's
    /// waits, and the search still equals trying every pick. A row may repeat, within
    /// its group or in another, so kinds weighted by their count are exercised.
    #[test]
    fn the_step_search_equals_brute_force_when_waiting_draws(
        (rows, groups, weights) in instance(),
        waits in prop::collection::vec(prop_oneof![Just(0.0), 0.0f64..20.0], 30),
        dup in prop::collection::vec((0usize..6, 0usize..3), 0..=1),
        fixed in (0.0f64..5.0, 0.0f64..50.0),
        draw in [cap(), cap(), cap(), cap()],
    ) {
        let mut rows = rows;
        for &(r, g) in &dup {
            if let Some(row) = rows.get(r % rows.len().max(1)).cloned() {
                rows.push((g % groups, row.1, row.2));
            }
        }
        let mut t = table(&rows, groups, weights, fixed);
        let mut w = waits.iter().cycle();
        for node in &mut t.nodes {
            for c in &mut node.choices {
                c.wait_w = *w.next().unwrap();
            }
        }
        // A repeated row keeps its waits too, so the two stay one kind.
        for (k, &(r, _)) in dup.iter().enumerate() {
            let src = r % rows.len().max(1);
            let dst = rows.len() - dup.len() + k;
            if src < dst {
                let c = t.nodes[src].choices.clone();
                t.nodes[dst].choices = c;
            }
        }
        prop_assume!(t.waits_draw());
        check(&t, draw)?;
    }
}
