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
    }
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
