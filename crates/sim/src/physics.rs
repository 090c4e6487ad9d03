//! A testbed's physics from published measurements of real CPUs and programs
//! (tests/physics/, docs/physics.md), never from the site config greenup decides with.
//!
//! - **Power.** `cpus.yaml` gives each CPU's measured power at each P-state it was
//!   measured at, idle and under a compute-bound load, as RAPL's package figure and as
//!   the node's AC figure where the source has them (`--scope`). A host of that CPU draws
//!   the busy figure while its rank computes and, while the rank waits in MPI, the idle
//!   figure plus the file's polling share of the difference (MPI libraries busy-poll by
//!   default; `--wait blocking` makes a wait draw the idle figure).
//! - **Speed.** A program's sensitivity to the clock is its beta (`programs.yaml`): the
//!   share of its time at f_max that scales with 1/f, so at clock f a host computes at
//!   `GFLOPS / (beta f_max / f + 1 − beta)`. Beta 1 is greenup's own assumption.
//! - **Chips that differ** (`--node-spread`): nominally identical CPUs draw different
//!   power; each host draws its CPU's figures times the file's factor for it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use greenup::input::InputError;
use serde::Deserialize;

/// Why a physics file cannot be used for a run.
#[derive(Debug, thiserror::Error)]
pub enum PhysicsError {
    /// The file cannot be read or is not valid YAML of the expected shape.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A figure of the file is out of range.
    #[error("{file}: cpu {cpu}: {what}")]
    Figure {
        /// The physics file.
        file: PathBuf,
        /// The CPU whose figure it is.
        cpu: String,
        /// What is wrong and what would be valid.
        what: String,
    },
    /// `--cpu` names a CPU the file does not hold.
    #[error("--cpu {node_type}={cpu}: {file} has no cpu {cpu} (it has: {known})")]
    UnknownCpu {
        /// The node type.
        node_type: String,
        /// The CPU named.
        cpu: String,
        /// The physics file.
        file: PathBuf,
        /// The CPUs it holds.
        known: String,
    },
    /// The file has no figure of the scope asked for.
    #[error(
        "{file}: cpu {cpu}: no {what} figure (--scope {scope}); the source measured another scope"
    )]
    NoScope {
        /// The physics file.
        file: PathBuf,
        /// The CPU.
        cpu: String,
        /// The figure missing.
        what: String,
        /// The scope asked for.
        scope: &'static str,
    },
    /// `--beta` is outside 0 to 1.
    #[error(
        "--beta {0}: expected a share of the run time from 0 (no clock dependence) to 1 (all of it)"
    )]
    Beta(f64),
}

/// The file's shape: tests/physics/cpus.yaml.
#[derive(Debug, Clone, Deserialize)]
pub struct PhysicsFile {
    /// The measured CPUs.
    pub cpus: Vec<FileCpu>,
    /// What a core draws while its rank waits in MPI.
    pub waiting: Waiting,
    /// How much chips of one model differ in power (`--node-spread`).
    #[serde(default)]
    pub node_spread: Option<NodeSpread>,
}

/// Nodes of one CPU model that draw different power: each host's watts, idle and busy,
/// times one of these factors.
#[derive(Debug, Clone, Deserialize)]
pub struct NodeSpread {
    /// Where the spread was published.
    pub source: String,
    /// The factors, averaging 1: host nK takes the ((K − 1) mod len)th.
    pub factors: Vec<f64>,
}

/// One CPU as the file gives it.
#[derive(Debug, Clone, Deserialize)]
pub struct FileCpu {
    /// The name `--cpu` uses.
    pub name: String,
    /// Where the figures come from.
    pub source: String,
    /// The measured P-states, lowest first.
    pub pstates: Vec<FilePState>,
}

/// One P-state's measured power, in each scope the source measured.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct FilePState {
    /// The clock, GHz.
    pub ghz: f64,
    /// Package watts (RAPL) with every core idle.
    pub idle_w: Option<f64>,
    /// Package watts with every core running the compute-bound load.
    pub busy_w: Option<f64>,
    /// Node AC watts idle.
    pub idle_ac_w: Option<f64>,
    /// Node AC watts under the load.
    pub busy_ac_w: Option<f64>,
}

/// A waiting rank's draw.
#[derive(Debug, Clone, Deserialize)]
pub struct Waiting {
    /// The share of (busy − idle) package watts that a core polling in MPI adds to idle.
    pub polling_share_of_busy_dynamic: f64,
    /// The same share in node AC watts.
    pub polling_share_ac: Option<f64>,
}

/// Which of the source's figures the hosts draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// The CPU packages (RAPL), as greenup's meters read a real node.
    Package,
    /// The whole node at the wall, where only that was published.
    NodeAc,
}

impl Scope {
    fn name(self) -> &'static str {
        match self {
            Scope::Package => "package",
            Scope::NodeAc => "node-ac",
        }
    }
}

/// One CPU in the scope a run uses: its P-states and the node's watts at each.
#[derive(Debug, Clone, PartialEq)]
pub struct Cpu {
    /// The name `--cpu` uses.
    pub name: String,
    /// The measured P-states, lowest first.
    pub pstates: Vec<PState>,
}

/// One P-state's measured watts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PState {
    /// The clock, GHz.
    pub ghz: f64,
    /// Watts with every core idle at this clock.
    pub idle_w: f64,
    /// Watts with every core running the compute-bound load.
    pub busy_w: f64,
}

/// How a waiting rank waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Wait {
    /// Busy-polling, MPI libraries' default: the core draws the file's polling share.
    Polling,
    /// Blocking in the kernel: the core draws idle power.
    Blocking,
}

/// Each node type's CPU, and the program's sensitivity: what a run's hosts obey.
#[derive(Debug, Clone, PartialEq)]
pub struct Physics {
    /// The file the figures came from.
    pub file: PathBuf,
    /// Node type name to its CPU.
    pub cpus: BTreeMap<String, Cpu>,
    /// The program's share of time that scales with 1/f.
    pub beta: f64,
    /// The share of (busy − idle) a waiting core adds to idle power.
    pub wait_share: f64,
    /// The file's node spread ([`NodeSpread::factors`]); empty: every host draws its
    /// CPU's figures (`--node-spread` not given).
    pub node_factors: Vec<f64>,
}

impl Physics {
    /// The factor host `name` draws its CPU's watts by: by the number its name ends in
    /// under the node spread, else 1.
    pub fn node_factor(&self, name: &str) -> f64 {
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let k: Option<usize> = name[name.len() - digits..].parse().ok();
        match (k, self.node_factors.len()) {
            (Some(k), n) if n > 0 && k > 0 => self.node_factors[(k - 1) % n],
            _ => 1.0,
        }
    }
}

impl Physics {
    /// Load `file` and map each node type to its CPU (`TYPE=CPU`), in `scope`.
    pub fn load(
        file: &Path,
        types: &[(String, String)],
        scope: Scope,
        beta: f64,
        wait: Wait,
    ) -> Result<Physics, PhysicsError> {
        let parsed: PhysicsFile = greenup::input::load_yaml(file)?;
        Physics::from_file(file, parsed, types, scope, beta, wait)
    }

    /// Check `parsed`'s figures and map each node type to its CPU.
    pub fn from_file(
        file: &Path,
        parsed: PhysicsFile,
        types: &[(String, String)],
        scope: Scope,
        beta: f64,
        wait: Wait,
    ) -> Result<Physics, PhysicsError> {
        if !(0.0..=1.0).contains(&beta) {
            return Err(PhysicsError::Beta(beta));
        }
        let share = match scope {
            Scope::Package => parsed.waiting.polling_share_of_busy_dynamic,
            Scope::NodeAc => {
                parsed
                    .waiting
                    .polling_share_ac
                    .ok_or_else(|| PhysicsError::NoScope {
                        file: file.to_path_buf(),
                        cpu: "(waiting)".into(),
                        what: "polling_share_ac".into(),
                        scope: scope.name(),
                    })?
            }
        };
        if !(0.0..1.0).contains(&share) {
            return Err(PhysicsError::Figure {
                file: file.to_path_buf(),
                cpu: "(waiting)".into(),
                what: format!(
                    "polling_share_of_busy_dynamic {share}: expected at least 0 and below 1 (a waiting core draws less than a computing one)"
                ),
            });
        }
        let node_factors = parsed
            .node_spread
            .as_ref()
            .map(|s| s.factors.clone())
            .unwrap_or_default();
        if parsed
            .node_spread
            .as_ref()
            .is_some_and(|s| s.source.trim().is_empty())
        {
            return Err(PhysicsError::Figure {
                file: file.to_path_buf(),
                cpu: "(node_spread)".into(),
                what: "an empty source: every figure must name where it was published".into(),
            });
        }
        if let Some(bad) = node_factors.iter().find(|k| !(k.is_finite() && **k > 0.0)) {
            return Err(PhysicsError::Figure {
                file: file.to_path_buf(),
                cpu: "(node_spread)".into(),
                what: format!("factor {bad}: expected a positive number"),
            });
        }
        let mut cpus = BTreeMap::new();
        for (t, name) in types {
            let c = parsed
                .cpus
                .iter()
                .find(|c| &c.name == name)
                .ok_or_else(|| PhysicsError::UnknownCpu {
                    node_type: t.clone(),
                    cpu: name.clone(),
                    file: file.to_path_buf(),
                    known: parsed
                        .cpus
                        .iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
            let c = in_scope(file, c, scope)?;
            check_cpu(file, &c)?;
            cpus.insert(t.clone(), c);
        }
        Ok(Physics {
            file: file.to_path_buf(),
            cpus,
            beta,
            wait_share: match wait {
                Wait::Polling => share,
                Wait::Blocking => 0.0,
            },
            node_factors,
        })
    }
}

/// A CPU's figures in `scope`; every P-state must have both, and the CPU its source.
fn in_scope(file: &Path, c: &FileCpu, scope: Scope) -> Result<Cpu, PhysicsError> {
    if c.source.trim().is_empty() {
        return Err(PhysicsError::Figure {
            file: file.to_path_buf(),
            cpu: c.name.clone(),
            what: "an empty source: every figure must name where it was published".into(),
        });
    }
    let pstates = c
        .pstates
        .iter()
        .map(|p| {
            let (idle, busy, names) = match scope {
                Scope::Package => (p.idle_w, p.busy_w, ("idle_w", "busy_w")),
                Scope::NodeAc => (p.idle_ac_w, p.busy_ac_w, ("idle_ac_w", "busy_ac_w")),
            };
            let missing = |what: &str| PhysicsError::NoScope {
                file: file.to_path_buf(),
                cpu: c.name.clone(),
                what: format!("{what} at {} GHz", p.ghz),
                scope: scope.name(),
            };
            Ok(PState {
                ghz: p.ghz,
                idle_w: idle.ok_or_else(|| missing(names.0))?,
                busy_w: busy.ok_or_else(|| missing(names.1))?,
            })
        })
        .collect::<Result<_, PhysicsError>>()?;
    Ok(Cpu {
        name: c.name.clone(),
        pstates,
    })
}

/// A CPU's figures must be usable: P-states ascending, watts positive, busy above idle.
fn check_cpu(file: &Path, c: &Cpu) -> Result<(), PhysicsError> {
    let bad = |what: String| PhysicsError::Figure {
        file: file.to_path_buf(),
        cpu: c.name.clone(),
        what,
    };
    if c.pstates.is_empty() {
        return Err(bad(
            "no pstates: expected at least one measured P-state".into()
        ));
    }
    for (i, p) in c.pstates.iter().enumerate() {
        if !(p.ghz > 0.0 && p.idle_w > 0.0 && p.busy_w.is_finite()) {
            return Err(bad(format!(
                "pstate {} GHz: expected a positive clock and positive idle and busy watts",
                p.ghz
            )));
        }
        if p.busy_w <= p.idle_w {
            return Err(bad(format!(
                "pstate {} GHz: busy_w {} is not above idle_w {}: a computing core draws more than an idle one",
                p.ghz, p.busy_w, p.idle_w
            )));
        }
        if i > 0 && p.ghz <= c.pstates[i - 1].ghz {
            return Err(bad(format!(
                "pstate {} GHz follows {} GHz: expected P-states lowest first, each once",
                p.ghz,
                c.pstates[i - 1].ghz
            )));
        }
    }
    Ok(())
}

impl Cpu {
    /// The P-state measured at `ghz` (to a millionth), never the nearest one.
    pub fn pstate(&self, ghz: f64) -> Option<&PState> {
        self.pstates
            .iter()
            .find(|p| (p.ghz - ghz).abs() <= 1e-6 * ghz.abs())
    }
}

/// A program's time at `f` over its time at `fmax`, for sensitivity `beta`.
pub fn time_ratio(beta: f64, fmax: f64, f: f64) -> f64 {
    beta * fmax / f + 1.0 - beta
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
cpus:
  - name: a
    source: test
    pstates:
      - {ghz: 1.0, idle_w: 50, busy_w: 100, idle_ac_w: 70}
      - {ghz: 2.0, idle_w: 60, busy_w: 200, idle_ac_w: 80, busy_ac_w: 260}
waiting: {polling_share_of_busy_dynamic: 0.5, polling_share_ac: 0.6}
";

    fn parsed(text: &str) -> PhysicsFile {
        serde_saphyr::from_str(text).unwrap()
    }

    fn load(text: &str, beta: f64) -> Result<Physics, PhysicsError> {
        Physics::from_file(
            Path::new("cpus.yaml"),
            parsed(text),
            &[("fast".into(), "a".into())],
            Scope::Package,
            beta,
            Wait::Polling,
        )
    }

    #[test]
    fn beta_splits_the_time_between_the_clock_and_the_rest() {
        // Half the time scales: at half the clock, 0.5 × 2 + 0.5 = 1.5 times as long.
        assert_eq!(time_ratio(0.5, 2.0, 1.0), 1.5);
        assert_eq!(time_ratio(1.0, 2.0, 1.0), 2.0);
        assert_eq!(time_ratio(0.0, 2.0, 1.0), 1.0);
    }

    #[test]
    fn a_node_spread_needs_a_source_and_positive_factors() {
        let spread = |source: &str, factors: &str| {
            format!("{FILE}node_spread: {{source: \"{source}\", factors: [{factors}]}}\n")
        };
        let p = load(&spread("a study", "0.9, 1.1"), 1.0).unwrap();
        assert_eq!(p.node_factors, [0.9, 1.1]);
        // Host nK takes the ((K - 1) mod 2)th; a name without a number draws as its CPU.
        assert_eq!((p.node_factor("n1"), p.node_factor("n4")), (0.9, 1.1));
        assert_eq!(p.node_factor("head"), 1.0);
        let e = load(&spread("a study", "1.0, -0.5"), 1.0)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cpus.yaml: cpu (node_spread): factor -0.5: expected a positive number"),
            "{e}"
        );
        let e = load(&spread(" ", "1.0"), 1.0).unwrap_err().to_string();
        assert!(e.contains("(node_spread): an empty source"), "{e}");
    }

    #[test]
    fn a_type_maps_to_its_cpu_and_bad_figures_are_refused() {
        let p = load(FILE, 0.7).unwrap();
        assert_eq!(p.cpus["fast"].pstates.last().unwrap().ghz, 2.0);
        assert_eq!(p.cpus["fast"].pstate(1.0).unwrap().busy_w, 100.0);
        assert!(p.cpus["fast"].pstate(1.5).is_none());
        assert_eq!(p.wait_share, 0.5);
        let e = load(FILE, 1.2).unwrap_err().to_string();
        assert!(e.contains("--beta 1.2"), "{e}");
        let e = load(&FILE.replace("busy_w: 100", "busy_w: 40"), 1.0)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cpu a: pstate 1 GHz: busy_w 40 is not above idle_w 50"),
            "{e}"
        );
        let e = load(&FILE.replace("ghz: 2.0", "ghz: 0.5"), 1.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected P-states lowest first"), "{e}");
        let e = load(
            &FILE.replace("share_of_busy_dynamic: 0.5", "share_of_busy_dynamic: 1"),
            1.0,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("polling_share_of_busy_dynamic 1"), "{e}");
        let refused = |cpu: &str, scope| {
            Physics::from_file(
                Path::new("cpus.yaml"),
                parsed(FILE),
                &[("fast".into(), cpu.into())],
                scope,
                1.0,
                Wait::Polling,
            )
            .unwrap_err()
            .to_string()
        };
        let e = refused("b", Scope::Package);
        assert!(e.contains("has no cpu b (it has: a)"), "{e}");
        // The AC figures lack the 1 GHz busy one: that scope cannot run this CPU.
        let e = refused("a", Scope::NodeAc);
        assert!(
            e.contains("cpu a: no busy_ac_w at 1 GHz figure (--scope node-ac)"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_file_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("cpus.yaml");
        std::fs::write(&f, FILE.replace("idle_w: 60", "idle_w: sixty")).unwrap();
        let e = Physics::load(&f, &[], Scope::Package, 1.0, Wait::Polling)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cpus.yaml:6:"), "{e}");
    }
}
