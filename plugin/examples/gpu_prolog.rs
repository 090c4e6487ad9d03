//! The job prolog's and epilog's GPU part for a GPU node's power share, run outside Slurm
//! on a real GPU by scripts/gpu-check.sh: greenupd's rule tells the node its parts
//! (`greenup::power::split::with_node_type`), the prolog's code sets the job's GPUs'
//! power limits (`spank_greenup::gpu::start`) and the epilog's restores them and reports
//! the node's limits (`gpu::end_held`), each timed. Not installed; root only, as a prolog
//! runs.
//! With `--worker GREENUP`, the prolog's part hands the GPUs to its worker
//! (`gpu::hand_off`, `greenup gpu start-job`) as a prolog with a meter does; the worker's
//! own time and the time until its limits are in force are reported beside it, and the
//! epilog's part settles the handoff first (`gpu::settle`).
//!
//! ```text
//! gpu_prolog --site FILE --node NAME --gpus 0,1 --gpu-part-w W [--iterations N] [--run-dir DIR] [--worker GREENUP]
//! ```
//!
//! The job's grant is the one that gives each GPU a part of W watts on a one-node job
//! (share = W x node model / one GPU's model). Prints one JSON object.

use std::path::PathBuf;
use std::time::Instant;

use greenup::power::split;
use greenup::site::node::NodeConfig;
use greenup_platform::dvfs::run_dir::JobDir;
use greenup_platform::gpu::{Nvml, parse_job_gpus};
use greenup_proto::protocol::{Decision, NodeSettings};
use spank_greenup::gpu;
use spank_greenup::node::JobEnv;

struct Opts {
    site: PathBuf,
    node: String,
    gpus: String,
    part_w: f64,
    iterations: usize,
    run_dir: PathBuf,
    worker: Option<PathBuf>,
}

fn opts() -> Result<Opts, String> {
    let mut o = Opts {
        site: PathBuf::new(),
        node: String::new(),
        gpus: String::new(),
        part_w: 0.0,
        iterations: 20,
        run_dir: std::env::temp_dir().join("greenup-gpu-prolog"),
        worker: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(k) = args.next() {
        let v = args
            .next()
            .ok_or_else(|| format!("{k}: a value is missing"))?;
        let bad = |what: &str| format!("{k} {v}: expected {what}");
        match k.as_str() {
            "--site" => o.site = v.into(),
            "--node" => o.node = v,
            "--gpus" => o.gpus = v,
            "--gpu-part-w" => {
                o.part_w = v
                    .parse()
                    .ok()
                    .filter(|w: &f64| w.is_finite() && *w > 0.0)
                    .ok_or_else(|| bad("watts above 0"))?
            }
            "--iterations" => {
                o.iterations = v
                    .parse()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| bad("a count in 1-1000"))?
            }
            "--run-dir" => o.run_dir = v.into(),
            "--worker" => o.worker = Some(v.into()),
            _ => return Err(format!("{k}: unknown option")),
        }
    }
    if o.site.as_os_str().is_empty() || o.node.is_empty() || o.gpus.is_empty() || o.part_w == 0.0 {
        return Err(
            "usage: gpu_prolog --site FILE --node NAME --gpus 0,1 --gpu-part-w W [--iterations N] [--run-dir DIR] [--worker GREENUP]"
                .into(),
        );
    }
    Ok(o)
}

/// Each of `minors`' power limit in force now, in mW (or NVML's error), through NVML
/// opened for this reading alone, as the prolog and epilog each open it.
fn limits(library: &std::path::Path, minors: &[u32]) -> serde_json::Value {
    let nvml = match Nvml::open(library) {
        Ok(n) => n,
        Err(e) => return serde_json::json!(e.to_string()),
    };
    let mut out = serde_json::Map::new();
    for m in minors {
        let v = match nvml.gpu_by_minor(*m).and_then(|g| g.power_limit_mw()) {
            Ok(mw) => serde_json::json!(mw),
            Err(e) => serde_json::json!(e.to_string()),
        };
        out.insert(m.to_string(), v);
    }
    out.into()
}

fn stats(ms: &mut [f64]) -> serde_json::Value {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    serde_json::json!({"median_ms": at(0.5), "p90_ms": at(0.9), "max_ms": at(1.0), "n": ms.len()})
}

fn run() -> Result<serde_json::Value, String> {
    let o = opts()?;
    let site = greenup::site::load(&o.site).map_err(|e| e.to_string())?;
    let nc = NodeConfig::from_site(&site);
    let minors = parse_job_gpus(&o.gpus).map_err(|e| e.to_string())?;
    let model = split::node_model(&site, &o.node, None, None)
        .filter(|m| m.gpus > 0)
        .ok_or_else(|| {
            format!(
                "{}: the site gives node {} no GPUs",
                o.site.display(),
                o.node
            )
        })?;
    // A one-node job granted the share whose GPU part is W.
    let share_w = o.part_w * model.total_w().0 / model.gpu_w.0;
    let d: Decision = serde_json::from_value(serde_json::json!({
        "job_id": 999_999, "verdict": "refused", "reason": "gpu-check", "policy": "none",
        "profile": null, "profile_version": null, "power_cap_w": null, "reserved_w": 0.0,
        "plan": null, "decided_at": 0,
        "grant": {"granted_w": share_w, "weight_w": model.total_w()}
    }))
    .map_err(|e| e.to_string())?;
    let told = split::with_node_type(NodeSettings::from_decision(&d, &o.node, 1), &site);
    let job = JobEnv::from_vars(|k| match k {
        "SLURM_JOB_ID" => Some("999999".into()),
        "SLURM_JOB_UID" => Some("0".into()),
        "SLURMD_NODENAME" => Some(o.node.clone()),
        "SLURM_JOB_GPUS" => Some(o.gpus.clone()),
        _ => None,
    })
    .map_err(|e| e.to_string())?;
    let library = nc.dvfs.nvml_library.clone();
    let before = limits(&library, &minors);
    let (mut start_ms, mut end_ms) = (Vec::new(), Vec::new());
    let (mut worker_ms, mut in_force_ms) = (Vec::new(), Vec::new());
    let mut first = serde_json::Value::Null;
    for i in 0..o.iterations {
        let t = Instant::now();
        let (warning, note) = match &o.worker {
            Some(w) => {
                gpu::hand_off(w, &nc, &o.run_dir, &job, gpu::Asked::of(Some(&told)))
                    .map_err(|e| format!("{}: {e}", w.display()))?;
                (None, None)
            }
            None => gpu::start(&nc, &o.run_dir, &job, gpu::Asked::of(Some(&told))),
        };
        start_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let mut settled = None;
        if o.worker.is_some() {
            let file = JobDir::new(&o.run_dir, job.job_id).gpu_start(&job.node);
            let (took, waited) = wait_done(&file)?;
            worker_ms.push(took);
            in_force_ms.push(t.elapsed().as_secs_f64() * 1e3);
            let _ = waited;
        }
        let during = (i == 0).then(|| limits(&library, &minors));
        let t = Instant::now();
        if o.worker.is_some() {
            settled = gpu::settle(&o.run_dir, &job);
        }
        let (measured, power) = gpu::end_held(&nc, &o.run_dir, &job, told.gpu_power);
        end_ms.push(t.elapsed().as_secs_f64() * 1e3);
        if i == 0 {
            first = serde_json::json!({
                "start_warning": warning, "start_note": note, "during_mw": during,
                "after_mw": limits(&library, &minors), "end_power": power, "end_gpu": measured,
                "settled": settled,
            });
        }
    }
    let worker = (!worker_ms.is_empty()).then(|| {
        serde_json::json!({"worker_gpu": stats(&mut worker_ms), "until_in_force": stats(&mut in_force_ms)})
    });
    Ok(serde_json::json!({
        "node": o.node, "gpus": minors, "node_model_w": model.total_w(), "gpu_model_w": model.gpu_w,
        "share_w": share_w, "cpu_part_w": told.power_limit_w, "gpu_power": told.gpu_power,
        "before_mw": before, "first": first, "after_all_mw": limits(&library, &minors),
        "prolog_gpu": stats(&mut start_ms), "epilog_gpu": stats(&mut end_ms),
        "handed_to_worker": worker,
    }))
}

/// Wait up to 10 s for the worker to write what came of `file`: its own milliseconds,
/// and this wait's.
fn wait_done(file: &std::path::Path) -> Result<(f64, f64), String> {
    let t = Instant::now();
    while t.elapsed().as_secs() < 10 {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
            && v["state"] == "done"
        {
            let took = v["took_ms"].as_f64().unwrap_or(f64::NAN);
            return Ok((took, t.elapsed().as_secs_f64() * 1e3));
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    Err(format!(
        "{}: no worker finished within 10 s",
        file.display()
    ))
}

fn main() {
    match run() {
        Ok(v) => println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default()),
        Err(e) => {
            eprintln!("gpu_prolog: {e}");
            std::process::exit(2);
        }
    }
}
