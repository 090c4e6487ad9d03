//! Prometheus text exposition (format 0.0.4) of greenupd's state: the power
//! budget per partition and for the site, running jobs, decisions by policy,
//! fallbacks, the prediction-error histogram, the store size, and the nodes that held
//! (or did not hold) their jobs' power limits.
//!
//! A pure function of a [`Snapshot`]; greenupd takes the snapshot and serves the text.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// A power budget: its cap and what running jobs have reserved of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// Partition name (ignored for the site line).
    pub name: String,
    /// The cap in watts; `None` when there is no cap.
    pub cap_w: Option<f64>,
    /// Watts reserved by running jobs.
    pub reserved_w: f64,
}

impl Budget {
    /// Watts still available under the cap (never negative); `None` without a cap.
    pub fn available_w(&self) -> Option<f64> {
        self.cap_w.map(|c| (c - self.reserved_w).max(0.0))
    }
}

/// Upper bounds, in percent, of the prediction-error histogram's buckets.
pub const ERROR_BUCKETS_PCT: [f64; 8] = [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0];

/// A histogram of absolute energy prediction errors in percent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorHistogram {
    /// Count per bucket of [`ERROR_BUCKETS_PCT`] (not cumulative); the last entry counts errors above every bound.
    pub counts: Vec<u64>,
    /// Sum of all observed errors in percent.
    pub sum: f64,
}

impl Default for ErrorHistogram {
    fn default() -> Self {
        ErrorHistogram {
            counts: vec![0; ERROR_BUCKETS_PCT.len() + 1],
            sum: 0.0,
        }
    }
}

impl ErrorHistogram {
    /// Count one job's prediction error (its sign is dropped).
    pub fn observe(&mut self, error_pct: f64) {
        if !error_pct.is_finite() {
            return;
        }
        let e = error_pct.abs();
        let i = ERROR_BUCKETS_PCT
            .iter()
            .position(|b| e <= *b)
            .unwrap_or(ERROR_BUCKETS_PCT.len());
        if self.counts.len() != ERROR_BUCKETS_PCT.len() + 1 {
            self.counts.resize(ERROR_BUCKETS_PCT.len() + 1, 0);
        }
        self.counts[i] += 1;
        self.sum += e;
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// What greenupd knows at one moment, as the metrics show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Snapshot {
    /// The site-wide budget.
    pub site: Option<Budget>,
    /// One budget per partition.
    pub partitions: Vec<Budget>,
    /// Jobs with an open decision.
    pub running_jobs: u64,
    /// Decisions made since the store was created, by policy.
    pub decisions_by_policy: BTreeMap<String, u64>,
    /// Jobs that ran unchanged because greenup could not decide or apply, by reason.
    pub fallbacks_by_reason: BTreeMap<String, u64>,
    /// Absolute energy prediction errors of finished, measured jobs.
    pub prediction_error: ErrorHistogram,
    /// Size of the store on disk in bytes (database plus write-ahead log).
    pub store_bytes: u64,
    /// Jobs in the store.
    pub store_jobs: u64,
    /// Node outcomes whose decision asked for a RAPL power limit, by whether the node
    /// held it (`held`, `not_held`).
    #[serde(default)]
    pub power_limit_nodes: BTreeMap<String, u64>,
    /// Jobs run to measure rather than to save, by kind (`baseline_sample`,
    /// `clock_sample`): the price of learning, which `baseline.fraction` and
    /// `power.sample_clocks.fraction` bound.
    #[serde(default)]
    pub measurement_runs: BTreeMap<String, u64>,
}

/// A float the way Prometheus reads it (`+Inf`, `-Inf`, `NaN`).
fn num(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

/// Each node type's busy watts at each clock it offers, with their source, as
/// Prometheus gauges for greenupd's metrics page.
pub fn node_type_power(
    types: &std::collections::BTreeMap<String, crate::model::NodeType>,
) -> String {
    let mut out = String::from(
        "# HELP greenup_node_type_busy_watts Watts of one busy node of a type at a clock, \
         as greenup plans with them.\n# TYPE greenup_node_type_busy_watts gauge\n",
    );
    let mut runs = String::from(
        "# HELP greenup_node_type_power_runs Distinct runs whose measurements set a node \
         type's busy watts at a clock.\n# TYPE greenup_node_type_power_runs gauge\n",
    );
    for (name, nt) in types {
        for &f in &nt.freqs_ghz {
            let Ok(w) = nt.watts(f) else {
                continue;
            };
            // The source's kind alone: a label holding the run count would start a new
            // series with every run.
            out += &format!(
                "greenup_node_type_busy_watts{{node_type=\"{}\",ghz=\"{f}\",source=\"{}\"}} {}\n",
                label(name),
                w.source.kind(),
                w.busy_w
            );
            if let crate::record::PowerSource::Measured { runs: n } = w.source {
                runs += &format!(
                    "greenup_node_type_power_runs{{node_type=\"{}\",ghz=\"{f}\"}} {n}\n",
                    label(name)
                );
            }
        }
    }
    out + &runs
}

/// A label value with `\`, `"` and newlines escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Render the snapshot as Prometheus text exposition format.
pub fn render(s: &Snapshot) -> String {
    let mut out = String::new();

    header(
        &mut out,
        "greenup_site_power_cap_watts",
        "gauge",
        "The site power cap in watts (absent when there is none).",
    );
    if let Some(c) = s.site.as_ref().and_then(|b| b.cap_w) {
        let _ = writeln!(out, "greenup_site_power_cap_watts {}", num(c));
    }
    header(
        &mut out,
        "greenup_site_power_reserved_watts",
        "gauge",
        "Watts reserved by running jobs, whole site.",
    );
    let _ = writeln!(
        out,
        "greenup_site_power_reserved_watts {}",
        num(s.site.as_ref().map_or(0.0, |b| b.reserved_w))
    );
    header(
        &mut out,
        "greenup_site_power_available_watts",
        "gauge",
        "Watts left under the site cap.",
    );
    if let Some(a) = s.site.as_ref().and_then(Budget::available_w) {
        let _ = writeln!(out, "greenup_site_power_available_watts {}", num(a));
    }

    header(
        &mut out,
        "greenup_partition_power_cap_watts",
        "gauge",
        "Each partition's power cap in watts.",
    );
    for p in &s.partitions {
        if let Some(c) = p.cap_w {
            let _ = writeln!(
                out,
                "greenup_partition_power_cap_watts{{partition=\"{}\"}} {}",
                label(&p.name),
                num(c)
            );
        }
    }
    header(
        &mut out,
        "greenup_partition_power_reserved_watts",
        "gauge",
        "Watts reserved by running jobs, per partition.",
    );
    for p in &s.partitions {
        let _ = writeln!(
            out,
            "greenup_partition_power_reserved_watts{{partition=\"{}\"}} {}",
            label(&p.name),
            num(p.reserved_w)
        );
    }
    header(
        &mut out,
        "greenup_partition_power_available_watts",
        "gauge",
        "Watts left under each partition's cap.",
    );
    for p in &s.partitions {
        if let Some(a) = p.available_w() {
            let _ = writeln!(
                out,
                "greenup_partition_power_available_watts{{partition=\"{}\"}} {}",
                label(&p.name),
                num(a)
            );
        }
    }

    header(
        &mut out,
        "greenup_running_jobs",
        "gauge",
        "Jobs with an open decision.",
    );
    let _ = writeln!(out, "greenup_running_jobs {}", s.running_jobs);

    header(
        &mut out,
        "greenup_decisions_total",
        "counter",
        "Decisions made, by policy.",
    );
    for (policy, n) in &s.decisions_by_policy {
        let _ = writeln!(
            out,
            "greenup_decisions_total{{policy=\"{}\"}} {n}",
            label(policy)
        );
    }
    header(
        &mut out,
        "greenup_fallbacks_total",
        "counter",
        "Jobs that ran unchanged because greenup could not decide or apply, by reason.",
    );
    for (reason, n) in &s.fallbacks_by_reason {
        let _ = writeln!(
            out,
            "greenup_fallbacks_total{{reason=\"{}\"}} {n}",
            label(reason)
        );
    }

    let h = &s.prediction_error;
    header(
        &mut out,
        "greenup_prediction_error_percent",
        "histogram",
        "Absolute energy prediction error of finished, measured jobs, in percent.",
    );
    let mut cum = 0u64;
    for (i, b) in ERROR_BUCKETS_PCT.iter().enumerate() {
        cum += h.counts.get(i).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "greenup_prediction_error_percent_bucket{{le=\"{}\"}} {cum}",
            num(*b)
        );
    }
    let _ = writeln!(
        out,
        "greenup_prediction_error_percent_bucket{{le=\"+Inf\"}} {}",
        h.count()
    );
    let _ = writeln!(out, "greenup_prediction_error_percent_sum {}", num(h.sum));
    let _ = writeln!(out, "greenup_prediction_error_percent_count {}", h.count());

    header(
        &mut out,
        "greenup_store_bytes",
        "gauge",
        "Size of greenupd's store on disk in bytes.",
    );
    let _ = writeln!(out, "greenup_store_bytes {}", s.store_bytes);
    header(
        &mut out,
        "greenup_store_jobs",
        "gauge",
        "Jobs kept in greenupd's store.",
    );
    let _ = writeln!(out, "greenup_store_jobs {}", s.store_jobs);
    header(
        &mut out,
        "greenup_power_limit_nodes_total",
        "counter",
        "Nodes whose job asked for a RAPL power limit, by whether the node held it (status held or not_held).",
    );
    for (status, n) in &s.power_limit_nodes {
        let _ = writeln!(
            out,
            "greenup_power_limit_nodes_total{{status=\"{}\"}} {n}",
            label(status)
        );
    }
    header(
        &mut out,
        "greenup_measurement_runs_total",
        "counter",
        "Jobs run to measure rather than to save energy, by kind (baseline_sample at the top clock, clock_sample at an unmeasured clock).",
    );
    // Both kinds always, so that a dashboard sees a zero rather than no series.
    for kind in MEASUREMENT_KINDS {
        let n = s.measurement_runs.get(kind).copied().unwrap_or(0);
        let _ = writeln!(out, "greenup_measurement_runs_total{{kind=\"{kind}\"}} {n}");
    }
    out
}

/// The kinds of [`Snapshot::measurement_runs`].
const MEASUREMENT_KINDS: [&str; 2] = ["baseline_sample", "clock_sample"];
