//! Application profiles (`etc/profiles/NAME.yaml`): the parameters of one or
//! more models for one application, checked once when the file is read.
//!
//! A profile names itself, carries a version (refined profiles are written
//! back as new versions), and holds any of the sections `iso_energy`,
//! `roofline`, `amdahl` and `hetero`. [`Profile::predictor`] turns the chosen
//! section and the site's node types into a [`Predictor`]. The format is
//! documented in docs/profiles.md.

pub mod refine;
pub mod versions;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::expr::Expr;
use crate::input::{InputError, Origin, Spanned, file_origin, parse_yaml};
use crate::model::amdahl::{Amdahl, CommLaw};
use crate::model::hetero::{Hetero, TypeTimes};
use crate::model::iso_energy::{AppVector, IsoEnergy, MachineVector};
use crate::model::roofline::Roofline;
use crate::model::{ModelError, Predictor};
use crate::site::Site;

/// The model names a profile section may have, in the order used when several are present.
pub const MODEL_PREFERENCE: [&str; 4] = ["hetero", "amdahl", "iso_energy", "roofline"];

/// A number or an arithmetic expression, as written in a profile.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// A plain number.
    Number(f64),
    /// An expression such as `"109.4 * n"`.
    Text(String),
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Param::Number(x) => write!(f, "{x}"),
            Param::Text(s) => write!(f, "{s}"),
        }
    }
}

impl Serialize for Param {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Param::Number(x) => s.serialize_f64(*x),
            Param::Text(t) => s.serialize_str(t),
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
    pub name: Spanned<String>,
    /// Version number, 1 and up; each refinement writes the next one.
    pub version: Spanned<u64>,
    /// Free text for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Which model section to use when several are present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<Spanned<String>>,
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
}

/// `iso_energy:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IsoEnergyFile {
    /// Problem size n used when greenup plans the job.
    pub n: Spanned<f64>,
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
    /// Watts of one processor's whole system when idle.
    pub p_idle: Spanned<Param>,
    /// Extra watts while computing.
    pub dp_c: Spanned<Param>,
    /// Extra watts while accessing memory.
    pub dp_m: Spanned<Param>,
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
    pub t_c1_s: Spanned<f64>,
    /// Parallel fraction F_p of the computation (0 to 1).
    pub parallel_fraction: Spanned<f64>,
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
    pub blocked_w: Option<Spanned<f64>>,
}

/// The communication law of an `amdahl:` section: `T_B(n) = c * (g(n) - g(1))`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommFile {
    /// `log` (g = log2 n), `linear` (g = n) or `quadratic` (g = n^2).
    pub law: Spanned<String>,
    /// Seconds per unit of g(n).
    pub coeff_s: Spanned<f64>,
}

/// `hetero:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeteroFile {
    /// Iterations the job runs.
    pub iterations: Spanned<f64>,
    /// Measurements per site node type.
    pub node_types: BTreeMap<String, HeteroTypeFile>,
}

/// One node type's measurements in a `hetero:` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeteroTypeFile {
    /// Compute seconds per iteration at maximum frequency.
    pub t_cp_s: Spanned<f64>,
    /// Communication seconds per iteration at maximum frequency.
    pub t_cm_s: Spanned<f64>,
    /// Dynamic watts at maximum frequency (default: the site's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_dyn_w: Option<Spanned<f64>>,
    /// Static watts (default: the site's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_static_w: Option<Spanned<f64>>,
}

/// A checked profile: the file as written plus its parsed models.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The file it came from (or the name given to [`Profile::from_str`]).
    pub path: PathBuf,
    /// The schema as written, for writing refined versions back.
    pub file: ProfileFile,
    iso_energy: Option<IsoEnergy>,
    roofline: Option<Roofline>,
    amdahl: Option<AmdahlSpec>,
    hetero: Option<BTreeMap<String, TypeTimes>>,
    hetero_iterations: f64,
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

    fn nonneg(&self, v: &Spanned<f64>, key: &str) -> Result<f64, InputError> {
        if v.value.is_finite() && v.value >= 0.0 {
            Ok(v.value)
        } else {
            Err(InputError::at(self.path, v, key, "a finite number >= 0"))
        }
    }

    fn positive(&self, v: &Spanned<f64>, key: &str) -> Result<f64, InputError> {
        if v.value.is_finite() && v.value > 0.0 {
            Ok(v.value)
        } else {
            Err(InputError::at(self.path, v, key, "a finite number > 0"))
        }
    }

    fn fraction(&self, v: &Spanned<f64>, key: &str) -> Result<f64, InputError> {
        if (0.0..=1.0).contains(&v.value) {
            Ok(v.value)
        } else {
            Err(InputError::at(self.path, v, key, "a number from 0 to 1"))
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
        let text = std::fs::read_to_string(path).map_err(|e| {
            InputError::bare(
                Origin::Path(path.to_path_buf()),
                format!("cannot read profile: {e}"),
            )
        })?;
        Profile::from_str(path, &text)
    }

    /// Check a profile given as text; `path` names it in errors.
    pub fn from_str(path: &Path, text: &str) -> Result<Profile, InputError> {
        let file: ProfileFile = parse_yaml(path, text)?;
        Profile::from_file(path, file)
    }

    /// Check a profile schema value (e.g. one built by refinement).
    pub fn from_file(path: &Path, file: ProfileFile) -> Result<Profile, InputError> {
        let c = Checker { path };
        let name = &file.name;
        if name.value.is_empty()
            || !name
                .value
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'))
        {
            return Err(InputError::at(
                path,
                name,
                "name",
                "a non-empty name of letters, digits, '-', '_' or '.'",
            ));
        }
        if file.version.value == 0 {
            return Err(InputError::at(
                path,
                &file.version,
                "version",
                "a whole number >= 1",
            ));
        }
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
        let (hetero, hetero_iterations) = match &file.hetero {
            Some(h) => {
                let (t, i) = check_hetero(&c, h)?;
                (Some(t), i)
            }
            None => (None, 0.0),
        };
        let profile = Profile {
            path: path.to_path_buf(),
            file,
            iso_energy,
            roofline,
            amdahl,
            hetero,
            hetero_iterations,
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
        if let Some(p) = &profile.file.prefer
            && !present.contains(&p.value.as_str())
        {
            return Err(InputError::at(
                path,
                p,
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
        &self.file.name.value
    }

    /// The profile version.
    pub fn version(&self) -> u64 {
        self.file.version.value
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
        if let Some(p) = &self.file.prefer
            && let Some(m) = present.iter().find(|m| **m == p.value)
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

    /// The predictor of a named model section on this site's node types.
    pub fn predictor_for(
        &self,
        model: &str,
        site: &Site,
    ) -> Result<Box<dyn Predictor + Send + Sync>, ModelError> {
        let missing = || {
            ModelError::Config(format!(
                "profile '{}' has no '{model}' section",
                self.name()
            ))
        };
        match model {
            "hetero" => {
                let types = self.hetero.as_ref().ok_or_else(missing)?;
                Ok(Box::new(Hetero {
                    iterations: self.hetero_iterations,
                    types: types.clone(),
                    site_types: site.node_types.clone(),
                }))
            }
            "amdahl" => {
                let a = self.amdahl.as_ref().ok_or_else(missing)?;
                Ok(Box::new(Amdahl {
                    t_c1_s: a.t_c1_s,
                    parallel_fraction: a.parallel_fraction,
                    law: a.law,
                    coeff_s: a.coeff_s,
                    slowdown: a.slowdown.clone(),
                    compute_w: a.compute_w.clone(),
                    blocked_w: a.blocked_w,
                    site_types: site.node_types.clone(),
                }))
            }
            "iso_energy" => Ok(Box::new(self.iso_energy.clone().ok_or_else(missing)?)),
            "roofline" => Ok(Box::new(self.roofline.clone().ok_or_else(missing)?)),
            _ => Err(missing()),
        }
    }

    /// The profile as YAML text, positions dropped; used to write refined versions.
    pub fn to_yaml(&self) -> Result<String, String> {
        serde_saphyr::to_string(&self.file).map_err(|e| e.to_string())
    }
}

const F: &[&str] = &["f"];
const NP: &[&str] = &["n", "p"];
const P: &[&str] = &["p"];

fn check_iso(c: &Checker, s: &IsoEnergyFile) -> Result<IsoEnergy, InputError> {
    let m = &s.machine;
    let a = &s.application;
    let k = |x: &str| format!("iso_energy.machine.{x}");
    let ka = |x: &str| format!("iso_energy.application.{x}");
    let machine = MachineVector {
        t_c: c.expr_nonneg(&m.t_c, &k("t_c"), F)?,
        t_m: c.expr_nonneg(&m.t_m, &k("t_m"), F)?,
        t_msg: c.expr_nonneg(&m.t_msg, &k("t_msg"), F)?,
        t_byte: c.expr_nonneg(&m.t_byte, &k("t_byte"), F)?,
        p_idle: c.expr_nonneg(&m.p_idle, &k("p_idle"), F)?,
        dp_c: c.expr_nonneg(&m.dp_c, &k("dp_c"), F)?,
        dp_m: c.expr_nonneg(&m.dp_m, &k("dp_m"), F)?,
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
    let law = match s.comm.law.value.as_str() {
        "log" => CommLaw::Log,
        "linear" => CommLaw::Linear,
        "quadratic" => CommLaw::Quadratic,
        _ => {
            return Err(InputError::at(
                c.path,
                &s.comm.law,
                "amdahl.comm.law",
                "one of log, linear, quadratic",
            ));
        }
    };
    Ok(AmdahlSpec {
        t_c1_s: c.positive(&s.t_c1_s, "amdahl.t_c1_s")?,
        parallel_fraction: c.fraction(&s.parallel_fraction, "amdahl.parallel_fraction")?,
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

fn check_hetero(
    c: &Checker,
    s: &HeteroFile,
) -> Result<(BTreeMap<String, TypeTimes>, f64), InputError> {
    let iterations = c.positive(&s.iterations, "hetero.iterations")?;
    if s.node_types.is_empty() {
        return Err(InputError::at(
            c.path,
            &s.iterations,
            "hetero.node_types",
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
            },
        );
    }
    Ok((types, iterations))
}

/// Where a spanned value sits, for callers that report their own errors.
pub fn origin_of<T>(path: &Path, v: &Spanned<T>) -> Origin {
    file_origin(path, &v.referenced)
}
