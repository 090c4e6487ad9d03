//! Savings and slowdowns measured against measured baselines of the same application and
//! allocation, with their spread, and the verdict on a policy's `max_slowdown`. Every
//! expected number is worked out by hand from the fixture below.
//!
//! Baselines on allocation A (time s, energy J): (100, 1000), (104, 1100), (98, 900):
//! medians 100 s and 1000 J. min-energy on A: (120, 800), (118, 850), (125, 780): savings
//! 20, 15, 22 % and slowdowns 20, 18, 25 %. max-dist on A: (105, 900), (103, 950):
//! savings 10, 5 % and slowdowns 5, 3 %.

mod report_fixture;

use greenup::report::measured::{self, Spread};
use greenup::report::{AppHistory, JobReport, RunState, Warning, text};

const A: &str = "4 nodes: 1 type1, 1 type2, 1 type3, 1 type4";

fn run(id: u64, policy: &str, baseline: bool, shape: &str, t: f64, e: f64) -> JobReport {
    let mut r = report_fixture::measured_job();
    r.job_id = id;
    r.policy = policy.into();
    r.baseline_run = baseline;
    r.shape = shape.into();
    r.measured.time_s = Some(t);
    r.measured.energy_j = Some(e);
    r.measured.avg_power_w = Some(e / t);
    r.predicted.time_s = greenup_core::quantity::Seconds(t);
    r
}

fn fixture() -> Vec<JobReport> {
    let mut failed_base = run(9, "monitor", true, A, 10.0, 10.0);
    failed_base.state = RunState::Failed;
    let mut failed = run(10, "min-energy", false, A, 500.0, 100.0);
    failed.state = RunState::Failed;
    let mut limited = run(12, "min-energy", false, A, 500.0, 100.0);
    limited.warnings = vec![Warning::BudgetLimited("only 10 W left".into())];
    let mut fallback = run(13, "min-energy", false, A, 500.0, 100.0);
    fallback.warnings = vec![Warning::Fallback("ran unchanged: no profile".into())];
    vec![
        run(1, "monitor", true, A, 100.0, 1000.0),
        run(2, "monitor", true, A, 104.0, 1100.0),
        run(3, "monitor", true, A, 98.0, 900.0),
        run(4, "min-energy", false, A, 120.0, 800.0),
        run(5, "min-energy", false, A, 118.0, 850.0),
        run(6, "min-energy", false, A, 125.0, 780.0),
        run(7, "max-dist", false, A, 105.0, 900.0),
        run(8, "max-dist", false, A, 103.0, 950.0),
        failed_base,
        failed,
        // No baseline of this allocation: never compared.
        run(11, "min-energy", false, "2 nodes: 2 type1", 60.0, 300.0),
        // Held back by the power budget, or run unplanned: not the policy's doing.
        limited,
        fallback,
    ]
}

fn targets(p: &str) -> Option<f64> {
    match p {
        "min-energy" => Some(0.10),
        "max-dist" => Some(0.10),
        _ => None,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn assert_spread(s: &Spread, n: usize, min: f64, median: f64, max: f64) {
    assert_eq!(s.n, n, "{s:?}");
    assert!(
        close(s.min, min) && close(s.median, median) && close(s.max, max),
        "{s:?}"
    );
}

#[test]
fn baselines_are_the_completed_f_max_runs_of_each_allocation() {
    let b = measured::baselines(&fixture());
    assert_eq!(b.len(), 1, "{b:?}");
    let a = &b[A];
    assert_spread(&a.time_s, 3, 98.0, 100.0, 104.0);
    assert_spread(&a.energy_j, 3, 900.0, 1000.0, 1100.0);
}

#[test]
fn each_policy_against_the_baselines_median_with_its_spread() {
    let m = measured::by_policy(&fixture(), targets);
    assert_eq!(m.len(), 2, "{m:?}");
    let dist = m.iter().find(|p| p.policy == "max-dist").unwrap();
    let energy = m.iter().find(|p| p.policy == "min-energy").unwrap();
    assert_eq!(energy.shape, A);
    assert_eq!(energy.baseline_runs, 3);
    assert_spread(&energy.saving_pct, 3, 15.0, 20.0, 22.0);
    assert_spread(&energy.slowdown_pct, 3, 18.0, 20.0, 25.0);
    // The model's own saving, against its predicted baseline: (6.4 - 5.2) / 6.4 = 18.75 %.
    assert_spread(
        energy.predicted_saving_pct.as_ref().unwrap(),
        3,
        18.75,
        18.75,
        18.75,
    );
    assert!(energy.missed, "median 20 % > 10 %");
    let line = energy.miss_line().unwrap();
    assert!(line.contains("max_slowdown 10.0%"), "{line}");
    assert!(
        line.contains(
            "median measured slowdown 20.0% over 3 runs against 3 measured baseline runs"
        ),
        "{line}"
    );

    assert_spread(&dist.saving_pct, 2, 5.0, 7.5, 10.0);
    assert_spread(&dist.slowdown_pct, 2, 3.0, 4.0, 5.0);
    assert!(!dist.missed && dist.miss_line().is_none());
}

#[test]
fn a_policy_is_judged_only_on_enough_runs_and_against_its_own_target() {
    // A looser target is met.
    let m = measured::by_policy(&fixture(), |_| Some(0.25));
    assert!(m.iter().all(|p| !p.missed), "{m:?}");
    // Two runs of 50 % slowdown are not yet a verdict.
    let mut runs = fixture();
    runs.retain(|r| r.policy != "min-energy");
    runs.push(run(20, "edp", false, A, 150.0, 900.0));
    runs.push(run(21, "edp", false, A, 150.0, 900.0));
    let m = measured::by_policy(&runs, |_| Some(0.1));
    let edp = m.iter().find(|p| p.policy == "edp").unwrap();
    assert!(!edp.missed, "{edp:?}");
    runs.push(run(22, "edp", false, A, 150.0, 900.0));
    let m = measured::by_policy(&runs, |_| Some(0.1));
    assert!(m.iter().find(|p| p.policy == "edp").unwrap().missed);
    // No target, no verdict.
    let m = measured::by_policy(&runs, |_| None);
    assert!(m.iter().all(|p| !p.missed));
}

#[test]
fn one_run_against_the_measured_baseline() {
    let b = measured::baselines(&fixture());
    let a = measured::against(&run(4, "min-energy", false, A, 120.0, 800.0), &b[A]).unwrap();
    assert_eq!(a.baseline_runs, 3);
    assert!(
        close(a.saving_pct, 20.0) && close(a.slowdown_pct, 20.0),
        "{a:?}"
    );
    assert!(close(a.baseline_time_s, 100.0) && close(a.baseline_energy_j, 1000.0));
    // A baseline is not compared with itself, nor a run with another allocation's.
    assert!(measured::against(&run(1, "monitor", true, A, 100.0, 1000.0), &b[A]).is_none());
    assert!(
        measured::against(
            &run(11, "min-energy", false, "1 node: 1 type1", 1.0, 1.0),
            &b[A]
        )
        .is_none()
    );
}

#[test]
fn greenup_app_shows_the_measured_table_and_the_miss() {
    let runs: Vec<JobReport> = fixture()
        .into_iter()
        .map(|mut r| {
            r.app = "lammps".into();
            r
        })
        .collect();
    let h = AppHistory::build("lammps", &runs, &[]).measure(&runs, targets);
    let out = text::app_history(&h);
    assert!(out.contains("Against measured baselines"), "{out}");
    assert!(out.contains("20.0% (min 15.0%, max 22.0%)"), "{out}");
    assert!(
        out.contains("18.8% (min 18.8%, max 18.8%) (vs predicted)"),
        "{out}"
    );
    assert!(
        out.contains("MISSED: policy min-energy missed its max_slowdown 10.0%"),
        "{out}"
    );
    assert!(!out.contains("MISSED: policy max-dist"), "{out}");
    let json = greenup::report::table::app_json(&h).unwrap();
    assert!(json.contains("\"missed\": true"), "{json}");

    // Without any measured baseline, the page says the savings are against the prediction.
    let none: Vec<JobReport> = runs.into_iter().filter(|r| !r.baseline_run).collect();
    let out = text::app_history(&AppHistory::build("lammps", &none, &[]));
    assert!(out.contains("Measured baselines: none yet"), "{out}");
}

#[test]
fn the_shape_counts_each_type() {
    assert_eq!(
        measured::shape_of(["type2", "type1", "type2"]),
        "3 nodes: 1 type1, 2 type2"
    );
    assert_eq!(measured::shape_of(["eco"]), "1 node: 1 eco");
}
