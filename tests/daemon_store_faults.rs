//! greenupd when its database cannot be written: a read-only file system and a
//! full disk give clear `store_failed` replies, nothing unstored is acknowledged,
//! and the daemon keeps serving. Needs root (it mounts small tmpfs file systems).

mod daemon_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use daemon_support::*;
use greenup_core::quantity::{Ghz, Joules, Seconds, Watts};
use greenup_daemon::store::{Change, NewJob, SqliteStore, Store};
use greenup_proto::client::ClientError;
use greenup_proto::protocol::{ErrorCode, NodeOutcome};

/// A tmpfs mounted for one test and unmounted when dropped.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, size: &str) -> Mount {
        std::fs::create_dir_all(at).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs failed: these tests need root");
        Mount(at.to_path_buf())
    }

    fn remount(&self, mode: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,{mode}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(st.success(), "remount {mode} failed");
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn store_failed(r: Result<impl std::fmt::Debug, ClientError>) -> String {
    match r {
        Err(ClientError::Server(e)) => {
            assert_eq!(e.code, ErrorCode::StoreFailed, "{e}");
            e.message
        }
        other => panic!("expected store_failed, got {other:?}"),
    }
}

fn outcome(job_id: u64, node: &str) -> NodeOutcome {
    NodeOutcome {
        restart_count: None,
        comm: None,
        job_id,
        node: node.into(),
        freq_ghz: Some(Ghz(2.0)),
        energy_j: Some(Joules(100.0)),
        elapsed_s: Some(Seconds(1.0)),
        source: Some(greenup::record::Source::Rapl),
        restored: true,
        note: None,
        gpu: None,
        power: None,
    }
}

#[test]
fn a_read_only_database_refuses_writes_clearly_and_serves_reads() {
    munged();
    let dir = tempfile::tempdir().unwrap();
    let mount = Mount::tmpfs(&dir.path().join("db"), "16m");
    let db = dir.path().join("db/greenup.db");
    // A store with one open job, closed cleanly, then made read-only.
    {
        let mut s = SqliteStore::open(&db).unwrap();
        let d = greenup_proto::protocol::Decision {
            comm_dvfs: None,
            job_id: 1,
            verdict: greenup_proto::protocol::Verdict::Unchanged,
            reason: String::new(),
            policy: "min-energy".into(),
            monitor: false,
            profile: None,
            profile_version: None,
            power_cap_w: None,
            reserved_w: greenup_core::quantity::Watts(600.0),
            plan: None,
            decided_at: 1,
            baseline_sample: false,
            clock_sample: false,
            refusal: None,
            budgets: Vec::new(),
            grant: None,
            guard: None,
            watts: Vec::new(),
        };
        let job = NewJob {
            request: open_req(1, 0, 2),
            decision: d,
            inputs: serde_json::json!({}),
            expires_at: i64::MAX,
            charges: Vec::new(),
        };
        assert!(s.apply(&[Change::Open(Box::new(job))])[0].is_ok());
    }
    mount.remount("ro");
    let d = start_in(dir, 4, |_, s, _| s.daemon.store = db.clone());
    let mut c = d.tcp_client();

    let msg = store_failed(c.open_job(open_req(2, 0, 2)));
    assert!(
        msg.contains("nothing was stored") && msg.contains("readonly"),
        "{msg}"
    );
    store_failed(c.record_outcome(outcome(1, "n1")));
    store_failed(c.close_job(1, None, None));

    // Reads still work, and the ledger was rebuilt from the store and not changed by the failures.
    let job = c.get_job(1).unwrap();
    assert_eq!(job.outcomes.len(), 0);
    let st = c.status().unwrap();
    assert_eq!(
        (st.ledger[0].jobs, st.ledger[0].reserved_w),
        (1, Watts(600.0))
    );
    match c.get_job(2) {
        Err(ClientError::Server(e)) => assert_eq!(e.code, ErrorCode::NotFound),
        other => panic!("job 2 was never stored, got {other:?}"),
    }
}

#[test]
fn a_full_disk_refuses_writes_clearly_and_recovers_when_space_returns() {
    munged();
    let dir = tempfile::tempdir().unwrap();
    let _mount = Mount::tmpfs(&dir.path().join("db"), "4m");
    let db = dir.path().join("db/greenup.db");
    let d = start_in(dir, 4, |_, s, _| s.daemon.store = db.clone());
    let mut c = d.tcp_client();
    c.open_job(open_req(1, 0, 2)).unwrap();

    // Fill the file system to the last byte.
    let filler = db.with_file_name("filler");
    let _ = Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", filler.display()))
        .arg("bs=4k")
        .output();
    let mut failures = 0;
    let mut acked = Vec::new();
    for job_id in 2..200 {
        match c.open_job(open_req(job_id, 0, 4)) {
            Ok(_) => acked.push(job_id),
            Err(e) => {
                let msg = store_failed(Err::<(), _>(e));
                assert!(msg.contains("full"), "{msg}");
                failures += 1;
            }
        }
    }
    assert!(failures > 0, "a full disk must refuse some writes");
    let st = c.status().unwrap();
    assert_eq!(
        st.ledger[0].jobs,
        1 + acked.len(),
        "refused opens hold no reservation"
    );

    // Space comes back: writes work again, and every acknowledged job is there.
    std::fs::remove_file(&filler).unwrap();
    c.open_job(open_req(500, 0, 2)).unwrap();
    for id in acked.iter().chain([1, 500].iter()) {
        assert_eq!(c.get_job(*id).unwrap().job_id, *id);
    }
    assert_eq!(
        count(&db, "SELECT count(*) FROM jobs") as usize,
        acked.len() + 2
    );
}

#[test]
fn a_store_failure_is_logged_as_an_error_and_a_callers_mistake_is_not() {
    let logs = captured_logs();
    munged();
    let dir = tempfile::tempdir().unwrap();
    let mount = Mount::tmpfs(&dir.path().join("db"), "16m");
    let db = dir.path().join("db/greenup.db");
    drop(SqliteStore::open(&db).unwrap());
    mount.remount("ro");
    let d = start_in(dir, 4, |_, s, _| s.daemon.store = db.clone());
    let mut c = d.tcp_client();
    store_failed(c.open_job(open_req(77, 0, 2)));
    // An ordinary mistake: a request for an op that does not exist.
    let r = c
        .call_raw(&greenup_proto::protocol::request_line(r#"{"op":"explode"}"#, None).unwrap())
        .unwrap();
    assert_eq!(r.error.unwrap().code, ErrorCode::CredMissing);
    let text = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    assert!(
        text.lines()
            .any(|l| l.contains("ERROR") && l.contains("store_failed")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains(" INFO ") && l.contains("cred_missing")),
        "{text}"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.contains("ERROR") && l.contains("cred_missing")),
        "{text}"
    );
}
