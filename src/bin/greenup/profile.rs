//! `greenup profile ...`: application profiles.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use greenup::profile::Profile;

use crate::{Failure, Outcome};

/// Profile commands. (`profile pin` and `profile learn`, which use greenupd's state, live with the commands that talk to it.)
#[derive(Subcommand, Debug)]
pub enum ProfileCommand {
    /// Check a profile file; with --site, also check it covers the site's node types.
    Check(CheckArgs),
    /// Use VERSION of a profile from now on (the admin file's version rolls back; `latest` unpins).
    Pin(crate::report_cmds::PinArgs),
    /// Build a profile's first version from its stored runs at maximum frequency (monitor runs, baseline samples).
    Learn(crate::report_cmds::LearnArgs),
}

/// Options of `greenup profile check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The profile file.
    file: PathBuf,
    /// Also build the profile's model on this site config's node types.
    #[arg(long, value_name = "FILE")]
    site: Option<PathBuf>,
}

/// Run a profile command.
pub fn run(cmd: ProfileCommand) -> Outcome {
    match cmd {
        ProfileCommand::Check(args) => check(args),
        ProfileCommand::Pin(args) => crate::report_cmds::pin(args),
        ProfileCommand::Learn(args) => crate::report_cmds::learn(args),
    }
}

fn check(args: CheckArgs) -> Outcome {
    let profile = Profile::load(&args.file)?;
    if let Some(site_file) = &args.site {
        let site = greenup::site::load(site_file)?;
        profile.predictor(&site).map_err(|e| {
            Failure::Input(format!(
                "{}: does not fit site {}: {e}",
                args.file.display(),
                site_file.display()
            ))
        })?;
    }
    crate::say!(
        "{}: ok: profile {} version {}; models: {}; used: {}",
        args.file.display(),
        profile.name(),
        profile.version(),
        profile.models().join(", "),
        profile.chosen_model()
    );
    Ok(())
}
