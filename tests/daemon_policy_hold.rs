//! greenupd end to end: the site's baseline samples, a policy held after its measured
//! slowdown missed `max_slowdown`, and only root or the SlurmUser lifting the hold.
//! Real munged, real SQLite, a real greenupd on loopback. Needs root.
//!
//! The runs: two baseline samples take 1/1.5 of the shortest predicted time of three
//! `edp` runs, which each take their predicted time, so every `edp` run is at least
//! 50 % slower than the baselines' median, past edp's `max_slowdown` of 10 %.

mod daemon_support;

use daemon_support::*;
use greenup::record::JobEnd;
use greenup::site::{BaselineSettings, OnMiss};
use greenup_core::quantity::{Ghz, Joules, Seconds};
use greenup_proto::protocol::{
    ErrorCode, NodeOutcome, OpenJob, Request, Verdict, request_body, request_line,
};

fn req(id: u64, policy: &str) -> OpenJob {
    let mut r = open_req(id, 0, 2);
    r.profile = Some("wrong".into());
    r.policy = Some(policy.into());
    r
}

fn line_as(user: Option<&str>, req: &Request) -> Vec<u8> {
    let body = request_body(req).unwrap();
    let cred = cred_as(user, &body, None);
    request_line(&body, Some(&cred)).unwrap()
}

#[test]
fn a_policy_that_misses_its_slowdown_is_held_until_root_clears_it() {
    let d = start(2, |dir, s, _| {
        s.profile_dir = wrong_profile_dir(dir);
        s.baseline = Some(BaselineSettings {
            fraction: 0.0,
            min_runs: 2,
            on_miss: OnMiss::Monitor,
        });
    });
    let mut c = d.tcp_client();
    let samples: Vec<_> = (1..=2)
        .map(|id| c.open_job(req(id, "edp")).unwrap())
        .collect();
    for s in &samples {
        assert_eq!(s.verdict, Verdict::Unchanged, "{s:?}");
        assert!(s.monitor && s.baseline_sample, "{s:?}");
    }
    assert_eq!(
        count(
            &d.store,
            "SELECT count(*) FROM decisions WHERE json_extract(decision, '$.baseline_sample') = 1"
        ),
        2
    );
    let runs: Vec<_> = (3..=5)
        .map(|id| c.open_job(req(id, "edp")).unwrap())
        .collect();
    for r in &runs {
        assert_eq!(r.verdict, Verdict::Planned, "{r:?}");
        assert!(!r.monitor && !r.baseline_sample);
    }
    let shortest = runs
        .iter()
        .map(|r| r.plan.as_ref().unwrap().predicted.time_s.0)
        .fold(f64::INFINITY, f64::min);
    for s in &samples {
        for n in ["n1", "n2"] {
            c.record_outcome(NodeOutcome {
                restart_count: None,
                job_id: s.job_id,
                node: n.into(),
                freq_ghz: Some(Ghz(2.4)),
                energy_j: Some(Joules(500.0)),
                elapsed_s: Some(Seconds(shortest / 1.5)),
                source: Some(greenup::record::Source::Rapl),
                restored: true,
                note: None,
                comm: None,
                gpu: None,
                power: None,
            })
            .unwrap();
        }
        c.close_job(s.job_id, Some(JobEnd::Completed), None)
            .unwrap();
    }
    // Two missed runs are no verdict yet.
    for r in &runs[..2] {
        assert!(finish_planned(&d, r, 800.0, Some("rapl")));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(count(&d.store, "SELECT count(*) FROM policy_holds"), 0);
    assert!(finish_planned(&d, &runs[2], 800.0, Some("rapl")));
    wait_for(|| count(&d.store, "SELECT count(*) FROM policy_holds") == 1);

    let held = c.open_job(req(6, "edp")).unwrap();
    assert_eq!(held.verdict, Verdict::Unchanged, "{held:?}");
    assert!(held.monitor && !held.baseline_sample && held.plan.is_none());
    assert!(
        held.reason.contains("policy edp is held for wrong"),
        "{}",
        held.reason
    );
    assert!(
        held.reason.contains("missed its max_slowdown 10.0%"),
        "{}",
        held.reason
    );
    // Another policy for the same application is not held.
    let other = c.open_job(req(7, "min-energy")).unwrap();
    assert_eq!(other.verdict, Verdict::Planned, "{other:?}");

    // An ordinary user can neither clear the hold nor learn anything by trying.
    let clear = Request::ClearHold {
        profile: "wrong".into(),
        policy: "edp".into(),
    };
    let r = d
        .tcp_client()
        .call_raw(&line_as(Some(TEST_USER), &clear))
        .unwrap();
    assert!(!r.ok);
    assert_eq!(r.error.unwrap().code, ErrorCode::Forbidden);
    assert_eq!(count(&d.store, "SELECT count(*) FROM policy_holds"), 1);
    // A bad name is refused before it reaches the store.
    let r = d
        .tcp_client()
        .call_raw(&line_as(
            None,
            &Request::ClearHold {
                profile: "../x".into(),
                policy: "edp".into(),
            },
        ))
        .unwrap();
    assert_eq!(r.error.unwrap().code, ErrorCode::BadRequest);

    assert!(c.clear_hold("wrong", "edp").unwrap());
    assert!(!c.clear_hold("wrong", "edp").unwrap());
    let again = c.open_job(req(8, "edp")).unwrap();
    assert_eq!(again.verdict, Verdict::Planned, "{again:?}");
}
