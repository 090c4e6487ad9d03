//! The in-job guard (docs/runtime.md): it watches this rank's rate of synchronising calls
//! against the measured baseline's and, when the run is on course to break the policy's
//! `max_slowdown` and this rank leads, raises its core to f_max until the end.
//!
//! It runs inside the hooks, on the thread that makes the call: no thread of its own. The
//! hook has already read the clock for its own measurement, so between judgements the
//! cost is one relaxed load and a compare per synchronising call.

use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use greenup_comm::guard::WINDOW_S;
use greenup_comm::{Guard, GuardOff, GuardRecord, Seconds};

use crate::cpufreq::Controls;
use crate::rank::STATS;

/// What the guard was given at MPI_Init: its settings when it watches, else why not.
enum State {
    Armed(Guard),
    Off(GuardOff),
}

static STATE: OnceLock<State> = OnceLock::new();
/// The monotonic time from which the open window may be judged; `u64::MAX` when the
/// guard does not judge (off, acted, or finished).
static NEXT_NS: AtomicU64 = AtomicU64::new(u64::MAX);
/// When the guard raised the clock (monotonic ns), 0 until it does.
static ACTED_NS: AtomicU64 = AtomicU64::new(0);
/// When it put the clock back, 0 until it does.
static RESTORED_NS: AtomicU64 = AtomicU64::new(0);
static FROM_KHZ: AtomicU64 = AtomicU64::new(0);
static TO_KHZ: AtomicU64 = AtomicU64::new(0);

/// The open window: where its counts started.
struct Window {
    start_ns: u64,
    sync_calls: u64,
    mpi_ns: u64,
}

static WINDOW: Mutex<Window> = Mutex::new(Window {
    start_ns: 0,
    sync_calls: 0,
    mpi_ns: 0,
});
static START_NS: AtomicU64 = AtomicU64::new(0);

fn window_ns() -> u64 {
    (WINDOW_S * 1e9) as u64
}

/// Read `GREENUP_GUARD` (`text`; `None`: unset) at MPI_Init on rank `rank`, at `now_ns`,
/// with the rank's `controls`. Whether the guard watches. A value that does not parse
/// is said once, by rank 0, and counted as an error.
pub fn start(text: Option<&str>, rank: u32, now_ns: u64, controls: &Controls) -> bool {
    let Some(text) = text else { return false };
    let state = match serde_json::from_str::<Guard>(text)
        .map_err(|e| e.to_string())
        .and_then(|g| g.invalid().map_or(Ok(g), Err))
    {
        Err(e) => {
            STATS.errors.fetch_add(1, Relaxed);
            if rank == 0 {
                eprintln!(
                    "greenup-mpi: {}: {e}; the in-job guard is off",
                    greenup_comm::env::GUARD
                );
            }
            State::Off(GuardOff::Invalid)
        }
        Ok(g) if !g.can_raise() => State::Off(GuardOff::AtFmax),
        Ok(_) if controls.is_empty() => State::Off(GuardOff::NoControl),
        Ok(g) => State::Armed(g),
    };
    let armed = matches!(state, State::Armed(_));
    if STATE.set(state).is_err() {
        return false;
    }
    if armed {
        START_NS.store(now_ns, Relaxed);
        let mut w = WINDOW.lock().unwrap_or_else(|e| e.into_inner());
        *w = Window {
            start_ns: now_ns,
            sync_calls: 0,
            mpi_ns: 0,
        };
        NEXT_NS.store(now_ns.saturating_add(window_ns()), Relaxed);
    }
    armed
}

/// A synchronising call begins at `now_ns`, the rank's `sync_calls`-th: judge the window
/// if it is due. Cheap when it is not.
#[inline]
pub fn on_sync(now_ns: u64, sync_calls: u64, controls: &Controls) {
    if now_ns >= NEXT_NS.load(Relaxed) {
        judge(now_ns, sync_calls, controls);
    }
}

#[cold]
fn judge(now_ns: u64, sync_calls: u64, controls: &Controls) {
    let Some(State::Armed(g)) = STATE.get() else {
        return;
    };
    // Another thread judging this window already: it has the same numbers.
    let Ok(mut w) = WINDOW.try_lock() else { return };
    if now_ns < NEXT_NS.load(Relaxed) {
        return;
    }
    let mpi_ns = STATS.mpi_ns.load(Relaxed);
    let secs = |ns: u64| ns as f64 / 1e9;
    let window_s = secs(now_ns.saturating_sub(w.start_ns));
    let window = (sync_calls.saturating_sub(w.sync_calls), window_s);
    let total = (
        sync_calls,
        secs(now_ns.saturating_sub(START_NS.load(Relaxed))),
    );
    let mpi_s = secs(mpi_ns.saturating_sub(w.mpi_ns));
    *w = Window {
        start_ns: now_ns,
        sync_calls,
        mpi_ns,
    };
    NEXT_NS.store(now_ns.saturating_add(window_ns()), Relaxed);
    if !(g.on_course_to_break(total, window) && greenup_comm::leads(window_s, mpi_s)) {
        return;
    }
    if let Some(from) = controls.raise(g.fmax_khz) {
        FROM_KHZ.store(from, Relaxed);
        TO_KHZ.store(g.fmax_khz, Relaxed);
        ACTED_NS.store(now_ns, Relaxed);
        // Raised until the end: the time already lost is only won back by staying
        // raised, and a clock that went down again would have to be judged again.
        NEXT_NS.store(u64::MAX, Relaxed);
    }
}

/// The guard stops at `now_ns` (MPI_Finalize or exit): no judging from now on, and the
/// raised time ends here. The controls are put back by the caller.
pub fn stop(now_ns: u64) {
    NEXT_NS.store(u64::MAX, Relaxed);
    if ACTED_NS.load(Relaxed) != 0 {
        let _ = RESTORED_NS.compare_exchange(0, now_ns, Relaxed, Relaxed);
    }
}

/// This rank's record at `now_ns` with `sync_calls` synchronising calls made, from
/// MPI_Init at `start_ns`; `None` when the guard was not asked for. Allocates nothing
/// (the signal handler calls it).
pub fn record(now_ns: u64, start_ns: u64, sync_calls: u64) -> Option<GuardRecord> {
    let secs = |ns: u64| ns as f64 / 1e9;
    let (armed, off) = match STATE.get()? {
        State::Armed(_) if sync_calls == 0 => (true, Some(GuardOff::NoSync)),
        State::Armed(_) => (true, None),
        State::Off(o) => (false, Some(*o)),
    };
    let acted = ACTED_NS.load(Relaxed);
    let mut r = GuardRecord {
        armed,
        off,
        acted_s: None,
        from_khz: None,
        to_khz: None,
        raised_s: Seconds(0.0),
    };
    if acted != 0 {
        let end = match RESTORED_NS.load(Relaxed) {
            0 => now_ns,
            t => t,
        };
        r.acted_s = Some(Seconds(secs(acted.saturating_sub(start_ns))));
        r.from_khz = Some(FROM_KHZ.load(Relaxed));
        r.to_khz = Some(TO_KHZ.load(Relaxed));
        r.raised_s = Seconds(secs(end.saturating_sub(acted)));
    }
    Some(r)
}
