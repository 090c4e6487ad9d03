//! `greenup meter`: count one job's RAPL energy on this node while the job runs. The
//! plugin's job prolog starts it as root; it stops by itself once the job's epilog has
//! taken the last reading, so a counter that wraps many times in a long job is counted
//! in full. Where the job holds GPUs, it also samples their SM clock and utilization, so
//! the end can report their means over the job. With `--report-every`, it also measures
//! the node's power at that interval and sends it to greenupd, a few samples a report,
//! for the live view of the caps.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use std::time::Instant;

use greenup_core::quantity::{Seconds, Watts};
use greenup_platform::dvfs::job::{NodePaths, count_until_end};
use greenup_platform::dvfs::state;
use greenup_platform::meter::rapl::{self, Energy, Reading};
use greenup_platform::meter::tally::Tally;
use greenup_proto::client::{Client, Endpoint};
use greenup_proto::live_power::{PowerReport, PowerSample, REPORT_PERIOD_S, samples_per_report};

use crate::{Failure, Outcome};

/// Options of `greenup meter`.
#[derive(Args, Debug)]
pub struct MeterArgs {
    /// The Slurm job id.
    job_id: u32,
    /// This node's name, as Slurm knows it (the name its saved record is kept under).
    #[arg(long)]
    node: String,
    /// Where the job prolog saved the job's settings and first reading.
    #[arg(long, default_value = "/run/greenup")]
    run_dir: PathBuf,
    /// The sysfs root holding class/powercap.
    #[arg(long, default_value = "/sys")]
    sysfs_root: PathBuf,
    /// The longest wait between two readings, in seconds.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    every_at_most: u64,
    /// Measure the node's power every this many seconds (the site's
    /// power.meter_interval_s, 1 to 300) and send it to greenupd; absent, nothing is sent.
    #[arg(long, value_name = "SECS", value_parser = report_every, requires = "connect")]
    report_every: Option<f64>,
    /// greenupd's address for the power reports: HOST:PORT (with MUNGE) or unix:PATH.
    #[arg(long, value_name = "ADDR", requires = "report_every")]
    connect: Option<String>,
    /// Samples a report carries (default: a minute's worth, so greenupd's work stays
    /// small at 10,000 nodes).
    #[arg(long, value_name = "N", requires = "report_every", value_parser = clap::value_parser!(u32).range(1..=64))]
    batch: Option<u32>,
    /// How long one power report may wait for greenupd, in milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(50..=60_000))]
    timeout_ms: u64,
}

fn report_every(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (1.0..=300.0).contains(&v) => Ok(v),
        _ => Err(format!("expected seconds from 1 to 300, got '{s}'")),
    }
}

/// Count until the job ends on this node.
pub fn run(a: MeterArgs) -> Outcome {
    if !state::path(&a.run_dir, a.job_id, &a.node).exists() {
        return Err(Failure::Input(format!(
            "{}: no saved record of job {} for node '{}': greenup meter counts a job its prolog has started (see --run-dir and --node)",
            a.run_dir.display(),
            a.job_id,
            a.node
        )));
    }
    let paths = NodePaths {
        sysfs_root: a.sysfs_root,
        run_dir: a.run_dir,
    };
    // The GPU sampler ends with this process: the CPU count below ends at the epilog.
    let (run_dir, node) = (paths.run_dir.clone(), a.node.clone());
    let _gpus = std::thread::spawn(move || sample_gpus(&run_dir, a.job_id, &node));
    // The power reports run beside the count and end with this process; a report that
    // cannot be sent is dropped, so greenupd never holds the count up.
    if let (Some(every), Some(addr)) = (a.report_every, a.connect.clone()) {
        let reporter = PowerReporter {
            job_id: a.job_id,
            node: a.node.clone(),
            sysfs_root: paths.sysfs_root.clone(),
            run_dir: paths.run_dir.clone(),
            record: state::path(&paths.run_dir, a.job_id, &a.node),
            gpu_record: greenup_platform::gpu::hold::record_path(&paths.run_dir, a.job_id, &a.node),
            every: Duration::from_secs_f64(every),
            per_report: a.batch.map_or_else(
                || samples_per_report(every, REPORT_PERIOD_S),
                |b| b as usize,
            ),
            endpoint: Endpoint::parse(&addr),
            timeout: Duration::from_millis(a.timeout_ms),
        };
        let _power = std::thread::spawn(move || reporter.run());
    }
    count_until_end(
        &paths,
        a.job_id,
        &a.node,
        Duration::from_secs(a.every_at_most),
    )
    .map_err(|e| Failure::Runtime(e.to_string()))
}

/// How often the job's GPUs' SM clock and utilization are read.
const GPU_EVERY: Duration = Duration::from_secs(5);

/// Sample the job's GPUs until their record is gone (the epilog ended them), with the
/// NVML library the prolog used. A job without GPUs returns at once.
fn sample_gpus(run_dir: &std::path::Path, job_id: u32, node: &str) {
    use greenup_platform::gpu::{Nvml, hold, samples};
    let record = hold::record_path(run_dir, job_id, node);
    let Ok(Some(rec)) = hold::load(&record) else {
        return;
    };
    let Some(Ok(nvml)) = rec.library.as_deref().map(Nvml::open) else {
        return;
    };
    let out = hold::samples_path(run_dir, job_id, node);
    loop {
        if !record.exists() {
            return;
        }
        let _ = samples::sample(&nvml, &rec, &out);
        // The epilog may have read and removed the sums in the meantime: leave nothing behind.
        if !record.exists() {
            let _ = std::fs::remove_file(&out);
            return;
        }
        std::thread::sleep(GPU_EVERY);
    }
}

/// The longest wait before a lost connection to greenupd is tried again.
const LONGEST_BACKOFF: Duration = Duration::from_secs(60);

/// Sends this node's measured power to greenupd at a fixed interval while the job runs.
struct PowerReporter {
    job_id: u32,
    node: String,
    sysfs_root: PathBuf,
    /// The node's run directory (the job's records and their lock).
    run_dir: PathBuf,
    /// The job's saved record on this node: gone once the epilog has run.
    record: PathBuf,
    /// The job's GPU record on this node, when it holds GPUs: their power counts too.
    gpu_record: PathBuf,
    every: Duration,
    /// Samples a report carries.
    per_report: usize,
    endpoint: Endpoint,
    timeout: Duration,
}

impl PowerReporter {
    /// Read RAPL every interval and send the mean powers since the last readings,
    /// `per_report` samples a report. Each report has a connection of its own: greenupd closes idle ones long
    /// before the next. A report greenupd does not take is dropped, and after a failure
    /// to reach it the next try waits, doubling up to a minute. Ends once the job has
    /// ended on this node.
    fn run(self) {
        let per_report = self.per_report;
        let gpus = GpuCounters::open(&self.gpu_record);
        let mut last_gpus = gpus.as_ref().and_then(GpuCounters::read);
        let mut last = rapl::read(&self.sysfs_root);
        let mut due = Instant::now() + self.every;
        let mut batch = Vec::with_capacity(per_report);
        let mut backoff = Duration::from_secs(1);
        let mut retry_at = Instant::now();
        // The limit read back after greenupd's give-back lowered it, sent with the next
        // sample at once so greenupd can return the watts to the queue.
        let mut lowered: Option<f64> = None;
        loop {
            // Look for the job's end every second, as the count does.
            while Instant::now() < due {
                if !self.record.exists() {
                    return;
                }
                let left = due.saturating_duration_since(Instant::now());
                std::thread::sleep(left.min(Duration::from_secs(1)));
            }
            if !self.record.exists() {
                return;
            }
            due += self.every;
            // A slow greenupd or a suspended node must not make the meter send a burst.
            if due < Instant::now() {
                due = Instant::now() + self.every;
            }
            let now = rapl::read(&self.sysfs_root);
            let now_gpus = gpus.as_ref().and_then(GpuCounters::read);
            let sample = self.sample(&last, &now);
            batch.extend(sample.and_then(|s| with_gpus(s, gpus.is_some(), last_gpus, now_gpus)));
            last = now;
            last_gpus = now_gpus;
            if batch.len() < per_report && (lowered.is_none() || batch.is_empty()) {
                continue;
            }
            let report = PowerReport {
                node: self.node.clone(),
                samples: std::mem::take(&mut batch),
                limit_w: lowered.take().map(Watts),
            };
            if Instant::now() < retry_at {
                continue;
            }
            match self.send(report) {
                Some(limit) => {
                    backoff = Duration::from_secs(1);
                    lowered = limit.and_then(|w| self.lower(w.0));
                }
                None => {
                    retry_at = Instant::now() + backoff;
                    backoff = (backoff * 2).min(LONGEST_BACKOFF);
                }
            }
        }
    }

    /// Send one report: None when greenupd could not be reached, else the lower limit it
    /// asks the node to hold, if any. A refusal is an answer: greenupd has logged why.
    fn send(&self, report: PowerReport) -> Option<Option<Watts>> {
        use greenup_proto::client::ClientError;
        let mut c = Client::connect(&self.endpoint, self.timeout).ok()?;
        match c.power_report(report) {
            Ok((_, limit_w)) => Some(limit_w),
            Err(ClientError::Server(_)) => Some(None),
            Err(_) => None,
        }
    }

    /// Lower this node's long-term limit to `watts` for the rest of the job (never
    /// raising it; the epilog restores what the prolog saved); the limit read back, or
    /// None (logged) when it could not be written, so greenupd keeps the job's watts.
    fn lower(&self, watts: f64) -> Option<f64> {
        let paths = NodePaths {
            sysfs_root: self.sysfs_root.clone(),
            run_dir: self.run_dir.clone(),
        };
        // Under the lock the epilog restores under, so the lowering never lands after the
        // restore; a restore in progress is waited for briefly, then nothing is lowered.
        match greenup_platform::dvfs::job::lower_while_running(
            &paths,
            self.job_id,
            &self.node,
            watts,
            Duration::from_secs(1),
        ) {
            Ok(None) => None,
            Ok(Some(held)) => {
                eprintln!(
                    "greenup meter: job {} on {}: long-term power limit lowered to {held:.1} W (greenupd gives the job's unused watts back)",
                    self.job_id, self.node
                );
                Some(held)
            }
            Err(e) => {
                eprintln!(
                    "greenup meter: job {} on {}: cannot lower the power limit to {watts:.1} W: {e}",
                    self.job_id, self.node
                );
                None
            }
        }
    }

    /// The node's mean power between two readings (every RAPL zone summed), or `None`
    /// where a counter could not be read.
    fn sample(&self, from: &Reading, to: &Reading) -> Option<PowerSample> {
        let span = to.unix_s - from.unix_s;
        if span <= 0.0 || from.problem.is_some() || to.problem.is_some() {
            return None;
        }
        let mut t = Tally::start(from.clone());
        t.add(to.clone());
        match t.energy() {
            Energy::Measured { joules } => Some(PowerSample {
                jobs: vec![u64::from(self.job_id)],
                at: to.unix_s.round() as i64,
                watts: Watts(joules / span),
                interval_s: Seconds(span),
                gpu_watts: None,
            }),
            Energy::Unmeasured { .. } => None,
        }
    }
}

/// The job's GPUs on this node, read beside RAPL so the node's live power includes them.
struct GpuCounters {
    nvml: greenup_platform::gpu::Nvml,
    rec: greenup_platform::gpu::GpuRecord,
}

impl GpuCounters {
    /// The GPUs of the record at `file`, with the NVML library the prolog used; None
    /// when the job holds none here, or their counters cannot be read now (GPUs without
    /// an energy counter leave the node's power RAPL's alone, as before).
    fn open(file: &std::path::Path) -> Option<GpuCounters> {
        use greenup_platform::gpu::{Nvml, hold};
        let rec = hold::load(file).ok()??;
        let nvml = Nvml::open(rec.library.as_deref()?).ok()?;
        let g = GpuCounters { nvml, rec };
        g.read().map(|_| g)
    }

    /// The sum of their energy counters now, in mJ.
    fn read(&self) -> Option<u64> {
        greenup_platform::gpu::samples::energy_mj(&self.nvml, &self.rec)
    }
}

/// `s` with the job's GPUs' mean power over its interval added, from their counters'
/// sums at its start and end, when the job holds GPUs (`held`); None when those could
/// not be read, so a node's power is never reported short of its GPUs.
fn with_gpus(
    mut s: PowerSample,
    held: bool,
    from_mj: Option<u64>,
    to_mj: Option<u64>,
) -> Option<PowerSample> {
    if held {
        let (from, to) = from_mj.zip(to_mj)?;
        let gpu_w = greenup_platform::gpu::samples::mean_power_w(from, to, s.interval_s.0)?;
        s.watts += Watts(gpu_w);
        s.gpu_watts = Some(Watts(gpu_w));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup_platform::meter::rapl::ZoneReading;

    fn reading(unix_s: f64, uj: &[u64]) -> Reading {
        Reading {
            unix_s,
            zones: uj
                .iter()
                .enumerate()
                .map(|(i, e)| ZoneReading {
                    id: format!("intel-rapl:{i}"),
                    name: format!("package-{i}"),
                    energy_uj: *e,
                    max_energy_range_uj: 10_000_000,
                })
                .collect(),
            problem: None,
        }
    }

    fn reporter() -> PowerReporter {
        PowerReporter {
            job_id: 42,
            node: "n1".into(),
            sysfs_root: "/nonexistent".into(),
            run_dir: "/nonexistent".into(),
            record: "/nonexistent".into(),
            gpu_record: "/nonexistent".into(),
            every: Duration::from_secs(5),
            per_report: 12,
            endpoint: Endpoint::parse("unix:/nonexistent"),
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_sample_is_the_mean_power_of_every_zone_over_the_interval() {
        // Package 0 counts 1 J to 6 J, package 1 wraps at 10 J: 9 J to 1 J is 2 J. So
        // 5 J + 2 J = 7 J over 5 s: 1.4 W.
        let from = reading(1000.0, &[1_000_000, 9_000_000]);
        let to = reading(1005.0, &[6_000_000, 1_000_000]);
        let s = reporter().sample(&from, &to).unwrap();
        assert_eq!((s.jobs, s.at, s.interval_s), (vec![42], 1005, Seconds(5.0)));
        assert!((s.watts.0 - 1.4).abs() < 1e-12, "{}", s.watts.0);
        let mut broken = to.clone();
        broken.problem = Some("energy_uj unreadable".into());
        assert_eq!(reporter().sample(&from, &broken), None);
        assert_eq!(reporter().sample(&to, &to), None);
    }

    #[test]
    fn the_jobs_gpus_add_their_mean_power_over_the_same_interval() {
        let s = PowerSample {
            jobs: vec![42],
            at: 1005,
            watts: Watts(1.4),
            interval_s: Seconds(5.0),
            gpu_watts: None,
        };
        // 3,500 J over 5 s: 700 W more, said apart too.
        let with = with_gpus(s.clone(), true, Some(1_000_000), Some(4_500_000)).unwrap();
        assert!((with.watts.0 - 701.4).abs() < 1e-9, "{}", with.watts.0);
        assert_eq!(with.gpu_watts, Some(Watts(700.0)));
        // No GPUs: RAPL's alone. GPUs whose counters were not read, or went back (a
        // driver reload): no sample.
        assert_eq!(with_gpus(s.clone(), false, None, None), Some(s.clone()));
        assert_eq!(with_gpus(s.clone(), true, Some(1), None), None);
        assert_eq!(with_gpus(s, true, Some(9), Some(1)), None);
    }
}
