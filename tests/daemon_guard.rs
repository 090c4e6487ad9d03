//! greenupd end to end: the in-job guard's terms. A job whose policy promises a
//! `max_slowdown` (edp: 10 %) is told there is no baseline until a monitor run of its
//! application (whose nodes are told to measure it) has left its synchronising calls;
//! then every node is told the baseline's rate, and the reason says which steps are
//! guarded. Real munged, real SQLite, a real
//! greenupd on loopback. Needs root.

mod daemon_support;

use daemon_support::*;
use greenup::comm::{GuardOff, NodeComm};
use greenup::policy::{RuntimeAsk, runtime_for_job};
use greenup::record::JobEnd;
use greenup_core::quantity::{Ghz, Joules, Seconds};
use greenup_proto::protocol::{NodeOutcome, OpenJob, Verdict};

fn req(id: u64, policy: &str) -> OpenJob {
    let mut r = open_req(id, 0, 2);
    r.profile = Some("wrong".into());
    r.policy = Some(policy.into());
    r
}

#[test]
fn a_promise_is_guarded_with_the_baselines_rate_once_one_was_measured() {
    let d = start(2, |dir, s, _| {
        s.profile_dir = wrong_profile_dir(dir);
    });
    let mut c = d.tcp_client();

    // No baseline yet: planned, the guard off, and the reason says so.
    let first = c.open_job(req(1, "edp")).unwrap();
    assert_eq!(first.verdict, Verdict::Planned, "{first:?}");
    let terms = first.guard.expect("edp promises a max_slowdown");
    assert_eq!(
        (terms.baseline_rate, terms.off),
        (None, Some(GuardOff::NoBaseline))
    );
    assert!((terms.max_slowdown - 0.10).abs() < 1e-12);
    assert!(
        first.reason.ends_with("no in-job guard: no baseline"),
        "{}",
        first.reason
    );
    // A policy without a promise has nothing to guard.
    let other = c.open_job(req(2, "min-energy")).unwrap();
    assert_eq!(other.guard, None, "{other:?}");

    // A monitor run that names a profile is its application's measured baseline: every
    // node is told so, and the node's rule runs its MPI steps' runtime measuring only.
    let base = c.open_job(req(3, "monitor")).unwrap();
    assert!(base.monitor && base.guard.is_none(), "{base:?}");
    let measure = site(d.dir.path(), 2).dvfs.measure_baselines;
    for n in ["n1", "n2"] {
        let told = c.node_settings(3, n).unwrap();
        assert!(told.baseline, "{told:?}");
        let rt = runtime_for_job(&RuntimeAsk::of(Some(&told), None, measure)).unwrap();
        assert!(!rt.comm.enabled && rt.guard.is_none(), "{rt:?}");
    }
    // Without a profile there is no application to measure for: left untouched.
    let mut unnamed = req(5, "monitor");
    unnamed.profile = None;
    assert!(c.open_job(unnamed).unwrap().monitor);
    let told = c.node_settings(5, "n1").unwrap();
    assert!(!told.baseline, "{told:?}");
    assert_eq!(
        runtime_for_job(&RuntimeAsk::of(Some(&told), None, measure)),
        None
    );
    // What the measuring runtime leaves: each node's ranks made 8,000 synchronising calls
    // over 4 ranks of 20 s.
    for n in ["n1", "n2"] {
        c.record_outcome(NodeOutcome {
            restart_count: None,
            job_id: 3,
            node: n.into(),
            freq_ghz: Some(Ghz(2.4)),
            energy_j: Some(Joules(500.0)),
            elapsed_s: Some(Seconds(20.0)),
            source: Some(greenup::record::Source::Rapl),
            restored: true,
            note: None,
            comm: Some(NodeComm {
                ranks: 4,
                compute_s: Seconds(15.0),
                comm_s: Seconds(5.0),
                calls: 9000,
                sync_calls: 8000,
                ..NodeComm::default()
            }),
            gpu: None,
            power: None,
        })
        .unwrap();
    }
    c.close_job(3, Some(JobEnd::Completed), None).unwrap();

    // Now: 8000 / 4 ranks / 20 s = 100 calls per rank-second, told to every node.
    let guarded = c.open_job(req(4, "edp")).unwrap();
    assert_eq!(guarded.verdict, Verdict::Planned, "{guarded:?}");
    let terms = guarded.guard.unwrap();
    assert_eq!(terms.off, None);
    assert!(
        (terms.baseline_rate.unwrap() - 100.0).abs() < 1e-9,
        "{terms:?}"
    );
    assert!(
        guarded
            .reason
            .ends_with("in-job guard for MPI steps; other steps have no in-job guard and rely on the decision alone"),
        "{}",
        guarded.reason
    );
    let node = c.node_settings(4, "n2").unwrap();
    assert_eq!(node.guard, Some(terms));
}
