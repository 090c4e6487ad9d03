//! A job Slurm requeues keeps its id and runs again, usually on other nodes: the run
//! after the requeue is decided anew for its own nodes, the run before it is kept as an
//! earlier run of the job, and that run's nodes reporting late never touch the new one.
//! Real munged, real SQLite, greenupd on loopback.

mod daemon_support;

use daemon_support::{TEST_USER, cli, cli_site, count, open_req, start};
use greenup_core::quantity::{Joules, Seconds, Watts};
use greenup_daemon::store::{SqliteStore, Store};
use greenup_proto::client::ClientError;
use greenup_proto::live_power::{PowerReport, PowerSample};
use greenup_proto::protocol::{ErrorCode, JobEnd, JobState, NodeOutcome, OpenJob};

/// Run `restart_count` of job `job_id` as a node's prolog describes it, on `nodelist`.
fn run(job_id: u64, nodelist: &str, restart_count: Option<u32>) -> OpenJob {
    OpenJob {
        restart_count,
        nodes: Vec::new(),
        nodelist: Some(nodelist.into()),
        profile: Some("lammps".into()),
        policy: Some("min-energy".into()),
        ..open_req(job_id, 0, 1)
    }
}

/// `node`'s measured outcome for run `restart_count` of job `job_id`.
fn outcome(job_id: u64, node: &str, energy_j: f64, restart_count: Option<u32>) -> NodeOutcome {
    NodeOutcome {
        restart_count,
        comm: None,
        job_id,
        node: node.into(),
        freq_ghz: None,
        energy_j: Some(Joules(energy_j)),
        elapsed_s: Some(Seconds(60.0)),
        source: None,
        restored: true,
        note: None,
        gpu: None,
        power: None,
    }
}

fn refusal<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Server(e)) => (e.code, e.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn earlier_runs(d: &daemon_support::Daemon, job_id: u64) -> Vec<greenup::record::JobRecord> {
    SqliteStore::open_reader(&d.store)
        .unwrap()
        .earlier_runs(job_id)
        .unwrap()
}

#[test]
fn a_job_requeued_onto_other_nodes_is_decided_again_for_them() {
    let d = start(4, |_, _, _| {});
    let mut c = d.tcp_client();
    // An older plugin sends no restart count: the nodes tell the runs apart.
    for n in ["n1", "n2"] {
        let s = c.start_node(n, run(7, "n[1-2]", None)).unwrap();
        assert!(s.used && s.freq_ghz.is_some(), "{s:?}");
    }
    c.record_outcome(outcome(7, "n1", 1000.0, None)).unwrap();
    // n2 failed: Slurm requeues the job, n1's epilog closes the first run.
    c.close_job(7, Some(JobEnd::Failed), None).unwrap();

    for n in ["n3", "n4"] {
        let s = c.start_node(n, run(7, "n[3-4]", None)).unwrap();
        assert_eq!((s.node.as_str(), s.node_count), (n, 2));
        assert!(
            s.used && s.freq_ghz.is_some(),
            "{n} runs under a decision made for n[1-2]: {s:?}"
        );
    }
    assert_eq!(d.unix_client().status().unwrap().decisions, 2);
    let job = c.get_job(7).unwrap();
    assert_eq!(job.state, JobState::Open);
    assert_eq!(job.request.nodes, ["n3", "n4"]);
    let plan: Vec<&str> = job
        .decision
        .plan
        .as_ref()
        .unwrap()
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(plan, ["n3", "n4"]);

    // The first run is kept with what it measured.
    let earlier = earlier_runs(&d, 7);
    assert_eq!(earlier.len(), 1);
    assert_eq!(earlier[0].request.nodes, ["n1", "n2"]);
    assert_eq!(earlier[0].end, Some(JobEnd::Failed));
    assert_eq!(earlier[0].outcomes.len(), 1);
}

#[test]
fn the_late_epilog_of_a_node_of_the_run_before_a_requeue_stays_with_that_run() {
    let d = start(4, |_, _, _| {});
    let mut c = d.tcp_client();
    for n in ["n1", "n2"] {
        c.start_node(n, run(7, "n[1-2]", None)).unwrap();
    }
    c.record_outcome(outcome(7, "n1", 1000.0, None)).unwrap();
    c.close_job(7, Some(JobEnd::Failed), None).unwrap();
    c.start_node("n3", run(7, "n[3-4]", None)).unwrap();

    // n2's epilog, late (from its spool once it is back): the first run's, not the second's.
    assert!(c.record_outcome(outcome(7, "n2", 900.0, None)).unwrap());
    assert_eq!(
        c.count_outcomes(7).unwrap(),
        0,
        "the late outcome landed on the second run"
    );
    let earlier = earlier_runs(&d, 7);
    let nodes: Vec<&str> = earlier[0]
        .outcomes
        .iter()
        .map(|o| o.node.as_str())
        .collect();
    assert_eq!(nodes, ["n1", "n2"]);
    // Sent twice, it is stored once.
    assert!(!c.record_outcome(outcome(7, "n2", 900.0, None)).unwrap());
    // The second run's own nodes land on it.
    assert!(c.record_outcome(outcome(7, "n3", 800.0, None)).unwrap());
    assert_eq!(c.count_outcomes(7).unwrap(), 1);

    // n2's meter, still sampling the job it ran: its watts are not the second run's.
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let meter = |node: &str| PowerReport {
        limit_w: None,
        node: node.into(),
        samples: vec![PowerSample {
            jobs: vec![7],
            at,
            watts: Watts(300.0),
            interval_s: Seconds(5.0),
            gpu_watts: None,
        }],
    };
    let (code, msg) = refusal(c.power_report(meter("n2")));
    assert_eq!(code, ErrorCode::Forbidden, "{msg}");
    assert_eq!(c.power_report(meter("n3")).unwrap().0, 1);
}

#[test]
fn a_run_whose_close_never_came_is_reclaimed_when_slurm_restarts_the_job() {
    let d = start(4, |_, _, _| {});
    let mut c = d.tcp_client();
    for n in ["n1", "n2"] {
        c.start_node(n, run(8, "n[1-2]", Some(0))).unwrap();
    }
    c.record_outcome(outcome(8, "n2", 500.0, Some(0))).unwrap();
    assert_eq!(count(&d.store, "SELECT count(*) FROM reservations"), 1);
    // n1 died with the job's batch script: no close. Slurm requeues the job onto the
    // same nodes; only the restart count tells the runs apart.
    let s = c.start_node("n1", run(8, "n[1-2]", Some(1))).unwrap();
    assert!(s.used);
    assert_eq!(d.unix_client().status().unwrap().decisions, 2);
    // The second node of the second run gets its decision, not a third.
    c.start_node("n2", run(8, "n[1-2]", Some(1))).unwrap();
    assert_eq!(d.unix_client().status().unwrap().decisions, 2);
    // One reservation: the first run's was released.
    assert_eq!(count(&d.store, "SELECT count(*) FROM reservations"), 1);
    assert_eq!(
        count(&d.store, "SELECT restart_count FROM jobs WHERE job_id = 8"),
        1
    );
    let earlier = earlier_runs(&d, 8);
    assert_eq!(earlier.len(), 1);
    assert_eq!(earlier[0].state, JobState::Reclaimed);
    assert_eq!(earlier[0].outcomes.len(), 1);
    assert_eq!(c.count_outcomes(8).unwrap(), 0);

    // The first run's n1, back, reports late on the same node name as the second run.
    assert!(c.record_outcome(outcome(8, "n1", 700.0, Some(0))).unwrap());
    assert_eq!(c.count_outcomes(8).unwrap(), 0);
    assert_eq!(earlier_runs(&d, 8)[0].outcomes.len(), 2);
    // Its close is refused, and the second run stays open.
    let (code, msg) = refusal(c.close_job(8, Some(JobEnd::Failed), Some(0)));
    assert_eq!(code, ErrorCode::Conflict, "{msg}");
    assert_eq!(c.get_job(8).unwrap().state, JobState::Open);
    // So is a start of the first run.
    let (code, msg) = refusal(c.start_node("n2", run(8, "n[1-2]", Some(0))));
    assert_eq!(code, ErrorCode::Conflict, "{msg}");
    // The second run closes as usual.
    assert!(c.close_job(8, Some(JobEnd::Completed), Some(1)).unwrap());
    assert_eq!(count(&d.store, "SELECT count(*) FROM reservations"), 0);
}

#[test]
fn a_requeued_job_is_decided_again_after_greenupd_restarts() {
    let d = start(4, |_, _, _| {});
    let mut c = d.tcp_client();
    c.start_node("n1", run(9, "n[1-2]", Some(0))).unwrap();
    drop(c);
    let dir = d.dir;
    // greenupd restarts: the first run is no longer in memory, only in the store (the
    // first greenupd, idle, is left on its own socket).
    let d = daemon_support::start_in(dir, 4, |d, s, _| {
        s.daemon.socket = d.join("restarted.sock");
    });
    let mut c = d.tcp_client();
    let s = c.start_node("n3", run(9, "n[3-4]", Some(1))).unwrap();
    assert!(s.used && s.freq_ghz.is_some(), "{s:?}");
    assert_eq!(count(&d.store, "SELECT count(*) FROM reservations"), 1);
    assert_eq!(earlier_runs(&d, 9)[0].state, JobState::Reclaimed);
}

#[test]
fn the_report_of_a_requeued_job_shows_its_earlier_run_and_what_both_runs_used() {
    let d = start(4, |_, _, _| {});
    let mut c = d.tcp_client();
    let metered = |node: &str, restart_count| NodeOutcome {
        source: Some(greenup::record::Source::parse("rapl")),
        ..outcome(7, node, 1000.0, restart_count)
    };
    for n in ["n1", "n2"] {
        c.start_node(n, run(7, "n[1-2]", Some(0))).unwrap();
        c.record_outcome(metered(n, Some(0))).unwrap();
    }
    c.close_job(7, Some(JobEnd::Failed), Some(0)).unwrap();
    for n in ["n3", "n4"] {
        c.start_node(n, run(7, "n[3-4]", Some(1))).unwrap();
    }

    // get_job hands the reader the run before the requeue with the current one.
    let job = c.get_job(7).unwrap();
    assert_eq!(job.request.nodes, ["n3", "n4"]);
    assert_eq!(job.earlier_runs.len(), 1);
    let first = &job.earlier_runs[0];
    assert_eq!(first.request.nodes, ["n1", "n2"]);
    assert_eq!(first.request.restart_count, Some(0));
    assert_eq!(first.end, Some(JobEnd::Failed));
    assert_eq!(first.outcomes.len(), 2);
    // A record read in parts (a job of thousands of nodes) carries them too.
    assert_eq!(c.job_in_parts(7).unwrap(), job);
    // A job run once has none, and its record on the wire says nothing of runs.
    c.start_node("n1", run(8, "n1", Some(0))).unwrap();
    assert!(c.get_job(8).unwrap().earlier_runs.is_empty());

    let site = cli_site(&d);
    let site = site.to_str().unwrap();
    let (rc, out, err) = cli(None, &["report", "7", "--site", site]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        out.lines().next().unwrap().ends_with("run 2 (requeued)"),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("  run 1 (restart 0)  n[1-2]  min-energy"))
        .unwrap_or_else(|| panic!("no line of the first run in:\n{out}"));
    let energy = greenup::report::text::fmt_energy(2000.0);
    assert!(line.contains("FAILED") && line.contains(&energy), "{line}");
    // The second run is still running: nothing of it is measured, so neither is the job.
    assert!(
        out.contains("All runs    2 runs: energy unmeasured"),
        "{out}"
    );
    let (rc, out, err) = cli(None, &["report", "8", "--site", site]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        !out.contains("requeued") && !out.contains("All runs"),
        "{out}"
    );

    // The listing has one row per job, its last run, and says which run that is.
    assert_eq!(c.get_job(7).unwrap().earlier_run_count, 1);
    let (rc, out, err) = cli(None, &["jobs", "--site", site, "--json"]);
    assert_eq!(rc, 0, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let run_of = |id: u64| {
        let row = rows.iter().find(|r| r["job_id"] == id).unwrap();
        row.get("run").cloned()
    };
    assert_eq!(rows.len(), 2, "{out}");
    assert_eq!(run_of(7), Some(serde_json::json!(2)));
    assert_eq!(run_of(8), None, "a job run once lists as before");
    let (rc, out, err) = cli(None, &["jobs", "--site", site]);
    assert_eq!(rc, 0, "{err}");
    let row = |id: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(id))
            .unwrap()
    };
    assert!(row("7 ").contains("RUNNING (run 2)"), "{out}");
    assert!(!row("8 ").contains("(run"), "{out}");

    // Another user reads neither run of root's job.
    let (rc, out, err) = cli(Some(TEST_USER), &["report", "7", "--site", site]);
    assert_ne!(rc, 0, "{out}");
    assert!(!out.contains("n[1-2]"), "{out}");
    assert!(err.contains("7"), "{err}");
}
