//! The test-only NVML stand-in (tests/nvml) as the plugin's GPU tests use it: the built
//! library, and four stand-in GPUs under a state directory; and a node's cpufreq and
//! RAPL sysfs tree for the power-limit tests.

// Each test binary compiles this module and uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

#[path = "../../../tests/nvml/build_standin.rs"]
mod nvml_build;

/// Where an ordinary user's run of this binary finds the stand-in library, built by root.
pub const STANDIN_ENV: &str = "GREENUP_TEST_NVML_STANDIN";

/// The stand-in library: the one named by [`STANDIN_ENV`] (an ordinary user's re-run of a
/// test binary), else built into the test target directory.
pub fn standin() -> PathBuf {
    if let Some(lib) = std::env::var_os(STANDIN_ENV) {
        return lib.into();
    }
    nvml_build::build(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/nvml/build.sh"),
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvml-standin"),
    )
}

#[allow(unused_imports)]
pub use nvml_build::{gpus, put};

/// Read GPU `gpu`'s state file `file`, trimmed (empty when absent).
pub fn get(dir: &Path, gpu: u32, file: &str) -> String {
    std::fs::read_to_string(dir.join(gpu.to_string()).join(file))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Node n1: four CPUs at 1 or 2 GHz under ondemand, one package with RAPL limits unset
/// (0) and the kernel's default windows.
pub fn node_tree(sys: &Path) {
    for i in 0..4 {
        let d = sys.join(format!("devices/system/cpu/cpufreq/policy{i}"));
        std::fs::create_dir_all(&d).unwrap();
        for (f, v) in [
            ("affected_cpus", i.to_string()),
            ("scaling_available_governors", "userspace ondemand".into()),
            ("scaling_available_frequencies", "2000000 1000000".into()),
            ("scaling_governor", "ondemand".into()),
            ("cpuinfo_min_freq", "1000000".into()),
            ("cpuinfo_max_freq", "2000000".into()),
            ("scaling_min_freq", "1000000".into()),
            ("scaling_max_freq", "2000000".into()),
            ("scaling_setspeed", "<unsupported>".into()),
        ] {
            put(&d, f, &v);
        }
    }
    let z = sys.join("class/powercap/intel-rapl:0");
    std::fs::create_dir_all(&z).unwrap();
    for (f, v) in [
        ("name", "package-0"),
        ("energy_uj", "1000"),
        ("max_energy_range_uj", "262143328850"),
        ("enabled", "1"),
        ("constraint_0_name", "long_term"),
        ("constraint_0_power_limit_uw", "0"),
        ("constraint_0_time_window_us", "976562"),
        ("constraint_0_max_power_uw", "250000000"),
        ("constraint_1_name", "short_term"),
        ("constraint_1_power_limit_uw", "0"),
        ("constraint_1_time_window_us", "2440"),
        ("constraint_1_max_power_uw", "400000000"),
    ] {
        put(&z, f, v);
    }
}

/// The plugin's arguments on a node of a test site: `config` its greenup.yaml, the site
/// cache and each node's sysfs tree under `t`, and no meter.
pub fn node_args(t: &Path, config: &Path) -> spank_greenup::args::Args {
    let words = [
        format!("config={}", config.display()),
        format!("site_cache={}/cache", t.display()),
        "meter=none".to_string(),
        format!("sysfs_root={}/sys/%n", t.display()),
    ];
    spank_greenup::args::Args::parse(words.iter().map(String::as_str)).unwrap()
}

/// Job 77 of uid 1000 on n[0-1] (four CPUs each) as n1 sees it, with `extra` variables
/// besides. n1 is not the job's first node, so its epilog does not ask slurmctld how the
/// job ended.
pub fn second_node_job(extra: &[(&str, &str)]) -> spank_greenup::node::JobEnv {
    spank_greenup::node::JobEnv::from_vars(|k| match k {
        "SLURM_JOB_ID" => Some("77".into()),
        "SLURM_JOB_UID" => Some("1000".into()),
        "SLURMD_NODENAME" => Some("n1".into()),
        "SLURM_JOB_NODELIST" => Some("n[0-1]".into()),
        "SLURM_JOB_CPUS_PER_NODE" => Some("4(x2)".into()),
        _ => extra
            .iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.to_string()),
    })
    .unwrap()
}
