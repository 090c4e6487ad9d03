//! The start and end of one job of N nodes, as greenupd sees them: N node prologs at
//! once, each on its own TCP connection with its own MUNGE credential, sending what
//! the plugin's prolog sends (built by the plugin's own code from the variables slurmd
//! gives a prolog); then N epilogs' ends at once, as the plugin sends them: where
//! greenupd's settings say `ends_in_one`, each node's `end_node`, the first node's with
//! the claimed close (taken once every node has reported, else the first node waits and
//! closes); otherwise each node's `record_outcome` and the first node's close after it
//! waited for the others' outcomes.
//!
//! Every credential is made before its burst, so the burst measures greenupd (and
//! munged decoding). A prolog that has no reply within `--timeout-ms` of the burst's
//! start hangs up, as the plugin does, and counts as not answered. Loopback only; at
//! most 50,000 nodes.
//!
//! `cargo run --release -p spank_greenup --example herd -- --connect 127.0.0.1:7470 --nodes 10000 --greenupd-pid PID`
//!
//! `--old` sends the full-list `open_job` of earlier plugins instead, and its closer
//! reads the whole job to count outcomes, as they did. `--controller SITE_CONFIG` first
//! decides the job as slurm.conf's PrologSlurmctld does (greenup-prolog-slurmctld's code),
//! so the node prologs find it decided.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use greenup_platform::dvfs::job::NodeOutcome as NodeRun;
use greenup_platform::meter::Energy;
use greenup_proto::client::{Client, Endpoint};
use greenup_proto::munge::Munge;
use greenup_proto::protocol::{NodeOutcome, Reply, ReplyLine, Request, request_body, request_line};
use spank_greenup::node::{self, JobEnv};
use spank_greenup::{epilog, prolog};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Play one job's node prologs and epilogs against greenupd.
#[derive(Debug, Parser)]
struct Args {
    /// greenupd's TCP address (loopback only).
    #[arg(long)]
    connect: String,
    /// Nodes in the job (n1..nN, one prolog and one epilog each).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=50_000))]
    nodes: u32,
    /// The job's id.
    #[arg(long, default_value_t = 7_000_000)]
    job_id: u32,
    /// The job owner's uid.
    #[arg(long, default_value_t = 1000)]
    uid: u32,
    /// The plugin's timeout (the site's `daemon.timeout_ms`).
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
    /// --energy-policy.
    #[arg(long, default_value = "min-energy")]
    policy: String,
    /// --energy-profile.
    #[arg(long)]
    profile: Option<String>,
    /// The job's partition.
    #[arg(long)]
    partition: Option<String>,
    /// greenupd's pid, for its CPU time and peak RSS.
    #[arg(long)]
    greenupd_pid: Option<u32>,
    /// munged's pid, for its CPU time (default: /run/munge/munged.pid).
    #[arg(long)]
    munged_pid: Option<u32>,
    /// Send the full-list open_job of earlier plugins.
    #[arg(long)]
    old: bool,
    /// Decide the job first as slurm.conf's PrologSlurmctld does (greenup-prolog-slurmctld's
    /// own code, with this site config), then play the node prologs.
    #[arg(long, value_name = "SITE_CONFIG", conflicts_with = "old")]
    controller: Option<std::path::PathBuf>,
    /// End with record_outcome and a separate close, as a plugin does under a greenupd
    /// that does not say `ends_in_one`, even where this one does.
    #[arg(long)]
    outcomes_apart: bool,
}

/// The kernel's count of connections dropped because a listen queue was full
/// (TcpExt ListenOverflows plus ListenDrops), for this network namespace.
fn listen_drops() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/netstat").ok()?;
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next()?, lines.next()?);
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .filter(|(k, _)| matches!(*k, "ListenOverflows" | "ListenDrops"))
        .map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

/// User plus system CPU seconds of `pid`, from /proc.
fn cpu_s(pid: Option<u32>) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz)
}

/// Peak resident memory of `pid` in MiB (VmHWM).
fn peak_rss_mib(pid: Option<u32>) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// What one request got.
enum Got {
    /// A reply within the timeout, after this long.
    Reply(Box<ReplyLine>, Duration),
    /// No reply within the timeout (or the connection failed): why.
    Failed(String),
}

/// Send `line` on a connection of its own and wait for one reply line until `deadline`.
async fn one(addr: SocketAddr, line: Arc<Vec<u8>>, t0: Instant, deadline: Instant) -> Got {
    // How far the request got, for the failures' count.
    let connected = std::sync::atomic::AtomicBool::new(false);
    let work = async {
        let mut s = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        connected.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = s.set_nodelay(true);
        s.write_all(&line)
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut r = BufReader::new(s);
        let mut buf = Vec::with_capacity(512);
        r.read_until(b'\n', &mut buf)
            .await
            .map_err(|e| format!("read: {e}"))?;
        serde_json::from_slice::<ReplyLine>(&buf).map_err(|e| format!("reply: {e}"))
    };
    match tokio::time::timeout_at(deadline.into(), work).await {
        Ok(Ok(reply)) => Got::Reply(Box::new(reply), t0.elapsed()),
        Ok(Err(e)) => Got::Failed(e),
        Err(_) if connected.load(std::sync::atomic::Ordering::Relaxed) => {
            Got::Failed("timeout waiting for the reply".into())
        }
        Err(_) => Got::Failed("timeout connecting".into()),
    }
}

/// Each of `lines` on its own connection, all at once; what each got, in order.
async fn burst(addr: SocketAddr, lines: Vec<Vec<u8>>, timeout: Duration) -> (Vec<Got>, Duration) {
    let t0 = Instant::now();
    let deadline = t0 + timeout;
    let tasks: Vec<_> = lines
        .into_iter()
        .map(|l| tokio::spawn(one(addr, Arc::new(l), t0, deadline)))
        .collect();
    let mut got = Vec::with_capacity(tasks.len());
    for t in tasks {
        got.push(
            t.await
                .unwrap_or_else(|e| Got::Failed(format!("task: {e}"))),
        );
    }
    (got, t0.elapsed())
}

/// A request line with a fresh credential over its body.
fn credentialed(munge: &Munge, req: &Request) -> Result<Vec<u8>, String> {
    let body = request_body(req).map_err(|e| e.to_string())?;
    let cred = munge.encode(body.as_bytes()).map_err(|e| e.to_string())?;
    request_line(&body, Some(&cred)).map_err(|e| e.to_string())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Latency percentiles and failures of one burst; `check` says whether a reply is right
/// for request `i` (`Err`: what is wrong).
fn summarize(
    name: &str,
    got: &[Got],
    timeout: Duration,
    check: impl Fn(usize, &ReplyLine) -> Result<(), String>,
) -> usize {
    let mut lat: Vec<Duration> = Vec::new();
    let mut failures: BTreeMap<String, usize> = BTreeMap::new();
    for (i, g) in got.iter().enumerate() {
        match g {
            // A reply the herd read late (its own CPU is shared) is late all the same.
            Got::Reply(_, d) if *d > timeout => {
                *failures
                    .entry("reply after the timeout".into())
                    .or_default() += 1
            }
            Got::Reply(r, d) => match check(i, r) {
                Ok(()) => lat.push(*d),
                Err(e) => *failures.entry(e).or_default() += 1,
            },
            Got::Failed(e) => *failures.entry(e.clone()).or_default() += 1,
        }
    }
    lat.sort();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p).ceil() as usize).saturating_sub(1))
            .map_or(f64::NAN, |d| ms(*d))
    };
    println!(
        "{name}: {} of {} answered in time; latency p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        lat.len(),
        got.len(),
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
    for (why, n) in &failures {
        println!("  {n} x {why}");
    }
    lat.len()
}

/// What the reply line says, for failure counts.
fn reply_kind(r: &ReplyLine) -> String {
    match (&r.reply, &r.error) {
        (_, Some(e)) => format!("error {}", e.to_string().split(':').next().unwrap_or("")),
        (Some(Reply::NodeSettings(_)), _) => "node_settings".into(),
        (Some(Reply::Decision(_)), _) => "decision".into(),
        (Some(Reply::Stored { .. }), _) => "stored".into(),
        _ => "another reply".into(),
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::from(1),
        Err(e) => {
            eprintln!("herd: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<bool, String> {
    let addr = args
        .connect
        .to_socket_addrs()
        .map_err(|e| format!("--connect {}: {e}", args.connect))?
        .next()
        .ok_or("--connect resolves to nothing")?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "--connect {addr}: the herd only talks to this host (loopback)"
        ));
    }
    let munged = args.munged_pid.or_else(|| {
        std::fs::read_to_string("/run/munge/munged.pid")
            .ok()
            .and_then(|p| p.trim().parse().ok())
    });
    let munge = Munge::load().map_err(|e| e.to_string())?;
    let n = args.nodes as usize;
    let timeout = Duration::from_millis(args.timeout_ms);

    // The job as slurmd describes it to the first node's prolog; every node gets the
    // same variables but its own SLURMD_NODENAME.
    let nodelist = format!("n[1-{n}]");
    let id = args.job_id.to_string();
    let uid = args.uid.to_string();
    let mut vars: BTreeMap<&str, String> = BTreeMap::new();
    vars.insert("SLURM_JOB_ID", id);
    vars.insert("SLURM_JOB_UID", uid);
    vars.insert("SLURM_JOB_USER", "herd".into());
    vars.insert("SLURMD_NODENAME", "n1".into());
    vars.insert("SLURM_JOB_NODELIST", nodelist);
    vars.insert("SPANK_GREENUP_POLICY", args.policy.clone());
    if let Some(p) = &args.profile {
        vars.insert("SPANK_GREENUP_PROFILE", p.clone());
    }
    if let Some(p) = &args.partition {
        vars.insert("SLURM_JOB_PARTITION", p.clone());
    }
    let job = JobEnv::from_vars(|k| vars.get(k).cloned()).map_err(|e| e.to_string())?;
    if let Some(config) = &args.controller {
        // slurmctld's PrologSlurmctld: the same job, no node of its own.
        let mut ctl = vars.clone();
        ctl.remove("SLURMD_NODENAME");
        let site =
            spank_greenup::args::Args::parse([format!("config={}", config.display()).as_str()])
                .map_err(|e| e.to_string())?;
        let said = std::sync::Mutex::new(Vec::new());
        let log = |_: node::Level, m: &str| {
            said.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(m.to_string())
        };
        let g0 = cpu_s(args.greenupd_pid);
        let t0 = Instant::now();
        let run = spank_greenup::controller::prolog_slurmctld(
            &site,
            |k| ctl.get(k).cloned(),
            spank_greenup::SLURM_PLUGIN_VERSION,
            &log,
        );
        let took = t0.elapsed();
        let g1 = cpu_s(args.greenupd_pid);
        let said = said.into_inner().unwrap_or_default().join("; ");
        let cpu = match (g0, g1) {
            (Some(a), Some(b)) => format!("{:.0} ms", (b - a) * 1e3),
            _ => "unknown".into(),
        };
        println!(
            "controller (PrologSlurmctld): {:.0} ms, greenupd CPU {cpu}: {said}",
            ms(took)
        );
        if !run || !said.contains("decided before") {
            return Err("the controller did not decide the job".into());
        }
    }
    // Only the site's power settings shape the request (the grant from its licenses):
    // the controller's site config's, else the defaults.
    let power = match &args.controller {
        Some(config) => {
            greenup::site::load(config)
                .map_err(|e| e.to_string())?
                .power
        }
        None => greenup::site::PowerSettings::default(),
    };
    let first = prolog::start_request(&job, args.policy.clone(), &power);
    let Request::StartNode { job: facts, .. } = first else {
        return Err("the plugin's prolog no longer sends start_node".into());
    };
    let names: Vec<String> = (1..=n).map(|i| format!("n{i}")).collect();

    let made = Instant::now();
    let mut lines = Vec::with_capacity(n);
    for name in &names {
        let req = if args.old {
            let mut old = facts.clone();
            old.nodelist = None;
            old.nodes = job.nodes.clone();
            Request::OpenJob(old)
        } else {
            // What node `name`'s prolog sends: the same job, its own name.
            Request::StartNode {
                node: name.clone(),
                job: facts.clone(),
            }
        };
        lines.push(credentialed(&munge, &req)?);
    }
    let bytes = lines.iter().map(Vec::len).sum::<usize>() / n.max(1);
    println!(
        "job {} of {n} nodes ({} path): {bytes} bytes per request line; {n} credentials made in {:.0} ms",
        args.job_id,
        if args.old {
            "old open_job"
        } else if args.controller.is_some() {
            "start_node, decided by PrologSlurmctld"
        } else {
            "start_node"
        },
        ms(made.elapsed())
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;

    let me = Some(std::process::id());
    let (g0, m0, d0, h0) = (
        cpu_s(args.greenupd_pid),
        cpu_s(munged),
        listen_drops(),
        cpu_s(me),
    );
    let (got, wall) = rt.block_on(burst(addr, lines, timeout));
    let (g1, m1, d1, h1) = (
        cpu_s(args.greenupd_pid),
        cpu_s(munged),
        listen_drops(),
        cpu_s(me),
    );
    let reply_bytes = got
        .iter()
        .filter_map(|g| match g {
            Got::Reply(r, _) => Some(r.to_line().len()),
            Got::Failed(_) => None,
        })
        .max()
        .unwrap_or(0);
    let started = summarize("prologs", &got, timeout, |i, r| {
        match (&r.reply, args.old) {
            (Some(Reply::NodeSettings(s)), false) if s.node == names[i] => Ok(()),
            (Some(Reply::Decision(d)), true) if d.job_id == u64::from(args.job_id) => Ok(()),
            _ => Err(reply_kind(r)),
        }
    });
    println!(
        "  burst {:.0} ms; largest reply line {reply_bytes} bytes",
        ms(wall)
    );
    let per_node = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!(
            "{:.0} ms ({:.0} us per node)",
            (b - a) * 1e3,
            (b - a) * 1e6 / n as f64
        ),
        _ => "unknown".into(),
    };
    println!("  greenupd CPU {}", per_node(g0, g1));
    println!("  munged CPU {}", per_node(m0, m1));
    // The herd plays every node on these same cores; a cluster's nodes bring their own.
    println!("  the herd's own CPU {}", per_node(h0, h1));
    let somaxconn = std::fs::read_to_string("/proc/sys/net/core/somaxconn").unwrap_or_default();
    if let (Some(a), Some(b)) = (d0, d1) {
        println!(
            "  kernel: {} connections dropped at a full listen queue (net.core.somaxconn {})",
            b.saturating_sub(a),
            somaxconn.trim()
        );
    }

    // What n1's settings say greenupd takes at a job's end (the plugin's epilog reads the
    // same two fields from the settings it saved).
    let told = match got.first() {
        Some(Got::Reply(r, _)) if !args.old && !args.outcomes_apart => match &r.reply {
            Some(Reply::NodeSettings(s)) => Some((s.ends_in_one, s.asks_slurm_end)),
            _ => None,
        },
        _ => None,
    };
    let (in_one, settled) = told.unwrap_or((false, false));
    // The ends: every node's at once; the first node's close after it waited (at most a
    // second, as the plugin does) for the others' outcomes, or with its own end_node.
    let mut lines = Vec::with_capacity(n);
    let mut first = None;
    for name in &names {
        let run = NodeRun {
            job_id: args.job_id,
            node: name.clone(),
            elapsed_s: 60.0,
            energy: Energy::Measured { joules: 12_000.0 },
            applied_khz: Some(2_000_000),
            ran_khz: Some(2_000_000),
            note: "applied".into(),
            restore_error: None,
            power: None,
        };
        let o: NodeOutcome = epilog::wire_outcome(&job, &run, None);
        let req = match (in_one, first.is_none()) {
            // The first node's end_node goes with its closer, below.
            (true, true) => {
                first = Some(o);
                continue;
            }
            (true, false) => Request::EndNode {
                job_id: u64::from(args.job_id),
                outcomes: vec![o],
                close: None,
                restart_count: None,
            },
            (false, _) => Request::RecordOutcome(o),
        };
        lines.push(credentialed(&munge, &req)?);
    }
    println!(
        "ends: {}",
        if in_one {
            "end_node from every node, the first with its close"
        } else {
            "record_outcome from every node, then the first node's close"
        }
    );
    let (g2, m2) = (cpu_s(args.greenupd_pid), cpu_s(munged));
    let closer_job = u64::from(args.job_id);
    let endpoint = Endpoint::parse(&args.connect);
    let old = args.old;
    let closer = std::thread::spawn(move || -> Result<Duration, String> {
        let t0 = Instant::now();
        let mut c = Client::connect(&endpoint, timeout).map_err(|e| e.to_string())?;
        if let Some(o) = first {
            let close = settled.then_some(greenup::record::JobEnd::Completed);
            let r = c
                .end_node(closer_job, vec![o], close, None)
                .map_err(|e| e.to_string())?;
            if r.closed {
                return Ok(t0.elapsed());
            }
            let known = settled.then_some((r.outcomes, Some(r.nodes)));
            epilog::wait_for_outcomes(&mut c, closer_job, n, known).map_err(|e| e.to_string())?;
        } else if old {
            // Earlier plugins read the whole job on every poll.
            let until = Instant::now() + Duration::from_secs(1);
            while Instant::now() < until {
                let rec = c.get_job(closer_job).map_err(|e| e.to_string())?;
                if rec.outcomes.len() >= n {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        } else {
            epilog::wait_for_outcomes(&mut c, closer_job, n, None).map_err(|e| e.to_string())?;
        }
        c.close_job(closer_job, Some(greenup::record::JobEnd::Completed), None)
            .map_err(|e| e.to_string())?;
        Ok(t0.elapsed())
    });
    let (got, wall) = rt.block_on(burst(addr, lines, timeout));
    let closed = closer.join().map_err(|_| "the closer panicked")?;
    let (g3, m3) = (cpu_s(args.greenupd_pid), cpu_s(munged));
    let ended = summarize("ends", &got, timeout, |_, r| match &r.reply {
        Some(Reply::Stored { .. } | Reply::NodeEnded { .. }) => Ok(()),
        _ => Err(reply_kind(r)),
    });
    println!("  burst {:.0} ms", ms(wall));
    match &closed {
        Ok(d) => println!("close: done {:.0} ms after the outcomes began", ms(*d)),
        Err(e) => println!("close: failed: {e}"),
    }
    println!("  greenupd CPU {}", per_node(g2, g3));
    println!("  munged CPU {}", per_node(m2, m3));
    if let Some(rss) = peak_rss_mib(args.greenupd_pid) {
        println!("greenupd peak RSS {rss:.0} MiB");
    }
    // The first node's end went with its closer, not in the burst.
    let sent = if in_one { n - 1 } else { n };
    Ok(started == n && ended == sent && closed.is_ok())
}
