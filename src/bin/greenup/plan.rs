//! `greenup plan`: one decision, printed as text or as the JSON of `greenup::plan::Plan`.

use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args, ValueEnum};
use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};
use greenup::hostlist;
use greenup::input::{InputError, Origin};
use greenup::plan::{Algorithm, NodeRequest, Plan, PlanError, PlanRequest};
use greenup::policy::PolicySet;
use greenup::profile::Profile;
use greenup::record::TimeLimit;
use greenup::site::Site;
use greenup::units::{format_duration, format_energy, format_power, parse_energy, parse_power};
use greenup_core::quantity::{Joules, Watts};

use crate::{Failure, Outcome, print_json, site_path};

/// Options of `greenup plan`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("which_nodes").required(true).args(["nodes", "node_count"])))]
pub struct PlanArgs {
    /// Site config [default: /etc/slurm/greenup.yaml].
    #[arg(long, value_name = "FILE")]
    site: Option<PathBuf>,
    /// Application profile: a YAML file, or NAME for NAME.yaml in the site's profile_dir.
    #[arg(long, value_name = "FILE|NAME")]
    profile: String,
    /// Policy name [default: the site's default_policy].
    #[arg(long, value_name = "NAME")]
    policy: Option<String>,
    /// Exactly these nodes, as a Slurm hostlist (e.g. n[1-4,7]).
    #[arg(long, value_name = "HOSTLIST", value_parser = hosts_arg)]
    nodes: Option<Hosts>,
    /// Any MIN to MAX nodes of the partition (or the site), e.g. 4 or 2-8.
    #[arg(long, value_name = "MIN[-MAX]", value_parser = count_arg, allow_hyphen_values = true)]
    node_count: Option<(usize, usize)>,
    /// Energy cap, e.g. 20MJ or 1.5kWh.
    #[arg(long, value_name = "ENERGY", value_parser = parse_energy, allow_hyphen_values = true)]
    energy_cap: Option<f64>,
    /// Power cap, e.g. 2kW.
    #[arg(long, value_name = "POWER", value_parser = parse_power, allow_hyphen_values = true)]
    power_cap: Option<f64>,
    /// Time limit in Slurm's format (MM, HH:MM:SS, D-HH:MM:SS, UNLIMITED).
    #[arg(long, value_name = "TIME", value_parser = time_arg, allow_hyphen_values = true)]
    time_limit: Option<TimeLimit>,
    /// Optimizer.
    #[arg(long, value_enum, default_value_t = AlgorithmArg::Exact)]
    algorithm: AlgorithmArg,
    /// Slurm partition, for its node pool and power cap.
    #[arg(long, value_name = "NAME")]
    partition: Option<String>,
    /// Print the plan as one JSON object.
    #[arg(long)]
    json: bool,
    /// Plan with the site config's watts alone, without asking greenupd what its nodes
    /// measured per clock.
    #[arg(long)]
    site_only: bool,
}

/// Node names from `--nodes`.
#[derive(Debug, Clone)]
pub struct Hosts(Vec<String>);

/// `--algorithm` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum AlgorithmArg {
    /// Exact sweep over sorted makespan bounds.
    Exact,
    /// Paper 004's Algorithm 1, as published.
    Paper,
    /// Every combination (small node counts only).
    Brute,
}

impl From<AlgorithmArg> for Algorithm {
    fn from(a: AlgorithmArg) -> Self {
        match a {
            AlgorithmArg::Exact => Algorithm::Exact,
            AlgorithmArg::Paper => Algorithm::Paper,
            AlgorithmArg::Brute => Algorithm::Brute,
        }
    }
}

fn hosts_arg(s: &str) -> Result<Hosts, hostlist::HostlistError> {
    hostlist::expand(s).map(Hosts)
}

/// A `--node-count` that is neither a count nor a range; clap prints it after the option.
#[derive(Debug, thiserror::Error)]
#[error("invalid node count '{text}': expected N or MIN-MAX with 1 <= MIN <= MAX, e.g. 4 or 2-8")]
struct CountArgError {
    /// The text as given.
    text: String,
}

/// `N` or `MIN-MAX` with 1 <= MIN <= MAX.
fn count_arg(s: &str) -> Result<(usize, usize), CountArgError> {
    greenup::policy::parse_range(s).ok_or_else(|| CountArgError {
        text: s.to_string(),
    })
}

fn time_arg(s: &str) -> Result<TimeLimit, greenup::units::UnitError> {
    TimeLimit::parse(s)
}

/// Whether a profile argument names a file rather than a profile of the site.
fn looks_like_path(arg: &str) -> bool {
    Path::new(arg).exists() || arg.contains('/') || arg.ends_with(".yaml") || arg.ends_with(".yml")
}

/// A profile argument: a path if it names an existing file or looks like one, else the
/// admin's profile of that name in `dir`.
pub fn profile_path(arg: &str, dir: &Path) -> Result<PathBuf, greenup::input::InputError> {
    if looks_like_path(arg) {
        Ok(PathBuf::from(arg))
    } else {
        let origin = greenup::input::Origin::Option("--profile".into());
        greenup::profile::locate::admin_file(dir, arg, origin)
    }
}

/// The command-line option a request field came from, so errors name what the user typed.
fn option_of(field: &str, args: &PlanArgs) -> String {
    match field {
        "nodes" if args.nodes.is_none() => "--node-count",
        "nodes" => "--nodes",
        "energy_cap_j" => "--energy-cap",
        "power_cap_w" => "--power-cap",
        "time_limit_s" => "--time-limit",
        "partition" => "--partition",
        "policy" => "--policy",
        other => other,
    }
    .to_string()
}

fn plan_failure(e: PlanError, args: &PlanArgs) -> Failure {
    match e {
        PlanError::Input(InputError {
            origin: Origin::Request(field),
            key,
            value,
            expected,
        }) => Failure::from(InputError {
            origin: Origin::Option(option_of(&field, args)),
            key,
            value,
            expected,
        }),
        PlanError::Input(e) => e.into(),
        // A model or optimizer error here comes from this profile on these nodes, not from greenup.
        PlanError::Model(e) => Failure::Input(format!("profile {}: {e}", args.profile)),
        PlanError::Optimize(e) => Failure::Input(format!("profile {}: {e}", args.profile)),
    }
}

/// Run `greenup plan`.
pub fn run(args: PlanArgs) -> Outcome {
    let site = greenup::site::load(site_path(&args.site))?;
    let plan = decide(&site, &args)?;
    if args.json {
        print_json(&plan)?;
    } else {
        print_text(&plan);
    }
    if plan.feasible {
        Ok(())
    } else {
        crate::complain(&format!("infeasible: {}", plan.reason));
        Err(Failure::Infeasible)
    }
}

/// Load the profile and policy the options name and decide.
fn decide(site: &Site, args: &PlanArgs) -> Result<Plan, Failure> {
    let policy_name = args
        .policy
        .clone()
        .unwrap_or_else(|| site.default_policy.clone());
    let policies = PolicySet::load(&site.policy_dirs)?;
    let Some(policy) = policies.get(&policy_name) else {
        return Err(Failure::option(
            "--policy",
            &policy_name,
            format!(
                "one of the site's policies: {}",
                allowed_names(site, &policies).join(", ")
            ),
        ));
    };
    if let Some(p) = &args.partition
        && !site.partitions.contains_key(p)
    {
        return Err(Failure::option("--partition", p, site.partitions_valid()));
    }
    if let Some(Hosts(names)) = &args.nodes
        && let Some(unknown) = names.iter().find(|n| !site.nodes.contains_key(*n))
    {
        return Err(Failure::option(
            "--nodes",
            unknown,
            format!(
                "nodes of the site config {}",
                hostlist::compress(&site.nodes.keys().cloned().collect::<Vec<_>>())
            ),
        ));
    }
    // A name is the profile a job of that name would use (the refined version in use,
    // else the admin's file), so a cli_filter's choice matches the decision at start.
    let path = if looks_like_path(&args.profile) {
        PathBuf::from(&args.profile)
    } else {
        let origin = greenup::input::Origin::Option("--profile".into());
        greenup::profile::locate::for_job(site, &args.profile, origin)?.path
    };
    let profile = Profile::load(&path)?;
    let nodes = match (&args.nodes, args.node_count) {
        (Some(Hosts(names)), _) => NodeRequest::List {
            names: names.clone(),
            min: None,
        },
        (None, Some((min, max))) => NodeRequest::Count { min, max },
        (None, None) => {
            return Err(Failure::option(
                "--nodes",
                "",
                "a hostlist, or --node-count MIN-MAX",
            ));
        }
    };
    let req = PlanRequest {
        policy: policy_name,
        nodes,
        partition: args.partition.clone(),
        energy_cap_j: args.energy_cap.map(Joules),
        power_cap_w: args.power_cap.map(Watts),
        time_limit: args.time_limit.unwrap_or_default(),
        algorithm: args.algorithm.into(),
        max_freq_ghz: None,
    };
    let measured = crate::site::as_greenupd_plans(site.clone(), args.site_only);
    // Every cap held at the most the chips can draw, as greenupd holds it.
    let build = |types: &Site| {
        profile
            .predictor(types)
            .map_err(|e| Failure::Input(format!("profile {}: {e}", args.profile)))
    };
    let predictor = build(&measured)?;
    let floored = build(&greenup::plan::priced(&measured, true))?;
    greenup::plan::plan_within_caps(site, predictor.as_ref(), floored.as_ref(), policy, &req)
        .map(|(plan, _)| plan)
        .map_err(|e| plan_failure(e, args))
}

/// Policy names a user of this site may ask for.
pub fn allowed_names(site: &Site, policies: &PolicySet) -> Vec<String> {
    policies
        .names()
        .into_iter()
        .filter(|n| {
            site.allowed_policies.is_empty() || site.allowed_policies.iter().any(|a| a == n)
        })
        .map(str::to_string)
        .collect()
}

fn print_text(plan: &Plan) {
    crate::say!(
        "policy {}: {}",
        plan.policy,
        if plan.feasible {
            "feasible"
        } else {
            "INFEASIBLE"
        }
    );
    if !plan.reason.is_empty() {
        crate::say!("{}", plan.reason);
    }
    let mut totals = Table::new();
    totals
        .load_style(UTF8_BORDERS_ONLY)
        .set_header(["", "time", "energy", "avg power"]);
    for (label, e) in [
        ("predicted", &plan.predicted),
        ("baseline (all at max)", &plan.baseline),
    ] {
        totals.add_row([
            label.to_string(),
            format_duration(e.time_s.0),
            format_energy(e.energy_j.0),
            format_power(e.avg_power_w.0),
        ]);
    }
    let pct = |new: f64, old: f64| {
        if old > 0.0 {
            format!("{:+.1}%", (new - old) / old * 100.0)
        } else {
            "-".into()
        }
    };
    totals.add_row([
        "change".to_string(),
        pct(plan.predicted.time_s.0, plan.baseline.time_s.0),
        pct(plan.predicted.energy_j.0, plan.baseline.energy_j.0),
        pct(plan.predicted.avg_power_w.0, plan.baseline.avg_power_w.0),
    ]);
    crate::say!("{totals}");
    if let Some(g) = plan.gpus {
        crate::say!(
            "GPUs: {} of the predicted power on average, {} of the baseline's",
            format_power(g.planned_w.0),
            format_power(g.baseline_w.0)
        );
    }

    // Nodes of one type at one frequency (and GPU clock) share a row, as a hostlist.
    type Key = (String, f64, Option<u32>);
    let mut groups: Vec<(Key, Vec<String>)> = Vec::new();
    for n in &plan.nodes {
        let key = (n.node_type.clone(), n.freq_ghz.0, n.gpu_mhz);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, names)) => names.push(n.name.clone()),
            None => groups.push((key, vec![n.name.clone()])),
        }
    }
    let gpu_clocks = plan.nodes.iter().any(|n| n.gpu_mhz.is_some());
    let mut nodes = Table::new();
    let mut header = vec!["nodes", "count", "type", "GHz"];
    if gpu_clocks {
        header.push("GPU MHz");
    }
    nodes.load_style(UTF8_BORDERS_ONLY).set_header(header);
    for ((ty, f, mhz), names) in &groups {
        let mut row = vec![
            hostlist::compress(names),
            names.len().to_string(),
            ty.clone(),
            format!("{f:.3}"),
        ];
        if gpu_clocks {
            row.push(mhz.map_or_else(|| "top".into(), |m| m.to_string()));
        }
        nodes.add_row(row);
    }
    crate::say!("{} nodes", plan.node_count);
    crate::say!("{nodes}");
    crate::say!(
        "objective {:.6}; search: {} over {} candidates in {} us",
        plan.objective,
        format!("{:?}", plan.search.algorithm).to_lowercase(),
        plan.search.candidates,
        plan.search.elapsed_us
    );
}
