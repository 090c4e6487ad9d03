//! greenupd against hostile requests and callers: oversized and malformed requests,
//! a job larger than any reply, and floods of idle connections by an ordinary user on
//! both listeners. Real munged, real SQLite, loopback only; every flood is bounded.
//! Needs root (munged, useradd, and a child process that becomes the ordinary user).
#![cfg(feature = "daemon")]

mod daemon_support;

use daemon_support::*;
use greenup::daemon::client::ClientError;
use greenup::daemon::protocol::{ErrorCode, ListRecords, NodeOutcome, ReplyLine, request_line};

fn code(r: &ReplyLine) -> ErrorCode {
    assert!(!r.ok, "expected an error reply, got {r:?}");
    r.error.as_ref().expect("error body").code
}

fn refusal(r: Result<impl std::fmt::Debug, ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Server(e)) => (e.code, e.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_node_named_twice_is_refused_and_reserves_nothing() {
    let d = start(4, |_, s, _| s.power_cap_w = Some(2_000.0));
    let mut req = open_req(7, 0, 2);
    // n1 four times over: 4 x 300 W would be reserved against a 2 kW cap.
    req.nodes = vec!["n1".into(), "n2".into(), "n1".into(), "n1".into()];
    let (code, msg) = refusal(d.tcp_client().open_job(req));
    assert_eq!(code, ErrorCode::BadRequest, "{msg}");
    assert!(msg.contains("'n1'") && msg.contains("once"), "{msg}");
    let st = d.tcp_client().status().unwrap();
    assert_eq!((st.ledger[0].jobs, st.ledger[0].reserved_w), (0, 0.0));
    assert_eq!(count(&d.store, "SELECT count(*) FROM jobs"), 0);
}

#[test]
fn a_node_list_longer_than_the_site_allows_is_refused() {
    // The default daemon.max_job_nodes is 16,384; one more is refused by name.
    let d = start(4, |_, _, _| {});
    let mut req = open_req(8, 0, 1);
    req.nodes = (1..=16_385).map(|i| format!("x{i}")).collect();
    let (code, msg) = refusal(d.unix_client().open_job(req));
    assert_eq!(code, ErrorCode::BadRequest, "{msg}");
    assert!(
        msg.contains("16385 nodes") && msg.contains("daemon.max_job_nodes"),
        "{msg}"
    );
    assert_eq!(count(&d.store, "SELECT count(*) FROM jobs"), 0);
}

#[test]
fn a_job_id_the_store_cannot_hold_is_a_bad_request() {
    let d = start(2, |_, _, _| {});
    let mut c = d.unix_client();
    // 2^63 = 9223372036854775808 and 2^64 - 1, through every op that names a job.
    for id in ["9223372036854775808", "18446744073709551615"] {
        for req in [
            format!(r#"{{"op":"get_job","job_id":{id}}}"#),
            format!(r#"{{"op":"close_job","job_id":{id}}}"#),
            format!(r#"{{"op":"node_settings","job_id":{id},"node":"n1"}}"#),
            format!(r#"{{"op":"open_job","job_id":{id},"uid":0,"nodes":["n1"]}}"#),
            format!(r#"{{"op":"list_records","before_job_id":{id}}}"#),
        ] {
            let r = c.call_raw(&request_line(&req, None).unwrap()).unwrap();
            assert_eq!(code(&r), ErrorCode::BadRequest, "{req}: {r:?}");
            assert!(r.error.unwrap().message.contains("out of range"), "{req}");
        }
    }
    // The largest id the store holds, 2^63 - 1, is an ordinary unknown job.
    let r = c
        .call_raw(&request_line(r#"{"op":"get_job","job_id":9223372036854775807}"#, None).unwrap())
        .unwrap();
    assert_eq!(code(&r), ErrorCode::NotFound);
}

#[test]
fn every_request_refuses_fields_it_does_not_know() {
    let d = start(2, |_, _, _| {});
    let mut c = d.unix_client();
    for req in [
        r#"{"op":"status","x":1}"#,
        r#"{"op":"get_job","job_id":1,"x":1}"#,
        r#"{"op":"list_jobs","x":1}"#,
        r#"{"op":"list_records","x":1}"#,
    ] {
        let r = c.call_raw(&request_line(req, None).unwrap()).unwrap();
        assert_eq!(code(&r), ErrorCode::BadRequest, "{req}");
        assert!(r.error.unwrap().message.contains("unknown field"), "{req}");
    }
    // And so does the line around the request.
    let r = c
        .call_raw(br#"{"v":1,"req":{"op":"status"},"extra":true}"#)
        .unwrap();
    assert_eq!(code(&r), ErrorCode::BadJson);
}

/// A note of `len` bytes, as a node may send with its outcome.
fn note(node: usize, len: usize) -> String {
    let head = format!("node {node}: ");
    format!("{head}{}", "w".repeat(len - head.len()))
}

#[test]
fn a_five_thousand_node_job_never_breaks_listing_or_its_report() {
    const NODES: usize = 5_000;
    const NOTE: usize = 250;
    let d = start(NODES, |_, _, _| {});
    // A small job before and after the large one.
    d.unix_client().open_job(open_req(10, 0, 1)).unwrap();
    d.unix_client().open_job(open_req(11, 0, NODES)).unwrap();
    d.unix_client().open_job(open_req(12, 0, 2)).unwrap();
    // Every node of job 11 reports, with a note: 5,000 x more than 250 bytes is more
    // than the 1 MiB one reply line may hold.
    std::thread::scope(|s| {
        for t in 0..4 {
            let d = &d;
            s.spawn(move || {
                let mut c = d.unix_client();
                for i in (1..=NODES).filter(|i| i % 4 == t) {
                    c.record_outcome(NodeOutcome {
                        job_id: 11,
                        node: format!("n{i}"),
                        freq_ghz: Some(2.4),
                        energy_j: Some(1000.0),
                        elapsed_s: Some(10.0),
                        source: Some("rapl".into()),
                        restored: true,
                        note: Some(note(i, NOTE)),
                    })
                    .unwrap();
                }
            });
        }
    });
    const { assert!(NODES * NOTE > 1 << 20) };
    let mut c = d.unix_client();
    let jobs = c.records(ListRecords::default(), 100).unwrap();
    let ids: Vec<u64> = jobs.iter().map(|j| j.job_id).collect();
    assert_eq!(ids, vec![12, 11, 10]);
    let big = &jobs[1];
    assert_eq!(big.outcomes.len(), NODES);
    assert_eq!(big.request.nodes.len(), NODES);
    let energy: f64 = big.outcomes.iter().filter_map(|o| o.energy_j).sum();
    assert_eq!(energy, 5_000_000.0);
    assert!(
        big.outcomes
            .iter()
            .all(|o| o.note.as_ref().unwrap().len() == NOTE)
    );
    // The job's own record, as `greenup report` reads it.
    let one = c.get_job(11).unwrap();
    assert_eq!(&one, big);
    // Listings of summaries stay small whatever a job's size.
    let rows = c.list_jobs(Default::default()).unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[1].outcomes, NODES);
}
