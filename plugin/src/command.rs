//! Slurm's own commands (scontrol), run with a time bound so that a slow or absent
//! slurmctld never holds a job's start or end for long. No threads: the child is polled.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Run `program args`, waiting at most `limit` (the child is killed after that).
/// `Some(stdout)` when it exited 0 in time; `None` otherwise.
pub fn run(program: &str, args: &[&str], limit: Duration) -> Option<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if started.elapsed() >= limit => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
    let mut text = String::new();
    child.stdout.take()?.read_to_string(&mut text).ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_of_a_command_that_succeeds_in_time() {
        assert_eq!(
            run(
                "sh",
                &["-c", "echo JobState=RUNNING"],
                Duration::from_secs(5)
            )
            .as_deref(),
            Some("JobState=RUNNING\n")
        );
    }

    #[test]
    fn failure_absence_and_overrun_give_nothing() {
        assert_eq!(run("sh", &["-c", "exit 1"], Duration::from_secs(5)), None);
        assert_eq!(
            run("/nonexistent/scontrol", &[], Duration::from_secs(5)),
            None
        );
        let t = Instant::now();
        assert_eq!(run("sleep", &["5"], Duration::from_millis(50)), None);
        // Killed, not waited out (a generous margin: no timing is asserted tightly).
        assert!(t.elapsed() < Duration::from_secs(4));
    }
}
