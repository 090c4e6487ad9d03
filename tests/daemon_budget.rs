//! The power-budget ledger through greenupd: jobs are decided under the budget
//! left, `over_budget` chooses what happens when even the lowest power does not
//! fit, and closing a job gives its watts back. Real munged, real SQLite, the
//! shipped `lammps` profile and `min-energy` policy.

mod daemon_support;

use daemon_support::*;
use greenup::site::OverBudget;
use greenup_core::quantity::Watts;
use greenup_proto::protocol::{ErrorCode, JobState, OpenJob, Verdict};

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
        (Verdict::Unchanged, Watts(9600.0))
    );
    d
}

fn lammps(job_id: u64, nodes: usize) -> OpenJob {
    OpenJob {
        restart_count: None,
        profile: Some("lammps".into()),
        policy: Some("min-energy".into()),
        ..open_req(job_id, 0, nodes)
    }
}

#[test]
fn refuse_answers_over_budget_and_every_node_gets_the_same_answer() {
    let d = crowded(OverBudget::Refuse);
    for _ in 0..2 {
        let dec = d.tcp_client().open_job(lammps(2, 4)).unwrap();
        assert_eq!(
            (dec.verdict, dec.refusal),
            (Verdict::Refused, Some(ErrorCode::OverBudget))
        );
        assert!(
            dec.reason
                .contains("only 400 W of the power budget is left"),
            "{}",
            dec.reason
        );
        assert_eq!(dec.freq_for("n1"), None);
    }
    // Under `enforce: open` the refused job still runs, unmanaged, at full power: it
    // holds its 4 nodes x (200 + 100) W = 1200 W, so the caps keep holding.
    let st = d.tcp_client().status().unwrap();
    assert_eq!(
        (st.ledger[0].jobs, st.ledger[0].reserved_w),
        (2, Watts(9600.0 + 1200.0))
    );
    let rec = d.tcp_client().get_job(2).unwrap();
    assert_eq!(
        (rec.state, rec.decision.verdict, rec.decision.reserved_w),
        (JobState::Open, Verdict::Refused, Watts(1200.0))
    );
    assert!(
        rec.decision.reason.contains("runs unmanaged at full power"),
        "{}",
        rec.decision.reason
    );
    assert_eq!(
        count(
            &d.store,
            "SELECT count(*) FROM decisions WHERE verdict = 'refused'"
        ),
        1
    );
    assert!(
        d.tcp_client()
            .close_job(2, Some(greenup::record::JobEnd::Completed), None)
            .unwrap()
    );
    let st = d.tcp_client().status().unwrap();
    assert_eq!(
        (st.ledger[0].jobs, st.ledger[0].reserved_w),
        (1, Watts(9600.0))
    );
}

/// Partition "debug" capped at 600 W, held in full by two unchanged one-node jobs
/// (n1, n2: 300 W each), so 0 W is free for a lammps job on n3.
fn used_up(rule: OverBudget) -> Daemon {
    let d = start(4, |_, s, _| {
        s.partitions.get_mut("debug").unwrap().power_cap_w = Some(600.0);
        s.daemon.over_budget = rule;
    });
    for (id, node) in [(1, "n1"), (2, "n2")] {
        d.tcp_client().open_job(on(id, node, None)).unwrap();
    }
    let st = d.tcp_client().status().unwrap();
    let debug = st.ledger.iter().find(|l| l.scope == "debug").unwrap();
    assert_eq!(
        (debug.reserved_w, debug.free_w),
        (Watts(600.0), Some(Watts(0.0)))
    );
    d
}

/// Job `id` on the one node `node`, with the lammps profile when `profile` says so.
fn on(id: u64, node: &str, profile: Option<&str>) -> OpenJob {
    OpenJob {
        restart_count: None,
        nodes: vec![node.into()],
        profile: profile.map(str::to_string),
        policy: Some("min-energy".into()),
        ..open_req(id, 0, 1)
    }
}

/// One node of this site at its lowest frequency: 200 x (1.2 / 2.4)^3 + 100 = 125 W.
const LOWEST_NODE_W: f64 = 125.0;

#[test]
fn lowest_caps_a_job_when_no_budget_is_left_and_below_zero() {
    let d = used_up(OverBudget::Lowest);
    let dec = d
        .tcp_client()
        .open_job(on(3, "n3", Some("lammps")))
        .unwrap();
    assert_eq!(dec.verdict, Verdict::BudgetLimited, "{}", dec.reason);
    assert_eq!(dec.freq_for("n3"), Some(1.2), "the lowest frequency");
    assert_eq!(dec.power_cap_w, Some(Watts(0.0)));
    assert!(
        dec.reason.contains("no power budget is left (0 W free)"),
        "{}",
        dec.reason
    );
    assert!(dec.reserved_w.0 >= LOWEST_NODE_W, "{}", dec.reserved_w.0);
    // The ledger is now overdrawn; the next job is still capped, and told by how much.
    let over = 600.0 - (600.0 + dec.reserved_w.0);
    let next = d
        .tcp_client()
        .open_job(on(4, "n4", Some("lammps")))
        .unwrap();
    assert_eq!(next.verdict, Verdict::BudgetLimited, "{}", next.reason);
    assert_eq!(next.freq_for("n4"), Some(1.2));
    assert!(
        next.reason
            .contains(&format!("no power budget is left ({over:.0} W free)")),
        "{}",
        next.reason
    );
    assert_eq!(
        count(&d.store, "SELECT count(*) FROM jobs WHERE state = 'open'"),
        4
    );
}

#[test]
fn unchanged_and_refuse_apply_when_no_budget_is_left() {
    let d = used_up(OverBudget::Unchanged);
    let dec = d
        .tcp_client()
        .open_job(on(3, "n3", Some("lammps")))
        .unwrap();
    assert_eq!(dec.verdict, Verdict::Unchanged, "{}", dec.reason);
    assert_eq!(dec.freq_for("n3"), None);
    assert_eq!(
        dec.reserved_w,
        dec.plan.as_ref().unwrap().baseline.avg_power_w
    );

    let d = used_up(OverBudget::Refuse);
    let dec = d
        .tcp_client()
        .open_job(on(3, "n3", Some("lammps")))
        .unwrap();
    assert_eq!(
        (dec.verdict, dec.refusal),
        (Verdict::Refused, Some(ErrorCode::OverBudget))
    );
    assert!(
        dec.reason.contains("no power budget is left"),
        "{}",
        dec.reason
    );
    // On record, holding n3's full power: 200 + 100 W.
    let rec = d.tcp_client().get_job(3).unwrap();
    assert_eq!(
        (rec.state, rec.decision.verdict, rec.decision.reserved_w),
        (JobState::Open, Verdict::Refused, Watts(300.0))
    );
}

#[test]
fn a_reload_that_lowers_a_cap_below_what_is_reserved_still_caps_the_next_job() {
    let (d, site) = start_reloadable(4, |_, s, _| {
        s.partitions.get_mut("debug").unwrap().power_cap_w = Some(900.0);
    });
    for (id, node) in [(1, "n1"), (2, "n2")] {
        d.tcp_client().open_job(on(id, node, None)).unwrap();
    }
    site.lock()
        .unwrap()
        .partitions
        .get_mut("debug")
        .unwrap()
        .power_cap_w = Some(300.0);
    // SAFETY: kill(2) on this process; greenupd's SIGHUP handler is installed.
    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGHUP) }, 0);
    wait_for(|| {
        let st = d.tcp_client().status().unwrap();
        st.ledger
            .iter()
            .any(|l| l.scope == "debug" && l.cap_w == Some(Watts(300.0)))
    });
    // 300 W cap - 600 W held = -300 W.
    let dec = d
        .tcp_client()
        .open_job(on(3, "n3", Some("lammps")))
        .unwrap();
    assert_eq!(dec.verdict, Verdict::BudgetLimited, "{}", dec.reason);
    assert_eq!(dec.freq_for("n3"), Some(1.2));
    assert!(
        dec.reason.contains("no power budget is left (-300 W free)"),
        "{}",
        dec.reason
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
    assert_eq!(dec.power_cap_w, Some(Watts(400.0)));
    for i in 1..=4 {
        assert_eq!(dec.freq_for(&format!("n{i}")), Some(1.2), "node n{i}");
    }
    let st = d.tcp_client().status().unwrap();
    assert_eq!(st.ledger[0].jobs, 2);
    // A sum of watts: equal to the last bits only where it is added in the same order.
    let want = 9600.0 + dec.reserved_w.0;
    assert!(
        (st.ledger[0].reserved_w.0 - want).abs() <= 1e-9 * want,
        "{:?} against {want}",
        st.ledger[0].reserved_w
    );
}

#[test]
fn closing_a_job_returns_its_watts_to_the_next_decision() {
    let d = crowded(OverBudget::Refuse);
    assert!(
        d.tcp_client()
            .close_job(1, Some(greenup::record::JobEnd::Completed), None)
            .unwrap()
    );
    let st = d.tcp_client().status().unwrap();
    assert_eq!(
        (
            st.ledger[0].jobs,
            st.ledger[0].reserved_w,
            st.ledger[0].free_w
        ),
        (0, Watts(0.0), Some(Watts(10_000.0)))
    );
    let dec = d.tcp_client().open_job(lammps(3, 4)).unwrap();
    assert_eq!(dec.verdict, Verdict::Planned, "{}", dec.reason);
    assert_eq!(dec.power_cap_w, Some(Watts(10_000.0)));
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
    assert_eq!(
        (debug.reserved_w, debug.free_w),
        (Watts(600.0), Some(Watts(100.0)))
    );
    // One node at 1.2 GHz draws at least 125 W > 100 W.
    let dec = d.tcp_client().open_job(lammps(3, 1)).unwrap();
    assert_eq!(
        (dec.verdict, dec.refusal),
        (Verdict::Refused, Some(ErrorCode::OverBudget))
    );
}

/// Every node with two GPUs of 50 W static and 250 W dynamic: 600 W flat out.
fn with_gpus(s: &mut greenup::site::Site) {
    s.gpu_types.insert(
        "std".into(),
        greenup::site::GpuType {
            count: 2,
            clocks_mhz: None,
            clock_step_mhz: None,
            power_limit_w: None,
            dynamic_w: 250.0,
            static_w: 50.0,
            gamma: 3.0,
        },
    );
}

#[test]
fn a_planned_gpu_job_reserves_its_gpus_and_is_refused_where_only_its_cpus_fit() {
    // 10 kW: room for the plan. Its reservation holds the GPUs' 600 W on top of the CPUs,
    // which draw between 125 W (1.2 GHz) and 300 W (2.4 GHz) on one node.
    let d = start(1, |_, s, _| {
        s.power_cap_w = Some(10_000.0);
        s.daemon.over_budget = OverBudget::Refuse;
        with_gpus(s);
    });
    let dec = d.tcp_client().open_job(lammps(1, 1)).unwrap();
    assert_eq!(dec.verdict, Verdict::Planned, "{}", dec.reason);
    let plan = dec.plan.as_ref().unwrap();
    assert!(
        (600.0 + 125.0 - 1e-6..=600.0 + 300.0 + 1e-6).contains(&dec.reserved_w.0),
        "reserved {} W",
        dec.reserved_w.0
    );
    assert_eq!(dec.reserved_w, plan.predicted.avg_power_w);
    assert_eq!(plan.gpus.map(|g| g.planned_w.0), Some(600.0));
    // 700 W: the node's CPUs alone fit at any frequency up to 2.4 GHz, but not with
    // its GPUs (at least 725 W), so the job is refused rather than run over the cap.
    let d = start(1, |_, s, _| {
        s.power_cap_w = Some(700.0);
        s.daemon.over_budget = OverBudget::Refuse;
        with_gpus(s);
    });
    let dec = d.tcp_client().open_job(lammps(2, 1)).unwrap();
    assert_eq!(
        (dec.verdict, dec.refusal),
        (Verdict::Refused, Some(ErrorCode::OverBudget)),
        "{}",
        dec.reason
    );
}
