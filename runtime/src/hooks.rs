//! The hooks the C shim calls around each intercepted MPI call: when to lower the core,
//! how to wait, and what to count. Each catches any panic, counts it as an error and
//! lets the MPI call go ahead.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use greenup_comm::{self as comm, CommDvfs, WaitMode};

use crate::clock::now_ns;

use crate::cpufreq::Controls;
use crate::guard;
use crate::rank;
use crate::requests;

/// One intercepted call in progress, on the C caller's stack (`struct greenup_call`).
#[repr(C)]
#[derive(Default)]
pub struct Call {
    start_ns: u64,
    low_since_ns: u64,
    backoff_ns: u64,
    /// The lowered policy's index plus one; 0 when the call is not lowered.
    lowered: i32,
    /// Whether the call is measured at all.
    active: u32,
}

/// The shortest and longest sleep of a blocking wait's back-off. The longest bounds the
/// latency a sleep can add once the awaited transfer completes.
const BACKOFF_MIN_NS: u64 = 2_000;
const BACKOFF_MAX_NS: u64 = 100_000;

/// What this process was asked to do, read once from the environment at MPI_Init.
struct Settings {
    /// Communication-phase DVFS, when enabled and valid.
    dvfs: Option<CommDvfs>,
    /// Whether blocking point-to-point waits are split into test + back-off here.
    own_wait: bool,
    /// Whether those waits sleep (`block`) rather than spin (`poll`).
    block: bool,
    timeout_ns: u64,
    controls: Controls,
    /// Whether the in-job guard watches this rank.
    guarded: bool,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();
/// Set once MPI_Init returned and the runtime has something to do; hooks do nothing before.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// One-sided transfers since the last synchronization: they decide whether it is lowered.
static PENDING_BYTES: AtomicU64 = AtomicU64::new(0);
static PENDING_STRIDED: AtomicBool = AtomicBool::new(false);

/// Run `f`, counting a panic as an error instead of unwinding into C.
fn guard(f: impl FnOnce()) {
    if catch_unwind(AssertUnwindSafe(f)).is_err() {
        rank::STATS.errors.fetch_add(1, Relaxed);
    }
}

fn settings() -> Option<&'static Settings> {
    if ACTIVE.load(Relaxed) {
        SETTINGS.get()
    } else {
        None
    }
}

/// Read the settings from the environment. `None`: nothing to do (no directory, no DVFS).
fn read_settings(rank: u32) -> Option<Settings> {
    let dvfs = match std::env::var(comm::env::COMM_DVFS) {
        Err(_) => None,
        Ok(text) => match serde_json::from_str::<CommDvfs>(&text)
            .map_err(|e| e.to_string())
            .and_then(|c| c.invalid().map_or(Ok(c), Err))
        {
            Ok(c) => Some(c),
            Err(e) => {
                rank::STATS.errors.fetch_add(1, Relaxed);
                if rank == 0 {
                    eprintln!(
                        "greenup-mpi: {}: {e}; communication-phase DVFS is off",
                        comm::env::COMM_DVFS
                    );
                }
                None
            }
        },
    };
    let measuring = std::env::var_os(comm::env::DIR).is_some();
    if dvfs.is_none() && !measuring {
        return None;
    }
    let guard_text = std::env::var(comm::env::GUARD).ok();
    let block = dvfs.is_some_and(|d| d.wait == WaitMode::Block);
    let lowering = dvfs.filter(|d| d.enabled);
    // The guard needs the controls even where communication-phase lowering is off.
    let controls = if lowering.is_some() || guard_text.is_some() {
        let root = std::env::var_os(comm::env::SYSFS_ROOT).map_or_else(
            || PathBuf::from(comm::env::DEFAULT_SYSFS_ROOT),
            PathBuf::from,
        );
        Controls::discover(&root, lowering.and_then(|d| d.low_ghz))
    } else {
        Controls::default()
    };
    let guarded = guard::start(guard_text.as_deref(), rank, now_ns(), &controls);
    Some(Settings {
        dvfs: lowering,
        own_wait: lowering.is_some() || block,
        block,
        timeout_ns: dvfs.map_or(u64::MAX, |d| d.timeout_us.saturating_mul(1000)),
        controls,
        guarded,
    })
}

/// After MPI_Init: read the settings and start the clock.
#[unsafe(no_mangle)]
pub extern "C" fn greenup_init(rank: libc::c_int) {
    guard(|| {
        let rank = u32::try_from(rank).unwrap_or(0);
        if SETTINGS.get().is_some() {
            return;
        }
        let Some(s) = read_settings(rank) else {
            return;
        };
        let _ = SETTINGS.set(s);
        rank::start(rank, now_ns(), restore_for_exit, guard::record);
        ACTIVE.store(true, Relaxed);
    });
}

/// Before MPI_Finalize: put back what the guard raised and write this rank's file.
#[unsafe(no_mangle)]
pub extern "C" fn greenup_finalize() {
    guard(|| {
        if ACTIVE.swap(false, Relaxed) {
            let now = now_ns();
            guard::stop(now);
            if let Some(s) = SETTINGS.get() {
                s.controls.restore_raised();
            }
            rank::finish(true, now);
        }
    });
}

/// Whether blocking waits are split into test + back-off by the shim.
#[unsafe(no_mangle)]
pub extern "C" fn greenup_own_wait() -> libc::c_int {
    let mut own = 0;
    guard(|| own = settings().is_some_and(|s| s.own_wait).into());
    own
}

/// A call that moves `bytes` (non-contiguous when `strided` is not 0) begins.
///
/// # Safety
/// `call` points to a `struct greenup_call` the caller owns until `greenup_leave`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn greenup_enter(call: *mut Call, bytes: u64, strided: libc::c_int) {
    // SAFETY: the shim passes its own stack variable.
    let call = unsafe { &mut *call };
    *call = Call::default();
    guard(|| enter(call, bytes, bytes, strided != 0, true));
}

/// A one-sided synchronization begins: the transfers since the last one decide.
///
/// # Safety
/// As [`greenup_enter`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn greenup_enter_sync(call: *mut Call) {
    // SAFETY: the shim passes its own stack variable.
    let call = unsafe { &mut *call };
    *call = Call::default();
    guard(|| {
        let pending = PENDING_BYTES.swap(0, Relaxed);
        let strided = PENDING_STRIDED.swap(false, Relaxed);
        enter(call, 0, pending, strided, true);
    });
}

/// A one-sided transfer of `bytes` is being started: counted now, lowered (if large) at
/// the synchronization that completes it.
#[unsafe(no_mangle)]
pub extern "C" fn greenup_pending(bytes: u64, strided: libc::c_int) {
    guard(|| {
        if settings().is_some() {
            rank::STATS.bytes.fetch_add(bytes, Relaxed);
            PENDING_BYTES.fetch_add(bytes, Relaxed);
            if strided != 0 {
                PENDING_STRIDED.store(true, Relaxed);
            }
        }
    });
}

/// Whether the shim should remember nonblocking requests' bytes: only when the core may
/// be lowered, which is all they decide.
#[unsafe(no_mangle)]
pub extern "C" fn greenup_tracking() -> libc::c_int {
    let mut on = 0;
    guard(|| on = settings().is_some_and(|s| s.dvfs.is_some()).into());
    on
}

/// Whether `MPI_Win_fence` on the windows the shim sees created waits in a nonblocking
/// barrier the shim tests with back-off. The same answer on every rank of a job (it
/// depends on the job's settings only), which the barrier's matching needs.
#[unsafe(no_mangle)]
pub extern "C" fn greenup_fence_blocks() -> libc::c_int {
    let mut on = 0;
    guard(|| on = settings().is_some_and(|s| s.own_wait && s.block).into());
    on
}

/// A call that waits for nothing begins: a nonblocking call that starts a transfer of
/// `bytes`, a test, or a one-sided transfer. Counted now, never lowered (its wait or
/// synchronisation decides), and no progress for the guard.
///
/// # Safety
/// As [`greenup_enter`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn greenup_enter_post(call: *mut Call, bytes: u64, strided: libc::c_int) {
    // SAFETY: the shim passes its own stack variable.
    let call = unsafe { &mut *call };
    *call = Call::default();
    guard(|| enter(call, bytes, 0, strided != 0, false));
}

/// The request `key` (the handle's bits; 0 for none) was posted to move `bytes`.
#[unsafe(no_mangle)]
pub extern "C" fn greenup_track(key: u64, bytes: u64, strided: libc::c_int) {
    guard(|| {
        if settings().is_some_and(|s| s.dvfs.is_some()) {
            requests::track(key, bytes, strided != 0);
        }
    });
}

/// The request `key` completed or was freed: it leaves the table.
#[unsafe(no_mangle)]
pub extern "C" fn greenup_forget(key: u64) {
    guard(|| {
        requests::lookup(key, true);
    });
}

/// A wait (or test) on the `n` requests at `keys` begins. With `any` 0 it completes them
/// all (`Wait`, `Waitall`): their bytes add up, and they leave the table now. Otherwise
/// it may complete only one (`Waitany`, `Waitsome`): the smallest pending transfer
/// decides, and the shim forgets the ones completed. `keys` may be null when `n` is 0.
///
/// # Safety
/// As [`greenup_enter`]; `keys` points to `n` handles' bits.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn greenup_enter_wait(
    call: *mut Call,
    keys: *const u64,
    n: libc::c_int,
    any: libc::c_int,
) {
    // SAFETY: the shim passes its own stack variable.
    let call = unsafe { &mut *call };
    *call = Call::default();
    let keys: &[u64] = match usize::try_from(n) {
        // SAFETY: the shim passes `n` handles' bits it owns until this returns.
        Ok(n) if n > 0 && !keys.is_null() => unsafe { std::slice::from_raw_parts(keys, n) },
        _ => &[],
    };
    guard(|| {
        let (bytes, strided) = requests::pending(keys, any != 0);
        enter(call, 0, bytes, strided, true);
    });
}

/// A call begins; `sync`: it synchronises with other ranks (a blocking transfer, a
/// wait, a collective, a one-sided synchronisation), the progress the guard counts.
fn enter(call: &mut Call, counted: u64, deciding: u64, strided: bool, sync: bool) {
    let Some(s) = settings() else { return };
    call.active = 1;
    call.start_ns = now_ns();
    rank::computing_ends(call.start_ns);
    rank::STATS.calls.fetch_add(1, Relaxed);
    rank::STATS.bytes.fetch_add(counted, Relaxed);
    if sync {
        let n = rank::STATS.sync_calls.fetch_add(1, Relaxed) + 1;
        if s.guarded {
            guard::on_sync(call.start_ns, n, &s.controls);
        }
    }
    if s.dvfs.is_some_and(|d| d.lowers_at_once(deciding, strided)) {
        lower(s, call, call.start_ns);
    }
}

fn lower(s: &Settings, call: &mut Call, now: u64) {
    if let Some(policy) = s.controls.lower() {
        call.lowered = policy as i32 + 1;
        call.low_since_ns = now;
    }
}

/// Between two tests of a blocking wait the shim owns: once the call has lasted the
/// timeout, lower it (if it is not yet) and in `block` mode sleep with a growing back-off.
///
/// # Safety
/// As [`greenup_enter`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn greenup_wait(call: *mut Call) {
    // SAFETY: the shim passes its own stack variable, set by greenup_enter.
    let call = unsafe { &mut *call };
    guard(|| {
        let Some(s) = settings().filter(|_| call.active != 0) else {
            return;
        };
        let now = now_ns();
        let long = now.saturating_sub(call.start_ns) >= s.timeout_ns;
        if long && call.lowered == 0 && s.dvfs.is_some() {
            lower(s, call, now);
        }
        // Sleep only once the call has lasted the timeout, even when a large transfer
        // lowered it at once: until then the MPI needs this thread to progress the
        // transfer (shared-memory and TCP transports move data only when polled), and a
        // sleep would add its length to every transfer that ends sooner.
        if s.block && long {
            call.backoff_ns = (call.backoff_ns * 2).clamp(BACKOFF_MIN_NS, BACKOFF_MAX_NS);
            sleep_ns(call.backoff_ns);
        }
    });
}

/// The call returned: restore the core and count its time.
///
/// # Safety
/// As [`greenup_enter`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn greenup_leave(call: *mut Call) {
    // SAFETY: the shim passes its own stack variable, set by greenup_enter.
    let call = unsafe { &mut *call };
    guard(|| {
        if call.active == 0 {
            return;
        }
        let now = now_ns();
        rank::computing_begins(now);
        rank::STATS
            .mpi_ns
            .fetch_add(now.saturating_sub(call.start_ns), Relaxed);
        if call.lowered > 0 {
            if let Some(s) = SETTINGS.get() {
                s.controls.restore(call.lowered as usize - 1);
            }
            rank::STATS
                .low_ns
                .fetch_add(now.saturating_sub(call.low_since_ns), Relaxed);
            call.lowered = 0;
        }
    });
}

/// At a fatal signal or an exit without MPI_Finalize: put back the controls this rank
/// holds lowered or raised, where that needs no waiting (see `Controls::restore_for_exit`).
pub fn restore_for_exit() {
    guard::stop(now_ns());
    if let Some(s) = SETTINGS.get() {
        s.controls.restore_for_exit();
    }
}

/// Sleep about `ns`: the timer slack is narrowed for the sleep alone (the default 50 µs
/// would stretch every short sleep), then put back as the thread had it.
fn sleep_ns(ns: u64) {
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: ns as libc::c_long,
    };
    // SAFETY: prctl's timer-slack calls take plain integers; nanosleep reads `ts`.
    unsafe {
        let slack = libc::prctl(libc::PR_GET_TIMERSLACK);
        libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong);
        libc::nanosleep(&ts, std::ptr::null_mut());
        if slack > 0 {
            libc::prctl(libc::PR_SET_TIMERSLACK, slack as libc::c_ulong);
        }
    }
}
