//! The cpufreq controls this process may lower: those of policies whose CPUs all lie in
//! the process's own affinity mask (a policy shared with a CPU outside it would slow
//! someone else's core). The control is `scaling_setspeed` under the userspace governor,
//! else `scaling_max_freq` (`greenup_comm::CONTROL_FILES`). Threads on one core share a
//! lowering: the first saves the exact previous value, the last puts it back.
//!
//! Each control is opened once, at its first lowering, and kept open: every lowering is
//! then a read and a write at offset 0. (Opening with O_TRUNC each time costs over a
//! millisecond on ext4, which flushes a truncated-and-rewritten file at close.)

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use greenup_comm::{CONTROL_FILES, Ghz};

use crate::rank::STATS;

/// The most CPU numbers considered (the kernel's default CPU_SETSIZE).
const MAX_CPUS: usize = 1024;

/// One policy's control.
struct Control {
    path: PathBuf,
    low_khz: u64,
    held: Mutex<Held>,
    /// Set when a write failed: the control is left alone from then on.
    broken: AtomicBool,
}

#[derive(Default)]
struct Held {
    holders: u32,
    /// The control's text as read, newline and all, written back byte for byte.
    previous: String,
    /// The control, open for reading and writing once it has been lowered or raised.
    file: Option<File>,
    /// The control's text before the in-job guard raised it, while it is raised.
    raised: Option<String>,
}

/// The controls by CPU number.
#[derive(Default)]
pub struct Controls {
    by_cpu: Vec<Option<usize>>,
    policies: Vec<Control>,
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The control's whole text (short: cpufreq values are a few digits).
fn read_at_start(file: &File) -> Option<String> {
    let mut buf = [0u8; 64];
    let n = file.read_at(&mut buf, 0).ok()?;
    String::from_utf8(buf[..n].to_vec()).ok()
}

/// Replace the control's text with `value`. sysfs takes each write whole; on a plain file
/// (a stand-in tree) the length is cut to the value, which sysfs ignores.
fn put(file: &File, value: &str) -> bool {
    let ok = file
        .write_at(value.as_bytes(), 0)
        .is_ok_and(|n| n == value.len());
    if ok {
        let _ = file.set_len(value.len() as u64);
    }
    ok
}

/// CPU numbers in a sysfs list ("0 1 2", "0-3,8").
fn cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.split([' ', ',', '\n']).filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b) = (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?);
        if a > b || b >= MAX_CPUS {
            return None;
        }
        cpus.extend(a..=b);
    }
    (!cpus.is_empty()).then_some(cpus)
}

fn affinity() -> Vec<bool> {
    // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) } == 0;
    (0..MAX_CPUS)
        // SAFETY: CPU_ISSET reads the set within its size.
        .map(|c| ok && unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

impl Controls {
    /// The controls under `root` (a sysfs root) this process may lower, each to `low_ghz`
    /// or, unset, to its policy's lowest offered frequency; never below the policy's
    /// `scaling_min_freq`, which greenup does not widen.
    pub fn discover(root: &Path, low_ghz: Option<Ghz>) -> Controls {
        let mask = affinity();
        let mut controls = Controls {
            by_cpu: vec![None; MAX_CPUS],
            policies: Vec::new(),
        };
        let Ok(entries) = std::fs::read_dir(root.join("devices/system/cpu/cpufreq")) else {
            STATS.errors.fetch_add(1, Relaxed);
            return controls;
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            let named_policy = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("policy"));
            let cpus = read(&dir.join("affected_cpus")).and_then(|t| cpu_list(&t));
            let Some(cpus) = cpus.filter(|_| named_policy) else {
                continue;
            };
            if !cpus.iter().all(|&c| mask[c]) {
                continue;
            }
            let userspace = read(&dir.join("scaling_governor")).as_deref() == Some("userspace");
            let path = dir.join(CONTROL_FILES[if userspace { 0 } else { 1 }]);
            let floor = read(&dir.join("scaling_min_freq")).and_then(|t| t.parse::<u64>().ok());
            let lowest = read(&dir.join("scaling_available_frequencies"))
                .and_then(|t| t.split_whitespace().filter_map(|w| w.parse().ok()).min());
            let wanted = low_ghz
                .map(|Ghz(g)| (g * 1e6).round() as u64)
                .or(lowest)
                .or(floor);
            let Some(low_khz) = wanted.map(|w| w.max(floor.unwrap_or(0))) else {
                STATS.errors.fetch_add(1, Relaxed);
                continue;
            };
            let index = controls.policies.len();
            controls.policies.push(Control {
                path,
                low_khz,
                held: Mutex::new(Held::default()),
                broken: AtomicBool::new(false),
            });
            for c in cpus {
                controls.by_cpu[c] = Some(index);
            }
        }
        controls
    }

    /// Lower the control of the core this thread runs on. The policy's index when this
    /// call holds a lowering (to give to [`Controls::restore`]); `None` when the core
    /// has no control of ours, already runs at or below the low frequency, or the write
    /// failed.
    pub fn lower(&self) -> Option<usize> {
        // SAFETY: sched_getcpu takes nothing.
        let cpu = usize::try_from(unsafe { libc::sched_getcpu() }).ok()?;
        let index = (*self.by_cpu.get(cpu)?)?;
        let control = &self.policies[index];
        if control.broken.load(Relaxed) {
            return None;
        }
        let mut held = control.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.holders == 0 {
            if !open(control, &mut held) {
                return None;
            }
            let file = held.file.as_ref()?;
            // Only a number above the low frequency is ours to lower and put back; anything
            // else (another rank's lowering, a write half done, "<unsupported>") is left alone.
            let previous = read_at_start(file)?;
            if !previous
                .trim()
                .parse::<u64>()
                .is_ok_and(|khz| khz > control.low_khz)
            {
                return None;
            }
            if !put(file, &control.low_khz.to_string()) {
                control.broken.store(true, Relaxed);
                STATS.errors.fetch_add(1, Relaxed);
                return None;
            }
            held.previous = previous;
            STATS.transitions.fetch_add(1, Relaxed);
        }
        held.holders += 1;
        Some(index)
    }

    /// A call that lowered policy `index` returned; the last one out restores it exactly.
    pub fn restore(&self, index: usize) {
        let Some(control) = self.policies.get(index) else {
            return;
        };
        let mut held = control.held.lock().unwrap_or_else(|e| e.into_inner());
        held.holders = held.holders.saturating_sub(1);
        if held.holders == 0 && !held.file.as_ref().is_some_and(|f| put(f, &held.previous)) {
            control.broken.store(true, Relaxed);
            STATS.errors.fetch_add(1, Relaxed);
        }
    }
}

/// Open `control` once, for reading and writing. Never create: a missing control is an
/// error, not a file to leave behind. False (the control marked broken) when it cannot.
fn open(control: &Control, held: &mut Held) -> bool {
    if held.file.is_some() {
        return true;
    }
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&control.path)
    {
        Ok(f) => {
            held.file = Some(f);
            true
        }
        Err(_) => {
            control.broken.store(true, Relaxed);
            STATS.errors.fetch_add(1, Relaxed);
            false
        }
    }
}

impl Controls {
    /// Whether this process may write no control at all.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// Raise the control of the core this thread runs on to `khz` (the in-job guard's
    /// f_max) until [`Controls::restore_raised`]. The value it had, in kHz, when this
    /// raised it; `None` when the core has no control of ours, is already raised, already
    /// runs at or above `khz` (another rank on a shared policy raised it: it restores
    /// it), or the write failed. Never lowers anything.
    pub fn raise(&self, khz: u64) -> Option<u64> {
        // SAFETY: sched_getcpu takes nothing.
        let cpu = usize::try_from(unsafe { libc::sched_getcpu() }).ok()?;
        let index = (*self.by_cpu.get(cpu)?)?;
        let control = &self.policies[index];
        if control.broken.load(Relaxed) {
            return None;
        }
        let mut held = control.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.raised.is_some() || !open(control, &mut held) {
            return None;
        }
        let value = khz.to_string();
        if held.holders > 0 {
            // A call on another thread holds the core lowered: its restore writes the
            // raised value, and the guard's restore the value the lowering saved.
            let from = held
                .previous
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|&f| f < khz)?;
            held.raised = Some(std::mem::replace(&mut held.previous, value));
            return Some(from);
        }
        let file = held.file.as_ref()?;
        let previous = read_at_start(file)?;
        let from = previous.trim().parse::<u64>().ok().filter(|&f| f < khz)?;
        if !put(file, &value) {
            control.broken.store(true, Relaxed);
            STATS.errors.fetch_add(1, Relaxed);
            return None;
        }
        held.raised = Some(previous);
        Some(from)
    }

    /// Put back every control the guard raised, exactly as it was (MPI_Finalize).
    pub fn restore_raised(&self) {
        for control in &self.policies {
            let mut held = control.held.lock().unwrap_or_else(|e| e.into_inner());
            let Some(previous) = held.raised.take() else {
                continue;
            };
            if held.holders > 0 {
                held.previous = previous;
            } else if !held.file.as_ref().is_some_and(|f| put(f, &previous)) {
                control.broken.store(true, Relaxed);
                STATS.errors.fetch_add(1, Relaxed);
            }
        }
    }
}

impl Controls {
    /// At a fatal signal, from the handler, or at an exit without MPI_Finalize: write
    /// back each control this rank holds lowered or raised, unless the interrupted thread
    /// is inside its lock (then the epilog restores it). The write is a pwrite of a saved
    /// string to an open file; a raised control goes back to its value before the raise.
    pub fn restore_for_exit(&self) {
        for control in &self.policies {
            if let Ok(mut held) = control.held.try_lock()
                && (held.holders > 0 || held.raised.is_some())
            {
                held.holders = 0;
                let raised = held.raised.take();
                if let Some(f) = &held.file {
                    put(f, raised.as_deref().unwrap_or(&held.previous));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_take_the_kernel_forms_and_refuse_the_rest() {
        assert_eq!(cpu_list("0 1 2"), Some(vec![0, 1, 2]));
        assert_eq!(cpu_list("0-2,8\n"), Some(vec![0, 1, 2, 8]));
        assert_eq!(cpu_list(""), None);
        assert_eq!(cpu_list("3-1"), None);
        assert_eq!(cpu_list("99999"), None);
        assert_eq!(cpu_list("x"), None);
    }
}
