//! This rank's counters and its file for the epilog (`greenup::comm::write_rank`),
//! written at MPI_Finalize, or at exit (marked incomplete) when the program ends
//! without it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

use greenup::comm::{self, RankStats};

/// Counters shared by every thread of the rank.
pub struct Counters {
    pub calls: AtomicU64,
    pub bytes: AtomicU64,
    pub mpi_ns: AtomicU64,
    pub low_ns: AtomicU64,
    pub transitions: AtomicU64,
    pub errors: AtomicU64,
}

/// The rank's counters.
pub static STATS: Counters = Counters {
    calls: AtomicU64::new(0),
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

/// MPI_Init returned as rank `rank` at `now_ns`: start the clock, and make sure an exit
/// without MPI_Finalize still leaves a file.
pub fn start(rank: u32, now_ns: u64) {
    RANK.store(rank, Relaxed);
    START_NS.store(now_ns, Relaxed);
    if !STARTED.swap(true, Relaxed) {
        // SAFETY: registers a plain extern "C" function that takes nothing.
        unsafe { libc::atexit(at_exit) };
    }
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| finish(false, crate::hooks::now_ns()));
}

/// This rank's measurements at `now_ns`.
pub fn snapshot(complete: bool, now_ns: u64) -> RankStats {
    let secs = |ns: u64| ns as f64 / 1e9;
    let wall_s = secs(now_ns.saturating_sub(START_NS.load(Relaxed)));
    // Threads can be inside MPI at once; a rank's MPI time never exceeds its wall time.
    RankStats {
        rank: RANK.load(Relaxed),
        wall_s,
        mpi_s: secs(STATS.mpi_ns.load(Relaxed)).min(wall_s),
        bytes: STATS.bytes.load(Relaxed),
        calls: STATS.calls.load(Relaxed),
        low_s: secs(STATS.low_ns.load(Relaxed)).min(wall_s),
        transitions: STATS.transitions.load(Relaxed),
        saved_j: None,
        complete,
        errors: STATS.errors.load(Relaxed),
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
    if let Err(e) = comm::write_rank(&dir, &snapshot(complete, now_ns)) {
        eprintln!(
            "greenup-mpi: rank {}: {}: {e}",
            RANK.load(Relaxed),
            dir.display()
        );
    }
}
