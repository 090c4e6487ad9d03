//! `greenup site ...`: the site config.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use greenup::input::{InputError, Origin};
use greenup::policy::PolicySet;
use greenup::units::{format_energy, format_power};

use crate::Outcome;

/// Site commands.
#[derive(Subcommand, Debug)]
pub enum SiteCommand {
    /// Check a site config and the policies it names; print a summary.
    Check(CheckArgs),
    /// Print slurm.conf's `Licenses=` line for the site's power caps, and write the table
    /// job_submit.lua sizes each job's watts from (`power.enforce: queue`) and, under
    /// `hres`, Slurm's resources.yaml for the site's and racks' caps.
    Licenses(LicensesArgs),
    /// Each node type's idle and busy watts per clock as greenupd plans with them, each
    /// with its source (site, measured, interpolated, site scaled), learned from the
    /// jobs greenupd stored the way greenupd learns them; runs left out are listed.
    Power(PowerArgs),
}

/// Options of `greenup site power`.
#[derive(Args, Debug)]
pub struct PowerArgs {
    /// Site config (default /etc/slurm/greenup.yaml).
    #[arg(long, value_name = "FILE")]
    site: Option<PathBuf>,
    /// Only the site config's values: do not ask greenupd for the stored jobs.
    #[arg(long)]
    site_only: bool,
}

/// Options of `greenup site licenses`.
#[derive(Args, Debug)]
pub struct LicensesArgs {
    /// The site config file.
    file: PathBuf,
    /// Also write the Lua table for job_submit.lua here (through a temporary file).
    #[arg(long, value_name = "FILE")]
    lua: Option<PathBuf>,
    /// Under `power.enforce: hres`, write Slurm's resources.yaml here (through a
    /// temporary file) rather than print it.
    #[arg(long, value_name = "FILE")]
    resources: Option<PathBuf>,
}

/// Options of `greenup site check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The site config file.
    file: PathBuf,
}

/// Run a site command.
pub fn run(cmd: SiteCommand) -> Outcome {
    match cmd {
        SiteCommand::Check(args) => check(args),
        SiteCommand::Licenses(args) => licenses(args),
        SiteCommand::Power(args) => power(args),
    }
}

fn power(args: PowerArgs) -> Outcome {
    use greenup::model::measured_power::{overlay, table};
    let site = greenup::site::load(crate::site_path(&args.site))?;
    if args.site_only {
        crate::say!("{}", table(&site.node_types).trim_end());
        return Ok(());
    }
    let learned = measured(&site)?;
    let types = overlay(&site.node_types, &learned.curves);
    crate::say!("{}", table(&types).trim_end());
    for l in &learned.left_out {
        crate::say!("left out: {l}");
    }
    Ok(())
}

/// The node types' busy watts per clock as greenupd learns them, from the closed jobs
/// it keeps (the newest `LEARN_FROM`).
pub fn measured(
    site: &greenup::site::Site,
) -> Result<greenup::profile::node_power::Learned, crate::Failure> {
    use greenup::profile::node_power::{LEARN_FROM, learn_from_records};
    let filter = greenup_proto::protocol::ListRecords {
        state: Some(greenup::record::JobState::Closed),
        ..Default::default()
    };
    let records = crate::report_cmds::connect(site)?
        .records(filter, LEARN_FROM)
        .map_err(|e| crate::Failure::Runtime(e.to_string()))?;
    Ok(learn_from_records(&records, site))
}

/// `site` with the watts greenupd plans with: what its nodes measured per clock laid
/// over the config's, where greenupd runs here (its socket exists) and answers (as root
/// or the SlurmUser from every job, as greenupd learns; a user's own jobs otherwise).
/// Where it does not answer, one line says so and the config's watts stand;
/// `site_only` asks nothing.
pub fn as_greenupd_plans(mut site: greenup::site::Site, site_only: bool) -> greenup::site::Site {
    if site_only || !site.daemon.socket.exists() {
        return site;
    }
    match measured(&site) {
        Ok(l) => {
            site.node_types = greenup::model::measured_power::overlay(&site.node_types, &l.curves)
        }
        Err(crate::Failure::Input(e) | crate::Failure::Runtime(e)) => crate::complain(&format!(
            "the site config's watts alone: greenupd did not answer ({e})"
        )),
        Err(crate::Failure::Infeasible) => {}
    }
    site
}

fn licenses(args: LicensesArgs) -> Outcome {
    use greenup::power::slurm;
    let site = greenup::site::load(&args.file)?;
    let line = slurm::licenses_line(&site);
    let resources = slurm::resources_yaml(&site);
    if line.is_none() && resources.is_none() {
        return Err(InputError::new(
            Origin::Path(args.file.clone()),
            "power_cap",
            "(none)",
            "a site or partition power cap for Slurm's licenses to count",
        )
        .into());
    }
    let write = |out: &PathBuf, text: &str| {
        greenup_core::fs::write_atomic_mode(out, text.as_bytes(), 0o644)
            .map_err(|e| crate::Failure::Runtime(format!("{}: {e}", out.display())))
    };
    if let Some(out) = &args.lua {
        let uid = greenup_host::users::uid_of(&site.daemon.slurm_user);
        write(out, &slurm::lua_table(&site, uid))?;
    }
    match (&args.resources, &resources) {
        (Some(out), Some(text)) => write(out, text)?,
        (Some(out), None) => {
            return Err(crate::Failure::Runtime(format!(
                "--resources {}: not written: resources.yaml is Slurm's only under power.enforce: hres, and this site's is {}",
                out.display(),
                site.power.enforce.as_str()
            )));
        }
        (None, Some(text)) => crate::say!("{}", text.trim_end()),
        (None, None) => {}
    }
    if let Some(line) = line {
        crate::say!("{line}");
    }
    Ok(())
}

fn check(args: CheckArgs) -> Outcome {
    let site = greenup::site::load(&args.file)?;
    let policies = PolicySet::load(&site.policy_dirs)?;
    let known = policies.names();
    let names = std::iter::once(("default_policy", &site.default_policy)).chain(
        site.allowed_policies
            .iter()
            .map(|p| ("allowed_policies", p)),
    );
    for (key, name) in names {
        if !known.contains(&name.as_str()) {
            let dirs: Vec<String> = site
                .policy_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            return Err(InputError::new(
                Origin::Path(args.file.clone()),
                key,
                name,
                format!(
                    "a policy found in {}: {}",
                    dirs.join(", "),
                    known.join(", ")
                ),
            )
            .into());
        }
    }
    let cap = |w: Option<f64>| w.map(format_power).unwrap_or_else(|| "none".into());
    crate::say!("{}: ok", args.file.display());
    crate::say!("  node types: {}", site.node_types.len());
    for t in site.node_types.values() {
        let names: Vec<String> = site
            .nodes
            .iter()
            .filter(|(_, ty)| **ty == t.name)
            .map(|(n, _)| n.clone())
            .collect();
        crate::say!(
            "    {}: {} nodes {}; {} frequencies {}-{} GHz",
            t.name,
            names.len(),
            greenup::hostlist::compress(&names),
            t.freqs_ghz.len(),
            t.fmin(),
            t.fmax()
        );
    }
    crate::say!("  site power cap: {}", cap(site.power_cap_w));
    for (name, p) in &site.partitions {
        crate::say!(
            "  partition {name}: {} nodes, power cap {}",
            p.nodes.len(),
            cap(p.power_cap_w)
        );
    }
    crate::say!(
        "  job energy limit: {}",
        site.job_energy_limit_j
            .map(format_energy)
            .unwrap_or_else(|| "none".into())
    );
    crate::say!(
        "  policies: {} (default {})",
        known.join(", "),
        site.default_policy
    );
    crate::say!(
        "  enforce: {}",
        format!("{:?}", site.enforce).to_lowercase()
    );
    crate::say!(
        "  greenupd: {} (store {})",
        site.daemon.listen,
        site.daemon.store.display()
    );
    Ok(())
}
