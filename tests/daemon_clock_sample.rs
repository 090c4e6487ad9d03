//! greenupd runs a share of monitor jobs at a clock no run has measured yet
//! (`power.sample_clocks`), so the node power learning measures it; such a run applies
//! a plan, and is never counted as a measured baseline.
//!
//! The expected clocks come by hand from etc/profiles/lammps.yaml (amdahl: on 2 nodes
//! 3600 s x (0.97 / 2 + 0.03) = 1854 s computing at f_max, slowed by 0.4 + 0.6 x
//! f_max / f, plus 12 s x log2(2) blocked) on the support site's clocks 1.2, 1.6, 2.0
//! and 2.4 GHz: 1866 s at f_max; 1854 x 1.12 + 12 = 2088.48 s at 2.0 GHz (11.92%
//! slower); 1854 x 1.3 + 12 = 2422.2 s at 1.6 GHz (29.81%); 1854 x 1.6 + 12 = 2978.4 s
//! at 1.2 GHz (59.61%). Under a bound of 30% the lowest clock that fits is 1.6 GHz.
//! The job shares are those daemon_baseline.rs pins with a separate splitmix64.

mod daemon_support;

use daemon_support::*;
use greenup::model::measured_power::PowerSource;
use greenup::site::SampleClocks;
use greenup_core::quantity::Ghz;
use greenup_daemon::baseline::job_share;
use greenup_daemon::store::{SqliteStore, Store};
use greenup_proto::protocol::{Decision, OpenJob, Verdict};

/// A monitor job of lammps on n1 and n2.
fn lammps(job_id: u64) -> OpenJob {
    OpenJob {
        restart_count: None,
        profile: Some("lammps".into()),
        policy: Some("monitor".into()),
        ..open_req(job_id, 0, 2)
    }
}

/// Record that `dec`'s nodes ran 100 s at `ghz`, computing 95 s at `busy_w` and idle
/// (the site's 100 W) the rest, measured by RAPL; then close the job.
fn finish(d: &Daemon, dec: &Decision, ghz: f64, busy_w: f64) {
    let mut c = d.tcp_client();
    for node in ["n1", "n2"] {
        c.record_outcome(computing_outcome(dec.job_id, node, ghz, busy_w))
            .unwrap();
    }
    c.close_job(dec.job_id, Some(greenup::record::JobEnd::Completed), None)
        .unwrap();
}

/// lammps' measured baselines as greenupd counts them, read from its store.
fn baselines(d: &Daemon) -> u32 {
    SqliteStore::open_reader(&d.store)
        .unwrap()
        .app_history("lammps", "monitor")
        .unwrap()
        .0
}

/// A profile directory of the test's own under `dir`, holding lammps: closed lammps
/// jobs may be refined there.
fn own_profiles(dir: &std::path::Path) -> std::path::PathBuf {
    let profiles = dir.join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::copy(
        repo().join("etc/profiles/lammps.yaml"),
        profiles.join("lammps.yaml"),
    )
    .unwrap();
    profiles
}

fn clocks(dec: &Decision) -> Vec<Option<f64>> {
    ["n1", "n2"].iter().map(|n| dec.freq_for(n)).collect()
}

#[test]
fn a_picked_monitor_job_runs_at_an_unmeasured_clock_and_is_no_baseline() {
    let addr = format!("127.0.0.1:{}", free_port());
    let listen = addr.clone();
    let d = start(2, move |dir, s, _| {
        s.profile_dir = own_profiles(dir);
        s.daemon.metrics_listen = Some(listen);
        s.power.sample_clocks = Some(SampleClocks {
            fraction: 0.5,
            max_slowdown: 0.3,
        });
    });
    let mut c = d.tcp_client();

    // Job 3 (share 0.1135) is not picked: it runs as its policy says, a baseline.
    let plain = c.open_job(lammps(3)).unwrap();
    assert_eq!(plain.verdict, Verdict::Unchanged, "{plain:?}");
    assert!(plain.monitor && !plain.clock_sample, "{plain:?}");
    assert_eq!(plain.reason, "policy monitor records only");
    assert_eq!(clocks(&plain), [None, None]);
    assert!(plain.measured_baseline());

    // Job 1 (share 0.5666) is picked: every node at 1.6 GHz, the lowest clock within 30%.
    let sampled = c.open_job(lammps(1)).unwrap();
    assert_eq!(sampled.verdict, Verdict::Planned, "{sampled:?}");
    assert!(sampled.clock_sample && !sampled.monitor, "{sampled:?}");
    assert!(!sampled.measured_baseline());
    assert_eq!(clocks(&sampled), [Some(1.6), Some(1.6)]);
    assert!(
        sampled.reason.starts_with(
            "clock sample: every node at 1.6 GHz, a clock whose watts fewer than 3 runs have measured (the site's power.sample_clocks.fraction 0.5); predicted slowdown 29.8%, within power.sample_clocks.max_slowdown 0.3"
        ),
        "{}",
        sampled.reason
    );
    let plan = sampled.plan.as_ref().unwrap();
    assert!((plan.baseline.time_s.0 - 1866.0).abs() < 1e-6, "{plan:?}");
    assert!((plan.predicted.time_s.0 - 2422.2).abs() < 1e-6, "{plan:?}");
    // The decision names where the watts it ran with come from: the site's model.
    assert_eq!(sampled.watts.len(), 1, "{:?}", sampled.watts);
    assert_eq!(
        (sampled.watts[0].freq_ghz.0, sampled.watts[0].source),
        (1.6, PowerSource::Site)
    );
    // The node is told to set the clock, and that its run is no baseline.
    let settings = c.node_settings(1, "n1").unwrap();
    assert_eq!(settings.freq_ghz, Some(Ghz(1.6)), "{settings:?}");
    assert!(!settings.baseline, "{settings:?}");

    finish(&d, &plain, 2.4, 260.0);
    finish(&d, &sampled, 1.6, 180.0);
    // Only the monitor run at f_max counts as lammps' baseline.
    wait_for(|| count(&d.store, "SELECT count(*) FROM jobs WHERE state = 'closed'") == 2);
    assert_eq!(baselines(&d), 1);

    // Two more sampled runs at 1.6 GHz make three: the clock is measured, and the next
    // picked job samples the lowest clock still unmeasured within 30%, 2.0 GHz (1.2 GHz
    // would cost 59.6%).
    let picked: Vec<u64> = (100..).filter(|&id| job_share(id) >= 0.5).take(3).collect();
    for &id in &picked[..2] {
        let dec = c.open_job(lammps(id)).unwrap();
        assert_eq!(clocks(&dec), [Some(1.6), Some(1.6)], "{dec:?}");
        finish(&d, &dec, 1.6, 180.0);
    }
    let measured_16 =
        "greenup_node_type_busy_watts{node_type=\"std\",ghz=\"1.6\",source=\"measured\"} ";
    wait_for(|| {
        metrics_page(&addr)
            .lines()
            .filter_map(|l| l.strip_prefix(measured_16))
            .any(|v| {
                v.trim()
                    .parse::<f64>()
                    .is_ok_and(|w| (w - 180.0).abs() < 1e-6)
            })
    });
    // The site samples clocks, so 1.2 GHz, below every measured clock, gets the floor:
    // the site's 100 + 200 (1.2/2.4)^3 = 125 W scaled by 180 W over its 159.3 W at 1.6
    // GHz is 141.3 W, but dynamic watts fall no faster than the clock: 100 + 80 x 1.2 /
    // 1.6 = 160 W. (daemon_node_power checks the scaled shape where the site does not.)
    let floor_12 =
        "greenup_node_type_busy_watts{node_type=\"std\",ghz=\"1.2\",source=\"site_scaled\"} ";
    let page = metrics_page(&addr);
    let w12: Vec<f64> = page
        .lines()
        .filter_map(|l| l.strip_prefix(floor_12))
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    assert!(
        w12.len() == 1 && (w12[0] - 160.0).abs() < 1e-6,
        "{w12:?}\n{page}"
    );
    let next = c.open_job(lammps(picked[2])).unwrap();
    assert!(next.clock_sample, "{next:?}");
    assert_eq!(clocks(&next), [Some(2.0), Some(2.0)], "{next:?}");
    assert!(
        next.reason.contains("every node at 2 GHz") && next.reason.contains("slowdown 11.9%"),
        "{}",
        next.reason
    );
    // Three sampled runs closed, one monitor run: still one baseline.
    assert_eq!(baselines(&d), 1);
    // The metrics count the four sampled decisions (three closed, one open), and no
    // baseline sample: job 3 ran unchanged because its policy is monitor.
    let page = metrics_page(&addr);
    assert!(
        page.contains("greenup_measurement_runs_total{kind=\"clock_sample\"} 4\n")
            && page.contains("greenup_measurement_runs_total{kind=\"baseline_sample\"} 0\n"),
        "{}",
        page.lines()
            .filter(|l| l.contains("measurement_runs"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn without_the_setting_no_monitor_job_is_sampled() {
    let d = start(2, |dir, s, _| {
        s.profile_dir = own_profiles(dir);
    });
    let mut c = d.tcp_client();
    for id in [1, 2, 42] {
        let dec = c.open_job(lammps(id)).unwrap();
        assert_eq!(dec.verdict, Verdict::Unchanged, "{dec:?}");
        assert!(dec.monitor && !dec.clock_sample, "{dec:?}");
    }
}

#[test]
fn baseline_samples_are_counted_apart_from_clock_samples() {
    let addr = format!("127.0.0.1:{}", free_port());
    let listen = addr.clone();
    let d = start(2, move |dir, s, _| {
        s.profile_dir = own_profiles(dir);
        s.daemon.metrics_listen = Some(listen);
        // Every job a baseline sample; no clock is sampled, since none is a monitor job.
        s.baseline = Some(greenup::site::BaselineSettings {
            fraction: 1.0,
            min_runs: 0,
            on_miss: greenup::site::OnMiss::Report,
        });
        s.power.sample_clocks = Some(SampleClocks {
            fraction: 1.0,
            max_slowdown: 0.3,
        });
    });
    let mut c = d.tcp_client();
    for id in [5, 6] {
        let dec = c
            .open_job(OpenJob {
                policy: Some("min-energy".into()),
                ..lammps(id)
            })
            .unwrap();
        assert!(dec.baseline_sample && !dec.clock_sample, "{dec:?}");
    }
    let page = metrics_page(&addr);
    for line in [
        "greenup_measurement_runs_total{kind=\"baseline_sample\"} 2\n",
        "greenup_measurement_runs_total{kind=\"clock_sample\"} 0\n",
    ] {
        assert!(page.contains(line), "{line} missing from:\n{page}");
    }
}
