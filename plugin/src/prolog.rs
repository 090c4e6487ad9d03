//! job_prolog on each node (slurmd, as root): ask greenupd for the job's decision, save
//! and apply this node's frequency and power limit, hand the job's GPUs to their worker,
//! start the meter. Every failure is logged and the job runs unchanged; nothing here
//! fails the prolog, so greenup never drains a node (under `enforce: strict` the job's
//! steps fail instead, see [`crate::step::enforce`]).

use std::path::Path;

use greenup::comm::CommDvfs;
use greenup::policy::RuntimeAsk;
use greenup::site::node::NodeConfig;
use greenup::site::{Enforce, PowerSettings};
use greenup_core::quantity::{Ghz, Joules, Watts};
use greenup_platform::dvfs::cpufreq::{Cpufreq, ghz_to_khz};
use greenup_platform::dvfs::job::{self as dvfs_job, Apply, NodePaths, Scope};
use greenup_platform::dvfs::lend;
use greenup_platform::dvfs::powercap::{LimitRequest, PowerHeld, ShortTerm};
use greenup_platform::dvfs::run_dir::JobDir;
use greenup_proto::client::{Client, ClientError};
use greenup_proto::protocol::{NodeSettings, OpenJob, Request, Verdict};

use crate::args::Args;
use crate::job_env::{JobEnv, Level, Log};
use crate::node::{
    PROLOG_SPOOL, connect, deliver_spool, node_paths, settings_for, site_timeout, warn,
};
use crate::phases::Phases;
use crate::slurm_env;

/// Why a node got no settings from greenupd; the prolog then runs the job unchanged
/// (or fails it under `enforce: strict`).
#[derive(Debug, thiserror::Error)]
pub enum AskSettingsError {
    /// greenupd could not be reached, did not answer, or refused the request.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// greenupd answered, but not with settings (a greenupd of another version).
    #[error("greenupd answered a start with something else")]
    UnexpectedReply,
}

/// Whether the job holds every CPU of this node (then every CPU is set in the prolog).
pub(crate) fn holds_whole_node(job: &JobEnv, sysfs_root: &Path) -> bool {
    let Some(held) = job
        .cpus_per_node
        .as_deref()
        .and_then(|c| slurm_env::cpus_on_node(&job.nodes, c, &job.node))
    else {
        return false;
    };
    let Ok(total) = Cpufreq::new(sysfs_root).cpu_count() else {
        return false;
    };
    total > 0 && held as usize >= total
}

/// What the prolog asks greenupd for `job` under `policy`: this node's settings, the
/// job's nodes named by Slurm's compressed hostlist, so the request is the same size
/// however many nodes the job has.
/// `power` (the site's `power:` section) reads the job's grant from its licenses.
pub fn start_request(job: &JobEnv, policy: String, power: &PowerSettings) -> Request {
    Request::StartNode {
        node: job.node.clone(),
        job: open_request(job, policy, power),
    }
}

/// The policy greenupd is asked to decide `job` under: the job's own, else the site's
/// default; `None` where that is `none` (greenup leaves the job alone).
pub fn policy_for(job: &JobEnv, site: &NodeConfig) -> Option<String> {
    let policy = job
        .options
        .policy
        .clone()
        .unwrap_or_else(|| site.default_policy.clone());
    (!policy.is_empty() && policy != "none").then_some(policy)
}

/// The job as the prolog describes it to greenupd under `policy`.
pub(crate) fn open_request(job: &JobEnv, policy: String, power: &PowerSettings) -> OpenJob {
    // A count Slurm would not write leaves the grant unknown: greenupd then plans under
    // its ledger, as for a job submitted before the queue held power.
    let granted_w = job.licenses.as_deref().and_then(|l| {
        greenup::power::granted_w(power, job.partition.as_deref(), l, job.nodes.len())
            .ok()
            .flatten()
    });
    OpenJob {
        restart_count: job.restart_count,
        job_id: u64::from(job.job_id),
        uid: job.uid,
        user: job.user.clone(),
        partition: job.partition.clone(),
        account: job.account.clone(),
        nodes: Vec::new(),
        nodelist: Some(job.nodelist.clone()),
        // Without --energy-min-nodes the plan uses every allocated node: a job that asked
        // for N nodes may count on them.
        min_nodes: job.options.min_nodes.map(|m| m.min(job.nodes.len())),
        // None where Slurm does not tell the prolog: greenupd then asks slurmctld, once.
        time_limit: job.time_limit,
        policy: Some(policy),
        profile: job.options.profile.clone(),
        energy_cap_j: job.options.energy_cap_j.map(Joules),
        power_cap_w: job.options.power_cap_w.map(Watts),
        algorithm: None,
        granted_w,
    }
}

/// The power limits a node sets for `limit_w`, its share of the job's watts, with the
/// site's windows and short-term multiple; None when the decision asks for none.
pub fn power_request(limit_w: Option<Watts>, power: &PowerSettings) -> Option<LimitRequest> {
    let watts = limit_w?.0;
    Some(LimitRequest {
        watts,
        window_s: power.rapl_window_s,
        short_term: power.short_term.map(|m| ShortTerm {
            watts: watts * m,
            window_s: power.short_window_ms / 1e3,
        }),
    })
}

/// Save this node's settings and apply what decision `d` asks of it (none: nothing):
/// its frequency and, for every verdict (a refused job runs unmanaged but within its
/// grant), its power limit. What could not be set is warned about, which under
/// `enforce: strict` fails the job's steps here.
pub fn apply_settings(
    paths: &NodePaths,
    site: &NodeConfig,
    job: &JobEnv,
    d: Option<&NodeSettings>,
    scope: &Scope,
    log: Log,
) -> Result<greenup_platform::dvfs::state::NodeRecord, dvfs_job::JobError> {
    let asked = d.map_or_else(Apply::default, |d| Apply {
        khz: d.freq_ghz.and_then(|f| ghz_to_khz(f.0)),
        power: power_request(d.power_limit_w, &site.power),
    });
    let rec = dvfs_job::begin(paths, job.job_id, &job.node, &job.node, &asked, scope)?;
    if asked.khz.is_some() && rec.applied.is_none() && *scope == Scope::Node {
        warn(log, &paths.run_dir, job, &format!("frequency {}", rec.note));
    }
    match &rec.power {
        // A shared node's limit is not the job's to set: said in the report only.
        Some(PowerHeld::NotHeld { asked_w, reason }) if *scope == Scope::Node => {
            let then = if site.enforce == Enforce::Strict {
                "the job will fail (enforce: strict)"
            } else {
                "the job runs, this node not held"
            };
            warn(
                log,
                &paths.run_dir,
                job,
                &format!("power limit of {asked_w:.1} W not set, {then}: {reason}"),
            );
        }
        Some(PowerHeld::Held { held_w, note, .. }) => log(
            Level::Info,
            &format!(
                "greenup: job {} on {}: power limit held at {held_w:.1} W{}",
                job.job_id,
                job.node,
                note.as_deref()
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default()
            ),
        ),
        _ => {}
    }
    Ok(rec)
}

/// The prolog: decide (through greenupd), save, apply. Never fails the prolog.
pub fn prolog(args: &Args, job: &JobEnv, log: Log) {
    let started = std::time::Instant::now();
    let mut phases = Phases::start();
    let Some(site) = settings_for(args, job, "job runs unchanged", log) else {
        return;
    };
    let paths = node_paths(args, &site, &job.node);
    let Some(policy) = policy_for(job, &site) else {
        return;
    };
    let request = start_request(job, policy, &site.power);
    phases.mark("site");
    let asked = std::time::Instant::now();
    let mut client = None;
    let decision = connect(&site)
        .map_err(AskSettingsError::from)
        .and_then(|mut c| {
            let d = ask_settings(&mut c, &request);
            client = Some(c);
            d
        });
    let daemon_ms = asked.elapsed().as_secs_f64() * 1e3;
    phases.mark("greenupd");
    let decided = match &decision {
        Ok(d) => {
            if let Ok(json) = serde_json::to_vec(d) {
                let dir = JobDir::new(&paths.run_dir, job.job_id);
                let _ = dir.create();
                let _ =
                    greenup_core::fs::write_atomic_volatile(&dir.decision(&job.node), &json, 0o666);
            }
            if d.verdict == Verdict::Refused {
                warn(
                    log,
                    &paths.run_dir,
                    job,
                    &format!(
                        "greenupd refused a decision, job runs unchanged: {}",
                        d.reason
                    ),
                );
            }
            Some(d)
        }
        Err(e) => {
            let what = if site.enforce == Enforce::Strict {
                "the job will fail (enforce: strict)"
            } else {
                "job runs unchanged"
            };
            warn(
                log,
                &paths.run_dir,
                job,
                &format!("no decision from greenupd, {what}: {e}"),
            );
            None
        }
    };
    phases.mark("save");
    let scope = if holds_whole_node(job, &paths.sysfs_root) {
        Scope::Node
    } else {
        Scope::SharedNode
    };
    match apply_settings(&paths, &site, job, decided, &scope, log) {
        Ok(rec) => {
            phases.mark("apply");
            let gpus = crate::gpu::Asked::of(decided);
            // NVML's start alone takes about 10 ms on a real driver: the worker does the
            // GPUs while the prolog returns. Without one, the prolog does them itself.
            let handed = args
                .meter
                .as_deref()
                .map(|w| crate::gpu::hand_off(w, &site, &paths.run_dir, job, gpus));
            let (gpu_warning, gpu_note) = match handed {
                Some(Ok(_)) => (None, None),
                Some(Err(e)) => {
                    let (w, n) = crate::gpu::start(&site, &paths.run_dir, job, gpus);
                    let why = format!("GPU start not handed to a worker ({e}), done here");
                    (w, Some(n.map_or(why.clone(), |n| format!("{why}; {n}"))))
                }
                None => crate::gpu::start(&site, &paths.run_dir, job, gpus),
            };
            if let Some(w) = gpu_warning {
                warn(log, &paths.run_dir, job, &w);
            }
            if let Some(n) = gpu_note {
                log(
                    Level::Info,
                    &format!("greenup: job {} on {}: {n}", job.job_id, job.node),
                );
            }
            phases.mark("gpu");
            if !rec.energy_start.zones.is_empty() {
                start_meter(args, &paths, job, &site, log);
            }
            phases.mark("meter");
            // Whatever this job asks, no other job's user keeps the speed control of
            // CPUs this job now shares.
            match lend::revoke_shared(&paths, job.job_id, &job.node, &scope) {
                Ok(jobs) if !jobs.is_empty() => log(
                    Level::Warning,
                    &format!(
                        "greenup: job {} on {}: took back the cpufreq control lent to job(s) {jobs:?}, which share this node",
                        job.job_id, job.node
                    ),
                ),
                Ok(_) => {}
                Err(e) => log(
                    Level::Warning,
                    &format!(
                        "greenup: job {} on {}: cannot take back another job's cpufreq control: {e}",
                        job.job_id, job.node
                    ),
                ),
            }
            let settings = decision.as_ref().ok();
            let ask = RuntimeAsk::of(settings, job.options.comm, site.dvfs.measure_baselines);
            if let Some(rt) = greenup::policy::runtime_for_job(&ask) {
                let plan_khz = settings
                    .and_then(|d| d.freq_ghz)
                    .and_then(|f| ghz_to_khz(f.0));
                let guard = rt.guard.map(|t| (t, plan_khz));
                let note = start_comm(&paths, job, &scope, rt.comm, guard);
                log(
                    Level::Info,
                    &format!("greenup: job {} on {}: {note}", job.job_id, job.node),
                );
            }
            phases.mark("runtime");
            // greenupd answered: send a little of this node's backlog along, within the bound.
            if let (Some(c), Ok(_)) = (client.as_mut(), &decision) {
                deliver_spool(&site, job, c, PROLOG_SPOOL, log);
            }
            phases.mark("spool");
            log(
                Level::Info,
                &format!(
                    "greenup: job {} on {}: {} (greenupd {:.2} ms) (prolog {:.2} ms) ({phases})",
                    job.job_id,
                    job.node,
                    rec.note,
                    daemon_ms,
                    started.elapsed().as_secs_f64() * 1e3
                ),
            );
        }
        Err(e) => warn(
            log,
            &paths.run_dir,
            job,
            &format!("cannot save settings, nothing changed: {e}"),
        ),
    }
}

/// Prepare communication-phase DVFS for the job's MPI ranks on this node: their
/// measurement directory (the job user's), the cores' speed control lent to the user
/// where `comm` lowers frequencies and the job holds whole policies, and the settings the
/// job's MPI steps hand to the runtime (`NODE.comm.json`), and with `guard` (the
/// decision's guard terms and the plan's clock in kHz) the in-job guard's settings
/// (`NODE.guard.json`), its f_max the lent CPUs' ceiling. Returns what was done.
pub(crate) fn start_comm(
    paths: &NodePaths,
    job: &JobEnv,
    scope: &Scope,
    mut comm: CommDvfs,
    guard: Option<(greenup::comm::GuardTerms, Option<u64>)>,
) -> String {
    let gid = job.gid.unwrap_or(job.uid);
    if let Err(e) = lend::make_stats_dir(&paths.run_dir, job.job_id, &job.node, job.uid, gid) {
        return format!("MPI runtime not prepared: measurement directory: {e}");
    }
    let mut note = String::from("MPI runtime measures");
    let mut fmax_khz = None;
    if comm.enabled || guard.is_some() {
        match lend::lend(paths, job.job_id, &job.node, job.uid, scope) {
            Ok(lent) if !lent.files.is_empty() && !comm.enabled => fmax_khz = lent.max_khz,
            Ok(lent) if !lent.files.is_empty() => {
                fmax_khz = lent.max_khz;
                comm.low_ghz = comm.low_ghz.or(lent.min_khz.map(|k| Ghz(k as f64 / 1.0e6)));
                note = format!(
                    "MPI runtime lowers cpus {} to {} GHz in long or large calls",
                    lent.cpus
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                    comm.low_ghz
                        .map_or("the lowest".into(), |f| format!("{:.2}", f.0))
                );
            }
            Ok(_) => {
                comm.enabled = false;
                note.push_str(" only: no whole cpufreq policy with the userspace governor to lend");
            }
            Err(e) => {
                comm.enabled = false;
                note = format!("MPI runtime measures only: speed control not lent: {e}");
            }
        }
    }
    let file = JobDir::new(&paths.run_dir, job.job_id).comm(&job.node);
    match serde_json::to_vec(&comm) {
        Ok(json) => {
            if let Err(e) = greenup_core::fs::write_atomic_volatile(&file, &json, 0o600) {
                return format!("MPI runtime not prepared: {}: {e}", file.display());
            }
        }
        Err(e) => return format!("MPI runtime not prepared: {e}"),
    }
    if let Some((terms, plan_khz)) = guard {
        note.push_str(&write_guard(paths, job, &terms, fmax_khz, plan_khz));
    }
    note
}

/// Save the in-job guard's settings for the job's MPI steps on this node, or say why
/// there are none. Returns the note's addition.
fn write_guard(
    paths: &NodePaths,
    job: &JobEnv,
    terms: &greenup::comm::GuardTerms,
    fmax_khz: Option<u64>,
    plan_khz: Option<u64>,
) -> String {
    let g = match terms.guard(fmax_khz, plan_khz) {
        Ok(g) => g,
        Err(off) => return format!("; no in-job guard: {}", off.why()),
    };
    let file = JobDir::new(&paths.run_dir, job.job_id).guard(&job.node);
    match serde_json::to_vec(&g) {
        Ok(json) => match greenup_core::fs::write_atomic_volatile(&file, &json, 0o600) {
            Ok(()) => format!(
                "; in-job guard raises to {:.2} GHz a rank that falls behind its baseline",
                g.fmax_khz as f64 / 1e6
            ),
            Err(e) => format!("; no in-job guard: {}: {e}", file.display()),
        },
        Err(e) => format!("; no in-job guard: {e}"),
    }
}

/// This node's settings for a prolog's `request` (a [`start_request`]).
pub fn ask_settings(c: &mut Client, request: &Request) -> Result<NodeSettings, AskSettingsError> {
    match c.call(request)? {
        greenup_proto::protocol::Reply::NodeSettings(s) => Ok(s),
        _ => Err(AskSettingsError::UnexpectedReply),
    }
}

/// Start `greenup meter` for the job on this node, a second from now if the job still
/// runs here then: it reads the energy counters during the job, so a counter that wraps
/// more than once is still counted in full. Without it the job is measured from its
/// start and end readings alone.
fn start_meter(args: &Args, paths: &NodePaths, job: &JobEnv, site: &NodeConfig, log: Log) {
    let Some(bin) = &args.meter else {
        return;
    };
    let id = job.job_id.to_string();
    // The meter also reports the node's power to greenupd at the site's interval.
    let every = site.power.meter_interval_s.to_string();
    let batch = greenup_proto::live_power::samples_per_report(
        site.power.meter_interval_s,
        site.power.report_period_s,
    )
    .to_string();
    let timeout = site_timeout(site).as_millis().to_string();
    let argv: [&std::ffi::OsStr; 16] = [
        "meter".as_ref(),
        id.as_ref(),
        "--node".as_ref(),
        job.node.as_ref(),
        "--run-dir".as_ref(),
        paths.run_dir.as_os_str(),
        "--sysfs-root".as_ref(),
        paths.sysfs_root.as_os_str(),
        "--report-every".as_ref(),
        every.as_ref(),
        "--connect".as_ref(),
        site.daemon.listen.as_ref(),
        "--timeout-ms".as_ref(),
        timeout.as_ref(),
        "--batch".as_ref(),
        batch.as_ref(),
    ];
    // A job over within a second cannot wrap a counter twice: it never starts the meter.
    let record = JobDir::new(&paths.run_dir, job.job_id).record(&job.node);
    let delay = greenup_platform::meter::tally::SHORTEST_WAIT;
    if let Err(e) = crate::command::start_later(bin, &argv, delay, &record) {
        log(
            Level::Warning,
            &format!(
                "greenup: job {} on {}: energy read at start and end only, so a counter that wraps more than once is under-counted: cannot start {}: {e}",
                job.job_id,
                job.node,
                bin.display()
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup::comm::{Guard, GuardTerms};
    use greenup::slurm::time_limit::TimeLimit;

    fn job(uid: u32) -> JobEnv {
        JobEnv {
            restart_count: None,
            job_id: 9,
            uid,
            gid: None,
            user: None,
            partition: None,
            account: None,
            node: "n1".into(),
            nodelist: "n1".into(),
            nodes: vec!["n1".into()],
            cpus_per_node: None,
            options: crate::options::Checked::default(),
            exit: None,
            gpus: None,
            time_limit: TimeLimit::Unknown,
            licenses: None,
        }
    }

    /// A node's sysfs and run directory under a test's temporary directory.
    fn temp_paths(t: &tempfile::TempDir) -> NodePaths {
        NodePaths {
            sysfs_root: t.path().join("sys"),
            run_dir: t.path().join("run"),
        }
    }

    #[test]
    fn a_monitor_run_naming_a_profile_has_its_mpi_steps_measured_and_nothing_lowered() {
        let t = tempfile::tempdir().unwrap();
        let paths = temp_paths(&t);
        let lib = t.path().join("libgreenup_mpi.so");
        std::fs::write(&lib, "").unwrap();
        let mut site = NodeConfig::from_site(&crate::node::test_cluster_site());
        site.dvfs.mpi_runtime = lib;
        site.dvfs.run_dir = paths.run_dir.clone();
        // What greenupd tells n1 of a monitor decision: through the rule its reply takes.
        let told = |profile: Option<&str>| {
            let d: greenup_proto::protocol::Decision = serde_json::from_value(serde_json::json!({
                "job_id": 9, "verdict": "unchanged", "reason": "policy monitor records only",
                "policy": "monitor", "monitor": true, "profile": profile,
                "profile_version": null, "power_cap_w": null, "reserved_w": 0.0,
                "plan": null, "decided_at": 1_795_000_000
            }))
            .unwrap();
            NodeSettings::from_decision(&d, "n1", 1)
        };
        let base = told(Some("lammps"));
        assert!(base.baseline && !told(None).baseline);
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let ask = |s: &NodeSettings, comm, site: &NodeConfig| {
            greenup::policy::runtime_for_job(&RuntimeAsk::of(
                Some(s),
                comm,
                site.dvfs.measure_baselines,
            ))
        };
        let rt = ask(&base, None, &site).unwrap();
        assert_eq!(rt.guard, None);
        // The prolog made the job's directory when it saved the decision.
        let dir = JobDir::new(&paths.run_dir, 9);
        dir.create().unwrap();
        let note = start_comm(&paths, &job(me), &Scope::Node, rt.comm, None);
        assert_eq!(note, "MPI runtime measures");
        let saved: CommDvfs =
            serde_json::from_slice(&std::fs::read(dir.comm("n1")).unwrap()).unwrap();
        assert!(!saved.enabled, "{saved:?}");
        assert!(!dir.guard("n1").exists());
        // Its MPI steps get the runtime, told to lower nothing.
        let step = crate::step::StepInfo {
            job_id: 9,
            step_id: 0,
            node: "n1".into(),
        };
        let env = crate::step::runtime_env(&site, &paths, &step, None)
            .unwrap()
            .unwrap();
        let comm = &env
            .iter()
            .find(|(k, _)| *k == "GREENUP_COMM_DVFS")
            .unwrap()
            .1;
        assert!(comm.contains(r#""enabled":false"#), "{comm}");
        // No profile, the user's off, the site's switch off: no runtime.
        assert_eq!(ask(&told(None), None, &site), None);
        assert_eq!(ask(&base, Some(false), &site), None);
        let mut off = site.clone();
        off.dvfs.measure_baselines = false;
        assert_eq!(ask(&base, None, &off), None);
    }

    #[test]
    fn the_guards_settings_are_saved_only_where_they_can_raise_a_clock() {
        let t = tempfile::tempdir().unwrap();
        let paths = temp_paths(&t);
        let job = job(1);
        let dir = JobDir::new(&paths.run_dir, 9);
        dir.create().unwrap();
        let terms = GuardTerms {
            max_slowdown: 0.1,
            baseline_rate: Some(80.0),
            off: None,
        };
        // No CPU lent: nothing to raise.
        let note = write_guard(&paths, &job, &terms, None, Some(2_000_000));
        assert_eq!(
            note,
            "; no in-job guard: no cpufreq control of the job's own"
        );
        assert!(!dir.guard("n1").exists());
        // The plan at the ceiling: nothing to raise to.
        let note = write_guard(&paths, &job, &terms, Some(2_000_000), Some(2_000_000));
        assert!(note.ends_with("the plan already runs at f_max"), "{note}");
        assert!(!dir.guard("n1").exists());
        // Lent CPUs topping out at 3 GHz under a 2.2 GHz plan: saved for the steps.
        let note = write_guard(&paths, &job, &terms, Some(3_000_000), Some(2_200_000));
        assert!(note.contains("raises to 3.00 GHz"), "{note}");
        let saved: Guard =
            serde_json::from_str(&std::fs::read_to_string(dir.guard("n1")).unwrap()).unwrap();
        assert_eq!(
            saved,
            Guard {
                max_slowdown: 0.1,
                baseline_rate: 80.0,
                fmax_khz: 3_000_000,
                plan_khz: 2_200_000,
            }
        );
    }
}
