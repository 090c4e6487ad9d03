//! `greenup gpu`: this node's NVIDIA GPUs as greenup reads them through NVML (energy
//! counter, power, SM clock, utilization, power limit and range, clock lock), and, for
//! root, setting a power limit and locked clocks outside jobs (saving what was there
//! first) and putting it back. `greenup gpu bench` times what a job prolog does to GPUs.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, Subcommand};
use greenup::site::DEFAULT_NVML_LIBRARY;
use greenup_platform::dvfs::run_dir::JobDir;
use greenup_platform::gpu::hold::{self, Control, GpuRecord, Request};
use greenup_platform::gpu::start::GpuStart;
use greenup_platform::gpu::{GpuReading, LimitRange, Nvml, parse_job_gpus};
use serde::Serialize;

use crate::daemon_cmds::table;
use crate::{Failure, Outcome, emit, print_json};

/// Options of `greenup gpu`.
#[derive(Args, Debug)]
pub struct GpuArgs {
    #[command(subcommand)]
    action: Option<GpuAction>,
    /// Where NVML is (default: the site config's `dvfs.nvml_library` with --site, else libnvidia-ml.so.1).
    #[arg(long, global = true)]
    nvml: Option<PathBuf>,
    /// The site config to take NVML's path and the run directory from.
    #[arg(long, global = true)]
    site: Option<PathBuf>,
    /// Where greenup keeps saved settings (default: the site config's `dvfs.run_dir`, else /run/greenup).
    #[arg(long, global = true)]
    run_dir: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
}

/// What `greenup gpu` does besides showing the GPUs.
#[derive(Subcommand, Debug)]
enum GpuAction {
    /// Set a power limit and/or locked SM clocks (root only), saving what was there first.
    Set(SetArgs),
    /// Put back what `greenup gpu set` saved (root only).
    Restore,
    /// Time what a job prolog and epilog do to GPUs: load NVML, read, save and set, restore.
    Bench(BenchArgs),
    /// The job prolog's GPU work, handed to this command so that the prolog does not wait
    /// for NVML (root only; the plugin starts it).
    StartJob(StartJobArgs),
}

/// Options of `greenup gpu start-job`.
#[derive(Args, Debug)]
struct StartJobArgs {
    /// The handoff file the prolog wrote (run_dir/JOBID/NODE.gpu-start.json).
    file: PathBuf,
}

/// Options of `greenup gpu set`.
#[derive(Args, Debug)]
struct SetArgs {
    /// Power limit per GPU, e.g. 350W or 0.35kW (a bare number is watts).
    #[arg(long, value_parser = parse_watts)]
    power_limit: Option<u32>,
    /// Locked SM clock range in MHz: MIN,MAX (or one clock).
    #[arg(long, value_parser = parse_lock)]
    lock_clocks: Option<(u32, u32)>,
    /// The GPUs, by /dev/nvidiaN number as in SLURM_JOB_GPUS (default: every GPU).
    #[arg(long)]
    gpus: Option<String>,
}

/// Options of `greenup gpu bench`.
#[derive(Args, Debug)]
struct BenchArgs {
    /// How many times to repeat each step.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    iterations: u32,
    /// The GPUs a job holds, by /dev/nvidiaN number (default: every GPU).
    #[arg(long)]
    gpus: Option<String>,
    /// Also set this power limit at each start (it is restored at each end).
    #[arg(long, value_parser = parse_watts)]
    power_limit: Option<u32>,
    /// Also lock SM clocks to MIN,MAX at each start (restored at each end).
    #[arg(long, value_parser = parse_lock)]
    lock_clocks: Option<(u32, u32)>,
}

fn parse_watts(s: &str) -> Result<u32, String> {
    let w = greenup::units::parse_power(s).map_err(|e| e.to_string())?;
    let mw = (w * 1000.0).round();
    if !(1.0..=f64::from(u32::MAX)).contains(&mw) {
        return Err(format!(
            "expected a power above 0 W and below 4 MW, got '{s}'"
        ));
    }
    Ok(mw as u32)
}

fn parse_lock(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("expected MIN,MAX in MHz like 1200,1600 (or one clock), got '{s}'");
    let (lo, hi) = s.split_once(',').unwrap_or((s, s));
    let lo: u32 = lo.trim().parse().map_err(|_| bad())?;
    let hi: u32 = hi.trim().parse().map_err(|_| bad())?;
    if lo == 0 || lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// NVML's path and the run directory, from the options, the site config, or the defaults.
struct Place {
    library: PathBuf,
    run_dir: PathBuf,
}

fn place(a: &GpuArgs) -> Result<Place, Failure> {
    let site = match &a.site {
        Some(p) => Some(greenup::site::load(p)?),
        None => None,
    };
    let library = a
        .nvml
        .clone()
        .or_else(|| site.as_ref().map(|s| s.dvfs.nvml_library.clone()))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_NVML_LIBRARY));
    let run_dir = a
        .run_dir
        .clone()
        .or_else(|| site.as_ref().map(|s| s.dvfs.run_dir.clone()))
        .unwrap_or_else(|| PathBuf::from(greenup::site::DEFAULT_RUN_DIR));
    Ok(Place { library, run_dir })
}

fn open(p: &Place) -> Result<Nvml, Failure> {
    Nvml::open(&p.library).map_err(|e| Failure::Runtime(e.to_string()))
}

fn nvml_err(e: impl std::fmt::Display) -> Failure {
    Failure::Runtime(e.to_string())
}

/// Run `greenup gpu`.
pub fn run(a: GpuArgs) -> Outcome {
    let p = place(&a)?;
    match &a.action {
        None => show(&p, a.json),
        Some(GpuAction::Set(s)) => set(&p, s, a.json),
        Some(GpuAction::Restore) => restore(&p, a.json),
        Some(GpuAction::Bench(b)) => bench(&p, b, a.json),
        Some(GpuAction::StartJob(s)) => start_job(&s.file),
    }
}

/// Do the GPU work a prolog handed over in `file`, once, and write what came of it back
/// for the epilog; a warning also goes to the job's owner.
fn start_job(file: &Path) -> Outcome {
    use greenup_platform::gpu::handoff;
    must_be_root("start-job")?;
    trusted(file)?;
    let Some((claim, ask)) = handoff::claim::<GpuStart>(file)
        .map_err(|e| Failure::Runtime(format!("{}: {e}", file.display())))?
    else {
        // Done already, or the job ended first: nothing to do.
        return Ok(());
    };
    let started = ask.run();
    if let Some(w) = &started.warning {
        let line = format!("greenup: job {} on {}: {w}", ask.job_id, ask.node);
        let _ = JobDir::new(&ask.run_dir, ask.job_id).add_warning(&ask.node, &line);
    }
    claim
        .finish(handoff::Outcome {
            warning: started.warning,
            note: started.note,
            took_ms: 0.0,
        })
        .map_err(|e| Failure::Runtime(format!("{}: {e}", file.display())))
}

/// Refuse a handoff file that is not a regular file of root's that only root may write:
/// root acts on what it says.
fn trusted(file: &Path) -> Outcome {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(file)
        .map_err(|e| Failure::Input(format!("{}: {e}", file.display())))?;
    if !meta.is_file() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(Failure::Input(format!(
            "{}: not a prolog's handoff: expected a regular file of root's that no one else may write",
            file.display()
        )));
    }
    Ok(())
}

/// One GPU as `greenup gpu` shows it.
#[derive(Serialize)]
struct Shown {
    index: u32,
    name: Option<String>,
    #[serde(flatten)]
    reading: GpuReading,
    power_limit_mw: Option<u32>,
    power_limit_range: Option<LimitRange>,
    power_limit_default_mw: Option<u32>,
    /// The lock greenup set (by `greenup gpu set` or a job), if any: NVML cannot read one back.
    locked_mhz: Option<(u32, u32)>,
    /// Who holds the GPU's settings: `admin`, `job N`, or None.
    held_by: Option<String>,
    /// The SM clocks the GPU offers, MHz, highest first.
    supported_sm_mhz: Option<Vec<u32>>,
}

/// One GPU's holder: its UUID, who holds it (`admin`, `job N`) and the lock in force.
struct Holder {
    uuid: String,
    who: String,
    lock: Option<(u32, u32)>,
}

/// Who holds which GPU with which lock, from the records under `run_dir`.
fn holders(run_dir: &Path) -> Vec<Holder> {
    let mut out = Vec::new();
    let mut add = |who: String, rec: GpuRecord| {
        for g in rec.gpus {
            let lock = match g.clocks {
                Control::Held => rec.request.lock_mhz,
                _ => g.lock_before_mhz,
            };
            out.push(Holder {
                uuid: g.uuid,
                who: who.clone(),
                lock,
            });
        }
    };
    if let Ok(Some(rec)) = hold::load(&hold::admin_path(run_dir)) {
        add("admin".into(), rec);
    }
    for entry in std::fs::read_dir(run_dir).into_iter().flatten().flatten() {
        let Some(job) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        for f in std::fs::read_dir(entry.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if f.file_name().to_string_lossy().ends_with(".gpu.json")
                && let Ok(Some(rec)) = hold::load(&f.path())
            {
                add(format!("job {job}"), rec);
            }
        }
    }
    out
}

fn show(p: &Place, json: bool) -> Outcome {
    let nvml = open(p)?;
    let held = holders(&p.run_dir);
    let mut shown = Vec::new();
    for g in nvml.gpus().map_err(nvml_err)? {
        let reading = GpuReading::read(&g).map_err(nvml_err)?;
        // A job's hold is the newer one when both exist.
        let holder = held.iter().rev().find(|h| h.uuid == reading.uuid);
        shown.push(Shown {
            index: g.index,
            name: g.name().ok(),
            power_limit_mw: g.power_limit_mw().ok(),
            power_limit_range: g.power_limit_range().ok(),
            power_limit_default_mw: g.default_power_limit_mw().ok(),
            locked_mhz: holder.and_then(|h| h.lock),
            held_by: holder.map(|h| h.who.clone()),
            supported_sm_mhz: g.supported_sm_mhz().ok(),
            reading,
        });
    }
    if json {
        return print_json(&shown);
    }
    if shown.is_empty() {
        emit(&format!("no GPUs ({} sees none)", nvml.path().display()));
        return Ok(());
    }
    let mut t = table(&[
        "GPU",
        "NAME",
        "ENERGY",
        "POWER",
        "SM",
        "UTIL",
        "LIMIT",
        "RANGE",
        "DEFAULT",
        "SM_CLOCKS",
        "LOCKED",
        "HELD_BY",
    ]);
    let w = |mw: Option<u32>| mw.map_or("-".into(), |v| format!("{:.1} W", f64::from(v) / 1000.0));
    for s in &shown {
        t.add_row(vec![
            format!("nvidia{}", s.reading.minor),
            s.name.clone().unwrap_or_else(|| "-".into()),
            s.reading
                .energy_mj
                .map_or("-".into(), |e| format!("{:.3} kJ", e as f64 / 1.0e6)),
            w(s.reading.power_mw),
            s.reading.sm_mhz.map_or("-".into(), |v| format!("{v} MHz")),
            s.reading.util_pct.map_or("-".into(), |v| format!("{v}%")),
            w(s.power_limit_mw),
            s.power_limit_range.map_or("-".into(), |r| {
                format!(
                    "{:.0}-{:.0} W",
                    f64::from(r.min_mw) / 1000.0,
                    f64::from(r.max_mw) / 1000.0
                )
            }),
            w(s.power_limit_default_mw),
            match s.supported_sm_mhz.as_deref() {
                Some([hi, .., lo]) => format!(
                    "{lo}-{hi} MHz ({})",
                    s.supported_sm_mhz.as_ref().map_or(0, Vec::len)
                ),
                Some([one]) => format!("{one} MHz"),
                _ => "-".into(),
            },
            match (&s.held_by, s.locked_mhz) {
                (_, Some((lo, hi))) => format!("{lo}-{hi} MHz"),
                (Some(_), None) => "no".into(),
                (None, None) => "not by greenup".into(),
            },
            s.held_by.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    emit(&t.to_string());
    for s in &shown {
        if let Some(why) = &s.reading.problem {
            emit(&format!("nvidia{}: {why}", s.reading.minor));
        }
    }
    Ok(())
}

fn must_be_root(what: &str) -> Outcome {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Failure::Input(format!(
            "greenup gpu {what}: only root changes GPU settings"
        )));
    }
    Ok(())
}

fn minors(nvml: &Nvml, gpus: &Option<String>) -> Result<Vec<u32>, Failure> {
    match gpus {
        Some(s) => parse_job_gpus(s).map_err(|_| {
            Failure::option("--gpus", s, "GPU numbers (/dev/nvidiaN) like 0,1,3 or 0-3")
        }),
        None => nvml
            .gpus()
            .and_then(|g| g.iter().map(|g| g.minor()).collect())
            .map_err(nvml_err),
    }
}

/// What became of each control on each GPU, one line each.
fn control_lines(rec: &GpuRecord) -> Vec<String> {
    let mut out = Vec::new();
    for g in &rec.gpus {
        for (what, c) in [
            ("power limit", &g.power_limit),
            ("locked clocks", &g.clocks),
        ] {
            match c {
                Control::NotAsked => {}
                Control::Held => out.push(format!("nvidia{}: {what}: set", g.minor)),
                Control::NotHeld(why) => {
                    out.push(format!("nvidia{}: {what}: refused: {why}", g.minor))
                }
            }
        }
    }
    out.extend(rec.missing.iter().cloned());
    out
}

fn set(p: &Place, s: &SetArgs, json: bool) -> Outcome {
    must_be_root("set")?;
    if s.power_limit.is_none() && s.lock_clocks.is_none() {
        return Err(Failure::Input(
            "greenup gpu set: nothing to set: give --power-limit and/or --lock-clocks".into(),
        ));
    }
    let nvml = open(p)?;
    let file = hold::admin_path(&p.run_dir);
    // A second set starts again from what the first one saved.
    hold::end(&nvml, &file).map_err(nvml_err)?;
    if file.exists() {
        return Err(Failure::Runtime(format!(
            "{}: an earlier greenup gpu set could not be restored; fix that first (greenup gpu restore)",
            file.display()
        )));
    }
    let req = Request {
        power_limit_mw: s.power_limit,
        lock_mhz: s.lock_clocks,
    };
    let gpus = minors(&nvml, &s.gpus)?;
    let rec = hold::begin(&nvml, &file, 0, &gpus, req, |_| None).map_err(nvml_err)?;
    if json {
        return print_json(&rec);
    }
    for line in control_lines(&rec) {
        emit(&line);
    }
    emit(&format!("saved what was there in {}", file.display()));
    Ok(())
}

fn restore(p: &Place, json: bool) -> Outcome {
    must_be_root("restore")?;
    let nvml = open(p)?;
    let file = hold::admin_path(&p.run_dir);
    let Some(ends) = hold::end(&nvml, &file).map_err(nvml_err)? else {
        emit("nothing to restore: greenup gpu set holds no GPU");
        return Ok(());
    };
    if json {
        return print_json(&ends);
    }
    let mut failed = false;
    for e in &ends {
        let g = &e.saved;
        match &e.restore_error {
            None => emit(&format!(
                "nvidia{}: power limit {:.1} W, clocks {}",
                g.minor,
                f64::from(g.power_limit_mw) / 1000.0,
                g.lock_before_mhz
                    .map_or("unlocked".into(), |(lo, hi)| format!(
                        "locked {lo}-{hi} MHz"
                    ))
            )),
            Some(why) => {
                failed = true;
                emit(&format!("nvidia{}: not restored: {why}", g.minor));
            }
        }
    }
    if failed {
        return Err(Failure::Runtime(format!(
            "some settings were not restored; they stay saved in {}",
            file.display()
        )));
    }
    Ok(())
}

/// Median and 90th percentile of one step, in milliseconds.
#[derive(Serialize)]
struct Step {
    step: &'static str,
    median_ms: f64,
    p90_ms: f64,
}

fn summarize(step: &'static str, mut ms: Vec<f64>) -> Step {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    Step {
        step,
        median_ms: at(0.5),
        p90_ms: at(0.9),
    }
}

#[derive(Serialize)]
struct BenchOut {
    library: PathBuf,
    gpus: usize,
    iterations: u32,
    request: Request,
    steps: Vec<Step>,
    /// What the device said to the controls on the last iteration.
    controls: Vec<String>,
}

fn bench(p: &Place, b: &BenchArgs, json: bool) -> Outcome {
    let req = Request {
        power_limit_mw: b.power_limit,
        lock_mhz: b.lock_clocks,
    };
    if req != Request::default() {
        must_be_root("bench --power-limit/--lock-clocks")?;
    }
    let gpus = minors(&open(p)?, &b.gpus)?;
    // Under the run directory, as a prolog's record is (tmpfs on a node: /run/greenup).
    let scratch = p.run_dir.join(format!("gpu-bench.{}", std::process::id()));
    let file = hold::record_path(&scratch, 1, "bench");
    let (mut init, mut read, mut start, mut finish, mut prolog) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut controls = Vec::new();
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1000.0;
    let outcome = (|| -> Outcome {
        for _ in 0..b.iterations {
            // What a prolog does: load NVML, then save and set the job's GPUs (reading
            // their counters). A full reading of every signal (`greenup gpu`) is timed
            // apart: the prolog does not make one.
            let t0 = Instant::now();
            let nvml = open(p)?;
            init.push(ms(t0));
            let t = Instant::now();
            let rec = hold::begin(&nvml, &file, 1, &gpus, req, |u| {
                hold::admin_lock(&p.run_dir, u)
            })
            .map_err(nvml_err)?;
            start.push(ms(t));
            prolog.push(ms(t0));
            let t = Instant::now();
            for m in &gpus {
                let g = nvml.gpu_by_minor(*m).map_err(nvml_err)?;
                GpuReading::read(&g).map_err(nvml_err)?;
            }
            read.push(ms(t));
            controls = control_lines(&rec);
            let t = Instant::now();
            let ends = hold::end(&nvml, &file).map_err(nvml_err)?;
            finish.push(ms(t));
            if let Some(why) = ends.into_iter().flatten().find_map(|e| e.restore_error) {
                return Err(Failure::Runtime(format!("not restored: {why}")));
            }
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    outcome?;
    let out = BenchOut {
        library: p.library.clone(),
        gpus: gpus.len(),
        iterations: b.iterations,
        request: req,
        steps: vec![
            summarize("load and init NVML", init),
            summarize("save and set (hold begin)", start),
            summarize("prolog total (init + hold begin)", prolog),
            summarize("epilog: read and restore (hold end)", finish),
            summarize("full reading of the GPUs (not in the prolog)", read),
        ],
        controls,
    };
    if json {
        return print_json(&out);
    }
    let mut t = table(&["STEP", "MEDIAN", "P90"]);
    for s in &out.steps {
        t.add_row(vec![
            s.step.to_string(),
            format!("{:.3} ms", s.median_ms),
            format!("{:.3} ms", s.p90_ms),
        ]);
    }
    emit(&format!(
        "{} GPU(s), {} iterations, NVML {}",
        out.gpus,
        out.iterations,
        out.library.display()
    ));
    emit(&t.to_string());
    for c in &out.controls {
        emit(c);
    }
    Ok(())
}
