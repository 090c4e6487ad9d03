//! Stand-in Slurm commands for tests: shell scripts greenup runs in place of sacct,
//! squeue and the like.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Write an executable shell script `dir/name` that runs `body`, and return its path.
///
/// A child process writes it: a file this process held open for writing would be
/// inherited, still open, by a child that another test thread forks at that moment, and
/// running the script before that child execs fails with "Text file busy" (ETXTBSY).
pub fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    let status = Command::new("/bin/sh")
        .arg("-c")
        .arg(r#"printf '#!/bin/sh\n%s\n' "$1" > "$2" && chmod 755 "$2""#)
        .arg("sh")
        .arg(body)
        .arg(&path)
        .status();
    assert!(
        status.as_ref().is_ok_and(|s| s.success()),
        "writing {}: {status:?}",
        path.display()
    );
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_runs_its_body_with_its_arguments() {
        let t = tempfile::tempdir().unwrap();
        let p = script(t.path(), "sacct", r#"echo "50% of $1""#);
        let out = Command::new(&p).arg("x").output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "50% of x\n");
    }
}
