//! The node's energy sampler, started by the prolog and left running on its own. Slurm's
//! own commands (scontrol) run through `greenup_host::command`, under a time bound.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

/// Start `program args` after `delay`, but only if `only_if` still exists then, and
/// leave it running: in a session of its own (slurmd kills a prolog's process group when
/// the prolog times out), with no environment, no standard streams and none of the
/// caller's open files (a slurmd pipe held open would stall it). The caller waits only
/// for a fork, never for the delay or the exec; a job shorter than the delay never
/// starts the program at all. Fails if `program` is not executable.
pub fn start_later(
    program: &Path,
    args: &[&OsStr],
    delay: Duration,
    only_if: &Path,
) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |s: &OsStr| CString::new(s.as_bytes()).map_err(std::io::Error::other);
    // Everything the children need is made before fork: after it, only async-signal-safe
    // calls, and no allocation.
    let prog = c(program.as_os_str())?;
    let argv_owned: Vec<CString> = std::iter::once(Ok(prog.clone()))
        .chain(args.iter().map(|a| c(a)))
        .collect::<std::io::Result<_>>()?;
    let argv: Vec<*const libc::c_char> = argv_owned
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: [*const libc::c_char; 1] = [std::ptr::null()];
    let cond = c(only_if.as_os_str())?;
    let pause = libc::timespec {
        tv_sec: delay.as_secs() as libc::time_t,
        tv_nsec: delay.subsec_nanos() as libc::c_long,
    };
    // SAFETY: access on a valid C string.
    if unsafe { libc::access(prog.as_ptr(), libc::X_OK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the children call only async-signal-safe functions (setsid, fork, open,
    // dup2, close, syscall, fcntl, chdir, sigprocmask, signal, nanosleep, access, execve,
    // _exit) on memory prepared above, and never return into Rust code.
    unsafe {
        match libc::fork() {
            -1 => Err(std::io::Error::last_os_error()),
            0 => {
                libc::setsid();
                if libc::fork() == 0 {
                    detach_streams();
                    libc::nanosleep(&pause, std::ptr::null_mut());
                    if libc::access(cond.as_ptr(), libc::F_OK) == 0 {
                        libc::execve(prog.as_ptr(), argv.as_ptr(), envp.as_ptr());
                    }
                }
                libc::_exit(0)
            }
            pid => {
                // The first child exits at once; reap it so that no zombie is left.
                let mut status = 0;
                while libc::waitpid(pid, &mut status, 0) < 0
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                {
                }
                Ok(())
            }
        }
    }
}

/// In a forked child: standard streams on /dev/null, every other file closed at exec, the
/// root as working directory, and the signal mask and handlers the program expects.
///
/// # Safety
/// Only between fork and exec; calls async-signal-safe functions only.
unsafe fn detach_streams() {
    // Each call below is async-signal-safe, as the caller's state between fork and exec
    // demands, and is given only constants or memory this function owns.
    // SAFETY: open on a C string literal.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
    if null >= 0 {
        for fd in 0..3 {
            // SAFETY: dup2 of a descriptor this function just opened onto 0, 1 or 2.
            unsafe { libc::dup2(null, fd) };
        }
        if null > 2 {
            // SAFETY: close of the descriptor this function opened, now duplicated.
            unsafe { libc::close(null) };
        }
    }
    // SAFETY: close_range takes plain integers; it only marks descriptors close-on-exec.
    let all = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if all != 0 {
        for fd in 3..1024 {
            // SAFETY: fcntl on an integer descriptor; a closed one only fails with EBADF.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
    // SAFETY: chdir on a C string literal.
    unsafe { libc::chdir(c"/".as_ptr()) };
    // SAFETY: an all-zero sigset_t is a valid value for sigemptyset to fill in.
    let mut none: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: sigemptyset writes the local set it is given.
    unsafe { libc::sigemptyset(&mut none) };
    // SAFETY: sigprocmask reads the local, initialized set; no old set is asked for.
    unsafe { libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) };
    for sig in [
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGPIPE,
        libc::SIGCHLD,
    ] {
        // SAFETY: restoring the default disposition installs no Rust handler.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wait up to 5 s for `file`; its contents if it came.
    fn wait_for(file: &Path) -> Option<String> {
        for _ in 0..500 {
            if let Ok(t) = std::fs::read_to_string(file) {
                return Some(t);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    #[test]
    fn a_later_start_has_its_own_session_and_none_of_our_files() {
        let t = tempfile::tempdir().unwrap();
        let out = t.path().join("out");
        let cond = t.path().join("job-record");
        std::fs::write(&cond, "").unwrap();
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
            "echo \"$(cut -d' ' -f6 /proc/$$/stat) $$ $(test -e /proc/$$/fd/{fd} && echo open || echo closed) ${{HOME:-unset}} $(pwd)\" > {o}.tmp && mv {o}.tmp {o}",
            o = out.display(),
        );
        start_later(
            Path::new("/bin/sh"),
            &[OsStr::new("-c"), OsStr::new(&script)],
            Duration::from_millis(10),
            &cond,
        )
        .unwrap();
        // SAFETY: closing the descriptor dup2 made above.
        unsafe { libc::close(fd) };
        let text = wait_for(&out).expect("the program did not run");
        let words: Vec<&str> = text.split_whitespace().collect();
        // It is in a session of its own (its parent's, which left it), our descriptor did
        // not follow it, no variable did, and it runs in /.
        // SAFETY: getsid(0) only reads this process's session id.
        let ours = unsafe { libc::getsid(0) };
        assert_ne!(words[0], ours.to_string(), "{text}");
        assert_ne!(words[1], std::process::id().to_string());
        assert_eq!(&words[2..], ["closed", "unset", "/"], "{text}");
    }

    #[test]
    fn a_later_start_runs_nothing_once_its_condition_is_gone() {
        let t = tempfile::tempdir().unwrap();
        let (out, cond) = (t.path().join("out"), t.path().join("job-record"));
        std::fs::write(&cond, "").unwrap();
        // `sh -c 'echo ran > OUT'`, started after `delay` if `cond` is still there.
        let touch_later = |o: &Path, delay: u64| {
            let script = format!("echo ran > {}", o.display());
            start_later(
                Path::new("/bin/sh"),
                &[OsStr::new("-c"), OsStr::new(&script)],
                Duration::from_millis(delay),
                &cond,
            )
            .unwrap()
        };
        touch_later(&out, 300);
        // The job ends before the delay: its record goes, and the program never runs.
        std::fs::remove_file(&cond).unwrap();
        std::thread::sleep(Duration::from_millis(800));
        assert!(!out.exists());
        // The control: the same start with the condition kept does run.
        let kept = t.path().join("kept");
        std::fs::write(&cond, "").unwrap();
        touch_later(&kept, 10);
        assert_eq!(wait_for(&kept).as_deref(), Some("ran\n"));
        let e = start_later(
            Path::new("/nonexistent/greenup"),
            &[],
            Duration::ZERO,
            &cond,
        );
        assert_eq!(e.unwrap_err().kind(), std::io::ErrorKind::NotFound);
    }
}
