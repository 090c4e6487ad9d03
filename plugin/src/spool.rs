//! The node's outbox: outcomes and closes greenupd could not take when a job ended.
//!
//! The job epilog writes what it could not deliver to one root-only file per job, run
//! (Slurm's restart count: a requeued job keeps its id) and node in the site's
//! `daemon.spool_dir` (temp file + rename, mode 0600, directory 0700). A later prolog
//! or epilog on the same node, once it has reached greenupd itself, sends the pending
//! files along on its own connection: a few at most, within a short time budget,
//! stopping at the first failure, so a job never waits on the backlog. greenupd stores
//! outcomes and closes idempotently, so a file sent twice (delivered, then the removal
//! lost) changes nothing.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use greenup_proto::client::{Client, ClientError};
use greenup_proto::protocol::{ErrorCode, JobEnd, NodeOutcome};
use serde::{Deserialize, Serialize};

/// The largest spool file read back; anything larger is not greenup's.
const MAX_ENTRY_BYTES: u64 = 1 << 20;

/// What one node could not deliver for one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Slurm job id.
    pub job_id: u64,
    /// The node that measured.
    pub node: String,
    /// The node's outcomes, as they would have been sent.
    pub outcomes: Vec<NodeOutcome>,
    /// Whether this node was to close the job.
    pub close: bool,
    /// How the job ended, sent with the close.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<JobEnd>,
    /// The job's run (`SLURM_JOB_RESTART_COUNT`), sent with the close; absent from
    /// entries spooled before it was kept, or where Slurm does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_count: Option<u32>,
    /// When the entry was written (Unix seconds).
    pub spooled_at: i64,
}

/// The spool directory of `node`: the site's `daemon.spool_dir` with `%n` as the node's name.
pub fn dir_for(spool_dir: &Path, node: &str) -> PathBuf {
    PathBuf::from(spool_dir.to_string_lossy().replace("%n", node))
}

/// The file of one run of one job on one node: `JOB-rRUN.NODE.json`, the run being
/// Slurm's restart count, so the run after a requeue onto the same node never replaces
/// an undelivered entry of the run before it. Where Slurm gives no count the name is the
/// one plugins before runs wrote, `JOB.NODE.json`. Everything before the first `.` is
/// the job's and run's (a node name never starts with `.`), so neither form can be read
/// as the other.
fn file_name(job_id: u64, restart_count: Option<u32>, node: &str) -> String {
    match restart_count {
        Some(run) => format!("{job_id}-r{run}.{node}.json"),
        None => format!("{job_id}.{node}.json"),
    }
}

/// The job and run a spool file name (`JOB-rRUN.NODE.json`, or `JOB.NODE.json` as
/// earlier plugins wrote it) stands for; `None` for anything else: a temp file, a
/// rejected entry, a file not greenup's.
fn parse_name(name: &str) -> Option<(u64, Option<u32>)> {
    let (head, node) = name.strip_suffix(".json")?.split_once('.')?;
    if !greenup::names::is_node(node) {
        return None;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (job, run) = match head.split_once("-r") {
        Some((job, run)) if digits(run) => (job, Some(run.parse().ok()?)),
        Some(_) => return None,
        None => (head, None),
    };
    if !digits(job) {
        return None;
    }
    Some((job.parse().ok()?, run))
}

/// Why an entry could not be spooled; the outcome is then lost, and the log says so.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// The spool directory could not be created.
    #[error("cannot create spool directory {dir}: {source}")]
    CreateDir {
        /// The spool directory.
        dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The spool directory could not be examined.
    #[error("{dir}: {source}")]
    Inspect {
        /// The spool directory.
        dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The spool directory is not root's alone: what it holds is sent with root's credential.
    #[error(
        "spool directory {dir} must be a directory owned by uid {uid} and writable by it alone"
    )]
    Untrusted {
        /// The spool directory.
        dir: PathBuf,
        /// The uid that must own it (the plugin's own).
        uid: u32,
    },
    /// The entry could not be encoded as JSON.
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// The entry's file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The entry's file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

/// Create `dir` (mode 0700) if needed, and refuse one that others could write into:
/// whatever is in it is sent to greenupd with root's credential.
fn private_dir(dir: &Path, create: bool) -> Result<(), SpoolError> {
    if create {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| SpoolError::CreateDir {
                dir: dir.to_path_buf(),
                source,
            })?;
    }
    let m = std::fs::symlink_metadata(dir).map_err(|source| SpoolError::Inspect {
        dir: dir.to_path_buf(),
        source,
    })?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !m.is_dir() || m.uid() != me || m.permissions().mode() & 0o022 != 0 {
        return Err(SpoolError::Untrusted {
            dir: dir.to_path_buf(),
            uid: me,
        });
    }
    Ok(())
}

/// Write `entry` to the spool in `dir`, replacing an older entry of the same run of the
/// same job on the same node.
pub fn save(dir: &Path, entry: &Entry) -> Result<PathBuf, SpoolError> {
    private_dir(dir, true)?;
    let path = dir.join(file_name(entry.job_id, entry.restart_count, &entry.node));
    let bytes = serde_json::to_vec(entry)?;
    greenup_core::fs::write_atomic_mode(&path, &bytes, 0o600).map_err(|source| {
        SpoolError::Write {
            path: path.clone(),
            source,
        }
    })?;
    Ok(path)
}

/// Read one spool file; `Err` names what is wrong with it.
fn load(path: &Path) -> Result<Entry, String> {
    let m = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if !m.is_file() || m.uid() != me {
        return Err(format!("not a regular file owned by uid {me}"));
    }
    if m.len() > MAX_ENTRY_BYTES {
        return Err(format!("larger than {MAX_ENTRY_BYTES} bytes"));
    }
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| format!("not a spool entry: {e}"))
}

/// The calls delivery makes; greenupd's client, or a stand-in in tests.
pub trait Sink {
    /// Store one node's outcome.
    fn record_outcome(&mut self, o: NodeOutcome) -> Result<bool, ClientError>;
    /// Close run `restart_count` of a job.
    fn close_job(
        &mut self,
        job_id: u64,
        end: Option<JobEnd>,
        restart_count: Option<u32>,
    ) -> Result<bool, ClientError>;
    /// Limit each following call to `t`.
    fn set_timeout(&mut self, t: Duration);
}

impl Sink for Client {
    fn record_outcome(&mut self, o: NodeOutcome) -> Result<bool, ClientError> {
        Client::record_outcome(self, o)
    }
    fn close_job(
        &mut self,
        job_id: u64,
        end: Option<JobEnd>,
        restart_count: Option<u32>,
    ) -> Result<bool, ClientError> {
        Client::close_job(self, job_id, end, restart_count)
    }
    fn set_timeout(&mut self, t: Duration) {
        let _ = Client::set_timeout(self, t);
    }
}

/// Whether greenupd will never take this entry (retrying cannot help), as opposed to
/// being unreachable, busy or failing for now.
fn is_permanent(e: &ClientError) -> bool {
    match e {
        ClientError::Server(r) => matches!(
            r.code,
            ErrorCode::NotFound
                | ErrorCode::Forbidden
                | ErrorCode::BadRequest
                | ErrorCode::BadJson
                | ErrorCode::BadVersion
                | ErrorCode::TooLong
                | ErrorCode::Conflict
        ),
        _ => false,
    }
}

/// Send one entry: its outcomes, then its close.
pub fn send(sink: &mut dyn Sink, entry: &Entry) -> Result<(), ClientError> {
    for o in &entry.outcomes {
        sink.record_outcome(o.clone())?;
    }
    if entry.close {
        sink.close_job(entry.job_id, entry.end, entry.restart_count)?;
    }
    Ok(())
}

/// What one delivery run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivered {
    /// Entries greenupd took (and removed from the spool).
    pub sent: Vec<u64>,
    /// Entries greenupd will never take, renamed to `*.rejected` for the admin, with why.
    pub rejected: Vec<(String, String)>,
    /// Whether entries were left for a later run (limit, time budget, or a failure).
    pub more_left: bool,
    /// The failure that stopped the run, if any.
    pub stopped_by: Option<String>,
}

/// Send up to `max` pending entries from `dir`, oldest job first, within `budget`.
/// Stops at the first failure that is not the entry's own fault.
pub fn deliver(dir: &Path, sink: &mut dyn Sink, max: usize, budget: Duration) -> Delivered {
    let mut done = Delivered::default();
    if private_dir(dir, false).is_err() {
        // No spool yet (nothing was ever spooled), or one greenup must not trust.
        return done;
    }
    let Ok(read) = std::fs::read_dir(dir) else {
        return done;
    };
    // Oldest job first, and a job's runs in the order they ran (an entry of an older
    // plugin, without a run, before them), so a later run's close never precedes an
    // earlier run's outcomes.
    let mut names: Vec<((u64, Option<u32>), String)> = read
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| Some((parse_name(&n)?, n)))
        .collect();
    names.sort();
    let started = Instant::now();
    for (i, (_, name)) in names.iter().enumerate() {
        let left = budget.saturating_sub(started.elapsed());
        if i >= max || left.is_zero() {
            done.more_left = true;
            break;
        }
        let path = dir.join(name);
        let entry = match load(&path) {
            Ok(e) => e,
            Err(why) => {
                let _ = std::fs::rename(&path, dir.join(format!("{name}.rejected")));
                done.rejected.push((name.clone(), why));
                continue;
            }
        };
        sink.set_timeout(left.max(Duration::from_millis(10)));
        match send(sink, &entry) {
            Ok(()) => {
                let _ = std::fs::remove_file(&path);
                done.sent.push(entry.job_id);
            }
            Err(e) if is_permanent(&e) => {
                let _ = std::fs::rename(&path, dir.join(format!("{name}.rejected")));
                done.rejected.push((name.clone(), e.to_string()));
            }
            Err(e) => {
                done.more_left = true;
                done.stopped_by = Some(e.to_string());
                break;
            }
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup_proto::protocol::ErrorReply;
    use std::collections::VecDeque;

    /// A stand-in for greenupd: records calls; answers from a script of failures.
    #[derive(Default)]
    struct Fake {
        calls: Vec<String>,
        fail: VecDeque<Option<ClientError>>,
        timeouts: Vec<Duration>,
        delay: Duration,
        closes: Vec<(u64, Option<u32>)>,
    }

    impl Fake {
        fn answer(&mut self) -> Result<bool, ClientError> {
            std::thread::sleep(self.delay);
            match self.fail.pop_front().flatten() {
                Some(e) => Err(e),
                None => Ok(true),
            }
        }
    }

    impl Sink for Fake {
        fn record_outcome(&mut self, o: NodeOutcome) -> Result<bool, ClientError> {
            self.calls.push(format!("outcome {} {}", o.job_id, o.node));
            self.answer()
        }
        fn close_job(
            &mut self,
            job_id: u64,
            end: Option<JobEnd>,
            restart_count: Option<u32>,
        ) -> Result<bool, ClientError> {
            self.closes.push((job_id, restart_count));
            self.calls.push(format!(
                "close {job_id} {}",
                end.map_or("-", JobEnd::as_str)
            ));
            self.answer()
        }
        fn set_timeout(&mut self, t: Duration) {
            self.timeouts.push(t);
        }
    }

    fn entry(job_id: u64, close: bool) -> Entry {
        Entry {
            restart_count: None,
            job_id,
            node: "n1".into(),
            outcomes: vec![NodeOutcome {
                restart_count: None,
                comm: None,
                job_id,
                node: "n1".into(),
                freq_ghz: Some(greenup_core::quantity::Ghz(2.2)),
                energy_j: Some(greenup_core::quantity::Joules(1234.5)),
                elapsed_s: Some(greenup_core::quantity::Seconds(10.0)),
                source: Some(greenup::record::Source::Rapl),
                restored: true,
                note: Some("applied".into()),
                gpu: None,
                power: None,
            }],
            close,
            end: close.then_some(JobEnd::Completed),
            spooled_at: 1,
        }
    }

    fn spool() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("spool");
        (t, d)
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn node_name_fills_the_pattern() {
        assert_eq!(
            dir_for(Path::new("/var/spool/g/%n"), "n3"),
            PathBuf::from("/var/spool/g/n3")
        );
        assert_eq!(
            dir_for(Path::new("/var/spool/greenup"), "n3"),
            PathBuf::from("/var/spool/greenup")
        );
    }

    #[test]
    fn saved_entries_are_private_and_read_back_whole() {
        let (_t, dir) = spool();
        let e = entry(42, true);
        let path = save(&dir, &e).unwrap();
        assert_eq!(path, dir.join("42.n1.json"));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&path), 0o600);
        assert_eq!(load(&path).unwrap(), e);
        // Nothing but the entry: no temp file left behind.
        assert_eq!(files(&dir), vec!["42.n1.json"]);
    }

    #[test]
    fn delivery_sends_outcomes_then_close_and_empties_the_spool() {
        let (_t, dir) = spool();
        save(&dir, &entry(7, true)).unwrap();
        save(&dir, &entry(5, false)).unwrap();
        let mut fake = Fake::default();
        let d = deliver(&dir, &mut fake, 16, Duration::from_secs(5));
        assert_eq!(d.sent, vec![5, 7], "oldest job first");
        assert!(!d.more_left);
        assert_eq!(
            fake.calls,
            vec!["outcome 5 n1", "outcome 7 n1", "close 7 completed"]
        );
        assert!(files(&dir).is_empty());
    }

    #[test]
    fn an_unreachable_daemon_stops_the_run_and_keeps_the_entry() {
        let (_t, dir) = spool();
        save(&dir, &entry(1, true)).unwrap();
        save(&dir, &entry(2, true)).unwrap();
        // Entry 1's outcome goes through; its close times out.
        let mut fake = Fake {
            fail: VecDeque::from([None, Some(ClientError::Timeout(Duration::from_millis(5)))]),
            ..Fake::default()
        };
        let d = deliver(&dir, &mut fake, 16, Duration::from_secs(5));
        assert!(d.sent.is_empty());
        assert!(d.more_left);
        assert!(d.stopped_by.unwrap().contains("did not answer"));
        assert_eq!(
            fake.calls.len(),
            2,
            "entry 2 is not tried: {:?}",
            fake.calls
        );
        assert_eq!(files(&dir), vec!["1.n1.json", "2.n1.json"]);
        // The next run sends both, entry 1 again from its start (greenupd ignores repeats).
        let mut fake = Fake::default();
        let d = deliver(&dir, &mut fake, 16, Duration::from_secs(5));
        assert_eq!(d.sent, vec![1, 2]);
        assert!(files(&dir).is_empty());
    }

    #[test]
    fn an_entry_greenupd_refuses_for_good_is_set_aside() {
        let (_t, dir) = spool();
        save(&dir, &entry(3, true)).unwrap();
        save(&dir, &entry(4, true)).unwrap();
        let mut fake = Fake {
            fail: VecDeque::from([Some(ClientError::Server(ErrorReply::new(
                ErrorCode::NotFound,
                "no job 3",
            )))]),
            ..Fake::default()
        };
        let d = deliver(&dir, &mut fake, 16, Duration::from_secs(5));
        assert_eq!(d.sent, vec![4]);
        assert_eq!(d.rejected.len(), 1);
        assert!(d.rejected[0].1.contains("no job 3"));
        assert_eq!(files(&dir), vec!["3.n1.json.rejected"]);
        // A rejected entry is never sent again.
        let mut fake = Fake::default();
        assert_eq!(
            deliver(&dir, &mut fake, 16, Duration::from_secs(5)),
            Delivered::default()
        );
        assert!(fake.calls.is_empty());
    }

    #[test]
    fn a_run_is_bounded_by_count_and_by_time() {
        let (_t, dir) = spool();
        for j in 1..=5 {
            save(&dir, &entry(j, false)).unwrap();
        }
        let mut fake = Fake::default();
        let d = deliver(&dir, &mut fake, 2, Duration::from_secs(5));
        assert_eq!(d.sent, vec![1, 2]);
        assert!(d.more_left);
        assert_eq!(files(&dir).len(), 3);
        // Each call takes at least 30 ms and the budget is 50 ms: a third entry is never
        // started (two calls already spent 60 ms), however slow the machine; on a loaded
        // one the first call alone may use the whole budget.
        let mut fake = Fake {
            delay: Duration::from_millis(30),
            ..Fake::default()
        };
        let d = deliver(&dir, &mut fake, 16, Duration::from_millis(50));
        assert!(d.sent == vec![3] || d.sent == vec![3, 4], "{:?}", d.sent);
        assert!(d.more_left);
        assert!(
            fake.timeouts
                .iter()
                .all(|t| *t <= Duration::from_millis(50))
        );
        assert_eq!(files(&dir).len(), 5 - 2 - d.sent.len());
        assert_eq!(files(&dir).last().map(String::as_str), Some("5.n1.json"));
    }

    #[test]
    fn foreign_or_broken_files_are_not_sent() {
        let (_t, dir) = spool();
        save(&dir, &entry(9, true)).unwrap();
        std::fs::write(dir.join("10.n1.json"), b"{not json").unwrap();
        std::fs::write(dir.join("notes.txt"), b"hello").unwrap();
        std::fs::write(dir.join(".9.n1.json.tmp.1"), b"half").unwrap();
        std::os::unix::fs::symlink(dir.join("9.n1.json"), dir.join("11.n1.json")).unwrap();
        let mut fake = Fake::default();
        let d = deliver(&dir, &mut fake, 16, Duration::from_secs(5));
        assert_eq!(d.sent, vec![9]);
        let why: Vec<&str> = d.rejected.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(why, vec!["10.n1.json", "11.n1.json"]);
        assert_eq!(fake.calls, vec!["outcome 9 n1", "close 9 completed"]);
    }

    #[test]
    fn a_spool_others_can_write_is_not_trusted() {
        let (_t, dir) = spool();
        save(&dir, &entry(1, true)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut fake = Fake::default();
        assert_eq!(
            deliver(&dir, &mut fake, 16, Duration::from_secs(5)),
            Delivered::default()
        );
        assert!(fake.calls.is_empty());
        let e = save(&dir, &entry(2, true)).unwrap_err().to_string();
        assert!(e.contains("writable by it alone"), "{e}");
    }

    #[test]
    fn names_are_checked_before_anything_is_read() {
        assert_eq!(parse_name("12.n1.json"), Some((12, None)));
        assert_eq!(parse_name("12.gpu-01.example.json"), Some((12, None)));
        assert_eq!(parse_name("12-r3.n1.json"), Some((12, Some(3))));
        assert_eq!(parse_name("12-r3.n-r1.x.json"), Some((12, Some(3))));
        for bad in [
            "12.n1.json.rejected",
            ".12.n1.json.tmp.3",
            ".12-r1.n1.json.tmp.3",
            "x.n1.json",
            "12..json",
            "12.n/1.json",
            "12-r.n1.json",
            "12-rx.n1.json",
            "-r1.n1.json",
            "12-r99999999999.n1.json",
        ] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }

    /// Entry `job_id` of run `restart_count`, closing it.
    fn run_entry(job_id: u64, restart_count: u32) -> Entry {
        let mut e = entry(job_id, true);
        e.restart_count = Some(restart_count);
        e.outcomes[0].restart_count = Some(restart_count);
        e
    }

    #[test]
    fn two_runs_of_a_job_on_one_node_are_both_kept_and_sent_in_their_order() {
        let (_t, dir) = spool();
        // Slurm requeued job 7 onto the same node twice while greenupd was away.
        for run in [0, 2, 10] {
            save(&dir, &run_entry(7, run)).unwrap();
        }
        assert_eq!(
            files(&dir),
            vec!["7-r0.n1.json", "7-r10.n1.json", "7-r2.n1.json"]
        );
        // The same run spooled again replaces its own entry only.
        save(&dir, &run_entry(7, 2)).unwrap();
        assert_eq!(files(&dir).len(), 3);
        let mut fake = Fake::default();
        let d = deliver(&dir, &mut fake, 16, Duration::from_secs(5));
        assert_eq!(d.sent, vec![7, 7, 7]);
        assert_eq!(fake.closes, vec![(7, Some(0)), (7, Some(2)), (7, Some(10))]);
        assert!(files(&dir).is_empty());
    }

    #[test]
    fn a_spool_the_previous_plugin_wrote_is_still_delivered() {
        let (_t, dir) = spool();
        private_dir(&dir, true).unwrap();
        // As a plugin before runs wrote it: no restart count, named by job and node.
        let old = r#"{"job_id":6,"node":"n1","outcomes":[{"job_id":6,"node":"n1","freq_ghz":2.2,"energy_j":1234.5,"elapsed_s":10.0,"source":"rapl","restored":true,"note":"applied"}],"close":true,"end":"failed","spooled_at":1}"#;
        greenup_core::fs::write_atomic_mode(&dir.join("6.n1.json"), old.as_bytes(), 0o600).unwrap();
        // The new plugin spools the run after the requeue beside it, and an older job.
        save(&dir, &run_entry(6, 1)).unwrap();
        save(&dir, &entry(5, false)).unwrap();
        assert_eq!(files(&dir), vec!["5.n1.json", "6-r1.n1.json", "6.n1.json"]);
        let mut fake = Fake::default();
        let d = deliver(&dir, &mut fake, 16, Duration::from_secs(5));
        assert_eq!(d.sent, vec![5, 6, 6]);
        assert!(d.rejected.is_empty(), "{:?}", d.rejected);
        // The old entry, of the run before the count was sent, goes first.
        assert_eq!(
            fake.calls,
            vec![
                "outcome 5 n1",
                "outcome 6 n1",
                "close 6 failed",
                "outcome 6 n1",
                "close 6 completed"
            ]
        );
        assert_eq!(fake.closes, vec![(6, None), (6, Some(1))]);
        assert!(files(&dir).is_empty());
    }
}
