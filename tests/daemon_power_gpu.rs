//! A GPU job's live power (issue 25): the node's `greenup meter` adds the job's GPUs'
//! energy counters (NVML, the test-only stand-in of tests/nvml) to RAPL's, so greenupd's
//! measured power includes them. RAPL's counter stands still throughout: any watts
//! greenupd hears come from the GPU. Real munged, real SQLite.

mod daemon_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use daemon_support::*;
use greenup_core::quantity::{Seconds, Watts};
use greenup_platform::gpu::Nvml;
use greenup_platform::gpu::hold::{self, Request};
use greenup_proto::protocol::OpenJob;

#[path = "nvml/build_standin.rs"]
mod nvml_build;

fn standin() -> PathBuf {
    nvml_build::build(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nvml/build.sh"),
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvml-standin"),
    )
}

fn put(dir: &Path, file: &str, v: &str) {
    std::fs::write(dir.join(file), format!("{v}\n")).unwrap();
}

/// One stand-in GPU, fully busy (700 W), its counter on the test's own clock.
fn gpu(dir: &Path) {
    let g = dir.join("0");
    std::fs::create_dir_all(&g).unwrap();
    put(dir, "count", "1");
    put(dir, "now_ns", "1000000000000");
    for (f, v) in [
        ("minor", "0"),
        ("uuid", "GPU-live-0"),
        ("name", "Stand-in"),
        ("sm_clocks", "1980 1200"),
        ("mem_clock", "2619"),
        ("idle_mw", "70000"),
        ("dyn_mw", "630000"),
        ("util", "100"),
        ("limit_mw", "700000"),
        ("limit_min_mw", "200000"),
        ("limit_max_mw", "700000"),
        ("limit_default_mw", "700000"),
        ("locked", ""),
        ("energy_mj", "0"),
        ("stamp_ns", "1000000000000"),
    ] {
        put(&g, f, v);
    }
}

#[test]
fn a_gpu_jobs_meter_reports_its_gpus_power_with_the_nodes() {
    use greenup_platform::dvfs::job::{NodePaths, end};
    let d = start(2, |_, s, _| s.power_cap_w = Some(10_000.0));
    d.tcp_client()
        .open_job(OpenJob {
            restart_count: None,
            nodes: vec!["n1".into()],
            ..open_req(77, 0, 1)
        })
        .unwrap();
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("nvml");
    gpu(&state);
    // SAFETY: the one test in this binary, before NVML is used; the meter inherits it.
    unsafe { std::env::set_var("GREENUP_NVML_STANDIN_DIR", &state) };
    let paths = NodePaths {
        sysfs_root: t.path().join("sys"),
        run_dir: t.path().join("run"),
    };
    // RAPL's counter at 0, never moved.
    let z = paths.sysfs_root.join("class/powercap/intel-rapl:0");
    std::fs::create_dir_all(&z).unwrap();
    put(&z, "name", "package-0");
    put(&z, "max_energy_range_uj", "262143328850");
    put(&z, "energy_uj", "0");
    begin_shared(&paths, 77, "n1");
    // The prolog's GPU part: the job holds /dev/nvidia0.
    let nvml = Nvml::open(&standin()).unwrap();
    let record = hold::record_path(&paths.run_dir, 77, "n1");
    hold::begin(&nvml, &record, 77, &[0], Request::default(), |_| None).unwrap();
    drop(nvml);

    let sock = format!("unix:{}", d.socket.display());
    let mut meter = spawn_meter(77, "n1", &paths, &sock);
    let site = || {
        let v = d.unix_client().power_status(None).unwrap();
        v.caps.iter().find(|c| c.scope == "site").unwrap().clone()
    };
    // The GPU's clock stands still too: 0 W.
    wait_for(|| site().nodes == 1);
    assert_eq!(site().measured_w, Watts(0.0));
    // Only the GPU's counter moves (its clock advances 1 s per step): greenupd hears
    // watts, which can only be the GPU's.
    let mut now_ns: u64 = 1_000_000_000_000;
    wait_for(|| {
        now_ns += 1_000_000_000;
        put(&state, "now_ns", &now_ns.to_string());
        std::thread::sleep(Duration::from_millis(200));
        site().measured_w > Watts(0.0)
    });
    // All of it is the GPU's, and the GPU gauge says so.
    let now = site();
    assert_eq!(now.measured_gpu_w, now.measured_w);
    let metrics = greenup_proto::live_power::prometheus(std::slice::from_ref(&now));
    assert!(
        metrics.contains(&format!(
            "greenup_power_measured_gpu_watts{{cap=\"site\"}} {}\n",
            now.measured_w.0
        )),
        "{metrics}"
    );
    // The epilog ends the job here: the meter stops by itself.
    let nvml = Nvml::open(&standin()).unwrap();
    hold::end(&nvml, &record).unwrap();
    end(&paths, 77, "n1").unwrap();
    assert!(wait_exit(&mut meter).success());
}

#[test]
fn a_gpu_nodes_report_may_be_as_large_as_its_gpus_make_it() {
    use greenup_proto::live_power::{PowerReport, PowerSample};
    // n1's CPUs draw 300 W at most; with 8 GPUs of 700 W it draws 5,900 W. greenupd
    // refuses above 10 times the node's top power: 59 kW with the GPUs, 3 kW without.
    let d = start(2, |_, s, _| {
        s.gpu_types.insert(
            "std".into(),
            greenup::site::GpuType {
                count: 8,
                clocks_mhz: None,
                clock_step_mhz: None,
                power_limit_w: None,
                dynamic_w: 630.0,
                static_w: 70.0,
                gamma: 3.0,
            },
        );
    });
    d.tcp_client()
        .open_job(OpenJob {
            restart_count: None,
            nodes: vec!["n1".into()],
            ..open_req(78, 0, 1)
        })
        .unwrap();
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let report = |watts: f64| PowerReport {
        limit_w: None,
        node: "n1".into(),
        samples: vec![PowerSample {
            jobs: vec![78],
            at,
            watts: Watts(watts),
            interval_s: Seconds(5.0),
            gpu_watts: None,
        }],
    };
    d.unix_client().power_report(report(5_000.0)).unwrap();
    let e = d.unix_client().power_report(report(60_000.0)).unwrap_err();
    assert!(e.to_string().contains("59000"), "{e}");
}
