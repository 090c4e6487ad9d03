//! Jobs greenup refuses to manage are still on record: a policy the site does not
//! allow, a profile that cannot be used, an invalid cap from a submission that skipped
//! sbatch's checks. Each is stored with its verdict, its reason and the power it holds,
//! every node gets the same answer, and `greenup report` says why the job ran
//! unmanaged. Real munged, real SQLite, the shipped policies and profiles.

mod daemon_support;

use std::process::Command;

use daemon_support::*;
use greenup::site::Enforce;
use greenup_core::quantity::{Joules, Watts};
use greenup_proto::protocol::{ErrorCode, JobState, OpenJob, Verdict};

/// Job `id` on nodes n1 and n2 of the test site (200 + 100 W each at full power).
fn two_nodes(id: u64) -> OpenJob {
    OpenJob {
        restart_count: None,
        profile: Some("lammps".into()),
        policy: Some("min-energy".into()),
        ..open_req(id, 0, 2)
    }
}

/// The refusal every node of the job is answered with: the decision, refused, with why.
fn refused(d: &Daemon, req: OpenJob) -> (ErrorCode, String) {
    let dec = d
        .tcp_client()
        .open_job(req)
        .expect("a refused job is still answered");
    assert_eq!(dec.verdict, Verdict::Refused, "{}", dec.reason);
    (dec.refusal.expect("a refusal names its cause"), dec.reason)
}

fn debug_line(d: &Daemon) -> (usize, f64) {
    let st = d.tcp_client().status().unwrap();
    let l = st.ledger.iter().find(|l| l.scope == "debug").unwrap();
    (l.jobs, l.reserved_w.0)
}

#[test]
fn a_policy_the_site_does_not_allow_is_recorded_and_holds_full_power() {
    let d = start(4, |_, s, _| s.allowed_policies = vec!["min-energy".into()]);
    let req = OpenJob {
        restart_count: None,
        policy: Some("min-time".into()),
        ..two_nodes(5)
    };
    // Both nodes of the job ask; both get the same refusal.
    for _ in 0..2 {
        let (code, msg) = refused(&d, req.clone());
        assert_eq!(code, ErrorCode::PlanFailed, "{msg}");
        assert!(msg.contains("allowed policies: min-energy"), "{msg}");
    }
    let rec = d.tcp_client().get_job(5).unwrap();
    assert_eq!(rec.decision.verdict, Verdict::Refused);
    assert_eq!(rec.state, JobState::Open, "it runs, so it is open");
    // It runs unmanaged at full power: 2 x (200 + 100) W.
    assert_eq!(rec.decision.reserved_w.0, 600.0);
    assert_eq!(debug_line(&d), (1, 600.0));
    assert!(
        rec.decision.reason.contains("runs unmanaged at full power"),
        "{}",
        rec.decision.reason
    );
    // Its epilog closes it like any job, giving the watts back.
    assert!(
        d.tcp_client()
            .close_job(5, Some(greenup::record::JobEnd::Completed), None)
            .unwrap()
    );
    assert_eq!(debug_line(&d), (0, 0.0));
}

#[test]
fn under_strict_a_refused_job_is_recorded_closed_and_holds_nothing() {
    let d = start(4, |_, s, _| s.enforce = Enforce::Strict);
    let req = OpenJob {
        restart_count: None,
        profile: Some("no-such-application".into()),
        ..two_nodes(6)
    };
    let (code, msg) = refused(&d, req);
    assert_eq!(code, ErrorCode::PlanFailed, "{msg}");
    let rec = d.tcp_client().get_job(6).unwrap();
    assert_eq!(
        (rec.state, rec.decision.verdict, rec.decision.reserved_w),
        (JobState::Closed, Verdict::Refused, Watts(0.0))
    );
    assert!(
        rec.decision
            .reason
            .contains("the job fails (enforce: strict)"),
        "{}",
        rec.decision.reason
    );
    assert_eq!(debug_line(&d), (0, 0.0));
}

#[test]
fn caps_no_sbatch_check_saw_are_refused_on_record() {
    let d = start(4, |_, _, _| {});
    for (id, req) in [
        (
            7,
            OpenJob {
                restart_count: None,
                power_cap_w: Some(Watts(-5.0)),
                ..two_nodes(7)
            },
        ),
        (
            8,
            OpenJob {
                restart_count: None,
                energy_cap_j: Some(Joules(0.0)),
                ..two_nodes(8)
            },
        ),
        (
            9,
            OpenJob {
                restart_count: None,
                min_nodes: Some(3),
                ..two_nodes(9)
            },
        ),
    ] {
        let (code, msg) = refused(&d, req);
        assert_eq!(code, ErrorCode::BadRequest, "{msg}");
        let rec = d.tcp_client().get_job(id).unwrap();
        assert_eq!(rec.decision.verdict, Verdict::Refused, "job {id}");
        assert_eq!(rec.decision.reserved_w.0, 600.0, "job {id}");
    }
    assert_eq!(debug_line(&d), (3, 1800.0));
}

#[test]
fn greenup_report_says_why_a_job_ran_unmanaged() {
    let d = start(4, |_, s, _| s.allowed_policies = vec!["min-energy".into()]);
    let req = OpenJob {
        restart_count: None,
        policy: Some("min-time".into()),
        ..two_nodes(21)
    };
    refused(&d, req);
    let site = cli_site(&d);
    let out = Command::new(env!("CARGO_BIN_EXE_greenup"))
        .args(["report", "21", "--site", site.to_str().unwrap()])
        // No sacct here: the report says accounting is unavailable and goes on.
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(page.contains("refused"), "{page}");
    assert!(page.contains("allowed policies: min-energy"), "{page}");
    assert!(page.contains("runs unmanaged at full power"), "{page}");
}

#[test]
fn caps_above_the_site_limits_are_planned_under_the_site_limits_and_recorded() {
    let d = start(4, |_, s, _| s.power_cap_w = Some(1_000.0));
    // A 1 GW cap, which sbatch would have refused: the site's 1 kW still binds.
    let dec = d
        .tcp_client()
        .open_job(OpenJob {
            restart_count: None,
            power_cap_w: Some(Watts(1e9)),
            ..two_nodes(30)
        })
        .unwrap();
    assert_eq!(dec.verdict, Verdict::Planned, "{}", dec.reason);
    assert_eq!(dec.power_cap_w, Some(Watts(1_000.0)));
    assert!(dec.reserved_w.0 <= 1_000.0, "{}", dec.reserved_w.0);
    let rec = d.tcp_client().get_job(30).unwrap();
    assert_eq!(rec.decision, dec);
}
