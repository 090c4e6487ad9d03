//! job_prolog and job_epilog on each node (slurmd, as root): ask greenupd for the
//! job's decision, save and apply this node's frequency and power limit, and at the end
//! restore, measure and report. Every failure is logged and the job runs unchanged;
//! nothing here fails the prolog, so greenup never drains a node (under `enforce:
//! strict` the job's steps fail instead, see [`crate::step::enforce`]).

use std::path::Path;
use std::time::Duration;

use greenup::comm::{self, CommDvfs, NodeComm};
use greenup::daemon::client::{Client, ClientError, Endpoint};
use greenup::daemon::protocol::{
    JobRecord, NodeOutcome as WireOutcome, NodeSettings, OpenJob, Request, Verdict,
};
use greenup::dvfs::cpufreq::{Cpufreq, ghz_to_khz};
use greenup::dvfs::job::{self as dvfs_job, Apply, NodePaths, Scope};
use greenup::dvfs::lend;
use greenup::dvfs::powercap::{LimitRequest, PowerHeld, ShortTerm};
use greenup::dvfs::run_dir::JobDir;
use greenup::meter::Energy;
use greenup::site::node::NodeConfig;
use greenup::site::{Enforce, Site};

use crate::args::Args;
use crate::end;
use crate::slurm_env;
use crate::spool;
use greenup::record::{JobEnd, NodePower, Source};
use greenup::site::PowerSettings;

pub use crate::job_env::{JobEnv, Level, Log};

/// The site config's node settings, through this node's copy when it is current.
pub fn settings(args: &Args) -> Result<NodeConfig, greenup::input::InputError> {
    greenup::site::node::load_cached(&args.config, &args.site_cache)
}

/// The node settings for a job's prolog or epilog; when the site config is unusable,
/// one warning saying so and what follows for the job (`then`).
fn settings_for(args: &Args, job: &JobEnv, then: &str, log: Log) -> Option<NodeConfig> {
    settings(args)
        .map_err(|e| {
            log(
                Level::Warning,
                &format!(
                    "greenup: job {}: site config unusable, {then}: {e}",
                    job.job_id
                ),
            )
        })
        .ok()
}

/// Where this node keeps greenup's files for a job.
pub fn node_paths(args: &Args, site: &NodeConfig, node: &str) -> NodePaths {
    NodePaths {
        sysfs_root: args
            .sysfs_root_for(node)
            .unwrap_or_else(|| site.dvfs.sysfs_root.clone()),
        run_dir: site.dvfs.run_dir.clone(),
    }
}

fn warn(log: Log, run_dir: &Path, job: &JobEnv, message: &str) {
    let line = format!("greenup: job {} on {}: {message}", job.job_id, job.node);
    log(Level::Warning, &line);
    let _ = JobDir::new(run_dir, job.job_id).add_warning(&job.node, &line);
}

/// The power limits a node sets for `limit_w`, its share of the job's watts, with the
/// site's windows and short-term multiple; None when the decision asks for none.
pub fn power_request(limit_w: Option<f64>, power: &PowerSettings) -> Option<LimitRequest> {
    let watts = limit_w?;
    Some(LimitRequest {
        watts,
        window_s: power.rapl_window_s,
        short_term: power.short_term.map(|m| ShortTerm {
            watts: watts * m,
            window_s: power.short_window_ms / 1e3,
        }),
    })
}

/// How long the plugin waits for greenupd in each call: the site's `daemon.timeout_ms`,
/// kept between 50 ms and a minute.
fn site_timeout(site: &NodeConfig) -> Duration {
    Duration::from_millis(site.daemon.timeout_ms.clamp(50, 60_000))
}

/// The daemon client, connected with the site's timeout.
pub fn connect(site: &NodeConfig) -> Result<Client, ClientError> {
    Client::connect(&Endpoint::parse(&site.daemon.listen), site_timeout(site))
}

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
fn holds_whole_node(job: &JobEnv, sysfs_root: &Path) -> bool {
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
fn open_request(job: &JobEnv, policy: String, power: &PowerSettings) -> OpenJob {
    // A count Slurm would not write leaves the grant unknown: greenupd then plans under
    // its ledger, as for a job submitted before the queue held power.
    let granted_w = job.licenses.as_deref().and_then(|l| {
        greenup::power::granted_w(power, job.partition.as_deref(), l)
            .ok()
            .flatten()
    });
    OpenJob {
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
        time_limit_s: job.time_limit_s,
        policy: Some(policy),
        profile: job.options.profile.clone(),
        energy_cap_j: job.options.energy_cap_j,
        power_cap_w: job.options.power_cap_w,
        algorithm: None,
        granted_w,
    }
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
) -> Result<greenup::dvfs::state::NodeRecord, dvfs_job::JobError> {
    let asked = d.map_or_else(Apply::default, |d| Apply {
        khz: d.freq_ghz.and_then(ghz_to_khz),
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
    let Some(site) = settings_for(args, job, "job runs unchanged", log) else {
        return;
    };
    let paths = node_paths(args, &site, &job.node);
    let Some(policy) = policy_for(job, &site) else {
        return;
    };
    let request = start_request(job, policy, &site.power);
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
    let decided = match &decision {
        Ok(d) => {
            if let Ok(json) = serde_json::to_vec(d) {
                let dir = JobDir::new(&paths.run_dir, job.job_id);
                let _ = dir.create();
                let _ = greenup::input::write_atomic(&dir.decision(&job.node), &json);
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
    let scope = if holds_whole_node(job, &paths.sysfs_root) {
        Scope::Node
    } else {
        Scope::SharedNode
    };
    match apply_settings(&paths, &site, job, decided, &scope, log) {
        Ok(rec) => {
            let gpu_power = decided.and_then(|d| d.gpu_power);
            // NVML's start alone takes about 10 ms on a real driver: the worker does the
            // GPUs while the prolog returns. Without one, the prolog does them itself.
            let handed = args
                .meter
                .as_deref()
                .map(|w| crate::gpu::hand_off(w, &site, &paths.run_dir, job, gpu_power));
            let (gpu_warning, gpu_note) = match handed {
                Some(Ok(_)) => (None, None),
                Some(Err(e)) => {
                    let (w, n) = crate::gpu::start(&site, &paths.run_dir, job, gpu_power);
                    let why = format!("GPU start not handed to a worker ({e}), done here");
                    (w, Some(n.map_or(why.clone(), |n| format!("{why}; {n}"))))
                }
                None => crate::gpu::start(&site, &paths.run_dir, job, gpu_power),
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
            if !rec.energy_start.zones.is_empty() {
                start_meter(args, &paths, job, &site, log);
            }
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
            let asked = decision.as_ref().ok().and_then(|d| d.comm_dvfs);
            if let Some(comm) = greenup::policy::comm_for_job(asked, job.options.comm) {
                let note = start_comm(&paths, job, &scope, comm);
                log(
                    Level::Info,
                    &format!("greenup: job {} on {}: {note}", job.job_id, job.node),
                );
            }
            // greenupd answered: send a little of this node's backlog along, within the bound.
            if let (Some(c), Ok(_)) = (client.as_mut(), &decision) {
                deliver_spool(&site, job, c, PROLOG_SPOOL, log);
            }
            log(
                Level::Info,
                &format!(
                    "greenup: job {} on {}: {} (greenupd {:.2} ms) (prolog {:.2} ms)",
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
/// job's MPI steps hand to the runtime (`NODE.comm.json`). Returns what was done.
fn start_comm(paths: &NodePaths, job: &JobEnv, scope: &Scope, mut comm: CommDvfs) -> String {
    let gid = job.gid.unwrap_or(job.uid);
    if let Err(e) = lend::make_stats_dir(&paths.run_dir, job.job_id, &job.node, job.uid, gid) {
        return format!("MPI runtime not prepared: measurement directory: {e}");
    }
    let mut note = String::from("MPI runtime measures");
    if comm.enabled {
        match lend::lend(paths, job.job_id, &job.node, job.uid, scope) {
            Ok(lent) if !lent.files.is_empty() => {
                comm.low_ghz = comm.low_ghz.or(lent.min_khz.map(|k| k as f64 / 1.0e6));
                note = format!(
                    "MPI runtime lowers cpus {} to {} GHz in long or large calls",
                    lent.cpus
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                    comm.low_ghz
                        .map_or("the lowest".into(), |f| format!("{f:.2}"))
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
            if let Err(e) = greenup::input::write_atomic_mode(&file, &json, 0o600) {
                return format!("MPI runtime not prepared: {}: {e}", file.display());
            }
        }
        Err(e) => return format!("MPI runtime not prepared: {e}"),
    }
    note
}

/// Take back everything [`start_comm`] lent on this node and read what the ranks left:
/// the speed control first (before the epilog restores the values, so the user cannot
/// write after the restore), then the directory (root's before it is read).
fn end_comm(paths: &NodePaths, job: &JobEnv, keys: &[String], log: Log) {
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
fn read_comm(paths: &NodePaths, job: &JobEnv, elapsed_s: f64, log: Log) -> Option<NodeComm> {
    let dir = JobDir::new(&paths.run_dir, job.job_id);
    let stats = dir.mpi_stats(&job.node);
    let _ = std::fs::remove_file(dir.comm(&job.node));
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
    // The report's estimate of what lowering saved spreads the node's power over these.
    comm.cpus = Cpufreq::new(&paths.sysfs_root)
        .cpu_count()
        .ok()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0);
    Some(comm)
}

/// This node's settings for a prolog's `request` (a [`start_request`]).
pub fn ask_settings(c: &mut Client, request: &Request) -> Result<NodeSettings, AskSettingsError> {
    match c.call(request)? {
        greenup::daemon::protocol::Reply::NodeSettings(s) => Ok(s),
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
    let batch = greenup::daemon::live_power::samples_per_report(
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
    let delay = greenup::meter::tally::SHORTEST_WAIT;
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

/// The --energy-report paragraph: the job's report, as `greenup report` builds it, from
/// the decision and the outcomes stored so far.
pub fn report_line(rec: &JobRecord, site: &Site) -> String {
    let ctx = greenup::report::record::Context {
        site: Some(site),
        // `greenup report JOBID` reads Slurm's figure once the job has ended.
        slurm_energy: greenup::report::accounting::SlurmEnergy::in_job_epilog(),
        ..Default::default()
    };
    greenup::report::text::energy_paragraph(&greenup::report::record::from_record(rec, &ctx))
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

/// The part of a decision a node needs after the prolog, read back from its file.
pub fn saved_decision(run_dir: &Path, job_id: u32, node: &str) -> Option<NodeSettings> {
    let bytes = std::fs::read(JobDir::new(run_dir, job_id).decision(node)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// How many spooled entries a prolog sends along, and within how long: a job waits for this.
pub const PROLOG_SPOOL: (usize, Duration) = (4, Duration::from_millis(100));
/// How many spooled entries an epilog sends along, and within how long (it delays only
/// the node's release).
pub const EPILOG_SPOOL: (usize, Duration) = (16, Duration::from_millis(500));
/// How long the closing node waits for slurmctld to say how the job ended.
const SCONTROL_LIMIT: Duration = Duration::from_millis(1500);
/// How long the closing node waits for the other nodes' outcomes before it closes.
const OUTCOMES_WAIT: Duration = Duration::from_secs(1);

/// Send pending spool entries of this node on `client`, within `bound` (entries, time).
fn deliver_spool(
    site: &NodeConfig,
    job: &JobEnv,
    client: &mut Client,
    bound: (usize, Duration),
    log: Log,
) {
    let dir = spool::dir_for(&site.daemon.spool_dir, &job.node);
    let d = spool::deliver(&dir, client, bound.0, bound.1);
    if !d.sent.is_empty() {
        let ids: Vec<String> = d.sent.iter().map(u64::to_string).collect();
        log(
            Level::Info,
            &format!(
                "greenup: job {} on {}: delivered spooled outcomes of job(s) {}{}",
                job.job_id,
                job.node,
                ids.join(","),
                if d.more_left { "; more left" } else { "" }
            ),
        );
    }
    for (name, why) in &d.rejected {
        log(
            Level::Warning,
            &format!(
                "greenup: {}: spooled entry {name} refused, kept as {name}.rejected: {why}",
                dir.display()
            ),
        );
    }
    // Restore the site's timeout for anything the caller sends after this.
    let _ = client.set_timeout(site_timeout(site));
}

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
        comm,
        job_id: u64::from(job.job_id),
        node: o.node.clone(),
        freq_ghz: o.ran_khz.map(|k| k as f64 / 1.0e6),
        energy_j,
        elapsed_s: Some(o.elapsed_s),
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
                asked_w: *asked_w,
                held_w: Some(*held_w),
                note: note.clone(),
            },
            PowerHeld::NotHeld { asked_w, reason } => NodePower {
                asked_w: *asked_w,
                held_w: None,
                note: Some(reason.clone()),
            },
        }),
    }
}

/// Send this node's outcomes and, on the job's first node, the close with how the job
/// ended. What greenupd cannot take now goes to the node's spool.
fn report_end(
    site: &NodeConfig,
    job: &JobEnv,
    outcomes: &[(dvfs_job::NodeOutcome, Option<NodeComm>)],
    (gpu, gpu_power): (Option<greenup::record::NodeGpu>, Option<NodePower>),
    log: Log,
) {
    // Only the first node closes: it runs the batch script, so slurmctld knows the
    // script's end by the time this epilog runs. A node a shrink released runs its epilog
    // while the job goes on; slurmctld then says RUNNING and nothing is closed.
    let closer = job.nodes.first() == Some(&job.node);
    let ended = if closer {
        end::classify(
            job.exit,
            end::ask_slurmctld(job.job_id, SCONTROL_LIMIT).as_ref(),
        )
    } else {
        Some(JobEnd::Unknown)
    };
    let close = closer && ended.is_some();
    let entry = spool::Entry {
        job_id: u64::from(job.job_id),
        node: job.node.clone(),
        outcomes: outcomes
            .iter()
            .map(|(o, c)| {
                let mut w = wire_outcome(job, o, c.clone());
                if o.node == job.node {
                    w.gpu = gpu.clone().map(Box::new);
                    w.power = crate::gpu::node_power(w.power.take(), gpu_power.clone());
                }
                w
            })
            .collect(),
        close,
        end: ended.filter(|_| close),
        spooled_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0),
    };
    let sent = connect(site).map_err(|e| e.to_string()).and_then(|mut c| {
        for o in &entry.outcomes {
            c.record_outcome(o.clone()).map_err(|e| e.to_string())?;
        }
        if close {
            let waited = wait_for_outcomes(&mut c, u64::from(job.job_id), job.nodes.len());
            if job.options.report {
                let rec = waited
                    .and_then(|()| c.get_job(u64::from(job.job_id)))
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
            c.close_job(entry.job_id, entry.end)
                .map_err(|e| e.to_string())?;
        }
        Ok(c)
    });
    match sent {
        Ok(mut c) => deliver_spool(site, job, &mut c, EPILOG_SPOOL, log),
        Err(e) => {
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

/// Wait until all `nodes` of the job have an outcome stored, or [`OUTCOMES_WAIT`] passed:
/// the other nodes' epilogs run at the same time, and a close makes greenupd learn from
/// the outcomes it has. Each poll is a count, the same size however large the job.
pub fn wait_for_outcomes(c: &mut Client, job_id: u64, nodes: usize) -> Result<(), ClientError> {
    let started = std::time::Instant::now();
    loop {
        let n = c.count_outcomes(job_id)?;
        if n >= nodes as u64 || started.elapsed() >= OUTCOMES_WAIT {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The epilog: restore every saved setting, measure, and report to greenupd.
pub fn epilog(args: &Args, job: &JobEnv, log: Log) {
    let started = std::time::Instant::now();
    let Some(site) = settings_for(args, job, "cannot restore", log) else {
        return;
    };
    let paths = node_paths(args, &site, &job.node);
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
    if decided {
        report_end(&site, job, &outcomes, (gpu, gpu_power), log);
    }
    for f in [
        dir.warning(&job.node),
        dir.decision(&job.node),
        dir.warned(&job.node),
    ] {
        let _ = std::fs::remove_file(f);
    }
    dir.remove_if_empty();
    if decided {
        log(
            Level::Info,
            &format!(
                "greenup: job {} on {}: restored and reported (epilog {:.2} ms)",
                job.job_id,
                job.node,
                started.elapsed().as_secs_f64() * 1e3
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Checked;
    use std::collections::HashMap;

    #[test]
    fn job_env_reads_what_slurmd_passes_to_a_prolog() {
        let vars: HashMap<&str, &str> = [
            ("SLURM_JOB_ID", "17"),
            ("SLURM_JOB_UID", "1001"),
            ("SLURM_JOB_USER", "alice"),
            ("SLURM_JOB_PARTITION", "debug"),
            ("SLURMD_NODENAME", "n2"),
            ("SLURM_NODELIST", "n[1-2],n4"),
            ("SLURM_JOB_CPUS_PER_NODE", "4(x3)"),
            ("SPANK_GREENUP_POLICY", "max-dist"),
            ("SPANK_GREENUP_ENERGY_CAP_J", "1000000"),
        ]
        .into_iter()
        .collect();
        let job = JobEnv::from_vars(|k| vars.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(job.job_id, 17);
        assert_eq!(job.nodes, vec!["n1", "n2", "n4"]);
        assert_eq!(job.options.policy.as_deref(), Some("max-dist"));
        assert_eq!(job.options.energy_cap_j, Some(1.0e6));
        assert_eq!(job.options.profile, None);
        assert!(
            JobEnv::from_vars(|_| None)
                .unwrap_err()
                .to_string()
                .contains("SLURMD_NODENAME")
        );
    }

    #[test]
    fn the_request_carries_the_time_limit_where_slurm_gives_it_to_the_prolog() {
        // Slurm 23.02 and later: the job credential's start and end time, 11 minutes apart.
        let vars: HashMap<&str, &str> = [
            ("SLURM_JOB_ID", "17"),
            ("SLURM_JOB_UID", "1001"),
            ("SLURMD_NODENAME", "n1"),
            ("SLURM_JOB_START_TIME", "1795000000"),
            ("SLURM_JOB_END_TIME", "1795000660"),
        ]
        .into_iter()
        .collect();
        let get = |k: &str| vars.get(k).map(|v| v.to_string());
        let job = JobEnv::from_slurm_vars(get, 0x18_0b_00).unwrap();
        let req = open_request(&job, "min-energy".into(), &PowerSettings::default());
        assert_eq!(req.time_limit_s, Some(660.0));
        assert_eq!(req.nodelist.as_deref(), Some("n1"));
        // Slurm 22.05 sets neither variable: one there came from elsewhere (the user's
        // own job environment) and is ignored; greenupd asks slurmctld instead.
        let job = JobEnv::from_slurm_vars(get, 0x16_05_08).unwrap();
        assert_eq!(
            open_request(&job, "min-energy".into(), &PowerSettings::default()).time_limit_s,
            None
        );
    }

    #[test]
    fn whole_node_means_every_cpu_in_the_tree() {
        let t = tempfile::tempdir().unwrap();
        for i in 0..4 {
            let d = t
                .path()
                .join(format!("devices/system/cpu/cpufreq/policy{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("affected_cpus"), format!("{i}\n")).unwrap();
        }
        let mut job = JobEnv {
            job_id: 1,
            uid: 1,
            gid: None,
            user: None,
            partition: None,
            account: None,
            node: "n2".into(),
            nodelist: "n[1-2]".into(),
            nodes: vec!["n1".into(), "n2".into()],
            cpus_per_node: Some("4,2".into()),
            options: Checked::default(),
            exit: None,
            gpus: None,
            time_limit_s: None,
            licenses: None,
        };
        assert!(!holds_whole_node(&job, t.path()));
        job.cpus_per_node = Some("4(x2)".into());
        assert!(holds_whole_node(&job, t.path()));
        job.cpus_per_node = None;
        assert!(!holds_whole_node(&job, t.path()));
    }
}

/// The test cluster's site config, with no policy or profile directories.
#[cfg(test)]
pub(crate) fn test_cluster_site() -> Site {
    let text = include_str!("../../tests/cluster/greenup.yaml")
        .replace("/etc/greenup-test/policies", "/nonexistent")
        .replace("/etc/greenup-test/profiles", "/nonexistent");
    let t = tempfile::tempdir().unwrap();
    let cfg = t.path().join("greenup.yaml");
    std::fs::write(&cfg, text).unwrap();
    greenup::site::load(&cfg).unwrap()
}

#[cfg(test)]
mod report_tests {
    use super::*;

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
