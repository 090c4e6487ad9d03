//! One job on one node: save the settings and counters, apply what the decision
//! says, and at the end restore exactly what was saved and measure what was used.
//! This code applies; it never chooses a frequency.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::cpufreq::{Applied, Cpufreq, PolicySettings};
use super::powercap::{self, LimitRequest, PowerHeld};
use super::run_dir::JobDir;
use super::state;
use crate::meter::{self, Energy, Tally};

/// Which CPUs of the node the job may change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The job holds the whole node: every CPU.
    Node,
    /// The job shares the node and per-core DVFS is allowed: only these CPUs.
    Cpus(Vec<u32>),
    /// The job shares the node and per-core DVFS is not allowed: measure only.
    SharedNode,
}

/// Where a node's sysfs tree and saved state live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePaths {
    /// The node's sysfs root (`/sys`, or a test tree).
    pub sysfs_root: PathBuf,
    /// Where saved settings live (`/run/greenup`).
    pub run_dir: PathBuf,
}

/// What a job's decision asks of a node.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Apply {
    /// The CPU frequency in kHz; None leaves the clocks as they are.
    pub khz: Option<u64>,
    /// The node's power limits; None leaves them as they are.
    pub power: Option<LimitRequest>,
}

impl Apply {
    /// A frequency alone (None: nothing).
    pub fn freq(khz: Option<u64>) -> Apply {
        Apply { khz, power: None }
    }
}

/// A job's measured outcome on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeOutcome {
    /// Slurm job id.
    pub job_id: u32,
    /// Slurm node name.
    pub node: String,
    /// Seconds from job start to job end on this node.
    pub elapsed_s: f64,
    /// Energy the node used, or why it is unmeasured.
    pub energy: Energy,
    /// The frequency greenup set, in kHz; None when none was set.
    pub applied_khz: Option<u64>,
    /// The frequency the job's CPUs ran at, in kHz: the one greenup set, else the one the
    /// node had (see [`in_force_khz`]); None when the job's CPUs are not known (a shared
    /// node without per-core DVFS) or the node has no cpufreq.
    pub ran_khz: Option<u64>,
    /// `applied`, or why not.
    pub note: String,
    /// Why the saved settings could not all be restored, if so (they stay saved for a retry).
    pub restore_error: Option<String>,
    /// Whether the node held the power limit the decision asked for; None: none was asked.
    pub power: Option<PowerHeld>,
}

/// Why the start of a job could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The saved-state file could not be written or read.
    #[error("{path}: {source}")]
    State {
        /// The record file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Save this node's settings and counters, then set what `asked` says on the CPUs
/// `scope` allows: the frequency, and the power limit where the job holds the whole node
/// (a shared node's limit is not one job's). Calling it again for the same job and key
/// returns the first record unchanged, so a retried prolog never saves the job's own
/// settings as "previous".
pub fn begin(
    paths: &NodePaths,
    job_id: u32,
    node: &str,
    key: &str,
    asked: &Apply,
    scope: &Scope,
) -> Result<state::NodeRecord, JobError> {
    let state_err = |source| JobError::State {
        path: state::path(&paths.run_dir, job_id, key),
        source,
    };
    if let Some(existing) = state::load(&paths.run_dir, job_id, key).map_err(state_err)? {
        return Ok(existing);
    }
    let khz = asked.khz;
    let cf = Cpufreq::new(&paths.sysfs_root);
    let cpus = match scope {
        Scope::Node => None,
        Scope::Cpus(c) => Some(c.as_slice()),
        Scope::SharedNode => Some(&[][..]),
    };
    let policies = if matches!(scope, Scope::SharedNode) {
        Ok(Vec::new())
    } else {
        cf.policies_for(cpus)
    };
    let mut rec = state::NodeRecord {
        job_id,
        node: node.to_string(),
        cpufreq: Vec::new(),
        powercap: Vec::new(),
        energy_start: meter::rapl::read(&paths.sysfs_root),
        requested_khz: khz,
        applied: None,
        note: String::new(),
        power: None,
    };
    let policies = match policies.and_then(|p| cf.snapshot(&p).map(|s| (p, s))) {
        Ok((p, saved)) => {
            rec.cpufreq = saved;
            p
        }
        Err(e) => {
            rec.note = format!("not applied: {e}");
            Vec::new()
        }
    };
    rec.note = match (scope, khz, rec.note.is_empty()) {
        (_, _, false) => rec.note,
        (Scope::SharedNode, Some(_), _) => "not applied: shared node".into(),
        (_, None, _) => "not applied: no frequency decided".into(),
        _ => "saving".into(),
    };
    // The limit to set, once the node's own limits are saved.
    let mut limit = None;
    if let Some(req) = asked.power {
        let not_held = |reason: String| PowerHeld::NotHeld {
            asked_w: req.watts,
            reason,
        };
        rec.power = Some(match (scope, powercap::snapshot(&paths.sysfs_root)) {
            (Scope::Node, Ok(saved)) => {
                rec.powercap = saved;
                limit = Some(req);
                // What a crash before the limit is read back leaves reported.
                not_held("the prolog stopped while setting it".into())
            }
            (Scope::Node, Err(e)) => not_held(format!("the node's limits are unreadable: {e}")),
            _ => not_held("shared node: its power limit is not one job's".into()),
        });
    }
    // Save before touching anything, so that a crash mid-apply still restores.
    state::save(&paths.run_dir, key, &rec).map_err(state_err)?;
    let mut changed = false;
    if let (Some(target), "saving") = (khz, rec.note.as_str()) {
        changed = true;
        match cf.apply(&policies, target) {
            Ok(applied) => {
                rec.note = "applied".into();
                rec.applied = Some(applied);
            }
            Err(e) => {
                // Leave the node as it was and say why.
                let _ = cf.restore(&rec.cpufreq);
                rec.note = format!("not applied: {e}");
            }
        }
    }
    if let Some(req) = limit {
        changed = true;
        rec.power = Some(match powercap::apply(&paths.sysfs_root, &req) {
            Ok(held) => PowerHeld::Held {
                asked_w: req.watts,
                held_w: held.watts,
                note: (!held.clamped.is_empty()).then(|| held.clamped.join("; ")),
            },
            Err(e) => {
                // Leave the node's limits as they were and say why.
                let _ = powercap::restore(&paths.sysfs_root, &rec.powercap);
                PowerHeld::NotHeld {
                    asked_w: req.watts,
                    reason: e.to_string(),
                }
            }
        });
    }
    if changed {
        state::save(&paths.run_dir, key, &rec).map_err(state_err)?;
    }
    Ok(rec)
}

/// The file holding the running energy count of `key` for `job_id`, kept by [`sample`].
pub fn tally_path(run_dir: &Path, job_id: u32, key: &str) -> PathBuf {
    JobDir::new(run_dir, job_id).tally(key)
}

/// The job directory's lock, held while a reading is counted or the job is ended, so the
/// sampler never counts into a record the epilog is taking away.
struct DirLock {
    _held: std::fs::File,
}

/// How long a job's end waits for a meter's reading to finish. A reading takes
/// microseconds; a meter stuck for longer must not hold the epilog (an epilog past
/// Slurm's timeout drains the node), so the end then goes ahead unlocked.
const END_LOCK_PATIENCE: Duration = Duration::from_secs(2);

/// Lock the job's directory under `run_dir`, waiting at most `patience` (None: as long as
/// it takes); Ok(None) when the directory does not exist. With the lock, whether it was
/// had: `false` when the patience ran out, and each caller decides whether to go ahead.
fn lock_job_dir(
    run_dir: &Path,
    job_id: u32,
    patience: Option<Duration>,
) -> std::io::Result<Option<(DirLock, bool)>> {
    let dir = match std::fs::File::open(JobDir::new(run_dir, job_id).path()) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let held = state::lock_within(&dir, patience)?;
    Ok(Some((DirLock { _held: dir }, held)))
}

/// Why a running job's node could not be lowered.
#[derive(Debug, thiserror::Error)]
pub enum LowerError {
    /// The job's directory could not be locked.
    #[error("{path}: {source}")]
    Lock {
        /// The job's directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The limit could not be written.
    #[error(transparent)]
    Powercap(#[from] powercap::PowercapError),
}

/// Lower job `job_id`'s node to a long-term limit of `watts` ([`powercap::lower`]) while
/// the job still runs here, under the job directory's lock that [`end`] holds while it
/// restores: a lowering then lands before the epilog's restore or not at all, never after
/// it, where the next job's prolog would save the lowered limit as the node's own.
/// Ok(None) when the job has ended here, or its end holds the lock past `patience` (it
/// is restoring: nothing is lowered, so greenupd keeps the job's watts).
pub fn lower_while_running(
    paths: &NodePaths,
    job_id: u32,
    key: &str,
    watts: f64,
    patience: Duration,
) -> Result<Option<f64>, LowerError> {
    let locked = lock_job_dir(&paths.run_dir, job_id, Some(patience)).map_err(|source| {
        LowerError::Lock {
            path: JobDir::new(&paths.run_dir, job_id).path().to_path_buf(),
            source,
        }
    })?;
    // A job gone from here, or an end that holds the lock past `patience`: not lowered.
    let Some((_lock, true)) = locked else {
        return Ok(None);
    };
    if !state::path(&paths.run_dir, job_id, key).exists() {
        return Ok(None);
    }
    Ok(Some(powercap::lower(&paths.sysfs_root, watts)?))
}

fn load_tally(run_dir: &Path, job_id: u32, key: &str) -> std::io::Result<Option<Tally>> {
    state::load_json(&tally_path(run_dir, job_id, key))
}

/// Count one more reading into the job's energy on this node. Ok(None) once the job has
/// ended here (its saved record is gone); otherwise how long to wait before the next
/// reading, at most `longest`.
pub fn sample(
    paths: &NodePaths,
    job_id: u32,
    key: &str,
    longest: Duration,
) -> Result<Option<Duration>, JobError> {
    let file = tally_path(&paths.run_dir, job_id, key);
    let err = |source| JobError::State {
        path: file.clone(),
        source,
    };
    let Some(_lock) = lock_job_dir(&paths.run_dir, job_id, None).map_err(err)? else {
        return Ok(None);
    };
    let Some(rec) = state::load(&paths.run_dir, job_id, key).map_err(err)? else {
        return Ok(None);
    };
    let mut tally = load_tally(&paths.run_dir, job_id, key)
        .map_err(err)?
        .unwrap_or_else(|| Tally::start(rec.energy_start));
    let reading = meter::rapl::read(&paths.sysfs_root);
    // A reading that fails now may work next time; only the job end's reading is final.
    if reading.problem.is_none() {
        tally.add(reading);
        let json = serde_json::to_vec(&tally).map_err(|e| err(std::io::Error::other(e)))?;
        greenup_core::fs::write_atomic_volatile(&file, &json, 0o666).map_err(err)?;
    }
    Ok(Some(tally.next_wait(longest)))
}

/// Keep counting the job's energy on this node until the job ends here, reading at most
/// `longest` apart and often enough that no counter wraps twice between two readings.
/// The first reading is taken at once (the prolog starts it a second into the job); it
/// looks for the job's end every second, so it is gone soon after the epilog.
pub fn count_until_end(
    paths: &NodePaths,
    job_id: u32,
    key: &str,
    longest: Duration,
) -> Result<(), JobError> {
    let look = meter::tally::SHORTEST_WAIT.min(longest);
    let mut due = Instant::now();
    loop {
        std::thread::sleep(look.min(due.saturating_duration_since(Instant::now())));
        if !state::path(&paths.run_dir, job_id, key).exists() {
            return Ok(());
        }
        if Instant::now() >= due {
            match sample(paths, job_id, key, longest)? {
                Some(next) => due = Instant::now() + next,
                None => return Ok(()),
            }
        }
    }
}

/// Restore what `begin` saved for `key`, measure the energy, and forget the record once
/// everything is restored. Ok(None) when nothing was saved (the job did not use greenup).
pub fn end(paths: &NodePaths, job_id: u32, key: &str) -> Result<Option<NodeOutcome>, JobError> {
    let state_err = |source| JobError::State {
        path: state::path(&paths.run_dir, job_id, key),
        source,
    };
    // Past its patience the end goes ahead without the lock (END_LOCK_PATIENCE).
    let Some(_lock) =
        lock_job_dir(&paths.run_dir, job_id, Some(END_LOCK_PATIENCE)).map_err(state_err)?
    else {
        return Ok(None);
    };
    let Some(rec) = state::load(&paths.run_dir, job_id, key).map_err(state_err)? else {
        return Ok(None);
    };
    let energy_end = meter::rapl::read(&paths.sysfs_root);
    let cf = Cpufreq::new(&paths.sysfs_root);
    let mut problems = Vec::new();
    if let Err(e) = cf.restore(&rec.cpufreq) {
        problems.push(e.to_string());
    }
    if let Err(e) = powercap::restore(&paths.sysfs_root, &rec.powercap) {
        problems.push(e.to_string());
    }
    let restore_error = if problems.is_empty() {
        None
    } else {
        Some(problems.join("; "))
    };
    // The sampler's count so far, if one ran, else the start reading.
    let energy = match load_tally(&paths.run_dir, job_id, key) {
        Ok(tally) => {
            let mut tally = tally.unwrap_or_else(|| Tally::start(rec.energy_start.clone()));
            tally.add(energy_end.clone());
            tally.energy()
        }
        Err(e) => Energy::Unmeasured {
            reason: format!("the running energy count is unreadable: {e}"),
        },
    };
    if restore_error.is_none() {
        let tally = tally_path(&paths.run_dir, job_id, key);
        greenup_core::fs::remove_if_present(&tally).map_err(|source| JobError::State {
            path: tally,
            source,
        })?;
        state::remove(&paths.run_dir, job_id, key).map_err(state_err)?;
    }
    Ok(Some(NodeOutcome {
        job_id,
        node: rec.node.clone(),
        elapsed_s: (energy_end.unix_s - rec.energy_start.unix_s).max(0.0),
        energy,
        applied_khz: rec.applied.as_ref().map(|a: &Applied| a.khz),
        ran_khz: rec
            .applied
            .as_ref()
            .map(|a: &Applied| a.khz)
            .or_else(|| in_force_khz(&rec.cpufreq)),
        note: rec.note,
        restore_error,
        power: rec.power,
    }))
}

/// The frequency CPUs left alone run at under `saved` settings, in kHz: the set speed under
/// the userspace governor, else the policy's upper bound (what performance, ondemand and
/// intel_pstate give a busy CPU), the mean over the policies. This is what a job that
/// greenup did not change (monitor, a baseline sample) ran at, for refinement to scale by.
pub fn in_force_khz(saved: &[PolicySettings]) -> Option<u64> {
    let each: Vec<u64> = saved
        .iter()
        .map(|p| match (p.governor.as_str(), p.setspeed_khz) {
            ("userspace", Some(k)) => k,
            _ => p.max_khz,
        })
        .filter(|k| *k > 0)
        .collect();
    (!each.is_empty()).then(|| {
        let sum: u128 = each.iter().map(|k| u128::from(*k)).sum();
        (sum / each.len() as u128) as u64
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dvfs::cpufreq::tests::tree;
    use crate::meter::rapl::tests::zone;
    use std::fs;

    const FREQS: [u64; 3] = [1_000_000, 2_000_000, 3_000_000];

    fn setup() -> (tempfile::TempDir, NodePaths) {
        let t = tempfile::tempdir().unwrap();
        let sys = t.path().join("sys");
        tree(&sys, 4, "userspace ondemand", &FREQS);
        zone(&sys, 0, "package-0", 900, 1_000);
        let paths = NodePaths {
            sysfs_root: sys,
            run_dir: t.path().join("run"),
        };
        (t, paths)
    }

    fn read(p: &NodePaths, policy: u32, f: &str) -> String {
        fs::read_to_string(
            p.sysfs_root
                .join(format!("devices/system/cpu/cpufreq/policy{policy}/{f}")),
        )
        .unwrap()
        .trim()
        .to_string()
    }

    #[test]
    fn begin_applies_and_end_restores_measures_and_forgets() {
        let (_t, p) = setup();
        let rec = begin(
            &p,
            42,
            "n1",
            "n1",
            &Apply::freq(Some(2_000_000)),
            &Scope::Node,
        )
        .unwrap();
        assert_eq!(rec.note, "applied");
        assert_eq!(read(&p, 3, "scaling_setspeed"), "2000000");
        let saved = state::load(&p.run_dir, 42, "n1").unwrap().unwrap();
        assert_eq!(saved.cpufreq.len(), 4);
        assert_eq!(saved.cpufreq[0].governor, "ondemand");
        // The counter wraps at 1000 uJ: 900 -> 1000 -> 0 -> 250 is 350 uJ.
        fs::write(
            p.sysfs_root.join("class/powercap/intel-rapl:0/energy_uj"),
            "250\n",
        )
        .unwrap();
        let out = end(&p, 42, "n1").unwrap().unwrap();
        assert_eq!(out.energy, Energy::Measured { joules: 350.0e-6 });
        assert_eq!(out.applied_khz, Some(2_000_000));
        assert_eq!(out.restore_error, None);
        assert_eq!(read(&p, 0, "scaling_governor"), "ondemand");
        assert!(!p.run_dir.join("42").exists());
        assert_eq!(end(&p, 42, "n1").unwrap(), None);
    }

    fn set_counter(p: &NodePaths, uj: u64) {
        fs::write(
            p.sysfs_root.join("class/powercap/intel-rapl:0/energy_uj"),
            format!("{uj}\n"),
        )
        .unwrap();
    }

    #[test]
    fn readings_during_the_job_count_every_wrap_and_stop_at_its_end() {
        let (_t, p) = setup();
        let longest = Duration::from_secs(30);
        begin(
            &p,
            43,
            "n1",
            "n1",
            &Apply::freq(Some(2_000_000)),
            &Scope::Node,
        )
        .unwrap();
        // The counter wraps at 1000 uJ three times: 900 -> 400 is 500 uJ, 400 -> 100 is
        // 700 uJ, 100 -> 250 is 150 uJ: 1350 uJ, where start and end alone show 350 uJ.
        set_counter(&p, 400);
        assert!(sample(&p, 43, "n1", longest).unwrap().is_some());
        set_counter(&p, 100);
        assert!(sample(&p, 43, "n1", longest).unwrap().is_some());
        assert!(tally_path(&p.run_dir, 43, "n1").exists());
        set_counter(&p, 250);
        let out = end(&p, 43, "n1").unwrap().unwrap();
        assert_eq!(out.energy, Energy::Measured { joules: 1350.0e-6 });
        // The job has ended here: the sampler stops, and nothing of the job is left.
        assert_eq!(sample(&p, 43, "n1", longest).unwrap(), None);
        count_until_end(&p, 43, "n1", Duration::from_millis(5)).unwrap();
        assert!(!p.run_dir.join("43").exists());
    }

    #[test]
    fn a_meter_stuck_holding_the_lock_does_not_hold_the_job_end() {
        use std::os::fd::AsRawFd;
        let (_t, p) = setup();
        begin(
            &p,
            45,
            "n1",
            "n1",
            &Apply::freq(Some(2_000_000)),
            &Scope::Node,
        )
        .unwrap();
        let held = std::fs::File::open(p.run_dir.join("45")).unwrap();
        // SAFETY: flock on a descriptor this test owns, as a stuck meter would hold it.
        assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) }, 0);
        let out = end(&p, 45, "n1").unwrap().unwrap();
        assert_eq!(out.restore_error, None);
        assert_eq!(read(&p, 0, "scaling_governor"), "ondemand");
        drop(held);
    }

    #[test]
    fn an_unreadable_running_count_is_unmeasured_and_the_node_still_restored() {
        let (_t, p) = setup();
        begin(
            &p,
            44,
            "n1",
            "n1",
            &Apply::freq(Some(2_000_000)),
            &Scope::Node,
        )
        .unwrap();
        fs::write(tally_path(&p.run_dir, 44, "n1"), "{").unwrap();
        assert!(sample(&p, 44, "n1", Duration::from_secs(1)).is_err());
        let out = end(&p, 44, "n1").unwrap().unwrap();
        assert!(
            matches!(&out.energy, Energy::Unmeasured { reason } if reason.starts_with("the running energy count is unreadable")),
            "{:?}",
            out.energy
        );
        assert_eq!(out.restore_error, None);
        assert_eq!(read(&p, 0, "scaling_governor"), "ondemand");
        assert!(!p.run_dir.join("44").exists());
    }

    #[test]
    fn a_second_begin_keeps_the_first_saved_settings() {
        let (_t, p) = setup();
        begin(
            &p,
            7,
            "n1",
            "n1",
            &Apply::freq(Some(1_000_000)),
            &Scope::Node,
        )
        .unwrap();
        let again = begin(
            &p,
            7,
            "n1",
            "n1",
            &Apply::freq(Some(3_000_000)),
            &Scope::Node,
        )
        .unwrap();
        assert_eq!(again.cpufreq[0].governor, "ondemand");
        assert_eq!(read(&p, 0, "scaling_setspeed"), "1000000");
        end(&p, 7, "n1").unwrap();
        assert_eq!(read(&p, 0, "scaling_governor"), "ondemand");
    }

    #[test]
    fn shared_node_records_but_touches_nothing() {
        let (_t, p) = setup();
        let rec = begin(
            &p,
            8,
            "n1",
            "n1",
            &Apply::freq(Some(1_000_000)),
            &Scope::SharedNode,
        )
        .unwrap();
        assert_eq!(rec.note, "not applied: shared node");
        assert_eq!(read(&p, 0, "scaling_governor"), "ondemand");
        let out = end(&p, 8, "n1").unwrap().unwrap();
        assert_eq!(out.applied_khz, None);
        // Which CPUs the job had is unknown here: no frequency is claimed for it.
        assert_eq!(out.ran_khz, None);
        assert!(matches!(out.energy, Energy::Measured { .. }));
    }

    #[test]
    fn a_job_left_alone_reports_the_frequency_its_node_had() {
        let (_t, p) = setup();
        // ondemand with scaling_max_freq 3 GHz: a busy CPU runs at 3 GHz.
        begin(&p, 11, "n1", "n1", &Apply::freq(None), &Scope::Node).unwrap();
        let out = end(&p, 11, "n1").unwrap().unwrap();
        assert_eq!((out.applied_khz, out.ran_khz), (None, Some(3_000_000)));
        // An admin's lower cap on one policy and a set speed on another: 3 GHz on two
        // policies, 2 GHz under the cap and 1 GHz set: (3 + 3 + 2 + 1) / 4 GHz.
        let policy = |i: u32| {
            p.sysfs_root
                .join(format!("devices/system/cpu/cpufreq/policy{i}"))
        };
        fs::write(policy(2).join("scaling_max_freq"), "2000000\n").unwrap();
        fs::write(policy(3).join("scaling_governor"), "userspace\n").unwrap();
        fs::write(policy(3).join("scaling_setspeed"), "1000000\n").unwrap();
        begin(&p, 12, "n1", "n1", &Apply::freq(None), &Scope::Node).unwrap();
        let out = end(&p, 12, "n1").unwrap().unwrap();
        assert_eq!(out.ran_khz, Some(2_250_000));
        // A frequency that could not be set: the node ran at what it had, not the request.
        fs::write(policy(2).join("scaling_max_freq"), "3000000\n").unwrap();
        fs::write(policy(3).join("scaling_governor"), "ondemand\n").unwrap();
        let bad = begin(
            &p,
            13,
            "n1",
            "n1",
            &Apply::freq(Some(1_500_000)),
            &Scope::Node,
        )
        .unwrap();
        assert!(bad.note.starts_with("not applied"), "{}", bad.note);
        let out = end(&p, 13, "n1").unwrap().unwrap();
        assert_eq!((out.applied_khz, out.ran_khz), (None, Some(3_000_000)));
    }

    #[test]
    fn step_cores_only_and_unavailable_frequency_leaves_node_unchanged() {
        let (_t, p) = setup();
        let rec = begin(
            &p,
            9,
            "n1",
            "n1.step0",
            &Apply::freq(Some(1_000_000)),
            &Scope::Cpus(vec![2, 3]),
        )
        .unwrap();
        assert_eq!(rec.applied.unwrap().policies, vec![2, 3]);
        assert_eq!(read(&p, 1, "scaling_governor"), "ondemand");
        assert_eq!(read(&p, 2, "scaling_governor"), "userspace");
        let bad = begin(
            &p,
            10,
            "n1",
            "n1",
            &Apply::freq(Some(1_500_000)),
            &Scope::Node,
        )
        .unwrap();
        assert!(
            bad.note
                .starts_with("not applied: policy0: 1500000 kHz is not offered"),
            "{}",
            bad.note
        );
        assert_eq!(read(&p, 0, "scaling_governor"), "ondemand");
        assert_eq!(read(&p, 2, "scaling_governor"), "userspace");
        assert_eq!(
            crate::dvfs::run_dir::jobs_with_record(&p.run_dir, "n1"),
            vec![10]
        );
        end(&p, 9, "n1.step0").unwrap();
        assert_eq!(read(&p, 2, "scaling_governor"), "ondemand");
    }

    fn with_limits(p: &NodePaths) {
        crate::dvfs::powercap::tests::limits(&p.sysfs_root, 0, 250_000_000, 400_000_000);
    }

    fn limit_file(p: &NodePaths, f: &str) -> String {
        fs::read_to_string(p.sysfs_root.join("class/powercap/intel-rapl:0").join(f))
            .unwrap()
            .trim()
            .to_string()
    }

    const LIMIT: LimitRequest = LimitRequest {
        watts: 180.0,
        window_s: 2.0,
        short_term: Some(powercap::ShortTerm {
            watts: 216.0,
            window_s: 0.01,
        }),
    };

    #[test]
    fn the_power_limit_is_set_held_and_restored_with_the_node() {
        let (_t, p) = setup();
        with_limits(&p);
        let asked = Apply {
            khz: Some(2_000_000),
            power: Some(LIMIT),
        };
        let rec = begin(&p, 50, "n1", "n1", &asked, &Scope::Node).unwrap();
        assert_eq!(
            rec.power,
            Some(PowerHeld::Held {
                asked_w: 180.0,
                held_w: 180.0,
                note: None
            })
        );
        assert_eq!(limit_file(&p, "constraint_0_power_limit_uw"), "180000000");
        assert_eq!(limit_file(&p, "constraint_0_time_window_us"), "2000000");
        assert_eq!(limit_file(&p, "constraint_1_power_limit_uw"), "216000000");
        // The saved record holds the node's limits from before the job.
        let saved = state::load(&p.run_dir, 50, "n1").unwrap().unwrap();
        assert_eq!(saved.powercap[0].limit_uw, 0);
        assert_eq!(saved.powercap[0].window_us, Some(976_562));
        let out = end(&p, 50, "n1").unwrap().unwrap();
        assert_eq!(out.power, rec.power);
        assert_eq!(out.restore_error, None);
        assert_eq!(limit_file(&p, "constraint_0_power_limit_uw"), "0");
        assert_eq!(limit_file(&p, "constraint_0_time_window_us"), "976562");
        assert_eq!(limit_file(&p, "constraint_1_power_limit_uw"), "0");
        assert_eq!(limit_file(&p, "constraint_1_time_window_us"), "2440");
    }

    #[test]
    fn a_lowering_never_lands_while_the_end_restores_nor_after_it() {
        let (_t, p) = setup();
        with_limits(&p);
        let asked = Apply {
            khz: None,
            power: Some(LIMIT),
        };
        begin(&p, 60, "n1", "n1", &asked, &Scope::Node).unwrap();
        // While the job runs, a give-back lowers the node (never raising it).
        let got = lower_while_running(&p, 60, "n1", 100.0, Duration::from_secs(1)).unwrap();
        assert_eq!(got, Some(100.0));
        assert_eq!(limit_file(&p, "constraint_0_power_limit_uw"), "100000000");
        // The epilog's end holds the job's lock while it restores: a lowering sent now
        // waits, then finds the job ended and writes nothing.
        let dir = std::fs::File::open(JobDir::new(&p.run_dir, 60).path()).unwrap();
        assert!(state::lock_within(&dir, None).unwrap());
        let meter = {
            let p = NodePaths {
                sysfs_root: p.sysfs_root.clone(),
                run_dir: p.run_dir.clone(),
            };
            std::thread::spawn(move || {
                lower_while_running(&p, 60, "n1", 50.0, Duration::from_secs(5)).unwrap()
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            limit_file(&p, "constraint_0_power_limit_uw"),
            "100000000",
            "a lowering landed while the end held the lock"
        );
        let saved = state::load(&p.run_dir, 60, "n1").unwrap().unwrap();
        powercap::restore(&p.sysfs_root, &saved.powercap).unwrap();
        state::remove(&p.run_dir, 60, "n1").unwrap();
        drop(dir);
        assert_eq!(meter.join().unwrap(), None);
        assert_eq!(limit_file(&p, "constraint_0_power_limit_uw"), "0");
        // And once the job is gone, nothing is lowered at all.
        assert_eq!(
            lower_while_running(&p, 60, "n1", 50.0, Duration::from_secs(1)).unwrap(),
            None
        );
        assert_eq!(limit_file(&p, "constraint_0_power_limit_uw"), "0");
    }

    #[test]
    fn a_limit_that_cannot_be_written_is_not_held_and_the_frequency_still_applies() {
        let (_t, p) = setup();
        with_limits(&p);
        crate::dvfs::powercap::tests::lock_limit(&p.sysfs_root, 0);
        let asked = Apply {
            khz: Some(2_000_000),
            power: Some(LIMIT),
        };
        let rec = begin(&p, 51, "n1", "n1", &asked, &Scope::Node).unwrap();
        assert_eq!(rec.note, "applied");
        match &rec.power {
            Some(PowerHeld::NotHeld { asked_w, reason }) => {
                assert_eq!(*asked_w, 180.0);
                assert!(reason.contains("write failed"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // The window written before the limit failed is put back at once.
        assert_eq!(limit_file(&p, "constraint_0_time_window_us"), "976562");
        let out = end(&p, 51, "n1").unwrap().unwrap();
        assert!(matches!(out.power, Some(PowerHeld::NotHeld { .. })));
        assert_eq!(out.restore_error, None);
    }

    #[test]
    fn a_shared_node_keeps_its_limit_and_a_job_without_one_saves_none() {
        let (_t, p) = setup();
        with_limits(&p);
        let asked = Apply {
            khz: None,
            power: Some(LIMIT),
        };
        let rec = begin(&p, 52, "n1", "n1", &asked, &Scope::SharedNode).unwrap();
        assert!(
            matches!(&rec.power, Some(PowerHeld::NotHeld { reason, .. }) if reason.starts_with("shared node")),
            "{:?}",
            rec.power
        );
        assert!(rec.powercap.is_empty());
        assert_eq!(limit_file(&p, "constraint_0_power_limit_uw"), "0");
        end(&p, 52, "n1").unwrap();
        let rec = begin(&p, 53, "n1", "n1", &Apply::freq(None), &Scope::Node).unwrap();
        assert_eq!((rec.power, rec.powercap.len()), (None, 0));
    }

    #[test]
    fn a_record_from_before_power_limits_still_ends() {
        let (_t, p) = setup();
        begin(&p, 54, "n1", "n1", &Apply::freq(None), &Scope::Node).unwrap();
        // Strip the record to what an older plugin wrote: no power field.
        let file = state::path(&p.run_dir, 54, "n1");
        let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("power");
        v["powercap"] = serde_json::json!([{"zone": "intel-rapl:0", "limit_uw": 0}]);
        fs::write(&file, serde_json::to_vec(&v).unwrap()).unwrap();
        let out = end(&p, 54, "n1").unwrap().unwrap();
        assert_eq!((out.power, out.restore_error), (None, None));
    }
}
