//! A GPU node's share of a job's watts (issues 23 and 25): greenupd's settings split the
//! share between the CPU package and each GPU, the prolog's part sets the job's GPUs'
//! power limits to their part through the NVML stand-in (tests/nvml) and leaves the
//! node's other GPUs alone, and the epilog restores exactly what was there and reports
//! the node's CPU and GPU limits as one. Expected watts are the closed form of the split
//! worked by hand below.

mod common;

use std::path::Path;

use common::{STANDIN_ENV, get, gpus, node_args, node_tree, put, second_node_job, standin};
use greenup_platform::dvfs::job::Scope;
use greenup_proto::protocol::{Decision, NodeSettings};
use spank_greenup::args::Args;
use spank_greenup::gpu;
use spank_greenup::node::{self, JobEnv, Level};
use spank_greenup::{epilog, prolog};

/// Nodes n[0-1]: CPUs 100 W dynamic at 2 GHz (cube law) + 20 W static, 120 W flat out;
/// four GPUs each 630 W dynamic + 70 W static, 700 W flat out; the GPU limit range is
/// left to NVML. Power held in the queue; greenupd unreachable, so the epilog spools.
fn setup(t: &Path, library: &Path) -> (Args, JobEnv, greenup::site::Site) {
    node_tree(&t.join("sys/n1"));
    let yaml = format!(
        "node_types:\n  g:\n    frequencies: [1.0, 2.0]\n    power: {{dynamic_w: 100, static_w: 20, gamma: 3}}\n    gpus: {{count: 4, power: {{dynamic_w: 630, static_w: 70}}}}\nnodes:\n  g: \"n[0-1]\"\ndaemon:\n  listen: 127.0.0.1:9\n  timeout_ms: 100\n  spool_dir: {t}/spool/%n\ndvfs:\n  run_dir: {t}/run\n  nvml_library: {lib}\npower:\n  enforce: queue\n",
        t = t.display(),
        lib = library.display()
    );
    let config = t.join("greenup.yaml");
    std::fs::write(&config, yaml).unwrap();
    let args = node_args(t, &config);
    let job = second_node_job(&[("SLURM_JOB_GPUS", "1,3")]);
    (args, job, greenup::site::load(&config).unwrap())
}

/// What greenupd tells n1 for a job granted `granted_w` over n[0-1], both at their top
/// (an unmanaged job: no plan), through the same rule greenupd's reply goes through.
fn told(site: &greenup::site::Site, granted_w: f64) -> NodeSettings {
    let d: Decision = serde_json::from_value(serde_json::json!({
        "job_id": 77, "verdict": "refused", "reason": "no profile", "policy": "min-energy",
        "profile": null, "profile_version": null, "power_cap_w": null, "reserved_w": 0.0,
        "plan": null, "decided_at": 1_795_000_000,
        "grant": {"granted_w": granted_w, "weight_w": 2.0 * (120.0 + 4.0 * 700.0)}
    }))
    .unwrap();
    greenup::power::split::with_node_type(NodeSettings::from_decision(&d, "n1", 2), site)
}

fn quiet(_: Level, _: &str) {}

/// The prolog's part for `d`: keep the decision for the epilog, apply the CPU's, then
/// the GPUs'.
fn prolog(args: &Args, job: &JobEnv, d: &NodeSettings) -> (Option<String>, Option<String>) {
    let site = node::settings(args).unwrap();
    let paths = node::node_paths(args, &site, "n1");
    let dir = greenup_platform::dvfs::run_dir::JobDir::new(&paths.run_dir, job.job_id);
    dir.create().unwrap();
    std::fs::write(dir.decision("n1"), serde_json::to_vec(d).unwrap()).unwrap();
    prolog::apply_settings(&paths, &site, job, Some(d), &Scope::Node, &quiet).unwrap();
    gpu::start(&site, &paths.run_dir, job, gpu::Asked::of(Some(d)))
}

fn spooled_power(t: &Path) -> serde_json::Value {
    let file = t.join("spool/n1/77.n1.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    std::fs::remove_file(file).unwrap();
    v["outcomes"][0]["power"].clone()
}

const HELD_TEST: &str = "a_gpu_jobs_gpus_are_held_at_their_part_of_the_share_and_restored";

#[test]
fn a_gpu_jobs_gpus_are_held_at_their_part_of_the_share_and_restored() {
    let t = tempfile::tempdir().unwrap();
    let state = t.path().join("nvml");
    gpus(&state, "power");
    // SAFETY: the one test in this binary, before NVML is used.
    unsafe { std::env::set_var("GREENUP_NVML_STANDIN_DIR", &state) };
    let (args, job, site) = setup(t.path(), &standin());
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;

    // 2000 W over two nodes of 120 + 4 x 700 = 2920 W: n1's share is 1000 W; its CPU's
    // part 1000 x 120 / 2920 W, each GPU's 1000 x 700 / 2920 W (inside 200-700 W).
    let d = told(&site, 2000.0);
    let (cpu_w, gpu_w) = (1000.0 * 120.0 / 2920.0, 1000.0 * 700.0 / 2920.0);
    assert!((d.power_limit_w.unwrap().0 - cpu_w).abs() < 1e-9, "{d:?}");
    let part = d.gpu_power.unwrap();
    assert!((part.part_w.0 - gpu_w).abs() < 1e-9 && part.limit_w == part.part_w);
    let gpu_mw = (gpu_w * 1e3).round();

    let (warning, note) = prolog(&args, &job, &d);
    assert_eq!(warning, None);
    if !root {
        // Only root sets GPU limits and locks: nothing changes, and the log says why.
        assert!(note.unwrap().contains("not run as root"));
        assert_eq!(get(&state, 1, "limit_mw"), "700000");
        let mut d = told(&site, 2000.0);
        d.gpu_mhz = Some(1200);
        let (_, note) = prolog(&args, &job, &d);
        assert!(
            note.unwrap()
                .contains("GPU clocks not locked: not run as root")
        );
        for i in 0..4 {
            assert_eq!(get(&state, i, "locked"), "");
        }
        return;
    }
    assert!(note.unwrap().contains(&format!("{gpu_w:.1} W each")));
    // The job's GPUs 1 and 3 are held at their part; GPUs 0 and 2 were never written.
    for i in [1, 3] {
        assert_eq!(get(&state, i, "limit_mw"), format!("{gpu_mw}"));
        assert_eq!(get(&state, i, "writes"), format!("power_limit {gpu_mw}"));
    }
    for i in [0, 2] {
        assert_eq!(get(&state, i, "limit_mw"), "700000");
        assert_eq!(get(&state, i, "writes"), "");
    }

    epilog::epilog(&args, &job, &quiet);
    for i in [1, 3] {
        assert_eq!(get(&state, i, "limit_mw"), "700000");
    }
    for i in [0, 2] {
        assert_eq!(get(&state, i, "writes"), "");
    }
    // The node's limits as one: the CPU's part and the job's two GPUs' parts, all held.
    let p = spooled_power(t.path());
    let asked = p["asked_w"].as_f64().unwrap();
    let held = p["held_w"].as_f64().unwrap();
    assert!((asked - (cpu_w + 2.0 * gpu_w)).abs() < 1e-6, "{p}");
    assert!((held - (cpu_w + 2.0 * gpu_mw / 1e3)).abs() < 1e-3, "{p}");
    assert!(
        p["note"]
            .as_str()
            .unwrap()
            .contains("CPU 41.1 W + GPUs 479.5 W asked")
    );

    // 1200 W: each GPU's part is 600 x 700 / 2920 = 143.8 W, below NVML's 200 W lowest
    // limit: held at 200 W and said, the CPU keeping its own part.
    let d = told(&site, 1200.0);
    let low_w = 600.0 * 700.0 / 2920.0;
    let (_, note) = prolog(&args, &job, &d);
    let note = note.unwrap();
    assert!(note.contains("GPU power limit 200.0 W each"), "{note}");
    assert!(note.contains(&format!(
        "{:.1} W above its {low_w:.1} W part",
        200.0 - low_w
    )));
    assert_eq!(get(&state, 1, "limit_mw"), "200000");
    epilog::epilog(&args, &job, &quiet);
    assert_eq!(get(&state, 1, "limit_mw"), "700000");
    let p = spooled_power(t.path());
    assert!((p["held_w"].as_f64().unwrap() - (600.0 * 120.0 / 2920.0 + 400.0)).abs() < 1e-3);

    // A GPU whose limit NVML refuses: not held, with NVML's reason, for the job's owner
    // and in the report; the other GPU is held and restored.
    put(&state.join("3"), "refuse_power_limit", "NO_PERMISSION");
    let (warning, _) = prolog(&args, &job, &told(&site, 2000.0));
    let warning = warning.unwrap();
    assert!(
        warning.contains("/dev/nvidia3: power limit not set") && warning.contains("NO_PERMISSION"),
        "{warning}"
    );
    assert_eq!(get(&state, 1, "limit_mw"), format!("{gpu_mw}"));
    assert_eq!(get(&state, 3, "limit_mw"), "700000");
    epilog::epilog(&args, &job, &quiet);
    assert_eq!(get(&state, 1, "limit_mw"), "700000");
    let p = spooled_power(t.path());
    assert!(p.get("held_w").is_none(), "{p}");
    let note = p["note"].as_str().unwrap();
    assert!(
        note.contains("/dev/nvidia3 not held") && note.contains("NO_PERMISSION"),
        "{note}"
    );

    // A decision that lowers the GPUs' SM clock to 1200 MHz: the job's GPUs are locked
    // there beside their power limit, the node's other GPUs never, and the epilog unlocks
    // them, as they were before the job.
    std::fs::remove_file(state.join("3/refuse_power_limit")).unwrap();
    let mut d = told(&site, 2000.0);
    d.gpu_mhz = Some(1200);
    let (warning, note) = prolog(&args, &job, &d);
    assert_eq!(warning, None);
    assert!(
        note.unwrap().contains("GPU SM clock locked at 1200 MHz"),
        "the log says the lock"
    );
    for i in [1, 3] {
        assert_eq!(get(&state, i, "locked"), "1200 1200");
        assert!(get(&state, i, "writes").ends_with("lock 1200 1200"));
    }
    for i in [0, 2] {
        assert_eq!(get(&state, i, "locked"), "");
        assert_eq!(get(&state, i, "writes"), "");
    }
    epilog::epilog(&args, &job, &quiet);
    for i in [1, 3] {
        assert_eq!(get(&state, i, "locked"), "");
        assert!(get(&state, i, "writes").contains("unlock"));
        assert_eq!(get(&state, i, "limit_mw"), "700000");
    }
    spooled_power(t.path());
}

#[test]
fn an_ordinary_users_prolog_sets_no_gpu_limit() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        // The test above runs as this ordinary user and checks it already.
        return;
    }
    // The test above, run by an ordinary user (nobody) from copies it may read: the
    // stand-in accepts any caller's limit, so only greenup's own check holds it back.
    let t = tempfile::tempdir().unwrap();
    let open = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    open(t.path(), 0o755);
    let lib = t.path().join("libnvidia-ml-standin.so");
    std::fs::copy(standin(), &lib).unwrap();
    open(&lib, 0o755);
    let exe = t.path().join("gpu_power");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    open(&exe, 0o755);
    let out = std::process::Command::new(&exe)
        .args(["--exact", HELD_TEST, "--nocapture"])
        .env(STANDIN_ENV, &lib)
        .env("TMPDIR", "/tmp")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}
