//! What a job's user is lent on a node while the job runs, so that its MPI ranks can
//! lower their own cores' frequency without root (communication-phase DVFS):
//!
//! - `scaling_setspeed` of each cpufreq policy whose CPUs all belong to the job, where
//!   the userspace governor is offered. The governor is set to userspace and
//!   `scaling_max_freq` (which stays root's) is capped at the speed in force, so the user
//!   can only go lower than what greenup decided, never higher. `scaling_max_freq` is
//!   never lent: writing it could lift the decision. Where userspace is not offered
//!   (intel_pstate), nothing is lent and the ranks measure only.
//! - A directory beside the job's (see [`super::run_dir`]) for the ranks' measurements.
//!
//! **Only CPUs the job holds alone.** A policy is lent only when no other job on the node
//! has saved settings of it or been lent it ([`lend`] looks, under a node-wide lock), and
//! a job that arrives on a node where another job's user holds a loan takes that loan
//! back first ([`revoke_shared`]): on a node shared by oversubscription both jobs count
//! every CPU as theirs, and neither user may then set the frequency of the other's.
//!
//! Everything is done on opened descriptors (`O_NOFOLLOW`, `fchown`, `fchmod`) and only
//! to regular files and real directories, so a link the user plants cannot turn a root
//! prolog or epilog onto another file. The owner and mode found before are saved in the
//! job directory before anything changes, and the end puts them back exactly.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cpufreq::{Cpufreq, CpufreqError, Policy};
use super::job::{NodePaths, Scope};
use super::run_dir::JobDir;
use super::state;
use crate::sysfs;

/// The one cpufreq file a job's user may write.
pub const CONTROL: &str = greenup_comm::CONTROL_FILES[0];

/// One file lent, with what it was before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LentFile {
    /// The file.
    pub path: PathBuf,
    /// Its owner before.
    pub uid: u32,
    /// Its group before.
    pub gid: u32,
    /// Its permission bits before.
    pub mode: u32,
}

/// The files lent to a job's user under one record key.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Lent {
    /// The user they were lent to.
    pub uid: u32,
    /// The files.
    pub files: Vec<LentFile>,
    /// The CPUs whose frequency the user may set.
    pub cpus: Vec<u32>,
    /// The lowest frequency those CPUs offer, in kHz.
    pub min_khz: Option<u64>,
    /// The highest frequency all of them may run at, in kHz: the lowest of their
    /// `scaling_max_freq` ceilings (what the in-job guard raises to, never past).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_khz: Option<u64>,
}

fn open_regular(path: &Path) -> std::io::Result<File> {
    greenup_core::fs::open_no_link(path, false)
}

fn open_dir(path: &Path) -> std::io::Result<File> {
    greenup_core::fs::open_no_link(path, true)
}

fn check(r: libc::c_int) -> std::io::Result<()> {
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Set owner, group and mode of an opened file.
fn own(f: &File, uid: u32, gid: u32, mode: u32) -> std::io::Result<()> {
    // SAFETY: fchown/fchmod on a descriptor this function borrows.
    check(unsafe { libc::fchown(f.as_raw_fd(), uid, gid) })?;
    check(unsafe { libc::fchmod(f.as_raw_fd(), mode as libc::mode_t) })
}

/// The policies `scope` lets the job change, of those offering the userspace governor.
fn lendable(cf: &Cpufreq, scope: &Scope) -> Vec<Policy> {
    let chosen = match scope {
        Scope::Node => cf.policies_for(None),
        Scope::Cpus(c) => cf.policies_for(Some(c)),
        Scope::SharedNode => return Vec::new(),
    };
    chosen
        .unwrap_or_default()
        .into_iter()
        .filter(|p| {
            p.governors()
                .is_ok_and(|g| g.iter().any(|g| g == "userspace"))
        })
        .collect()
}

/// The node-wide lock around looking at other jobs' records and lending, so that two
/// prologs on one node cannot both find the other absent.
struct NodeLock {
    _held: File,
}

/// How long a prolog waits for another's loan on the same node: lending takes
/// milliseconds, and a prolog must not be held long (nothing is lent instead).
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

fn lock_node(run_dir: &Path) -> Result<NodeLock, LendError> {
    let dir = open_dir(run_dir).map_err(at(run_dir))?;
    match state::lock_within(&dir, Some(LOCK_PATIENCE)) {
        Ok(true) => Ok(NodeLock { _held: dir }),
        Ok(false) => Err(LendError::LockBusy {
            run_dir: run_dir.to_path_buf(),
            secs: LOCK_PATIENCE.as_secs(),
        }),
        Err(source) => Err(LendError::Lock {
            run_dir: run_dir.to_path_buf(),
            source,
        }),
    }
}

/// Why the speed control could not be lent, or another job's loan taken back; the job
/// then runs with the ranks measuring only, and the log says why.
#[derive(Debug, thiserror::Error)]
pub enum LendError {
    /// A file or directory could not be opened, read, written or given its owner.
    #[error("{path}: {source}")]
    Path {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Another prolog held the node-wide lock for longer than this one waits.
    #[error("{run_dir}: another prolog held the node's lock for {secs} s")]
    LockBusy {
        /// The run directory holding the lock.
        run_dir: PathBuf,
        /// How long this prolog waited.
        secs: u64,
    },
    /// The node-wide lock could not be taken.
    #[error("{run_dir}: cannot lock: {source}")]
    Lock {
        /// The run directory holding the lock.
        run_dir: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A job record could not be read or its directory made.
    #[error("{0}")]
    Record(std::io::Error),
    /// The loan's record could not be encoded.
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// The job's start saved no settings, so nothing could be put back at its end.
    #[error("nothing saved to restore; nothing lent")]
    NothingSaved,
    /// The job counts the whole node as its own, yet another job runs here.
    #[error("job {job} also runs on this node; nothing lent")]
    SharedNode {
        /// The other job.
        job: u32,
    },
    /// A cpufreq policy's settings could not be read.
    #[error(transparent)]
    Cpufreq(#[from] CpufreqError),
    /// A cpufreq file could not be written.
    #[error(transparent)]
    Sysfs(#[from] sysfs::SysfsError),
    /// Some other jobs' loans could not be taken back (all are tried).
    #[error("{}", not_revoked(.jobs))]
    NotRevoked {
        /// Each job whose loan stays, with why.
        jobs: Vec<(u32, TakeBackError)>,
    },
}

/// `job J: why; job K: why`, one line for a log.
fn not_revoked(jobs: &[(u32, TakeBackError)]) -> String {
    let each: Vec<String> = jobs.iter().map(|(j, e)| format!("job {j}: {e}")).collect();
    each.join("; ")
}

/// `path: error` for a file of the loan.
fn at(path: &Path) -> impl FnOnce(std::io::Error) -> LendError + '_ {
    move |source| LendError::Path {
        path: path.to_path_buf(),
        source,
    }
}

/// What the other jobs on `node` hold, from their records under `run_dir`.
#[derive(Default)]
struct Others {
    /// The other jobs with a record or a loan on the node.
    jobs: Vec<u32>,
    /// Policies (their N) another job saved settings of.
    policies: Vec<u32>,
    /// Loans of other jobs: (job, key, the loan).
    loans: Vec<(u32, String, Lent)>,
}

fn others_on_node(run_dir: &Path, job_id: u32, node: &str) -> Others {
    let mut out = Others::default();
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return out;
    };
    let mut jobs: Vec<u32> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .filter(|j| *j != job_id)
        .collect();
    jobs.sort_unstable();
    for j in jobs {
        let dir = JobDir::new(run_dir, j);
        let mut keys = vec![node.to_string()];
        keys.extend(dir.step_keys(node));
        let mut here = false;
        for key in keys {
            // An unreadable record counts as present: better no loan than a shared one.
            match state::load(run_dir, j, &key) {
                Ok(Some(rec)) => {
                    here = true;
                    out.policies.extend(rec.cpufreq.iter().map(|p| p.id));
                }
                Ok(None) => {}
                Err(_) => here = true,
            }
            match state::load_json::<Lent>(&dir.lent(&key)) {
                Ok(Some(l)) => {
                    here = true;
                    out.loans.push((j, key, l));
                }
                Ok(None) => {}
                Err(_) => here = true,
            }
        }
        if here {
            out.jobs.push(j);
        }
    }
    out
}

/// Take back every loan another job holds on `node` of a policy `scope` gives this job
/// (every loan on the node when `scope` is the whole node or unknown cores), so that no
/// user keeps the speed control of CPUs another job now runs on. Called by each job's
/// prolog after [`super::job::begin`], whether or not the job borrows anything. Returns
/// the jobs whose loans were taken back.
pub fn revoke_shared(
    paths: &NodePaths,
    job_id: u32,
    node: &str,
    scope: &Scope,
) -> Result<Vec<u32>, LendError> {
    let _lock = match open_dir(&paths.run_dir) {
        Ok(_) => lock_node(&paths.run_dir)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(at(&paths.run_dir)(e)),
    };
    let mine: Option<Vec<PathBuf>> = match scope {
        Scope::Cpus(c) => Some(
            Cpufreq::new(&paths.sysfs_root)
                .policies()
                .unwrap_or_default()
                .into_iter()
                .filter(|p| p.cpus.iter().any(|x| c.contains(x)))
                .map(|p| p.dir.join(CONTROL))
                .collect(),
        ),
        Scope::Node | Scope::SharedNode => None,
    };
    let mut revoked = Vec::new();
    let mut problems = Vec::new();
    for (j, key, loan) in others_on_node(&paths.run_dir, job_id, node).loans {
        let overlaps = mine
            .as_ref()
            .is_none_or(|m| loan.files.iter().any(|f| m.contains(&f.path)));
        if !overlaps {
            continue;
        }
        match take_back(paths, j, &key) {
            Ok(_) => revoked.push(j),
            Err(e) => problems.push((j, e)),
        }
    }
    if problems.is_empty() {
        Ok(revoked)
    } else {
        Err(LendError::NotRevoked { jobs: problems })
    }
}

/// Lend `uid` the [`CONTROL`] of the CPUs `scope` gives the job, after `super::job::begin`
/// saved their settings under `key` (the end restores them). Returns what was lent.
/// Called again for the same job and key (a retried prolog), it returns the first loan
/// unchanged, so the user's ownership is never saved as the owner to put back.
pub fn lend(
    paths: &NodePaths,
    job_id: u32,
    key: &str,
    uid: u32,
    scope: &Scope,
) -> Result<Lent, LendError> {
    let dir = JobDir::new(&paths.run_dir, job_id);
    if let Some(first) = state::load_json::<Lent>(&dir.lent(key)).map_err(LendError::Record)? {
        return Ok(first);
    }
    let Some(saved) = state::load(&paths.run_dir, job_id, key).map_err(LendError::Record)? else {
        return Err(LendError::NothingSaved);
    };
    let _lock = lock_node(&paths.run_dir)?;
    let others = others_on_node(&paths.run_dir, job_id, &saved.node);
    if *scope == Scope::Node
        && let Some(j) = others.jobs.first()
    {
        // The job counts every CPU as its own, yet another job runs here (oversubscribed).
        return Err(LendError::SharedNode { job: *j });
    }
    let taken: Vec<&PathBuf> = others
        .loans
        .iter()
        .flat_map(|(_, _, l)| l.files.iter().map(|f| &f.path))
        .collect();
    let cf = Cpufreq::new(&paths.sysfs_root);
    let policies: Vec<Policy> = lendable(&cf, scope)
        .into_iter()
        .filter(|p| !others.policies.contains(&p.id) && !taken.contains(&&p.dir.join(CONTROL)))
        .collect();
    let mut lent = Lent {
        uid,
        ..Lent::default()
    };
    for p in &policies {
        let file = p.dir.join(CONTROL);
        let meta = open_regular(&file)
            .and_then(|f| f.metadata())
            .map_err(at(&file))?;
        lent.files.push(LentFile {
            path: file,
            uid: meta.uid(),
            gid: meta.gid(),
            mode: meta.mode() & 0o7777,
        });
        lent.cpus.extend(&p.cpus);
        let low = p.available_khz().ok().and_then(|f| f.into_iter().min());
        lent.min_khz = match (lent.min_khz, low) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let high = p.settings().ok().map(|s| s.max_khz);
        lent.max_khz = match (lent.max_khz, high) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    if lent.files.is_empty() {
        return Ok(lent);
    }
    // Saved before anything changes: an epilog after a crash here still takes it back.
    let json = serde_json::to_vec_pretty(&lent)?;
    dir.create().map_err(LendError::Record)?;
    let record = dir.lent(key);
    greenup_core::fs::write_atomic_volatile(&record, &json, 0o600).map_err(at(&record))?;
    for (p, f) in policies.iter().zip(&lent.files) {
        let now = p.settings()?;
        let speed = now.setspeed_khz.unwrap_or(now.max_khz);
        if now.governor != "userspace" {
            sysfs::write(&p.dir.join("scaling_governor"), "userspace")?;
            sysfs::write(&p.dir.join(CONTROL), &speed.to_string())?;
        }
        if now.max_khz > speed {
            sysfs::write(&p.dir.join("scaling_max_freq"), &speed.to_string())?;
        }
        let file = open_regular(&f.path).map_err(at(&f.path))?;
        // Owner write, nothing for anyone else beyond what was there.
        own(&file, uid, f.gid, (f.mode | 0o200) & !0o022).map_err(at(&f.path))?;
    }
    Ok(lent)
}

/// Why a loan could not be taken back; the record stays, so the job's end retries.
#[derive(Debug, thiserror::Error)]
pub enum TakeBackError {
    /// The record of what was lent could not be read.
    #[error("{source}")]
    Record {
        /// The record file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Some lent files could not be given back their owner and mode (all are tried).
    #[error("{}", problems(.files))]
    NotRestored {
        /// Each file still lent, with what the system said.
        files: Vec<(PathBuf, std::io::Error)>,
    },
    /// Everything was given back, but the record could not be removed.
    #[error("{source}")]
    Remove {
        /// The record file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

/// `path: error; path: error`, one line for a log.
fn problems(files: &[(PathBuf, std::io::Error)]) -> String {
    let each: Vec<String> = files
        .iter()
        .map(|(p, e)| format!("{}: {e}", p.display()))
        .collect();
    each.join("; ")
}

/// Take back what [`lend`] lent under `key`: owner, group and mode exactly as before.
/// Ok(0) when nothing was lent. On an error the record stays, so a later end retries.
pub fn take_back(paths: &NodePaths, job_id: u32, key: &str) -> Result<usize, TakeBackError> {
    let record = JobDir::new(&paths.run_dir, job_id).lent(key);
    let loaded = state::load_json::<Lent>(&record).map_err(|source| TakeBackError::Record {
        path: record.clone(),
        source,
    })?;
    let Some(lent) = loaded else {
        return Ok(0);
    };
    let mut files = Vec::new();
    for f in &lent.files {
        if let Err(e) = open_regular(&f.path).and_then(|file| own(&file, f.uid, f.gid, f.mode)) {
            files.push((f.path.clone(), e));
        }
    }
    if !files.is_empty() {
        return Err(TakeBackError::NotRestored { files });
    }
    greenup_core::fs::remove_if_present(&record).map_err(|source| TakeBackError::Remove {
        path: record.clone(),
        source,
    })?;
    Ok(lent.files.len())
}

/// Make the job's MPI measurement directory for `node`, owned by `uid`:`gid`, mode 0700;
/// a stale one is removed first. `run_dir` becomes traversable (0711) so the user can
/// reach it by name.
pub fn make_stats_dir(
    run_dir: &Path,
    job_id: u32,
    node: &str,
    uid: u32,
    gid: u32,
) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(run_dir)?;
    let top = open_dir(run_dir)?;
    let mode = top.metadata()?.mode() & 0o7777;
    // SAFETY: fchmod on a descriptor this function owns.
    check(unsafe { libc::fchmod(top.as_raw_fd(), ((mode | 0o711) & !0o022) as libc::mode_t) })?;
    let path = JobDir::new(run_dir, job_id).mpi_stats(node);
    remove_stats_dir(&path)?;
    std::fs::DirBuilder::new().mode(0o700).create(&path)?;
    let d = open_dir(&path)?;
    own(&d, uid, gid, 0o700)?;
    Ok(path)
}

/// Take the measurement directory back from the job's user (root's, 0700), so nothing
/// more can be put in it while the epilog reads it; Ok(false) when there is none.
pub fn close_stats_dir(path: &Path) -> std::io::Result<bool> {
    match open_dir(path) {
        Ok(d) => own(&d, 0, 0, 0o700).map(|()| true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Remove the measurement directory and whatever the user left in it, following no link
/// (the standard library's removal works on descriptors, not on paths).
pub fn remove_stats_dir(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dvfs::cpufreq::tests::tree;
    use crate::dvfs::job::{Apply, begin};

    const FREQS: [u64; 2] = [1_200_000, 3_000_000];

    fn owner(path: &Path) -> (u32, u32) {
        let m = std::fs::metadata(path).unwrap();
        (m.uid(), m.mode() & 0o7777)
    }

    fn setspeed(root: &Path, policy: u32) -> PathBuf {
        root.join(format!(
            "devices/system/cpu/cpufreq/policy{policy}/{CONTROL}"
        ))
    }

    #[test]
    fn only_the_jobs_own_cpus_are_lent_and_all_come_back_exactly() {
        let t = tempfile::tempdir().unwrap();
        tree(t.path(), 4, "userspace performance", &FREQS);
        let paths = NodePaths {
            sysfs_root: t.path().to_path_buf(),
            run_dir: t.path().join("run"),
        };
        let before: Vec<_> = (0..4).map(|i| owner(&setspeed(t.path(), i))).collect();
        let scope = Scope::Cpus(vec![0, 1]);
        begin(&paths, 9, "n1", "n1.step0", &Apply::freq(None), &scope).unwrap();
        let lent = lend(&paths, 9, "n1.step0", 4242, &scope).unwrap();
        assert_eq!(lent.cpus, vec![0, 1]);
        assert_eq!(owner(&setspeed(t.path(), 0)).0, 4242);
        assert_eq!(owner(&setspeed(t.path(), 1)).0, 4242);
        // A retried prolog lends nothing twice and keeps the owner from before the job.
        assert_eq!(lend(&paths, 9, "n1.step0", 4242, &scope).unwrap(), lent);
        assert_eq!(owner(&setspeed(t.path(), 2)), before[2]);
        assert_eq!(owner(&setspeed(t.path(), 3)), before[3]);
        assert_eq!(take_back(&paths, 9, "n1.step0").unwrap(), 2);
        let after: Vec<_> = (0..4).map(|i| owner(&setspeed(t.path(), i))).collect();
        assert_eq!(after, before);
        // Taken back once: nothing left to take.
        assert_eq!(take_back(&paths, 9, "n1.step0").unwrap(), 0);
    }

    fn paths_for(t: &Path) -> NodePaths {
        NodePaths {
            sysfs_root: t.to_path_buf(),
            run_dir: t.join("run"),
        }
    }

    /// A tree of `n` policies that ordinary users can reach, when this test runs as root
    /// with setpriv to act as one; `None` (skipped) otherwise.
    fn tree_for_users(n: u32) -> Option<(tempfile::TempDir, NodePaths)> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || !Path::new("/usr/bin/setpriv").exists() {
            eprintln!("skipped: needs root and setpriv to act as an ordinary user");
            return None;
        }
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        tree(t.path(), n, "userspace performance", &FREQS);
        let paths = paths_for(t.path());
        Some((t, paths))
    }

    /// Whether uid 4242 (no groups) can write `file`, tried by a real unprivileged process.
    fn user_can_write(file: &Path) -> bool {
        uid_can_write(4242, file)
    }

    /// Whether `uid` (no groups) can write `file`, tried by a real unprivileged process.
    fn uid_can_write(uid: u32, file: &Path) -> bool {
        std::process::Command::new("setpriv")
            .args([
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
                "--",
                "sh",
                "-c",
            ])
            .arg(format!("echo 1200000 > '{}'", file.display()))
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    #[test]
    fn an_unprivileged_user_writes_its_own_cores_only_and_only_while_the_job_runs() {
        let Some((t, paths)) = tree_for_users(4) else {
            return;
        };
        let scope = Scope::Cpus(vec![2, 3]);
        begin(&paths, 9, "n1", "n1.step0", &Apply::freq(None), &scope).unwrap();
        for i in 0..4 {
            assert!(
                !user_can_write(&setspeed(t.path(), i)),
                "policy{i} before the job"
            );
        }
        lend(&paths, 9, "n1.step0", 4242, &scope).unwrap();
        assert!(
            !user_can_write(&setspeed(t.path(), 0)),
            "another job's core"
        );
        assert!(
            !user_can_write(&setspeed(t.path(), 1)),
            "another job's core"
        );
        assert!(user_can_write(&setspeed(t.path(), 2)), "the job's own core");
        assert!(user_can_write(&setspeed(t.path(), 3)), "the job's own core");
        // The bound the user cannot lift stays root's.
        let max = t
            .path()
            .join("devices/system/cpu/cpufreq/policy2/scaling_max_freq");
        assert!(!user_can_write(&max));
        take_back(&paths, 9, "n1.step0").unwrap();
        for i in 0..4 {
            assert!(
                !user_can_write(&setspeed(t.path(), i)),
                "policy{i} after the job"
            );
        }
    }

    #[test]
    fn a_shared_node_lends_nothing_whatever_the_site_allows() {
        // The prolog's scope on a shared node is SharedNode with per_core_shared either
        // true or false (per-core settings are made per step, later): nothing is lent.
        let t = tempfile::tempdir().unwrap();
        tree(t.path(), 4, "userspace performance", &FREQS);
        let paths = paths_for(t.path());
        let before: Vec<_> = (0..4).map(|i| owner(&setspeed(t.path(), i))).collect();
        begin(
            &paths,
            9,
            "n1",
            "n1",
            &Apply::freq(Some(1_200_000)),
            &Scope::SharedNode,
        )
        .unwrap();
        let lent = lend(&paths, 9, "n1", 4242, &Scope::SharedNode).unwrap();
        assert!(lent.files.is_empty() && lent.cpus.is_empty(), "{lent:?}");
        let after: Vec<_> = (0..4).map(|i| owner(&setspeed(t.path(), i))).collect();
        assert_eq!(after, before);
        assert_eq!(take_back(&paths, 9, "n1").unwrap(), 0);
    }

    #[test]
    fn a_policy_spanning_another_jobs_cpu_or_already_set_by_another_job_is_not_lent() {
        let t = tempfile::tempdir().unwrap();
        tree(t.path(), 4, "userspace performance", &FREQS);
        // policy1 governs CPUs 1 and 2 (one clock for both); policy2 is offline.
        let dir = |i: u32| {
            t.path()
                .join(format!("devices/system/cpu/cpufreq/policy{i}"))
        };
        std::fs::write(dir(1).join("affected_cpus"), "1-2\n").unwrap();
        std::fs::remove_dir_all(dir(2)).unwrap();
        let paths = paths_for(t.path());
        // Job 8 holds CPU 3 on the same node and set its policy for a step.
        begin(
            &paths,
            8,
            "n1",
            "n1.step0",
            &Apply::freq(Some(1_200_000)),
            &Scope::Cpus(vec![3]),
        )
        .unwrap();
        // Job 9 holds CPUs 0, 1 and 3 (by mistake or oversubscription, 3 as well).
        let scope = Scope::Cpus(vec![0, 1, 3]);
        begin(&paths, 9, "n1", "n1.step0", &Apply::freq(None), &scope).unwrap();
        let lent = lend(&paths, 9, "n1.step0", 4242, &scope).unwrap();
        assert_eq!(
            lent.cpus,
            vec![0],
            "policy1 spans CPU 2, policy3 is job 8's"
        );
        assert_eq!(owner(&setspeed(t.path(), 0)).0, 4242);
        assert_ne!(owner(&setspeed(t.path(), 1)).0, 4242);
        assert_ne!(owner(&setspeed(t.path(), 3)).0, 4242);
        assert_eq!(take_back(&paths, 9, "n1.step0").unwrap(), 1);
    }

    #[test]
    fn a_second_job_on_an_oversubscribed_node_ends_the_first_loan_and_gets_none() {
        // Both jobs count every CPU of n1 as theirs (Slurm's OverSubscribe): whole-node scope.
        let t = tempfile::tempdir().unwrap();
        tree(t.path(), 2, "userspace performance", &FREQS);
        let paths = paths_for(t.path());
        let before: Vec<_> = (0..2).map(|i| owner(&setspeed(t.path(), i))).collect();
        // Another node's job in the same run directory (a test cluster shares one) is no
        // reason to refuse.
        begin(&paths, 7, "n2", "n2", &Apply::freq(None), &Scope::Node).unwrap();
        begin(&paths, 9, "n1", "n1", &Apply::freq(None), &Scope::Node).unwrap();
        assert!(
            revoke_shared(&paths, 9, "n1", &Scope::Node)
                .unwrap()
                .is_empty()
        );
        let first = lend(&paths, 9, "n1", 4242, &Scope::Node).unwrap();
        assert_eq!(first.cpus, vec![0, 1]);
        // Job 10 starts on n1: its prolog takes job 9's loan back, and lends it nothing.
        begin(&paths, 10, "n1", "n1", &Apply::freq(None), &Scope::Node).unwrap();
        assert_eq!(
            revoke_shared(&paths, 10, "n1", &Scope::Node).unwrap(),
            vec![9]
        );
        let after: Vec<_> = (0..2).map(|i| owner(&setspeed(t.path(), i))).collect();
        assert_eq!(after, before, "job 9's user lost the control");
        let second = lend(&paths, 10, "n1", 4343, &Scope::Node)
            .unwrap_err()
            .to_string();
        assert_eq!(second, "job 9 also runs on this node; nothing lent");
        // Both end, in either order: nothing is left lent, owners as before the jobs.
        assert_eq!(take_back(&paths, 9, "n1").unwrap(), 0);
        assert_eq!(take_back(&paths, 10, "n1").unwrap(), 0);
        let end: Vec<_> = (0..2).map(|i| owner(&setspeed(t.path(), i))).collect();
        assert_eq!(end, before);
    }

    #[test]
    fn on_a_shared_node_no_user_writes_a_core_another_job_runs_on() {
        let Some((t, paths)) = tree_for_users(2) else {
            return;
        };
        begin(&paths, 9, "n1", "n1", &Apply::freq(None), &Scope::Node).unwrap();
        lend(&paths, 9, "n1", 4242, &Scope::Node).unwrap();
        assert!(uid_can_write(4242, &setspeed(t.path(), 0)), "job 9 alone");
        // Job 10 shares n1 (a shared-node prolog, per_core_shared or not).
        begin(
            &paths,
            10,
            "n1",
            "n1",
            &Apply::freq(None),
            &Scope::SharedNode,
        )
        .unwrap();
        revoke_shared(&paths, 10, "n1", &Scope::SharedNode).unwrap();
        assert!(
            lend(&paths, 10, "n1", 4343, &Scope::SharedNode)
                .unwrap()
                .files
                .is_empty()
        );
        for i in 0..2 {
            assert!(
                !uid_can_write(4242, &setspeed(t.path(), i)),
                "job 9's user, policy{i}"
            );
            assert!(
                !uid_can_write(4343, &setspeed(t.path(), i)),
                "job 10's user, policy{i}"
            );
        }
        take_back(&paths, 10, "n1").unwrap();
        take_back(&paths, 9, "n1").unwrap();
        for i in 0..2 {
            assert!(
                !uid_can_write(4242, &setspeed(t.path(), i)),
                "after the jobs"
            );
        }
    }

    #[test]
    fn a_link_in_place_of_the_control_is_refused() {
        let t = tempfile::tempdir().unwrap();
        tree(t.path(), 1, "userspace performance", &FREQS);
        let paths = NodePaths {
            sysfs_root: t.path().to_path_buf(),
            run_dir: t.path().join("run"),
        };
        let file = setspeed(t.path(), 0);
        std::fs::remove_file(&file).unwrap();
        let target = t.path().join("precious");
        std::fs::write(&target, "x").unwrap();
        std::os::unix::fs::symlink(&target, &file).unwrap();
        begin(&paths, 9, "n1", "n1", &Apply::freq(None), &Scope::Node).unwrap();
        assert!(lend(&paths, 9, "n1", 4242, &Scope::Node).is_err());
        assert_eq!(owner(&target).0, std::fs::metadata(t.path()).unwrap().uid());
    }

    #[test]
    fn a_stale_or_planted_stats_dir_is_replaced_without_following_links() {
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("run");
        let outside = t.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        std::fs::create_dir_all(&run).unwrap();
        let stats = JobDir::new(&run, 5).mpi_stats("n1");
        std::os::unix::fs::symlink(&outside, &stats).unwrap();
        let made = make_stats_dir(&run, 5, "n1", 4242, 4242).unwrap();
        assert_eq!(made, stats);
        assert!(std::fs::symlink_metadata(&stats).unwrap().is_dir());
        assert_eq!(owner(&stats), (4242, 0o700));
        assert_eq!(owner(&run).1 & 0o711, 0o711);
        // The user plants a link to a directory outside; removal takes the link only.
        std::os::unix::fs::symlink(&outside, stats.join("sub")).unwrap();
        assert!(close_stats_dir(&stats).unwrap());
        assert_eq!(owner(&stats).0, 0);
        remove_stats_dir(&stats).unwrap();
        assert!(!stats.exists());
        assert!(outside.join("keep").exists());
        assert!(!close_stats_dir(&stats).unwrap());
    }
}
