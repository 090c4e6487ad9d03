//! The prolog's and epilog's GPU part against the test-only NVML stand-in
//! (tests/nvml): only the job's GPUs are saved and measured, a stale record naming one of
//! them is restored first, and a job or node without GPUs is left as it was. Expected
//! energies come from the stand-in's closed form (tests/nvml/README.md).

mod common;

use std::path::Path;

use common::{get, gpus, put, standin};
use greenup::site::node::NodeConfig;
use spank_greenup::gpu;
use spank_greenup::node::JobEnv;

fn site_with(t: &Path, library: &Path) -> NodeConfig {
    let yaml = format!(
        "node_types:\n  g:\n    frequencies: [1.0, 2.0]\n    power: {{dynamic_w: 10, static_w: 2}}\n    gpus: {{count: 4, power: {{dynamic_w: 630, static_w: 70}}}}\nnodes:\n  g: n1\ndvfs:\n  nvml_library: {}\n",
        library.display()
    );
    let file = t.join("greenup.yaml");
    std::fs::write(&file, yaml).unwrap();
    NodeConfig::from_site(&greenup::site::load(&file).unwrap())
}

fn job(id: u32, gpus: Option<&str>) -> JobEnv {
    JobEnv::from_vars(|k| match k {
        "SLURM_JOB_ID" => Some(id.to_string()),
        "SLURM_JOB_UID" => Some("1000".into()),
        "SLURMD_NODENAME" => Some("n1".into()),
        "SLURM_JOB_GPUS" => gpus.map(String::from),
        _ => None,
    })
    .unwrap()
}

#[test]
fn a_jobs_gpus_are_measured_and_only_they() {
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("nvml");
    gpus(&state, "job");
    // SAFETY: the one test in this binary that sets the environment, before NVML is used.
    unsafe { std::env::set_var("GREENUP_NVML_STANDIN_DIR", &state) };
    let site = site_with(t.path(), &standin());
    let run = t.path().join("run");

    // No SLURM_JOB_GPUS: nothing is opened, saved or said.
    assert_eq!(
        gpu::start(&site, &run, &job(5, None), gpu::Asked::default()),
        (None, None)
    );
    assert!(gpu::end(&site, &run, &job(5, None)).is_none());

    let a = job(7, Some("1,3"));
    assert_eq!(
        gpu::start(&site, &run, &a, gpu::Asked::default()),
        (None, None)
    );
    put(&state, "now_ns", "1010000000000");
    let out = gpu::end(&site, &run, &a).unwrap();
    // Two GPUs at 700 W for 10 s of the stand-in's clock: 14,000 J.
    assert_eq!(out.gpus, 2);
    assert_eq!(out.energy_j, Some(greenup_core::quantity::Joules(14_000.0)));
    assert!(out.avg_power_w.is_some());
    assert_eq!(out.note, None);
    // The other GPUs were not even read: their counters never advanced.
    for i in [0, 2] {
        assert_eq!(get(&state, i, "energy_mj"), "0");
    }
    assert!(!run.join("7").exists());

    // A job whose epilog never ran left GPU 2 at 300 W; the next job Slurm gives GPU 2
    // restores it first.
    let b = job(8, Some("2"));
    assert_eq!(
        gpu::start(&site, &run, &b, gpu::Asked::default()),
        (None, None)
    );
    let file = greenup_platform::gpu::hold::record_path(&run, 8, "n1");
    let mut rec = greenup_platform::gpu::hold::load(&file).unwrap().unwrap();
    rec.gpus[0].power_limit = greenup_platform::gpu::Control::Held;
    greenup_platform::gpu::hold::save(&file, &rec).unwrap();
    put(&state.join("2"), "limit_mw", "300000");
    let c = job(9, Some("2"));
    let (warning, note) = gpu::start(&site, &run, &c, gpu::Asked::default());
    assert_eq!(warning, None);
    assert_eq!(note.as_deref(), Some("GPUs of ended job 8 restored"));
    assert_eq!(get(&state, 2, "limit_mw"), "700000");
    assert!(gpu::end(&site, &run, &c).is_some());

    // A job Slurm gave a GPU the node lacks: measured where it can be, and said.
    let d = job(10, Some("3,6"));
    let (warning, _) = gpu::start(&site, &run, &d, gpu::Asked::default());
    assert!(warning.unwrap().contains("/dev/nvidia6"));
    let out = gpu::end(&site, &run, &d).unwrap();
    assert_eq!((out.gpus, out.energy_j), (2, None));

    // A node without NVML: one warning line, nothing saved.
    let broken = site_with(t.path(), Path::new("/nonexistent/libnvidia-ml.so.1"));
    let (warning, _) = gpu::start(&broken, &run, &job(11, Some("0")), gpu::Asked::default());
    assert!(
        warning
            .unwrap()
            .starts_with("GPUs not measured: cannot load NVML from /nonexistent/libnvidia-ml.so.1"),
    );
    assert!(gpu::end(&broken, &run, &job(11, Some("0"))).is_none());
}
