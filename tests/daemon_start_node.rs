//! A job's nodes start through `start_node`: the job's nodes as a compressed hostlist,
//! one decision per job however many nodes ask at once, and each node told only its
//! own settings. Real munged, real SQLite, greenupd on loopback.

mod daemon_support;

use std::collections::HashMap;
use std::sync::{Arc, Barrier};

use daemon_support::{count, open_req, start};
use greenup::site::NodeType;
use greenup_core::quantity::{Joules, Seconds};
use greenup_proto::client::{Client, ClientError};
use greenup_proto::protocol::{
    ErrorCode, NodeOutcome, OpenJob, Reply, Request, request_body, request_line,
};

/// The job as a node's prolog describes it: its nodes as the hostlist `nodelist`, in
/// its first run (without the restart count, other nodes would be a requeued run).
fn job(job_id: u64, nodelist: &str) -> OpenJob {
    OpenJob {
        restart_count: Some(0),
        nodes: Vec::new(),
        nodelist: Some(nodelist.into()),
        profile: Some("lammps".into()),
        policy: Some("min-energy".into()),
        ..open_req(job_id, 0, 1)
    }
}

fn refusal<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Server(e)) => (e.code, e.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Each planned node's frequency as the store holds the decision, read with SQLite and
/// serde_json's untyped values: a reader apart from the server's own lookups.
fn stored_plan(store: &std::path::Path, job_id: u64) -> HashMap<String, f64> {
    let c =
        rusqlite::Connection::open_with_flags(store, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let text: String = c
        .query_row(
            "SELECT decision FROM decisions WHERE job_id = ?1",
            [job_id as i64],
            |r| r.get(0),
        )
        .unwrap();
    let d: serde_json::Value = serde_json::from_str(&text).unwrap();
    d["plan"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                n["freq_ghz"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// 2,000 nodes, half of a slower type (so a node handed another's settings is seen).
const NODES: usize = 2_000;

fn two_types() -> daemon_support::Daemon {
    start(NODES, |_, site, _| {
        site.node_types.insert(
            "eco".into(),
            NodeType {
                name: "eco".into(),
                freqs_ghz: vec![1.0, 1.4, 1.8],
                power: greenup::site::PowerModel::AtMax {
                    dynamic_w: 120.0,
                    static_w: 80.0,
                    gamma: 3.0,
                },
            },
        );
        for i in (2..=NODES).step_by(2) {
            site.nodes.insert(format!("n{i}"), "eco".into());
        }
    })
}

#[test]
fn two_thousand_nodes_asking_at_once_get_their_own_settings_from_one_decision() {
    let d = two_types();
    let list = format!("n[1-{NODES}]");
    let threads = 50;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (tcp, list, barrier) = (d.tcp.clone(), list.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mine: Vec<usize> = (1..=NODES).filter(|i| i % threads == t).collect();
                // Each node on its own connection with its own credential, as prologs are.
                let mut clients: Vec<Client> = mine
                    .iter()
                    .map(|_| {
                        Client::connect(
                            &greenup_proto::client::Endpoint::Tcp(tcp.clone()),
                            std::time::Duration::from_secs(60),
                        )
                        .unwrap()
                    })
                    .collect();
                barrier.wait();
                mine.iter()
                    .zip(clients.iter_mut())
                    .map(|(i, c)| {
                        let name = format!("n{i}");
                        (name.clone(), c.start_node(&name, job(77, &list)).unwrap())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert_eq!(handles.len(), NODES);

    let plan = stored_plan(&d.store, 77);
    assert!(!plan.is_empty());
    let freqs: std::collections::BTreeSet<String> =
        plan.values().map(|f| format!("{f:.1}")).collect();
    assert!(
        freqs.len() > 1,
        "the two node types run at one frequency: {freqs:?}"
    );
    for (name, s) in &handles {
        assert_eq!(&s.node, name);
        assert_eq!(s.job_id, 77);
        assert_eq!(s.used, plan.contains_key(name), "{name}");
        assert_eq!(s.freq_ghz.map(|f| f.0), plan.get(name).copied(), "{name}");
        assert_eq!(s.node_count, plan.len());
        // Only the job's first node is handed the used nodes (when the job shrinks).
        if name != "n1" {
            assert_eq!(s.used_nodes, None, "{name}");
        }
    }
    // One decision for the job, whoever asked first.
    let status = d.unix_client().status().unwrap();
    assert_eq!(status.decisions, 1);
    assert_eq!(count(&d.store, "SELECT count(*) FROM jobs"), 1);
    let nodes: String = rusqlite::Connection::open(&d.store)
        .unwrap()
        .query_row("SELECT request FROM jobs WHERE job_id = 77", [], |r| {
            r.get(0)
        })
        .unwrap();
    let req: serde_json::Value = serde_json::from_str(&nodes).unwrap();
    assert_eq!(req["nodes"].as_array().unwrap().len(), NODES);
    assert_eq!(req["nodes"][NODES - 1], format!("n{NODES}"));

    // The closing node counts outcomes instead of reading the job.
    let mut c = d.tcp_client();
    assert_eq!(c.count_outcomes(77).unwrap(), 0);
    for i in [1, 2, 3] {
        c.record_outcome(NodeOutcome {
            restart_count: None,
            comm: None,
            job_id: 77,
            node: format!("n{i}"),
            freq_ghz: None,
            energy_j: Some(Joules(10.0)),
            elapsed_s: Some(Seconds(1.0)),
            source: None,
            restored: true,
            note: None,
            gpu: None,
            power: None,
        })
        .unwrap();
    }
    assert_eq!(c.count_outcomes(77).unwrap(), 3);
    // With the nodes the job was opened with: the closing node's proof that all reported.
    assert_eq!(c.outcomes_of(77).unwrap(), (3, Some(NODES as u64)));
    assert_eq!(refusal(c.count_outcomes(78)).0, ErrorCode::NotFound);
}

#[test]
fn a_node_with_another_list_or_not_in_the_list_gets_a_conflict() {
    let d = start(8, |_, _, _| {});
    let mut c = d.tcp_client();
    let s = c.start_node("n2", job(5, "n[1-4]")).unwrap();
    assert_eq!((s.node.as_str(), s.node_count), ("n2", 4));
    // The same nodes spelled otherwise are the same job.
    assert_eq!(
        c.start_node("n3", job(5, "n1,n2,n[3-4]")).unwrap().node,
        "n3"
    );
    let (code, msg) = refusal(c.start_node("n2", job(5, "n[1-5]")));
    assert_eq!(code, ErrorCode::Conflict, "{msg}");
    assert!(msg.contains("n[1-4]") && msg.contains("n[1-5]"), "{msg}");
    // The same names in another order are another allocation.
    let (code, _) = refusal(c.start_node("n2", job(5, "n[2-4],n1")));
    assert_eq!(code, ErrorCode::Conflict);
    let (code, msg) = refusal(c.start_node("n7", job(5, "n[1-4]")));
    assert_eq!(code, ErrorCode::Conflict, "{msg}");
    assert!(msg.contains("'n7' is not one of job 5's nodes"), "{msg}");
    assert_eq!(d.unix_client().status().unwrap().decisions, 1);
}

#[test]
fn a_hostile_hostlist_is_refused_before_it_is_expanded_and_decides_nothing() {
    let d = start(100, |_, site, _| site.daemon.limits.max_job_nodes = 100);
    let mut c = d.tcp_client();
    for (list, says) in [
        // Far more names than the site's limit: refused by the count, never built.
        ("n[1-999999999]", "more than 100 hosts"),
        ("n[1-60],m[1-41]", "more than 100 hosts"),
        ("r[1-20]n[1-6]", "more than 100 hosts"),
        // A name twice.
        ("n[1-3],n2", "named twice"),
        ("n[1-4", "'[' without ']'"),
    ] {
        let (code, msg) = refusal(c.start_node("n1", job(9, list)));
        assert_eq!(code, ErrorCode::BadRequest, "{list}: {msg}");
        assert!(msg.contains(says), "{list}: {msg}");
    }
    // Exactly the limit is a job.
    c.start_node("n1", job(9, "n[1-100]")).unwrap();
    // A request naming its nodes both ways, or without a hostlist, is refused.
    let mut both = job(10, "n[1-2]");
    both.nodes = vec!["n1".into(), "n2".into()];
    let (code, msg) = refusal(c.start_node("n1", both));
    assert_eq!(code, ErrorCode::BadRequest, "{msg}");
    let (code, msg) = refusal(c.start_node("n1", open_req(11, 0, 2)));
    assert_eq!(code, ErrorCode::BadRequest, "{msg}");
    assert!(msg.contains("job.nodelist"), "{msg}");
    assert_eq!(d.unix_client().status().unwrap().decisions, 1);
    assert_eq!(count(&d.store, "SELECT count(*) FROM jobs"), 1);
}

#[test]
fn only_root_and_the_slurm_user_start_nodes() {
    let d = start(4, |_, _, _| {});
    let body = request_body(&Request::StartNode {
        node: "n1".into(),
        job: job(12, "n[1-4]"),
    })
    .unwrap();
    let cred = daemon_support::cred_as(Some(daemon_support::TEST_USER), &body, None);
    daemon_support::test_user_uid();
    let line = request_line(&body, Some(&cred)).unwrap();
    let reply = d.tcp_client().call_raw(&line).unwrap();
    assert_eq!(reply.error.map(|e| e.code), Some(ErrorCode::Forbidden));
    assert_eq!(count(&d.store, "SELECT count(*) FROM jobs"), 0);
    // The owner may read its own node's settings once the job is open.
    let s = d.tcp_client().start_node("n1", job(12, "n[1-4]")).unwrap();
    match d.unix_client().call(&Request::NodeSettings {
        job_id: 12,
        node: "n1".into(),
    }) {
        Ok(Reply::NodeSettings(again)) => assert_eq!(again.freq_ghz, s.freq_ghz),
        other => panic!("{other:?}"),
    }
}

#[test]
fn nodes_are_told_whether_greenupd_settles_how_the_job_ended() {
    // Without Slurm to ask (the test daemon's default), the first node must ask itself.
    let quiet = start(2, |_, _, _| {});
    let mut c = quiet.tcp_client();
    assert!(!c.start_node("n1", job(5, "n[1-2]")).unwrap().asks_slurm_end);
    assert!(!c.node_settings(5, "n2").unwrap().asks_slurm_end);
    // greenupd that asks Slurm says so on every path a node gets its settings by.
    let asking = start(2, |_, _, o| o.slurm_check = true);
    let mut c = asking.tcp_client();
    assert!(c.start_node("n1", job(6, "n[1-2]")).unwrap().asks_slurm_end);
    assert!(c.start_node("n2", job(6, "n[1-2]")).unwrap().asks_slurm_end);
    assert!(c.node_settings(6, "n2").unwrap().asks_slurm_end);
}

#[test]
fn a_nodes_end_is_one_request_and_its_close_waits_for_every_node() {
    use daemon_support::computing_outcome as outcome;
    use greenup_proto::protocol::{JobEnd, JobState};
    let d = start(4, |_, _, _| {});
    let mut c = d.tcp_client();
    assert!(c.start_node("n1", job(20, "n[1-2]")).unwrap().ends_in_one);
    assert!(c.node_settings(20, "n2").unwrap().ends_in_one);
    let state = |c: &mut Client, id| c.get_job(id).unwrap().state;
    // `node`'s end of job `id` in its first run, with or without the close.
    let end = |c: &mut Client, id, node, close| {
        let r = c
            .end_node(id, vec![outcome(id, node, 2.0, 150.0)], close, Some(0))
            .unwrap();
        (r.outcomes, r.nodes, r.closed)
    };

    // The first node ends before the second: its close is not taken.
    assert_eq!(
        end(&mut c, 20, "n1", Some(JobEnd::Completed)),
        (1, 2, false)
    );
    assert_eq!(state(&mut c, 20), JobState::Open);
    // Without a close nothing is counted (a count per node made large jobs' ends
    // quadratic), and the outcome is stored all the same.
    assert_eq!(end(&mut c, 20, "n2", None), (0, 0, false));
    assert_eq!(c.outcomes_of(20).unwrap(), (2, Some(2)));
    assert_eq!(state(&mut c, 20), JobState::Open, "only a close closes");
    // Sent again, the same outcome is harmless, and now every node has reported.
    assert_eq!(end(&mut c, 20, "n1", Some(JobEnd::Completed)), (2, 2, true));
    assert_eq!(state(&mut c, 20), JobState::Closed);
    assert_eq!(
        count(&d.store, "SELECT count(*) FROM outcomes WHERE job_id = 20"),
        2
    );

    // A one-node job ends in one round trip; a failed claim is stored as it was sent.
    c.start_node("n3", job(21, "n3")).unwrap();
    assert_eq!(end(&mut c, 21, "n3", Some(JobEnd::Failed)), (1, 1, true));
    let rec = c.get_job(21).unwrap();
    assert_eq!(
        (rec.state, rec.end),
        (JobState::Closed, Some(JobEnd::Failed))
    );
}

#[test]
fn a_hostile_end_node_stores_nothing() {
    use daemon_support::computing_outcome as outcome;
    use greenup_proto::protocol::{JobEnd, MAX_END_OUTCOMES};
    let d = start(2, |_, _, _| {});
    let mut c = d.tcp_client();
    c.start_node("n1", job(30, "n[1-2]")).unwrap();
    let outcomes_of_30 = || count(&d.store, "SELECT count(*) FROM outcomes WHERE job_id = 30");
    // One outcome of another job among good ones: nothing of the request is stored.
    let (code, msg) = refusal(c.end_node(
        30,
        vec![outcome(30, "n1", 2.0, 150.0), outcome(31, "n2", 2.0, 150.0)],
        Some(JobEnd::Completed),
        None,
    ));
    assert_eq!(code, ErrorCode::BadRequest, "{msg}");
    assert!(
        msg.contains("outcomes[].job_id") && msg.contains("31"),
        "{msg}"
    );
    assert_eq!(outcomes_of_30(), 0);
    // More outcomes than a node has records.
    let many = vec![outcome(30, "n1", 2.0, 150.0); MAX_END_OUTCOMES + 1];
    let (code, msg) = refusal(c.end_node(30, many, None, None));
    assert_eq!(code, ErrorCode::BadRequest, "{msg}");
    assert!(msg.contains(&MAX_END_OUTCOMES.to_string()), "{msg}");
    assert_eq!(outcomes_of_30(), 0);
    // A user, even the job's owner, may not end a node or close its job.
    let body = request_body(&Request::EndNode {
        job_id: 30,
        outcomes: vec![outcome(30, "n1", 2.0, 150.0)],
        close: Some(JobEnd::Completed),
        restart_count: None,
    })
    .unwrap();
    let cred = daemon_support::cred_as(Some(daemon_support::TEST_USER), &body, None);
    let line = request_line(&body, Some(&cred)).unwrap();
    let reply = d.tcp_client().call_raw(&line).unwrap();
    assert_eq!(reply.error.map(|e| e.code), Some(ErrorCode::Forbidden));
    assert_eq!(outcomes_of_30(), 0);
    assert_eq!(
        c.get_job(30).unwrap().state,
        greenup_proto::protocol::JobState::Open
    );
}
