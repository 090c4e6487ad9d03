//! The SPANK callbacks: Slurm's side of the plugin. Each one catches every error and
//! panic, so Slurm only ever sees a clean return.

use std::error::Error;
use std::panic::{AssertUnwindSafe, catch_unwind};

use slurm_spank::{Context, LogLevel, Plugin, SPANK_PLUGIN, SpankHandle, SpankOption, spank_log};

use crate::args::Args;
use crate::node::{self, JobEnv, Level};
use crate::options::{self, OPTIONS, Raw};
use crate::step::{self, BATCH_STEP, StepInfo};

SPANK_PLUGIN!(b"greenup", crate::SLURM_PLUGIN_VERSION, Greenup);

/// Slurm's `ESPANK_JOB_FAILURE` (slurm_errno.h: `ESPANK_ERROR` 3000, then in order to
/// `ESPANK_NODE_FAILURE` 3011 and `ESPANK_JOB_FAILURE` 3012, unchanged since 25.05).
const ESPANK_JOB_FAILURE: std::ffi::c_int = 3012;

/// What Slurm 25.05 and later do when this plugin's init fails: fail the job, never drain
/// the node (the default of a plugin without this symbol). greenup's init does not fail,
/// since its errors are logged and the job runs; this holds if it ever did. Older Slurms
/// never look the symbol up.
#[unsafe(no_mangle)]
#[used]
pub static slurm_spank_init_failure_mode: std::ffi::c_int = ESPANK_JOB_FAILURE;

/// The plugin's state within one Slurm process.
#[derive(Default)]
struct Greenup {
    args: Option<Args>,
    /// A warning claimed at step start, printed by the step's first task into the job's
    /// own stderr (the task is forked from this process, so it carries this copy).
    pending_warning: Option<String>,
    /// The site's node settings as this step process read them at step start, kept for
    /// step end.
    site: Option<greenup::site::node::NodeConfig>,
}

fn log(level: Level, msg: &str) {
    match level {
        Level::Warning => spank_log(LogLevel::Error, msg),
        Level::Info => spank_log(LogLevel::Info, msg),
    }
}

/// Run `f`, turning a panic into an error so the crate's global state is never poisoned.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => Err(format!(
            "greenup: internal error in {what}; job runs unchanged"
        )),
    }
}

impl Greenup {
    fn args(&mut self, spank: &SpankHandle) -> Result<Args, String> {
        if let Some(a) = &self.args {
            return Ok(a.clone());
        }
        let words = spank
            .plugin_argv()
            .map_err(|e| format!("greenup: plugin arguments unreadable: {e}"))?;
        let a = Args::parse(words.iter().copied()).map_err(|e| e.to_string())?;
        self.args = Some(a.clone());
        Ok(a)
    }

    fn raw_options(spank: &SpankHandle) -> Raw {
        let get = |n: &str| {
            spank
                .get_option_value(n)
                .ok()
                .flatten()
                .map(|v| v.to_string())
        };
        Raw {
            policy: get(options::OPT_POLICY),
            energy_cap: get(options::OPT_ENERGY_CAP),
            power_cap: get(options::OPT_POWER_CAP),
            profile: get(options::OPT_PROFILE),
            report: spank.is_option_set(options::OPT_REPORT),
            min_nodes: get(options::OPT_MIN_NODES),
            comm: get(options::OPT_COMM),
            quote: spank.is_option_set(options::OPT_QUOTE),
        }
    }

    /// sbatch, salloc and srun: check every option and pass the checked values on.
    fn submit(&mut self, spank: &mut SpankHandle, ctx: Context) -> Result<(), String> {
        let raw = Self::raw_options(spank);
        if raw.is_empty() {
            return Ok(());
        }
        // greenup's cli_filter answers --energy-quote and stops the submission before
        // this callback runs; reaching it means the site runs no such filter.
        if raw.quote {
            return Err(format!(
                "greenup: --{}: nothing submitted, and no quote: quotes come from greenup's cli_filter, which this cluster does not run (CliFilterPlugins=cli_filter/lua with /usr/share/greenup/cli_filter.lua); `greenup quote` gives the same line",
                options::OPT_QUOTE
            ));
        }
        // An srun inside an allocation inherits options checked when the job was submitted.
        if ctx == Context::Local && std::env::var_os("SLURM_JOB_ID").is_some() {
            return Ok(());
        }
        let args = self.args(spank)?;
        let checked = match options::check_with_config(&args.config, &raw) {
            Ok(c) => c,
            Err(e) if matches!(e.origin, greenup::input::Origin::Option(_)) => {
                return Err(e.to_string());
            }
            Err(e) => {
                // The site config cannot be read here (e.g. not readable by users): check what
                // can be checked and leave the rest to greenupd.
                let c = options::check_units(&raw).map_err(|e| e.to_string())?;
                spank_log(
                    LogLevel::Verbose,
                    &format!("greenup: options checked for units only: {e}"),
                );
                c
            }
        };
        for (k, v) in checked.env() {
            spank
                .job_control_setenv(k, &v, true)
                .map_err(|e| format!("greenup: cannot pass {k} on: {e}"))?;
        }
        Ok(())
    }

    /// The site's node settings, read once per process.
    fn site(&mut self, args: &Args) -> Option<&greenup::site::node::NodeConfig> {
        if self.site.is_none() {
            self.site = node::settings(args).ok();
        }
        self.site.as_ref()
    }

    fn step_info(spank: &SpankHandle) -> Option<StepInfo> {
        let step_id = spank.job_stepid().ok()?;
        let by_index = spank
            .getenv("SLURM_STEP_NODELIST")
            .ok()
            .flatten()
            .zip(spank.job_nodeid().ok());
        let named = spank
            .getenv("SLURMD_NODENAME")
            .ok()
            .flatten()
            .or_else(|| std::env::var("SLURMD_NODENAME").ok());
        Some(StepInfo {
            job_id: spank.job_id().ok()?,
            step_id,
            node: step::node_name(step_id, by_index, named)?,
        })
    }

    /// A step starts on a node: warnings, strict enforcement, shrink.
    fn step_start(&mut self, spank: &mut SpankHandle) -> Result<(), String> {
        let args = self.args(spank)?;
        let Some(info) = Self::step_info(spank) else {
            return Ok(());
        };
        let Some(site) = self.site(&args).cloned() else {
            return Ok(());
        };
        if !greenup_platform::dvfs::run_dir::JobDir::new(&site.dvfs.run_dir, info.job_id).exists() {
            return Ok(());
        }
        let warning = step::take_warning(&site.dvfs.run_dir, &info);
        if let Some(w) = &warning {
            log(Level::Info, w);
        }
        self.pending_warning = warning;
        step::enforce(&site, &info).map_err(|e| e.to_string())?;
        let paths = node::node_paths(&args, &site, &info.node);
        if let Some(cores) = spank.step_alloc_cores().ok().map(str::to_string)
            && let Some(note) = step::apply_step_cores(&site, &paths, &info, &cores)
        {
            log(
                Level::Info,
                &format!("greenup: job {} on {}: {note}", info.job_id, info.node),
            );
        }
        let mpi_type = spank.getenv("SLURM_MPI_TYPE").ok().flatten();
        if step::is_mpi_step(info.step_id, mpi_type.as_deref()) {
            let preload = spank.getenv("LD_PRELOAD").ok().flatten();
            match step::runtime_env(&site, &paths, &info, preload.as_deref()) {
                Ok(Some(vars)) => {
                    for (k, v) in vars {
                        if let Err(e) = spank.setenv(k, &v, true) {
                            log(
                                Level::Warning,
                                &format!(
                                    "greenup: job {} on {}: MPI runtime not preloaded: {k}: {e}",
                                    info.job_id, info.node
                                ),
                            );
                            break;
                        }
                    }
                }
                Ok(None) => {}
                Err(e) => log(
                    Level::Warning,
                    &format!("greenup: job {} on {}: {e}", info.job_id, info.node),
                ),
            }
        }
        if info.step_id == BATCH_STEP {
            let allocated = spank
                .getenv("SLURM_JOB_NUM_NODES")
                .ok()
                .flatten()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            if let Some(keep) = step::shrink_target(&site, &info, allocated) {
                shrink(spank, &info, &keep);
            }
        }
        Ok(())
    }

    /// The batch step ends: the --energy-report summary.
    fn step_end(&mut self, spank: &mut SpankHandle) -> Result<(), String> {
        let args = self.args(spank)?;
        let Some(info) = Self::step_info(spank) else {
            return Ok(());
        };
        if let Some(site) = self.site(&args)
            && site.dvfs.per_core_shared
        {
            let paths = node::node_paths(&args, site, &info.node);
            if let Some(err) = step::restore_step_cores(&paths, &info) {
                log(
                    Level::Warning,
                    &format!(
                        "greenup: job {} on {}: step restore incomplete: {err}",
                        info.job_id, info.node
                    ),
                );
            }
        }
        Ok(())
    }
}

/// How long the batch step waits for slurmctld to take back the nodes it does not use.
const SHRINK_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Give back the nodes the decision does not use, and fix the batch environment to match.
fn shrink(spank: &mut SpankHandle, info: &StepInfo, keep: &str) {
    let mut cmd = std::process::Command::new("scontrol");
    cmd.args([
        "update".to_string(),
        format!("JobId={}", info.job_id),
        format!("NodeList={keep}"),
    ]);
    match greenup_host::command::stdout_of(&mut cmd, SHRINK_LIMIT) {
        Ok(_) => {
            let count = greenup::hostlist::expand(keep)
                .map(|v| v.len())
                .unwrap_or(0)
                .to_string();
            for (k, v) in [
                ("SLURM_JOB_NODELIST", keep),
                ("SLURM_NODELIST", keep),
                ("SLURM_JOB_NUM_NODES", count.as_str()),
                ("SLURM_NNODES", count.as_str()),
            ] {
                let _ = spank.setenv(k, v, true);
            }
            log(
                Level::Info,
                &format!("greenup: job {}: shrunk to {keep} as decided", info.job_id),
            );
        }
        Err(e) => log(
            Level::Warning,
            &format!(
                "greenup: job {}: could not shrink to {keep}; all nodes stay: {e}",
                info.job_id
            ),
        ),
    }
}

fn report(r: Result<(), String>, fail: bool) -> Result<(), Box<dyn Error>> {
    match r {
        Ok(()) => Ok(()),
        Err(e) => {
            spank_log(LogLevel::Error, &e);
            if fail { Err(e.into()) } else { Ok(()) }
        }
    }
}

unsafe impl Plugin for Greenup {
    fn setup(&mut self, _spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        // No tracing subscriber: the plugin logs through Slurm directly.
        Ok(())
    }

    fn report_error(&self, _spank: &mut SpankHandle, _error: &dyn Error) {
        // Errors are logged where they happen, once.
    }

    fn init(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        let r = guarded("init", || {
            let ctx = spank.context().map_err(|e| e.to_string())?;
            if matches!(ctx, Context::Local | Context::Remote | Context::Allocator) {
                for (name, value, usage) in OPTIONS {
                    let mut o = SpankOption::new(name).usage(usage);
                    if let Some(v) = value {
                        o = o.takes_value(v);
                    }
                    spank
                        .register_option(o)
                        .map_err(|e| format!("greenup: cannot register --{name}: {e}"))?;
                }
            }
            Ok(())
        });
        report(r, false)
    }

    fn init_post_opt(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        let ctx = spank.context().ok();
        match ctx {
            Some(c @ (Context::Allocator | Context::Local)) => {
                if let Err(e) = guarded("option check", || self.submit(spank, c)) {
                    // A bad option stops the submission so that nothing is queued. Slurm
                    // ignores callback errors of an "optional" plugin, so end the client
                    // (sbatch, salloc or srun) here; this never runs inside a daemon.
                    // _exit, not exit: atexit handlers would re-enter the plugin from
                    // inside this callback.
                    spank_log(LogLevel::Error, &e);
                    // SAFETY: ends this client process at once; nothing is left half-written.
                    unsafe { libc::_exit(1) }
                }
                Ok(())
            }
            Some(Context::Remote) => {
                let r = guarded("step start", || self.step_start(spank));
                // Only `enforce: strict` fails a step; that error already names its cause.
                let strict = r
                    .as_ref()
                    .err()
                    .is_some_and(|e| e.contains("site requires it"));
                report(r, strict)
            }
            _ => Ok(()),
        }
    }

    fn job_prolog(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        let r = guarded("job_prolog", || {
            let args = self.args(spank)?;
            let job = JobEnv::from_process().map_err(|e| e.to_string())?;
            crate::prolog::prolog(&args, &job, &log);
            Ok(())
        });
        // Never fail a prolog: that would drain the node.
        report(r, false)
    }

    fn job_epilog(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        let r = guarded("job_epilog", || {
            let args = self.args(spank)?;
            let job = JobEnv::from_process().map_err(|e| e.to_string())?;
            crate::epilog::epilog(&args, &job, &log);
            Ok(())
        });
        report(r, false)
    }

    fn task_init(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        if let Some(w) = self.pending_warning.take()
            && spank.task_id().ok() == Some(0)
        {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "{w}");
        }
        Ok(())
    }

    fn exit(&mut self, spank: &mut SpankHandle) -> Result<(), Box<dyn Error>> {
        if spank.context().ok() == Some(Context::Remote) {
            return report(guarded("step end", || self.step_end(spank)), false);
        }
        Ok(())
    }
}
