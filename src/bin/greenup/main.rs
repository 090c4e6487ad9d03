//! `greenup`: plan a job's nodes and frequencies, inspect models, and check the
//! files people write (site config, profiles, policies). The library decides;
//! this binary only reads options, calls it, and prints.
//!
//! Exit status: 0 ok; 1 the plan is infeasible (the reason is printed);
//! 2 bad input (one line naming the option or file:line:column, the value and
//! what is valid); 3 anything else went wrong.

mod budget_cmds;
mod daemon_cmds;
mod gpu;
mod meter;
mod model;
mod plan;
mod policy;
mod power;
mod profile;
mod report_cmds;
mod sacct;
mod site;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use greenup::input::InputError;

/// Energy- and power-capped job configuration for Slurm.
#[derive(Parser)]
#[command(name = "greenup", version, about, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Every command. Commands that talk to greenupd (jobs, job, status, report,
/// app, profile pin) are added here, each with its own module.
#[derive(Subcommand)]
enum Command {
    /// Choose node count and per-node frequencies for a job under a policy.
    Plan(plan::PlanArgs),
    /// Evaluate a model directly.
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Application profiles.
    #[command(subcommand)]
    Profile(profile::ProfileCommand),
    /// The site config.
    #[command(subcommand)]
    Site(site::SiteCommand),
    /// Named policies.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// List jobs with energy, power, time, policy and saving (yours only, unless you are an admin).
    Jobs(report_cmds::JobsArgs),
    /// Show one job's decision and measured outcome.
    Job(daemon_cmds::JobArgs),
    /// Show greenupd's status and power-budget ledger.
    Status(daemon_cmds::StatusArgs),
    /// A finished job's report: decision, predicted against measured, saving.
    Report(report_cmds::ReportArgs),
    /// An application's history: runs, prediction error per profile version, savings.
    App(report_cmds::AppArgs),
    /// This node's NVIDIA GPUs through NVML: readings, limits, locked clocks; set and restore (root).
    Gpu(gpu::GpuArgs),
    /// Count a running job's energy on this node until it ends (started by the job prolog).
    Meter(meter::MeterArgs),
    /// The energy budgets: use, holds, what is left, forecast and warning level.
    Budget(budget_cmds::BudgetArgs),
    /// What a job would be predicted and charged if it started now (nothing is submitted).
    Quote(budget_cmds::QuoteArgs),
    /// The power caps now and over the last hours: granted, measured and stranded watts.
    Power(power::PowerArgs),
}

/// Why a command did not succeed; each maps to one exit status.
#[derive(Debug)]
pub enum Failure {
    /// The plan breaks a constraint; its reason has been printed (exit 1).
    Infeasible,
    /// Bad input, as one line (exit 2).
    Input(String),
    /// Something other than the input failed (exit 3).
    Runtime(String),
}

impl From<InputError> for Failure {
    fn from(e: InputError) -> Self {
        Failure::Input(e.to_string())
    }
}

impl Failure {
    /// Bad input about a command-line option: the option, the value and what is valid.
    pub fn option(
        option: &str,
        value: impl std::fmt::Display,
        expected: impl std::fmt::Display,
    ) -> Failure {
        Failure::Input(format!(
            "{option}: invalid value '{value}': expected {expected}"
        ))
    }
}

/// What every command returns.
pub type Outcome = Result<(), Failure>;

/// Write one line to stdout. A closed pipe (`greenup ... | head`) is not an error
/// worth a panic or a message: the reader has gone.
pub fn emit(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
}

/// Write one line to stderr, prefixed with `greenup: `, never panicking.
pub fn complain(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "greenup: {line}");
}

/// `println!` that never panics on a closed stdout.
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => { $crate::emit(&format!($($t)*)) };
}

/// Print `value` as pretty JSON on stdout.
pub fn print_json<T: serde::Serialize>(value: &T) -> Outcome {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure::Runtime(format!("cannot write JSON: {e}")))?;
    emit(&text);
    Ok(())
}

/// The site config path: the option if given, else the Debian default.
pub fn site_path(opt: &Option<PathBuf>) -> PathBuf {
    opt.clone()
        .unwrap_or_else(|| PathBuf::from(greenup::site::DEFAULT_PATH))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let outcome = match cli.command {
        Command::Plan(args) => plan::run(args),
        Command::Model(cmd) => model::run(cmd),
        Command::Profile(cmd) => profile::run(cmd),
        Command::Site(cmd) => site::run(cmd),
        Command::Policy(cmd) => policy::run(cmd),
        Command::Jobs(args) => report_cmds::jobs(args),
        Command::Job(a) => daemon_cmds::job(&a),
        Command::Status(a) => daemon_cmds::status(&a),
        Command::Report(args) => report_cmds::report(args),
        Command::App(args) => report_cmds::app(args),
        Command::Meter(args) => meter::run(args),
        Command::Gpu(args) => gpu::run(args),
        Command::Budget(args) => budget_cmds::budget(args),
        Command::Quote(args) => budget_cmds::quote(args),
        Command::Power(args) => power::run(&args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Infeasible) => ExitCode::from(1),
        Err(Failure::Input(msg)) => {
            complain(&msg);
            ExitCode::from(2)
        }
        Err(Failure::Runtime(msg)) => {
            complain(&msg);
            ExitCode::from(3)
        }
    }
}

/// Help and version go to stdout as clap prints them; a usage error becomes one line
/// (the option, the value and what is valid) and exit status 2.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => {
            let text = e.render().to_string();
            let line: Vec<&str> = text
                .lines()
                .map(str::trim)
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .filter(|l| !l.is_empty())
                .collect();
            let line = line.join(" ");
            complain(line.strip_prefix("error: ").unwrap_or(&line));
            ExitCode::from(2)
        }
    }
}
