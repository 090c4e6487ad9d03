//! Human-readable reports: the `greenup report` page and the `greenup jobs` and
//! `greenup app` tables. Their numbers, and the `--energy-report` paragraph for job
//! stderr, are [`super::paragraph`]'s.

use std::fmt::Write as _;

use comfy_table::{CellAlignment, ContentArrangement, LineStyle, Table, TableStyle};

use greenup_core::time_limit::TimeLimit;

use super::{AppHistory, JobReport, JobRow};

pub use super::paragraph::{
    NOT_AVAILABLE, UNMEASURED, energy_paragraph, fmt_energy, fmt_ghz, fmt_pct, fmt_power, fmt_time,
    fmt_utc, parse_utc, slurm_energy,
};
use super::paragraph::{measured_saving, opt, opt_dash};

/// sacct's look: a dashed rule under the header, nothing else.
const STYLE: TableStyle =
    TableStyle::new().header_separator(LineStyle::none().fill('-').junction(' '));

fn new_table() -> Table {
    let mut t = Table::new();
    t.load_style(STYLE);
    t.force_no_tty();
    t.set_content_arrangement(ContentArrangement::Disabled);
    t
}

fn align_right(t: &mut Table, from: usize) {
    let n = t.column_count();
    for i in from..n {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// The full `greenup report JOBID` page.
pub fn job_report(r: &JobReport) -> String {
    let mut out = String::new();
    let end = r.end_unix.map(fmt_utc).unwrap_or_else(|| "-".into());
    let _ = writeln!(
        out,
        "Job {}  user {}  partition {}  state {}  end {}{}",
        r.job_id,
        r.user,
        r.partition.as_deref().unwrap_or("-"),
        r.state.as_str(),
        end,
        // A requeued job: the page is about its last run, and says so at the top.
        match r.run {
            0 | 1 => String::new(),
            n => format!("  run {n} (requeued)"),
        }
    );
    let _ = writeln!(
        out,
        "Profile     {} v{} ({} model), confidence: {}",
        r.app,
        r.profile_version,
        r.model,
        confidence(r)
    );
    let _ = writeln!(out, "Policy      {}, caps: {}", r.policy, caps(r));
    for b in &r.budgets {
        let _ = writeln!(out, "Budget      {}", b.describe());
    }
    let _ = writeln!(
        out,
        "Decision    {} of {} allocated nodes",
        r.nodes.len(),
        r.allocated_nodes
    );
    if let Some(w) = watts_line(&r.watts) {
        let _ = writeln!(out, "Watts       {w}");
    }
    if let Some(p) = power_line(&r.nodes) {
        let _ = writeln!(out, "Power       {p}");
    }
    if let Some(g) = &r.guard {
        let _ = writeln!(out, "Guard       {g}");
    }
    out.push('\n');

    let mut nodes = new_table();
    // The MPI runtime's columns only when it ran in the job.
    let mpi = r.nodes.iter().any(|n| n.mpi.is_some());
    let mut header = vec![
        "NODE",
        "TYPE",
        "FREQ(GHz)",
        "STATUS",
        "SOURCE",
        "PRED_ENERGY",
        "ENERGY",
        "ERR",
    ];
    if mpi {
        header.extend(["MPI%", "LOW_FREQ", "COMM_SAVED"]);
    }
    // The GPU columns only when a node had GPUs.
    let gpu = r.nodes.iter().any(|n| n.gpu.is_some());
    if gpu {
        header.extend([
            "GPUS",
            "GPU_SOURCE",
            "GPU_ENERGY",
            "GPU_POWER",
            "SM_CLOCK",
            "GPU_UTIL",
        ]);
    }
    nodes.set_header(header);
    for n in &r.nodes {
        let mut row = vec![
            n.name.clone(),
            n.node_type.clone(),
            fmt_ghz(n.freq_ghz),
            n.applied.to_string(),
            n.source.as_str().to_string(),
            opt_dash(n.predicted_energy_j, fmt_energy),
            opt(n.measured_energy_j, fmt_energy),
            opt_dash(
                n.predicted_energy_j
                    .and_then(|p| super::error_pct(p, n.measured_energy_j)),
                fmt_pct,
            ),
        ];
        if mpi {
            row.extend([
                opt_dash(n.mpi.map(|m| m.mpi_pct), |p| format!("{p:.1}%")),
                opt_dash(n.mpi.map(|m| m.low_freq_s), fmt_time),
                opt_dash(n.mpi.and_then(|m| m.saved_j), |j| {
                    format!("~{}", fmt_energy(j))
                }),
            ]);
        }
        if gpu {
            let g = n.gpu.as_ref();
            row.extend([
                g.map_or("-".into(), |g| g.gpus.to_string()),
                g.map_or("-".into(), |_| "nvml".into()),
                match g {
                    Some(g) => opt(g.energy_j.map(|j| j.0), fmt_energy),
                    None => "-".into(),
                },
                opt_dash(g.and_then(|g| g.avg_power_w).map(|w| w.0), |w| {
                    format!("{w:.1} W")
                }),
                opt_dash(g.and_then(|g| g.sm_mhz), |m| format!("{m:.0} MHz")),
                opt_dash(g.and_then(|g| g.util_pct), |u| format!("{u:.1}%")),
            ]);
        }
        nodes.add_row(row);
    }
    align_right(&mut nodes, 5);
    if let Some(c) = nodes.column_mut(2) {
        c.set_cell_alignment(CellAlignment::Right);
    }
    let _ = writeln!(out, "{nodes}");
    out.push('\n');

    let mut totals = new_table();
    totals.set_header(vec!["", "PREDICTED", "MEASURED", "ERROR", "BASELINE"]);
    type Row = (
        &'static str,
        f64,
        Option<f64>,
        Option<f64>,
        f64,
        fn(f64) -> String,
    );
    let rows: [Row; 3] = [
        (
            "TIME",
            r.predicted.time_s.0,
            r.measured.time_s,
            r.time_error_pct(),
            r.baseline.time_s.0,
            fmt_time,
        ),
        (
            "ENERGY",
            r.predicted.energy_j.0,
            r.measured.energy_j,
            r.energy_error_pct(),
            r.baseline.energy_j.0,
            fmt_energy,
        ),
        (
            "AVG_POWER",
            r.predicted.avg_power_w.0,
            r.measured.avg_power_w,
            r.power_error_pct(),
            r.baseline.avg_power_w.0,
            fmt_power,
        ),
    ];
    for (name, predicted, measured, error, baseline, fmt) in rows {
        totals.add_row(vec![
            name.to_string(),
            fmt(predicted),
            opt(measured, fmt),
            opt_dash(error, fmt_pct),
            fmt(baseline),
        ]);
    }
    align_right(&mut totals, 1);
    let _ = writeln!(out, "{totals}");
    out.push('\n');

    // The GPUs' energy is added only here: ENERGY above is what the models predict.
    if r.nodes.iter().any(|n| n.gpu.is_some()) {
        let m = &r.measured;
        let _ = writeln!(
            out,
            "With GPUs   {}: nodes {} (rapl) + GPUs {} (nvml)",
            opt(m.total_energy_j, fmt_energy),
            opt(m.energy_j, fmt_energy),
            opt(m.gpu_energy_j, fmt_energy)
        );
    }
    let _ = writeln!(
        out,
        "Baseline    all {} allocated nodes at maximum frequency (predicted)",
        r.allocated_nodes
    );
    let _ = writeln!(
        out,
        "Saving      against the predicted baseline: predicted {}, measured {}",
        opt_dash(r.predicted_saving_pct(), |p| format!("{p:.1}%")),
        measured_saving(r)
    );
    let _ = writeln!(out, "Measured    {}", against_measured(r));
    runs_section(&mut out, r);
    if let Some(ee) = r.ee {
        let base = r
            .ee_baseline
            .map(|b| format!(" (baseline {b:.3})"))
            .unwrap_or_default();
        let _ = writeln!(out, "EE          {ee:.3}{base}");
    }
    let _ = writeln!(
        out,
        "Slurm       ConsumedEnergy {}",
        slurm_energy(&r.slurm_energy)
    );
    if r.warnings.is_empty() {
        let _ = writeln!(out, "Warnings    none");
    } else {
        let _ = writeln!(out, "Warnings");
        for w in &r.warnings {
            let _ = writeln!(out, "  - {w}");
        }
    }
    out
}

/// A requeued job's earlier runs, one line each, and what all its runs measured
/// together: the energy a job used is every run's, not only the last one's. Nothing for
/// a job Slurm ran once.
fn runs_section(out: &mut String, r: &JobReport) {
    let Some(all) = &r.all_runs else {
        return;
    };
    let _ = writeln!(out, "Earlier runs");
    for e in &r.earlier_runs {
        let clocks = match e.clocks_ghz.as_slice() {
            [] => "as submitted".to_string(),
            [f] => format!("at {} GHz", fmt_ghz(*f)),
            [lo, .., hi] => format!("at {}-{} GHz", fmt_ghz(*lo), fmt_ghz(*hi)),
        };
        let restart = e
            .restart_count
            .map(|n| format!(" (restart {n})"))
            .unwrap_or_default();
        // Not a Slurm state, but written like one: greenupd ended the run itself.
        let ended = if e.reclaimed {
            "RECLAIMED"
        } else {
            e.state.as_str()
        };
        let _ = writeln!(
            out,
            "  run {}{restart}  {}  {} {clocks}  {ended}  energy {}  time {}",
            e.run,
            e.nodes,
            e.policy,
            opt(e.measured.energy_j, fmt_energy),
            opt(e.measured.time_s, fmt_time),
        );
    }
    let _ = writeln!(
        out,
        "All runs    {} runs: energy {}, time {}",
        all.runs,
        opt(all.energy_j, fmt_energy),
        opt(all.time_s, fmt_time),
    );
}

/// The watts the plan was made with, per node type and clock, each with its source; an
/// admin reads from it whether greenup planned with the site's model or with what the
/// nodes measured. `None` when the decision records none.
fn watts_line(watts: &[crate::record::TypeWatts]) -> Option<String> {
    if watts.is_empty() {
        return None;
    }
    let parts: Vec<String> = watts
        .iter()
        .map(|w| {
            format!(
                "{} at {:.2} GHz: {:.1} W busy, {:.1} W idle ({}{})",
                w.node_type,
                w.freq_ghz.0,
                w.busy_w.0,
                w.idle_w.0,
                w.source,
                node_factors(&w.node_factors)
            )
        })
        .collect();
    Some(parts.join("; "))
}

/// The most nodes with their own factor the text names for one type and clock; the
/// JSON form has them all.
const FACTORS_SHOWN: usize = 8;

/// `; n5 x1.034, n6 x1.057`: the nodes planned with their own power factor, if any.
fn node_factors(factors: &std::collections::BTreeMap<String, f64>) -> String {
    if factors.is_empty() {
        return String::new();
    }
    let mut shown: Vec<String> = factors
        .iter()
        .take(FACTORS_SHOWN)
        .map(|(n, k)| format!("{n} x{k:.3}"))
        .collect();
    if factors.len() > FACTORS_SHOWN {
        shown.push(format!("{} more", factors.len() - FACTORS_SHOWN));
    }
    format!("; {}", shown.join(", "))
}

/// Which nodes held the RAPL power limit their decision asked for; None when none was asked.
fn power_line(nodes: &[super::NodeReport]) -> Option<String> {
    let asked: Vec<_> = nodes
        .iter()
        .filter_map(|n| n.power.as_ref().map(|p| (n.name.as_str(), p)))
        .collect();
    if asked.is_empty() {
        return None;
    }
    let held: Vec<String> = asked
        .iter()
        .filter_map(|(name, p)| {
            let w = p.held_w?;
            let note = p
                .note
                .as_deref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default();
            Some(format!("{name} {}{note}", fmt_power(w.0)))
        })
        .collect();
    let not_held: Vec<String> = asked
        .iter()
        .filter(|(_, p)| p.held_w.is_none())
        .map(|(name, p)| {
            format!(
                "{name} asked {}: {}",
                fmt_power(p.asked_w.0),
                p.note.as_deref().unwrap_or("no reason given")
            )
        })
        .collect();
    let mut line = format!("RAPL limit held on {} of {} nodes", held.len(), asked.len());
    if !held.is_empty() {
        line.push_str(&format!(": {}", held.join(", ")));
    }
    if !not_held.is_empty() {
        line.push_str(&format!("; not held on {}", not_held.join("; ")));
    }
    Some(line)
}

/// The run against measured baselines of its application and allocation.
fn against_measured(r: &JobReport) -> String {
    if r.baseline_sample {
        return "this run is a baseline sample (every node at f_max, picked by the site)".into();
    }
    if r.baseline_run {
        return "this run is a measured baseline (monitor)".into();
    }
    // A clock sample ran slower on purpose: its cost against the baselines is worth
    // showing, but it must not read as a policy's saving.
    let sample = if r.clock_sample {
        "this run is a clock sample (its nodes ran at a clock whose watts were being measured), not a baseline; "
    } else {
        ""
    };
    let line = match &r.against_measured {
        Some(a) => format!(
            "saving {:.1}%, slowdown {:.1}% against the median of {} measured baseline run{} ({}, {})",
            a.saving_pct,
            a.slowdown_pct,
            a.baseline_runs,
            if a.baseline_runs == 1 { "" } else { "s" },
            fmt_energy(a.baseline_energy_j),
            fmt_time(a.baseline_time_s)
        ),
        None => format!("no measured baseline of {} ({}) yet", r.app, r.shape),
    };
    format!("{sample}{line}")
}

fn confidence(r: &JobReport) -> String {
    match (r.confidence.samples, r.confidence.residual) {
        (0, _) => "as written by the admin (no runs fitted yet)".to_string(),
        (n, Some(res)) => format!("{n} runs fitted, residual {:.1}%", res * 100.0),
        (n, None) => format!("{n} runs fitted"),
    }
}

fn caps(r: &JobReport) -> String {
    let mut parts = Vec::new();
    if let Some(e) = r.caps.energy_j {
        parts.push(format!("energy {}", fmt_energy(e)));
    }
    if let Some(p) = r.caps.power_w {
        parts.push(format!("power {}", fmt_power(p)));
    }
    match r.caps.time_limit {
        TimeLimit::Seconds(t) => parts.push(format!("time limit {}", fmt_time(t))),
        TimeLimit::Unlimited => parts.push("no time limit".to_string()),
        // Not a cap: the plan simply had no limit to keep within.
        TimeLimit::Unknown => {}
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// The `greenup jobs` table, one row per job, columns as eacct/sacct users expect.
pub fn jobs_table(rows: &[JobRow]) -> String {
    let mut t = new_table();
    t.set_header(vec![
        "JOBID",
        "USER",
        "APP",
        "POLICY",
        "STATE",
        "NODES",
        "AVG_FREQ(GHz)",
        "ELAPSED",
        "ENERGY",
        "AVG_POWER",
        "ERR(E)",
        "SAVING",
        "END",
    ]);
    for r in rows {
        t.add_row(vec![
            r.job_id.to_string(),
            r.user.clone(),
            r.app.clone(),
            r.policy.clone(),
            // A requeued job's row is its last run: the state says which.
            match r.run {
                0 | 1 => r.state.as_str().to_string(),
                n => format!("{} (run {n})", r.state.as_str()),
            },
            r.nodes.to_string(),
            opt_dash(r.avg_freq_ghz, |f| format!("{f:.2}")),
            opt(r.time_s, fmt_time),
            opt(r.energy_j, fmt_energy),
            opt(r.avg_power_w, fmt_power),
            opt_dash(r.energy_error_pct, fmt_pct),
            opt_dash(r.saving_pct, |p| format!("{p:.1}%")),
            r.end_unix.map(fmt_utc).unwrap_or_else(|| "-".into()),
        ]);
    }
    align_right(&mut t, 5);
    t.to_string()
}

/// The `greenup app NAME` page: versions, then runs.
pub fn app_history(h: &AppHistory) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Application {}: {} runs, typical saving {}",
        h.app,
        h.runs.len(),
        opt_dash(h.typical_saving_pct, |p| format!("{p:.1}%"))
    );
    out.push('\n');
    let mut v = new_table();
    v.set_header(vec![
        "VERSION",
        "PINNED",
        "SAMPLES",
        "RESIDUAL",
        "RUNS",
        "MEAN|ERR(E)|",
        "MEDIAN_SAVING",
    ]);
    for s in &h.versions {
        v.add_row(vec![
            s.version.to_string(),
            if s.pinned { "yes" } else { "" }.to_string(),
            s.samples.to_string(),
            opt_dash(s.residual, |r| format!("{:.1}%", r * 100.0)),
            s.runs.to_string(),
            opt_dash(s.mean_abs_energy_error_pct, |p| format!("{p:.1}%")),
            opt_dash(s.median_saving_pct, |p| format!("{p:.1}%")),
        ]);
    }
    align_right(&mut v, 2);
    let _ = writeln!(out, "{v}");
    out.push('\n');
    out.push_str(&measured_section(h));
    out.push_str(&jobs_table(&h.runs));
    out.push('\n');
    out
}

/// Each policy against measured baselines, and which missed its slowdown target.
fn measured_section(h: &AppHistory) -> String {
    let mut out = String::new();
    if h.baselines.is_empty() {
        let _ = writeln!(
            out,
            "Measured baselines: none yet (monitor runs and the site's baseline samples make them); savings below are against the predicted baseline\n"
        );
        return out;
    }
    let _ = writeln!(
        out,
        "Against measured baselines (every node at f_max, same allocation; median, min and max over runs)"
    );
    let mut t = new_table();
    t.set_header(vec![
        "ALLOCATION",
        "POLICY",
        "RUNS",
        "BASELINE_RUNS",
        "SAVING",
        "SLOWDOWN",
        "MAX_SLOWDOWN",
        "PREDICTED_SAVING",
    ]);
    for b in &h.baselines {
        t.add_row(vec![
            b.shape.clone(),
            "(baseline)".into(),
            b.time_s.n.to_string(),
            b.time_s.n.to_string(),
            format!("{} median", fmt_energy(b.energy_j.median)),
            format!("{} median", fmt_time(b.time_s.median)),
            "-".into(),
            "-".into(),
        ]);
    }
    for m in &h.measured {
        t.add_row(vec![
            m.shape.clone(),
            m.policy.clone(),
            m.slowdown_pct.n.to_string(),
            m.baseline_runs.to_string(),
            m.saving_pct.to_string(),
            m.slowdown_pct.to_string(),
            opt_dash(m.max_slowdown_pct, |p| format!("{p:.1}%")),
            m.predicted_saving_pct
                .map_or_else(|| "-".into(), |p| format!("{p} (vs predicted)")),
        ]);
    }
    align_right(&mut t, 2);
    let _ = writeln!(out, "{t}");
    for line in h.measured.iter().filter_map(|m| m.miss_line()) {
        let _ = writeln!(out, "MISSED: {line}");
    }
    out.push('\n');
    out
}
