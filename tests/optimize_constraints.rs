//! Each limit binding on small tables whose answers are worked out by hand.
//!
//! One node, two gears. At 2 GHz it computes 10 s with 8 W dynamic power (80 J);
//! at 1 GHz it takes 20 s and dynamic power falls as f^3 to 1 W (20 J). Static
//! power is 2 W. So:
//!   2 GHz: T = 10 s, E = 80 + 2*10 = 100 J, P = 10 W
//!   1 GHz: T = 20 s, E = 20 + 2*20 =  60 J, P =  3 W

use greenup::model::{Choice, NodeChoices, SweepTable};
use greenup::optimize::brute::brute;
use greenup::optimize::paper::algorithm1;
use greenup::optimize::sweep::sweep;
use greenup::optimize::{Goal, Limits, Objective, Optimum};

fn node(name: &str, gears: &[(f64, f64, f64)], static_w: f64) -> NodeChoices {
    NodeChoices {
        name: name.into(),
        node_type: "t".into(),
        choices: gears
            .iter()
            .map(|&(freq_ghz, compute_s, dynamic_j)| Choice {
                wait_w: 0.0,
                gpu_mhz: None,
                freq_ghz,
                compute_s,
                dynamic_j,
            })
            .collect(),
        static_w,
    }
}

fn one_node() -> SweepTable {
    SweepTable {
        nodes: vec![node("a", &[(1.0, 20.0, 20.0), (2.0, 10.0, 80.0)], 2.0)],
        fixed_time_s: 0.0,
        fixed_energy_j: 0.0,
        steps: None,
    }
}

fn goal(objective: Objective, limits: Limits) -> Goal {
    Goal {
        objective,
        limits,
        baseline_time_s: 10.0,
        baseline_energy_j: 100.0,
    }
}

/// The sweep's answer, after checking that brute force agrees.
fn solve(t: &SweepTable, g: &Goal) -> Optimum {
    let s = sweep(t, g).unwrap();
    assert_eq!(s.pick, brute(t, g).unwrap().pick);
    s
}

#[test]
fn algorithm1_never_lowers_a_lone_node() {
    // Algorithm 1 keeps the slowest node's gear each round; with one node that is
    // every round, so it cannot meet an energy cap the sweep meets at 1 GHz.
    let limits = Limits {
        energy_cap_j: Some(90.0),
        ..Limits::default()
    };
    let g = goal(Objective::MinTime, limits);
    let p = algorithm1(&one_node(), &g).unwrap();
    assert_eq!(p.pick, vec![1]);
    assert!(!p.assessment.feasible);
    assert_eq!(p.candidates, 1);
    assert!(sweep(&one_node(), &g).unwrap().assessment.feasible);
}

#[test]
fn algorithm1_matches_on_two_nodes() {
    let g = Goal {
        objective: Objective::MinTime,
        limits: Limits::default(),
        baseline_time_s: 10.0,
        baseline_energy_j: 140.0,
    };
    assert_eq!(algorithm1(&two_nodes(), &g).unwrap().pick, vec![0, 1]);
}

#[test]
fn min_time_without_limits_runs_at_maximum() {
    let o = solve(&one_node(), &goal(Objective::MinTime, Limits::default()));
    assert_eq!(o.pick, vec![1]);
    assert_eq!((o.time_s, o.energy_j), (10.0, 100.0));
}

#[test]
fn energy_cap_forces_the_lower_frequency() {
    let limits = Limits {
        energy_cap_j: Some(90.0),
        ..Limits::default()
    };
    let o = solve(&one_node(), &goal(Objective::MinTime, limits));
    assert_eq!(o.pick, vec![0]);
    assert_eq!((o.time_s, o.energy_j), (20.0, 60.0));
    assert!(o.assessment.feasible);
}

#[test]
fn power_cap_forces_the_lower_frequency() {
    let limits = Limits {
        power_cap_w: Some(5.0),
        ..Limits::default()
    };
    let o = solve(&one_node(), &goal(Objective::MinTime, limits));
    assert_eq!(o.pick, vec![0]);
    assert!((o.avg_power_w() - 3.0).abs() < 1e-12);
}

#[test]
fn time_limit_rejects_the_slow_frequency() {
    let free = solve(&one_node(), &goal(Objective::MinEnergy, Limits::default()));
    assert_eq!(
        free.pick,
        vec![0],
        "without a limit 1 GHz uses least energy (60 J < 100 J)"
    );
    let limits = Limits {
        time_limit_s: Some(15.0),
        ..Limits::default()
    };
    let o = solve(&one_node(), &goal(Objective::MinEnergy, limits));
    assert_eq!(o.pick, vec![1], "20 s is past the 15 s limit");
}

#[test]
fn an_impossible_time_limit_is_infeasible_and_plans_the_fastest() {
    let limits = Limits {
        time_limit_s: Some(5.0),
        ..Limits::default()
    };
    let g = goal(Objective::MinEnergy, limits);
    let o = solve(&one_node(), &g);
    assert!(!o.assessment.feasible);
    assert_eq!(o.pick, vec![1], "10 s is the closest to 5 s");
    let why = g.explain(o.time_s, o.energy_j);
    assert!(
        why.contains("time limit 5.0 s exceeded (closest 10.0 s)"),
        "{why}"
    );
}

#[test]
fn an_impossible_power_cap_plans_the_lowest_power_and_says_so() {
    let limits = Limits {
        power_cap_w: Some(2.5),
        energy_cap_j: Some(70.0),
        ..Limits::default()
    };
    let g = goal(Objective::MinTime, limits);
    let o = solve(&one_node(), &g);
    assert!(!o.assessment.feasible);
    assert_eq!(o.pick, vec![0], "3 W is the lowest power there is");
    assert!(
        g.explain(o.time_s, o.energy_j)
            .contains("power cap 2.5 W exceeded (closest 3.0 W)")
    );
}

#[test]
fn max_slowdown_bounds_time_against_the_baseline() {
    // Baseline 10 s: 50 % slowdown allows 15 s (rejects 20 s), 100 % allows 20 s.
    let tight = Limits {
        max_slowdown: Some(0.5),
        ..Limits::default()
    };
    assert_eq!(
        solve(&one_node(), &goal(Objective::MinEnergy, tight)).pick,
        vec![1]
    );
    let loose = Limits {
        max_slowdown: Some(1.0),
        ..Limits::default()
    };
    assert_eq!(
        solve(&one_node(), &goal(Objective::MinEnergy, loose)).pick,
        vec![0]
    );
}

#[test]
fn max_dist_weighs_speed_against_energy() {
    // 2 GHz: 10/10 - 100/100 = 0.  1 GHz: 10/20 - 60/100 = -0.1.  So 2 GHz.
    let o = solve(&one_node(), &goal(Objective::MaxDist, Limits::default()));
    assert_eq!(o.pick, vec![1]);
    assert!(o.assessment.value.abs() < 1e-12);
}

#[test]
fn edp_and_ed2p_pick_by_hand() {
    // EDP: 100*10 = 1000 vs 60*20 = 1200 -> 2 GHz.  ED2P likewise (10000 vs 24000).
    assert_eq!(
        solve(&one_node(), &goal(Objective::MinEdp, Limits::default())).pick,
        vec![1]
    );
    assert_eq!(
        solve(&one_node(), &goal(Objective::MinEd2p, Limits::default())).pick,
        vec![1]
    );
}

/// Two nodes: b is the slow one. a at 2 GHz takes 5 s (40 J dynamic), at 1 GHz 10 s (10 J);
/// b at 2 GHz takes 10 s (80 J), at 1 GHz 20 s (20 J); 1 W static each.
fn two_nodes() -> SweepTable {
    SweepTable {
        nodes: vec![
            node("a", &[(1.0, 10.0, 10.0), (2.0, 5.0, 40.0)], 1.0),
            node("b", &[(1.0, 20.0, 20.0), (2.0, 10.0, 80.0)], 1.0),
        ],
        fixed_time_s: 0.0,
        fixed_energy_j: 0.0,
        steps: None,
    }
}

#[test]
fn min_time_slows_the_node_that_would_wait_anyway() {
    // T = 10 s needs b at 2 GHz; a at 1 GHz also takes 10 s: E = 10 + 80 + 2*10 = 110 J
    // instead of 40 + 80 + 20 = 140 J.
    let g = Goal {
        objective: Objective::MinTime,
        limits: Limits::default(),
        baseline_time_s: 10.0,
        baseline_energy_j: 140.0,
    };
    let o = solve(&two_nodes(), &g);
    assert_eq!(o.pick, vec![0, 1]);
    assert_eq!((o.time_s, o.energy_j), (10.0, 110.0));
}

#[test]
fn energy_cap_between_configurations_picks_the_fastest_under_it() {
    // (a1,b1): T 20, E 10+20+40 = 70.  (a2,b1): T 20, E 40+20+40 = 100.  (a1,b2): 110.  (a2,b2): 140.
    let g = Goal {
        objective: Objective::MinTime,
        limits: Limits {
            energy_cap_j: Some(105.0),
            ..Limits::default()
        },
        baseline_time_s: 10.0,
        baseline_energy_j: 140.0,
    };
    let o = solve(&two_nodes(), &g);
    assert_eq!(
        o.pick,
        vec![0, 0],
        "only the 20 s configurations fit; the cheaper of them is kept"
    );
    assert_eq!((o.time_s, o.energy_j), (20.0, 70.0));
}
