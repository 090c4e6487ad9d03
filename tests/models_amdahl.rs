//! Paper 003 section 3.2: the Amdahl model by hand, and the least-squares fit.

mod models_common;

use std::path::Path;

use greenup::model::amdahl::{CommLaw, FitError, Run, fit};
use greenup::model::{Config, NodeSetting};
use greenup::profile::Profile;
use models_common::*;

fn truth(t1: f64, fp: f64, law: CommLaw, c: f64, n: usize) -> (f64, f64) {
    let n = n as f64;
    let g = match law {
        CommLaw::Log => n.log2(),
        CommLaw::Linear => n - 1.0,
        CommLaw::Quadratic => n * n - 1.0,
    };
    (t1 * (fp / n + 1.0 - fp), c * g)
}

const NODES: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// A run on `nodes` nodes that took `time_s`, its blocked time not measured.
fn run(nodes: usize, time_s: f64) -> Run {
    Run {
        nodes,
        time_s,
        blocked_s: None,
    }
}

/// Exact runs on each of NODES of the truth `t1`, `fp`, `law`, `c`.
fn truth_runs(t1: f64, fp: f64, law: CommLaw, c: f64) -> Vec<Run> {
    NODES
        .iter()
        .map(|&n| {
            let (tc, tb) = truth(t1, fp, law, c, n);
            run(n, tc + tb)
        })
        .collect()
}

#[test]
fn exact_runs_recover_fp_and_each_law() {
    for (law, c) in [
        (CommLaw::Log, 20.0),
        (CommLaw::Linear, 3.0),
        (CommLaw::Quadratic, 0.05),
    ] {
        let runs = truth_runs(1000.0, 0.9, law, c);
        let f = fit(&runs).unwrap();
        assert_eq!(f.law, law, "{f:?}");
        assert!(close(f.parallel_fraction, 0.9, 1e-6), "{f:?}");
        assert!(close(f.t_c1_s, 1000.0, 1e-6));
        assert!(close(f.coeff_s, c, 1e-6));
        assert!(f.avg_rel_error < 1e-9);
        assert_eq!(f.tried.len(), 3);
    }
}

#[test]
fn three_runs_with_blocked_times_pick_the_law() {
    for (law, c) in [
        (CommLaw::Log, 5.0),
        (CommLaw::Linear, 1.0),
        (CommLaw::Quadratic, 0.1),
    ] {
        let runs: Vec<Run> = [2usize, 4, 8]
            .iter()
            .map(|&n| {
                let (tc, tb) = truth(500.0, 0.95, law, c, n);
                Run {
                    blocked_s: Some(tb),
                    ..run(n, tc + tb)
                }
            })
            .collect();
        let f = fit(&runs).unwrap();
        assert_eq!(f.law, law, "{f:?}");
        assert!(close(f.parallel_fraction, 0.95, 1e-9));
    }
}

#[test]
fn noisy_runs_still_choose_the_right_law() {
    // A fixed +-2% pattern of measurement noise.
    let noise = [0.02, -0.015, 0.01, -0.02, 0.005, 0.018, -0.01, 0.012];
    let nodes = [1usize, 2, 3, 4, 6, 8, 12, 16];
    // Communication is a sizeable share of the time at 16 nodes, as in the paper's programs.
    for (law, c) in [
        (CommLaw::Log, 100.0),
        (CommLaw::Linear, 20.0),
        (CommLaw::Quadratic, 1.0),
    ] {
        let runs: Vec<Run> = nodes
            .iter()
            .zip(noise)
            .map(|(&n, e)| {
                let (tc, tb) = truth(2000.0, 0.85, law, c, n);
                run(n, (tc + tb) * (1.0 + e))
            })
            .collect();
        let f = fit(&runs).unwrap();
        assert_eq!(f.law, law, "{f:?}");
        assert!((f.parallel_fraction - 0.85).abs() < 0.05, "{f:?}");
        // The chosen law has the lowest error of those tried.
        let errs: Vec<f64> = f.tried.iter().filter_map(|(_, e)| *e).collect();
        assert!(errs.iter().all(|e| *e >= f.avg_rel_error));
        // With measured blocked times (also noisy), three runs suffice.
        let three: Vec<Run> = [2usize, 4, 16]
            .iter()
            .zip(noise)
            .map(|(&n, e)| {
                let (tc, tb) = truth(2000.0, 0.85, law, c, n);
                Run {
                    blocked_s: Some(tb * (1.0 + e)),
                    ..run(n, tc + tb * (1.0 + e))
                }
            })
            .collect();
        assert_eq!(fit(&three).unwrap().law, law);
    }
}

#[test]
fn bad_runs_are_errors() {
    assert!(matches!(fit(&[]), Err(FitError::TooFewRuns { .. })));
    let two = [run(1, 10.0), run(2, 6.0)];
    assert!(matches!(fit(&two), Err(FitError::TooFewRuns { .. })));
    let same = [run(2, 10.0); 4];
    assert!(matches!(fit(&same), Err(FitError::TooFewRuns { .. })));
    let neg = [run(1, 10.0), run(2, -6.0), run(4, 4.0)];
    assert!(matches!(fit(&neg), Err(FitError::BadRun { index: 1, .. })));
    let zero = [run(0, 10.0), run(2, 6.0), run(4, 4.0)];
    assert!(matches!(fit(&zero), Err(FitError::BadRun { index: 0, .. })));
}

#[test]
fn prediction_by_hand() {
    // T_C(0,1) = 100 s, F_p = 0.8, T_B(n) = 2 log2 n. Node type: 2.0 GHz max,
    // 80 W dynamic + 20 W static at 2.0 GHz, cube law.
    // n = 4 at 1.0 GHz: S = 2, T_C = 2 * 100 * (0.2 + 0.2) = 80 s, T_B = 4 s, T = 84 s.
    // P_C = 80 / 8 + 20 = 30 W, P_B = 20 W: E = 4 (80 * 30 + 4 * 20) = 9920 J.
    let text = "
name: byhand
version: 3
amdahl:
  t_c1_s: 100
  parallel_fraction: 0.8
  comm: { law: log, coeff_s: 2 }
";
    let p = Profile::from_str(Path::new("byhand.yaml"), text).unwrap();
    let site = site(
        vec![node_type("x", vec![1.0, 2.0], 80.0, 20.0)],
        &[("a", "x"), ("b", "x"), ("c", "x"), ("d", "x")],
    );
    let model = p.predictor(&site).unwrap();
    let cfg = |f: f64| Config {
        nodes: ["a", "b", "c", "d"]
            .iter()
            .map(|n| NodeSetting {
                gpu_mhz: None,
                name: n.to_string(),
                node_type: "x".into(),
                freq_ghz: f,
            })
            .collect(),
    };
    let low = model.predict(&cfg(1.0)).unwrap();
    assert!(close(low.time_s, 84.0, 1e-12), "{low:?}");
    assert!(close(low.energy_j, 9920.0, 1e-12), "{low:?}");
    // At 2.0 GHz: T_C = 40, T = 44, E = 4 (40 * 100 + 4 * 20) = 16320 J.
    let high = model.predict(&cfg(2.0)).unwrap();
    assert!(close(high.time_s, 44.0, 1e-12));
    assert!(close(high.energy_j, 16320.0, 1e-12));
}

#[test]
fn fitted_parameters_round_trip_through_a_profile() {
    let runs = truth_runs(800.0, 0.7, CommLaw::Linear, 2.0);
    let f = fit(&runs).unwrap();
    let text = format!(
        "name: fitted\nversion: 2\namdahl:\n  t_c1_s: {}\n  parallel_fraction: {}\n  comm: {{ law: {}, coeff_s: {} }}\n",
        f.t_c1_s,
        f.parallel_fraction,
        f.law.name(),
        f.coeff_s
    );
    let p = Profile::from_str(Path::new("fitted.yaml"), &text).unwrap();
    let site = site(
        vec![node_type("x", vec![2.0], 50.0, 10.0)],
        &[("a", "x"), ("b", "x"), ("c", "x"), ("d", "x")],
    );
    let cfg = Config {
        nodes: ["a", "b", "c", "d"]
            .iter()
            .map(|n| NodeSetting {
                gpu_mhz: None,
                name: n.to_string(),
                node_type: "x".into(),
                freq_ghz: 2.0,
            })
            .collect(),
    };
    let t = p.predictor(&site).unwrap().predict(&cfg).unwrap().time_s;
    let (tc, tb) = truth(800.0, 0.7, CommLaw::Linear, 2.0, 4);
    assert!(close(t, tc + tb, 1e-9));
    // And the profile serializes back and re-reads to the same values.
    let again = Profile::from_str(Path::new("again.yaml"), &p.to_yaml().unwrap()).unwrap();
    let (a, b) = (again.file.amdahl.unwrap(), p.file.amdahl.clone().unwrap());
    assert_eq!(a.t_c1_s.value, b.t_c1_s.value);
    assert_eq!(a.parallel_fraction.value, b.parallel_fraction.value);
    assert_eq!(a.comm.law.value, b.comm.law.value);
    assert_eq!(a.comm.coeff_s.value, b.comm.coeff_s.value);
}
