//! `greenup policy ...`: the named policies a site offers.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};
use greenup::policy::PolicySet;
use greenup::units::{format_energy, format_power};

use crate::{Outcome, site_path};

/// Policy commands.
#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    /// List the policies of the site's policy_dirs that users may ask for.
    List(ListArgs),
    /// Apply POLICY to APP's jobs again after greenupd stopped applying it for missing
    /// its max_slowdown (site option baseline.on_miss: monitor). Root or SlurmUser only.
    Clear(ClearArgs),
}

/// Options of `greenup policy clear`.
#[derive(Args, Debug)]
pub struct ClearArgs {
    /// Application profile name.
    app: String,
    /// Policy name.
    policy: String,
    /// Site config [default: /etc/slurm/greenup.yaml].
    #[arg(long, value_name = "FILE")]
    site: Option<PathBuf>,
}

/// Options of `greenup policy list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// Site config [default: /etc/slurm/greenup.yaml].
    #[arg(long, value_name = "FILE")]
    site: Option<PathBuf>,
}

/// Run a policy command.
pub fn run(cmd: PolicyCommand) -> Outcome {
    match cmd {
        PolicyCommand::List(args) => list(args),
        PolicyCommand::Clear(args) => clear(args),
    }
}

fn clear(args: ClearArgs) -> Outcome {
    let site = greenup::site::load(site_path(&args.site))?;
    let timeout = std::time::Duration::from_millis(site.daemon.timeout_ms.max(2_000));
    let held = greenup_proto::client::Client::connect(
        &greenup_proto::client::Endpoint::Unix(site.daemon.socket.clone()),
        timeout,
    )
    .and_then(|mut c| c.clear_hold(&args.app, &args.policy))
    .map_err(|e| crate::Failure::Runtime(e.to_string()))?;
    if held {
        crate::say!("{}: policy {} applies again", args.app, args.policy);
    } else {
        crate::say!("{}: policy {} was not held", args.app, args.policy);
    }
    Ok(())
}

fn list(args: ListArgs) -> Outcome {
    let site = greenup::site::load(site_path(&args.site))?;
    let policies = PolicySet::load(&site.policy_dirs)?;
    let allowed = crate::plan::allowed_names(&site, &policies);
    let mut table = Table::new();
    table.load_style(UTF8_BORDERS_ONLY).set_header([
        "policy",
        "objective",
        "limits",
        "description",
    ]);
    for p in policies.iter().filter(|p| allowed.contains(&p.name)) {
        let c = &p.constraints;
        let mut limits = Vec::new();
        if let Some(e) = c.energy_cap_j {
            limits.push(format!("energy <= {}", format_energy(e)));
        }
        if let Some(w) = c.power_cap_w {
            limits.push(format!("power <= {}", format_power(w)));
        }
        if let Some(s) = c.max_slowdown {
            limits.push(format!("slowdown <= {:.0}%", s * 100.0));
        }
        if let Some(ee) = c.min_ee {
            limits.push(format!("EE >= {ee}"));
        }
        if let Some((lo, hi)) = c.nodes {
            limits.push(format!("nodes {lo}-{hi}"));
        }
        let name = if p.name == site.default_policy {
            format!("{} (default)", p.name)
        } else {
            p.name.clone()
        };
        let objective = if p.monitor {
            "none (monitor)".to_string()
        } else {
            p.objective.name().to_string()
        };
        table.add_row([name, objective, limits.join(", "), p.description.clone()]);
    }
    crate::say!("{table}");
    Ok(())
}
