//! `greenup jobs`, `greenup job`, `greenup report` and `greenup status` against a running greenupd,
//! as root and as an ordinary user (run with runuser: SO_PEERCRED on the socket,
//! a MUNGE credential over TCP).

mod daemon_support;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use daemon_support::*;
use greenup_core::quantity::{Ghz, Joules, Seconds};
use greenup_proto::protocol::{JobRecord, NodeOutcome, Status};

#[test]
fn users_see_their_own_jobs_root_sees_all() {
    let uid = test_user_uid();
    let d = start(4, |_, _, _| {});
    // The test user must reach the socket inside the temporary directory.
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut root = d.tcp_client();
    root.open_job(open_req(101, uid, 2)).unwrap();
    root.open_job(open_req(102, 0, 2)).unwrap();
    let o = NodeOutcome {
        restart_count: None,
        comm: None,
        job_id: 101,
        node: "n2".into(),
        freq_ghz: Some(Ghz(2.2)),
        energy_j: Some(Joules(1234.0)),
        elapsed_s: Some(Seconds(5.0)),
        source: Some(greenup::record::Source::Rapl),
        restored: true,
        note: None,
        gpu: None,
        power: None,
    };
    assert!(root.record_outcome(o).unwrap());
    let sock = format!("unix:{}", d.socket.display());

    // `greenup jobs` finds greenupd through a site config, as a user's shell would.
    let site = cli_site(&d);
    let site = site.to_str().unwrap();
    let ids = |out: &str| {
        let rows: Vec<serde_json::Value> = serde_json::from_str(out).unwrap();
        let mut ids: Vec<u64> = rows.iter().map(|r| r["job_id"].as_u64().unwrap()).collect();
        ids.sort_unstable();
        ids
    };
    let (rc, out, err) = cli(None, &["jobs", "--site", site, "--json"]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(ids(&out), vec![101, 102]);

    let (rc, out, err) = cli(Some(TEST_USER), &["jobs", "--site", site, "--json"]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(ids(&out), vec![101], "a user sees only their own jobs");
    let (rc, out, err) = cli(
        Some(TEST_USER),
        &["jobs", "--site", site, "--json", "--user", "root"],
    );
    assert_eq!(rc, 0, "{err}");
    assert!(
        ids(&out).is_empty(),
        "naming another user shows none of theirs"
    );
    let (rc, _, err) = cli(
        Some(TEST_USER),
        &["jobs", "--site", site, "--json", "--user", "0"],
    );
    assert_eq!(rc, 3);
    assert!(err.contains("may list only their own jobs"), "{err}");

    // `greenup report` shows Slurm accounting's figure as sacct gives it (a stand-in
    // sacct first on PATH), or says why there is none.
    let fake = d.dir.path().join("fake-bin");
    std::fs::create_dir_all(&fake).unwrap();
    let report_with_sacct = |body: &str, json: bool| {
        greenup_host::fixtures::script(&fake, "sacct", body);
        let path = format!(
            "{}:{}",
            fake.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut args = vec!["report", "101", "--site", site];
        if json {
            args.push("--json");
        }
        let out = Command::new(greenup_bin())
            .args(&args)
            .env("PATH", path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let measured =
        r#"[ "$*" = "-n -P -X -j 101 -o State,ConsumedEnergyRaw" ] && echo 'COMPLETED|7000'"#;
    let page = report_with_sacct(measured, false);
    assert!(
        page.contains("\nSlurm       ConsumedEnergy 7.00 kJ\n"),
        "{page}"
    );
    let v: serde_json::Value = serde_json::from_str(&report_with_sacct(measured, true)).unwrap();
    assert_eq!(
        v["slurm_energy"],
        serde_json::json!({"status": "measured", "joules": 7000.0})
    );
    let page = report_with_sacct(
        "echo 'Slurm accounting storage is disabled' >&2; exit 1",
        false,
    );
    assert!(
        page.contains(
            "Slurm       ConsumedEnergy not available (no Slurm accounting: Slurm accounting storage is disabled)"
        ),
        "{page}"
    );

    for connect in [sock.as_str(), d.tcp.as_str()] {
        let (rc, _, err) = cli(Some(TEST_USER), &["job", "102", "--connect", connect]);
        assert_eq!(rc, 3);
        assert!(
            err.contains("forbidden") && err.contains("may not read job 102"),
            "{err}"
        );
    }

    let (rc, out, err) = cli(
        Some(TEST_USER),
        &["job", "101", "--connect", &sock, "--json"],
    );
    assert_eq!(rc, 0, "{err}");
    let job: JobRecord = serde_json::from_str(&out).unwrap();
    assert_eq!(job.outcomes[0].node, "n2");

    let (rc, out, _) = cli(Some(TEST_USER), &["job", "101", "--connect", &sock]);
    assert_eq!(rc, 0);
    assert!(out.contains("verdict         unchanged"), "{out}");
    assert!(
        out.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["n2", "-", "2.200", "1234", "5.0", "rapl", "yes"]),
        "{out}"
    );

    let (rc, out, err) = cli(None, &["status", "--connect", &sock, "--json"]);
    assert_eq!(rc, 0, "{err}");
    let st: Status = serde_json::from_str(&out).unwrap();
    assert_eq!((st.open_jobs, st.total_jobs, st.outcomes), (2, 2, 1));
    let (rc, out, _) = cli(None, &["status", "--connect", &sock]);
    assert_eq!(rc, 0);
    assert!(
        out.contains("jobs: 2 open, 2 total; 1 node outcomes"),
        "{out}"
    );
}

#[test]
fn an_unreachable_daemon_is_one_clear_line() {
    let (rc, _, err) = cli(
        None,
        &["status", "--connect", "unix:/nonexistent/greenupd.sock"],
    );
    assert_eq!(rc, 3);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("greenup: cannot connect to greenupd at unix:/nonexistent/greenupd.sock"),
        "{err}"
    );
}
