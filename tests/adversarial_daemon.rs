//! greenupd against hostile requests and callers: oversized and malformed requests,
//! a job larger than any reply, and floods of idle connections by an ordinary user on
//! both listeners. Real munged, real SQLite, loopback only; every flood is bounded.
//! Needs root (munged, useradd, and a child process that becomes the ordinary user).

mod daemon_support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use daemon_support::*;
use greenup_core::quantity::{Ghz, Joules, Seconds, Watts};
use greenup_proto::client::ClientError;
use greenup_proto::protocol::{ErrorCode, ListRecords, NodeOutcome, ReplyLine, request_line};

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
    assert_eq!(
        (st.ledger[0].jobs, st.ledger[0].reserved_w),
        (0, Watts(0.0))
    );
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
                        restart_count: None,
                        comm: None,
                        job_id: 11,
                        node: format!("n{i}"),
                        freq_ghz: Some(Ghz(2.4)),
                        energy_j: Some(Joules(1000.0)),
                        elapsed_s: Some(Seconds(10.0)),
                        source: Some("rapl".into()),
                        restored: true,
                        note: Some(note(i, NOTE)),
                        gpu: None,
                        power: None,
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
    let energy: f64 = big
        .outcomes
        .iter()
        .filter_map(|o| o.energy_j)
        .map(|e| e.0)
        .sum();
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

/// Connections of each kind an ordinary user opens: more than every default limit on
/// users (16 per uid and 128 for all users on each listener, 128 unauthenticated) and
/// more than the 64 the test gives root and SlurmUser.
const FLOOD: usize = 150;

/// A process running as `uid` that opens `n` connections to the Unix socket `path`
/// and holds them, idle, until it is killed. The connections are made after the
/// process became `uid`, so greenupd's SO_PEERCRED sees the ordinary user.
fn hold_unix_as(uid: u32, gid: u32, path: &Path, n: usize) -> std::process::Child {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: an all-zero sockaddr_un is valid; the path is copied in below.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    assert!(bytes.len() < addr.sun_path.len(), "socket path too long");
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    let mut cmd = Command::new("sleep");
    cmd.arg("300").uid(uid).gid(gid);
    // SAFETY: only socket(2) and connect(2), which are async-signal-safe, run between
    // fork and exec; the descriptors stay open across exec on purpose.
    unsafe {
        cmd.pre_exec(move || {
            for _ in 0..n {
                let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let a = &addr as *const libc::sockaddr_un as *const libc::sockaddr;
                if libc::connect(fd, a, len) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    cmd.spawn().expect("start the flooding process")
}

/// Kills the flooding process however the test ends.
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_ordinary_user_flooding_both_listeners_never_keeps_a_node_from_opening_a_job() {
    let uid = test_user_uid();
    // The unauthenticated pool at 128, below what the flood holds (its default is sized
    // for the largest job's simultaneous prologs).
    let d = start(4, |_, s, o| {
        o.max_connections = 64;
        s.daemon.limits.unauthenticated = 128;
    });
    // The ordinary user must reach the socket inside the temporary directory.
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();

    // Unix socket: FLOOD idle connections as the ordinary user.
    let _unix = Reap(hold_unix_as(uid, uid, &d.socket, FLOOD));
    // TCP: FLOOD connections that never send a line (any host can do this)...
    let idle: Vec<TcpStream> = (0..FLOOD)
        .map(|_| TcpStream::connect(&d.tcp).unwrap())
        .collect();
    // ...and 20 that authenticate as the ordinary user, then stay idle.
    let mut users = Vec::new();
    for _ in 0..20 {
        let mut s = TcpStream::connect(&d.tcp).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let body = r#"{"op":"status"}"#;
        let cred = cred_as(Some(TEST_USER), body, None);
        s.write_all(&request_line(body, Some(&cred)).unwrap())
            .unwrap();
        let mut s = BufReader::new(s);
        let mut reply = String::new();
        s.read_line(&mut reply).unwrap();
        users.push((s, reply));
    }
    // The user's first 16 TCP connections (daemon.user_connections) are served and
    // kept; the other 4 are told the user holds its most, and closed.
    let served = users
        .iter()
        .filter(|(_, r)| r.contains(r#""ok":true"#))
        .count();
    let refused = users
        .iter()
        .filter(|(_, r)| r.contains(r#""code":"busy""#))
        .count();
    // Every reply is printed on failure: a `busy` that did not come, or another code
    // (a MUNGE that could not answer in time on a loaded host), tells which it was.
    let replies: Vec<&str> = users.iter().map(|(_, r)| r.trim_end()).collect();
    assert_eq!((served, refused), (16, 20 - 16), "replies: {replies:#?}");

    // Wait until greenupd holds the flood: at least 150 connections at once, more
    // than the 64 root and SlurmUser may hold.
    wait_for(|| {
        let st = d.unix_client().status();
        st.is_ok_and(|s| s.connections >= 150)
    });

    // The nodes still get through, on both listeners.
    let dec = d.tcp_client().open_job(open_req(31, uid, 2)).unwrap();
    assert_eq!(dec.job_id, 31);
    let dec = d.unix_client().open_job(open_req(32, uid, 2)).unwrap();
    assert_eq!(dec.job_id, 32);
    assert_eq!(count(&d.store, "SELECT count(*) FROM jobs"), 2);
    // What the flood holds is bounded by the limits: 16 on the Unix socket, at most
    // 128 unauthenticated and 16 authenticated on TCP, and this status connection.
    let st = d.unix_client().status().unwrap();
    assert!(st.connections <= 16 + 128 + 16 + 1, "{}", st.connections);
    drop((idle, users));
}
