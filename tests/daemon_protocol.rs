//! greenupd against bad input, bad credentials, concurrency and users, with real
//! munged and a real SQLite store. Needs root (munged, useradd, runuser).

mod daemon_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use daemon_support::*;
use greenup_core::quantity::{Ghz, Joules, Seconds, Watts};
use greenup_proto::protocol::{
    ErrorCode, ListJobs, ListRecords, NodeOutcome, OpenJob, Reply, ReplyLine, Request,
    request_body, request_line,
};

fn code(r: &ReplyLine) -> ErrorCode {
    assert!(!r.ok, "expected an error reply, got {r:?}");
    r.error.as_ref().expect("error body").code
}

fn assert_still_serving(d: &Daemon) {
    let st = d.tcp_client().status().expect("daemon keeps serving");
    assert_eq!(st.protocol, 1);
}

/// A correctly credentialed line for `req`, made by `user`.
fn line_as(user: Option<&str>, req: &Request) -> Vec<u8> {
    let body = request_body(req).unwrap();
    let cred = cred_as(user, &body, None);
    request_line(&body, Some(&cred)).unwrap()
}

#[test]
fn malformed_unknown_and_unversioned_lines_get_clear_replies() {
    let d = start(4, |_, _, _| {});
    let mut c = d.tcp_client();
    let r = c.call_raw(b"{not json").unwrap();
    assert_eq!(code(&r), ErrorCode::BadJson);
    assert!(
        r.error
            .unwrap()
            .message
            .contains("not a JSON request object")
    );

    let r = c.call_raw(br#"{"v":2,"req":{"op":"status"}}"#).unwrap();
    assert_eq!(code(&r), ErrorCode::BadVersion);
    assert!(
        r.error
            .unwrap()
            .message
            .contains("version 2 is not supported")
    );

    let r = c.call_raw(br#"{"req":{"op":"status"}}"#).unwrap();
    assert_eq!(code(&r), ErrorCode::BadVersion);

    // A well-credentialed request whose op does not exist.
    let body = r#"{"op":"explode","job_id":1}"#;
    let cred = cred_as(None, body, None);
    let r = c
        .call_raw(&request_line(body, Some(&cred)).unwrap())
        .unwrap();
    assert_eq!(code(&r), ErrorCode::BadRequest);
    assert!(
        r.error
            .unwrap()
            .message
            .contains("unknown variant `explode`")
    );

    // The same connection is still usable.
    assert!(c.status().is_ok());
    assert_still_serving(&d);
}

#[test]
fn an_oversized_line_is_refused_and_others_are_served() {
    let d = start(4, |_, _, _| {});
    let mut s = TcpStream::connect(&d.tcp).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let big = vec![b'x'; (1 << 20) + 10];
    // The daemon may close before reading everything; a failed write is fine.
    let _ = s.write_all(&big);
    let mut reply = String::new();
    BufReader::new(&s).read_line(&mut reply).unwrap();
    let r: ReplyLine = serde_json::from_str(&reply).unwrap();
    assert_eq!(code(&r), ErrorCode::TooLong);
    assert_still_serving(&d);
}

#[test]
fn missing_expired_replayed_forged_and_moved_credentials_are_refused() {
    let d = start(4, |_, _, _| {});
    let mut c = d.tcp_client();
    let status = request_body(&Request::Status {}).unwrap();

    let r = c.call_raw(&request_line(&status, None).unwrap()).unwrap();
    assert_eq!(code(&r), ErrorCode::CredMissing);

    let expiring = cred_as(None, &status, Some(1));
    std::thread::sleep(Duration::from_millis(2500));
    let r = c
        .call_raw(&request_line(&status, Some(&expiring)).unwrap())
        .unwrap();
    assert_eq!(code(&r), ErrorCode::CredExpired);
    assert!(r.error.unwrap().message.contains("Expired"));

    let line = line_as(None, &Request::Status {});
    assert!(c.call_raw(&line).unwrap().ok);
    let r = c.call_raw(&line).unwrap();
    assert_eq!(code(&r), ErrorCode::CredReplayed);

    // Forged: a valid credential with its MAC-protected body altered.
    let good = cred_as(None, &status, None);
    let mut bytes = good.into_bytes();
    let mid = bytes.len() / 2;
    bytes[mid] = if bytes[mid] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(bytes).unwrap();
    let r = c
        .call_raw(&request_line(&status, Some(&forged)).unwrap())
        .unwrap();
    assert_eq!(code(&r), ErrorCode::CredInvalid);
    let r = c
        .call_raw(&request_line(&status, Some("MUNGE:not-a-credential:")).unwrap())
        .unwrap();
    assert_eq!(code(&r), ErrorCode::CredInvalid);

    // A credential made for one request cannot carry another.
    let other = request_body(&Request::GetJob { job_id: 5 }).unwrap();
    let cred = cred_as(None, &other, None);
    let r = c
        .call_raw(&request_line(&status, Some(&cred)).unwrap())
        .unwrap();
    assert_eq!(code(&r), ErrorCode::CredMismatch);

    assert_still_serving(&d);
}

#[test]
fn concurrent_opens_from_many_nodes_yield_one_decision() {
    let d = start(32, |_, _, _| {});
    let handles: Vec<_> = (0..32)
        .map(|_| {
            let tcp = d.tcp.clone();
            std::thread::spawn(move || {
                let mut c = greenup_proto::client::Client::connect(
                    &greenup_proto::client::Endpoint::Tcp(tcp),
                    Duration::from_secs(10),
                )
                .unwrap();
                c.open_job(open_req(4242, 1000, 32)).unwrap()
            })
        })
        .collect();
    let decisions: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(
        decisions.windows(2).all(|w| w[0] == w[1]),
        "every node gets the same decision"
    );
    assert_eq!(
        count(&d.store, "SELECT count(*) FROM jobs WHERE job_id = 4242"),
        1
    );
    assert_eq!(
        count(
            &d.store,
            "SELECT count(*) FROM decisions WHERE job_id = 4242"
        ),
        1
    );
    assert_eq!(count(&d.store, "SELECT count(*) FROM reservations"), 1);
    // Unchanged (no profile): the reservation is the nodes' power at fmax, 32 x (200 + 100) W.
    assert_eq!(decisions[0].reserved_w.0, 32.0 * 300.0);
    let st = d.tcp_client().status().unwrap();
    assert_eq!(st.ledger[0].reserved_w, Watts(9600.0));
    assert_eq!(st.open_jobs, 1);
}

#[test]
fn root_writes_an_ordinary_user_reads_only_their_own() {
    let uid = test_user_uid();
    let d = start(4, |_, _, _| {});
    let mut root = d.tcp_client();
    root.open_job(open_req(11, uid, 2)).unwrap();
    root.open_job(open_req(12, 0, 2)).unwrap();

    let as_user = |req: &Request| -> ReplyLine {
        let mut c = d.tcp_client();
        c.call_raw(&line_as(Some(TEST_USER), req)).unwrap()
    };
    let r = as_user(&Request::OpenJob(open_req(13, uid, 2)));
    assert_eq!(code(&r), ErrorCode::Forbidden);
    assert!(
        r.error
            .unwrap()
            .message
            .contains(&format!("uid {uid} may not open jobs"))
    );
    let r = as_user(&Request::CloseJob {
        job_id: 11,
        end: None,
        restart_count: None,
    });
    assert_eq!(code(&r), ErrorCode::Forbidden);
    let outcome = NodeOutcome {
        restart_count: None,
        comm: None,
        job_id: 11,
        node: "n1".into(),
        freq_ghz: None,
        energy_j: Some(Joules(1.0)),
        elapsed_s: None,
        source: None,
        restored: true,
        note: None,
        gpu: None,
        power: None,
    };
    assert_eq!(
        code(&as_user(&Request::RecordOutcome(outcome))),
        ErrorCode::Forbidden
    );

    assert!(
        as_user(&Request::GetJob { job_id: 11 }).ok,
        "the owner reads their job"
    );
    assert_eq!(
        code(&as_user(&Request::GetJob { job_id: 12 })),
        ErrorCode::Forbidden
    );
    let r = as_user(&Request::ListJobs(ListJobs::default()));
    let Some(greenup_proto::protocol::Reply::Jobs { jobs, .. }) = r.reply else {
        panic!("{r:?}")
    };
    assert_eq!(jobs.iter().map(|j| j.job_id).collect::<Vec<_>>(), vec![11]);
    let r = as_user(&Request::ListJobs(ListJobs {
        uid: Some(0),
        ..Default::default()
    }));
    assert_eq!(code(&r), ErrorCode::Forbidden);

    // Root sees both; nothing the user tried was stored.
    assert_eq!(root.list_jobs(ListJobs::default()).unwrap().len(), 2);
    assert_eq!(count(&d.store, "SELECT count(*) FROM jobs"), 2);
    assert_eq!(count(&d.store, "SELECT count(*) FROM outcomes"), 0);
}

/// The job ids in a list_records reply, and whether it says more match.
fn record_ids(r: ReplyLine) -> (Vec<u64>, bool) {
    match r.reply {
        Some(Reply::Records {
            jobs, truncated, ..
        }) => (jobs.iter().map(|j| j.job_id).collect(), truncated),
        _ => panic!("expected records, got {r:?}"),
    }
}

#[test]
fn list_records_returns_whole_jobs_and_only_the_callers_own() {
    let uid = test_user_uid();
    let d = start(4, |_, _, _| {});
    let mut root = d.tcp_client();
    let lammps = |id, owner| OpenJob {
        restart_count: None,
        profile: Some("lammps".into()),
        user: Some(if owner == 0 { "root" } else { TEST_USER }.into()),
        ..open_req(id, owner, 2)
    };
    root.open_job(lammps(31, uid)).unwrap();
    root.open_job(lammps(32, 0)).unwrap();
    root.open_job(open_req(33, uid, 2)).unwrap();
    root.open_job(lammps(34, uid)).unwrap();
    root.record_outcome(NodeOutcome {
        restart_count: None,
        comm: None,
        job_id: 31,
        node: "n1".into(),
        freq_ghz: Some(Ghz(2.0)),
        energy_j: Some(Joules(1234.5)),
        elapsed_s: Some(Seconds(10.0)),
        source: Some(greenup::record::Source::Rapl),
        restored: true,
        note: None,
        gpu: None,
        power: None,
    })
    .unwrap();
    root.close_job(31, Some(greenup::record::JobEnd::Completed), None)
        .unwrap();

    let as_user = |req: ListRecords| -> ReplyLine {
        d.tcp_client()
            .call_raw(&line_as(Some(TEST_USER), &Request::ListRecords(req)))
            .unwrap()
    };
    // Only the user's own jobs, newest first, each whole: decision and outcomes.
    let r = as_user(ListRecords::default());
    let Some(Reply::Records {
        jobs, truncated, ..
    }) = r.reply.clone()
    else {
        panic!("{r:?}")
    };
    assert_eq!(
        jobs.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        vec![34, 33, 31]
    );
    assert!(!truncated);
    let j31 = &jobs[2];
    assert_eq!(j31.decision.profile.as_deref(), Some("lammps"));
    assert_eq!(j31.outcomes.len(), 1);
    assert_eq!(j31.outcomes[0].energy_j, Some(Joules(1234.5)));
    assert_eq!(j31.end, Some(greenup::record::JobEnd::Completed));
    assert_eq!(j31.request.nodes, vec!["n1".to_string(), "n2".to_string()]);

    // Another uid is refused; another user's name or profile matches none of theirs.
    let r = as_user(ListRecords {
        uid: Some(0),
        ..Default::default()
    });
    assert_eq!(code(&r), ErrorCode::Forbidden);
    let other = as_user(ListRecords {
        user: Some("root".into()),
        ..Default::default()
    });
    assert_eq!(record_ids(other), (vec![], false));
    let mine = as_user(ListRecords {
        profile: Some("lammps".into()),
        ..Default::default()
    });
    assert_eq!(record_ids(mine), (vec![34, 31], false));
    // Closed jobs by end time: 31 is the only closed one.
    let closed = as_user(ListRecords {
        closed_since: Some(0),
        ..Default::default()
    });
    assert_eq!(record_ids(closed), (vec![31], false));

    // Bounded: a limit cuts the page and says more match; the next page goes on from there.
    let page = as_user(ListRecords {
        limit: Some(2),
        ..Default::default()
    });
    assert_eq!(record_ids(page), (vec![34, 33], true));
    let next = as_user(ListRecords {
        limit: Some(2),
        before_job_id: Some(33),
        ..Default::default()
    });
    assert_eq!(record_ids(next), (vec![31], false));

    // Root sees everyone's; the client pages through them (here one job a page).
    let all = root.records(ListRecords::default(), 10).unwrap();
    assert_eq!(
        all.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        vec![34, 33, 32, 31]
    );
    let paged = root
        .records(
            ListRecords {
                limit: Some(1),
                ..Default::default()
            },
            3,
        )
        .unwrap();
    assert_eq!(
        paged.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        vec![34, 33, 32]
    );
}

#[test]
fn admins_read_every_job() {
    let uid = test_user_uid();
    let d = start(4, |_, s, _| s.daemon.admins = vec![TEST_USER.into()]);
    d.tcp_client().open_job(open_req(21, 0, 2)).unwrap();
    let r = d
        .tcp_client()
        .call_raw(&line_as(Some(TEST_USER), &Request::GetJob { job_id: 21 }))
        .unwrap();
    assert!(r.ok, "{r:?}");
    // Admins read; they still may not write.
    let r = d
        .tcp_client()
        .call_raw(&line_as(
            Some(TEST_USER),
            &Request::CloseJob {
                job_id: 21,
                end: None,
                restart_count: None,
            },
        ))
        .unwrap();
    assert_eq!(code(&r), ErrorCode::Forbidden);
    let _ = uid;
}

#[test]
fn silent_and_slow_clients_time_out_and_cannot_hold_every_connection() {
    let d = start(4, |_, s, o| {
        o.idle_timeout = Duration::from_secs(3);
        o.max_connections = 3;
        s.daemon.limits.unauthenticated = 3;
    });
    // Two silent clients and one dribbling half a line hold every unauthenticated slot...
    let mut silent = Vec::new();
    for _ in 0..2 {
        silent.push(TcpStream::connect(&d.tcp).unwrap());
        // A moment apart, so they are held in this order.
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut slow = TcpStream::connect(&d.tcp).unwrap();
    slow.write_all(b"{\"v\":1,").unwrap();
    // Let the daemon accept them all (it has 3 s before it may drop them).
    std::thread::sleep(Duration::from_millis(500));
    // ...so a node's connection sheds the oldest idle one and is served, not told
    // the daemon is busy.
    let st = d.tcp_client().status().expect("served");
    assert_eq!(st.protocol, 1);
    // The oldest is closed at once (or at the idle timeout, were it not shed first).
    let mut first = silent.remove(0);
    first
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        first.read_to_end(&mut buf).unwrap(),
        0,
        "the oldest idle client is closed without a reply"
    );
    // The slow one gets a timeout reply and is disconnected; the silent ones are dropped.
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut text = String::new();
    slow.read_to_string(&mut text).unwrap();
    let r: ReplyLine = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(code(&r), ErrorCode::Timeout);
    for mut s in silent {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = Vec::new();
        assert_eq!(
            s.read_to_end(&mut buf).unwrap(),
            0,
            "silent client is closed without a reply"
        );
    }
    assert_still_serving(&d);
}

#[test]
fn unix_socket_knows_the_caller_without_a_credential() {
    let d = start(4, |_, _, _| {});
    let mut c = d.unix_client();
    let st = c.status().unwrap();
    assert_eq!(st.protocol, 1);
    // Root over the socket may write.
    c.open_job(open_req(31, 0, 1)).unwrap();
    assert!(
        c.close_job(31, Some(greenup::record::JobEnd::Completed), None)
            .unwrap()
    );
    assert!(
        !c.close_job(31, Some(greenup::record::JobEnd::Completed), None)
            .unwrap(),
        "a second close is harmless"
    );
}
