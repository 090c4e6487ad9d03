//! Measured power, live, through greenupd: the nodes' power reports add up under the
//! right caps beside the watts granted, stranded power is granted less measured, bad and
//! foreign reports are refused and leave nothing behind, and a cap drawing more than it
//! was granted for longer than the window is warned about once. Real munged, real SQLite.
//! Every expected figure below is worked out by hand from the nodes' watts.

mod daemon_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use daemon_support::*;
use greenup::site::Partition;
use greenup_core::quantity::{Seconds, Watts};
use greenup_proto::client::ClientError;
use greenup_proto::live_power::{CapPower, PowerReport, PowerSample, PowerView};
use greenup_proto::protocol::{ErrorCode, OpenJob, Request, Verdict, request_body, request_line};

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// 8 nodes of 200 W dynamic + 100 W static; site cap 10 kW; partition `debug` (n1-n4)
/// capped at 2 kW, `batch` (n5-n8) uncapped. Meter interval 5 s, over-grant window 10 s.
fn cluster() -> Daemon {
    start(8, |_, s, _| {
        s.power_cap_w = Some(10_000.0);
        let names = |r: std::ops::RangeInclusive<usize>| r.map(|i| format!("n{i}")).collect();
        s.partitions.insert(
            "debug".into(),
            Partition {
                nodes: names(1..=4),
                power_cap_w: Some(2_000.0),
            },
        );
        s.partitions.insert(
            "batch".into(),
            Partition {
                nodes: names(5..=8),
                power_cap_w: None,
            },
        );
        s.power.meter_interval_s = 5.0;
        s.power.over_grant_window_s = 10.0;
    })
}

/// A job without a profile on `nodes` of `partition`: it runs unchanged and holds its
/// nodes' full power, 300 W each.
fn job(id: u64, partition: &str, nodes: &[&str]) -> OpenJob {
    OpenJob {
        restart_count: None,
        partition: Some(partition.into()),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        ..open_req(id, 0, 1)
    }
}

fn sample(job: u64, at: i64, watts: f64) -> PowerSample {
    PowerSample {
        jobs: vec![job],
        at,
        watts: Watts(watts),
        interval_s: Seconds(5.0),
        gpu_watts: None,
    }
}

fn report(node: &str, job: u64, at: i64, watts: f64) -> PowerReport {
    PowerReport {
        limit_w: None,
        node: node.into(),
        samples: vec![sample(job, at, watts)],
    }
}

fn cap<'a>(v: &'a PowerView, scope: &str) -> &'a CapPower {
    v.caps.iter().find(|c| c.scope == scope).unwrap()
}

fn refusal(r: Result<(u64, Option<Watts>), ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Server(e)) => (e.code, e.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Open jobs 1 (debug, n1-n4) and 2 (batch, n5-n8): 1200 W granted each.
fn two_jobs(d: &Daemon) {
    let mut c = d.tcp_client();
    let j1 = c
        .open_job(job(1, "debug", &["n1", "n2", "n3", "n4"]))
        .unwrap();
    let j2 = c
        .open_job(job(2, "batch", &["n5", "n6", "n7", "n8"]))
        .unwrap();
    for j in [j1, j2] {
        assert_eq!((j.verdict, j.reserved_w.0), (Verdict::Unchanged, 1200.0));
    }
}

#[test]
fn reports_add_up_under_their_caps_beside_the_watts_granted() {
    let d = cluster();
    two_jobs(&d);
    let t = now();
    let mut c = d.tcp_client();
    for (node, w) in [("n1", 250.0), ("n2", 200.0), ("n3", 150.0), ("n4", 100.0)] {
        assert_eq!(c.power_report(report(node, 1, t, w)).unwrap().0, 1);
    }
    c.power_report(report("n5", 2, t, 280.0)).unwrap();
    let v = d.unix_client().power_status(None).unwrap();
    // Site: 250 + 200 + 150 + 100 + 280 = 980 W of 2 x 1200 = 2400 W granted; debug: 700
    // of 1200. The uncapped batch partition has no line of its own.
    let (site, debug) = (cap(&v, "site"), cap(&v, "debug"));
    assert_eq!(v.caps.len(), 2);
    assert_eq!(
        (site.cap_w, site.granted_w, site.measured_w, site.nodes),
        (Some(Watts(10_000.0)), Watts(2400.0), Watts(980.0), 5)
    );
    assert_eq!(site.stranded_w, Watts(2400.0 - 980.0));
    assert_eq!(
        (debug.cap_w, debug.granted_w, debug.measured_w, debug.nodes),
        (Some(Watts(2_000.0)), Watts(1200.0), Watts(700.0), 4)
    );
    assert_eq!(debug.stranded_w, Watts(500.0));
    // n1's next report replaces its last (250 W by 50 W); an older one changes nothing.
    c.power_report(report("n1", 1, t + 5, 50.0)).unwrap();
    assert_eq!(c.power_report(report("n1", 1, t + 1, 999.0)).unwrap().0, 0);
    let v = d.unix_client().power_status(Some(1.0)).unwrap();
    assert_eq!(cap(&v, "site").measured_w, Watts(780.0));
    assert_eq!(cap(&v, "debug").measured_w, Watts(500.0));
    assert_eq!(cap(&v, "debug").stranded_w, Watts(700.0));
    // The timeline's latest point is the present.
    let line = v.timelines.iter().find(|l| l.scope == "debug").unwrap();
    let last = line.points.last().unwrap();
    assert_eq!(
        (last.measured_w, last.granted_w, last.stranded_w),
        (Watts(500.0), Watts(1200.0), Watts(700.0))
    );
    // Closing job 1 gives its 1200 W back, and its nodes no longer count: the site
    // holds job 2's grant and n5's 280 W alone.
    c.close_job(1, None, None).unwrap();
    let v = d.unix_client().power_status(None).unwrap();
    let (site, debug) = (cap(&v, "site"), cap(&v, "debug"));
    assert_eq!(
        (site.granted_w, site.measured_w, site.nodes),
        (Watts(1200.0), Watts(280.0), 1)
    );
    assert_eq!(
        (debug.granted_w, debug.measured_w, debug.nodes),
        (Watts(0.0), Watts(0.0), 0)
    );
    // ...and n1's reports for it are refused from then on.
    let (code, msg) = refusal(c.power_report(report("n1", 1, t + 10, 60.0)));
    assert_eq!(code, ErrorCode::Conflict, "{msg}");
}

#[test]
fn a_node_outside_its_job_is_refused_and_a_job_never_opened_is_counted_as_unopened() {
    let d = cluster();
    two_jobs(&d);
    let t = now();
    let mut c = d.tcp_client();
    c.power_report(report("n1", 1, t, 200.0)).unwrap();
    let (code, msg) = refusal(c.power_report(report("n5", 1, t, 250.0)));
    assert_eq!(code, ErrorCode::Forbidden, "{msg}");
    assert!(msg.contains("'n5' is not one of job 1's nodes"), "{msg}");
    // Job 77 started while greenupd was down, so it was never opened; its node still
    // draws power under the caps. Counted under the node's own capped partition (n3 is
    // debug's), and shown as unopened.
    assert_eq!(c.power_report(report("n3", 77, t, 250.0)).unwrap().0, 1);
    // A report naming the node's job and a job it is not in is refused whole.
    let both = PowerReport {
        limit_w: None,
        node: "n2".into(),
        samples: vec![sample(1, t, 100.0), sample(2, t + 1, 100.0)],
    };
    let (code, _) = refusal(c.power_report(both));
    assert_eq!(code, ErrorCode::Forbidden);
    let v = d.unix_client().power_status(None).unwrap();
    for scope in ["site", "debug"] {
        let c = cap(&v, scope);
        assert_eq!(
            (c.measured_w, c.nodes, c.unopened_nodes),
            (Watts(450.0), 2, 1),
            "{scope}"
        );
    }
}

#[test]
fn impossible_values_are_refused_and_nothing_of_them_is_kept() {
    let d = cluster();
    two_jobs(&d);
    let t = now();
    let mut c = d.tcp_client();
    // A node of 300 W top power may report at most 10 x 300 = 3000 W.
    c.power_report(report("n1", 1, t, 3000.0)).unwrap();
    let bad: Vec<(PowerSample, &str)> = vec![
        (sample(1, t + 1, -1.0), "samples.watts"),
        (sample(1, t + 1, 3000.5), "samples.watts"),
        (sample(1, t + 3600, 100.0), "samples.at"),
        (sample(1, t - 3600, 100.0), "samples.at"),
        (
            PowerSample {
                interval_s: Seconds(0.0),
                ..sample(1, t + 1, 100.0)
            },
            "samples.interval_s",
        ),
        (
            PowerSample {
                jobs: vec![],
                ..sample(1, t + 1, 100.0)
            },
            "samples.jobs",
        ),
        (
            PowerSample {
                gpu_watts: Some(Watts(100.5)),
                ..sample(1, t + 1, 100.0)
            },
            "samples.gpu_watts",
        ),
    ];
    for (s, field) in bad {
        // A good sample before the bad one is not kept either.
        let r = PowerReport {
            limit_w: None,
            node: "n2".into(),
            samples: vec![sample(1, t, 100.0), s],
        };
        let (code, msg) = refusal(c.power_report(r));
        assert_eq!(code, ErrorCode::BadRequest, "{msg}");
        assert!(msg.contains(field), "{field}: {msg}");
    }
    // NaN has no JSON spelling: written by hand, the line is not JSON at all.
    let line = br#"{"v":1,"req":{"op":"power_report","node":"n2","samples":[{"jobs":[1],"at":1,"watts":NaN,"interval_s":5}]}}"#;
    let reply = d.unix_client().call_raw(line).unwrap();
    assert_eq!(reply.error.map(|e| e.code), Some(ErrorCode::BadJson));
    // serde_json writes a NaN as null, which is no number of watts.
    let (code, _) = refusal(c.power_report(report("n2", 1, t, f64::NAN)));
    assert_eq!(code, ErrorCode::BadRequest);
    // A read-back limit that no node could hold confirms nothing: refused whole.
    for w in [-1.0, 0.0, 1.0e9] {
        let r = PowerReport {
            limit_w: Some(Watts(w)),
            ..report("n2", 1, t + 2, 100.0)
        };
        let (code, msg) = refusal(c.power_report(r));
        assert!(
            code == ErrorCode::BadRequest && msg.contains("limit_w"),
            "{w}: {msg}"
        );
    }
    let v = d.unix_client().power_status(None).unwrap();
    assert_eq!(
        (cap(&v, "site").measured_w, cap(&v, "site").nodes),
        (Watts(3000.0), 1)
    );
}

#[test]
fn only_root_and_the_slurm_user_report_power_and_anyone_reads_the_totals() {
    let d = cluster();
    two_jobs(&d);
    test_user_uid();
    let body = request_body(&Request::PowerReport(report("n1", 1, now(), 100.0))).unwrap();
    let cred = cred_as(Some(TEST_USER), &body, None);
    let reply = d
        .tcp_client()
        .call_raw(&request_line(&body, Some(&cred)).unwrap())
        .unwrap();
    assert_eq!(reply.error.map(|e| e.code), Some(ErrorCode::Forbidden));
    let body = request_body(&Request::PowerStatus { hours: None }).unwrap();
    let cred = cred_as(Some(TEST_USER), &body, None);
    let reply = d
        .tcp_client()
        .call_raw(&request_line(&body, Some(&cred)).unwrap())
        .unwrap();
    assert!(reply.ok, "{:?}", reply.error);
    let v = d.unix_client().power_status(None).unwrap();
    assert_eq!(cap(&v, "site").nodes, 0);
}

fn logged(logs: &Arc<Mutex<Vec<u8>>>, needle: &str) -> usize {
    String::from_utf8_lossy(&logs.lock().unwrap())
        .matches(needle)
        .count()
}

#[test]
fn drawing_more_than_granted_past_the_window_is_warned_once_per_episode() {
    let logs = captured_logs();
    let d = cluster();
    let mut c = d.tcp_client();
    // Job 3 holds n1's 300 W; n1 draws 350 W from t0 on (by its samples' times).
    let j = c.open_job(job(3, "debug", &["n1"])).unwrap();
    assert_eq!(j.reserved_w.0, 300.0);
    // Samples in the next seconds (greenupd takes them up to 60 s ahead), so none goes
    // stale while the test runs.
    let t0 = now();
    c.power_report(report("n1", 3, t0, 350.0)).unwrap();
    c.power_report(report("n1", 3, t0 + 5, 350.0)).unwrap();
    let v = d.unix_client().power_status(None).unwrap();
    assert_eq!(cap(&v, "debug").over_grant_since, Some(t0));
    assert_eq!(cap(&v, "debug").over_grant_episodes, 0);
    assert_eq!(cap(&v, "debug").stranded_w, Watts(0.0));
    // 10 s over: the window is reached, for the partition's cap and the site's alike.
    c.power_report(report("n1", 3, t0 + 10, 350.0)).unwrap();
    c.power_report(report("n1", 3, t0 + 15, 350.0)).unwrap();
    let v = d.unix_client().power_status(None).unwrap();
    assert_eq!(cap(&v, "debug").over_grant_episodes, 1);
    assert_eq!(cap(&v, "site").over_grant_episodes, 1);
    assert_eq!(
        logged(
            &logs,
            "power cap 'debug': measured 350 W has stayed above the 300 W granted"
        ),
        1
    );
    // Back under the grant ends the episode; the next one is warned again.
    c.power_report(report("n1", 3, t0 + 20, 250.0)).unwrap();
    let v = d.unix_client().power_status(None).unwrap();
    assert_eq!(cap(&v, "debug").over_grant_since, None);
    for k in 0..3 {
        c.power_report(report("n1", 3, t0 + 25 + 5 * k, 400.0))
            .unwrap();
    }
    let v = d.unix_client().power_status(None).unwrap();
    assert_eq!(cap(&v, "debug").over_grant_episodes, 2);
    assert_eq!(
        logged(&logs, "power cap 'debug': measured 400 W has stayed above"),
        1
    );
    // Refusals are logged, one line each.
    let _ = c.power_report(report("n2", 3, t0 + 40, 100.0));
    assert!(
        logged(
            &logs,
            "power report refused, nothing of it counted: node 'n2' is not one of job 3's nodes"
        ) >= 1
    );
}

#[test]
fn prometheus_shows_each_caps_measured_granted_and_stranded_watts() {
    let port = free_port();
    let d = start(8, |_, s, _| {
        s.power_cap_w = Some(10_000.0);
        s.daemon.metrics_listen = Some(format!("127.0.0.1:{port}"));
    });
    d.tcp_client()
        .open_job(job(4, "debug", &["n1", "n2"]))
        .unwrap();
    let mut c = d.tcp_client();
    c.power_report(report("n1", 4, now(), 120.0)).unwrap();
    c.power_report(report("n2", 4, now(), 130.0)).unwrap();
    let page = metrics_page(&format!("127.0.0.1:{port}"));
    // 2 nodes x 300 W granted, 120 + 130 = 250 W measured, 350 W stranded.
    for line in [
        "greenup_power_measured_watts{cap=\"site\"} 250\n",
        "greenup_power_granted_watts{cap=\"site\"} 600\n",
        "greenup_power_cap_watts{cap=\"site\"} 10000\n",
        "greenup_power_stranded_watts{cap=\"site\"} 350\n",
        "greenup_power_nodes_reporting{cap=\"site\"} 2\n",
    ] {
        assert!(page.contains(line), "{line} missing from:\n{page}");
    }
}

#[test]
fn greenup_power_prints_the_caps_as_a_table_json_and_a_plot() {
    let d = cluster();
    two_jobs(&d);
    let t = now();
    let mut c = d.tcp_client();
    c.power_report(report("n1", 1, t, 250.0)).unwrap();
    c.power_report(report("n5", 2, t, 150.0)).unwrap();
    let sock = format!("unix:{}", d.socket.display());
    let (code, out, err) = cli(None, &["power", "--connect", &sock]);
    assert_eq!(code, 0, "{err}");
    // site: 2400 W granted, 250 + 150 = 400 W measured, none of it GPUs', 2000 W
    // stranded, none given back, 2 nodes.
    let site_row = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some("site"))
        .unwrap_or_else(|| panic!("{out}"));
    let cells: Vec<&str> = site_row.split_whitespace().collect();
    assert_eq!(
        &cells[..8],
        ["site", "10000", "2400", "400", "0", "2000", "0", "2"],
        "{out}"
    );
    let (code, out, err) = cli(None, &["power", "--connect", &sock, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: PowerView = serde_json::from_str(&out).unwrap();
    assert_eq!(cap(&v, "debug").measured_w, Watts(250.0));
    let svg = d.dir.path().join("power.svg");
    let (code, _, err) = cli(
        None,
        &["power", "--connect", &sock, "--plot", svg.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    let (code, _, err) = cli(None, &["power", "--connect", &sock, "--hours", "7"]);
    assert_eq!(code, 2);
    assert!(err.contains("--hours: invalid value '7'"), "{err}");
}

#[test]
fn a_running_jobs_meter_reports_its_nodes_power_until_the_job_ends() {
    use greenup_platform::dvfs::job::{NodePaths, end};
    let d = cluster();
    d.tcp_client().open_job(job(77, "debug", &["n1"])).unwrap();
    let t = tempfile::tempdir().unwrap();
    let paths = NodePaths {
        sysfs_root: t.path().join("sys"),
        run_dir: t.path().join("run"),
    };
    rapl_tree(&paths.sysfs_root, 0, 262_143_328_850);
    begin_shared(&paths, 77, "n1");
    let sock = format!("unix:{}", d.socket.display());
    let mut meter = spawn_meter(77, "n1", &paths, &sock);
    // The counter stands still, then moves: greenupd first hears 0 W from n1, then more.
    let debug = || {
        let v = d.unix_client().power_status(None).unwrap();
        cap(&v, "debug").clone()
    };
    wait_for(|| debug().nodes == 1);
    assert_eq!(debug().measured_w, Watts(0.0));
    let mut uj = 0;
    wait_for(|| {
        uj += 50_000_000;
        set_counter(&paths.sysfs_root, uj);
        std::thread::sleep(Duration::from_millis(200));
        debug().measured_w > Watts(0.0)
    });
    let c = debug();
    assert_eq!((c.nodes, c.granted_w), (1, Watts(300.0)));
    // The epilog ends the job here: the meter stops by itself.
    end(&paths, 77, "n1").unwrap();
    assert!(wait_exit(&mut meter).success());
}
