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

use std::io::Write;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use greenup::daemon::client::{Client, Endpoint};
use greenup::daemon::protocol::{NodeOutcome, OpenJob};

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
            job_id,
            uid,
            user: None,
            partition: args.partition.clone(),
            nodes: nodes.clone(),
            nodelist: None,
            min_nodes: None,
            time_limit_s: Some(3600.0),
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
            comm: None,
            job_id,
            node: name.clone(),
            freq_ghz: Some(2.0),
            energy_j: Some(1000.0 + (i % 97) as f64),
            elapsed_s: Some(60.0),
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
        c.close_job(job_id, Some(greenup::record::JobEnd::Completed))
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
