//! Post-job reports: what greenup decided for a job, what it predicted, what was
//! measured, and what the site saved against running every node at full speed.
//!
//! [`JobReport`] is the one data model every output is rendered from: the text
//! report ([`text`]), JSON and CSV ([`table`]), the jobs list and the application
//! history, the `--energy-report` paragraph, and the plots ([`svg`], fed by
//! [`landscape`]). Measured values are `Option`s: a node without a meter is
//! "unmeasured", and no renderer ever prints a number in its place.

pub mod accounting;
pub mod landscape;
pub mod measured;
pub mod metrics;
pub mod paragraph;
pub mod record;
#[cfg(feature = "render")]
pub mod svg;
#[cfg(feature = "render")]
pub mod table;
#[cfg(feature = "render")]
pub mod text;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::plan::Estimate;
use greenup_core::time_limit::TimeLimit;

pub use crate::record::{Applied, RunState, Source};

/// One node of a job: what was decided, applied, predicted and measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    /// Slurm node name.
    pub name: String,
    /// Node type from the site config.
    #[serde(rename = "type")]
    pub node_type: String,
    /// The frequency greenup decided, in GHz.
    pub freq_ghz: f64,
    /// Whether that frequency was set.
    pub applied: Applied,
    /// Where the measured energy comes from.
    pub source: Source,
    /// The model's energy for this node, in joules; `None` when no per-node prediction is kept.
    pub predicted_energy_j: Option<f64>,
    /// The measured energy of this node, in joules; `None` when unmeasured.
    pub measured_energy_j: Option<f64>,
    /// What greenup's MPI runtime measured in the job's ranks on this node; `None` when
    /// it did not run there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi: Option<NodeMpi>,
    /// What the job's GPUs on this node used (NVML); `None` when it had none there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::record::NodeGpu>,
    /// The node's RAPL power limit for the job and whether it held; `None` when the
    /// decision asked for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<crate::record::NodePower>,
}

/// One node's MPI ranks as greenup's runtime measured them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NodeMpi {
    /// Ranks that left their measurements.
    pub ranks: u32,
    /// Share of the ranks' time inside MPI, in percent (EAR's MPI%).
    pub mpi_pct: f64,
    /// Mean seconds per rank with its core at the lowered frequency.
    pub low_freq_s: f64,
    /// The estimated joules communication-phase DVFS saved on this node (dynamic power
    /// from the site's power model, not a measurement; `NodeComm::saved_j`); `None`
    /// when it cannot be estimated.
    pub saved_j: Option<f64>,
}

impl NodeMpi {
    /// The report's view of a node's summed rank measurements.
    pub fn of(c: &crate::comm::NodeComm) -> NodeMpi {
        NodeMpi {
            ranks: c.ranks,
            mpi_pct: c.mpi_percent(),
            low_freq_s: c.low_s.0,
            saved_j: c.saved_j.map(|j| j.0),
        }
    }
}

/// A measured total; each part is `None` when it could not be measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Measured {
    /// Wall time in seconds (Slurm's Elapsed).
    pub time_s: Option<f64>,
    /// Energy of all nodes in joules; `None` unless every node was measured.
    pub energy_j: Option<f64>,
    /// Average power in watts (energy / time).
    pub avg_power_w: Option<f64>,
    /// Energy of the job's GPUs on all its nodes in joules (NVML), beside `energy_j`
    /// (RAPL), which the models predict; `None` when the job held no GPUs, or some of
    /// them were unmeasured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_energy_j: Option<f64>,
    /// The job's whole measured energy, `energy_j` plus `gpu_energy_j`, in joules; only
    /// for a job that held GPUs, and `None` unless both parts were measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_energy_j: Option<f64>,
}

/// The caps the job ran under.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Caps {
    /// The energy cap asked for, in joules.
    pub energy_j: Option<f64>,
    /// The power cap asked for (or granted by the site ledger), in watts.
    pub power_w: Option<f64>,
    /// The job's time limit: seconds, unlimited (a year, as Slurm writes it) or unknown
    /// (null).
    #[serde(rename = "time_limit_s", default)]
    pub time_limit: TimeLimit,
}

/// How much the profile version behind the prediction has been confirmed by runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Confidence {
    /// Outcomes the version was fitted from (0 = the admin's file as written).
    pub samples: u32,
    /// Root-mean-square relative error of the fit over those samples (0.05 = 5 %).
    pub residual: Option<f64>,
}

/// Something the user should know about the job's decision or measurement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum Warning {
    /// Some nodes did not run at the decided frequency.
    NotApplied(String),
    /// greenup could not decide; the job ran unchanged.
    Fallback(String),
    /// The site's power budget limited the decision.
    BudgetLimited(String),
    /// The plan could not meet every cap; why.
    Infeasible(String),
    /// The outcome was not used to refine the profile; why.
    NotRefined(String),
    /// Some nodes have no meter, so totals are incomplete.
    Unmeasured(String),
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Warning::NotApplied(s) => write!(f, "not applied: {s}"),
            Warning::Fallback(s) => write!(f, "fallback: {s}"),
            Warning::BudgetLimited(s) => write!(f, "budget-limited: {s}"),
            Warning::Infeasible(s) => write!(f, "infeasible: {s}"),
            Warning::NotRefined(s) => write!(f, "outlier, not used to refine the profile: {s}"),
            Warning::Unmeasured(s) => write!(f, "unmeasured: {s}"),
        }
    }
}

/// Everything `greenup report JOBID` shows about one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobReport {
    /// Slurm job id.
    pub job_id: u64,
    /// User name of the job's owner.
    pub user: String,
    /// Slurm partition.
    pub partition: Option<String>,
    /// How the job ended.
    pub state: RunState,
    /// Job end time, seconds since the Unix epoch (UTC); `None` while running.
    pub end_unix: Option<i64>,
    /// Application profile name.
    pub app: String,
    /// Profile version the decision used.
    pub profile_version: u32,
    /// Model the profile used (`hetero`, `amdahl`, `iso_energy`, `roofline`).
    pub model: String,
    /// How far that version has been confirmed by runs.
    pub confidence: Confidence,
    /// Policy applied.
    pub policy: String,
    /// Caps asked for.
    pub caps: Caps,
    /// Nodes the job was allocated (before any shrink).
    pub allocated_nodes: usize,
    /// The allocation's shape, e.g. `4 nodes: 2 epyc, 2 xeon`: runs are compared with
    /// measured baselines of the same shape only.
    #[serde(default)]
    pub shape: String,
    /// Whether the job ran as a measured baseline (every node at f_max: a monitor
    /// policy or the site's baseline sample).
    #[serde(default)]
    pub baseline_run: bool,
    /// Whether the site picked it as a baseline sample (its policy would have planned).
    #[serde(default)]
    pub baseline_sample: bool,
    /// Whether the site picked this monitor job as a clock sample: its nodes ran at a
    /// clock whose watts were not measured yet (`power.sample_clocks`); no baseline.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clock_sample: bool,
    /// The run against measured baselines of the same application and shape, when
    /// there are any (filled in by whoever has the application's other runs).
    #[serde(default)]
    pub against_measured: Option<measured::Against>,
    /// Each node the decision uses.
    pub nodes: Vec<NodeReport>,
    /// The model's prediction for the decision.
    pub predicted: Estimate,
    /// Every allocated node at its maximum frequency, as predicted.
    pub baseline: Estimate,
    /// What was measured.
    pub measured: Measured,
    /// Iso-energy-efficiency EE = E1/Ep of the decision, when the model defines it.
    pub ee: Option<f64>,
    /// EE of the baseline, when the model defines it.
    pub ee_baseline: Option<f64>,
    /// Slurm accounting's ConsumedEnergy, or why it is not available (never a 0 shown as a figure).
    #[serde(default)]
    pub slurm_energy: accounting::SlurmEnergy,
    /// Warnings, in the order they arose.
    pub warnings: Vec<Warning>,
    /// The job's energy budget charges and each budget's state at admission.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<crate::budget::AtAdmission>,
    /// What the in-job guard did for the policy's `max_slowdown`, in one line ("promise
    /// held by the model", "guard raised N nodes' clocks ...", "guard off: ..."); absent
    /// when the policy promised none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
    /// The watts the decision planned each node type with at its clock, and where they
    /// came from (the site config, measurements, or a line between measured clocks);
    /// empty when no plan was applied or the decision predates them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watts: Vec<crate::record::TypeWatts>,
    /// A requeued job's runs before the one reported, oldest first, in brief; empty
    /// for a job Slurm ran once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_runs: Vec<EarlierRun>,
    /// What every run of a requeued job measured together; absent for a job run once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_runs: Option<AllRuns>,
    /// Which run of the job the report is about: 1 for a job Slurm ran once (left out
    /// of JSON then), N after N-1 requeues.
    #[serde(default = "first_run", skip_serializing_if = "is_first_run")]
    pub run: u32,
}

fn first_run() -> u32 {
    1
}

fn is_first_run(run: &u32) -> bool {
    *run <= 1
}

/// One run of a requeued job before the run a report is about: Slurm keeps the job's
/// id, and the energy that run used is the job's too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlierRun {
    /// Its place among the job's runs, 1 for the first.
    pub run: u32,
    /// Slurm's restart count for it (`SLURM_JOB_RESTART_COUNT`), when its nodes sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_count: Option<u32>,
    /// Its nodes, as a Slurm hostlist (`n[1-2]`).
    pub nodes: String,
    /// The policy its decision applied.
    pub policy: String,
    /// The clocks its decision set, in GHz, each once, lowest first; empty when its
    /// nodes ran as submitted.
    pub clocks_ghz: Vec<f64>,
    /// How it ended, in sacct's terms.
    pub state: RunState,
    /// Whether greenupd reclaimed it: its close never came (the next run ended it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reclaimed: bool,
    /// When it ended, seconds since the Unix epoch.
    pub end_unix: Option<i64>,
    /// What its nodes measured: energy only when every node of it was measured.
    pub measured: Measured,
}

/// Every run of a requeued job together.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AllRuns {
    /// How many runs: the earlier ones and the one reported.
    pub runs: u32,
    /// Their measured wall times added, in seconds; `None` unless every run has one.
    pub time_s: Option<f64>,
    /// Their measured energies added, in joules; `None` unless every node of every run
    /// was measured, so a partial sum is never shown as the job's total.
    pub energy_j: Option<f64>,
}

impl AllRuns {
    /// The total of the run reported (`current`) and the runs before it.
    pub fn of(current: &Measured, earlier: &[EarlierRun]) -> AllRuns {
        let all = || std::iter::once(current).chain(earlier.iter().map(|r| &r.measured));
        AllRuns {
            runs: earlier.len() as u32 + 1,
            time_s: all().map(|m| m.time_s).sum(),
            energy_j: all().map(|m| m.energy_j).sum(),
        }
    }
}

/// Signed prediction error in percent: (predicted - measured) / measured * 100.
///
/// Positive means greenup predicted more than was measured. `None` when the
/// measurement is missing or zero.
pub fn error_pct(predicted: f64, measured: Option<f64>) -> Option<f64> {
    let m = measured?;
    if m > 0.0 && m.is_finite() && predicted.is_finite() {
        Some((predicted - m) / m * 100.0)
    } else {
        None
    }
}

/// Energy saved against the baseline, in percent of the baseline.
pub fn saving_pct(baseline_j: f64, used_j: Option<f64>) -> Option<f64> {
    let u = used_j?;
    if baseline_j > 0.0 && u.is_finite() {
        Some((baseline_j - u) / baseline_j * 100.0)
    } else {
        None
    }
}

impl JobReport {
    /// Measured totals from the per-node measurements and the wall time: energy only
    /// when every node was measured, so a partial sum is never shown as the total.
    pub fn totals_from_nodes(nodes: &[NodeReport], time_s: Option<f64>) -> Measured {
        let energy_j = if nodes.is_empty() {
            None
        } else {
            nodes
                .iter()
                .map(|n| n.measured_energy_j)
                .sum::<Option<f64>>()
        };
        let avg_power_w = match (energy_j, time_s) {
            (Some(e), Some(t)) if t > 0.0 => Some(e / t),
            _ => None,
        };
        let gpus: Vec<Option<f64>> = nodes
            .iter()
            .filter_map(|n| n.gpu.as_ref().map(|g| g.energy_j.map(|j| j.0)))
            .collect();
        let gpu_energy_j = (!gpus.is_empty())
            .then(|| gpus.into_iter().sum::<Option<f64>>())
            .flatten();
        Measured {
            time_s,
            energy_j,
            avg_power_w,
            gpu_energy_j,
            total_energy_j: energy_j.zip(gpu_energy_j).map(|(c, g)| c + g),
        }
    }

    /// Time prediction error in percent.
    pub fn time_error_pct(&self) -> Option<f64> {
        error_pct(self.predicted.time_s.0, self.measured.time_s)
    }

    /// Energy prediction error in percent.
    pub fn energy_error_pct(&self) -> Option<f64> {
        error_pct(self.predicted.energy_j.0, self.measured.energy_j)
    }

    /// Average power prediction error in percent.
    pub fn power_error_pct(&self) -> Option<f64> {
        error_pct(self.predicted.avg_power_w.0, self.measured.avg_power_w)
    }

    /// Energy the decision was predicted to save against the baseline, in percent.
    pub fn predicted_saving_pct(&self) -> Option<f64> {
        saving_pct(self.baseline.energy_j.0, Some(self.predicted.energy_j.0))
    }

    /// Whether the job ran far shorter than predicted (under the share below which
    /// refinement sets a run aside): it did not do the work the baseline stands for.
    pub fn ran_too_short_to_compare(&self) -> bool {
        self.measured
            .time_s
            .is_some_and(|t| crate::record::ran_far_shorter(t, self.predicted.time_s.0))
    }

    /// Measured energy against the predicted baseline, in percent; none for a run far
    /// shorter than predicted.
    pub fn measured_saving_pct(&self) -> Option<f64> {
        if self.ran_too_short_to_compare() {
            return None;
        }
        saving_pct(self.baseline.energy_j.0, self.measured.energy_j)
    }

    /// Nodes without a meter.
    pub fn unmeasured_nodes(&self) -> Vec<&str> {
        self.nodes
            .iter()
            .filter(|n| n.measured_energy_j.is_none())
            .map(|n| n.name.as_str())
            .collect()
    }

    /// The decided frequencies' mean in GHz (what eacct calls the average frequency).
    pub fn mean_freq_ghz(&self) -> Option<f64> {
        let known: Vec<f64> = self
            .nodes
            .iter()
            .map(|n| n.freq_ghz)
            .filter(|f| f.is_finite())
            .collect();
        if known.is_empty() {
            None
        } else {
            Some(known.iter().sum::<f64>() / known.len() as f64)
        }
    }
}

/// One line of `greenup jobs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    /// Slurm job id.
    pub job_id: u64,
    /// Owner.
    pub user: String,
    /// Application profile name and version, e.g. `lammps@3`.
    pub app: String,
    /// Policy applied.
    pub policy: String,
    /// How the job ended.
    pub state: RunState,
    /// Nodes the decision uses.
    pub nodes: usize,
    /// Mean decided frequency in GHz.
    pub avg_freq_ghz: Option<f64>,
    /// Measured wall time in seconds.
    pub time_s: Option<f64>,
    /// Measured energy in joules.
    pub energy_j: Option<f64>,
    /// Measured average power in watts.
    pub avg_power_w: Option<f64>,
    /// Energy prediction error in percent.
    pub energy_error_pct: Option<f64>,
    /// Measured energy saved against the baseline, in percent.
    pub saving_pct: Option<f64>,
    /// Job end time, seconds since the Unix epoch.
    pub end_unix: Option<i64>,
    /// Which run of the job the row is (its last): 1 for a job Slurm ran once (left
    /// out of JSON then), N after N-1 requeues.
    #[serde(default = "first_run", skip_serializing_if = "is_first_run")]
    pub run: u32,
}

impl From<&JobReport> for JobRow {
    fn from(r: &JobReport) -> Self {
        JobRow {
            job_id: r.job_id,
            user: r.user.clone(),
            app: format!("{}@{}", r.app, r.profile_version),
            policy: r.policy.clone(),
            state: r.state,
            nodes: r.nodes.len(),
            avg_freq_ghz: r.mean_freq_ghz(),
            time_s: r.measured.time_s,
            energy_j: r.measured.energy_j,
            avg_power_w: r.measured.avg_power_w,
            energy_error_pct: r.energy_error_pct(),
            saving_pct: r.measured_saving_pct(),
            end_unix: r.end_unix,
            run: r.run,
        }
    }
}

/// One profile version of an application, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionInfo {
    /// Version number (1 = the admin's file).
    pub version: u32,
    /// Outcomes it was fitted from.
    pub samples: u32,
    /// Fit residual (relative RMS).
    pub residual: Option<f64>,
    /// Whether an admin pinned this version.
    pub pinned: bool,
}

/// Per-version summary in an application's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionSummary {
    /// Profile version.
    pub version: u32,
    /// Outcomes it was fitted from.
    pub samples: u32,
    /// Fit residual (relative RMS).
    pub residual: Option<f64>,
    /// Whether an admin pinned it.
    pub pinned: bool,
    /// Jobs decided with this version.
    pub runs: usize,
    /// Mean absolute energy prediction error over its measured runs, in percent.
    pub mean_abs_energy_error_pct: Option<f64>,
    /// Median measured saving against the baseline, in percent.
    pub median_saving_pct: Option<f64>,
}

/// `greenup app NAME`: an application's runs and how its predictions evolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppHistory {
    /// Application profile name.
    pub app: String,
    /// One summary per profile version, oldest first.
    pub versions: Vec<VersionSummary>,
    /// Every run, oldest first.
    pub runs: Vec<JobRow>,
    /// Median measured saving over all runs, in percent.
    pub typical_saving_pct: Option<f64>,
    /// The measured baselines (monitor runs and baseline samples), by allocation shape.
    #[serde(default)]
    pub baselines: Vec<measured::Baseline>,
    /// Each policy's saving and slowdown against those measured baselines.
    #[serde(default)]
    pub measured: Vec<measured::PolicyMeasured>,
}

fn median(v: Vec<f64>) -> Option<f64> {
    measured::Spread::of(&v).map(|s| s.median)
}

fn mean(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        None
    } else {
        Some(v.iter().sum::<f64>() / v.len() as f64)
    }
}

impl AppHistory {
    /// Summarise an application's reports (any order) and its stored versions.
    pub fn build(app: &str, reports: &[JobReport], versions: &[VersionInfo]) -> Self {
        let mut mine: Vec<&JobReport> = reports.iter().filter(|r| r.app == app).collect();
        mine.sort_by_key(|r| (r.end_unix.unwrap_or(i64::MAX), r.job_id));
        let mut by_version: BTreeMap<u32, VersionSummary> = versions
            .iter()
            .map(|v| {
                let s = VersionSummary {
                    version: v.version,
                    samples: v.samples,
                    residual: v.residual,
                    pinned: v.pinned,
                    runs: 0,
                    mean_abs_energy_error_pct: None,
                    median_saving_pct: None,
                };
                (v.version, s)
            })
            .collect();
        for r in &mine {
            by_version
                .entry(r.profile_version)
                .or_insert_with(|| VersionSummary {
                    version: r.profile_version,
                    samples: r.confidence.samples,
                    residual: r.confidence.residual,
                    pinned: false,
                    runs: 0,
                    mean_abs_energy_error_pct: None,
                    median_saving_pct: None,
                })
                .runs += 1;
        }
        for (v, s) in by_version.iter_mut() {
            let of_v = || mine.iter().filter(|r| r.profile_version == *v);
            let errs: Vec<f64> = of_v()
                .filter_map(|r| r.energy_error_pct())
                .map(f64::abs)
                .collect();
            s.mean_abs_energy_error_pct = mean(&errs);
            s.median_saving_pct = median(of_v().filter_map(|r| r.measured_saving_pct()).collect());
        }
        AppHistory {
            app: app.to_string(),
            versions: by_version.into_values().collect(),
            runs: mine.iter().map(|r| JobRow::from(*r)).collect(),
            typical_saving_pct: median(
                mine.iter()
                    .filter_map(|r| r.measured_saving_pct())
                    .collect(),
            ),
            baselines: Vec::new(),
            measured: Vec::new(),
        }
        .measure(reports, |_| None)
    }

    /// Add the measured baselines among `reports` and each policy's results against
    /// them; `max_slowdown` gives a policy's target (a fraction), which says whether
    /// the policy missed it.
    pub fn measure(
        mut self,
        reports: &[JobReport],
        max_slowdown: impl Fn(&str) -> Option<f64>,
    ) -> Self {
        let mine: Vec<JobReport> = reports
            .iter()
            .filter(|r| r.app == self.app)
            .cloned()
            .collect();
        self.baselines = measured::baselines(&mine).into_values().collect();
        self.measured = measured::by_policy(&mine, max_slowdown);
        self
    }
}

/// Why a report could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// CSV writing failed.
    #[cfg(feature = "render")]
    #[error("csv: {0}")]
    Csv(#[from] csv::Error),
    /// JSON writing failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// Writing the output failed.
    #[error("write: {0}")]
    Write(String),
    /// Drawing a plot failed.
    #[error("plot: {0}")]
    Plot(String),
}
