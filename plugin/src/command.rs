//! Commands the plugin runs: Slurm's own (scontrol), with a time bound so that a slow or
//! absent slurmctld never holds a job's start or end for long, and the node's energy
//! sampler, left running on its own. No threads: a child is polled.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
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

/// Start `program args` and leave it running, in a session of its own (slurmd kills a
/// prolog's process group when the prolog times out), with no environment, no standard
/// streams and none of the caller's open files (a slurmd pipe held open would stall it).
/// Returns the child's pid.
pub fn start_detached(program: &Path, args: &[&OsStr]) -> std::io::Result<u32> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: between fork and exec this calls only setsid, close_range and fcntl, which
    // are async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Close-on-exec rather than closed: std reports a failed exec through its own
            // close-on-exec pipe, which must stay open until then.
            let all = libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            if all != 0 {
                for fd in 3..1024 {
                    libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
                }
            }
            Ok(())
        });
    }
    // Dropping the handle neither waits nor kills: the prolog ends first and init reaps it.
    cmd.spawn().map(|child| child.id())
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

    #[test]
    fn a_detached_child_has_its_own_session_and_none_of_our_files() {
        let t = tempfile::tempdir().unwrap();
        let out = t.path().join("out");
        // An open file of ours, not close-on-exec, as slurmd's pipes may be. A high number,
        // so the shell's own pipes do not take the same one.
        let ours = std::fs::File::open("/dev/null").unwrap();
        let fd = 200;
        // SAFETY: dup2 gives a new descriptor without FD_CLOEXEC; the test closes it.
        assert_eq!(
            unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&ours), fd) },
            fd
        );
        let script = format!(
            "echo \"$(cut -d' ' -f6 /proc/$$/stat) $$ $(test -e /proc/$$/fd/{fd} && echo open || echo closed) ${{HOME:-unset}}\" > {}.tmp && mv {}.tmp {}",
            out.display(),
            out.display(),
            out.display()
        );
        let pid = start_detached(
            Path::new("/bin/sh"),
            &[OsStr::new("-c"), OsStr::new(&script)],
        )
        .unwrap();
        for _ in 0..500 {
            if out.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let text = std::fs::read_to_string(&out).unwrap();
        // It leads its own session, our descriptor did not follow it, and no variable did.
        assert_eq!(text.trim(), format!("{pid} {pid} closed unset"));
        // SAFETY: closing the descriptor dup2 made above.
        unsafe { libc::close(fd) };
        assert!(start_detached(Path::new("/nonexistent/greenup"), &[]).is_err());
    }
}
