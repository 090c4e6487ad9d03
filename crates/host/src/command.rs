//! The one way greenup runs a Slurm command (squeue, scontrol, sacct): with a time
//! bound, after which the command and everything it started are killed. A hung
//! slurmctld or slurmdbd then costs a job's prolog, an epilog, greenupd's reclaim or a
//! report at most that bound.
//!
//! No threads and no async runtime: the SPANK plugin calls this inside slurmd and
//! slurmstepd, where a thread must never be started. The child's output pipes are read
//! as they fill (with poll), so a long answer cannot stall the command on a full pipe.
//! greenupd calls it from a blocking task.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use greenup_core::text::last_line;

/// The most a command may write (stdout and stderr together) before it is stopped:
/// `squeue -t all` on a cluster with 100,000 jobs writes about 2 MB.
pub const MAX_OUTPUT: usize = 32 << 20;

/// A command that ran to its end within its bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// How it exited.
    pub status: ExitStatus,
    /// What it wrote to stdout (invalid UTF-8 replaced).
    pub stdout: String,
    /// What it wrote to stderr.
    pub stderr: String,
}

/// Why a Slurm command gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The program is not installed (or not on PATH).
    #[error("{program} is not installed (not found on PATH)")]
    NotFound {
        /// The program as named.
        program: String,
    },
    /// It could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program as named.
        program: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// It gave no answer within its bound, and was killed.
    #[error("{program} gave no answer within {:.1} s and was stopped", limit.as_secs_f64())]
    TimedOut {
        /// The program as named.
        program: String,
        /// The bound it ran under.
        limit: Duration,
    },
    /// It wrote more than [`MAX_OUTPUT`] bytes, and was killed.
    #[error("{program} wrote more than {MAX_OUTPUT} bytes and was stopped")]
    TooMuchOutput {
        /// The program as named.
        program: String,
    },
    /// It exited unsuccessfully.
    #[error("{program} failed ({status}): {detail}")]
    Failed {
        /// The program as named.
        program: String,
        /// Its exit status.
        status: ExitStatus,
        /// The last line it wrote to stderr.
        detail: String,
    },
    /// Reading its output or its status failed.
    #[error("waiting for {program}: {source}")]
    Wait {
        /// The program as named.
        program: String,
        /// What the system said.
        source: std::io::Error,
    },
}

impl Finished {
    /// Its stdout when it exited 0; otherwise a [`CommandError::Failed`] naming `cmd`.
    pub fn stdout_if_ok(self, program: &str) -> Result<String, CommandError> {
        if self.status.success() {
            Ok(self.stdout)
        } else {
            Err(CommandError::Failed {
                program: program.to_string(),
                status: self.status,
                detail: last_line(&self.stderr),
            })
        }
    }
}

/// The Slurm command `program` (`squeue`, `scontrol`, `sacct`), from `bin_dir` when a
/// site keeps Slurm off the caller's PATH, else found on the PATH.
pub fn slurm(bin_dir: Option<&std::path::Path>, program: &str) -> Command {
    match bin_dir {
        Some(d) => Command::new(d.join(program)),
        None => Command::new(program),
    }
}

/// Run `cmd` (stdin from /dev/null, stdout and stderr captured) for at most `limit`.
/// The command gets a process group of its own; past the bound the whole group is
/// killed (SIGKILL) and reaped, so a wrapper script's children go too.
pub fn run(cmd: &mut Command, limit: Duration) -> Result<Finished, CommandError> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => CommandError::NotFound {
                program: program.clone(),
            },
            _ => CommandError::Spawn {
                program: program.clone(),
                source,
            },
        })?;
    let deadline = Instant::now() + limit;
    let wait_err = |source| CommandError::Wait {
        program: program.clone(),
        source,
    };
    match collect(&mut child, deadline) {
        Ok(Some((status, stdout, stderr))) => Ok(Finished {
            status,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }),
        Ok(None) => {
            stop(&mut child);
            Err(CommandError::TimedOut { program, limit })
        }
        Err(Collect::TooMuch) => {
            stop(&mut child);
            Err(CommandError::TooMuchOutput { program })
        }
        Err(Collect::Io(e)) => {
            stop(&mut child);
            Err(wait_err(e))
        }
    }
}

/// Run `cmd` under `limit` and return its stdout if it exited 0.
pub fn stdout_of(cmd: &mut Command, limit: Duration) -> Result<String, CommandError> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    run(cmd, limit)?.stdout_if_ok(&program)
}

enum Collect {
    TooMuch,
    Io(std::io::Error),
}

/// Kill the child's process group and reap the child.
fn stop(child: &mut Child) {
    // The child leads its own group (process_group(0)) and has not been reaped, so the
    // group id is still the child's and cannot name anyone else's processes.
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: killpg only sends a signal.
        unsafe { libc::killpg(pid, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Read the child's output until both pipes close and it has exited, or `deadline`
/// passes (`Ok(None)`; the child is left running for the caller to stop).
#[allow(clippy::type_complexity)]
fn collect(
    child: &mut Child,
    deadline: Instant,
) -> Result<Option<(ExitStatus, Vec<u8>, Vec<u8>)>, Collect> {
    let mut pipes: Vec<(Box<dyn ReadFd>, Vec<u8>, bool)> = Vec::with_capacity(2);
    if let Some(o) = child.stdout.take() {
        pipes.push((Box::new(o), Vec::new(), true));
    }
    if let Some(e) = child.stderr.take() {
        pipes.push((Box::new(e), Vec::new(), true));
    }
    for (p, _, _) in &pipes {
        set_nonblocking(p.fd()).map_err(Collect::Io)?;
    }
    let mut nap = Duration::from_millis(1);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        let left = deadline - now;
        let open: Vec<usize> = (0..pipes.len()).filter(|&i| pipes[i].2).collect();
        if open.is_empty() {
            // Both pipes closed: only the exit status is awaited.
            match child.try_wait().map_err(Collect::Io)? {
                Some(status) => {
                    let mut it = pipes.into_iter().map(|(_, buf, _)| buf);
                    let out = it.next().unwrap_or_default();
                    let err = it.next().unwrap_or_default();
                    return Ok(Some((status, out, err)));
                }
                None => {
                    std::thread::sleep(nap.min(left));
                    nap = (nap * 2).min(Duration::from_millis(20));
                    continue;
                }
            }
        }
        let mut fds: Vec<libc::pollfd> = open
            .iter()
            .map(|&i| libc::pollfd {
                fd: pipes[i].0.fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = left.as_millis().clamp(1, 100) as libc::c_int;
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structures.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Collect::Io(e));
        }
        for (k, &i) in open.iter().enumerate() {
            if fds[k].revents == 0 {
                continue;
            }
            let (pipe, buf, open) = &mut pipes[i];
            *open = drain(pipe.as_mut(), buf).map_err(Collect::Io)?;
        }
        if pipes.iter().map(|p| p.1.len()).sum::<usize>() > MAX_OUTPUT {
            return Err(Collect::TooMuch);
        }
    }
}

/// A child's pipe: something to read, with its descriptor.
trait ReadFd: Read {
    fn fd(&self) -> std::os::fd::RawFd;
}

impl<T: Read + AsRawFd> ReadFd for T {
    fn fd(&self) -> std::os::fd::RawFd {
        self.as_raw_fd()
    }
}

/// Read what `pipe` holds now into `buf`; whether it is still open.
fn drain(pipe: &mut dyn ReadFd, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match pipe.read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > MAX_OUTPUT {
                    return Ok(true);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn set_nonblocking(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor this process owns; F_GETFL/F_SETFL change no memory.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    use crate::fixtures::script as fake;

    /// `name` looked up on a PATH that holds `dir` first, as greenup looks Slurm up.
    fn on_path(dir: &Path, name: &str) -> Command {
        let mut c = Command::new(name);
        let path = format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        c.env("PATH", path);
        c
    }

    /// Whether process `pid` still runs (a zombie waiting for its reaper does not).
    fn alive(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(s) => {
                let state = s
                    .rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().next());
                !matches!(state, Some("Z") | Some("X"))
            }
            Err(_) => false,
        }
    }

    fn wait_for_file(p: &Path) -> String {
        for _ in 0..500 {
            if let Ok(t) = std::fs::read_to_string(p)
                && t.ends_with('\n')
            {
                return t;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("{} never written", p.display());
    }

    #[test]
    fn a_hung_squeue_on_path_is_stopped_with_its_children() {
        let t = tempfile::tempdir().unwrap();
        let pids = t.path().join("pids");
        // A squeue that hangs the way a client of an unresponsive slurmctld does, with a
        // child of its own (as a site's wrapper script would have).
        fake(
            t.path(),
            "squeue",
            &format!(
                "sleep 300 & echo \"$$ $!\" > {p}.tmp; mv {p}.tmp {p}; wait",
                p = pids.display()
            ),
        );
        let e = run(
            on_path(t.path(), "squeue").args(["-h", "-o", "%A %T"]),
            Duration::from_secs(2),
        )
        .unwrap_err();
        assert!(
            matches!(&e, CommandError::TimedOut { program, .. } if program == "squeue"),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "squeue gave no answer within 2.0 s and was stopped"
        );
        let text = wait_for_file(&pids);
        let ids: Vec<i32> = text
            .split_whitespace()
            .map(|w| w.parse().unwrap())
            .collect();
        assert_eq!(ids.len(), 2, "{text}");
        // The command was reaped, and its child (same process group) killed.
        for _ in 0..200 {
            if !alive(ids[1]) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!alive(ids[0]), "squeue {} still runs", ids[0]);
        assert!(!alive(ids[1]), "its child {} still runs", ids[1]);
    }

    #[test]
    fn a_hung_scontrol_is_stopped_too() {
        let t = tempfile::tempdir().unwrap();
        let pidfile = t.path().join("pid");
        fake(
            t.path(),
            "scontrol",
            &format!(
                "echo $$ > {p}.tmp; mv {p}.tmp {p}; exec sleep 300",
                p = pidfile.display()
            ),
        );
        let e = stdout_of(
            on_path(t.path(), "scontrol").args(["-o", "show", "job", "7"]),
            Duration::from_secs(2),
        )
        .unwrap_err();
        assert!(matches!(e, CommandError::TimedOut { .. }), "{e}");
        let pid: i32 = wait_for_file(&pidfile).trim().parse().unwrap();
        assert!(!alive(pid), "scontrol {pid} still runs");
    }

    #[test]
    fn answers_failures_and_absence_are_told_apart() {
        let t = tempfile::tempdir().unwrap();
        fake(
            t.path(),
            "scontrol",
            r#"[ "$*" = "-o show job 7" ] && echo "JobId=7 JobState=RUNNING" && exit 0
echo "scontrol: error: Invalid job id specified" >&2; exit 1"#,
        );
        let ok = stdout_of(
            on_path(t.path(), "scontrol").args(["-o", "show", "job", "7"]),
            Duration::from_secs(30),
        )
        .unwrap();
        assert_eq!(ok, "JobId=7 JobState=RUNNING\n");
        let e = stdout_of(
            on_path(t.path(), "scontrol").args(["-o", "show", "job", "8"]),
            Duration::from_secs(30),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "scontrol failed (exit status: 1): scontrol: error: Invalid job id specified"
        );
        let e = run(
            &mut Command::new(t.path().join("no-such-sacct")),
            Duration::from_secs(30),
        )
        .unwrap_err();
        assert!(matches!(e, CommandError::NotFound { .. }), "{e}");
    }

    #[test]
    fn an_answer_larger_than_a_pipe_is_read_whole() {
        // 1 MB: far more than a pipe holds, so the command would block on a full pipe
        // if the output were read only after it exited.
        let out = stdout_of(
            Command::new("sh").args(["-c", "head -c 1000000 /dev/zero | tr '\\0' x"]),
            Duration::from_secs(30),
        )
        .unwrap();
        assert_eq!(out.len(), 1_000_000);
        assert!(out.bytes().all(|b| b == b'x'));
    }

    #[test]
    fn endless_output_is_stopped() {
        let e = run(
            Command::new("sh").args(["-c", "exec cat /dev/zero"]),
            Duration::from_secs(60),
        )
        .unwrap_err();
        assert!(matches!(e, CommandError::TooMuchOutput { .. }), "{e}");
    }
}
