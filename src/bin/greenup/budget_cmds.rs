//! `greenup budget` and `greenup quote`: the energy budgets' standing, and what a job
//! described on the command line would be predicted and charged if it started now.

use std::fmt::Write as _;

use greenup::budget::{Standing, show_budget_energy};
use greenup::record::TimeLimit;
use greenup::report::text::fmt_utc;
use greenup_core::quantity::{Joules, Watts};
use greenup_proto::protocol::OpenJob;

use crate::daemon_cmds::{DaemonConn, remote};
use crate::{Failure, Outcome, emit, print_json};

/// Options of `greenup budget`.
#[derive(Debug, Clone, clap::Args)]
pub struct BudgetArgs {
    /// Only this Slurm account's budget (with the site's).
    #[arg(long, value_name = "A")]
    pub account: Option<String>,
    /// Only this partition's budget (with the site's).
    #[arg(long, value_name = "P")]
    pub partition: Option<String>,
    /// Print CSV instead of a table.
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Write an SVG chart of each budget's use, holds and forecast against its amount.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub conn: DaemonConn,
}

/// `greenup budget`.
pub fn budget(args: BudgetArgs) -> Outcome {
    let list = args
        .conn
        .client()?
        .budgets(args.account.clone(), args.partition.clone())
        .map_err(remote)?;
    if let Some(path) = &args.plot {
        greenup_core::fs::write_atomic(path, plot(&list).as_bytes())
            .map_err(|e| Failure::Runtime(format!("{}: {e}", path.display())))?;
    }
    if args.conn.json {
        return print_json(&list);
    }
    if args.csv {
        emit(
            "budget,period_start,period_end,amount_j,used_j,held_j,left_j,jobs,forecast_j,level_pct,action",
        );
        for s in &list {
            emit(&format!(
                "{},{},{},{},{},{},{},{},{},{},{}",
                s.budget,
                s.period_start,
                s.period_end,
                s.amount_j.0,
                s.used_j.0,
                s.held_j.0,
                s.left_j.0,
                s.jobs,
                s.forecast_j.0,
                s.level_pct.map_or(String::new(), |l| l.to_string()),
                s.action.clone().unwrap_or_default()
            ));
        }
        return Ok(());
    }
    if list.is_empty() {
        emit("no energy budgets are configured (budgets: in the site config)");
        return Ok(());
    }
    let mut t = crate::daemon_cmds::table(&[
        "BUDGET", "PERIOD", "ENDS", "AMOUNT", "USED", "HELD", "LEFT", "JOBS", "FORECAST", "LEVEL",
    ]);
    for s in &list {
        t.add_row(vec![
            s.budget.clone(),
            s.period.clone(),
            fmt_utc(s.period_end),
            show_budget_energy(s.amount_j),
            show_budget_energy(s.used_j),
            show_budget_energy(s.held_j),
            show_budget_energy(s.left_j),
            s.jobs.to_string(),
            show_budget_energy(s.forecast_j),
            match (&s.level_pct, &s.action) {
                (Some(p), Some(a)) => format!("{p:.0}%: {a}"),
                _ => "-".into(),
            },
        ]);
    }
    emit(&t.to_string());
    Ok(())
}

/// One horizontal bar per budget: used, then held, against the amount, with a mark at
/// the forecast for the period's end.
fn plot(list: &[Standing]) -> String {
    let (w, row, left) = (640.0, 36.0, 160.0);
    let h = 30.0 + row * list.len() as f64;
    let scale =
        |s: &Standing, j: Joules| (j / s.amount_j).clamp(0.0, 1.5) * (w - left - 40.0) / 1.5;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n"
    );
    for (i, s) in list.iter().enumerate() {
        let y = 20.0 + row * i as f64;
        let (used, held) = (scale(s, s.used_j), scale(s, s.held_j));
        let full = scale(s, s.amount_j);
        let fc = scale(s, s.forecast_j);
        let _ = writeln!(
            svg,
            "<text x=\"4\" y=\"{}\">{}</text>\
             <rect x=\"{left}\" y=\"{y}\" width=\"{full}\" height=\"20\" fill=\"none\" stroke=\"#444\"/>\
             <rect x=\"{left}\" y=\"{y}\" width=\"{used}\" height=\"20\" fill=\"#2a7\"/>\
             <rect x=\"{}\" y=\"{y}\" width=\"{held}\" height=\"20\" fill=\"#9d9\"/>\
             <line x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#c33\" stroke-width=\"2\"><title>forecast {}</title></line>",
            y + 14.0,
            escape(&s.budget),
            left + used,
            left + fc,
            left + fc,
            y - 3.0,
            y + 23.0,
            show_budget_energy(s.forecast_j)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Options of `greenup quote`.
#[derive(Debug, Clone, clap::Args)]
pub struct QuoteArgs {
    /// The job's nodes as a Slurm hostlist, e.g. n[1-6].
    #[arg(
        long,
        value_name = "HOSTLIST",
        required_unless_present = "node_count",
        conflicts_with = "node_count"
    )]
    pub nodes: Option<String>,
    /// A node count instead: the first N nodes of the partition (or of the site), as the
    /// site config lists them.
    #[arg(long, value_name = "N")]
    pub node_count: Option<usize>,
    /// The job's time limit (Slurm syntax, e.g. 1:00:00).
    #[arg(long, value_name = "TIME")]
    pub time: Option<String>,
    /// The application profile.
    #[arg(long)]
    pub profile: Option<String>,
    /// The policy (the site's default when absent).
    #[arg(long)]
    pub policy: Option<String>,
    /// The Slurm account the job would be charged to.
    #[arg(long)]
    pub account: Option<String>,
    /// The Slurm partition.
    #[arg(long)]
    pub partition: Option<String>,
    /// The job's energy cap, e.g. 20MJ.
    #[arg(long, value_name = "ENERGY")]
    pub energy_cap: Option<String>,
    /// The job's power cap, e.g. 2kW.
    #[arg(long, value_name = "POWER")]
    pub power_cap: Option<String>,
    #[command(flatten)]
    pub conn: DaemonConn,
}

/// `greenup quote`: exit 0 when the job would be admitted, 1 when a budget would refuse it.
pub fn quote(args: QuoteArgs) -> Outcome {
    let bad = |opt: &str, v: &str, e: greenup::units::UnitError| Failure::option(opt, v, e);
    let time_limit = match &args.time {
        Some(t) => TimeLimit::parse(t).map_err(|e| bad("--time", t, e))?,
        None => TimeLimit::Unknown,
    };
    let energy_cap_j = match &args.energy_cap {
        Some(e) => Some(greenup::units::parse_energy(e).map_err(|x| bad("--energy-cap", e, x))?),
        None => None,
    };
    let power_cap_w = match &args.power_cap {
        Some(p) => Some(greenup::units::parse_power(p).map_err(|x| bad("--power-cap", p, x))?),
        None => None,
    };
    let nodelist = match (&args.nodes, args.node_count) {
        (Some(list), _) => list.clone(),
        (None, Some(n)) => first_nodes(&args, n)?,
        (None, None) => {
            return Err(Failure::option(
                "--nodes",
                "",
                "a hostlist or --node-count N",
            ));
        }
    };
    let job = OpenJob {
        restart_count: None,
        // A quote is no job: any valid id will do, nothing is stored under it.
        job_id: 1,
        // SAFETY: getuid cannot fail and touches no memory.
        uid: unsafe { libc::getuid() },
        user: None,
        partition: args.partition.clone(),
        account: args.account.clone(),
        nodes: Vec::new(),
        nodelist: Some(nodelist),
        min_nodes: None,
        time_limit,
        policy: args.policy.clone(),
        profile: args.profile.clone(),
        energy_cap_j: energy_cap_j.map(Joules),
        power_cap_w: power_cap_w.map(Watts),
        algorithm: None,
        granted_w: None,
    };
    let q = args.conn.client()?.quote(job).map_err(remote)?;
    if args.conn.json {
        print_json(&q)?;
    } else {
        emit(&q.line);
    }
    if q.refused {
        if !args.conn.json {
            crate::complain(if q.fails {
                "a budget's warning level would refuse this job now, and the site fails refused jobs (enforce: strict)"
            } else {
                "a budget's warning level would refuse this job's plan now; it would run unchanged (enforce: open)"
            });
        }
        return Err(Failure::Infeasible);
    }
    Ok(())
}

/// The first `n` nodes of the quote's partition (or of the whole site) as a hostlist.
fn first_nodes(args: &QuoteArgs, n: usize) -> Result<String, Failure> {
    let site = greenup::site::load(crate::site_path(&args.conn.config))?;
    let Some(pool) = site.pool(args.partition.as_deref()) else {
        return Err(Failure::option(
            "--partition",
            args.partition.as_deref().unwrap_or_default(),
            site.partitions_valid(),
        ));
    };
    if n == 0 || n > pool.len() {
        return Err(Failure::option(
            "--node-count",
            n,
            format!("1 to {} (the nodes there are)", pool.len()),
        ));
    }
    Ok(greenup::hostlist::compress(&pool[..n]))
}
