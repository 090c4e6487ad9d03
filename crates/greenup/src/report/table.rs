//! Machine-readable reports: JSON (the data model as is, SI units, `null` for
//! anything unmeasured) and CSV (SI units, an empty cell for anything unmeasured).

use serde::Serialize;

use super::{AppHistory, JobReport, JobRow, ReportError};

/// `greenup report JOBID --json`: the whole report, plus the derived errors and savings.
pub fn job_json(r: &JobReport) -> Result<String, ReportError> {
    #[derive(Serialize)]
    struct Derived {
        time_error_pct: Option<f64>,
        energy_error_pct: Option<f64>,
        power_error_pct: Option<f64>,
        predicted_saving_pct: Option<f64>,
        measured_saving_pct: Option<f64>,
        slurm_energy_text: String,
    }
    #[derive(Serialize)]
    struct Out<'a> {
        #[serde(flatten)]
        report: &'a JobReport,
        derived: Derived,
    }
    let out = Out {
        report: r,
        derived: Derived {
            time_error_pct: r.time_error_pct(),
            energy_error_pct: r.energy_error_pct(),
            power_error_pct: r.power_error_pct(),
            predicted_saving_pct: r.predicted_saving_pct(),
            measured_saving_pct: r.measured_saving_pct(),
            slurm_energy_text: super::text::slurm_energy(&r.slurm_energy),
        },
    };
    Ok(serde_json::to_string_pretty(&out)?)
}

/// One CSV row of a job report: one per node, with the job's totals repeated.
#[derive(Serialize)]
struct JobCsvRow<'a> {
    job_id: u64,
    user: &'a str,
    app: &'a str,
    profile_version: u32,
    policy: &'a str,
    state: &'a str,
    node: &'a str,
    node_type: &'a str,
    freq_ghz: f64,
    applied: String,
    source: &'a str,
    node_pred_energy_j: Option<f64>,
    node_energy_j: Option<f64>,
    node_mpi_pct: Option<f64>,
    node_low_freq_s: Option<f64>,
    node_comm_saved_j: Option<f64>,
    node_gpus: Option<u32>,
    node_gpu_energy_j: Option<f64>,
    node_gpu_avg_power_w: Option<f64>,
    node_gpu_sm_mhz: Option<f64>,
    node_gpu_util_pct: Option<f64>,
    pred_time_s: f64,
    time_s: Option<f64>,
    pred_energy_j: f64,
    energy_j: Option<f64>,
    pred_avg_power_w: f64,
    avg_power_w: Option<f64>,
    baseline_time_s: f64,
    baseline_energy_j: f64,
    energy_error_pct: Option<f64>,
    saving_pct: Option<f64>,
    ee: Option<f64>,
    slurm_energy_j: Option<f64>,
    slurm_energy_status: &'static str,
}

/// `greenup report JOBID --csv`: one row per node; job totals repeat on each row.
pub fn job_csv(r: &JobReport) -> Result<String, ReportError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for n in &r.nodes {
        w.serialize(JobCsvRow {
            job_id: r.job_id,
            user: &r.user,
            app: &r.app,
            profile_version: r.profile_version,
            policy: &r.policy,
            state: r.state.as_str(),
            node: &n.name,
            node_type: &n.node_type,
            freq_ghz: n.freq_ghz,
            applied: n.applied.to_string(),
            source: n.source.as_str(),
            node_pred_energy_j: n.predicted_energy_j,
            node_energy_j: n.measured_energy_j,
            node_mpi_pct: n.mpi.map(|m| m.mpi_pct),
            node_low_freq_s: n.mpi.map(|m| m.low_freq_s),
            node_comm_saved_j: n.mpi.and_then(|m| m.saved_j),
            node_gpus: n.gpu.as_ref().map(|g| g.gpus),
            node_gpu_energy_j: n.gpu.as_ref().and_then(|g| g.energy_j).map(|j| j.0),
            node_gpu_avg_power_w: n.gpu.as_ref().and_then(|g| g.avg_power_w).map(|w| w.0),
            node_gpu_sm_mhz: n.gpu.as_ref().and_then(|g| g.sm_mhz),
            node_gpu_util_pct: n.gpu.as_ref().and_then(|g| g.util_pct),
            pred_time_s: r.predicted.time_s.0,
            time_s: r.measured.time_s,
            pred_energy_j: r.predicted.energy_j.0,
            energy_j: r.measured.energy_j,
            pred_avg_power_w: r.predicted.avg_power_w.0,
            avg_power_w: r.measured.avg_power_w,
            baseline_time_s: r.baseline.time_s.0,
            baseline_energy_j: r.baseline.energy_j.0,
            energy_error_pct: r.energy_error_pct(),
            saving_pct: r.measured_saving_pct(),
            ee: r.ee,
            slurm_energy_j: r.slurm_energy.joules(),
            slurm_energy_status: r.slurm_energy.status(),
        })?;
    }
    finish(w)
}

/// `greenup jobs --json`.
pub fn jobs_json(rows: &[JobRow]) -> Result<String, ReportError> {
    Ok(serde_json::to_string_pretty(rows)?)
}

/// `greenup jobs --csv`.
pub fn jobs_csv(rows: &[JobRow]) -> Result<String, ReportError> {
    #[derive(Serialize)]
    struct Row<'a> {
        job_id: u64,
        user: &'a str,
        app: &'a str,
        policy: &'a str,
        state: &'a str,
        nodes: usize,
        avg_freq_ghz: Option<f64>,
        time_s: Option<f64>,
        energy_j: Option<f64>,
        avg_power_w: Option<f64>,
        energy_error_pct: Option<f64>,
        saving_pct: Option<f64>,
        end_unix: Option<i64>,
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rows {
        w.serialize(Row {
            job_id: r.job_id,
            user: &r.user,
            app: &r.app,
            policy: &r.policy,
            state: r.state.as_str(),
            nodes: r.nodes,
            avg_freq_ghz: r.avg_freq_ghz,
            time_s: r.time_s,
            energy_j: r.energy_j,
            avg_power_w: r.avg_power_w,
            energy_error_pct: r.energy_error_pct,
            saving_pct: r.saving_pct,
            end_unix: r.end_unix,
        })?;
    }
    finish(w)
}

/// `greenup app NAME --json`.
pub fn app_json(h: &AppHistory) -> Result<String, ReportError> {
    Ok(serde_json::to_string_pretty(h)?)
}

/// `greenup app NAME --csv`: one row per profile version (the runs are `greenup jobs --app NAME --csv`).
pub fn app_csv(h: &AppHistory) -> Result<String, ReportError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for v in &h.versions {
        w.serialize(v)?;
    }
    finish(w)
}

fn finish(w: csv::Writer<Vec<u8>>) -> Result<String, ReportError> {
    let bytes = w
        .into_inner()
        .map_err(|e| ReportError::Write(e.to_string()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
