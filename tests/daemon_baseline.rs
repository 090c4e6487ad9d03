//! Baseline sampling and policy holds in greenupd's decisions: which jobs run with every
//! node at f_max as measured baselines, that no cap is ever lifted for one, and that a
//! held policy falls back to monitor only when the site asks for it.
//!
//! The expected watts are summed by hand from etc/greenup.yaml (Table I of paper 004:
//! type1 20+4 W, type2 25+5 W, type3 30+6 W, type4 35+7 W at f_max), and the hash
//! fixtures were computed with an independent implementation of splitmix64.

use greenup::site::{BaselineSettings, OnMiss, Site};
use greenup_daemon::baseline::{AppState, job_share, picked};
use greenup_daemon::decide::Decider;
use greenup_proto::protocol::{OpenJob, Verdict};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One node of each Table I type at f_max, in watts: 24 + 30 + 36 + 42.
const FMAX_W: f64 = 132.0;

fn make_site(store: &std::path::Path, b: Option<BaselineSettings>) -> Site {
    let mut site = greenup::site::load(format!("{ROOT}/etc/greenup.yaml")).unwrap();
    site.daemon.store = store.join("greenup.db");
    site.baseline = b;
    site
}

fn settings(fraction: f64, min_runs: u32, on_miss: OnMiss) -> Option<BaselineSettings> {
    Some(BaselineSettings {
        fraction,
        min_runs,
        on_miss,
    })
}

fn job(id: u64) -> OpenJob {
    OpenJob {
        restart_count: None,
        job_id: id,
        uid: 1000,
        user: None,
        partition: None,
        account: None,
        nodes: ["h001", "h037", "h073", "h109"]
            .iter()
            .map(|n| n.to_string())
            .collect(),
        nodelist: None,
        min_nodes: None,
        time_limit: greenup::record::TimeLimit::Unknown,
        policy: Some("min-energy".into()),
        profile: Some("hetero-table1".into()),
        energy_cap_j: None,
        power_cap_w: None,
        algorithm: None,
        granted_w: None,
    }
}

fn seen(baselines: u32) -> AppState {
    AppState {
        baselines,
        ..AppState::default()
    }
}

#[test]
fn the_job_share_is_splitmix64_of_the_job_id() {
    // Values from a separate implementation of splitmix64's finaliser (top 53 bits / 2^53).
    for (id, want) in [
        (1, 0.5665615751722809),
        (2, 0.5911897341980794),
        (3, 0.11345034205715454),
        (42, 0.7415648787718233),
        (1000, 0.2348438825700212),
        (123456789, 0.13373499206310924),
    ] {
        assert_eq!(job_share(id), want, "job {id}");
    }
    // Ids Slurm hands out in order: 5,038 of the first 100,000 fall below 0.05 (counted
    // by the same separate implementation).
    let b = settings(0.05, 0, OnMiss::Report).unwrap();
    let n = (1..=100_000u64).filter(|&id| picked(&b, id, 0)).count();
    assert_eq!(n, 5038);
}

#[test]
fn every_job_is_sampled_until_min_runs_then_only_the_fraction() {
    let dir = tempfile::tempdir().unwrap();
    let site = make_site(dir.path(), settings(0.0, 3, OnMiss::Report));
    let d = Decider::new(&site).unwrap();
    for have in 0..3 {
        let p = d.decide_with(&site, &job(7), None, &seen(have)).unwrap();
        assert_eq!(p.verdict, Verdict::Unchanged, "{have} baselines: {p:?}");
        assert!(p.monitor && p.baseline_sample, "{p:?}");
        assert!(p.reason.starts_with("baseline sample"), "{}", p.reason);
        assert_eq!(p.reserve_w.0, FMAX_W);
        // The plan the policy would have made is kept for the report.
        assert!(p.plan.is_some());
    }
    let p = d.decide_with(&site, &job(7), None, &seen(3)).unwrap();
    assert_eq!(p.verdict, Verdict::Planned, "{p:?}");
    assert!(!p.monitor && !p.baseline_sample);

    // fraction 1 samples every job, whatever its history.
    let all = make_site(dir.path(), settings(1.0, 0, OnMiss::Report));
    let d = Decider::new(&all).unwrap();
    let p = d.decide_with(&all, &job(8), None, &seen(100)).unwrap();
    assert!(p.baseline_sample, "{p:?}");

    // Without the section nothing is ever sampled, however few baselines there are.
    let none = make_site(dir.path(), None);
    let d = Decider::new(&none).unwrap();
    let p = d.decide_with(&none, &job(9), None, &seen(0)).unwrap();
    assert_eq!(p.verdict, Verdict::Planned, "{p:?}");
}

#[test]
fn a_sample_never_lifts_a_power_or_energy_cap() {
    let dir = tempfile::tempdir().unwrap();
    let site = make_site(dir.path(), settings(1.0, 3, OnMiss::Report));
    let d = Decider::new(&site).unwrap();

    // The user's cap 1 W under f_max: the job runs its plan, not at f_max.
    let mut j = job(11);
    j.power_cap_w = Some(greenup_core::quantity::Watts(FMAX_W - 1.0));
    let p = d.decide_with(&site, &j, None, &seen(0)).unwrap();
    assert_eq!(p.verdict, Verdict::Planned, "{p:?}");
    assert!(!p.baseline_sample);
    // The budget left (the site's and partition's caps) 1 W under f_max: likewise.
    let p = d
        .decide_with(&site, &job(12), Some(FMAX_W - 1.0), &seen(0))
        .unwrap();
    assert_eq!(p.verdict, Verdict::Planned, "{p:?}");
    // Exactly f_max's watts left: the sample fits.
    let p = d
        .decide_with(&site, &job(13), Some(FMAX_W), &seen(0))
        .unwrap();
    assert!(p.baseline_sample, "{p:?}");

    // An energy cap between the plan's energy and f_max's: the plan fits, f_max does not.
    let plain = make_site(dir.path(), None);
    let plan = Decider::new(&plain)
        .unwrap()
        .decide(&plain, &job(14), None)
        .unwrap()
        .plan
        .unwrap();
    assert!(
        plan.predicted.energy_j.0 < plan.baseline.energy_j.0,
        "{plan:?}"
    );
    let mut j = job(14);
    j.energy_cap_j = Some((plan.predicted.energy_j + plan.baseline.energy_j) / 2.0);
    let p = d.decide_with(&site, &j, None, &seen(0)).unwrap();
    assert_eq!(p.verdict, Verdict::Planned, "{p:?}");
    assert!(!p.baseline_sample);
}

#[test]
fn a_sample_keeps_the_policys_own_caps_too() {
    let dir = tempfile::tempdir().unwrap();
    let plain = make_site(dir.path(), None);
    let plan = Decider::new(&plain)
        .unwrap()
        .decide(&plain, &job(15), None)
        .unwrap()
        .plan
        .unwrap();
    // Policies like min-energy whose own caps sit 1 W under f_max's watts, and halfway
    // between the plan's energy and f_max's: the plan keeps them, f_max would not.
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    let cap_w = FMAX_W - 1.0;
    let cap_j = (plan.predicted.energy_j.0 + plan.baseline.energy_j.0) / 2.0;
    for (name, constraint) in [
        ("watts", format!("power_cap: {cap_w}")),
        ("joules", format!("energy_cap: {cap_j}")),
        ("neither", "max_slowdown: 10".to_string()),
    ] {
        std::fs::write(
            policies.join(format!("{name}.yaml")),
            format!("name: {name}\nobjective: min_energy\nconstraints:\n  {constraint}\n"),
        )
        .unwrap();
    }
    let mut site = make_site(dir.path(), settings(1.0, 3, OnMiss::Report));
    site.policy_dirs.push(policies);
    site.allowed_policies.clear();
    let d = Decider::new(&site).unwrap();
    for (id, policy, sampled) in [
        (16, "watts", false),
        (17, "joules", false),
        (18, "neither", true),
    ] {
        let mut j = job(id);
        j.policy = Some(policy.into());
        let p = d.decide_with(&site, &j, None, &seen(0)).unwrap();
        assert_eq!(p.baseline_sample, sampled, "{policy}: {p:?}");
        if !sampled {
            assert_eq!(p.verdict, Verdict::Planned, "{policy}: {p:?}");
        }
    }
}

#[test]
fn a_job_without_a_profile_or_under_monitor_is_never_a_sample() {
    let dir = tempfile::tempdir().unwrap();
    let site = make_site(dir.path(), settings(1.0, 3, OnMiss::Report));
    let d = Decider::new(&site).unwrap();
    let mut j = job(21);
    j.profile = None;
    let p = d.decide_with(&site, &j, None, &seen(0)).unwrap();
    assert!(!p.baseline_sample, "{p:?}");
    let mut j = job(22);
    j.policy = Some("monitor".into());
    let p = d.decide_with(&site, &j, None, &seen(0)).unwrap();
    assert!(p.monitor && !p.baseline_sample, "{p:?}");
}

#[test]
fn a_held_policy_falls_back_to_monitor_only_when_the_site_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let held = AppState {
        baselines: 10,
        hold: Some("median measured slowdown 20.0% over 3 runs".into()),
        ..AppState::default()
    };
    let site = make_site(dir.path(), settings(0.0, 0, OnMiss::Monitor));
    let d = Decider::new(&site).unwrap();
    let p = d.decide_with(&site, &job(31), None, &held).unwrap();
    assert_eq!(p.verdict, Verdict::Unchanged, "{p:?}");
    assert!(p.monitor && !p.baseline_sample, "{p:?}");
    assert!(
        p.reason
            .contains("policy min-energy is held for hetero-table1"),
        "{}",
        p.reason
    );
    assert!(
        p.reason
            .contains("greenup policy clear hetero-table1 min-energy"),
        "{}",
        p.reason
    );
    assert!(p.plan.is_none());

    // A hold never lifts a cap: under a budget f_max does not fit, the policy still applies.
    let p = d
        .decide_with(&site, &job(33), Some(FMAX_W - 1.0), &held)
        .unwrap();
    assert_eq!(p.verdict, Verdict::Planned, "{p:?}");

    // on_miss: report keeps applying the policy.
    let report = make_site(dir.path(), settings(0.0, 0, OnMiss::Report));
    let d = Decider::new(&report).unwrap();
    let p = d.decide_with(&report, &job(32), None, &held).unwrap();
    assert_eq!(p.verdict, Verdict::Planned, "{p:?}");
}
