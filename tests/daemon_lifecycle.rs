//! The greenupd binary: --check-config, SIGHUP reload, SIGTERM stop, and a
//! kill -9 restart that keeps every acknowledged write and rebuilds the ledger.

mod daemon_support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use daemon_support::*;
use greenup_core::quantity::{Joules, Watts};
use greenup_proto::client::{Client, Endpoint};
use greenup_proto::protocol::{NodeOutcome, Status};

fn config(dir: &Path, port: u16, cap: &str) -> String {
    config_with_metrics(dir, port, cap, None)
}

fn config_with_metrics(dir: &Path, port: u16, cap: &str, metrics: Option<u16>) -> String {
    let root = repo();
    let metrics = metrics.map_or(String::new(), |m| {
        format!("  metrics_listen: 127.0.0.1:{m}\n")
    });
    format!(
        "node_types:
  std:
    frequencies: {{min: 1.2, max: 2.4, step: 0.2}}
    power: {{dynamic_w: 200, static_w: 100}}
nodes:
  std: \"n[1-8]\"
power_cap: {cap}
partitions:
  debug:
    nodes: \"n[1-8]\"
default_policy: min-energy
policy_dirs: [{root}/policies]
profile_dir: {root}/etc/profiles
daemon:
  listen: 127.0.0.1:{port}
  socket: {dir}/greenupd.sock
  store: {dir}/greenup.db
  slurm_user: root
{metrics}",
        root = root.display(),
        dir = dir.display(),
    )
}

/// A scratch directory with the paths of its config file and greenupd's socket.
fn scratch() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (cfg, sock) = (
        dir.path().join("greenup.yaml"),
        dir.path().join("greenupd.sock"),
    );
    (dir, cfg, sock)
}

fn greenupd(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_greenupd"));
    c.args(args);
    c
}

fn start(cfg: &Path, sock: &Path) -> Child {
    let child = greenupd(&["--config", cfg.to_str().unwrap(), "--no-slurm-check"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(|| status(sock).is_some());
    child
}

fn status(sock: &Path) -> Option<Status> {
    Client::connect(&Endpoint::Unix(sock.to_path_buf()), Duration::from_secs(5))
        .ok()?
        .status()
        .ok()
}

fn signal(child: &Child, sig: &str) {
    assert!(
        Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
}

#[test]
fn check_config_accepts_good_and_names_the_line_of_bad() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, config(dir.path(), free_port(), "10kW")).unwrap();
    let out = greenupd(&["--check-config", "--config", good.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).ends_with(": ok\n"));

    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, config(dir.path(), free_port(), "lots")).unwrap();
    let out = greenupd(&["--check-config", "--config", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("{}:7:", bad.display())) && err.contains("lots"),
        "{err}"
    );
}

#[test]
fn sighup_reloads_a_good_config_keeps_the_old_on_a_bad_one_and_sigterm_stops() {
    munged();
    let (dir, cfg, sock) = scratch();
    let port = free_port();
    std::fs::write(&cfg, config(dir.path(), port, "10kW")).unwrap();
    let mut child = start(&cfg, &sock);
    assert_eq!(
        status(&sock).unwrap().ledger[0].cap_w,
        Some(Watts(10_000.0))
    );

    std::fs::write(&cfg, config(dir.path(), port, "6kW")).unwrap();
    signal(&child, "-HUP");
    wait_for(|| status(&sock).is_some_and(|s| s.ledger[0].cap_w == Some(Watts(6_000.0))));

    std::fs::write(&cfg, "node_types: [broken").unwrap();
    signal(&child, "-HUP");
    // Still serving with the last good config.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(status(&sock).unwrap().ledger[0].cap_w, Some(Watts(6_000.0)));

    signal(&child, "-TERM");
    let st = child.wait().unwrap();
    assert!(st.success(), "graceful stop exits 0");
    assert!(!sock.exists(), "the socket is removed on stop");
}

#[test]
fn kill_9_and_restart_keeps_acknowledged_writes_and_the_ledger() {
    munged();
    let (dir, cfg, sock) = scratch();
    let port = free_port();
    std::fs::write(&cfg, config(dir.path(), port, "10kW")).unwrap();
    let mut child = start(&cfg, &sock);
    let tcp = Endpoint::Tcp(format!("127.0.0.1:{port}"));
    let mut c = Client::connect(&tcp, Duration::from_secs(5)).unwrap();
    let a = c.open_job(open_req(7, 0, 2)).unwrap();
    let b = c.open_job(open_req(8, 0, 3)).unwrap();
    let o = NodeOutcome {
        restart_count: None,
        comm: None,
        job_id: 7,
        node: "n1".into(),
        freq_ghz: None,
        energy_j: Some(Joules(42.0)),
        elapsed_s: None,
        source: None,
        restored: true,
        note: None,
        gpu: None,
        power: None,
    };
    assert!(c.record_outcome(o).unwrap());
    assert!(c.close_job(8, None, None).unwrap());
    signal(&child, "-KILL");
    let _ = child.wait();

    let mut child = start(&cfg, &sock);
    let st = status(&sock).unwrap();
    // Job 7 (2 nodes x 300 W, unchanged) is the only open job.
    assert_eq!((st.open_jobs, st.total_jobs, st.outcomes), (1, 2, 1));
    assert_eq!(
        (st.ledger[0].jobs, st.ledger[0].reserved_w),
        (1, a.reserved_w)
    );
    assert_eq!(a.reserved_w.0, 600.0);
    let mut c = Client::connect(&tcp, Duration::from_secs(5)).unwrap();
    assert_eq!(
        c.open_job(open_req(7, 0, 2)).unwrap(),
        a,
        "the stored decision is returned after a restart"
    );
    assert_eq!(c.get_job(8).unwrap().decision, b);
    assert_eq!(
        c.get_job(7).unwrap().outcomes[0].energy_j,
        Some(Joules(42.0))
    );
    signal(&child, "-TERM");
    let _ = child.wait();
}

/// Whether `GET /metrics` on 127.0.0.1:`port` answers with greenupd's page.
fn scrapes(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut page = String::new();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .is_ok()
        && s.read_to_string(&mut page).is_ok()
        && page.starts_with("HTTP/1.1 200")
        && page.contains("greenup_")
}

#[test]
fn sighup_moves_closes_and_keeps_the_metrics_listener() {
    munged();
    let (dir, cfg, sock) = scratch();
    let (port, m1, m2) = (free_port(), free_port(), free_port());
    let write = |m: Option<u16>| {
        std::fs::write(&cfg, config_with_metrics(dir.path(), port, "10kW", m)).unwrap()
    };
    write(Some(m1));
    let mut child = start(&cfg, &sock);
    assert!(scrapes(m1));

    write(Some(m2));
    signal(&child, "-HUP");
    wait_for(|| scrapes(m2));
    wait_for(|| !scrapes(m1));

    // An address already taken: the listener stays where it was.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    write(Some(taken.local_addr().unwrap().port()));
    signal(&child, "-HUP");
    wait_for(|| status(&sock).is_some());
    std::thread::sleep(Duration::from_millis(300));
    assert!(scrapes(m2), "a failed bind keeps the old listener");

    write(None);
    signal(&child, "-HUP");
    wait_for(|| !scrapes(m2));
    assert!(status(&sock).is_some(), "the daemon still serves");
    signal(&child, "-TERM");
    assert!(child.wait().unwrap().success());
}
