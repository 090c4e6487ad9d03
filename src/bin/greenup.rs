//! greenup: the command-line front end to greenup's library and to greenupd.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod daemon_cmds;

/// Energy- and power-capped job configuration for Slurm.
#[derive(Debug, Parser)]
#[command(name = "greenup", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the jobs greenupd knows (yours only, unless you are an admin).
    Jobs(daemon_cmds::JobsArgs),
    /// Show one job's decision and measured outcome.
    Job(daemon_cmds::JobArgs),
    /// Show greenupd's status and power-budget ledger.
    Status(daemon_cmds::StatusArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Jobs(a) => daemon_cmds::jobs(a),
        Command::Job(a) => daemon_cmds::job(a),
        Command::Status(a) => daemon_cmds::status(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("greenup: {e}");
            ExitCode::from(2)
        }
    }
}
