//! Every report format of two fixed jobs, as insta snapshots, plus the numbers
//! in them worked out by hand.

mod report_fixture;

use greenup::report::{self, AppHistory, JobRow, VersionInfo, table, text};
use report_fixture::{measured_job, partial_job};

#[test]
fn errors_and_savings_match_hand_arithmetic() {
    let r = measured_job();
    // Energy: (5.2 - 5.3) / 5.3 = -1.8868 %; time: (3600 - 3720) / 3720 = -3.2258 %.
    assert!((r.energy_error_pct().unwrap() - (-1.886_792)).abs() < 1e-4);
    assert!((r.time_error_pct().unwrap() - (-3.225_806)).abs() < 1e-4);
    // Saving: predicted (6.4 - 5.2) / 6.4 = 18.75 %, measured (6.4 - 5.3) / 6.4 = 17.1875 %.
    assert!((r.predicted_saving_pct().unwrap() - 18.75).abs() < 1e-9);
    assert!((r.measured_saving_pct().unwrap() - 17.1875).abs() < 1e-9);
    // Slurm's own non-zero figure is printed beside greenup's.
    assert!(text::job_report(&r).contains("Slurm       ConsumedEnergy 5.28 MJ"));
    assert!(text::energy_paragraph(&r).contains("Slurm ConsumedEnergy: 5.28 MJ."));
    // Measured power: 5.3 MJ / 3720 s.
    assert!((r.measured.avg_power_w.unwrap() - 5.3e6 / 3720.0).abs() < 1e-6);
}

#[test]
fn a_run_far_shorter_than_predicted_has_no_saving() {
    // Predicted 3600 s. Refinement sets aside runs under half of that; a saving against
    // a whole run's baseline would only say how short the run was.
    let mut r = measured_job();
    r.measured.time_s = Some(1799.0);
    r.measured.energy_j = Some(2.0e6);
    assert!(r.ran_too_short_to_compare());
    assert_eq!(r.measured_saving_pct(), None);
    assert_eq!(JobRow::from(&r).saving_pct, None);
    let para = text::energy_paragraph(&r);
    assert!(
        para.contains("measured not comparable (the job ran 00:29:59 of the predicted 01:00:00)"),
        "{para}"
    );
    assert!(
        !para.contains("68.8%"),
        "(6.4 - 2.0) / 6.4 is not shown: {para}"
    );
    // At half the predicted time it counts again: (6.4 - 2.0) / 6.4 = 68.75 %.
    r.measured.time_s = Some(1800.0);
    assert!(!r.ran_too_short_to_compare());
    assert!((r.measured_saving_pct().unwrap() - 68.75).abs() < 1e-9);
}

#[test]
fn unmeasured_node_leaves_totals_unknown() {
    let r = partial_job();
    assert_eq!(r.measured.energy_j, None);
    assert_eq!(r.measured.avg_power_w, None);
    assert_eq!(r.energy_error_pct(), None);
    assert_eq!(r.measured_saving_pct(), None);
    let page = text::job_report(&r);
    assert!(page.contains("unmeasured"));
    // A zero from Slurm accounting is "not available", never "0 J".
    assert!(page.contains(
        "ConsumedEnergy not available (Slurm accounting measured 0 J: no energy plugin counted this job)"
    ));
    assert!(!page.contains(" 0.0 J"));
    let para = text::energy_paragraph(&r);
    assert!(para.contains("Slurm ConsumedEnergy: not available (Slurm accounting measured 0 J"));
    let json = table::job_json(&r).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["slurm_energy"]["status"], "zero");
    assert!(v["slurm_energy"]["joules"].is_null());
    let csv = table::job_csv(&r).unwrap();
    assert!(csv.lines().skip(1).all(|l| l.ends_with(",,zero")), "{csv}");
    assert!(v["measured"]["energy_j"].is_null());
    assert!(v["nodes"][2]["measured_energy_j"].is_null());
    assert_eq!(v["nodes"][2]["source"], "unmeasured");
}

#[test]
fn text_report() {
    insta::assert_snapshot!("text_measured", text::job_report(&measured_job()));
    insta::assert_snapshot!("text_partial", text::job_report(&partial_job()));
}

#[test]
fn json_report() {
    let json = table::job_json(&measured_job()).unwrap();
    let back: report::JobReport = serde_json::from_str(&json).unwrap();
    assert_eq!(
        back,
        measured_job(),
        "the JSON report reads back into the same report"
    );
    insta::assert_snapshot!("json_measured", json);
    insta::assert_snapshot!("json_partial", table::job_json(&partial_job()).unwrap());
}

#[test]
fn csv_report() {
    let csv = table::job_csv(&measured_job()).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4, "a header and one row per node");
    insta::assert_snapshot!("csv_measured", csv);
    insta::assert_snapshot!("csv_partial", table::job_csv(&partial_job()).unwrap());
}

fn rows() -> Vec<JobRow> {
    vec![JobRow::from(&measured_job()), JobRow::from(&partial_job())]
}

#[test]
fn jobs_table() {
    insta::assert_snapshot!("jobs_text", text::jobs_table(&rows()));
    insta::assert_snapshot!("jobs_json", table::jobs_json(&rows()).unwrap());
    insta::assert_snapshot!("jobs_csv", table::jobs_csv(&rows()).unwrap());
}

fn history() -> AppHistory {
    // Three runs of lammps: v1 (the admin's file) 20 % off, v2 10 % off, v3 (the fixture) -1.9 % off.
    let mut a = measured_job();
    a.job_id = 4001;
    a.profile_version = 1;
    a.end_unix = Some(report_fixture::END - 7200);
    a.predicted.energy_j = greenup_core::quantity::Joules(6.36e6); // (6.36 - 5.3) / 5.3 = +20 %
    let mut b = measured_job();
    b.job_id = 4101;
    b.profile_version = 2;
    b.end_unix = Some(report_fixture::END - 3600);
    b.predicted.energy_j = greenup_core::quantity::Joules(5.83e6); // +10 %
    b.nodes[0].measured_energy_j = Some(1.25e6); // measured 5.5 MJ: saving (6.4 - 5.5) / 6.4 = 14.0625 %
    b.measured = greenup::report::JobReport::totals_from_nodes(&b.nodes, Some(3720.0));
    b.predicted.energy_j = greenup_core::quantity::Joules(6.05e6); // (6.05 - 5.5) / 5.5 = +10 %
    let versions = [
        VersionInfo {
            version: 1,
            samples: 0,
            residual: None,
            pinned: false,
        },
        VersionInfo {
            version: 2,
            samples: 1,
            residual: Some(0.2),
            pinned: false,
        },
        VersionInfo {
            version: 3,
            samples: 2,
            residual: Some(0.08),
            pinned: true,
        },
        VersionInfo {
            version: 4,
            samples: 3,
            residual: Some(0.031),
            pinned: false,
        },
    ];
    AppHistory::build("lammps", &[measured_job(), b, a, partial_job()], &versions)
}

#[test]
fn app_history() {
    let h = history();
    assert_eq!(h.runs.len(), 3, "only lammps runs");
    assert_eq!(h.runs[0].job_id, 4001, "oldest first");
    let err: Vec<Option<f64>> = h
        .versions
        .iter()
        .map(|v| v.mean_abs_energy_error_pct)
        .collect();
    assert!((err[0].unwrap() - 20.0).abs() < 1e-9);
    assert!((err[1].unwrap() - 10.0).abs() < 1e-9);
    assert!((err[2].unwrap() - 1.886_792).abs() < 1e-4);
    assert_eq!(err[3], None, "v4 has no runs yet");
    // Savings 17.1875, 14.0625, 17.1875: the median is 17.1875.
    assert!((h.typical_saving_pct.unwrap() - 17.1875).abs() < 1e-9);
    insta::assert_snapshot!("app_text", text::app_history(&h));
    insta::assert_snapshot!("app_json", table::app_json(&h).unwrap());
    insta::assert_snapshot!("app_csv", table::app_csv(&h).unwrap());
}

#[test]
fn energy_report_paragraph() {
    let p = text::energy_paragraph(&measured_job());
    assert!(!p.contains('\n'), "one paragraph");
    insta::assert_snapshot!("paragraph_measured", p);
    insta::assert_snapshot!("paragraph_partial", text::energy_paragraph(&partial_job()));
}

#[test]
fn utc_dates() {
    assert_eq!(text::fmt_utc(report_fixture::END), "2026-11-21T14:02:11");
    assert_eq!(text::fmt_utc(1_709_251_199), "2024-02-29T23:59:59");
    assert_eq!(text::fmt_utc(-86_400), "1969-12-31T00:00:00");
    assert_eq!(text::fmt_time(90_061.0), "1-01:01:01");
    assert_eq!(
        text::parse_utc("2026-11-21T14:02:11"),
        Some(report_fixture::END)
    );
    assert_eq!(text::parse_utc("2024-02-29 23:59:59"), Some(1_709_251_199));
    assert_eq!(text::parse_utc("1969-12-31"), Some(-86_400));
    assert_eq!(
        text::parse_utc("2026-11-21T14:02"),
        Some(report_fixture::END - 11)
    );
    for bad in [
        "2023-02-29",
        "2026-13-01",
        "2026-11-21T24:00",
        "yesterday",
        "2026-11",
        "2026-11-21T1:2:3:4",
    ] {
        assert_eq!(text::parse_utc(bad), None, "{bad}");
    }
}

#[test]
fn mpi_columns_show_what_the_runtime_measured_and_only_when_it_ran() {
    let mut r = measured_job();
    assert!(!text::job_report(&r).contains("MPI%"));
    // 75 s computing and 25 s in MPI per rank: MPI% = 25 / (75 + 25) = 25 %.
    let comm = greenup::comm::NodeComm {
        ranks: 4,
        compute_s: greenup::comm::Seconds(75.0),
        comm_s: greenup::comm::Seconds(25.0),
        low_s: greenup::comm::Seconds(20.0),
        saved_j: Some(greenup::comm::Joules(1200.0)),
        ..Default::default()
    };
    r.nodes[0].mpi = Some(greenup::report::NodeMpi::of(&comm));
    let page = text::job_report(&r);
    assert!(page.contains("MPI%") && page.contains("LOW_FREQ"), "{page}");
    assert!(page.contains("25.0%"), "{page}");
    assert!(page.contains("~1.20 kJ"), "{page}");
    let v: serde_json::Value = serde_json::from_str(&table::job_json(&r).unwrap()).unwrap();
    assert_eq!(v["nodes"][0]["mpi"]["mpi_pct"], 25.0);
    assert_eq!(v["nodes"][0]["mpi"]["low_freq_s"], 20.0);
    assert!(v["nodes"][1].get("mpi").is_none());
    let csv = table::job_csv(&r).unwrap();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| row[head.iter().position(|h| *h == name).unwrap()];
    assert_eq!(
        (
            col("node_mpi_pct"),
            col("node_low_freq_s"),
            col("node_comm_saved_j")
        ),
        ("25.0", "20.0", "1200.0")
    );
}
