//! One SMPI run: write the platform and host file, run `smpirun` with SimGrid's host
//! energy plugin, and read back the simulated time and each host's energy.
//!
//! Each host's busy time (its rank computing) is read from the same energy figure: the
//! plugin integrates `wait + load × (busy − wait)` watts, with load 1 while the rank
//! computes and 0 while it waits in MPI, so `busy_s = (E − wait × T) / (busy − wait)`.
//! That is the compute/communication split the learned profiles use, measured by the
//! simulator, not assumed. Each rank's MPI calls and bytes come from the run's
//! time-independent trace (`crate::trace`): a live run always records one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use crate::platform::{self, Host, Links, PlatformError};
use crate::steps;
use crate::trace::{self, TraceError, Traffic};

/// Why an SMPI run gave no measurement; each message names the file or program at fault.
#[derive(Debug, thiserror::Error)]
pub enum SmpiError {
    /// A file or directory of the run could not be made, written or found.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The platform could not be written.
    #[error(transparent)]
    Platform(#[from] PlatformError),
    /// The trace to replay does not exist.
    #[error("--replay: no trace at {trace}")]
    NoTrace {
        /// Where the trace was looked for.
        trace: PathBuf,
    },
    /// smpirun could not be started, usually because SimGrid is not installed.
    #[error("smpirun: {source} (install Debian's libsimgrid-dev)")]
    Start {
        /// What the system said.
        source: std::io::Error,
    },
    /// smpirun ran and failed; its log says why.
    #[error("smpirun {what} exited with {status}; its output is in {log}")]
    Failed {
        /// The program or trace it ran.
        what: String,
        /// How it exited.
        status: std::process::ExitStatus,
        /// Where its output was saved.
        log: PathBuf,
    },
    /// The run's trace could not be counted.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// SimGrid's log lacks what the run measured.
    #[error("{source}, in {log}")]
    Log {
        /// What is missing.
        source: LogError,
        /// Where the log was saved.
        log: PathBuf,
    },
}

/// What a SimGrid log lacks, so that the run's time or energy is unknown.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// SimGrid printed no simulated time (the run did not finish).
    #[error("no 'Simulated time' line in SimGrid's output")]
    NoTime,
    /// The energy plugin printed nothing for this host.
    #[error("no energy line for host {host}")]
    NoEnergy {
        /// The host.
        host: String,
    },
    /// A host's power fails at its frequency, so its busy time cannot be had.
    #[error(transparent)]
    Wattage(Box<PlatformError>),
}

/// `path: error`, for a file of the run.
fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> SmpiError + '_ {
    move |source| SmpiError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What SMPI runs.
#[derive(Debug, Clone)]
pub enum Program {
    /// A program built with `smpicc`, and its arguments; its computation is timed on
    /// this machine's CPU, so repeated runs differ by this machine's noise.
    Live {
        /// The program.
        path: PathBuf,
        /// Its arguments.
        args: Vec<String>,
        /// Record the run's time-independent trace here (`-trace-ti`) for a later replay;
        /// without it the trace goes to the work directory, to be counted.
        record: Option<PathBuf>,
    },
    /// Replay a recorded time-independent trace with SimGrid's `smpireplaymain`: the
    /// same flops and messages every time, so repeated runs are identical.
    Replay {
        /// The trace (the file `-trace-ti` wrote).
        trace: PathBuf,
        /// SimGrid's replay program.
        main: PathBuf,
    },
}

/// How to run a job under SMPI.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// What runs.
    pub program: Program,
    /// Each node type's speed at f_max, GFLOPS.
    pub gflops: BTreeMap<String, f64>,
    /// The network.
    pub links: Links,
    /// `smpi/host-speed`: the flop rate SMPI credits to a second of the real CPU.
    pub host_speed: String,
    /// Where the platform, host file and SimGrid's output go.
    pub work_dir: PathBuf,
}

/// What SimGrid measured on one host.
#[derive(Debug, Clone, Serialize)]
pub struct HostResult {
    /// The node.
    pub node: String,
    /// Its type.
    pub node_type: String,
    /// The frequency its pstate stands for, GHz.
    pub freq_ghz: f64,
    /// Joules, from the host energy plugin.
    pub energy_j: f64,
    /// Seconds its rank computed (see the module doc); `None` where busy and idle power
    /// are equal and cannot tell them apart.
    pub compute_s: Option<f64>,
    /// Its rank's MPI calls and bytes, counted from the trace.
    #[serde(flatten)]
    pub traffic: Traffic,
    /// In a live run, the seconds its rank waited in failed `MPI_Iprobe` calls that the
    /// trace holds as computation (`crate::trace`); `None` for a replay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_wait_s: Option<f64>,
    /// Those waits' share of the flops the trace holds for the rank, 0 to 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_share: Option<f64>,
    /// Its rank's compute seconds per window of wall time, played again from the trace
    /// (`crate::steps`); `None` where the trace could not be played.
    #[serde(skip)]
    pub steps: Option<greenup::comm::StepTimes>,
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// Simulated wall time, seconds.
    pub time_s: f64,
    /// Sum of the hosts' energy, joules.
    pub energy_j: f64,
    /// Per host, in the job's node order.
    pub hosts: Vec<HostResult>,
    /// The program's own verdict, when it printed one: NAS's `Verification = ...`, or
    /// HPL's residual check (`PASSED`, or `FAILED` if any problem failed).
    pub verification: Option<String>,
}

/// Run `spec` on `hosts`; an error is one line with the cause.
pub fn run(spec: &RunSpec, hosts: &[Host<'_>]) -> Result<RunResult, SmpiError> {
    std::fs::create_dir_all(&spec.work_dir).map_err(io_at(&spec.work_dir))?;
    let xml = platform::xml(hosts, &spec.gflops, &spec.links)?;
    let plat = spec.work_dir.join("platform.xml");
    write_atomic(&plat, &xml)?;
    let hostfile = spec.work_dir.join("hostfile");
    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    write_atomic(&hostfile, &(names.join("\n") + "\n"))?;
    let mut cmd = Command::new("smpirun");
    cmd.arg("-np")
        .arg(hosts.len().to_string())
        .arg("-platform")
        .arg(&plat)
        .arg("-hostfile")
        .arg(&hostfile);
    let (what, traced) = match &spec.program {
        Program::Live { path, args, record } => {
            let t = record
                .clone()
                .unwrap_or_else(|| spec.work_dir.join("run.trace"));
            let t = std::path::absolute(&t).map_err(io_at(&t))?;
            cmd.arg("-trace-ti")
                .arg(format!("--cfg=tracing/filename:{}", t.display()));
            cmd.arg(format!("--cfg=smpi/host-speed:{}", spec.host_speed));
            cmd.arg("--cfg=plugin:host_energy")
                .arg("--cfg=smpi/display-timing:yes")
                .arg("--log=xbt_cfg.thres:warning")
                .arg(path)
                .args(args);
            (path.display().to_string(), t)
        }
        Program::Replay { trace, main } => {
            let trace = std::path::absolute(trace).map_err(io_at(trace))?;
            if !trace.is_file() {
                return Err(SmpiError::NoTrace { trace });
            }
            cmd.arg("--cfg=plugin:host_energy")
                .arg("--cfg=smpi/display-timing:yes")
                .arg("--log=xbt_cfg.thres:warning")
                .arg("-replay")
                .arg(&trace)
                .arg(main);
            (format!("the replay of {}", trace.display()), trace)
        }
    };
    let out = cmd
        .current_dir(&spec.work_dir)
        .output()
        .map_err(|source| SmpiError::Start { source })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    write_atomic(&spec.work_dir.join("smpirun.log"), &text)?;
    if !out.status.success() {
        return Err(SmpiError::Failed {
            what,
            status: out.status,
            log: spec.work_dir.join("smpirun.log"),
        });
    }
    let mut result = parse(&text, hosts).map_err(|source| SmpiError::Log {
        source,
        log: spec.work_dir.join("smpirun.log"),
    })?;
    // One rank a host, in the host file's order: rank i ran on host i. Only a live run's
    // recording speeds are known, so only its probe waits are looked for.
    let steps: Vec<f64> = match &spec.program {
        Program::Live { .. } => hosts
            .iter()
            .map(|h| {
                let g = spec.gflops.get(&h.node_type.name).copied().unwrap_or(0.0);
                h.flops_per_s(g, h.freq_ghz()) * trace::SMPI_IPROBE_S
            })
            .collect(),
        Program::Replay { .. } => Vec::new(),
    };
    let speeds: Vec<f64> = hosts
        .iter()
        .map(|h| {
            let g = spec.gflops.get(&h.node_type.name).copied().unwrap_or(0.0);
            h.flops_per_s(g, h.freq_ghz())
        })
        .collect();
    let link = steps::bandwidth(&spec.links.bandwidth)
        .zip(steps::latency(&spec.links.latency))
        .map(|(bytes_per_s, latency_s)| steps::Link {
            bytes_per_s,
            latency_s,
        });
    // The windows only teach the step model; a trace they cannot be played from leaves
    // the run's other measurements as they are.
    let windows = match link.map(|l| steps::of_trace(&traced, &speeds, l)) {
        Some(Ok(w)) => w,
        Some(Err(e)) => {
            eprintln!("greenup-sim: warning: no compute windows for this run: {e}");
            Vec::new()
        }
        None => Vec::new(),
    };
    for (h, w) in result.hosts.iter_mut().zip(windows) {
        h.steps = Some(w);
    }
    let live = matches!(spec.program, Program::Live { .. });
    for (h, (t, w)) in result
        .hosts
        .iter_mut()
        .zip(trace::count_with_probes(&traced, &steps)?)
    {
        h.traffic = t;
        if live {
            h.probe_wait_s = Some(w.probe_s);
            h.probe_share = Some(w.share());
        }
    }
    Ok(result)
}

fn write_atomic(path: &Path, text: &str) -> Result<(), SmpiError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(io_at(path))
}

/// The number after `key` on a log line, up to the next space.
fn after(line: &str, key: &str) -> Option<f64> {
    let rest = &line[line.find(key)? + key.len()..];
    rest.split_whitespace().next()?.parse().ok()
}

/// Read SimGrid's log of a run on `hosts`.
pub fn parse(text: &str, hosts: &[Host<'_>]) -> Result<RunResult, LogError> {
    let mut time_s = None;
    let mut energy: BTreeMap<&str, f64> = BTreeMap::new();
    let mut verification = None;
    for line in text.lines() {
        if let Some(t) = after(line, "Simulated time: ") {
            time_s = Some(t);
        } else if let Some(i) = line.find("Energy consumption of host ") {
            let rest = &line[i + "Energy consumption of host ".len()..];
            if let Some((name, val)) = rest.split_once(": ")
                && let Some(j) = val.split_whitespace().next().and_then(|v| v.parse().ok())
                && let Some(h) = hosts.iter().find(|h| h.name == name)
            {
                energy.insert(h.name.as_str(), j);
            }
        } else if line.contains("Verification") && line.contains('=') {
            verification = line.split('=').nth(1).map(|v| v.trim().to_string());
        } else if line.starts_with("||Ax-b||")
            && let Some(v @ ("PASSED" | "FAILED")) = line.split_whitespace().last()
        {
            // HPL's residual check, one line per problem: a failed one is the verdict.
            if verification.as_deref() != Some("FAILED") {
                verification = Some(v.to_string());
            }
        }
    }
    let time_s = time_s.ok_or(LogError::NoTime)?;
    let mut out = Vec::new();
    for h in hosts {
        let e = *energy
            .get(h.name.as_str())
            .ok_or_else(|| LogError::NoEnergy {
                host: h.name.clone(),
            })?;
        let f = h.freq_ghz();
        let (idle, busy) = h.wattage(f).map_err(|e| LogError::Wattage(Box::new(e)))?;
        let compute_s =
            (busy > idle).then(|| ((e - idle * time_s) / (busy - idle)).clamp(0.0, time_s));
        out.push(HostResult {
            node: h.name.clone(),
            node_type: h.node_type.name.clone(),
            freq_ghz: f,
            energy_j: e,
            compute_s,
            traffic: Traffic::default(),
            probe_wait_s: None,
            probe_share: None,
            steps: None,
        });
    }
    Ok(RunResult {
        time_s,
        energy_j: out.iter().map(|h| h.energy_j).sum(),
        hosts: out,
        verification,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup::site::{NodeType, PowerModel};

    /// A node type of 1 and 2 GHz, 20 W static and 80 W dynamic at 2 GHz.
    fn fast() -> NodeType {
        NodeType {
            name: "fast".into(),
            freqs_ghz: vec![1.0, 2.0],
            power: PowerModel::AtMax {
                dynamic_w: 80.0,
                static_w: 20.0,
                gamma: 3.0,
            },
        }
    }

    /// One host, n1, of type `t` at its first pstate (its top frequency).
    fn n1(t: &NodeType) -> [Host<'_>; 1] {
        [Host {
            name: "n1".into(),
            node_type: t,
            pstate: 0,
            physics: None,
        }]
    }

    #[test]
    fn busy_time_comes_from_the_energy_integral() {
        let t = fast();
        let hosts = n1(&t);
        // 10 s of which 4 s busy at f_max: 20 W × 10 s + 80 W × 4 s = 520 J.
        let log = "[10.000000] [smpi_utils/INFO] Simulated time: 10 seconds.\n\
                   [10.000000] [host_energy/INFO] Energy consumption of host n1: 520.000000 Joules\n \
                   Verification    =               SUCCESSFUL\n";
        let r = parse(log, &hosts).unwrap();
        assert_eq!(r.time_s, 10.0);
        assert!((r.hosts[0].compute_s.unwrap() - 4.0).abs() < 1e-9);
        assert_eq!(r.verification.as_deref(), Some("SUCCESSFUL"));
        let missing = parse("Simulated time: 1 seconds.", &hosts)
            .unwrap_err()
            .to_string();
        assert!(missing.contains("host n1"), "{missing}");
    }

    #[test]
    fn hpls_residual_check_is_the_verdict_and_one_failure_fails_the_run() {
        let t = fast();
        let hosts = n1(&t);
        let head = "Simulated time: 1 seconds.\n\
                    Energy consumption of host n1: 100 Joules\n\
                    ||Ax-b||_oo / ( eps * ( || x ||_oo * || A ||_oo + || b ||_oo ) * N )\n";
        let pass =
            "||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=        0.0072510 ...... PASSED\n";
        let fail =
            "||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=      123.4567890 ...... FAILED\n";
        let verdict = |log: String| parse(&log, &hosts).unwrap().verification;
        // The header line names the check but is no verdict.
        assert_eq!(verdict(head.to_string()), None);
        assert_eq!(verdict(format!("{head}{pass}")).as_deref(), Some("PASSED"));
        assert_eq!(
            verdict(format!("{head}{fail}{pass}")).as_deref(),
            Some("FAILED")
        );
    }
}
