//! Building the NVML stand-in from a test, shared by every crate's GPU tests (included
//! with `#[path]`): runs tests/nvml/build.sh into `out` and returns the library's path.

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
