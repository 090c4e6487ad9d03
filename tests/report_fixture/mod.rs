//! Fixed jobs the report tests render. The numbers are chosen by hand so the
//! expected errors and savings can be worked out on paper (see each test).
#![allow(dead_code)]

use greenup::model::{Choice, NodeChoices, SweepTable};
use greenup::plan::Estimate;
use greenup::report::accounting::SlurmEnergy;
use greenup::report::{
    Applied, Caps, Confidence, JobReport, NodeReport, RunState, Source, Warning,
};

/// 2026-11-21T14:02:11Z.
pub const END: i64 = 1_795_269_731;

fn node(
    name: &str,
    ty: &str,
    f: f64,
    pred: f64,
    meas: Option<f64>,
    applied: Applied,
) -> NodeReport {
    NodeReport {
        name: name.into(),
        node_type: ty.into(),
        freq_ghz: f,
        applied,
        source: if meas.is_some() {
            Source::Rapl
        } else {
            Source::Unmeasured
        },
        predicted_energy_j: Some(pred),
        measured_energy_j: meas,
        mpi: None,
        gpu: None,
        power: None,
    }
}

/// A fully measured hetero job: predicted 5.2 MJ in 3600 s, measured 5.3 MJ in 3720 s,
/// baseline 6.4 MJ in 3300 s.
pub fn measured_job() -> JobReport {
    let nodes = vec![
        node("n1", "type1", 2.0, 1.0e6, Some(1.05e6), Applied::Applied),
        node("n2", "type2", 2.128, 1.2e6, Some(1.15e6), Applied::Applied),
        node("n3", "type3", 2.3, 1.4e6, Some(1.47e6), Applied::Applied),
        node("n4", "type4", 2.672, 1.6e6, Some(1.63e6), Applied::Applied),
    ];
    let measured = JobReport::totals_from_nodes(&nodes, Some(3720.0));
    JobReport {
        job_id: 4242,
        user: "alice".into(),
        partition: Some("batch".into()),
        state: RunState::Completed,
        end_unix: Some(END),
        app: "lammps".into(),
        profile_version: 3,
        model: "hetero".into(),
        confidence: Confidence {
            samples: 4,
            residual: Some(0.031),
        },
        policy: "min-time".into(),
        caps: Caps {
            energy_j: Some(5.5e6),
            power_w: None,
            time_limit: greenup::record::TimeLimit::Seconds(7200.0),
        },
        allocated_nodes: 4,
        nodes,
        predicted: Estimate {
            time_s: greenup_core::quantity::Seconds(3600.0),
            energy_j: greenup_core::quantity::Joules(5.2e6),
            avg_power_w: greenup_core::quantity::Watts(5.2e6 / 3600.0),
        },
        baseline: Estimate {
            time_s: greenup_core::quantity::Seconds(3300.0),
            energy_j: greenup_core::quantity::Joules(6.4e6),
            avg_power_w: greenup_core::quantity::Watts(6.4e6 / 3300.0),
        },
        measured,
        ee: None,
        ee_baseline: None,
        shape: "4 nodes: 1 type1, 1 type2, 1 type3, 1 type4".into(),
        baseline_run: false,
        baseline_sample: false,
        clock_sample: false,
        against_measured: None,
        slurm_energy: SlurmEnergy::Measured { joules: 5.28e6 },
        warnings: vec![],
        budgets: Vec::new(),
        guard: None,
        watts: Vec::new(),
        earlier_runs: Vec::new(),
        all_runs: None,
        run: 1,
    }
}

/// An iso_energy job with one unmeasured, shared node; Slurm reported 0 J.
pub fn partial_job() -> JobReport {
    let nodes = vec![
        node(
            "n1",
            "type1",
            2.0,
            50_000.0,
            Some(52_000.0),
            Applied::Applied,
        ),
        node(
            "n2",
            "type1",
            2.0,
            50_000.0,
            Some(49_000.0),
            Applied::Applied,
        ),
        node("n3", "type3", 2.0, 60_000.0, None, Applied::SharedNode),
    ];
    let measured = JobReport::totals_from_nodes(&nodes, Some(610.0));
    JobReport {
        job_id: 4243,
        user: "bob".into(),
        partition: Some("debug".into()),
        state: RunState::Completed,
        end_unix: Some(END + 3600),
        app: "npb-ep".into(),
        profile_version: 1,
        model: "iso_energy".into(),
        confidence: Confidence {
            samples: 0,
            residual: None,
        },
        policy: "iso-ee".into(),
        caps: Caps {
            energy_j: None,
            power_w: Some(400.0),
            time_limit: greenup::record::TimeLimit::Seconds(1800.0),
        },
        allocated_nodes: 4,
        nodes,
        predicted: Estimate {
            time_s: greenup_core::quantity::Seconds(600.0),
            energy_j: greenup_core::quantity::Joules(160_000.0),
            avg_power_w: greenup_core::quantity::Watts(160_000.0 / 600.0),
        },
        baseline: Estimate {
            time_s: greenup_core::quantity::Seconds(480.0),
            energy_j: greenup_core::quantity::Joules(200_000.0),
            avg_power_w: greenup_core::quantity::Watts(200_000.0 / 480.0),
        },
        measured,
        ee: Some(0.912),
        ee_baseline: Some(0.874),
        shape: "4 nodes: 2 type1, 1 type3, 1 type4".into(),
        baseline_run: false,
        baseline_sample: false,
        clock_sample: false,
        against_measured: None,
        slurm_energy: SlurmEnergy::Zero,
        warnings: vec![
            Warning::NotApplied("n3: shared node".into()),
            Warning::Unmeasured("n3 has no energy counter; job energy is unknown".into()),
            Warning::NotRefined("unmeasured nodes (n3)".into()),
        ],
        budgets: Vec::new(),
        guard: None,
        watts: Vec::new(),
        earlier_runs: Vec::new(),
        all_runs: None,
        run: 1,
    }
}

/// Paper 004 Table I: (name, GFLOPS, fmax, fmin, step, dynamic W, static W).
pub const TABLE_I: [(&str, f64, f64, f64, f64, f64, f64); 4] = [
    ("type1", 40.0, 2.50, 1.20, 0.100, 20.0, 4.0),
    ("type2", 50.0, 2.66, 1.60, 0.133, 25.0, 5.0),
    ("type3", 60.0, 2.90, 1.20, 0.100, 30.0, 6.0),
    ("type4", 70.0, 3.40, 1.60, 0.133, 35.0, 7.0),
];

/// Frequencies of a Table I type, ascending (fmax downwards in steps, as the paper lists them).
pub fn freqs(fmax: f64, fmin: f64, step: f64) -> Vec<f64> {
    // Table I's steps do not divide the range exactly (2.66 - 1.60 = 7.97 steps of 0.133):
    // the last step lands on the listed minimum.
    let count = ((fmax - fmin) / step).round() as usize + 1;
    let mut v: Vec<f64> = (0..count)
        .map(|k| ((fmax - k as f64 * step) * 1000.0).round() / 1000.0)
        .collect();
    v.reverse();
    v
}

/// A sweep table of `n` Table I nodes (types in turn) sharing `gflop` of work evenly:
/// compute time at f is (work / GFLOPS) * fmax / f and dynamic power scales as (f/fmax)^3.
pub fn table_i(n: usize, gflop: f64, comm_s: f64) -> SweepTable {
    let nodes = (0..n)
        .map(|i| {
            let (ty, gf, fmax, fmin, step, pd, ps) = TABLE_I[i % 4];
            let t_max = gflop / n as f64 / gf;
            let choices = freqs(fmax, fmin, step)
                .into_iter()
                .map(|f| {
                    let s = fmax / f;
                    Choice {
                        wait_w: 0.0,
                        gpu_mhz: None,
                        freq_ghz: f,
                        compute_s: t_max * s,
                        dynamic_j: pd / (s * s * s) * t_max * s,
                    }
                })
                .collect();
            NodeChoices {
                name: format!("n{}", i + 1),
                node_type: ty.into(),
                choices,
                static_w: ps,
            }
        })
        .collect();
    SweepTable {
        nodes,
        fixed_time_s: comm_s,
        fixed_energy_j: 0.0,
        steps: None,
    }
}
