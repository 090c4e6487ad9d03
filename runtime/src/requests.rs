//! The bytes each pending nonblocking request will move, from the call that started it
//! (`MPI_Isend`, `MPI_Irecv`, `MPI_Rput`, ...) to the wait or test that completes it, so
//! that a wait on a large transfer is lowered at once rather than after the timeout.
//!
//! The table is bounded and never allocates: 256 sets of 8 slots, a request's handle
//! picks its set, and a set that is full forgets its oldest entry. A request the table
//! forgot (or never saw: a persistent request, one started through PMPI by a library)
//! only loses the early lowering; the timeout still applies. A handle is reused by the
//! MPI once its request is freed, so posting a request replaces whatever the table held
//! under that handle, and completing or freeing one removes it.

use std::sync::Mutex;

const SETS: usize = 256;
const WAYS: usize = 8;

#[derive(Clone, Copy)]
struct Slot {
    /// The request's handle as the shim reads it; 0 is an empty slot.
    key: u64,
    bytes: u64,
    strided: bool,
    /// When it was posted, in the set's own count: the smallest goes first.
    age: u64,
}

struct Set {
    slots: [Slot; WAYS],
    posted: u64,
}

const EMPTY: Slot = Slot {
    key: 0,
    bytes: 0,
    strided: false,
    age: 0,
};

static TABLE: [Mutex<Set>; SETS] = [const {
    Mutex::new(Set {
        slots: [EMPTY; WAYS],
        posted: 0,
    })
}; SETS];

/// The set a handle belongs to. Handles are often addresses a few hundred bytes apart,
/// so the bits are mixed (Fibonacci hashing) before the top ones are taken.
fn set_of(key: u64) -> std::sync::MutexGuard<'static, Set> {
    let index = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % SETS;
    TABLE[index].lock().unwrap_or_else(|e| e.into_inner())
}

/// A request `key` was posted to move `bytes`.
pub fn track(key: u64, bytes: u64, strided: bool) {
    if key == 0 {
        return;
    }
    let mut set = set_of(key);
    set.posted += 1;
    let age = set.posted;
    let slot = set
        .slots
        .iter()
        .position(|s| s.key == key)
        .or_else(|| set.slots.iter().position(|s| s.key == 0))
        .unwrap_or_else(|| {
            (0..WAYS)
                .min_by_key(|&i| set.slots[i].age)
                .unwrap_or_default()
        });
    set.slots[slot] = Slot {
        key,
        bytes,
        strided,
        age,
    };
}

/// What request `key` is moving, and whether it is strided; `remove` also forgets it.
pub fn lookup(key: u64, remove: bool) -> Option<(u64, bool)> {
    if key == 0 {
        return None;
    }
    let mut set = set_of(key);
    let slot = set.slots.iter_mut().find(|s| s.key == key)?;
    let found = (slot.bytes, slot.strided);
    if remove {
        *slot = EMPTY;
    }
    Some(found)
}

/// The bytes a wait on `keys` waits for, and whether any is strided: their sum, and they
/// leave the table (the wait completes them all); or with `any`, the smallest among the
/// requests that are not null (one the table does not know counts as 0), which stay.
pub fn pending(keys: &[u64], any: bool) -> (u64, bool) {
    let mut strided = false;
    let mut sum = 0u64;
    let mut min: Option<u64> = None;
    for &key in keys.iter().filter(|&&k| k != 0) {
        let (bytes, s) = lookup(key, !any).unwrap_or((0, false));
        strided |= s;
        sum = sum.saturating_add(bytes);
        min = Some(min.map_or(bytes, |m| m.min(bytes)));
    }
    (if any { min.unwrap_or(0) } else { sum }, strided)
}

/// How many requests the table holds (tests).
#[cfg(test)]
fn len() -> usize {
    TABLE
        .iter()
        .map(|m| {
            let set = m.lock().unwrap();
            set.slots.iter().filter(|s| s.key != 0).count()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test: the table is process-wide, and tests run in parallel.
    #[test]
    fn requests_are_remembered_replaced_forgotten_and_bounded() {
        track(0, 5, false);
        assert_eq!(lookup(0, false), None);
        track(0x1000, 1 << 20, false);
        track(0x1000, 64, true);
        assert_eq!(lookup(0x1000, false), Some((64, true)), "a reused handle");
        assert_eq!(lookup(0x1000, true), Some((64, true)));
        assert_eq!(lookup(0x1000, true), None, "completed requests leave");
        assert_eq!(len(), 0);

        // Far more requests than slots, as addresses 64 bytes apart: the table keeps at
        // most its size, and the newest are the ones it keeps in every set.
        let n = 100_000u64;
        for i in 1..=n {
            track(0x7f00_0000_0000 + 64 * i, i, false);
        }
        assert_eq!(len(), SETS * WAYS, "bounded, and every slot in use");
        let newest = (n - 100..=n)
            .filter(|&i| lookup(0x7f00_0000_0000 + 64 * i, false) == Some((i, false)))
            .count();
        assert_eq!(newest, 101, "the newest requests are all there");
        for i in 1..=n {
            lookup(0x7f00_0000_0000 + 64 * i, true);
        }
        assert_eq!(len(), 0);

        // What a wait waits for: Wait/Waitall the sum (and the requests leave), Waitany/
        // Waitsome the smallest pending transfer (and they stay); null handles (0) are
        // not requests, unknown ones count as 0.
        track(0x10, 20_000, false);
        track(0x20, 70_000, true);
        assert_eq!(pending(&[0x10, 0, 0x20], true), (20_000, true));
        assert_eq!(
            pending(&[0x10, 0x30], true),
            (0, false),
            "an unknown request"
        );
        assert_eq!(pending(&[0, 0], true), (0, false));
        assert_eq!(pending(&[0x10, 0, 0x20], false), (90_000, true));
        assert_eq!(
            pending(&[0x10, 0x20], false),
            (0, false),
            "taken by the wait"
        );
        assert_eq!(len(), 0);
    }
}
