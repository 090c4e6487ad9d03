//! greenupd load generator: N concurrent clients open, record and close jobs
//! on a greenupd running on this host, and report throughput and latency per
//! request type. Loopback only, and bounded in clients, jobs and nodes.
//!
//! Phases run one after the other so each request type is measured on its own:
//! every job is opened, then every node of every job records its outcome, then
//! every job is closed.
//!
//! By default each client sends its next request as soon as the last is answered,
//! which measures the most greenupd can serve; latency is then mostly queueing
//! (64 clients at T requests/s wait 64/T s on average). With `--rate R` requests are
//! due at R per second, spread over the clients, which measures the latency a
//! cluster sending R requests/s sees; latency counts from when a request was due,
//! so a client that falls behind is charged for it. With `--ack-log` each acknowledged write is appended as
//! CSV (`kind,job,node`) so a crash test can check that none was lost.
//!
//! `cargo run --release --example loadgen -- --connect 127.0.0.1:7470 --clients 64 --jobs 20000 --nodes 64`
//!
//! With `--power-nodes N` it measures instead what the nodes' power reports cost
//! greenupd: other requests (open_job then close_job, `--probe-rate` a second) run for
//! `--power-seconds` alone, then again while N simulated nodes, each on a connection of
//! its own, send a power_report of `--power-batch` samples, one sample per
//! `--power-every` seconds, on a connection per report (or kept with `--power-keep`),
//! as `greenup meter` does. With `--pid`, greenupd's
//! CPU time and RSS are read from /proc for each phase.

use std::io::Write;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use greenup_core::quantity::{Ghz, Joules, Seconds, Watts};
use greenup_proto::client::{Client, Endpoint};
use greenup_proto::protocol::{NodeOutcome, OpenJob};

/// Load greenupd with open, record and close requests.
#[derive(Debug, Parser)]
struct Args {
    /// greenupd's address: HOST:PORT (loopback only) or unix:PATH.
    #[arg(long)]
    connect: String,
    /// Concurrent clients (threads, one connection each).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=256))]
    clients: u32,
    /// Jobs to run.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    jobs: u64,
    /// Nodes per job (each records one outcome).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1024))]
    nodes: u32,
    /// The first job id.
    #[arg(long, default_value_t = 1_000_000)]
    first_job: u64,
    /// Profile to plan with (none: jobs run unchanged, no model is evaluated).
    #[arg(long)]
    profile: Option<String>,
    /// Policy to plan with.
    #[arg(long)]
    policy: Option<String>,
    /// Partition of every job.
    #[arg(long)]
    partition: Option<String>,
    /// Append every acknowledged write here as `kind,job,node`.
    #[arg(long)]
    ack_log: Option<PathBuf>,
    /// Stop a client at its first failure instead of counting it and going on.
    #[arg(long)]
    stop_on_error: bool,
    /// Requests per second in each phase (default: as fast as greenupd answers).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    rate: Option<u32>,
    /// Per-request timeout in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Print only greenupd's status as JSON and exit.
    #[arg(long)]
    status: bool,
    /// Measure the power reports of this many simulated nodes (n1..nN) instead.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=20_000))]
    power_nodes: Option<u32>,
    /// Seconds between two power samples of one node (the meter interval).
    #[arg(long, default_value_t = 5.0)]
    power_every: f64,
    /// Samples per report (default: as `greenup meter` batches them, a minute's worth).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    power_batch: Option<u32>,
    /// Keep each node's connection open between reports, instead of one per report as
    /// `greenup meter` does (greenupd closes connections idle past its timeout).
    #[arg(long)]
    power_keep: bool,
    /// Seconds each power phase lasts.
    #[arg(long, default_value_t = 60)]
    power_seconds: u64,
    /// Other requests a second during the power phases (open_job and close_job in turn).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    probe_rate: u32,
    /// greenupd's process id, to read its CPU time and memory from /proc.
    #[arg(long)]
    pid: Option<u32>,
}

#[derive(Default)]
struct Lat {
    us: Vec<u32>,
    errors: u64,
    first_error: Option<String>,
}

struct AckLog(Mutex<std::io::BufWriter<std::fs::File>>);

impl AckLog {
    fn write(&self, kind: &str, job: u64, node: &str) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(w, "{kind},{job},{node}");
    }
}

fn endpoint(s: &str) -> Result<Endpoint, String> {
    let ep = Endpoint::parse(s);
    if let Endpoint::Tcp(addr) = &ep {
        let addrs: Vec<_> = addr
            .to_socket_addrs()
            .map_err(|e| format!("--connect {addr}: {e}"))?
            .collect();
        if addrs.is_empty() || addrs.iter().any(|a| !a.ip().is_loopback()) {
            return Err(format!(
                "--connect {addr}: the load generator only targets loopback addresses"
            ));
        }
    }
    Ok(ep)
}

fn node(i: u32) -> String {
    format!("n{}", i + 1)
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    f64::from(sorted[idx]) / 1000.0
}

/// Run `per_item` for items `0..count` over `clients` threads; returns latencies and wall time.
fn phase(
    args: &Args,
    ep: &Endpoint,
    clients: &mut [Option<Client>],
    count: u64,
    per_item: impl Fn(&mut Client, u64) -> Result<(), String> + Sync,
) -> (Lat, Duration) {
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let timeout = Duration::from_millis(args.timeout_ms);
    let started = Instant::now();
    let lats: Vec<Lat> = std::thread::scope(|s| {
        let (next, stop, per_item) = (&next, &stop, &per_item);
        let handles: Vec<_> = clients
            .iter_mut()
            .map(|client| {
                s.spawn(move || {
                    let mut lat = Lat::default();
                    loop {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= count {
                            break;
                        }
                        if client.is_none() {
                            match Client::connect(ep, timeout) {
                                Ok(c) => *client = Some(c),
                                Err(e) => {
                                    lat.errors += 1;
                                    lat.first_error.get_or_insert(e.to_string());
                                    if args.stop_on_error {
                                        stop.store(true, Ordering::Relaxed);
                                    }
                                    continue;
                                }
                            }
                        }
                        let Some(c) = client.as_mut() else { continue };
                        let t = match args.rate {
                            Some(r) => {
                                let due =
                                    started + Duration::from_secs_f64(i as f64 / f64::from(r));
                                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                                due
                            }
                            None => Instant::now(),
                        };
                        match per_item(c, i) {
                            Ok(()) => lat
                                .us
                                .push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX)),
                            Err(e) => {
                                lat.errors += 1;
                                lat.first_error.get_or_insert(e);
                                *client = None;
                                if args.stop_on_error {
                                    stop.store(true, Ordering::Relaxed);
                                }
                            }
                        }
                    }
                    lat
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let wall = started.elapsed();
    let mut all = Lat::default();
    for l in lats {
        all.us.extend(l.us);
        all.errors += l.errors;
        if all.first_error.is_none() {
            all.first_error = l.first_error;
        }
    }
    all.us.sort_unstable();
    (all, wall)
}

fn report(name: &str, lat: &Lat, wall: Duration) -> bool {
    let ok = lat.us.len();
    println!(
        "{name:<15} {ok:>9} ok {:>6} errors {:>9.0} req/s   p50 {:>7.3} ms   p99 {:>7.3} ms   max {:>8.3} ms   ({:.1} s)",
        lat.errors,
        ok as f64 / wall.as_secs_f64(),
        percentile(&lat.us, 0.50),
        percentile(&lat.us, 0.99),
        percentile(&lat.us, 1.0),
        wall.as_secs_f64(),
    );
    if let Some(e) = &lat.first_error {
        println!("{name:<15} first error: {e}");
    }
    lat.errors == 0
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let ep = match endpoint(&args.connect) {
        Ok(ep) => ep,
        Err(e) => {
            eprintln!("loadgen: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if args.status {
        let st = Client::connect(&ep, Duration::from_millis(args.timeout_ms))
            .and_then(|mut c| c.status());
        return match st {
            Ok(s) => {
                println!("{}", serde_json::to_string_pretty(&s).unwrap_or_default());
                std::process::ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("loadgen: {e}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    if let Some(n) = args.power_nodes {
        return power::run(&args, &ep, n);
    }
    let acks = match &args.ack_log {
        Some(p) => match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
        {
            Ok(f) => Some(Arc::new(AckLog(Mutex::new(std::io::BufWriter::new(f))))),
            Err(e) => {
                eprintln!("loadgen: --ack-log {}: {e}", p.display());
                return std::process::ExitCode::from(2);
            }
        },
        None => None,
    };
    let nodes: Vec<String> = (0..args.nodes).map(node).collect();
    let uid = 1000 + (args.first_job % 7) as u32;
    println!(
        "loadgen: {} clients, {} jobs x {} nodes against {} ({} requests, {})",
        args.clients,
        args.jobs,
        args.nodes,
        args.connect,
        args.jobs * (2 + u64::from(args.nodes)),
        args.rate
            .map_or("as fast as answered".to_string(), |r| format!(
                "{r} requests/s per phase"
            ))
    );
    // Connect every client first, so the phases measure requests, not start-up.
    let timeout = Duration::from_millis(args.timeout_ms);
    let mut clients: Vec<Option<Client>> = (0..args.clients)
        .map(|_| Client::connect(&ep, timeout).ok())
        .collect();
    let total = Instant::now();
    let mut ok = true;

    let (lat, wall) = phase(&args, &ep, &mut clients, args.jobs, |c, i| {
        let job_id = args.first_job + i;
        let req = OpenJob {
            restart_count: None,
            job_id,
            uid,
            user: None,
            partition: args.partition.clone(),
            nodes: nodes.clone(),
            nodelist: None,
            min_nodes: None,
            time_limit: greenup::record::TimeLimit::Seconds(3600.0),
            policy: args.policy.clone(),
            profile: args.profile.clone(),
            energy_cap_j: None,
            power_cap_w: None,
            algorithm: None,
            account: None,
            granted_w: None,
        };
        c.open_job(req).map_err(|e| e.to_string())?;
        if let Some(a) = &acks {
            a.write("open", job_id, "");
        }
        Ok(())
    });
    ok &= report("open_job", &lat, wall);

    let per_job = u64::from(args.nodes);
    let (lat, wall) = phase(&args, &ep, &mut clients, args.jobs * per_job, |c, i| {
        let job_id = args.first_job + i / per_job;
        let name = node((i % per_job) as u32);
        let o = NodeOutcome {
            restart_count: None,
            comm: None,
            job_id,
            node: name.clone(),
            freq_ghz: Some(Ghz(2.0)),
            energy_j: Some(Joules(1000.0 + (i % 97) as f64)),
            elapsed_s: Some(Seconds(60.0)),
            source: Some(greenup::record::Source::Rapl),
            restored: true,
            note: None,
            gpu: None,
            power: None,
        };
        c.record_outcome(o).map_err(|e| e.to_string())?;
        if let Some(a) = &acks {
            a.write("record", job_id, &name);
        }
        Ok(())
    });
    ok &= report("record_outcome", &lat, wall);

    let (lat, wall) = phase(&args, &ep, &mut clients, args.jobs, |c, i| {
        let job_id = args.first_job + i;
        c.close_job(job_id, Some(greenup::record::JobEnd::Completed), None)
            .map_err(|e| e.to_string())?;
        if let Some(a) = &acks {
            a.write("close", job_id, "");
        }
        Ok(())
    });
    ok &= report("close_job", &lat, wall);
    if let Some(a) = &acks {
        let _ = a.0.lock().unwrap_or_else(|e| e.into_inner()).flush();
    }
    println!("total           {:.1} s", total.elapsed().as_secs_f64());
    if ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

/// The cost of the nodes' power reports to greenupd.
mod power {
    use super::*;
    use greenup_proto::live_power::{PowerReport, PowerSample};

    /// Nodes per job the reporting nodes run.
    const JOB_NODES: u32 = 64;
    /// Threads sending the probe requests.
    const PROBE_THREADS: u32 = 8;
    /// Threads sending the power reports, each for its share of the nodes.
    const POWER_THREADS: u32 = 32;

    /// greenupd's CPU seconds (user + system) and resident KiB, from /proc.
    fn usage(pid: Option<u32>) -> Option<(f64, u64)> {
        let pid = pid?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The fields after the command name, which is in parentheses.
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let rss = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some((ticks / hz, rss))
    }

    fn open(job_id: u64, nodes: Vec<String>) -> OpenJob {
        OpenJob {
            restart_count: None,
            job_id,
            uid: 1000,
            user: None,
            partition: Some("debug".into()),
            nodes,
            nodelist: None,
            min_nodes: None,
            time_limit: greenup::record::TimeLimit::Seconds(3600.0),
            policy: None,
            profile: None,
            energy_cap_j: None,
            power_cap_w: None,
            algorithm: None,
            account: None,
            granted_w: None,
        }
    }

    /// Open and close jobs at `rate` a second for `secs`, as `PROBE_THREADS` clients.
    fn probes(args: &Args, ep: &Endpoint, first: u64, secs: u64, stop: &AtomicBool) -> Lat {
        let timeout = Duration::from_millis(args.timeout_ms);
        let per = f64::from(args.probe_rate) / f64::from(PROBE_THREADS);
        let started = Instant::now();
        let end = started + Duration::from_secs(secs);
        let lats: Vec<Lat> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..PROBE_THREADS)
                .map(|t| {
                    s.spawn(move || {
                        let mut lat = Lat::default();
                        let mut c = Client::connect(ep, timeout).ok();
                        let offset = f64::from(t) / f64::from(args.probe_rate);
                        for i in 0u64.. {
                            let due = started + Duration::from_secs_f64(offset + i as f64 / per);
                            if due >= end || stop.load(Ordering::Relaxed) {
                                break;
                            }
                            std::thread::sleep(due.saturating_duration_since(Instant::now()));
                            if c.is_none() {
                                c = Client::connect(ep, timeout).ok();
                            }
                            let Some(cl) = c.as_mut() else {
                                lat.errors += 1;
                                continue;
                            };
                            let job = first + u64::from(t) * 1_000_000 + i / 2;
                            let r = if i % 2 == 0 {
                                let nodes = (1..=4).map(|k| format!("n{k}")).collect();
                                cl.open_job(open(job, nodes)).map(|_| ())
                            } else {
                                cl.close_job(job, Some(greenup::record::JobEnd::Completed), None)
                                    .map(|_| ())
                            };
                            match r {
                                Ok(()) => lat.us.push(
                                    u32::try_from(due.elapsed().as_micros()).unwrap_or(u32::MAX),
                                ),
                                Err(e) => {
                                    lat.errors += 1;
                                    lat.first_error.get_or_insert(e.to_string());
                                    c = None;
                                }
                            }
                        }
                        lat
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        merge(lats)
    }

    fn merge(lats: Vec<Lat>) -> Lat {
        let mut all = Lat::default();
        for l in lats {
            all.us.extend(l.us);
            all.errors += l.errors;
            if all.first_error.is_none() {
                all.first_error = l.first_error;
            }
        }
        all.us.sort_unstable();
        all
    }

    /// Every node reports once per `every` seconds, the nodes spread evenly over it.
    fn reports(
        args: &Args,
        ep: &Endpoint,
        clients: &mut [Vec<(u32, Option<Client>)>],
        n: u32,
        first_job: u64,
        stop: &AtomicBool,
    ) -> Lat {
        let timeout = Duration::from_millis(args.timeout_ms);
        let every = args.power_every;
        let batch = batch_of(args);
        let period = every * f64::from(batch);
        let started = Instant::now();
        let end = started + Duration::from_secs(args.power_seconds);
        let lats: Vec<Lat> = std::thread::scope(|s| {
            let hs: Vec<_> = clients
                .iter_mut()
                .map(|mine| {
                    s.spawn(move || {
                        let mut lat = Lat::default();
                        'rounds: for round in 0u64.. {
                            for (node, conn) in mine.iter_mut() {
                                let due = started
                                    + Duration::from_secs_f64(
                                        round as f64 * period
                                            + f64::from(*node) * period / f64::from(n),
                                    );
                                if due >= end || stop.load(Ordering::Relaxed) {
                                    break 'rounds;
                                }
                                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                                if conn.is_none() {
                                    *conn = Client::connect(ep, timeout).ok();
                                }
                                let Some(c) = conn.as_mut() else {
                                    lat.errors += 1;
                                    continue;
                                };
                                let at = std::time::SystemTime::now()
                                    .duration_since(std::time::UNIX_EPOCH)
                                    .map_or(0, |d| d.as_secs() as i64);
                                let report = PowerReport {
                                    limit_w: None,
                                    node: super::node(*node),
                                    samples: (0..batch)
                                        .map(|k| PowerSample {
                                            jobs: vec![first_job + u64::from(*node / JOB_NODES)],
                                            at: at - (every * f64::from(batch - 1 - k)) as i64,
                                            watts: Watts(150.0 + f64::from(*node % 100)),
                                            interval_s: Seconds(every),
                                            gpu_watts: None,
                                        })
                                        .collect(),
                                };
                                let sent = c.power_report(report);
                                if !args.power_keep {
                                    *conn = None;
                                }
                                match sent {
                                    Ok(_) => lat.us.push(
                                        u32::try_from(due.elapsed().as_micros())
                                            .unwrap_or(u32::MAX),
                                    ),
                                    Err(e) => {
                                        lat.errors += 1;
                                        lat.first_error.get_or_insert(e.to_string());
                                        *conn = None;
                                    }
                                }
                            }
                        }
                        lat
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        merge(lats)
    }

    fn phase_line(name: &str, before: Option<(f64, u64)>, after: Option<(f64, u64)>, secs: f64) {
        if let (Some((c0, r0)), Some((c1, r1))) = (before, after) {
            println!(
                "{name:<15} greenupd CPU {:.2} s over {secs:.1} s = {:.2} % of one core; RSS {:.1} -> {:.1} MB",
                c1 - c0,
                100.0 * (c1 - c0) / secs,
                r0 as f64 / 1024.0,
                r1 as f64 / 1024.0
            );
        }
    }

    fn batch_of(args: &Args) -> u32 {
        args.power_batch.unwrap_or_else(|| {
            greenup_proto::live_power::samples_per_report(
                args.power_every,
                greenup_proto::live_power::REPORT_PERIOD_S,
            ) as u32
        })
    }

    pub(super) fn run(args: &Args, ep: &Endpoint, n: u32) -> std::process::ExitCode {
        let timeout = Duration::from_millis(args.timeout_ms);
        let jobs = n.div_ceil(JOB_NODES);
        let first_job = args.first_job;
        let batch = batch_of(args);
        println!(
            "loadgen: {n} nodes sampling every {} s, {batch} samples a report ({:.0} reports/s, connection {}) in {jobs} jobs of {JOB_NODES}; other requests {}/s; {} s a phase",
            args.power_every,
            f64::from(n) / args.power_every / f64::from(batch),
            if args.power_keep {
                "kept"
            } else {
                "per report"
            },
            args.probe_rate,
            args.power_seconds
        );
        let mut setup = match Client::connect(ep, timeout) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("loadgen: {e}");
                return std::process::ExitCode::FAILURE;
            }
        };
        for k in 0..jobs {
            let nodes = (k * JOB_NODES..((k + 1) * JOB_NODES).min(n))
                .map(super::node)
                .collect();
            if let Err(e) = setup.open_job(open(first_job + u64::from(k), nodes)) {
                eprintln!("loadgen: opening the reporting nodes' job: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
        let stop = AtomicBool::new(false);
        let secs = args.power_seconds as f64;
        let probe_first = first_job + 1_000_000;

        // Warm greenupd up (its store, its caches) before anything is measured.
        let _ = probes(args, ep, probe_first + 900_000, 5, &stop);
        let before = usage(args.pid);
        let lat = probes(args, ep, probe_first, args.power_seconds, &stop);
        let after = usage(args.pid);
        let mut ok = report("probes alone", &lat, Duration::from_secs_f64(secs));
        phase_line("probes alone", before, after, secs);

        // One connection per node, as each node's meter keeps one.
        let t = Instant::now();
        let mut clients: Vec<Vec<(u32, Option<Client>)>> =
            (0..POWER_THREADS).map(|_| Vec::new()).collect();
        let mut failed = 0;
        for i in 0..n {
            let c = if args.power_keep {
                Client::connect(ep, timeout).ok()
            } else {
                None
            };
            failed += u32::from(c.is_none() && args.power_keep);
            clients[(i % POWER_THREADS) as usize].push((i, c));
        }
        println!(
            "connected {} of {n} nodes in {:.1} s",
            n - failed,
            t.elapsed().as_secs_f64()
        );
        let before = usage(args.pid);
        let (probe_lat, power_lat) = std::thread::scope(|s| {
            let p = s.spawn(|| probes(args, ep, probe_first + 500_000, args.power_seconds, &stop));
            let r = reports(args, ep, &mut clients, n, first_job, &stop);
            (p.join().unwrap_or_default(), r)
        });
        let after = usage(args.pid);
        ok &= report("probes+reports", &probe_lat, Duration::from_secs_f64(secs));
        ok &= report("power_report", &power_lat, Duration::from_secs_f64(secs));
        phase_line("probes+reports", before, after, secs);
        if let Ok(mut c) = Client::connect(ep, timeout)
            && let Ok(v) = c.power_status(Some(0.01))
            && let Some(site) = v.caps.first()
        {
            println!(
                "greenupd counts {} nodes, {:.0} W measured, {:.0} W granted",
                site.nodes, site.measured_w.0, site.granted_w.0
            );
        }
        if ok {
            std::process::ExitCode::SUCCESS
        } else {
            std::process::ExitCode::FAILURE
        }
    }
}
