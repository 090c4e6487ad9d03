//! The power-budget ledger through greenupd: jobs are decided under the budget
//! left, `over_budget` chooses what happens when even the lowest power does not
//! fit, and closing a job gives its watts back. Real munged, real SQLite, the
//! shipped `lammps` profile and `min-energy` policy.
#![cfg(feature = "daemon")]

mod daemon_support;

use daemon_support::*;
use greenup::daemon::client::ClientError;
use greenup::daemon::protocol::{ErrorCode, OpenJob, Verdict};
use greenup::site::OverBudget;

/// Site cap 10 kW; 32 nodes of 200 W dynamic + 100 W static at 2.4 GHz.
/// Job 1 has no profile, so it runs unchanged and reserves 32 x 300 W = 9600 W,
/// leaving 400 W. Four nodes at the lowest frequency, 1.2 GHz, draw at least
/// 4 x (200 x (1.2/2.4)^3 + 100) = 500 W: nothing fits the 400 W left.
fn crowded(rule: OverBudget) -> Daemon {
    let d = start(32, |_, s, _| {
        s.power_cap_w = Some(10_000.0);
        s.daemon.over_budget = rule;
    });
    let first = d.tcp_client().open_job(open_req(1, 0, 32)).unwrap();
    assert_eq!(
        (first.verdict, first.reserved_w),
        (Verdict::Unchanged, 9600.0)
    );
    d
}

fn lammps(job_id: u64, nodes: usize) -> OpenJob {
    OpenJob {
        profile: Some("lammps".into()),
        policy: Some("min-energy".into()),
        ..open_req(job_id, 0, nodes)
    }
}

#[test]
fn refuse_answers_over_budget_and_every_node_gets_the_same_answer() {
    let d = crowded(OverBudget::Refuse);
    for _ in 0..2 {
        match d.tcp_client().open_job(lammps(2, 4)) {
            Err(ClientError::Server(e)) => {
                assert_eq!(e.code, ErrorCode::OverBudget);
                assert!(
                    e.message.contains("only 400 W of the power budget is left"),
                    "{}",
                    e.message
                );
            }
            other => panic!("expected over_budget, got {other:?}"),
        }
    }
    let st = d.tcp_client().status().unwrap();
    assert_eq!(
        (st.ledger[0].jobs, st.ledger[0].reserved_w),
        (1, 9600.0),
        "a refusal reserves nothing"
    );
    assert_eq!(
        count(
            &d.store,
            "SELECT count(*) FROM decisions WHERE verdict = 'refused'"
        ),
        1
    );
}

#[test]
fn unchanged_runs_the_job_as_submitted_and_reserves_its_baseline() {
    let d = crowded(OverBudget::Unchanged);
    let dec = d.tcp_client().open_job(lammps(2, 4)).unwrap();
    assert_eq!(dec.verdict, Verdict::Unchanged);
    let plan = dec.plan.as_ref().expect("the plan is kept for the record");
    assert_eq!(dec.reserved_w, plan.baseline.avg_power_w);
    assert!(
        (1..=4).all(|i| dec.freq_for(&format!("n{i}")).is_none()),
        "no node is changed"
    );
}

#[test]
fn lowest_runs_every_node_at_its_lowest_frequency() {
    let d = crowded(OverBudget::Lowest);
    let dec = d.tcp_client().open_job(lammps(2, 4)).unwrap();
    assert_eq!(dec.verdict, Verdict::BudgetLimited, "{}", dec.reason);
    assert_eq!(dec.power_cap_w, Some(400.0));
    for i in 1..=4 {
        assert_eq!(dec.freq_for(&format!("n{i}")), Some(1.2), "node n{i}");
    }
    let st = d.tcp_client().status().unwrap();
    assert_eq!(st.ledger[0].jobs, 2);
    assert_eq!(st.ledger[0].reserved_w, 9600.0 + dec.reserved_w);
}

#[test]
fn closing_a_job_returns_its_watts_to_the_next_decision() {
    let d = crowded(OverBudget::Refuse);
    assert!(
        d.tcp_client()
            .close_job(1, Some(greenup::record::JobEnd::Completed))
            .unwrap()
    );
    let st = d.tcp_client().status().unwrap();
    assert_eq!(
        (
            st.ledger[0].jobs,
            st.ledger[0].reserved_w,
            st.ledger[0].free_w
        ),
        (0, 0.0, Some(10_000.0))
    );
    let dec = d.tcp_client().open_job(lammps(3, 4)).unwrap();
    assert_eq!(dec.verdict, Verdict::Planned, "{}", dec.reason);
    assert_eq!(dec.power_cap_w, Some(10_000.0));
    let plan = dec.plan.as_ref().unwrap();
    assert!(plan.feasible);
    assert_eq!(dec.reserved_w, plan.predicted.avg_power_w);
    assert_eq!(dec.profile_version.as_deref(), Some("1"));
}

#[test]
fn a_partition_cap_binds_before_the_site_cap() {
    let d = start(8, |_, s, _| {
        s.power_cap_w = Some(10_000.0);
        if let Some(p) = s.partitions.get_mut("debug") {
            p.power_cap_w = Some(700.0);
        }
        s.daemon.over_budget = OverBudget::Refuse;
    });
    // Two unchanged jobs of one node each reserve 300 W apiece in "debug": 100 W left there.
    d.tcp_client().open_job(open_req(1, 0, 1)).unwrap();
    d.tcp_client().open_job(open_req(2, 0, 1)).unwrap();
    let st = d.tcp_client().status().unwrap();
    let debug = st.ledger.iter().find(|l| l.scope == "debug").unwrap();
    assert_eq!((debug.reserved_w, debug.free_w), (600.0, Some(100.0)));
    // One node at 1.2 GHz draws at least 125 W > 100 W.
    match d.tcp_client().open_job(lammps(3, 1)) {
        Err(ClientError::Server(e)) => assert_eq!(e.code, ErrorCode::OverBudget),
        other => panic!("expected over_budget, got {other:?}"),
    }
}
