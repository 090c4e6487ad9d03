//! A node's GPU figures (NVML) in each report format: text shows GPU columns only when a
//! node had GPUs, JSON carries the node's `gpu` object, CSV has the same numbers.

mod report_fixture;

use greenup::record::{GpuSource, NodeGpu};
use greenup::report::{table, text};
use greenup_core::quantity::{Joules, Watts};
use report_fixture::measured_job;

fn with_gpu() -> greenup::report::JobReport {
    let mut r = measured_job();
    // Two GPUs over the job's 3720 s: 2.976 MJ is 800 W on average.
    r.nodes[0].gpu = Some(NodeGpu {
        gpus: 2,
        source: GpuSource::Nvml,
        energy_j: Some(Joules(2.976e6)),
        avg_power_w: Some(Watts(2.976e6 / 3720.0)),
        sm_mhz: Some(1410.0),
        util_pct: Some(87.5),
        note: None,
    });
    r
}

#[test]
fn text_shows_gpu_columns_only_when_a_node_had_gpus() {
    assert!(!text::job_report(&measured_job()).contains("GPU_ENERGY"));
    let t = text::job_report(&with_gpu());
    for h in [
        "GPUS",
        "GPU_SOURCE",
        "GPU_ENERGY",
        "GPU_POWER",
        "SM_CLOCK",
        "GPU_UTIL",
    ] {
        assert!(t.contains(h), "{h} missing from:\n{t}");
    }
    let n1 = t
        .lines()
        .find(|l| l.trim_start().starts_with("n1 "))
        .unwrap();
    for cell in ["nvml", "2.98 MJ", "800.0 W", "1410 MHz", "87.5%"] {
        assert!(n1.contains(cell), "{cell} missing from: {n1}");
    }
    // A node without GPUs says so with dashes, not zeros.
    let n2 = t
        .lines()
        .find(|l| l.trim_start().starts_with("n2 "))
        .unwrap();
    assert!(!n2.contains("nvml") && !n2.contains(" 0 W"), "{n2}");
}

#[test]
fn json_and_csv_carry_the_same_gpu_numbers() {
    let r = with_gpu();
    let v = serde_json::to_value(&r).unwrap();
    let g = &v["nodes"][0]["gpu"];
    assert_eq!(g["source"], "nvml");
    assert_eq!(g["gpus"], 2);
    assert_eq!(g["energy_j"], 2.976e6);
    assert_eq!(g["avg_power_w"], 800.0);
    assert!(v["nodes"][1].get("gpu").is_none());
    let csv = table::job_csv(&r).unwrap();
    let mut rows = csv::Reader::from_reader(csv.as_bytes());
    let header = rows.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let first = rows.records().next().unwrap().unwrap();
    assert_eq!(&first[col("node_gpus")], "2");
    assert_eq!(
        first[col("node_gpu_energy_j")].parse::<f64>().unwrap(),
        2.976e6
    );
    assert_eq!(
        first[col("node_gpu_avg_power_w")].parse::<f64>().unwrap(),
        800.0
    );
    assert_eq!(
        first[col("node_gpu_sm_mhz")].parse::<f64>().unwrap(),
        1410.0
    );
    assert_eq!(
        first[col("node_gpu_util_pct")].parse::<f64>().unwrap(),
        87.5
    );
    let second = rows.records().next().unwrap().unwrap();
    assert_eq!(&second[col("node_gpu_energy_j")], "");
}

#[test]
fn the_jobs_energy_with_its_gpus_adds_them_with_each_source_said() {
    let mut r = with_gpu();
    let nodes_j: f64 = r.nodes.iter().map(|n| n.measured_energy_j.unwrap()).sum();
    r.measured = greenup::report::JobReport::totals_from_nodes(&r.nodes, r.measured.time_s);
    // ENERGY stays the nodes' (RAPL) figure the models predict; the GPUs' 2.976 MJ is
    // beside it, and the total is both.
    assert_eq!(r.measured.energy_j, Some(nodes_j));
    assert_eq!(r.measured.gpu_energy_j, Some(2.976e6));
    assert_eq!(r.measured.total_energy_j, Some(nodes_j + 2.976e6));
    let t = text::job_report(&r);
    let line = t.lines().find(|l| l.starts_with("With GPUs")).unwrap();
    assert!(
        line.contains("(rapl)") && line.contains("GPUs 2.98 MJ (nvml)"),
        "{line}"
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["measured"]["total_energy_j"], nodes_j + 2.976e6);
    // One GPU node unmeasured: no GPU total, and no job total with GPUs.
    r.nodes[0].gpu.as_mut().unwrap().energy_j = None;
    let m = greenup::report::JobReport::totals_from_nodes(&r.nodes, r.measured.time_s);
    assert_eq!((m.gpu_energy_j, m.total_energy_j), (None, None));
    // A job without GPUs: neither field, nor the line.
    let plain = measured_job();
    let m = greenup::report::JobReport::totals_from_nodes(&plain.nodes, Some(1.0));
    assert_eq!((m.gpu_energy_j, m.total_energy_j), (None, None));
    assert!(!text::job_report(&plain).contains("With GPUs"));
    assert!(
        serde_json::to_string(&plain)
            .unwrap()
            .find("total_energy_j")
            .is_none()
    );
}
