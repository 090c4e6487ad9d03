//! job_epilog on each node (slurmd, as root): restore every saved setting, measure what
//! the job used (CPUs and GPUs), report it to greenupd or spool it, and write the job's
//! report where it asked. Every failure is logged; nothing here fails the epilog.

use std::time::Duration;

use greenup::comm::{self, NodeComm};
use greenup::record::{JobEnd, NodePower, Source};
use greenup::site::Site;
use greenup::site::node::NodeConfig;
use greenup_core::quantity::{Ghz, Joules, Seconds, Watts};
use greenup_platform::dvfs::cpufreq::Cpufreq;
use greenup_platform::dvfs::job::{self as dvfs_job, NodePaths};
use greenup_platform::dvfs::lend;
use greenup_platform::dvfs::powercap::PowerHeld;
use greenup_platform::dvfs::run_dir::JobDir;
use greenup_platform::meter::Energy;
use greenup_proto::client::{Client, ClientError};
use greenup_proto::protocol::{JobRecord, NodeOutcome as WireOutcome};

use crate::args::Args;
use crate::end;
use crate::job_env::{JobEnv, Level, Log};
use crate::node::{EPILOG_SPOOL, connect, deliver_spool, node_paths, saved_decision, settings_for};
use crate::phases::Phases;
use crate::spool;

/// Take back everything [`crate::prolog::start_comm`] lent on this node and read what the ranks left:
/// the speed control first (before the epilog restores the values, so the user cannot
/// write after the restore), then the directory (root's before it is read).
pub(crate) fn end_comm(paths: &NodePaths, job: &JobEnv, keys: &[String], log: Log) {
    for key in keys {
        if let Err(e) = lend::take_back(paths, job.job_id, key) {
            log(
                Level::Warning,
                &format!(
                    "greenup: job {} on {key}: cpufreq control not taken back: {e}",
                    job.job_id
                ),
            );
        }
    }
}

/// What the job's MPI ranks on this node measured; the directory is removed after.
pub(crate) fn read_comm(
    paths: &NodePaths,
    job: &JobEnv,
    elapsed_s: f64,
    log: Log,
) -> Option<NodeComm> {
    let dir = JobDir::new(&paths.run_dir, job.job_id);
    let stats = dir.mpi_stats(&job.node);
    let _ = std::fs::remove_file(dir.comm(&job.node));
    let _ = std::fs::remove_file(dir.guard(&job.node));
    // Why the prolog left this node unguarded, if it did: the report says so.
    let guard_off = std::fs::read(dir.guard_off(&job.node))
        .ok()
        .and_then(|w| serde_json::from_slice::<comm::GuardOff>(&w).ok());
    let _ = std::fs::remove_file(dir.guard_off(&job.node));
    let read = match lend::close_stats_dir(&stats) {
        Ok(false) => return None,
        Ok(true) => comm::read_node(&stats, elapsed_s).map_err(|e| e.to_string()),
        Err(e) => Err(format!("{}: {e}", stats.display())),
    };
    if let Err(e) = lend::remove_stats_dir(&stats) {
        log(
            Level::Warning,
            &format!(
                "greenup: job {} on {}: {}: {e}",
                job.job_id,
                job.node,
                stats.display()
            ),
        );
    }
    let mut comm = read.unwrap_or_else(|e| {
        log(
            Level::Warning,
            &format!(
                "greenup: job {} on {}: MPI measurements refused: {e}",
                job.job_id, job.node
            ),
        );
        None
    })?;
    if comm.guard.is_none() {
        comm.guard = guard_off.map(|o| Box::new(comm::NodeGuard::off(o)));
    }
    // The report's estimate of what lowering saved spreads the node's power over these.
    comm.cpus = Cpufreq::new(&paths.sysfs_root)
        .cpu_count()
        .ok()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0);
    Some(comm)
}

/// The --energy-report paragraph: the job's report, as `greenup report` builds it, from
/// the decision and the outcomes stored so far.
pub fn report_line(rec: &JobRecord, site: &Site) -> String {
    let ctx = greenup::report::record::Context {
        site: Some(site),
        // `greenup report JOBID` reads Slurm's figure once the job has ended.
        slurm_energy: greenup::report::accounting::SlurmEnergy::in_job_epilog(),
        ..Default::default()
    };
    greenup::report::paragraph::energy_paragraph(&greenup::report::record::from_record(rec, &ctx))
}

/// Fill in the `%j` (job id) and `%u` (user) of an output file pattern; other patterns stay.
pub fn expand_output_pattern(path: &str, job: &JobEnv) -> String {
    let mut p = path
        .replace("%j", &job.job_id.to_string())
        .replace("%A", &job.job_id.to_string());
    if let Some(u) = &job.user {
        p = p.replace("%u", u);
    }
    p
}

/// Append `line` to the job's stderr file as the job's owner (never as root, so a
/// link in the user's directory cannot point the write elsewhere).
fn write_report(job: &JobEnv, line: &str, log: Log) {
    let Some(path) = std::env::var("SLURM_JOB_STDERR")
        .ok()
        .or_else(|| std::env::var("SLURM_JOB_STDOUT").ok())
    else {
        return;
    };
    let path = expand_output_pattern(&path, job);
    if path.contains('%') || !path.starts_with('/') {
        return;
    }
    let (Ok(cpath), Ok(text)) = (
        std::ffi::CString::new(path),
        std::ffi::CString::new(format!("{line}\n")),
    ) else {
        return;
    };
    let gid = std::env::var("SLURM_JOB_GID")
        .ok()
        .and_then(|g| g.parse::<u32>().ok())
        .unwrap_or(job.uid);
    // SAFETY: fork in this single-threaded epilog process; the child only makes
    // async-signal-safe calls (setgroups, setgid, setuid, open, write, _exit).
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            let ok = libc::setgroups(0, std::ptr::null()) == 0
                && libc::setgid(gid) == 0
                && libc::setuid(job.uid) == 0;
            if ok {
                let fd = libc::open(
                    cpath.as_ptr(),
                    libc::O_WRONLY | libc::O_APPEND | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                );
                if fd >= 0 {
                    let b = text.as_bytes();
                    let _ = libc::write(fd, b.as_ptr().cast(), b.len());
                    libc::close(fd);
                }
            }
            libc::_exit(0);
        } else if pid > 0 {
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        } else {
            log(
                Level::Info,
                &format!(
                    "greenup: job {}: report not written (fork failed)",
                    job.job_id
                ),
            );
        }
    }
}

/// How long the closing node waits for slurmctld to say how the job ended.
const SCONTROL_LIMIT: Duration = Duration::from_millis(1500);

/// How long the closing node waits for the other nodes' outcomes before it closes.
const OUTCOMES_WAIT: Duration = Duration::from_secs(1);

/// The outcome as greenupd stores it.
pub fn wire_outcome(
    job: &JobEnv,
    o: &dvfs_job::NodeOutcome,
    comm: Option<NodeComm>,
) -> WireOutcome {
    let (energy_j, source, mut note) = match &o.energy {
        Energy::Measured { joules } => (Some(*joules), Some(Source::Rapl), o.note.clone()),
        Energy::Unmeasured { reason } => (None, None, format!("{}; unmeasured: {reason}", o.note)),
    };
    if let Some(err) = &o.restore_error {
        note.push_str(&format!("; restore incomplete: {err}"));
    }
    WireOutcome {
        restart_count: job.restart_count,
        comm,
        job_id: u64::from(job.job_id),
        node: o.node.clone(),
        freq_ghz: o.ran_khz.map(|k| Ghz(k as f64 / 1.0e6)),
        energy_j: energy_j.map(Joules),
        elapsed_s: Some(Seconds(o.elapsed_s)),
        source,
        restored: o.restore_error.is_none(),
        note: Some(note),
        gpu: None,
        power: o.power.as_ref().map(|p| match p {
            PowerHeld::Held {
                asked_w,
                held_w,
                note,
            } => NodePower {
                asked_w: Watts(*asked_w),
                held_w: Some(Watts(*held_w)),
                note: note.clone(),
            },
            PowerHeld::NotHeld { asked_w, reason } => NodePower {
                asked_w: Watts(*asked_w),
                held_w: None,
                note: Some(reason.clone()),
            },
        }),
    }
}

/// What the node's saved settings say greenupd does at a job's end.
#[derive(Debug, Clone, Copy)]
struct Told {
    /// greenupd asks Slurm itself how a job claimed completed really ended.
    settled: bool,
    /// greenupd takes the node's outcomes, and the first node's close, in one `end_node`.
    ends_in_one: bool,
}

/// Send this node's outcomes and, on the job's first node, the close with how the job
/// ended. What greenupd cannot take now goes to the node's spool.
fn report_end(
    site: &NodeConfig,
    job: &JobEnv,
    outcomes: &[(dvfs_job::NodeOutcome, Option<NodeComm>)],
    (gpu, gpu_power): (Option<greenup::record::NodeGpu>, Option<NodePower>),
    told: Told,
    phases: &mut Phases,
    log: Log,
) {
    // Only the first node closes: it runs the batch script, so slurmctld knows the
    // script's end by the time this epilog runs. A node a shrink released runs its epilog
    // while the job goes on; slurmctld then says RUNNING and nothing is closed.
    let closer = job.nodes.first() == Some(&job.node);
    let wire: Vec<WireOutcome> = outcomes
        .iter()
        .map(|(o, c)| {
            let mut w = wire_outcome(job, o, c.clone());
            if o.node == job.node {
                w.gpu = gpu.clone().map(Box::new);
                w.power = crate::gpu::node_power(w.power.take(), gpu_power.clone());
            }
            w
        })
        .collect();
    let job_id = u64::from(job.job_id);
    let sent = connect(site).map_err(|e| e.to_string()).and_then(|mut c| {
        let mut known = None;
        if told.ends_in_one {
            // The first node's close travels with its outcomes when greenupd settles the
            // claim and no report is written first (the report reads the whole record):
            // greenupd takes it only once every node has reported.
            let close =
                (closer && told.settled && !job.options.report).then(|| end::claim(job.exit));
            let counted = close.is_some();
            let r = c
                .end_node(job_id, wire.clone(), close, job.restart_count)
                .map_err(|e| e.to_string())?;
            phases.mark("outcome");
            if !closer || r.closed {
                return Ok(c);
            }
            // greenupd counts only an end that carries the close.
            known = counted.then_some((r.outcomes, Some(r.nodes)));
        } else {
            for o in &wire {
                c.record_outcome(o.clone()).map_err(|e| e.to_string())?;
            }
            phases.mark("outcome");
            if !closer {
                return Ok(c);
            }
        }
        let waited = wait_for_outcomes(&mut c, job_id, job.nodes.len(), known);
        phases.mark("wait");
        // Every node has reported, so the job has ended on all of them: no shrink
        // released this node while the job runs on, and greenupd settles the claim.
        let everywhere = matches!(waited, Ok(true));
        let ended = how_it_ended(job, told.settled && everywhere);
        phases.mark("slurmctld");
        let Some(end) = ended else {
            return Ok(c);
        };
        if job.options.report {
            let rec = waited
                .and_then(|_| c.get_job(job_id))
                .map_err(|e| e.to_string());
            // The report names node types and their speeds: the whole site config.
            let full = greenup::site::load(&site.path).map_err(|e| e.to_string());
            match rec.and_then(|rec| full.map(|full| (rec, full))) {
                Ok((rec, full)) => write_report(job, &report_line(&rec, &full), log),
                Err(e) => log(
                    Level::Warning,
                    &format!("greenup: job {}: no report: {e}", job.job_id),
                ),
            }
        }
        c.close_job(job_id, Some(end), job.restart_count)
            .map_err(|e| e.to_string())?;
        phases.mark("close");
        Ok(c)
    });
    match sent {
        Ok(mut c) => {
            deliver_spool(site, job, &mut c, EPILOG_SPOOL, log);
            phases.mark("spool");
        }
        Err(e) => {
            // greenupd cannot settle what it does not hear: the entry says how the job
            // ended as slurmctld tells it now.
            let ended = if closer {
                how_it_ended(job, false)
            } else {
                None
            };
            let close = closer && ended.is_some();
            let entry = spool::Entry {
                job_id,
                node: job.node.clone(),
                outcomes: wire,
                close,
                end: ended.filter(|_| close),
                restart_count: job.restart_count,
                spooled_at: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs() as i64)
                    .unwrap_or(0),
            };
            let dir = spool::dir_for(&site.daemon.spool_dir, &job.node);
            let what = if close {
                "outcome and close"
            } else {
                "outcome"
            };
            match spool::save(&dir, &entry) {
                Ok(path) => log(
                    Level::Warning,
                    &format!(
                        "greenup: job {} on {}: {what} kept in {} until greenupd answers: {e}",
                        job.job_id,
                        job.node,
                        path.display()
                    ),
                ),
                Err(s) => log(
                    Level::Warning,
                    &format!(
                        "greenup: job {} on {}: {what} not stored ({e}) and not spooled: {s}",
                        job.job_id, job.node
                    ),
                ),
            }
        }
    }
}

/// How the job ended, as its first node tells greenupd; `None` while it still runs (a
/// shrink released this node). With `settled` (greenupd settles a claimed completion
/// against Slurm's final record, and every node has reported) the environment's status
/// is enough ([`end::claim`]); otherwise slurmctld is asked as well, an `scontrol` run
/// of about 10 ms.
fn how_it_ended(job: &JobEnv, settled: bool) -> Option<JobEnd> {
    if settled {
        return Some(end::claim(job.exit));
    }
    end::classify(
        job.exit,
        end::ask_slurmctld(job.job_id, SCONTROL_LIMIT).as_ref(),
    )
}

/// Wait until all `nodes` of the job have an outcome stored, or [`OUTCOMES_WAIT`] passed:
/// the other nodes' epilogs run at the same time, and a close makes greenupd learn from
/// the outcomes it has. Each poll is a count, the same size however large the job;
/// `known` is a count greenupd already gave (with `end_node`'s answer), taken as the first.
/// Whether every node greenupd opened the job with has reported: only then has the job
/// ended everywhere (the environment of a node a shrink released lists only the nodes
/// released with it). Always `false` from an older greenupd, which does not say.
pub fn wait_for_outcomes(
    c: &mut Client,
    job_id: u64,
    nodes: usize,
    mut known: Option<(u64, Option<u64>)>,
) -> Result<bool, ClientError> {
    let started = std::time::Instant::now();
    loop {
        let (n, opened) = match known.take() {
            Some(k) => k,
            None => c.outcomes_of(job_id)?,
        };
        // A job opened without its node list cannot say that every node reported.
        let opened = opened.filter(|&o| o > 0);
        let everywhere = opened.is_some_and(|o| n >= o);
        if everywhere || (opened.is_none() && n >= nodes as u64) {
            return Ok(everywhere);
        }
        if started.elapsed() >= OUTCOMES_WAIT {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The epilog: restore every saved setting, measure, and report to greenupd.
pub fn epilog(args: &Args, job: &JobEnv, log: Log) {
    let started = std::time::Instant::now();
    let mut phases = Phases::start();
    let Some(site) = settings_for(args, job, "cannot restore", log) else {
        return;
    };
    let paths = node_paths(args, &site, &job.node);
    phases.mark("site");
    let mut outcomes = Vec::new();
    // The node's own record, then any step records a crashed step left behind.
    let dir = JobDir::new(&paths.run_dir, job.job_id);
    let mut keys = vec![job.node.clone()];
    keys.extend(dir.step_keys(&job.node));
    end_comm(&paths, job, &keys, log);
    for key in &keys {
        match dvfs_job::end(&paths, job.job_id, key) {
            Ok(Some(o)) => {
                if let Some(err) = &o.restore_error {
                    log(
                        Level::Warning,
                        &format!(
                            "greenup: job {} on {}: restore incomplete: {err}",
                            job.job_id, key
                        ),
                    );
                }
                if key == &job.node {
                    let comm = read_comm(&paths, job, o.elapsed_s, log);
                    outcomes.push((o, comm));
                }
            }
            Ok(None) => {}
            Err(e) => log(
                Level::Warning,
                &format!(
                    "greenup: job {} on {}: cannot read saved settings: {e}",
                    job.job_id, key
                ),
            ),
        }
    }
    phases.mark("restore");
    if let Some(line) = crate::gpu::settle(&paths.run_dir, job) {
        log(
            Level::Info,
            &format!("greenup: job {} on {}: {line}", job.job_id, job.node),
        );
    }
    let saved = saved_decision(&paths.run_dir, job.job_id, &job.node);
    let part = saved.as_ref().and_then(|d| d.gpu_power);
    let (gpu, gpu_power) = crate::gpu::end_held(&site, &paths.run_dir, job, part);
    let decided = saved.is_some();
    let told = Told {
        settled: saved.as_ref().is_some_and(|d| d.asks_slurm_end),
        ends_in_one: saved.as_ref().is_some_and(|d| d.ends_in_one),
    };
    phases.mark("gpu");
    if decided {
        report_end(
            &site,
            job,
            &outcomes,
            (gpu, gpu_power),
            told,
            &mut phases,
            log,
        );
    }
    for f in [
        dir.warning(&job.node),
        dir.decision(&job.node),
        dir.warned(&job.node),
    ] {
        let _ = std::fs::remove_file(f);
    }
    dir.remove_if_empty();
    phases.mark("files");
    if decided {
        log(
            Level::Info,
            &format!(
                "greenup: job {} on {}: restored and reported (epilog {:.2} ms) ({phases})",
                job.job_id,
                job.node,
                started.elapsed().as_secs_f64() * 1e3
            ),
        );
    }
}

#[cfg(test)]
mod report_tests {
    use super::*;
    use crate::node::test_cluster_site;

    #[test]
    fn report_sums_measured_nodes_and_names_unmeasured_ones() {
        let site = test_cluster_site();
        let node = |n: &str, ty: &str| serde_json::json!({"name": n, "type": ty, "freq_ghz": 2.2});
        let rec: JobRecord = serde_json::from_value(serde_json::json!({
            "job_id": 5, "uid": 1001, "user": "alice", "partition": "debug", "state": "open",
            "end": null, "opened_at": 0, "closed_at": null,
            "request": {"job_id": 5, "uid": 1001, "nodes": ["n1", "n2", "n3"], "policy": "max-dist"},
            "decision": {"job_id": 5, "verdict": "planned", "reason": "", "policy": "max-dist",
                "profile": "solver", "profile_version": "1", "power_cap_w": null, "reserved_w": 0.0,
                "plan": {"policy": "max-dist", "feasible": true, "reason": "", "node_count": 3,
                    "nodes": [node("n1", "fast"), node("n2", "fast"), node("n3", "eco")],
                    "predicted": {"time_s": 100.0, "energy_j": 30000.0, "avg_power_w": 300.0},
                    "baseline": {"time_s": 90.0, "energy_j": 36000.0, "avg_power_w": 400.0},
                    "objective": 0.1, "search": {"algorithm": "exact", "candidates": 1, "elapsed_us": 1}},
                "decided_at": 0},
            "outcomes": [
                {"job_id": 5, "node": "n1", "freq_ghz": 2.2, "energy_j": 1000.0, "elapsed_s": 9.5, "source": "rapl", "restored": true},
                {"job_id": 5, "node": "n2", "freq_ghz": 2.2, "energy_j": 500.0, "elapsed_s": 10.0, "source": "rapl", "restored": true},
                {"job_id": 5, "node": "n3", "restored": true}
            ]
        }))
        .unwrap();
        let line = report_line(&rec, &site);
        assert!(
            line.starts_with("greenup: job 5 (solver v1, policy max-dist) ran on 3 of 3 allocated nodes at 2.20 GHz."),
            "{line}"
        );
        // One node has no meter: no job total is printed, and the node is named.
        assert!(line.contains("Measured by rapl, n3 unmeasured"), "{line}");
        assert!(
            line.contains(
                "Slurm ConsumedEnergy: not available (Slurm accounting is final only after the job ends)"
            ),
            "{line}"
        );
        assert!(
            !line.contains("1.50 kJ"),
            "a partial sum is never the total: {line}"
        );
        assert!(line.ends_with("Details: greenup report 5"), "{line}");
    }
}

#[cfg(test)]
mod guard_tests {
    use super::*;
    use greenup::comm::{GuardOff, RankStats};

    #[test]
    fn a_node_the_prolog_left_unguarded_says_why_in_its_summary() {
        let t = tempfile::tempdir().unwrap();
        let paths = NodePaths {
            sysfs_root: t.path().join("sys"),
            run_dir: t.path().join("run"),
        };
        let mut job = JobEnv::from_slurm_vars(
            |k| {
                match k {
                    "SLURM_JOB_ID" => Some("7"),
                    "SLURM_JOB_UID" => Some("0"),
                    "SLURMD_NODENAME" => Some("n1"),
                    "SLURM_JOB_NODELIST" => Some("n1"),
                    _ => None,
                }
                .map(str::to_string)
            },
            0,
        )
        .unwrap();
        // SAFETY: getuid takes nothing.
        let uid = unsafe { libc::getuid() };
        job.uid = uid;
        let stats = lend::make_stats_dir(&paths.run_dir, 7, "n1", uid, uid).unwrap();
        let rank = RankStats {
            rank: 0,
            wall_s: Seconds(1.0),
            mpi_s: Seconds(0.5),
            bytes: 0,
            calls: 2,
            sync_calls: 2,
            low_s: Seconds(0.0),
            transitions: 0,
            saved_j: None,
            complete: true,
            errors: 0,
            guard: None,
            steps: None,
        };
        comm::write_rank(&stats, &rank).unwrap();
        let dir = JobDir::new(&paths.run_dir, 7);
        dir.create().unwrap();
        std::fs::write(dir.guard_off("n1"), "\"no_control\"").unwrap();
        let log = |_: Level, _: &str| {};
        let c = read_comm(&paths, &job, 10.0, &log).unwrap();
        let g = c.guard.unwrap();
        assert_eq!((g.armed, g.acted), (0, 0));
        assert_eq!(g.off.as_deref(), Some(GuardOff::NoControl.why()));
        assert!(!dir.guard_off("n1").exists(), "removed once read");
    }
}
