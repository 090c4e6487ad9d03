//! greenup-sim: greenup on a simulated cluster (tests/simgrid/README.md).
//!
//! `platform` writes the SimGrid platform of a greenup site config's nodes. `run` runs
//! one job of an SMPI program on it: each node asks greenupd for its settings through
//! the protocol (`start_node`, as each node's prolog does; the first decides the job), the decision's frequencies become the hosts'
//! pstates, SimGrid measures, and each node's time and energy go back to greenupd as
//! its outcome (meter source `simgrid`), so greenupd stores and learns from it as from a
//! Slurm job. Without `--connect`, it runs at fixed frequencies and tells nobody.

mod physics;
mod platform;
mod smpi;
mod steps;
mod trace;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use greenup::comm::NodeComm;
use greenup::plan::{Algorithm, Estimate};
use greenup::record::{JobEnd, NodeOutcome, Source};
use greenup::site::Site;
use greenup_core::quantity::{Ghz, Joules, Seconds, Watts};
use greenup_proto::client::{Client, Endpoint};
use greenup_proto::protocol::OpenJob;
use serde::Serialize;

use physics::Physics;
use platform::Links;

#[derive(Parser)]
#[command(
    name = "greenup-sim",
    about = "greenup on a SimGrid/SMPI simulated cluster"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args)]
struct PlatformArgs {
    /// The greenup site config whose node types and nodes make the platform.
    #[arg(long)]
    site: PathBuf,
    /// A node type's speed at its highest frequency, in GFLOPS (TYPE=GFLOPS; repeat).
    #[arg(long = "speed", value_parser = type_value, required = true)]
    speed: Vec<(String, f64)>,
    /// The job's nodes, a Slurm hostlist (`n[1-8]`); one rank on each.
    #[arg(long)]
    nodes: String,
    /// Each host link's bandwidth (SimGrid notation).
    #[arg(long, default_value = "1Gbps")]
    bandwidth: String,
    /// Each host link's latency (SimGrid notation).
    #[arg(long, default_value = "50us")]
    latency: String,
    /// Published measurements of real CPUs (tests/physics/cpus.yaml) that the hosts obey
    /// instead of the site config's power model, which greenup decides with.
    #[arg(long, value_name = "FILE", requires = "cpu")]
    physics: Option<PathBuf>,
    /// Under --physics, a node type's CPU in that file (TYPE=NAME; repeat).
    #[arg(long = "cpu", value_parser = type_name, requires = "physics")]
    cpu: Vec<(String, String)>,
    /// Under --physics, which of the source's figures the hosts draw: the CPU packages
    /// (RAPL) or the whole node at the wall.
    #[arg(long, value_enum, default_value_t = physics::Scope::Package, requires = "physics")]
    scope: physics::Scope,
    /// Under --physics, the program's share of time at f_max that scales with 1/f
    /// (tests/physics/programs.yaml); 1 is a compute-bound program.
    #[arg(long, default_value_t = 1.0, requires = "physics")]
    beta: f64,
    /// Under --physics, how a rank waits in MPI: polling (MPI's default) or blocking.
    #[arg(long, value_enum, default_value_t = physics::Wait::Polling, requires = "physics")]
    wait: physics::Wait,
    /// Under --physics, hosts of one CPU draw its figures times the file's node_spread
    /// factors (host nK the ((K - 1) mod len)th): chips that differ, as real ones do.
    #[arg(long, requires = "physics")]
    node_spread: bool,
}

// Parsed once per process: the size of the larger variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Print the SimGrid platform XML of the site's nodes, every host at f_max.
    Platform(PlatformArgs),
    /// Run one job of an SMPI program, decided by greenupd (--connect) or at fixed frequencies.
    Run {
        #[command(flatten)]
        platform: PlatformArgs,
        /// greenupd's TCP address (`127.0.0.1:PORT`, MUNGE-authenticated) or `unix:PATH`.
        #[arg(long)]
        connect: Option<String>,
        /// The job id under which greenupd stores the run.
        #[arg(long, requires = "connect")]
        job_id: Option<u64>,
        /// The job's policy (greenupd's default when absent).
        #[arg(long, requires = "connect")]
        policy: Option<String>,
        /// The job's application profile.
        #[arg(long, requires = "connect")]
        profile: Option<String>,
        /// The optimizer: exact, paper or brute.
        #[arg(long, requires = "connect", value_parser = algorithm)]
        algorithm: Option<Algorithm>,
        /// The user's energy cap, joules.
        #[arg(long, requires = "connect")]
        energy_cap_j: Option<f64>,
        /// The user's power cap, watts.
        #[arg(long, requires = "connect")]
        power_cap_w: Option<f64>,
        /// The fewest nodes the job accepts (`-N MIN-MAX`): greenupd may then choose a
        /// count below the nodes given, and the run uses the nodes it chose.
        #[arg(long, requires = "connect")]
        min_nodes: Option<usize>,
        /// Without --connect: a node type's frequency in GHz (TYPE=GHZ; others at f_max).
        #[arg(long = "freq", value_parser = type_value, conflicts_with = "connect")]
        freq: Vec<(String, f64)>,
        /// `smpi/host-speed`: flops SMPI credits to one second of this machine's CPU.
        #[arg(long, default_value = "1Gf")]
        host_speed: String,
        /// Where the platform, host file and SimGrid's log go.
        #[arg(long)]
        work: PathBuf,
        /// Record a time-independent trace of the program's run in FILE (for --replay).
        #[arg(long, value_name = "FILE", conflicts_with = "replay")]
        record_trace: Option<PathBuf>,
        /// Replay the time-independent trace FILE instead of running a program: identical
        /// flops and messages every run, so only the decision changes the outcome.
        #[arg(long, value_name = "FILE")]
        replay: Option<PathBuf>,
        /// Replay, for whatever count of nodes the decision uses, DIR/COUNT.trace (one
        /// time-independent trace per node count, as `--record-trace` wrote them).
        #[arg(long, value_name = "DIR", conflicts_with_all = ["replay", "record_trace"])]
        replay_dir: Option<PathBuf>,
        /// SimGrid's trace replay program.
        #[arg(
            long,
            default_value = "/usr/lib/x86_64-linux-gnu/simgrid/smpireplaymain"
        )]
        replay_main: PathBuf,
        /// The SMPI program and its arguments (not with --replay).
        #[arg(
            last = true,
            required_unless_present_any = ["replay", "replay_dir"],
            conflicts_with = "replay"
        )]
        program: Vec<String>,
    },
}

fn type_value(s: &str) -> Result<(String, f64), String> {
    let (t, v) = s
        .split_once('=')
        .ok_or_else(|| format!("'{s}': expected TYPE=NUMBER"))?;
    let v: f64 = v
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("'{s}': expected a positive number after '='"))?;
    Ok((t.to_string(), v))
}

fn type_name(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((t, n)) if !t.is_empty() && !n.is_empty() => Ok((t.to_string(), n.to_string())),
        _ => Err(format!("'{s}': expected TYPE=NAME")),
    }
}

fn algorithm(s: &str) -> Result<Algorithm, String> {
    match s {
        "exact" => Ok(Algorithm::Exact),
        "paper" => Ok(Algorithm::Paper),
        "brute" => Ok(Algorithm::Brute),
        _ => Err(format!("'{s}': expected exact, paper or brute")),
    }
}

/// What `run` prints: one JSON line.
#[derive(Serialize)]
struct Report {
    job_id: Option<u64>,
    policy: Option<String>,
    verdict: Option<String>,
    reason: Option<String>,
    predicted: Option<Estimate>,
    /// How many of the job's nodes ran it (fewer than given where the plan shrank it).
    node_count: usize,
    measured: smpi::RunResult,
}

/// The site, the job's nodes, each type's GFLOPS, the links and the hosts' physics.
type Loaded = (
    Site,
    Vec<String>,
    BTreeMap<String, f64>,
    Links,
    Option<Physics>,
);

fn load(p: &PlatformArgs) -> Result<Loaded, String> {
    let site = greenup::site::load(&p.site).map_err(|e| e.to_string())?;
    let nodes = greenup::hostlist::expand(&p.nodes).map_err(|e| format!("--nodes: {e}"))?;
    let gflops: BTreeMap<String, f64> = p.speed.iter().cloned().collect();
    let links = Links {
        bandwidth: p.bandwidth.clone(),
        latency: p.latency.clone(),
    };
    for (t, _) in &p.cpu {
        if !site.node_types.contains_key(t) {
            return Err(format!("--cpu: no node type {t} in {}", p.site.display()));
        }
    }
    let physics = p
        .physics
        .as_ref()
        .map(|f| Physics::load(f, &p.cpu, p.scope, p.beta, p.wait))
        .transpose()
        .map_err(|e| e.to_string())?
        .map(|mut ph| {
            if !p.node_spread {
                ph.node_factors.clear();
            }
            ph
        });
    Ok((site, nodes, gflops, links, physics))
}

fn main() -> ExitCode {
    match real_main(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("greenup-sim: {e}");
            ExitCode::from(2)
        }
    }
}

fn real_main(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Platform(p) => {
            let (site, nodes, gflops, links, physics) = load(&p)?;
            let hosts = platform::hosts(&site, &nodes, physics.as_ref(), |_, _| None)
                .map_err(|e| e.to_string())?;
            let xml = platform::xml(&hosts, &gflops, &links).map_err(|e| e.to_string())?;
            print!("{xml}");
            Ok(())
        }
        Cmd::Run {
            platform: p,
            connect,
            job_id,
            policy,
            profile,
            algorithm,
            energy_cap_j,
            power_cap_w,
            min_nodes,
            freq,
            host_speed,
            work,
            record_trace,
            replay,
            replay_dir,
            replay_main,
            program,
        } => {
            let (site, nodes, gflops, links, physics) = load(&p)?;
            let runs = Runs {
                replay,
                replay_dir,
                replay_main,
                program,
                record_trace,
            };
            let mut spec = smpi::RunSpec {
                program: runs.program(nodes.len())?,
                gflops,
                links,
                host_speed,
                work_dir: work,
            };
            let Some(addr) = connect else {
                let freq: BTreeMap<String, f64> = freq.into_iter().collect();
                for t in freq.keys() {
                    if !site.node_types.contains_key(t) {
                        return Err(format!("--freq: no node type {t} in {}", p.site.display()));
                    }
                }
                let hosts = platform::hosts(&site, &nodes, physics.as_ref(), |_, t| {
                    freq.get(&t.name).copied()
                })
                .map_err(|e| e.to_string())?;
                runs.record_first(&mut spec, &hosts)?;
                let measured = smpi::run(&spec, &hosts).map_err(|e| e.to_string())?;
                warn_probe_waits(&measured);
                return print(&Report {
                    job_id: None,
                    policy: None,
                    verdict: None,
                    reason: None,
                    predicted: None,
                    node_count: nodes.len(),
                    measured,
                });
            };
            let job_id = job_id.ok_or("--job-id is needed with --connect")?;
            let endpoint = Endpoint::parse(&addr);
            let connect =
                || Client::connect(&endpoint, Duration::from_secs(30)).map_err(|e| e.to_string());
            let mut client = connect()?;
            // Every node asks for its own settings, as each node's prolog does: the
            // first request decides the job, the others are answered from it.
            let job = OpenJob {
                restart_count: None,
                job_id,
                uid: 0,
                user: None,
                partition: None,
                account: None,
                nodes: Vec::new(),
                nodelist: Some(p.nodes.clone()),
                min_nodes,
                time_limit: greenup::record::TimeLimit::Seconds(86_400.0),
                policy: policy.clone(),
                profile,
                energy_cap_j: energy_cap_j.map(Joules),
                power_cap_w: power_cap_w.map(Watts),
                algorithm,
                granted_w: None,
            };
            let mut settings = Vec::with_capacity(nodes.len());
            for n in &nodes {
                settings.push(
                    client
                        .start_node(n, job.clone())
                        .map_err(|e| format!("start_node {n}: {e}"))?,
                );
            }
            // A plan that uses fewer nodes shrinks the job, as the first node's step does
            // on Slurm; the nodes it leaves out are released at once.
            let used: Vec<String> = settings
                .iter()
                .filter(|s| s.used)
                .map(|s| s.node.clone())
                .collect();
            if used.len() < nodes.len() {
                if runs.replay_dir.is_none() {
                    return Err(format!(
                        "the plan uses {} of the {} nodes (the job would shrink); give --replay-dir with a trace for each count, or a program to record one",
                        used.len(),
                        nodes.len()
                    ));
                }
                spec.program = runs.program(used.len())?;
            }
            // A node applies its frequency only under `planned` and `budget_limited`
            // (`freq_ghz` is then set); otherwise it stays at f_max, as the plugin does.
            let planned: BTreeMap<&str, f64> = settings
                .iter()
                .filter_map(|s| s.freq_ghz.map(|f| (s.node.as_str(), f.0)))
                .collect();
            let hosts = platform::hosts(&site, &used, physics.as_ref(), |n, _| {
                planned.get(n).copied()
            })
            .map_err(|e| e.to_string())?;
            runs.record_first(&mut spec, &hosts)?;
            let run = smpi::run(&spec, &hosts);
            // greenupd closes a connection idle for 10 s, and a large run lasts longer:
            // the job's end goes over a new one, as the first node's epilog opens its own.
            let mut client = connect()?;
            let end = match &run {
                Ok(r) => {
                    warn_probe_waits(r);
                    for h in &r.hosts {
                        client
                            .record_outcome(NodeOutcome {
                                restart_count: None,
                                job_id,
                                node: h.node.clone(),
                                freq_ghz: Some(Ghz(h.freq_ghz)),
                                energy_j: Some(Joules(h.energy_j)),
                                elapsed_s: Some(Seconds(r.time_s)),
                                source: Some(Source::Simgrid),
                                restored: true,
                                note: None,
                                comm: h.compute_s.map(|c| NodeComm {
                                    ranks: 1,
                                    incomplete: 0,
                                    compute_s: Seconds(c),
                                    comm_s: Seconds((r.time_s - c).max(0.0)),
                                    bytes: h.traffic.bytes,
                                    calls: h.traffic.calls,
                                    low_s: Seconds(0.0),
                                    transitions: 0,
                                    errors: 0,
                                    saved_j: None,
                                    cpus: Some(1),
                                    steps: h.steps.clone(),
                                    ..NodeComm::default()
                                }),
                                gpu: None,
                                power: None,
                            })
                            .map_err(|e| e.to_string())?;
                    }
                    for n in nodes.iter().filter(|n| !used.contains(n)) {
                        client
                            .record_outcome(released(job_id, n, used.len(), nodes.len()))
                            .map_err(|e| e.to_string())?;
                    }
                    JobEnd::Completed
                }
                Err(_) => JobEnd::Failed,
            };
            let stored = client.count_outcomes(job_id).map_err(|e| e.to_string())?;
            client
                .close_job(job_id, Some(end), None)
                .map_err(|e| e.to_string())?;
            let measured = run.map_err(|e| e.to_string())?;
            if stored != nodes.len() as u64 {
                return Err(format!(
                    "greenupd holds {stored} outcomes of job {job_id}, not {}",
                    nodes.len()
                ));
            }
            let first = &settings[0];
            print(&Report {
                job_id: Some(job_id),
                policy,
                verdict: Some(first.verdict.as_str().to_string()),
                reason: Some(first.reason.clone()).filter(|r| !r.is_empty()),
                predicted: first.predicted.filter(|_| first.verdict.applies_plan()),
                node_count: used.len(),
                measured,
            })
        }
    }
}

/// What a run replays or runs, chosen once the count of nodes it uses is known.
struct Runs {
    replay: Option<PathBuf>,
    replay_dir: Option<PathBuf>,
    replay_main: PathBuf,
    program: Vec<String>,
    record_trace: Option<PathBuf>,
}

impl Runs {
    /// The program's arguments for `count` ranks: `{nodes}` stands for the count.
    fn live(&self, count: usize, record: Option<PathBuf>) -> Option<smpi::Program> {
        let (path, args) = self.program.split_first()?;
        Some(smpi::Program::Live {
            path: PathBuf::from(path),
            args: args
                .iter()
                .map(|a| a.replace("{nodes}", &count.to_string()))
                .collect(),
            record,
        })
    }

    /// What runs on `count` nodes: the trace given, that count's trace in the replay
    /// directory (recorded first by [`Runs::record_first`] when it is missing and a
    /// program is given), or the program live.
    fn program(&self, count: usize) -> Result<smpi::Program, String> {
        let replay = |trace| smpi::Program::Replay {
            trace,
            main: self.replay_main.clone(),
        };
        if let Some(t) = &self.replay {
            return Ok(replay(t.clone()));
        }
        if let Some(dir) = &self.replay_dir {
            let t = dir.join(format!("{count}.trace"));
            if !t.is_file() && self.program.is_empty() {
                return Err(format!(
                    "--replay-dir: no trace {} for {count} nodes, and no program after -- to record it",
                    t.display()
                ));
            }
            return Ok(replay(t));
        }
        self.live(count, self.record_trace.clone())
            .ok_or_else(|| "give a program after --, or --replay FILE".into())
    }

    /// Where `spec` replays a count's trace that is not recorded yet, record it first:
    /// the program live on `hosts`, every one at f_max, told to nobody.
    fn record_first(
        &self,
        spec: &mut smpi::RunSpec,
        hosts: &[platform::Host<'_>],
    ) -> Result<(), String> {
        let smpi::Program::Replay { trace, .. } = &spec.program else {
            return Ok(());
        };
        let trace = trace.clone();
        if self.replay_dir.is_none() || trace.is_file() {
            return Ok(());
        }
        let Some(live) = self.live(hosts.len(), Some(trace.clone())) else {
            return Ok(());
        };
        let at_fmax: Vec<platform::Host<'_>> = hosts
            .iter()
            .map(|h| platform::Host {
                pstate: 0,
                ..h.clone()
            })
            .collect();
        let replay = std::mem::replace(&mut spec.program, live);
        let recorded = smpi::run(spec, &at_fmax);
        spec.program = replay;
        recorded
            .map(|_| ())
            .map_err(|e| format!("recording {}: {e}", trace.display()))
    }
}

/// The outcome of a node the plan left out: released when the job started, it ran
/// nothing and the job's energy holds none of its draw.
fn released(job_id: u64, node: &str, used: usize, given: usize) -> NodeOutcome {
    NodeOutcome {
        restart_count: None,
        job_id,
        node: node.to_string(),
        freq_ghz: None,
        energy_j: Some(Joules(0.0)),
        elapsed_s: Some(Seconds(0.0)),
        source: Some(Source::Simgrid),
        restored: true,
        note: Some(format!("released: the plan uses {used} of {given} nodes")),
        comm: None,
        gpu: None,
        power: None,
    }
}

/// Share of a rank's traced flops in SMPI's probe waits above which a live run is
/// warned about: HPL's polling, before its build slept between probes, was 51-75 %.
const PROBE_SHARE_WARN: f64 = 0.05;

/// One line on stderr when a live run's trace holds a rank's waiting in failed
/// `MPI_Iprobe` calls as computation, naming the rank that holds the most.
fn warn_probe_waits(r: &smpi::RunResult) {
    let worst = r
        .hosts
        .iter()
        .enumerate()
        .filter_map(|(i, h)| Some((i, h, h.probe_share?, h.probe_wait_s?)))
        .max_by(|a, b| a.2.total_cmp(&b.2));
    if let Some((rank, h, share, secs)) = worst.filter(|w| w.2 >= PROBE_SHARE_WARN) {
        eprintln!(
            "greenup-sim: warning: rank {rank} (node {}) waited {secs:.3} s in failed MPI_Iprobe calls, which SMPI's trace holds as {:.0} % of the rank's computation: a replay computes that waiting again as work at the replayed clock, and the run's compute split counts it (tests/simgrid/README.md, \"A trace must not hold waiting as work\")",
            h.node,
            share * 100.0
        );
    }
}

fn print(r: &Report) -> Result<(), String> {
    println!(
        "{}",
        serde_json::to_string(r).map_err(|e| format!("report: {e}"))?
    );
    Ok(())
}
