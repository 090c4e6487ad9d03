//! `greenup model ...`: evaluate a model directly, outside any policy.

use std::path::Path;

use clap::{Args, Subcommand};
use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};
use greenup::model::iso_energy::{EeRow, MachinePower};
use greenup::profile::Profile;

use crate::plan::profile_path;
use crate::{Failure, Outcome, print_json};

/// Model commands.
#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Paper 000's iso-energy-efficiency: T1, Tp, E1, Ep, EEF and EE for each (p, f).
    Ee(EeArgs),
}

/// Options of `greenup model ee`.
#[derive(Args, Debug)]
pub struct EeArgs {
    /// Profile with an iso_energy section: a file, or NAME in /etc/slurm/greenup/profiles.
    #[arg(long, value_name = "FILE|NAME")]
    profile: String,
    /// Problem size n, as the profile's expressions use it.
    #[arg(long, value_name = "N", value_parser = size_arg, allow_hyphen_values = true)]
    n: f64,
    /// Processor counts: a comma list of numbers and ranges, e.g. 1,2,4,8 or 1-16.
    #[arg(long, value_name = "LIST", value_parser = counts_arg, allow_hyphen_values = true)]
    p: Counts,
    /// Frequencies in GHz: a comma list, e.g. 1.6,2.0,2.8.
    #[arg(long, value_name = "LIST", value_parser = freqs_arg, allow_hyphen_values = true)]
    f: Freqs,
    /// Print the rows as a JSON list.
    #[arg(long)]
    json: bool,
    /// Site config, for a profile whose machine takes a node type's watts
    /// (default /etc/slurm/greenup.yaml); its measured curves come from greenupd where
    /// it runs here and answers.
    #[arg(long, value_name = "FILE")]
    site: Option<std::path::PathBuf>,
    /// With --site: the config's watts alone, without asking greenupd what it measured.
    #[arg(long)]
    site_only: bool,
}

/// Parsed `--p`.
#[derive(Debug, Clone)]
pub struct Counts(Vec<usize>);

/// Parsed `--f`.
#[derive(Debug, Clone)]
pub struct Freqs(Vec<f64>);

/// Most rows one `--p` list may ask for.
const MAX_COUNTS: usize = 100_000;

fn size_arg(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| format!("invalid problem size '{s}': expected a number above 0, e.g. 1e6"))
}

fn counts_arg(s: &str) -> Result<Counts, String> {
    let bad = || {
        format!("invalid processor list '{s}': expected counts of 1 or more, e.g. 1,2,4,8 or 1-16")
    };
    let mut out = Vec::new();
    for item in s.split(',') {
        let (lo, hi) = greenup::policy::parse_range(item).ok_or_else(bad)?;
        if out.len() + (hi - lo) >= MAX_COUNTS {
            return Err(format!(
                "invalid processor list '{s}': more than {MAX_COUNTS} counts"
            ));
        }
        out.extend(lo..=hi);
    }
    Ok(Counts(out))
}

fn freqs_arg(s: &str) -> Result<Freqs, String> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && *f > 0.0)
        })
        .collect::<Option<Vec<f64>>>()
        .map(Freqs)
        .ok_or_else(|| {
            format!("invalid frequency list '{s}': expected GHz above 0, e.g. 1.6,2.0,2.8")
        })
}

/// Run a model command.
pub fn run(cmd: ModelCommand) -> Outcome {
    match cmd {
        ModelCommand::Ee(args) => ee(args),
    }
}

fn ee(args: EeArgs) -> Outcome {
    let path = profile_path(&args.profile, Path::new(greenup::site::DEFAULT_PROFILE_DIR))?;
    let profile = Profile::load(&path)?;
    let Some(model) = profile.iso_energy() else {
        return Err(Failure::option(
            "--profile",
            path.display(),
            format!(
                "a profile with an iso_energy section; '{}' has: {}",
                profile.name(),
                profile.models().join(", ")
            ),
        ));
    };
    let placed;
    let model = match &model.machine.power {
        MachinePower::Stated { .. } => model,
        MachinePower::Site { .. } => {
            let site = crate::site::as_greenupd_plans(
                greenup::site::load(crate::site_path(&args.site))?,
                args.site_only,
            );
            placed = model
                .on_site(&site.node_types)
                .map_err(|e| Failure::Input(format!("{}: {e}", path.display())))?;
            &placed
        }
    };
    let mut rows: Vec<EeRow> = Vec::with_capacity(args.p.0.len() * args.f.0.len());
    for &p in &args.p.0 {
        for &f in &args.f.0 {
            rows.push(model.ee_row(args.n, p, f).map_err(|e| {
                Failure::Input(format!(
                    "{}: at n={}, p={p}, f={f} GHz: {e}",
                    path.display(),
                    args.n
                ))
            })?);
        }
    }
    if args.json {
        return print_json(&rows);
    }
    let mut table = Table::new();
    table
        .load_style(UTF8_BORDERS_ONLY)
        .set_header(["p", "f_ghz", "t1_s", "tp_s", "e1_j", "ep_j", "eef", "ee"]);
    for r in &rows {
        table.add_row([
            r.p.to_string(),
            format!("{}", r.f_ghz),
            format!("{:.6e}", r.t1_s),
            format!("{:.6e}", r.tp_s),
            format!("{:.6e}", r.e1_j),
            format!("{:.6e}", r.ep_j),
            format!("{:.6}", r.eef),
            format!("{:.6}", r.ee),
        ]);
    }
    crate::say!("{table}");
    Ok(())
}
