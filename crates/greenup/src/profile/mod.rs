//! Application profiles (`etc/profiles/NAME.yaml`): the parameters of one or
//! more models for one application, checked once when the file is read.
//!
//! A profile names itself, carries a version (refined profiles are written
//! back as new versions), and holds any of the sections `iso_energy`,
//! `roofline`, `amdahl` and `hetero`. [`Profile::predictor`] turns the chosen
//! section and the site's node types into a [`Predictor`]. The format is
//! documented in docs/profiles.md.

pub mod iso_overheads;
pub mod lead;
pub mod learn;
pub mod locate;
pub mod node_power;
pub mod outcome;
pub mod refine;
pub mod versions;
pub mod windows;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::expr::Expr;
use crate::input::{InputError, Origin, Spanned, file_origin, parse_yaml};
use crate::model::amdahl::{Amdahl, AmdahlFit, CommLaw};
use crate::model::gpus::{GpuBusy, TypeBusy};
use crate::model::hetero::{ClockFit, Hetero, TypeTimes};
use crate::model::iso_energy::{AppVector, IsoEnergy, MachinePower, MachineVector};
use crate::model::node_counts::NodeCounts;
use crate::model::roofline::Roofline;
use crate::model::steps::{ModelChoice, StepClass, Steps, TimeModel};
use crate::model::{ModelError, Predictor};
use crate::site::Site;

/// The model names a profile section may have, in the order used when several are present.
pub const MODEL_PREFERENCE: [&str; 4] = ["hetero", "amdahl", "iso_energy", "roofline"];

/// A number or an arithmetic expression, as written in a profile.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// A plain number.
    Number(f64),
    /// An expression such as `"109.4 * n"`, or a name.
    Text(String),
    /// Something that is neither (a list, a mapping, a boolean, null), described for the error.
    Other(String),
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Param::Number(x) => write!(f, "{x}"),
            Param::Text(s) | Param::Other(s) => write!(f, "{s}"),
        }
    }
}

impl Serialize for Param {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            // Whole numbers are written without a fraction, so a version stays `2`.
            Param::Number(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => s.serialize_i64(*x as i64),
            Param::Number(x) => s.serialize_f64(*x),
            Param::Text(t) | Param::Other(t) => s.serialize_str(t),
        }
    }
}

impl<'de> Deserialize<'de> for Param {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Param;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or an expression in quotes")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Param, E> {
                Ok(Param::Number(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Param, E> {
                Ok(Param::Number(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Param, E> {
                Ok(Param::Number(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Param, E> {
                Ok(Param::Text(v.to_string()))
            }
            // Anything else is kept, described, so that the check can name the key.
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Param, E> {
                Ok(Param::Other(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Param, E> {
                Ok(Param::Other("null".into()))
            }
            fn visit_none<E: de::Error>(self) -> Result<Param, E> {
                Ok(Param::Other("null".into()))
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Param, D2::Error> {
                d.deserialize_any(V)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Param, A::Error> {
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(Param::Other("a list".into()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Param, A::Error> {
                while map
                    .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Param::Other("a mapping".into()))
            }
        }
        d.deserialize_any(V)
    }
}

/// A value without a source position, for profiles built in code (e.g. refined ones).
pub fn unspanned<T>(value: T) -> Spanned<T> {
    Spanned::new(
        value,
        serde_saphyr::Location::UNKNOWN,
        serde_saphyr::Location::UNKNOWN,
    )
}

/// The profile file as written: the schema serialized back when a refined version is saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileFile {
    /// Application name, e.g. `lammps`.
    pub name: Spanned<Param>,
    /// Version number, 1 and up; each refinement writes the next one.
    pub version: Spanned<Param>,
    /// Free text for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<Spanned<Param>>,
    /// Which model section to use when several are present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<Spanned<Param>>,
    /// The node counts the program runs on: `powers_of_two`, `squares`, or a list such
    /// as `"8, 16, 32"`; a plan that shrinks the job picks no other. Absent: any count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_counts: Option<Spanned<Param>>,
    /// Paper 000's iso-energy-efficiency vectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iso_energy: Option<IsoEnergyFile>,
    /// Paper 001's roofline/arch-line coefficients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roofline: Option<RooflineFile>,
    /// Paper 003's Amdahl computation and communication fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amdahl: Option<AmdahlFile>,
    /// Paper 004's per-node-type iteration times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hetero: Option<HeteroFile>,
    /// How long a GPU node's GPUs are busy, beside whichever model predicts the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuFile>,
}

/// `gpu:` section: the seconds each node's GPUs compute at their top clock, by site node
/// type, on `nodes` nodes (monitor runs measure it: NVML's utilization times the run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuFile {
    /// The node count the seconds hold for; the GPUs' work divides evenly over more nodes.
    pub nodes: Spanned<Param>,
    /// Per site node type with GPUs.
    pub node_types: BTreeMap<String, GpuTypeFile>,
}

/// One node type's GPU time in a `gpu:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuTypeFile {
    /// Seconds each node's GPUs are busy over the whole job, left at their own clock.
    pub busy_s: Spanned<Param>,
    /// The SM clock they ran at while busy, MHz (default: the top clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_mhz: Option<Spanned<Param>>,
    /// Watts one GPU drew while busy (default: the site's power model at that clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<Spanned<Param>>,
}

/// `iso_energy:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IsoEnergyFile {
    /// Problem size n used when greenup plans the job.
    pub n: Spanned<Param>,
    /// Machine vector: expressions in `f` (GHz).
    pub machine: MachineFile,
    /// Application vector: expressions in `n` and `p`.
    pub application: AppFile,
}

/// The machine vector of paper 000.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineFile {
    /// Seconds per on-chip instruction.
    pub t_c: Spanned<Param>,
    /// Seconds per memory access.
    pub t_m: Spanned<Param>,
    /// Seconds to start one message.
    pub t_msg: Spanned<Param>,
    /// Seconds to transmit one byte.
    pub t_byte: Spanned<Param>,
    /// The site's node type whose watts the vector takes (its measured curve where
    /// greenupd has one), in place of `p_idle`, `dp_c` and `dp_m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power: Option<Spanned<Param>>,
    /// Watts of one processor's whole system when idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_idle: Option<Spanned<Param>>,
    /// Extra watts while computing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp_c: Option<Spanned<Param>>,
    /// Extra watts while accessing memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp_m: Option<Spanned<Param>>,
    /// The share of `dp_c` a processor draws while it waits in MPI (0 to 1; about 0.8
    /// where MPI polls). Absent: 0, paper 000's idle wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_share: Option<Spanned<Param>>,
}

/// The application vector of paper 000.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppFile {
    /// Overlap factor of computation, memory and network (0 to 1).
    pub alpha: Spanned<Param>,
    /// On-chip instructions of the sequential run.
    pub w_c: Spanned<Param>,
    /// Memory accesses of the sequential run.
    pub w_m: Spanned<Param>,
    /// Extra instructions of the parallel run (all processors).
    pub w_co: Spanned<Param>,
    /// Extra memory accesses of the parallel run (all processors; may be negative).
    pub w_mo: Spanned<Param>,
    /// Messages sent (all processors).
    pub m: Spanned<Param>,
    /// Bytes sent (all processors).
    pub b: Spanned<Param>,
}

/// `roofline:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RooflineFile {
    /// Useful operations (flops) of the whole job; expression in `p`.
    pub flops: Spanned<Param>,
    /// Bytes moved between memory and cache, whole job; expression in `p`.
    pub bytes: Spanned<Param>,
    /// Cache accesses of the whole job (eq. 10); expression in `p`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_accesses: Option<Spanned<Param>>,
    /// Seconds per flop on one node; expression in `f`.
    pub tau_flop_s: Spanned<Param>,
    /// Seconds per byte on one node; expression in `f`.
    pub tau_mem_s: Spanned<Param>,
    /// Joules per flop; expression in `f`.
    pub eps_flop_j: Spanned<Param>,
    /// Joules per byte; expression in `f`.
    pub eps_mem_j: Spanned<Param>,
    /// Joules per cache access (eq. 10); expression in `f`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eps_cache_j: Option<Spanned<Param>>,
    /// Constant watts of one node; expression in `f`.
    pub pi0_w: Spanned<Param>,
}

/// `amdahl:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmdahlFile {
    /// Compute seconds on one node at maximum frequency, T_C(0,1).
    pub t_c1_s: Spanned<Param>,
    /// Parallel fraction F_p of the computation (0 to 1).
    pub parallel_fraction: Spanned<Param>,
    /// Blocking-communication time law T_B(n).
    pub comm: CommFile,
    /// Slowdown S of computation at frequency `f` against `fmax` (default `fmax / f`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<Spanned<Param>>,
    /// Watts of one node while computing, expression in `f` (default: the site's dynamic + static).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_w: Option<Spanned<Param>>,
    /// Watts of one node while blocked in communication (default: the site's static power).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_w: Option<Spanned<Param>>,
}

impl AmdahlFile {
    /// A section holding the parameters of a fit, with the site's default power and slowdown.
    pub fn from_fit(fit: &AmdahlFit) -> AmdahlFile {
        AmdahlFile {
            t_c1_s: unspanned(Param::Number(fit.t_c1_s)),
            parallel_fraction: unspanned(Param::Number(fit.parallel_fraction)),
            comm: CommFile {
                law: unspanned(Param::Text(fit.law.name().to_string())),
                coeff_s: unspanned(Param::Number(fit.coeff_s)),
            },
            slowdown: None,
            compute_w: None,
            blocked_w: None,
        }
    }

    /// This section with its time parameters replaced by a fit; slowdown and power are kept.
    pub fn refit(&self, fit: &AmdahlFit) -> AmdahlFile {
        AmdahlFile {
            slowdown: self.slowdown.clone(),
            compute_w: self.compute_w.clone(),
            blocked_w: self.blocked_w.clone(),
            ..AmdahlFile::from_fit(fit)
        }
    }
}

/// The communication law of an `amdahl:` section: `T_B(n) = c * (g(n) - g(1))`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommFile {
    /// `log` (g = log2 n), `linear` (g = n) or `quadratic` (g = n^2).
    pub law: Spanned<Param>,
    /// Seconds per unit of g(n).
    pub coeff_s: Spanned<Param>,
}

/// `hetero:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeteroFile {
    /// Iterations the job runs.
    pub iterations: Spanned<Param>,
    /// The node count the times hold for (a job's share of the work depends on it);
    /// refinement then learns only from runs on that many nodes. Absent: every run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Spanned<Param>>,
    /// Measurements per site node type.
    pub node_types: BTreeMap<String, HeteroTypeFile>,
    /// Synchronised steps: classes of steps and each type's share of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<Vec<StepClassFile>>,
    /// Step classes learned at each window length; refinement keeps the best in `steps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_windows: Option<Vec<StepWindowFile>>,
    /// Which time model (max or steps) predicted the measured runs better.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_choice: Option<ModelChoiceFile>,
}

/// One entry of a hetero section's `step_windows:` list: the step classes learned from
/// compute windows of one length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepWindowFile {
    /// The window length the classes were learned at, seconds.
    pub window_s: Spanned<Param>,
    /// The classes, written as in `steps:`.
    pub classes: Vec<StepClassFile>,
}

impl StepWindowFile {
    /// The file form of step models learned at several window lengths.
    pub fn from_ladder(ladder: &[(f64, Steps)]) -> Vec<StepWindowFile> {
        ladder
            .iter()
            .map(|(w, s)| StepWindowFile {
                window_s: unspanned(Param::Number(*w)),
                classes: StepClassFile::from_steps(s),
            })
            .collect()
    }
}

/// One class of a hetero section's `steps:` list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepClassFile {
    /// Raw steps merged into the class.
    pub steps: Spanned<Param>,
    /// Per node type, the class's compute as a fraction of the type's whole compute per iteration.
    pub share: BTreeMap<String, Spanned<Param>>,
}

/// `model_choice:` of a hetero section: the time model that won and the errors it won by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelChoiceFile {
    /// `max` or `steps`.
    pub winner: Spanned<Param>,
    /// RMS relative time error of the max model over the runs (0.01 = 1%).
    pub max_model_error: Spanned<Param>,
    /// RMS relative time error of the step model over the runs.
    pub step_model_error: Spanned<Param>,
    /// Measured runs compared.
    pub runs: Spanned<Param>,
    /// The window length, seconds, of the `step_windows` entry whose classes `steps` holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_s: Option<Spanned<Param>>,
}

impl ModelChoiceFile {
    /// The file form of a choice.
    pub fn from_choice(c: &ModelChoice) -> ModelChoiceFile {
        let number = |x: f64| unspanned(Param::Number(x));
        ModelChoiceFile {
            winner: unspanned(Param::Text(c.winner.name().to_string())),
            max_model_error: number(c.max_model_error),
            step_model_error: number(c.step_model_error),
            runs: number(f64::from(c.runs)),
            window_s: c.window_s.map(number),
        }
    }
}

impl StepClassFile {
    /// The file form of a step model.
    pub fn from_steps(s: &Steps) -> Vec<StepClassFile> {
        s.classes
            .iter()
            .map(|c| StepClassFile {
                steps: unspanned(Param::Number(c.steps as f64)),
                share: c
                    .share
                    .iter()
                    .map(|(k, v)| (k.clone(), unspanned(Param::Number(*v))))
                    .collect(),
            })
            .collect()
    }
}

/// One node type's measurements in a `hetero:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeteroTypeFile {
    /// Compute seconds per iteration at maximum frequency that scale with the clock
    /// (all compute seconds when `t_mem_s` is absent).
    pub t_cp_s: Spanned<Param>,
    /// Communication seconds per iteration at maximum frequency.
    pub t_cm_s: Spanned<Param>,
    /// Dynamic watts at maximum frequency (default: the site's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_dyn_w: Option<Spanned<Param>>,
    /// Static watts (default: the site's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_static_w: Option<Spanned<Param>>,
    /// Compute seconds per iteration that do not scale with the clock (memory stalls).
    /// Absent: not learned, the program is taken as compute-bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_mem_s: Option<Spanned<Param>>,
    /// How `t_mem_s` was fitted from runs at several clocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_mem_fit: Option<ClockFitFile>,
    /// How much longer the type's slowest node computes than its mean node, where the
    /// program gives its nodes unequal work (a number >= 1). Absent: equal work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead: Option<Spanned<Param>>,
    /// The share of its dynamic watts a node draws while it waits for the others (0 to
    /// 1; about 0.8 where MPI polls). Absent: a waiting node draws static watts only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_share: Option<Spanned<Param>>,
}

/// `t_mem_fit:` of a hetero node type: where its `t_mem_s` came from and how well it fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockFitFile {
    /// Distinct clocks among the runs fitted.
    pub clocks: Spanned<Param>,
    /// Node runs fitted.
    pub samples: Spanned<Param>,
    /// Root-mean-square relative error of the fitted compute time (0.01 = 1%).
    pub rms_error: Spanned<Param>,
    /// Where the runs came from, in words.
    pub source: Spanned<Param>,
}

impl ClockFitFile {
    /// The file form of a fit.
    pub fn from_fit(fit: &ClockFit) -> ClockFitFile {
        let number = |x: f64| unspanned(Param::Number(x));
        ClockFitFile {
            clocks: number(fit.clocks as f64),
            samples: number(fit.samples as f64),
            rms_error: number(fit.rms_error),
            source: unspanned(Param::Text(fit.source.clone())),
        }
    }
}

/// A checked profile: the file as written plus its parsed models.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The file it came from (or the name given to [`Profile::from_str`]).
    pub path: PathBuf,
    /// The schema as written, for writing refined versions back.
    pub file: ProfileFile,
    name: String,
    version: u64,
    prefer: Option<String>,
    node_counts: Option<NodeCounts>,
    iso_energy: Option<IsoEnergy>,
    roofline: Option<Roofline>,
    amdahl: Option<AmdahlSpec>,
    hetero: Option<BTreeMap<String, TypeTimes>>,
    hetero_iterations: f64,
    hetero_nodes: Option<usize>,
    hetero_steps: Option<Steps>,
    hetero_step_windows: Vec<(f64, Steps)>,
    hetero_choice: Option<ModelChoice>,
    gpu: Option<GpuBusy>,
}

/// The site-independent part of an amdahl section.
#[derive(Debug, Clone)]
struct AmdahlSpec {
    t_c1_s: f64,
    parallel_fraction: f64,
    law: CommLaw,
    coeff_s: f64,
    slowdown: Option<Expr>,
    compute_w: Option<Expr>,
    blocked_w: Option<f64>,
}

/// Checks values against a file, producing located errors.
struct Checker<'a> {
    path: &'a Path,
}

impl Checker<'_> {
    fn expr(&self, v: &Spanned<Param>, key: &str, vars: &[&str]) -> Result<Expr, InputError> {
        let what = allowed(vars);
        match &v.value {
            Param::Number(x) if x.is_finite() => Ok(Expr::constant(*x)),
            Param::Number(_) => Err(InputError::at(
                self.path,
                v,
                key,
                format!("a finite number or {what}"),
            )),
            Param::Text(t) => Expr::parse(t, vars)
                .map_err(|e| InputError::at(self.path, v, key, format!("{what} ({e})"))),
            Param::Other(_) => Err(InputError::at(
                self.path,
                v,
                key,
                format!("a number or {what}"),
            )),
        }
    }

    /// An expression whose constant form must not be negative.
    fn expr_nonneg(
        &self,
        v: &Spanned<Param>,
        key: &str,
        vars: &[&str],
    ) -> Result<Expr, InputError> {
        if let Param::Number(x) = v.value
            && x < 0.0
        {
            return Err(InputError::at(
                self.path,
                v,
                key,
                format!("a number >= 0 or {}", allowed(vars)),
            ));
        }
        self.expr(v, key, vars)
    }

    /// A plain number (a quoted one is accepted too) meeting `ok`; `expected` says what is valid.
    fn number(
        &self,
        v: &Spanned<Param>,
        key: &str,
        expected: &str,
        ok: fn(f64) -> bool,
    ) -> Result<f64, InputError> {
        let x = match &v.value {
            Param::Number(x) => Some(*x),
            Param::Text(t) => t.trim().parse::<f64>().ok(),
            Param::Other(_) => None,
        };
        match x {
            Some(x) if x.is_finite() && ok(x) => Ok(x),
            _ => Err(InputError::at(self.path, v, key, expected)),
        }
    }

    fn nonneg(&self, v: &Spanned<Param>, key: &str) -> Result<f64, InputError> {
        self.number(v, key, "a finite number >= 0", |x| x >= 0.0)
    }

    fn positive(&self, v: &Spanned<Param>, key: &str) -> Result<f64, InputError> {
        self.number(v, key, "a finite number > 0", |x| x > 0.0)
    }

    fn fraction(&self, v: &Spanned<Param>, key: &str) -> Result<f64, InputError> {
        self.number(v, key, "a number from 0 to 1", |x| (0.0..=1.0).contains(&x))
    }

    /// A word (not a number, list or mapping).
    fn text<'v>(
        &self,
        v: &'v Spanned<Param>,
        key: &str,
        expected: &str,
    ) -> Result<&'v str, InputError> {
        match &v.value {
            Param::Text(t) => Ok(t),
            _ => Err(InputError::at(self.path, v, key, expected)),
        }
    }
}

fn allowed(vars: &[&str]) -> String {
    if vars.is_empty() {
        "a number".to_string()
    } else {
        format!("an expression in {}", vars.join(", "))
    }
}

/// Position of the first line of the file, for errors about the file as a whole.
fn top(path: &Path) -> Origin {
    Origin::File {
        path: path.to_path_buf(),
        line: 1,
        column: 1,
    }
}

impl Profile {
    /// Read and check a profile file.
    pub fn load(path: &Path) -> Result<Profile, InputError> {
        crate::input::check_file(path, "profile", |text| Profile::from_str(path, text))
    }

    /// Load the admin's profile called `name` from `dir` (`dir/NAME.yaml`, see
    /// [`locate::admin_file`]); `origin` names the option or request field it came from.
    pub fn find(dir: &Path, name: &str, origin: Origin) -> Result<Profile, InputError> {
        Profile::load(&locate::admin_file(dir, name, origin)?)
    }

    /// Check a profile given as text; `path` names it in errors.
    pub fn from_str(path: &Path, text: &str) -> Result<Profile, InputError> {
        let file: ProfileFile = parse_yaml(path, text)?;
        Profile::from_file(path, file)
    }

    /// Check a profile schema value (e.g. one built by refinement).
    pub fn from_file(path: &Path, file: ProfileFile) -> Result<Profile, InputError> {
        let c = Checker { path };
        let rule = format!("a profile name of {}", crate::names::NAME_RULE);
        let name = c.text(&file.name, "name", &rule)?.to_string();
        if !crate::names::is_name(&name) {
            return Err(InputError::at(path, &file.name, "name", rule));
        }
        let version = c.number(&file.version, "version", "a whole number >= 1", |x| {
            x >= 1.0 && x.fract() == 0.0 && x < 9.0e15
        })? as u64;
        if let Some(d) = &file.description
            && matches!(d.value, Param::Other(_))
        {
            return Err(InputError::at(path, d, "description", "text"));
        }
        let prefer = match &file.prefer {
            Some(p) => Some(
                c.text(p, "prefer", "one of hetero, amdahl, iso_energy, roofline")?
                    .to_string(),
            ),
            None => None,
        };
        let node_counts = match &file.node_counts {
            Some(v) => {
                let parsed = match &v.value {
                    Param::Text(t) => NodeCounts::parse(t),
                    Param::Number(x) if *x >= 1.0 && x.fract() == 0.0 && *x < 1.0e9 => {
                        NodeCounts::parse(&format!("{x}"))
                    }
                    _ => None,
                };
                Some(parsed.ok_or_else(|| {
                    InputError::at(
                        path,
                        v,
                        "node_counts",
                        "powers_of_two, squares, or whole numbers >= 1 separated by commas, e.g. \"8, 16, 32\"",
                    )
                })?)
            }
            None => None,
        };
        let iso_energy = file
            .iso_energy
            .as_ref()
            .map(|s| check_iso(&c, s))
            .transpose()?;
        let roofline = file
            .roofline
            .as_ref()
            .map(|s| check_roofline(&c, s))
            .transpose()?;
        let amdahl = file
            .amdahl
            .as_ref()
            .map(|s| check_amdahl(&c, s))
            .transpose()?;
        let (hetero_steps, hetero_step_windows, hetero_choice) = match &file.hetero {
            Some(h) => check_steps(&c, h)?,
            None => (None, Vec::new(), None),
        };
        let (hetero, hetero_iterations, hetero_nodes) = match &file.hetero {
            Some(h) => {
                let (t, i) = check_hetero(&c, h)?;
                let nodes = h
                    .nodes
                    .as_ref()
                    .map(|v| {
                        c.number(v, "hetero.nodes", "a whole number >= 1", |x| {
                            x >= 1.0 && x.fract() == 0.0 && x < 1.0e9
                        })
                    })
                    .transpose()?
                    .map(|n| n as usize);
                (Some(t), i, nodes)
            }
            None => (None, 0.0, None),
        };
        let gpu = file.gpu.as_ref().map(|g| check_gpu(&c, g)).transpose()?;
        let profile = Profile {
            gpu,
            path: path.to_path_buf(),
            name,
            version,
            prefer,
            node_counts,
            file,
            iso_energy,
            roofline,
            amdahl,
            hetero,
            hetero_iterations,
            hetero_nodes,
            hetero_steps,
            hetero_step_windows,
            hetero_choice,
        };
        let present = profile.models();
        if present.is_empty() {
            return Err(InputError::new(
                top(path),
                "model section",
                "none",
                "at least one of iso_energy, roofline, amdahl, hetero",
            ));
        }
        if let (Some(p), Some(span)) = (&profile.prefer, &profile.file.prefer)
            && !present.contains(&p.as_str())
        {
            return Err(InputError::at(
                path,
                span,
                "prefer",
                format!(
                    "the name of a model section present in this profile: {}",
                    present.join(", ")
                ),
            ));
        }
        Ok(profile)
    }

    /// The application name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The profile version.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The model sections present, in preference order.
    pub fn models(&self) -> Vec<&'static str> {
        MODEL_PREFERENCE
            .into_iter()
            .filter(|m| match *m {
                "hetero" => self.hetero.is_some(),
                "amdahl" => self.amdahl.is_some(),
                "iso_energy" => self.iso_energy.is_some(),
                _ => self.roofline.is_some(),
            })
            .collect()
    }

    /// The model greenup uses: `prefer:` if given, else the first present in [`MODEL_PREFERENCE`].
    pub fn chosen_model(&self) -> &'static str {
        let present = self.models();
        if let Some(p) = &self.prefer
            && let Some(m) = present.iter().find(|m| **m == p.as_str())
        {
            return m;
        }
        present.first().copied().unwrap_or("none")
    }

    /// The iso-energy model, if the profile has one (used by `greenup model ee`).
    pub fn iso_energy(&self) -> Option<&IsoEnergy> {
        self.iso_energy.as_ref()
    }

    /// The predictor of the chosen model on this site's node types.
    pub fn predictor(&self, site: &Site) -> Result<Box<dyn Predictor + Send + Sync>, ModelError> {
        self.predictor_for(self.chosen_model(), site)
    }

    /// The predictor of a named model section on this site's node types, each node
    /// that draws measurably more or less than its type scaled by its learned factor.
    pub fn predictor_for(
        &self,
        model: &str,
        site: &Site,
    ) -> Result<Box<dyn Predictor + Send + Sync>, ModelError> {
        let missing = || ModelError::NoSection {
            profile: self.name().to_string(),
            model: model.to_string(),
        };
        let inner: Box<dyn Predictor + Send + Sync> = match model {
            "hetero" => Box::new(self.hetero_model(site).ok_or_else(missing)?),
            "amdahl" => Box::new(self.amdahl_model(site).ok_or_else(missing)?),
            "iso_energy" => Box::new(
                self.iso_energy
                    .as_ref()
                    .ok_or_else(missing)?
                    .on_site(&site.node_types)?,
            ),
            "roofline" => Box::new(self.roofline.clone().ok_or_else(missing)?),
            _ => return Err(missing()),
        };
        let inner = crate::model::node_scale::wrap(inner, &site.node_types);
        Ok(crate::model::beside::wrap(
            inner,
            self.gpu.clone(),
            self.node_counts.clone(),
        ))
    }

    /// The hetero model of this profile on the site's node types, if it has one. With a
    /// `steps:` section the step model predicts time only where it won: by the recorded
    /// `model_choice`, or without one by [`crate::model::steps::choose`]'s rule for too
    /// few runs (the step model only if it predicts at least the max model's slowdown).
    pub fn hetero_model(&self, site: &Site) -> Option<Hetero> {
        let mut h = Hetero {
            iterations: self.hetero_iterations,
            types: self.hetero.clone()?,
            site_types: site.node_types.clone(),
            steps: None,
            time_choice: None,
        };
        if let Some(steps) = &self.hetero_steps {
            let choice = match &self.hetero_choice {
                Some(c) => c.clone(),
                None => crate::model::steps::choose(&[], h.steps_safer(steps)),
            };
            if choice.winner == TimeModel::Steps {
                h.steps = Some(steps.clone());
            }
            h.time_choice = Some(choice);
        }
        Some(h)
    }

    /// The hetero section's step model as written, whichever time model won.
    pub fn hetero_steps(&self) -> Option<&Steps> {
        self.hetero_steps.as_ref()
    }

    /// The hetero section's `step_windows`: each window length, seconds, with the step
    /// model learned at it, shortest first; empty without the key.
    pub fn hetero_step_windows(&self) -> &[(f64, Steps)] {
        &self.hetero_step_windows
    }

    /// How long the GPUs of each GPU node type are busy, when the profile knows.
    pub fn gpu_busy(&self) -> Option<&GpuBusy> {
        self.gpu.as_ref()
    }

    /// The node count a hetero section's times hold for (`hetero.nodes`), if it says.
    pub fn hetero_nodes(&self) -> Option<usize> {
        self.hetero_nodes
    }

    /// The amdahl model of this profile on the site's node types, if it has one.
    pub fn amdahl_model(&self, site: &Site) -> Option<Amdahl> {
        let a = self.amdahl.as_ref()?;
        Some(Amdahl {
            t_c1_s: a.t_c1_s,
            parallel_fraction: a.parallel_fraction,
            law: a.law,
            coeff_s: a.coeff_s,
            slowdown: a.slowdown.clone(),
            compute_w: a.compute_w.clone(),
            blocked_w: a.blocked_w,
            site_types: site.node_types.clone(),
        })
    }

    /// The profile as YAML text, positions dropped; used to write refined versions.
    pub fn to_yaml(&self) -> Result<String, ToYamlError> {
        Ok(serde_saphyr::to_string(&self.file)?)
    }
}

/// A profile the YAML writer could not write, so no refined version is saved.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ToYamlError(#[from] serde_saphyr::SerializeError);

const F: &[&str] = &["f"];
const NP: &[&str] = &["n", "p"];
const P: &[&str] = &["p"];

fn check_iso(c: &Checker, s: &IsoEnergyFile) -> Result<IsoEnergy, InputError> {
    let m = &s.machine;
    let a = &s.application;
    let k = |x: &str| format!("iso_energy.machine.{x}");
    let ka = |x: &str| format!("iso_energy.application.{x}");
    let power = match (&m.power, &m.p_idle, &m.dp_c, &m.dp_m) {
        (Some(ty), None, None, None) => MachinePower::Site {
            node_type: c
                .text(ty, &k("power"), "the name of one of the site's node types")?
                .to_string(),
            watts: None,
        },
        (Some(ty), ..) => {
            return Err(InputError::at(
                c.path,
                ty,
                &k("power"),
                "either power (a node type's watts) or p_idle, dp_c and dp_m, not both",
            ));
        }
        (None, Some(p_idle), Some(dp_c), Some(dp_m)) => MachinePower::Stated {
            p_idle: c.expr_nonneg(p_idle, &k("p_idle"), F)?,
            dp_c: c.expr_nonneg(dp_c, &k("dp_c"), F)?,
            dp_m: c.expr_nonneg(dp_m, &k("dp_m"), F)?,
        },
        (None, ..) => {
            // Located at the machine's first key: a missing key has no place of its own.
            return Err(InputError {
                origin: crate::input::file_origin(c.path, &m.t_c.referenced),
                key: Some("iso_energy.machine".into()),
                value: None,
                expected:
                    "has no watts: give p_idle, dp_c and dp_m (expressions in f), or power: a node type of the site"
                        .into(),
            });
        }
    };
    let machine = MachineVector {
        t_c: c.expr_nonneg(&m.t_c, &k("t_c"), F)?,
        t_m: c.expr_nonneg(&m.t_m, &k("t_m"), F)?,
        t_msg: c.expr_nonneg(&m.t_msg, &k("t_msg"), F)?,
        t_byte: c.expr_nonneg(&m.t_byte, &k("t_byte"), F)?,
        power,
        wait_share: m
            .wait_share
            .as_ref()
            .map(|v| c.fraction(v, &k("wait_share")))
            .transpose()?
            .unwrap_or(0.0),
    };
    if let Param::Number(x) = a.alpha.value
        && !(0.0..=1.0).contains(&x)
    {
        return Err(InputError::at(
            c.path,
            &a.alpha,
            &ka("alpha"),
            "a number from 0 to 1 or an expression in n, p",
        ));
    }
    let app = AppVector {
        alpha: c.expr(&a.alpha, &ka("alpha"), NP)?,
        w_c: c.expr_nonneg(&a.w_c, &ka("w_c"), NP)?,
        w_m: c.expr_nonneg(&a.w_m, &ka("w_m"), NP)?,
        // Paper 000 measures negative memory overheads (FT, CG): parallel runs can miss cache less.
        w_co: c.expr(&a.w_co, &ka("w_co"), NP)?,
        w_mo: c.expr(&a.w_mo, &ka("w_mo"), NP)?,
        m: c.expr_nonneg(&a.m, &ka("m"), NP)?,
        b: c.expr_nonneg(&a.b, &ka("b"), NP)?,
    };
    let n = c.positive(&s.n, "iso_energy.n")?;
    Ok(IsoEnergy { n, machine, app })
}

fn check_roofline(c: &Checker, s: &RooflineFile) -> Result<Roofline, InputError> {
    let k = |x: &str| format!("roofline.{x}");
    let cache = match (&s.cache_accesses, &s.eps_cache_j) {
        (Some(q), Some(e)) => Some((
            c.expr_nonneg(q, &k("cache_accesses"), P)?,
            c.expr_nonneg(e, &k("eps_cache_j"), F)?,
        )),
        (None, None) => None,
        (Some(q), None) => {
            return Err(InputError::at(
                c.path,
                q,
                &k("cache_accesses"),
                "to be given together with eps_cache_j",
            ));
        }
        (None, Some(e)) => {
            return Err(InputError::at(
                c.path,
                e,
                &k("eps_cache_j"),
                "to be given together with cache_accesses",
            ));
        }
    };
    Ok(Roofline {
        flops: c.expr_nonneg(&s.flops, &k("flops"), P)?,
        bytes: c.expr_nonneg(&s.bytes, &k("bytes"), P)?,
        tau_flop_s: c.expr_nonneg(&s.tau_flop_s, &k("tau_flop_s"), F)?,
        tau_mem_s: c.expr_nonneg(&s.tau_mem_s, &k("tau_mem_s"), F)?,
        eps_flop_j: c.expr_nonneg(&s.eps_flop_j, &k("eps_flop_j"), F)?,
        eps_mem_j: c.expr_nonneg(&s.eps_mem_j, &k("eps_mem_j"), F)?,
        pi0_w: c.expr_nonneg(&s.pi0_w, &k("pi0_w"), F)?,
        cache,
    })
}

fn check_amdahl(c: &Checker, s: &AmdahlFile) -> Result<AmdahlSpec, InputError> {
    // Checked in file order, so the first error reported is the first in the file.
    let t_c1_s = c.positive(&s.t_c1_s, "amdahl.t_c1_s")?;
    let parallel_fraction = c.fraction(&s.parallel_fraction, "amdahl.parallel_fraction")?;
    const LAWS: &str = "one of log, linear, quadratic";
    let law = match c.text(&s.comm.law, "amdahl.comm.law", LAWS)? {
        "log" => CommLaw::Log,
        "linear" => CommLaw::Linear,
        "quadratic" => CommLaw::Quadratic,
        _ => return Err(InputError::at(c.path, &s.comm.law, "amdahl.comm.law", LAWS)),
    };
    Ok(AmdahlSpec {
        t_c1_s,
        parallel_fraction,
        law,
        coeff_s: c.nonneg(&s.comm.coeff_s, "amdahl.comm.coeff_s")?,
        slowdown: s
            .slowdown
            .as_ref()
            .map(|v| c.expr_nonneg(v, "amdahl.slowdown", &["f", "fmax"]))
            .transpose()?,
        compute_w: s
            .compute_w
            .as_ref()
            .map(|v| c.expr_nonneg(v, "amdahl.compute_w", F))
            .transpose()?,
        blocked_w: s
            .blocked_w
            .as_ref()
            .map(|v| c.nonneg(v, "amdahl.blocked_w"))
            .transpose()?,
    })
}

fn check_gpu(c: &Checker, s: &GpuFile) -> Result<GpuBusy, InputError> {
    let nodes = c.number(&s.nodes, "gpu.nodes", "a whole number >= 1", |x| {
        x >= 1.0 && x.fract() == 0.0 && x < 1.0e9
    })? as usize;
    if s.node_types.is_empty() {
        return Err(InputError::new(
            file_origin(c.path, &s.nodes.referenced),
            "gpu.node_types",
            "{}",
            "at least one node type with GPUs",
        ));
    }
    let mut types = BTreeMap::new();
    for (name, t) in &s.node_types {
        let k = |x: &str| format!("gpu.node_types.{name}.{x}");
        let clock_mhz = t
            .clock_mhz
            .as_ref()
            .map(|v| {
                c.number(
                    v,
                    &k("clock_mhz"),
                    "an SM clock in MHz, a whole number in 1-10000",
                    |x| (1.0..=10_000.0).contains(&x) && x.fract() == 0.0,
                )
            })
            .transpose()?
            .map(|x| x as u32);
        types.insert(
            name.clone(),
            TypeBusy {
                busy_s: c.nonneg(&t.busy_s, &k("busy_s"))?,
                clock_mhz,
                power_w: t
                    .power_w
                    .as_ref()
                    .map(|v| c.nonneg(v, &k("power_w")))
                    .transpose()?,
            },
        );
    }
    Ok(GpuBusy { nodes, types })
}

fn check_hetero(
    c: &Checker,
    s: &HeteroFile,
) -> Result<(BTreeMap<String, TypeTimes>, f64), InputError> {
    let iterations = c.positive(&s.iterations, "hetero.iterations")?;
    if s.node_types.is_empty() {
        return Err(InputError::new(
            file_origin(c.path, &s.iterations.referenced),
            "hetero.node_types",
            "{}",
            "at least one node type",
        ));
    }
    let mut types = BTreeMap::new();
    for (name, t) in &s.node_types {
        let k = |x: &str| format!("hetero.node_types.{name}.{x}");
        types.insert(
            name.clone(),
            TypeTimes {
                t_cp_s: c.nonneg(&t.t_cp_s, &k("t_cp_s"))?,
                t_cm_s: c.nonneg(&t.t_cm_s, &k("t_cm_s"))?,
                p_dyn_w: t
                    .p_dyn_w
                    .as_ref()
                    .map(|v| c.nonneg(v, &k("p_dyn_w")))
                    .transpose()?,
                p_static_w: t
                    .p_static_w
                    .as_ref()
                    .map(|v| c.nonneg(v, &k("p_static_w")))
                    .transpose()?,
                t_mem_s: t
                    .t_mem_s
                    .as_ref()
                    .map(|v| c.nonneg(v, &k("t_mem_s")))
                    .transpose()?,
                t_mem_fit: t
                    .t_mem_fit
                    .as_ref()
                    .map(|f| check_clock_fit(c, f, &k("t_mem_fit")))
                    .transpose()?,
                lead: t
                    .lead
                    .as_ref()
                    .map(|v| c.number(v, &k("lead"), "a finite number >= 1", |x| x >= 1.0))
                    .transpose()?,
                wait_share: t
                    .wait_share
                    .as_ref()
                    .map(|v| {
                        c.number(v, &k("wait_share"), "a number from 0 to 1", |x| {
                            (0.0..=1.0).contains(&x)
                        })
                    })
                    .transpose()?,
            },
        );
    }
    Ok((types, iterations))
}

/// The `steps:`, `step_windows:` and `model_choice:` of a hetero section: every share
/// names one of the section's node types and is a finite number >= 0; window lengths
/// are finite, > 0 and each listed once.
#[allow(clippy::type_complexity)]
fn check_steps(
    c: &Checker,
    s: &HeteroFile,
) -> Result<(Option<Steps>, Vec<(f64, Steps)>, Option<ModelChoice>), InputError> {
    let steps = s
        .steps
        .as_ref()
        .map(|list| check_classes(c, s, list, "hetero.steps", "(or no steps: key)"))
        .transpose()?;
    let mut windows: Vec<(f64, Steps)> = Vec::new();
    if let Some(list) = &s.step_windows {
        if list.is_empty() {
            return Err(InputError::new(
                file_origin(c.path, &s.iterations.referenced),
                "hetero.step_windows",
                "[]",
                "at least one window length with its classes (or no step_windows: key)",
            ));
        }
        for (i, w) in list.iter().enumerate() {
            let key = format!("hetero.step_windows[{i}].window_s");
            let window_s = c.positive(&w.window_s, &key)?;
            if windows.iter().any(|(x, _)| *x == window_s) {
                return Err(InputError::at(
                    c.path,
                    &w.window_s,
                    &key,
                    "a window length not already listed",
                ));
            }
            let classes = check_classes(
                c,
                s,
                &w.classes,
                &format!("hetero.step_windows[{i}].classes"),
                "",
            )?;
            windows.push((window_s, classes));
        }
        windows.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let choice = match &s.model_choice {
        None => None,
        Some(m) => {
            let k = |x: &str| format!("hetero.model_choice.{x}");
            let word = c.text(&m.winner, &k("winner"), "max or steps")?;
            let winner = TimeModel::parse(word)
                .ok_or_else(|| InputError::at(c.path, &m.winner, &k("winner"), "max or steps"))?;
            if winner == TimeModel::Steps && steps.is_none() {
                return Err(InputError::at(
                    c.path,
                    &m.winner,
                    &k("winner"),
                    "max, or add a steps: list to the hetero section",
                ));
            }
            Some(ModelChoice {
                winner,
                max_model_error: c.nonneg(&m.max_model_error, &k("max_model_error"))?,
                step_model_error: c.nonneg(&m.step_model_error, &k("step_model_error"))?,
                runs: c.number(&m.runs, &k("runs"), "a whole number >= 0", |x| {
                    (0.0..4.0e9).contains(&x) && x.fract() == 0.0
                })? as u32,
                window_s: m
                    .window_s
                    .as_ref()
                    .map(|v| c.positive(v, &k("window_s")))
                    .transpose()?,
            })
        }
    };
    Ok((steps, windows, choice))
}

/// One list of step classes at `key` (`hetero.steps` or a `step_windows` entry's
/// `classes`), checked against the section's node types; `absent` says how to do
/// without the list, where one may.
fn check_classes(
    c: &Checker,
    s: &HeteroFile,
    list: &[StepClassFile],
    key: &str,
    absent: &str,
) -> Result<Steps, InputError> {
    let known: Vec<&str> = s.node_types.keys().map(String::as_str).collect();
    if list.is_empty() {
        return Err(InputError::new(
            file_origin(c.path, &s.iterations.referenced),
            key,
            "[]",
            format!("at least one step class {absent}").trim_end(),
        ));
    }
    let mut classes = Vec::with_capacity(list.len());
    for (k, class) in list.iter().enumerate() {
        let key = |x: &str| format!("{key}[{k}].{x}");
        let steps = c.number(&class.steps, &key("steps"), "a whole number >= 1", |x| {
            x >= 1.0 && x.fract() == 0.0 && x < 9.0e15
        })? as u64;
        let mut share = BTreeMap::new();
        for (ty, v) in &class.share {
            if !known.contains(&ty.as_str()) {
                return Err(InputError::at(
                    c.path,
                    v,
                    &key(&format!("share.{ty}")),
                    format!(
                        "a node type of this hetero section ({}) as the key",
                        known.join(", ")
                    ),
                ));
            }
            share.insert(ty.clone(), c.nonneg(v, &key(&format!("share.{ty}")))?);
        }
        classes.push(StepClass { steps, share });
    }
    for ty in &known {
        if !classes
            .iter()
            .any(|cl| cl.share.get(*ty).is_some_and(|&x| x > 0.0))
        {
            return Err(InputError::new(
                file_origin(c.path, &s.iterations.referenced),
                key,
                format!("no share for {ty}"),
                format!(
                    "a share > 0 for every node type of the section ({}) in some class",
                    known.join(", ")
                ),
            ));
        }
    }
    Ok(Steps { classes })
}

fn check_clock_fit(c: &Checker, f: &ClockFitFile, key: &str) -> Result<ClockFit, InputError> {
    let k = |x: &str| format!("{key}.{x}");
    // A fit needs two clocks, and so at least two runs.
    let whole = |v: &Spanned<Param>, x: &str| {
        c.number(v, &k(x), "a whole number >= 2", |n| {
            (2.0..4.0e9).contains(&n) && n.fract() == 0.0
        })
        .map(|n| n as u32)
    };
    Ok(ClockFit {
        clocks: whole(&f.clocks, "clocks")?,
        samples: whole(&f.samples, "samples")?,
        rms_error: c.nonneg(&f.rms_error, &k("rms_error"))?,
        source: c
            .text(
                &f.source,
                &k("source"),
                "text saying where the runs came from",
            )?
            .to_string(),
    })
}
