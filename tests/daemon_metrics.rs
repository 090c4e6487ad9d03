//! greenupd's Prometheus listener, scraped over a real TCP connection.

mod daemon_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use daemon_support::*;
use greenup_core::quantity::{Ghz, Joules, Seconds};
use greenup_proto::protocol::{OpenJob, Verdict};

fn get(addr: &str, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The value of the sample line `name` (with its labels), if present.
fn sample(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

fn lammps(job_id: u64) -> OpenJob {
    OpenJob {
        restart_count: None,
        profile: Some("lammps".into()),
        policy: Some("min-energy".into()),
        ..open_req(job_id, 0, 4)
    }
}

#[test]
fn metrics_show_budget_jobs_decisions_fallbacks_errors_and_store() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let listen = addr.clone();
    let d = start(4, move |_, s, _| {
        s.power_cap_w = Some(5000.0);
        s.daemon.metrics_listen = Some(listen);
    });

    // Measured 4% below the prediction: error +4%.
    let j1 = d.tcp_client().open_job(lammps(1)).unwrap();
    assert_eq!(j1.verdict, Verdict::Planned);
    let pred = j1.plan.as_ref().unwrap().predicted.energy_j.0;
    finish_planned(&d, &j1, pred / 1.04, Some("rapl"));
    // No profile: runs unchanged, a fallback.
    d.tcp_client().open_job(open_req(2, 0, 4)).unwrap();
    d.tcp_client().close_job(2, None, None).unwrap();
    // Still running.
    let j3 = d.tcp_client().open_job(lammps(3)).unwrap();
    // Monitor runs unchanged on purpose: a decision, not a fallback.
    let monitor = OpenJob {
        restart_count: None,
        policy: Some("monitor".into()),
        ..open_req(4, 0, 4)
    };
    d.tcp_client().open_job(monitor).unwrap();
    d.tcp_client().close_job(4, None, None).unwrap();
    // Unmeasured nodes never enter the error histogram.
    let j5 = d.tcp_client().open_job(lammps(5)).unwrap();
    finish_planned(&d, &j5, pred, None);

    let reply = get(&addr, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let (head, page) = reply.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    assert!(
        head.contains(&format!("Content-Length: {}", page.len())),
        "{head}"
    );

    let v = |name: &str| sample(page, name).unwrap_or_else(|| panic!("{name} missing:\n{page}"));
    assert_eq!(v("greenup_running_jobs"), 1.0);
    assert_eq!(v("greenup_site_power_cap_watts"), 5000.0);
    assert_eq!(v("greenup_site_power_reserved_watts"), j3.reserved_w.0);
    assert_eq!(
        v("greenup_site_power_available_watts"),
        5000.0 - j3.reserved_w.0
    );
    assert_eq!(v("greenup_decisions_total{policy=\"min-energy\"}"), 4.0);
    assert_eq!(v("greenup_decisions_total{policy=\"monitor\"}"), 1.0);
    assert_eq!(v("greenup_fallbacks_total{reason=\"no_profile\"}"), 1.0);
    assert_eq!(
        sample(page, "greenup_fallbacks_total{reason=\"over_budget\"}"),
        None
    );
    assert_eq!(v("greenup_prediction_error_percent_count"), 1.0);
    assert_eq!(v("greenup_prediction_error_percent_bucket{le=\"2\"}"), 0.0);
    assert_eq!(v("greenup_prediction_error_percent_bucket{le=\"5\"}"), 1.0);
    assert!((v("greenup_prediction_error_percent_sum") - 4.0).abs() < 1e-9);
    assert_eq!(v("greenup_store_jobs"), 5.0);
    let on_disk = std::fs::metadata(&d.store).unwrap().len() as f64;
    assert!(v("greenup_store_bytes") >= on_disk, "{page}");

    let other = get(&addr, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
    let post = get(&addr, "POST /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
}

#[test]
fn a_node_whose_jobs_never_report_is_counted_silent_until_it_reports() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let listen = addr.clone();
    let d = start(2, move |_, s, _| {
        s.daemon.metrics_listen = Some(listen);
    });
    let silent = || {
        let page = get(&addr, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
        sample(&page, "greenup_nodes_silent")
    };
    let outcome = |job_id: u64, node: &str| greenup_proto::protocol::NodeOutcome {
        comm: None,
        job_id,
        node: node.into(),
        freq_ghz: Some(Ghz(2.4)),
        energy_j: Some(Joules(100.0)),
        elapsed_s: Some(Seconds(10.0)),
        source: Some(greenup::record::Source::Rapl),
        restored: true,
        note: None,
        gpu: None,
        power: None,
        restart_count: None,
    };
    let mut c = d.tcp_client();
    // Three jobs on both nodes in a row: n1 reports each time, n2 (no plugin) never.
    for job in 1..=3 {
        c.open_job(open_req(job, 0, 2)).unwrap();
        c.record_outcome(outcome(job, "n1")).unwrap();
        c.close_job(job, None, None).unwrap();
        if job < 3 {
            // Each close is counted after its reply: wait for the page to agree.
            wait_for(|| silent() == Some(0.0));
        }
    }
    wait_for(|| silent() == Some(1.0));
    // Its next outcome brings it back.
    c.open_job(open_req(4, 0, 2)).unwrap();
    c.record_outcome(outcome(4, "n2")).unwrap();
    assert_eq!(silent(), Some(0.0));
}
