//! Amdahl computation plus a fitted communication law (paper 003, Springer
//! et al., section 3.2).
//!
//! On n nodes at gear (frequency) g:
//!
//! - `T_C(g, n) = S_g * T_C(0, 1) * (F_p / n + 1 - F_p)`
//! - `T_B(n) = c * (g(n) - g(1))`, with g = log2 n, n or n^2: no blocking on one node,
//!   and blocking time independent of the gear
//! - `T = T_C + T_B`, `E = n * (T_C * P_C(g) + T_B * P_B)`
//!
//! `S_g` defaults to `f_max / f` (a compute-bound slowdown); `P_C(g)` defaults
//! to the site's dynamic plus static power of the node type at f, `P_B` to
//! its static power. In the [`SweepTable`]: `compute_s = T_C`,
//! `dynamic_j = (P_C - P_B) * T_C`, `static_w = P_B`, `fixed_time_s = T_B`,
//! which sums to the equation above when every node runs one gear.
//!
//! [`fit`] recovers `T_C(0, 1)`, `F_p` and the law from measured runs by
//! least squares, trying all three laws and keeping the one with the lowest
//! average relative error, as the paper does.

use std::collections::BTreeMap;

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

use super::{
    Choice, ModelError, NodeSlot, Predictor, SweepTable, finite, finite_or, node_count, node_freq,
    power_error, rows_by_kind, site_type,
};
use crate::expr::Expr;
use crate::model::NodeType;

/// How blocking-communication time grows with the node count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommLaw {
    /// `c * log2 n`.
    Log,
    /// `c * (n - 1)`.
    Linear,
    /// `c * (n^2 - 1)`.
    Quadratic,
}

impl CommLaw {
    /// All laws, in the order ties are broken.
    pub const ALL: [CommLaw; 3] = [CommLaw::Log, CommLaw::Linear, CommLaw::Quadratic];

    /// The name written in profiles.
    pub fn name(self) -> &'static str {
        match self {
            CommLaw::Log => "log",
            CommLaw::Linear => "linear",
            CommLaw::Quadratic => "quadratic",
        }
    }

    /// `g(n) - g(1)`: the law's growth, zero on one node.
    pub fn growth(self, n: f64) -> f64 {
        match self {
            CommLaw::Log => n.log2(),
            CommLaw::Linear => n - 1.0,
            CommLaw::Quadratic => n * n - 1.0,
        }
    }
}

/// The Amdahl model of one application on a site's node types.
#[derive(Debug, Clone, PartialEq)]
pub struct Amdahl {
    /// Compute seconds on one node at maximum frequency, T_C(0,1).
    pub t_c1_s: f64,
    /// Parallel fraction F_p.
    pub parallel_fraction: f64,
    /// Communication law.
    pub law: CommLaw,
    /// Seconds per unit of the law's growth.
    pub coeff_s: f64,
    /// Slowdown at `f` against `fmax` (variables `f`, `fmax`); `None` means `fmax / f`.
    pub slowdown: Option<Expr>,
    /// Watts of one node computing at `f`; `None` means the site's dynamic + static power.
    pub compute_w: Option<Expr>,
    /// Watts of one node blocked in communication; `None` means the site's static power.
    pub blocked_w: Option<f64>,
    /// The site's node types.
    pub site_types: BTreeMap<String, NodeType>,
}

impl Amdahl {
    /// Blocking time T_B(n) in seconds.
    pub fn blocked_s(&self, n: usize) -> f64 {
        self.coeff_s * self.law.growth(n as f64)
    }

    /// Compute time at maximum frequency on n nodes, T_C(0, n), in seconds.
    pub fn compute_s(&self, n: usize) -> f64 {
        self.t_c1_s * (self.parallel_fraction / n as f64 + 1.0 - self.parallel_fraction)
    }
}

impl Predictor for Amdahl {
    fn name(&self) -> &'static str {
        "amdahl"
    }

    fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError> {
        let n = node_count(nodes)?;
        let tc0 = self.compute_s(n);
        let rows = rows_by_kind(nodes, |slot| {
            let nt = site_type(&self.site_types, slot)?;
            let fmax = nt.fmax();
            let site_err = power_error(nt);
            let p_b = match self.blocked_w {
                Some(w) => w,
                None => nt.static_w(fmax).map_err(site_err)?,
            };
            let p_b = finite_or(p_b, || format!("blocked power of node {}", slot.name))?;
            let mut choices = Vec::with_capacity(slot.freqs_ghz.len());
            for &f in &slot.freqs_ghz {
                let f = node_freq(slot, f)?;
                let s = match &self.slowdown {
                    Some(e) => e.eval(&[f, fmax]).map_err(|m| ModelError::Expression {
                        what: "amdahl slowdown".into(),
                        message: m.to_string(),
                    })?,
                    None => fmax / f,
                };
                let p_c = match &self.compute_w {
                    Some(e) => e.eval(&[f]).map_err(|m| ModelError::Expression {
                        what: "amdahl compute_w".into(),
                        message: m.to_string(),
                    })?,
                    None => {
                        nt.dynamic_w(f).map_err(site_err)? + nt.static_w(f).map_err(site_err)?
                    }
                };
                if p_c < p_b {
                    return Err(ModelError::ComputeBelowBlocked {
                        node: slot.name.clone(),
                        ghz: f,
                        compute_w: p_c,
                        blocked_w: p_b,
                    });
                }
                let compute_s = finite_or(s * tc0, || {
                    format!("amdahl compute time of node {} at {f} GHz", slot.name)
                })?;
                choices.push(Choice {
                    wait_w: 0.0,
                    gpu_mhz: None,
                    freq_ghz: f,
                    compute_s,
                    dynamic_j: finite_or((p_c - p_b) * compute_s, || {
                        format!("amdahl energy of node {} at {f} GHz", slot.name)
                    })?,
                });
            }
            Ok((choices, p_b))
        })?;
        Ok(SweepTable {
            nodes: rows,
            fixed_time_s: finite("amdahl blocking time", self.blocked_s(n))?,
            fixed_energy_j: 0.0,
            steps: None,
        })
    }
}

/// One measured run at maximum frequency, for [`fit`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Nodes used.
    pub nodes: usize,
    /// Wall time in seconds.
    pub time_s: f64,
    /// Seconds blocked in communication, when measured (e.g. by MPI profiling).
    pub blocked_s: Option<f64>,
}

/// The result of [`fit`]: the parameters of an `amdahl:` profile section and how well they fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AmdahlFit {
    /// T_C(0,1) in seconds.
    pub t_c1_s: f64,
    /// F_p.
    pub parallel_fraction: f64,
    /// The chosen law.
    pub law: CommLaw,
    /// The law's coefficient in seconds.
    pub coeff_s: f64,
    /// Mean of |predicted - measured| / measured wall time over the runs.
    pub avg_rel_error: f64,
    /// Every law tried and its average error (`None` when its fit was not physical).
    pub tried: Vec<(CommLaw, Option<f64>)>,
}

/// Why runs could not be fitted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    /// Too few runs or too few distinct node counts.
    #[error("need at least {need} runs on {need} different node counts, got {got}")]
    TooFewRuns {
        /// Runs (and node counts) the fit needs.
        need: usize,
        /// Runs given.
        got: usize,
    },
    /// A run is unusable.
    #[error("run {index}: {reason}")]
    BadRun {
        /// The run's position in the input, from 0.
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// No law gave a physical fit (0 <= F_p <= 1, T_C(0,1) > 0, c >= 0).
    #[error("no communication law fits these runs with 0 <= F_p <= 1 and non-negative times")]
    NoValidLaw,
}

/// Least squares of `x * beta = y` by SVD (pure Rust, no LAPACK).
fn lstsq(rows: &[Vec<f64>], y: &[f64]) -> Option<Vec<f64>> {
    let k = rows.first()?.len();
    let x = DMatrix::from_fn(rows.len(), k, |i, j| rows[i][j]);
    let y = DVector::from_column_slice(y);
    let beta = x.svd(true, true).solve(&y, 1e-12).ok()?;
    let out: Vec<f64> = beta.iter().copied().collect();
    out.iter().all(|v| v.is_finite()).then_some(out)
}

/// Fit F_p, T_C(0,1) and the communication law to runs at maximum frequency.
///
/// With only wall times the model `T(n) = A/n + B + c h(n)` (A = F_p T_C(0,1),
/// B = (1 - F_p) T_C(0,1), h the law's growth) has three unknowns: it needs
/// three node counts, and with exactly three every law fits exactly; ties go
/// to log, then linear, then quadratic. When every run also has its blocked
/// time, computation `A/n + B` and communication `c h(n)` are fitted
/// separately (the paper's method), and three runs discriminate the laws.
pub fn fit(runs: &[Run]) -> Result<AmdahlFit, FitError> {
    for (i, r) in runs.iter().enumerate() {
        if r.nodes == 0 {
            return Err(FitError::BadRun {
                index: i,
                reason: "node count is 0".into(),
            });
        }
        if !(r.time_s.is_finite() && r.time_s > 0.0) {
            return Err(FitError::BadRun {
                index: i,
                reason: format!("time {} s is not positive", r.time_s),
            });
        }
        if let Some(b) = r.blocked_s
            && !(b.is_finite() && (0.0..=r.time_s).contains(&b))
        {
            return Err(FitError::BadRun {
                index: i,
                reason: format!("blocked time {b} s is not within 0..time"),
            });
        }
    }
    let mut distinct: Vec<usize> = runs.iter().map(|r| r.nodes).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let split = runs.iter().all(|r| r.blocked_s.is_some());
    let need = if split { 2 } else { 3 };
    if runs.len() < 3 || distinct.len() < need {
        return Err(FitError::TooFewRuns {
            need: 3,
            got: runs.len().min(distinct.len()),
        });
    }
    let tmax = runs.iter().map(|r| r.time_s).fold(0.0, f64::max);
    let tol = 1e-9 * tmax.max(1.0);

    // The computation part does not depend on the law when blocked times are known.
    let compute_ab = if split {
        let rows: Vec<Vec<f64>> = runs
            .iter()
            .map(|r| vec![1.0 / r.nodes as f64, 1.0])
            .collect();
        let y: Vec<f64> = runs
            .iter()
            .map(|r| r.time_s - r.blocked_s.unwrap_or(0.0))
            .collect();
        Some(lstsq(&rows, &y).ok_or(FitError::NoValidLaw)?)
    } else {
        None
    };

    let mut best: Option<AmdahlFit> = None;
    let mut tried = Vec::new();
    for law in CommLaw::ALL {
        let params = match &compute_ab {
            Some(ab) => {
                let rows: Vec<Vec<f64>> = runs
                    .iter()
                    .map(|r| vec![law.growth(r.nodes as f64)])
                    .collect();
                let y: Vec<f64> = runs.iter().map(|r| r.blocked_s.unwrap_or(0.0)).collect();
                lstsq(&rows, &y).map(|c| (ab[0], ab[1], c[0]))
            }
            None => {
                let rows: Vec<Vec<f64>> = runs
                    .iter()
                    .map(|r| vec![1.0 / r.nodes as f64, 1.0, law.growth(r.nodes as f64)])
                    .collect();
                let y: Vec<f64> = runs.iter().map(|r| r.time_s).collect();
                lstsq(&rows, &y).map(|b| (b[0], b[1], b[2]))
            }
        };
        let Some((a, b, c)) = params else {
            tried.push((law, None));
            continue;
        };
        let t1 = a + b;
        if t1.is_nan() || t1 <= 0.0 || a < -tol || b < -tol || c < -tol {
            tried.push((law, None));
            continue;
        }
        let fp = (a / t1).clamp(0.0, 1.0);
        let c = c.max(0.0);
        let err = runs
            .iter()
            .map(|r| {
                let n = r.nodes as f64;
                let pred = t1 * (fp / n + 1.0 - fp) + c * law.growth(n);
                (pred - r.time_s).abs() / r.time_s
            })
            .sum::<f64>()
            / runs.len() as f64;
        tried.push((law, Some(err)));
        // Strictly lower error wins, so ties keep the earlier (simpler) law.
        if best.as_ref().is_none_or(|b| err < b.avg_rel_error - 1e-12) {
            best = Some(AmdahlFit {
                t_c1_s: t1,
                parallel_fraction: fp,
                law,
                coeff_s: c,
                avg_rel_error: err,
                tried: Vec::new(),
            });
        }
    }
    let mut out = best.ok_or(FitError::NoValidLaw)?;
    out.tried = tried;
    Ok(out)
}
