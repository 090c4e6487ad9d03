//! `greenup jobs`, `greenup job JOBID` and `greenup status`: read greenupd's
//! jobs, decisions, outcomes and ledger, as plain tables or `--json`.
//!
//! They talk to greenupd on its Unix socket (the caller is known by
//! SO_PEERCRED) or, with `--connect HOST:PORT`, over TCP with a MUNGE credential.

use std::path::PathBuf;
use std::time::Duration;

use comfy_table::{Table, presets::NOTHING};
use greenup_proto::client::{Client, Endpoint};
use greenup_proto::protocol::{JobRecord, Status};

use crate::{Failure, Outcome, emit, print_json, site_path};

/// Where to find greenupd.
#[derive(Debug, Clone, clap::Args)]
pub struct DaemonConn {
    /// greenupd's address: unix:PATH or HOST:PORT (default: the site config's daemon.socket).
    #[arg(long, value_name = "ADDR")]
    pub connect: Option<String>,
    /// The site config, for greenupd's socket (default /etc/slurm/greenup.yaml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl DaemonConn {
    pub fn client(&self) -> Result<Client, Failure> {
        let (endpoint, timeout) = match &self.connect {
            Some(a) => (Endpoint::parse(a), Duration::from_secs(10)),
            None => {
                let site = greenup::site::load(site_path(&self.config))?;
                (
                    Endpoint::Unix(site.daemon.socket.clone()),
                    Duration::from_millis(site.daemon.timeout_ms.max(1000)),
                )
            }
        };
        Client::connect(&endpoint, timeout).map_err(|e| Failure::Runtime(e.to_string()))
    }
}

/// Options of `greenup job`.
#[derive(Debug, Clone, clap::Args)]
pub struct JobArgs {
    /// The Slurm job id.
    pub job_id: u64,
    #[command(flatten)]
    pub conn: DaemonConn,
}

/// Options of `greenup status`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub conn: DaemonConn,
}

pub fn remote(e: greenup_proto::client::ClientError) -> Failure {
    Failure::Runtime(e.to_string())
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |x| x.to_string())
}

pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(NOTHING);
    t.set_header(header.iter().map(|h| h.to_string()));
    t
}

fn verdict(v: greenup_proto::protocol::Verdict) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// `greenup job JOBID`: one job's decision and outcomes.
pub fn job(args: &JobArgs) -> Outcome {
    let job = args.conn.client()?.get_job(args.job_id).map_err(remote)?;
    if args.conn.json {
        return print_json(&job);
    }
    emit(job_text(&job).trim_end());
    Ok(())
}

fn job_text(j: &JobRecord) -> String {
    let d = &j.decision;
    let mut out = String::new();
    let mut line = |k: &str, v: String| out.push_str(&format!("{k:<16}{v}\n"));
    line("job", j.job_id.to_string());
    line("user", j.user.clone().unwrap_or_else(|| j.uid.to_string()));
    line("partition", opt(j.partition.as_deref()));
    line(
        "state",
        format!(
            "{}{}",
            j.state.as_str(),
            j.end
                .as_ref()
                .map(|e| format!(" ({})", e.as_str()))
                .unwrap_or_default()
        ),
    );
    line("policy", d.policy.clone());
    line(
        "profile",
        format!(
            "{} v{}",
            opt(d.profile.as_deref()),
            opt(d.profile_version.as_deref())
        ),
    );
    line("verdict", verdict(d.verdict));
    if !d.reason.is_empty() {
        line("reason", d.reason.clone());
    }
    line(
        "power cap",
        d.power_cap_w
            .map_or_else(|| "none".into(), |w| format!("{:.0} W", w.0)),
    );
    line("reserved", format!("{:.0} W", d.reserved_w.0));
    for b in &d.budgets {
        line("budget", b.describe());
    }
    if let Some(p) = &d.plan {
        line(
            "nodes used",
            format!("{} of {}", p.node_count, j.request.nodes.len()),
        );
        line(
            "predicted",
            format!(
                "{:.1} s, {:.3} MJ, {:.0} W",
                p.predicted.time_s.0,
                p.predicted.energy_j.0 / 1e6,
                p.predicted.avg_power_w.0
            ),
        );
        line(
            "baseline",
            format!(
                "{:.1} s, {:.3} MJ, {:.0} W",
                p.baseline.time_s.0,
                p.baseline.energy_j.0 / 1e6,
                p.baseline.avg_power_w.0
            ),
        );
    }
    let measured: f64 = j
        .outcomes
        .iter()
        .filter_map(|o| o.energy_j)
        .map(|e| e.0)
        .sum();
    if !j.outcomes.is_empty() {
        line(
            "measured",
            format!("{:.3} MJ over {} nodes", measured / 1e6, j.outcomes.len()),
        );
    }
    let mut t = table(&[
        "NODE",
        "PLANNED_GHZ",
        "RAN_GHZ",
        "ENERGY_J",
        "ELAPSED_S",
        "SOURCE",
        "RESTORED",
    ]);
    for name in &j.request.nodes {
        let o = j.outcomes.iter().find(|o| &o.node == name);
        t.add_row(vec![
            name.clone(),
            opt(d.freq_for(name).map(|f| format!("{f:.3}"))),
            opt(o.and_then(|o| o.freq_ghz).map(|f| format!("{:.3}", f.0))),
            opt(o.and_then(|o| o.energy_j).map(|e| format!("{:.0}", e.0))),
            opt(o.and_then(|o| o.elapsed_s).map(|e| format!("{:.1}", e.0))),
            opt(o.and_then(|o| o.source.map(|s| s.as_str()))),
            opt(o.map(|o| if o.restored { "yes" } else { "NO" })),
        ]);
    }
    out.push_str(&format!("\n{t}\n"));
    out
}

/// `greenup status`: greenupd's version, counts and power ledger.
pub fn status(args: &StatusArgs) -> Outcome {
    let st = args.conn.client()?.status().map_err(remote)?;
    if args.conn.json {
        return print_json(&st);
    }
    emit(status_text(&st).trim_end());
    Ok(())
}

fn status_text(s: &Status) -> String {
    let mut out = format!(
        "greenupd {} (protocol v{}), up {} s, config {}\njobs: {} open, {} total; {} node outcomes; {} connections\n\n",
        s.version,
        s.protocol,
        s.uptime_s,
        s.config,
        s.open_jobs,
        s.total_jobs,
        s.outcomes,
        s.connections
    );
    let mut t = table(&["SCOPE", "CAP_W", "RESERVED_W", "FREE_W", "JOBS"]);
    for l in &s.ledger {
        t.add_row(vec![
            l.scope.clone(),
            l.cap_w
                .map_or_else(|| "none".into(), |c| format!("{:.0}", c.0)),
            format!("{:.0}", l.reserved_w.0),
            l.free_w
                .map_or_else(|| "-".into(), |f| format!("{:.0}", f.0)),
            l.jobs.to_string(),
        ]);
    }
    out.push_str(&format!("{t}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_figures_print_as_plain_numbers_in_their_columns() {
        let j: JobRecord = serde_json::from_value(serde_json::json!({
            "job_id": 9, "uid": 1000, "user": "ada", "partition": null, "state": "closed",
            "end": "completed", "opened_at": 1_795_000_000, "closed_at": 1_795_002_600,
            "request": {"job_id": 9, "uid": 1000, "nodes": ["n1", "n2"], "power_cap_w": 900.0},
            "decision": {
                "job_id": 9, "verdict": "planned", "reason": "", "policy": "min-energy",
                "profile": "lammps", "profile_version": "3", "power_cap_w": 900.0,
                "reserved_w": 612.5, "decided_at": 1_795_000_000,
                "plan": {
                    "policy": "min-energy", "feasible": true, "reason": "", "node_count": 2,
                    "nodes": [
                        {"name": "n1", "type": "std", "freq_ghz": 2.2},
                        {"name": "n2", "type": "std", "freq_ghz": 2.2}
                    ],
                    "predicted": {"time_s": 2520.0, "energy_j": 1.2e6, "avg_power_w": 476.2},
                    "baseline": {"time_s": 2400.0, "energy_j": 1.44e6, "avg_power_w": 600.0},
                    "objective": 1.2e6,
                    "search": {"algorithm": "exact", "candidates": 12, "elapsed_us": 40}
                }
            },
            "outcomes": [{
                "job_id": 9, "node": "n1", "freq_ghz": 2.2, "energy_j": 601234.4,
                "elapsed_s": 2533.25, "source": "rapl"
            }]
        }))
        .unwrap();
        let text = job_text(&j);
        for line in [
            "power cap       900 W\n",
            "reserved        612 W\n",
            "predicted       2520.0 s, 1.200 MJ, 476 W\n",
            "baseline        2400.0 s, 1.440 MJ, 600 W\n",
            "measured        0.601 MJ over 1 nodes\n",
        ] {
            assert!(text.contains(line), "{line:?} in\n{text}");
        }
        let row = |node: &str| {
            text.lines()
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .find(|w| w.first() == Some(&node))
                .unwrap()
        };
        assert_eq!(
            row("n1"),
            ["n1", "2.200", "2.200", "601234", "2533.2", "rapl", "yes"]
        );
        assert_eq!(row("n2"), ["n2", "2.200", "-", "-", "-", "-", "-"]);
    }
}
