//! This rank's counters and its file for the epilog (`greenup_comm::write_rank`),
//! written at MPI_Finalize, or marked incomplete when the program ends without it: at
//! exit, or at a SIGTERM (Slurm's cancel and time limit) that nothing else handles.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

use greenup_comm::{self as comm, RankStats, Seconds, StepTimes};

/// Counters shared by every thread of the rank.
pub struct Counters {
    /// Intercepted calls.
    pub calls: AtomicU64,
    /// Of those, the synchronising ones (the guard's progress).
    pub sync_calls: AtomicU64,
    /// Bytes those calls moved.
    pub bytes: AtomicU64,
    /// Nanoseconds inside them.
    pub mpi_ns: AtomicU64,
    /// Nanoseconds of them at the lowered frequency.
    pub low_ns: AtomicU64,
    /// Writes of a lowered frequency (each restored).
    pub transitions: AtomicU64,
    /// Failures on greenup's side, each leaving its call unchanged.
    pub errors: AtomicU64,
}

/// The rank's counters.
pub static STATS: Counters = Counters {
    calls: AtomicU64::new(0),
    sync_calls: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    mpi_ns: AtomicU64::new(0),
    low_ns: AtomicU64::new(0),
    transitions: AtomicU64::new(0),
    errors: AtomicU64::new(0),
};

static RANK: AtomicU32 = AtomicU32::new(0);
static START_NS: AtomicU64 = AtomicU64::new(0);
static STARTED: AtomicBool = AtomicBool::new(false);
static WRITTEN: AtomicBool = AtomicBool::new(false);
/// The rank file and its temporary, ready for the signal handler, which may not allocate.
static SIGNAL_PATHS: OnceLock<(CString, CString)> = OnceLock::new();
/// What puts the node's controls back at SIGTERM or at an exit without MPI_Finalize (the
/// hooks' `restore_for_exit`), given at start so that the rank's files need not know the
/// controls.
static RESTORE_AT_TERM: OnceLock<fn()> = OnceLock::new();
/// What the in-job guard did, as of (now, start, synchronising calls) in ns and calls:
/// given at start (the hooks' `guard::record`), so that the rank's files need not know
/// the guard, which itself counts in this module's counters.
static GUARD_RECORD: OnceLock<GuardRecordFn> = OnceLock::new();

/// The in-job guard's record at (now_ns, start_ns, sync_calls), if it was asked for.
pub type GuardRecordFn = fn(u64, u64, u64) -> Option<comm::GuardRecord>;

/// When this rank's computing began: the end of its last MPI call (or MPI_Init), ns; 0
/// while a call is under way.
static COMPUTING_SINCE_NS: AtomicU64 = AtomicU64::new(0);
/// The rank's compute seconds per window of wall time, for the step model. Taken with
/// `try_lock`: a thread that finds another counting skips its interval rather than wait.
static WINDOWS: Mutex<StepTimes> = Mutex::new(StepTimes {
    window_s: Seconds(comm::steps::FIRST_WINDOW_S),
    compute_s: Vec::new(),
});

/// An MPI call begins at `now_ns`: the computing since the last one ended is counted in
/// its windows. With threads, the first to enter counts the stretch and the others find
/// it taken (a rank computes while none of its threads is in MPI, near enough).
pub fn computing_ends(now_ns: u64) {
    let since = COMPUTING_SINCE_NS.swap(0, Relaxed);
    if since == 0 || now_ns <= since {
        return;
    }
    let start = START_NS.load(Relaxed);
    let secs = |ns: u64| ns.saturating_sub(start) as f64 / 1e9;
    if let Ok(mut w) = WINDOWS.try_lock() {
        w.add(secs(since), secs(now_ns));
    }
}

/// An MPI call returned at `now_ns`: computing begins again.
pub fn computing_begins(now_ns: u64) {
    COMPUTING_SINCE_NS.store(now_ns, Relaxed);
}

/// MPI_Init returned as rank `rank` at `now_ns`: start the clock, and make sure an exit
/// without MPI_Finalize still leaves a file; `restore` runs first at SIGTERM.
pub fn start(rank: u32, now_ns: u64, restore: fn(), guard: GuardRecordFn) {
    let _ = RESTORE_AT_TERM.set(restore);
    let _ = GUARD_RECORD.set(guard);
    RANK.store(rank, Relaxed);
    START_NS.store(now_ns, Relaxed);
    COMPUTING_SINCE_NS.store(now_ns, Relaxed);
    if STARTED.swap(true, Relaxed) {
        return;
    }
    // SAFETY: registers a plain extern "C" function that takes nothing.
    unsafe { libc::atexit(at_exit) };
    let Some(dir) = std::env::var_os(comm::env::DIR).map(PathBuf::from) else {
        return;
    };
    let file = comm::rank_file(&dir, rank);
    let tmp = dir.join(format!(".rank-{rank}.json.term.{}", std::process::id()));
    let (Ok(file), Ok(tmp)) = (
        CString::new(file.as_os_str().as_bytes()),
        CString::new(tmp.as_os_str().as_bytes()),
    ) else {
        return;
    };
    let _ = SIGNAL_PATHS.set((tmp, file));
    // Only where the program and its MPI left SIGTERM to its default (death): a handler
    // someone installed is theirs, and they may exit through atexit anyway.
    // SAFETY: sigaction with a null new action only reads the current one; the handler
    // installed is an extern "C" fn(c_int) that only makes async-signal-safe calls.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_DFL
        {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_term as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
        }
    }
}

/// SIGTERM: restore what can be restored without waiting, write the file (incomplete)
/// without allocating, then die of the signal as the default would have.
extern "C" fn on_term(signal: libc::c_int) {
    if let Some(restore) = RESTORE_AT_TERM.get() {
        restore();
    }
    if !WRITTEN.swap(true, Relaxed)
        && let Some((tmp, file)) = SIGNAL_PATHS.get()
    {
        let mut buf = FixedBuf::default();
        if write_json(&mut buf, &snapshot(false, crate::clock::now_ns())).is_ok() {
            // SAFETY: open, write, close and rename are async-signal-safe; the paths are
            // NUL-terminated and the buffer is valid for its length.
            unsafe {
                let fd = libc::open(
                    tmp.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW,
                    0o600,
                );
                if fd >= 0 {
                    let ok =
                        libc::write(fd, buf.bytes.as_ptr().cast(), buf.len) == buf.len as isize;
                    libc::close(fd);
                    if ok {
                        libc::rename(tmp.as_ptr(), file.as_ptr());
                    } else {
                        libc::unlink(tmp.as_ptr());
                    }
                }
            }
        }
    }
    // SAFETY: SA_RESETHAND put the default action back; raise is async-signal-safe.
    unsafe { libc::raise(signal) };
}

/// A fixed buffer that `write!` fills without allocating.
struct FixedBuf {
    bytes: [u8; 1024],
    len: usize,
}

impl Default for FixedBuf {
    fn default() -> FixedBuf {
        FixedBuf {
            bytes: [0; 1024],
            len: 0,
        }
    }
}

impl std::fmt::Write for FixedBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// `stats` as the JSON `greenup_comm::RankStats` reads, written without allocating.
fn write_json(out: &mut impl std::fmt::Write, stats: &RankStats) -> std::fmt::Result {
    write!(
        out,
        r#"{{"rank":{},"wall_s":{:?},"mpi_s":{:?},"bytes":{},"calls":{},"sync_calls":{},"low_s":{:?},"transitions":{},"complete":{},"errors":{}"#,
        stats.rank,
        stats.wall_s.0,
        stats.mpi_s.0,
        stats.bytes,
        stats.calls,
        stats.sync_calls,
        stats.low_s.0,
        stats.transitions,
        stats.complete,
        stats.errors
    )?;
    if let Some(g) = &stats.guard {
        write!(out, r#","guard":{{"armed":{}"#, g.armed)?;
        if let Some(off) = g.off {
            write!(out, r#","off":"{}""#, off.as_str())?;
        }
        if let Some(Seconds(at)) = g.acted_s {
            write!(out, r#","acted_s":{at:?}"#)?;
        }
        if let Some(k) = g.from_khz {
            write!(out, r#","from_khz":{k}"#)?;
        }
        if let Some(k) = g.to_khz {
            write!(out, r#","to_khz":{k}"#)?;
        }
        write!(out, r#","raised_s":{:?}}}"#, g.raised_s.0)?;
    }
    out.write_str("}")
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        // Only when the rank did not finalize: then nothing else puts the guard's raise back.
        if !WRITTEN.load(Relaxed)
            && let Some(restore) = RESTORE_AT_TERM.get()
        {
            restore();
        }
        finish(false, crate::clock::now_ns())
    });
}

/// This rank's measurements at `now_ns`.
pub fn snapshot(complete: bool, now_ns: u64) -> RankStats {
    let secs = |ns: u64| ns as f64 / 1e9;
    let start_ns = START_NS.load(Relaxed);
    let wall_s = secs(now_ns.saturating_sub(start_ns));
    let sync_calls = STATS.sync_calls.load(Relaxed);
    // Threads can be inside MPI at once; a rank's MPI time never exceeds its wall time.
    RankStats {
        rank: RANK.load(Relaxed),
        wall_s: Seconds(wall_s),
        mpi_s: Seconds(secs(STATS.mpi_ns.load(Relaxed)).min(wall_s)),
        bytes: STATS.bytes.load(Relaxed),
        calls: STATS.calls.load(Relaxed),
        sync_calls,
        low_s: Seconds(secs(STATS.low_ns.load(Relaxed)).min(wall_s)),
        transitions: STATS.transitions.load(Relaxed),
        saved_j: None,
        complete,
        errors: STATS.errors.load(Relaxed),
        guard: GUARD_RECORD
            .get()
            .and_then(|record| record(now_ns, start_ns, sync_calls))
            .map(|mut g| {
                g.raised_s = g.raised_s.min(Seconds(wall_s));
                g
            }),
        steps: None,
    }
}

/// Write this rank's file once, if the plugin named a directory.
pub fn finish(complete: bool, now_ns: u64) {
    if !STARTED.load(Relaxed) || WRITTEN.swap(true, Relaxed) {
        return;
    }
    let Some(dir) = std::env::var_os(comm::env::DIR).map(PathBuf::from) else {
        return;
    };
    // The windows only here, not in `snapshot`: the signal handler may neither lock nor
    // allocate, and a run cut short teaches no steps.
    computing_ends(now_ns);
    let mut stats = snapshot(complete, now_ns);
    if complete && let Ok(w) = WINDOWS.try_lock() {
        stats.steps = (!w.compute_s.is_empty()).then(|| w.clone());
    }
    if let Err(e) = comm::write_rank(&dir, &stats) {
        eprintln!(
            "greenup-mpi: rank {}: {}: {e}",
            RANK.load(Relaxed),
            dir.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;

    #[test]
    fn the_signal_handlers_json_is_what_the_epilog_reads() {
        let acted = greenup_comm::GuardRecord {
            armed: true,
            off: None,
            acted_s: Some(Seconds(3.5)),
            from_khz: Some(2_000_000),
            to_khz: Some(3_000_000),
            raised_s: Seconds(8.25),
        };
        let never = greenup_comm::GuardRecord {
            armed: true,
            off: Some(greenup_comm::GuardOff::NoSync),
            acted_s: None,
            from_khz: None,
            to_khz: None,
            raised_s: Seconds(0.0),
        };
        let cases = [
            (12.5, 3.25, None),
            (1e-7, 0.0, Some(acted)),
            (86400.0, 86399.999999, Some(never)),
        ];
        for (wall_s, mpi_s, guard) in cases {
            let stats = RankStats {
                rank: 4095,
                wall_s: Seconds(wall_s),
                mpi_s: Seconds(mpi_s),
                bytes: u64::MAX,
                calls: 7,
                low_s: Seconds(mpi_s / 3.0),
                transitions: 2,
                saved_j: None,
                complete: false,
                errors: 1,
                sync_calls: 3,
                guard,
                steps: None,
            };
            let mut buf = FixedBuf::default();
            write_json(&mut buf, &stats).unwrap();
            let back: RankStats = serde_json::from_slice(&buf.bytes[..buf.len]).unwrap();
            assert_eq!(back, stats);
        }
    }

    #[test]
    fn a_full_buffer_is_an_error_not_an_overrun() {
        let mut buf = FixedBuf::default();
        assert!(write!(buf, "{}", "x".repeat(1025)).is_err());
        assert!(buf.len <= 1024);
    }
}
