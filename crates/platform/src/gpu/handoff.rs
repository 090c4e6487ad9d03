//! The prolog's GPU work, handed to a process of its own so that the prolog does not wait
//! for the driver: loading NVML and reading and setting a node's GPUs takes 20-40 ms on a
//! real driver (docs/BENCHMARKS.md), most of it NVML's own start, against the 2 ms a
//! prolog may spend on them.
//!
//! The prolog posts what it asks to the job's `NODE.gpu-start.json` and starts a worker
//! (`greenup gpu start-job FILE`). The worker takes the file's lock, does the work and
//! writes what came of it back into the file, in place and under the lock. The epilog
//! settles the file before it measures and restores: it takes the same lock, so it never
//! runs beside the worker, and it removes the file, so a worker that had not started by
//! then finds nothing to do and changes nothing.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// What a handoff file holds: the prolog's ask until a worker has done it, then what came
/// of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum State<T> {
    /// Posted by the prolog, not yet done.
    Asked {
        /// What the prolog asks the worker to do.
        ask: T,
    },
    /// Done by a worker.
    Done(Outcome),
}

/// What a worker's GPU work came to, for the epilog's log and the job's owner.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// A line for the job's owner (the worker has already added it to the job's warnings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// A line for the node's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Milliseconds the worker spent from taking the file to writing this.
    #[serde(default)]
    pub took_ms: f64,
}

/// What the epilog found when it settled a handoff file.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// No handoff file: the prolog did its GPU work itself, or the job had no GPUs.
    Nothing,
    /// A worker did the work; its outcome.
    Done(Outcome),
    /// No worker had taken the file: nothing was read or changed, and none will be.
    NotStarted,
    /// A worker still held the file after the wait: it may still change the GPUs, and
    /// its record then stays for the next job given them to restore.
    Busy,
}

/// Post `ask` to `file`, written whole (temporary file and rename) and root's alone.
pub fn post<T: Serialize>(file: &Path, ask: &T) -> std::io::Result<()> {
    let body = serde_json::to_vec(&State::Asked { ask }).map_err(std::io::Error::other)?;
    greenup_core::fs::write_atomic_volatile(file, &body, 0o600)
}

/// A worker's hold on a handoff file: the file's lock, held until [`Claim::finish`] or
/// until the worker exits.
#[derive(Debug)]
pub struct Claim {
    file: File,
    taken: Instant,
}

/// Take `file` for its work: None when there is nothing to do (no file, the epilog
/// removed it, or a worker already did it). Waits for the lock, which an epilog holds
/// only while it reads the file.
pub fn claim<T: DeserializeOwned>(file: &Path) -> std::io::Result<Option<(Claim, T)>> {
    let Some(mut f) = open_locked(file, None)? else {
        return Ok(None);
    };
    let taken = Instant::now();
    match read_state::<T>(&mut f)? {
        Some(State::Asked { ask }) => Ok(Some((Claim { file: f, taken }, ask))),
        _ => Ok(None),
    }
}

impl Claim {
    /// Write `outcome` over the ask, in place (the epilog reads it under the same lock),
    /// and let the file go.
    pub fn finish(mut self, mut outcome: Outcome) -> std::io::Result<()> {
        outcome.took_ms = self.taken.elapsed().as_secs_f64() * 1e3;
        let body =
            serde_json::to_vec(&State::<()>::Done(outcome)).map_err(std::io::Error::other)?;
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file.write_all(&body)
    }
}

/// Settle `file` at the job's end, waiting up to `wait` for a worker that holds it. The
/// file is gone afterwards unless a worker still holds it ([`Settled::Busy`]).
pub fn settle(file: &Path, wait: Duration) -> std::io::Result<Settled> {
    let Some(mut f) = open_locked(file, Some(wait))? else {
        return Ok(if file.exists() {
            Settled::Busy
        } else {
            Settled::Nothing
        });
    };
    // Removed under the lock: a worker that opens it later, or waits for the lock now,
    // finds it unlinked and does nothing.
    let state = read_state::<serde_json::Value>(&mut f);
    std::fs::remove_file(file)?;
    Ok(match state {
        Ok(Some(State::Done(outcome))) => Settled::Done(outcome),
        _ => Settled::NotStarted,
    })
}

/// Open `file` read-write without following a link and take its lock, waiting up to
/// `wait` (None: as long as it takes). None when the file is missing, was removed by
/// whoever held the lock before, or (with a wait) the lock was not free in time.
fn open_locked(file: &Path, wait: Option<Duration>) -> std::io::Result<Option<File>> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(file)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let deadline = wait.map(|w| Instant::now() + w);
    loop {
        let how = if deadline.is_some() {
            libc::LOCK_EX | libc::LOCK_NB
        } else {
            libc::LOCK_EX
        };
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(f.as_raw_fd(), how) } == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        match (e.raw_os_error(), deadline) {
            (Some(libc::EINTR), _) => continue,
            (Some(libc::EWOULDBLOCK), Some(d)) if Instant::now() < d => {
                std::thread::sleep(Duration::from_millis(2));
            }
            (Some(libc::EWOULDBLOCK), Some(_)) => return Ok(None),
            _ => return Err(e),
        }
    }
    // Whoever held the lock before may have settled it: a removed file asks nothing.
    if f.metadata()?.nlink() == 0 {
        return Ok(None);
    }
    Ok(Some(f))
}

/// The file's state; None when it cannot be read as one.
fn read_state<T: DeserializeOwned>(f: &mut File) -> std::io::Result<Option<State<T>>> {
    let mut text = String::new();
    f.rewind()?;
    f.read_to_string(&mut text)?;
    Ok(serde_json::from_str(&text).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Ask {
        gpus: String,
    }

    fn ask() -> Ask {
        Ask { gpus: "0,2".into() }
    }

    #[test]
    fn a_worker_does_the_ask_once_and_the_epilog_reads_what_came_of_it() {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("n1.gpu-start.json");
        post(&file, &ask()).unwrap();
        let (taken, got) = claim::<Ask>(&file).unwrap().expect("an ask");
        assert_eq!(got, ask());
        let outcome = Outcome {
            warning: Some("w".into()),
            note: Some("n".into()),
            took_ms: 0.0,
        };
        taken.finish(outcome).unwrap();
        // A second worker (a retried start) finds it done.
        assert!(claim::<Ask>(&file).unwrap().is_none());
        match settle(&file, Duration::from_millis(100)).unwrap() {
            Settled::Done(o) => {
                assert_eq!(
                    (o.warning.as_deref(), o.note.as_deref()),
                    (Some("w"), Some("n"))
                );
                assert!(o.took_ms >= 0.0);
            }
            other => panic!("{other:?}"),
        }
        assert!(!file.exists());
        assert_eq!(settle(&file, Duration::ZERO).unwrap(), Settled::Nothing);
    }

    #[test]
    fn an_epilog_before_the_worker_leaves_it_nothing_to_do() {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("n1.gpu-start.json");
        post(&file, &ask()).unwrap();
        // The worker opened the file, then the epilog settled it before the worker's lock.
        let early = std::fs::File::open(&file).unwrap();
        assert_eq!(
            settle(&file, Duration::from_millis(100)).unwrap(),
            Settled::NotStarted
        );
        assert!(claim::<Ask>(&file).unwrap().is_none());
        // The descriptor opened before the removal sees the file unlinked.
        assert_eq!(early.metadata().unwrap().nlink(), 0);
    }

    #[test]
    fn the_epilog_waits_for_a_working_worker_and_then_reads_its_outcome() {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("n1.gpu-start.json");
        post(&file, &ask()).unwrap();
        let (taken, _) = claim::<Ask>(&file).unwrap().unwrap();
        // Held past the wait: busy, and the file stays for the worker.
        assert_eq!(
            settle(&file, Duration::from_millis(30)).unwrap(),
            Settled::Busy
        );
        assert!(file.exists());
        let worker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            taken.finish(Outcome::default()).unwrap();
        });
        // Within the wait: the epilog waits for the lock and reads the outcome.
        let settled = settle(&file, Duration::from_secs(10)).unwrap();
        worker.join().unwrap();
        assert!(matches!(settled, Settled::Done(_)), "{settled:?}");
        assert!(!file.exists());
    }

    #[test]
    fn a_link_in_place_of_the_file_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let target = t.path().join("elsewhere");
        std::fs::write(&target, "{}").unwrap();
        let file = t.path().join("n1.gpu-start.json");
        std::os::unix::fs::symlink(&target, &file).unwrap();
        assert!(claim::<Ask>(&file).is_err());
        assert!(settle(&file, Duration::ZERO).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}");
    }
}
