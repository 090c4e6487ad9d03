//! What a report prints without a table: numbers in the units a Slurm user reads
//! (sacct-style elapsed time, kJ/MJ, W/kW, "unmeasured" for anything not measured), and
//! the one-paragraph `--energy-report` summary the plugin writes to a job's stderr at its
//! end. The tables are [`super::text`]'s; this part needs no table crate, so the plugin
//! links none.

use std::fmt::Write as _;

use super::accounting::SlurmEnergy;
use super::{JobReport, Source};

pub use greenup_core::utc::{fmt_utc, parse_utc};

/// Printed wherever a value was not measured.
pub const UNMEASURED: &str = "unmeasured";
/// Printed for Slurm's ConsumedEnergy when accounting has no figure, before the reason.
pub const NOT_AVAILABLE: &str = "not available";

/// Elapsed time the way sacct prints it: `[D-]HH:MM:SS`.
pub fn fmt_time(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "-".to_string();
    }
    let s = seconds.round() as u64;
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}:{sec:02}")
    }
}

/// Energy with an SI prefix: `812 J`, `45.20 kJ`, `12.31 MJ`, `1.20 GJ`.
pub fn fmt_energy(joules: f64) -> String {
    scaled(joules, "J")
}

/// Power with an SI prefix: `95.0 W`, `3.31 kW`.
pub fn fmt_power(watts: f64) -> String {
    scaled(watts, "W")
}

fn scaled(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return "-".to_string();
    }
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2} G{unit}", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2} M{unit}", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.2} k{unit}", v / 1e3)
    } else {
        format!("{v:.1} {unit}")
    }
}

/// A frequency in GHz with two decimals; `-` when unknown.
pub fn fmt_ghz(f: f64) -> String {
    if f.is_finite() {
        format!("{f:.2}")
    } else {
        "-".to_string()
    }
}

/// A signed percentage, `+4.9%`.
pub fn fmt_pct(p: f64) -> String {
    format!("{p:+.1}%")
}

pub(crate) fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| UNMEASURED.to_string())
}

pub(crate) fn opt_dash(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".to_string())
}

/// Slurm's ConsumedEnergy as a report prints it: a figure, or "not available (why)".
pub fn slurm_energy(e: &SlurmEnergy) -> String {
    if let (SlurmEnergy::WrittenByGreenupd { .. }, Some(j)) = (e, e.joules()) {
        return format!(
            "{}, written there by greenupd from this measurement",
            fmt_energy(j)
        );
    }
    match (e.joules(), e.reason()) {
        (Some(j), _) => fmt_energy(j),
        (None, Some(why)) => format!("{NOT_AVAILABLE} ({why})"),
        (None, None) => NOT_AVAILABLE.to_string(),
    }
}

pub(crate) fn measured_saving(r: &JobReport) -> String {
    // The baseline is a whole run of the application: a saving against it would only
    // measure how short the run was.
    if let (true, Some(t)) = (r.ran_too_short_to_compare(), r.measured.time_s) {
        return format!(
            "not comparable (the job ran {} of the predicted {})",
            fmt_time(t),
            fmt_time(r.predicted.time_s.0)
        );
    }
    match r.measured_saving_pct() {
        Some(p) => format!("{p:.1}%"),
        None => format!("{UNMEASURED} (energy not measured on every node)"),
    }
}

/// The one-paragraph `--energy-report` summary written to the job's stderr at job end.
pub fn energy_paragraph(r: &JobReport) -> String {
    let mut s = format!(
        "greenup: job {} ({} v{}, policy {}) ran on {} of {} allocated nodes",
        r.job_id,
        r.app,
        r.profile_version,
        r.policy,
        r.nodes.len(),
        r.allocated_nodes
    );
    let (lo, hi) = r.nodes.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), n| {
        (lo.min(n.freq_ghz), hi.max(n.freq_ghz))
    });
    if lo.is_finite() {
        if (hi - lo).abs() < 1e-9 {
            let _ = write!(s, " at {hi:.2} GHz");
        } else {
            let _ = write!(s, " at {lo:.2}-{hi:.2} GHz");
        }
    }
    let _ = write!(
        s,
        ". Predicted {}, {}, {}; measured {}, {}, {}",
        fmt_time(r.predicted.time_s.0),
        fmt_energy(r.predicted.energy_j.0),
        fmt_power(r.predicted.avg_power_w.0),
        opt(r.measured.time_s, fmt_time),
        opt(r.measured.energy_j, fmt_energy),
        opt(r.measured.avg_power_w, fmt_power),
    );
    match (r.time_error_pct(), r.energy_error_pct()) {
        (Some(t), Some(e)) => {
            let _ = write!(
                s,
                " (prediction error: time {}, energy {})",
                fmt_pct(t),
                fmt_pct(e)
            );
        }
        (Some(t), None) => {
            let _ = write!(s, " (prediction error: time {})", fmt_pct(t));
        }
        _ => {}
    }
    let _ = write!(
        s,
        ". Energy saved against all nodes at maximum frequency: predicted {}, measured {}.",
        opt_dash(r.predicted_saving_pct(), |p| format!("{p:.1}%")),
        measured_saving(r)
    );
    let mut sources: Vec<&str> = r
        .nodes
        .iter()
        .map(|n| n.source)
        .filter(|s| *s != Source::Unmeasured)
        .map(Source::as_str)
        .collect();
    sources.sort_unstable();
    sources.dedup();
    let unmeasured = r.unmeasured_nodes();
    let by = if sources.is_empty() {
        "nothing".to_string()
    } else {
        sources.join(" and ")
    };
    if unmeasured.is_empty() {
        let _ = write!(s, " Measured by {by}");
    } else {
        let _ = write!(s, " Measured by {by}, {} unmeasured", unmeasured.join(","));
    }
    let _ = write!(
        s,
        "; Slurm ConsumedEnergy: {}.",
        slurm_energy(&r.slurm_energy)
    );
    if let Some(ee) = r.ee {
        let _ = write!(s, " EE {ee:.3}.");
    }
    if !r.warnings.is_empty() {
        let w: Vec<String> = r.warnings.iter().map(|w| w.to_string()).collect();
        let _ = write!(s, " Warnings: {}.", w.join("; "));
    }
    let _ = write!(s, " Details: greenup report {}", r.job_id);
    s
}
