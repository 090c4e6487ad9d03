//! Building the NVML stand-in from a test, shared by every crate's GPU tests (included
//! with `#[path]`): runs tests/nvml/build.sh into `out` and returns the library's path,
//! and writes four stand-in GPUs' state.

use std::path::{Path, PathBuf};

/// Build the stand-in with `script` (tests/nvml/build.sh, as the caller's crate finds it)
/// into the directory `out`; the library's path, or a panic with the script's stderr.
pub fn build(script: &Path, out: &Path) -> PathBuf {
    let built = std::process::Command::new("sh")
        .arg(script)
        .arg(out)
        .output()
        .expect("run tests/nvml/build.sh");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    PathBuf::from(String::from_utf8(built.stdout).unwrap().trim())
}

/// Write one of the stand-in's state files.
#[allow(dead_code)]
pub fn put(dir: &Path, file: &str, v: &str) {
    std::fs::write(dir.join(file), format!("{v}\n")).unwrap();
}

/// Four fully busy stand-in GPUs under `dir`, named `GPU-{tag}-N`: 70 W + 630 W at the top
/// clock (1980 MHz, else 1200), limits 200-700 W, each at its 700 W default, on the
/// stand-in's own clock (`now_ns`).
#[allow(dead_code)]
pub fn gpus(dir: &Path, tag: &str) {
    std::fs::create_dir_all(dir).unwrap();
    put(dir, "count", "4");
    put(dir, "now_ns", "1000000000000");
    for i in 0..4 {
        let g = dir.join(i.to_string());
        std::fs::create_dir_all(&g).unwrap();
        for (f, v) in [
            ("minor", i.to_string()),
            ("uuid", format!("GPU-{tag}-{i}")),
            ("name", "Stand-in".into()),
            ("sm_clocks", "1980 1200".into()),
            ("mem_clock", "2619".into()),
            ("idle_mw", "70000".into()),
            ("dyn_mw", "630000".into()),
            ("util", "100".into()),
            ("limit_mw", "700000".into()),
            ("limit_min_mw", "200000".into()),
            ("limit_max_mw", "700000".into()),
            ("limit_default_mw", "700000".into()),
            ("locked", String::new()),
            ("energy_mj", "0".into()),
            ("stamp_ns", "1000000000000".into()),
        ] {
            put(&g, f, &v);
        }
    }
}
