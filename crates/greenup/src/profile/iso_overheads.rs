//! iso_energy's overhead terms (paper 000: W_co, W_mo, M and B) refitted from what
//! greenup's MPI runtime measured in each run, and the waiting share of the machine
//! vector from the runs' measured energy ([`wait_share`]).
//!
//! - **M and B** are counts: the calls the job's ranks made and the bytes they moved,
//!   summed over all nodes (the runtime counts a point-to-point message at both ends, so
//!   these are the runtime's counts, not the paper's messages sent; `t_msg` and `t_byte`
//!   then price one counted call and one counted byte, and alpha absorbs the difference).
//! - **W_co and W_mo**: the runtime's time outside MPI, summed over nodes, is the run's
//!   computation and memory time `(W_c+W_co) t_c + (W_m+W_mo) t_m` (eq. 15). What lies
//!   beyond the sequential work's `W_c t_c + W_m t_m` at the run's frequencies is the
//!   overhead time `W_co t_c + W_mo t_m`. Runs whose `t_c / t_m` differ (DVFS changes
//!   `t_c`, rarely `t_m`) separate the two; runs that all share one ratio cannot, and
//!   then W_mo keeps the profile's law and W_co takes the rest.
//!
//! Each term keeps the profile's expression and gets a new coefficient (`k * (law)`)
//! when the runs cover two node counts. With three or more node counts the law itself
//! is chosen, by the lowest RMS relative error, among the profile's own and [`LAWS`]; a
//! tie goes to the profile's. A law from [`LAWS`] is fitted at the profile's `n`.

use super::outcome::Outcome;
use crate::expr::{Expr, ExprError};
use crate::model::ModelError;
use crate::model::iso_energy::IsoEnergy;

const NP: &[&str] = &["n", "p"];

/// The laws of p (totals over all processors) offered when the runs can choose one:
/// per-processor constant, none on one processor, one data set shared out (each rank
/// keeps 1/p of it and receives the rest, as an all-to-all sort does: NAS IS's bytes), a
/// tree per processor, all pairs.
pub const LAWS: [&str; 5] = ["p", "p - 1", "(p - 1) / p", "p * log2(p)", "p * (p - 1)"];

/// Two columns whose squared cosine exceeds this are too close to tell apart.
const MAX_COS2: f64 = 0.99;

/// What the runtime measured in one run, summed over its nodes, with the machine
/// vector's per-node mean `t_c` and `t_m` at the nodes' frequencies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    /// Nodes (processors).
    pub p: usize,
    /// Mean seconds per instruction over the nodes.
    pub t_c: f64,
    /// Mean seconds per memory access over the nodes.
    pub t_m: f64,
    /// Seconds outside MPI, summed over the nodes.
    pub compute_s: f64,
    /// Calls, all ranks.
    pub calls: f64,
    /// Bytes, all ranks.
    pub bytes: f64,
}

impl Run {
    /// The run as the runtime measured it; `None` when a node lacks a measurement.
    pub fn of(model: &IsoEnergy, o: &Outcome) -> Result<Option<Run>, ModelError> {
        let p = o.nodes.len();
        if p == 0 {
            return Ok(None);
        }
        let (mut t_c, mut t_m, mut compute_s, mut calls, mut bytes) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for n in &o.nodes {
            let (Some(c), Some(k), Some(b)) = (n.compute_s, n.calls, n.bytes) else {
                return Ok(None);
            };
            let ev = |e: &Expr, what: &str| {
                e.eval(&[n.freq_ghz]).map_err(|m| ModelError::Expression {
                    what: format!("iso_energy machine.{what}"),
                    message: m.to_string(),
                })
            };
            t_c += ev(&model.machine.t_c, "t_c")? / p as f64;
            t_m += ev(&model.machine.t_m, "t_m")? / p as f64;
            compute_s += c;
            calls += k as f64;
            bytes += b as f64;
        }
        Ok(Some(Run {
            p,
            t_c,
            t_m,
            compute_s,
            calls,
            bytes,
        }))
    }
}

/// The refitted terms, as profile expressions in n and p, and how they were fitted.
#[derive(Debug, Clone, PartialEq)]
pub struct Refit {
    /// Extra instructions of the parallel run.
    pub w_co: Expr,
    /// Extra memory accesses of the parallel run (the profile's when not separable).
    pub w_mo: Expr,
    /// Counted MPI calls.
    pub m: Expr,
    /// Counted bytes.
    pub b: Expr,
    /// One line for the fit record: the runs, each term's law and error.
    pub note: String,
}

/// A law as a shape to scale: its expression and the text written inside `k * (...)`.
#[derive(Clone)]
struct Shape {
    inner: String,
    expr: Expr,
    own: bool,
}

/// The law inside `current`: the text of `k * (law)` as this module writes it, without
/// `k`, so that refining a refined profile does not nest coefficients.
fn own_shape(current: &Expr) -> Shape {
    let src = current.source().trim();
    let stripped = src.split_once(" * (").and_then(|(k, rest)| {
        k.trim().parse::<f64>().ok()?;
        let inner = rest.strip_suffix(')')?;
        let mut depth = 0i32;
        for c in inner.chars() {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            if depth < 0 {
                return None;
            }
        }
        (depth == 0).then_some(inner)?;
        Expr::parse(inner, NP).ok().map(|e| (inner.to_string(), e))
    });
    let (inner, expr) = stripped.unwrap_or_else(|| (src.to_string(), current.clone()));
    Shape {
        inner,
        expr,
        own: true,
    }
}

/// The shapes a term may take: the profile's own unless it is zero at every run, and
/// the family of [`LAWS`] when `choose` (or when the profile's own is unusable).
fn shapes(current: &Expr, n: f64, ps: &[f64], choose: bool) -> Vec<Shape> {
    let own = own_shape(current);
    let usable = ps
        .iter()
        .map(|p| own.expr.eval(&[n, *p]))
        .collect::<Result<Vec<f64>, _>>()
        .is_ok_and(|v| v.iter().all(|x| x.is_finite()) && v.iter().any(|x| *x != 0.0));
    let mut out = Vec::new();
    if usable {
        out.push(own);
    }
    if choose || out.is_empty() {
        for law in LAWS {
            if out.iter().any(|s| s.inner == law) {
                continue;
            }
            if let Ok(expr) = Expr::parse(law, NP) {
                out.push(Shape {
                    inner: law.to_string(),
                    expr,
                    own: false,
                });
            }
        }
    }
    out
}

/// One term to fit: its current expression and, per run, what multiplies it
/// (`t_c` for W_co, `t_m` for W_mo, 1 for a count).
struct Term<'a> {
    current: &'a Expr,
    mult: Vec<f64>,
}

/// The best fit of `y ≈ Σ_j k_j g_j(n, p_r) mult_j[r]` over every combination of the
/// terms' shapes, weighted by `1 / scale²` (relative least squares). Returns each term's
/// shape and coefficient and the RMS relative error; `None` when no combination can be
/// solved (columns too close to tell apart, or zero).
fn fit(
    terms: &[Term],
    n: f64,
    ps: &[f64],
    y: &[f64],
    scale: &[f64],
    choose: bool,
) -> Option<(Vec<(Shape, f64)>, f64)> {
    let options: Vec<Vec<Shape>> = terms
        .iter()
        .map(|t| shapes(t.current, n, ps, choose))
        .collect();
    let mut best: Option<(Vec<(Shape, f64)>, f64)> = None;
    let mut pick = vec![0usize; terms.len()];
    'combos: loop {
        let cols: Option<Vec<Vec<f64>>> = terms
            .iter()
            .zip(&pick)
            .enumerate()
            .map(|(j, (t, &i))| {
                ps.iter()
                    .zip(&t.mult)
                    .zip(scale)
                    .map(|((p, m), s)| {
                        let g = options[j][i].expr.eval(&[n, *p]).ok()?;
                        Some(g * m / s).filter(|v| v.is_finite())
                    })
                    .collect()
            })
            .collect();
        let rhs: Vec<f64> = y.iter().zip(scale).map(|(y, s)| y / s).collect();
        if let Some(k) = cols.as_deref().and_then(|c| solve_nonneg(c, &rhs)) {
            let cols = cols.unwrap_or_default();
            let errs: Vec<f64> = (0..rhs.len())
                .map(|r| cols.iter().zip(&k).map(|(c, k)| c[r] * k).sum::<f64>() - rhs[r])
                .collect();
            let err = (errs.iter().map(|e| e * e).sum::<f64>() / errs.len() as f64).sqrt();
            if best.as_ref().is_none_or(|(_, b)| err < b * (1.0 - 1e-9)) {
                let chosen = pick
                    .iter()
                    .enumerate()
                    .map(|(j, &i)| (options[j][i].clone(), k[j]))
                    .collect();
                best = Some((chosen, err));
            }
        }
        // Next combination (odometer over the terms' options).
        for j in (0..pick.len()).rev() {
            pick[j] += 1;
            if pick[j] < options[j].len() {
                continue 'combos;
            }
            pick[j] = 0;
        }
        break;
    }
    best
}

/// Least squares `cols · k ≈ rhs` for one or two columns.
fn solve(cols: &[Vec<f64>], rhs: &[f64]) -> Option<Vec<f64>> {
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    match cols {
        [a] => {
            let aa = dot(a, a);
            (aa > 0.0).then(|| vec![dot(a, rhs) / aa])
        }
        [a, b] => {
            let (aa, ab, bb) = (dot(a, a), dot(a, b), dot(b, b));
            let det = aa * bb - ab * ab;
            if !(aa > 0.0 && bb > 0.0) || ab * ab > MAX_COS2 * aa * bb {
                return None;
            }
            let (ay, by) = (dot(a, rhs), dot(b, rhs));
            Some(vec![(ay * bb - by * ab) / det, (by * aa - ay * ab) / det])
        }
        _ => None,
    }
}

/// [`solve`] with every coefficient at least 0: each term counts extra calls, bytes,
/// instructions or memory accesses of the parallel run, none of which can be negative. A
/// negative coefficient (a host faster than the profile's t_c makes the measured compute
/// time fall short of the sequential work's) would let the model predict negative time
/// and energy at other node counts, and every later refinement of the profile would fail
/// on it; alpha takes up that shortfall instead. Exact for one or two columns: the best
/// of the unconstrained solution, when it is non-negative, and each column alone.
fn solve_nonneg(cols: &[Vec<f64>], rhs: &[f64]) -> Option<Vec<f64>> {
    let k = solve(cols, rhs)?;
    if k.iter().all(|v| *v >= 0.0) {
        return Some(k);
    }
    let err = |k: &[f64]| {
        (0..rhs.len())
            .map(|r| {
                let e = cols.iter().zip(k).map(|(c, k)| c[r] * k).sum::<f64>() - rhs[r];
                e * e
            })
            .sum::<f64>()
    };
    (0..cols.len())
        .map(|j| {
            let alone = solve(std::slice::from_ref(&cols[j]), rhs).map_or(0.0, |k| k[0].max(0.0));
            let mut k = vec![0.0; cols.len()];
            k[j] = alone;
            k
        })
        .min_by(|a, b| err(a).total_cmp(&err(b)))
}

/// Why a profile's communication overheads are kept as they are rather than refitted
/// from the runtime's measurements; the refined profile's note quotes it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RefitError {
    /// No run came with the MPI runtime's measurements.
    #[error("no run was measured by the MPI runtime")]
    NoRuns,
    /// Every measured run used the same node count, so overheads cannot be told from it.
    #[error("the runtime measured runs on one node count only (p = {p}); overheads need two")]
    OneNodeCount {
        /// The one node count measured.
        p: usize,
    },
    /// An application term of the profile could not be evaluated.
    #[error("application.{what}: {source}")]
    Term {
        /// The term (`w_c`, `w_m`, `w_mo`).
        what: String,
        /// Why the expression failed.
        source: ExprError,
    },
    /// An application term of the profile gives infinity or NaN at a measured node count.
    #[error("application.{what} is {value} at p = {p}")]
    TermNotFinite {
        /// The term (`w_c`, `w_m`, `w_mo`).
        what: String,
        /// What it gave.
        value: f64,
        /// The node count.
        p: f64,
    },
    /// None of the candidate laws fits the measurements of this term.
    #[error("{what}: no law fits")]
    NoLawFits {
        /// The term (`m`, `b`, `w_co`).
        what: String,
    },
    /// A run's compute time is all MPI time, so it says nothing of the overheads.
    #[error("a run on {p} nodes measured no time outside MPI; overheads kept")]
    NoComputeTime {
        /// The run's node count.
        p: f64,
    },
    /// The fitted law did not make a valid expression.
    #[error(transparent)]
    Law(#[from] ExprError),
}

/// `k * (law)` as a profile expression.
fn scaled(shape: &Shape, k: f64) -> Result<Expr, ExprError> {
    let src = if k == 0.0 {
        "0".to_string()
    } else {
        format!("{k:.6e} * ({})", shape.inner)
    };
    Expr::parse(&src, NP)
}

fn law_name(s: &Shape) -> String {
    if s.own {
        format!("profile's {}", s.inner)
    } else {
        s.inner.clone()
    }
}

/// Refit W_co, W_mo, M and B from `runs` (each measured on every node). `Err` says why
/// the profile's terms are kept: the runs must cover at least two node counts.
pub fn refit(model: &IsoEnergy, runs: &[Run]) -> Result<Refit, RefitError> {
    let mut counts: Vec<usize> = runs.iter().map(|r| r.p).collect();
    counts.sort_unstable();
    counts.dedup();
    if counts.len() < 2 {
        return Err(match counts.first() {
            None => RefitError::NoRuns,
            Some(&p) => RefitError::OneNodeCount { p },
        });
    }
    let choose = counts.len() >= 3;
    let n = model.n;
    let app = &model.app;
    let ps: Vec<f64> = runs.iter().map(|r| r.p as f64).collect();
    let ones = vec![1.0; runs.len()];
    let ev = |e: &Expr, p: f64, what: &str| {
        e.eval(&[n, p])
            .map_err(|source| RefitError::Term {
                what: what.to_string(),
                source,
            })
            .and_then(|v| {
                v.is_finite()
                    .then_some(v)
                    .ok_or_else(|| RefitError::TermNotFinite {
                        what: what.to_string(),
                        value: v,
                        p,
                    })
            })
    };

    // M and B: counts, relative to what was counted.
    let count = |current: &Expr, y: Vec<f64>, what: &str| -> Result<(Expr, String), RefitError> {
        let top = y.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        if top == 0.0 {
            return Ok((Expr::constant(0.0), format!("{what} 0")));
        }
        let scale: Vec<f64> = y.iter().map(|v| v.abs().max(1e-9 * top)).collect();
        let term = Term {
            current,
            mult: ones.clone(),
        };
        let (chosen, err) =
            fit(&[term], n, &ps, &y, &scale, choose).ok_or_else(|| RefitError::NoLawFits {
                what: what.to_string(),
            })?;
        let (shape, k) = &chosen[0];
        Ok((
            scaled(shape, *k)?,
            format!("{what} {} (rms {:.1}%)", law_name(shape), err * 100.0),
        ))
    };
    let (m, m_note) = count(&app.m, runs.iter().map(|r| r.calls).collect(), "m")?;
    let (b, b_note) = count(&app.b, runs.iter().map(|r| r.bytes).collect(), "b")?;

    // Overhead time beyond the sequential work, relative to the measured compute time.
    let mut over = Vec::with_capacity(runs.len());
    let mut scale = Vec::with_capacity(runs.len());
    for r in runs {
        let p = r.p as f64;
        let seq = ev(&app.w_c, p, "w_c")? * r.t_c + ev(&app.w_m, p, "w_m")? * r.t_m;
        if r.compute_s <= 0.0 {
            return Err(RefitError::NoComputeTime { p });
        }
        over.push(r.compute_s - seq);
        scale.push(r.compute_s);
    }
    let ratios: Vec<f64> = runs
        .iter()
        .filter(|r| r.t_m > 0.0)
        .map(|r| r.t_c / r.t_m)
        .collect();
    let spread = ratios.len() == runs.len()
        && ratios.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
            >= 1.05 * ratios.iter().cloned().fold(f64::INFINITY, f64::min);
    let t_cs: Vec<f64> = runs.iter().map(|r| r.t_c).collect();
    let t_ms: Vec<f64> = runs.iter().map(|r| r.t_m).collect();
    // Two coefficients from two runs always fit exactly: a third run is the check.
    let enough = runs.len() >= 3;
    let both = (spread && enough)
        .then(|| {
            let terms = [
                Term {
                    current: &app.w_co,
                    mult: t_cs.clone(),
                },
                Term {
                    current: &app.w_mo,
                    mult: t_ms.clone(),
                },
            ];
            fit(&terms, n, &ps, &over, &scale, choose)
        })
        .flatten();
    let (w_co, w_mo, o_note) = match both {
        Some((chosen, err)) => {
            let (co, kc) = &chosen[0];
            let (mo, km) = &chosen[1];
            (
                scaled(co, *kc)?,
                scaled(mo, *km)?,
                format!(
                    "w_co {}, w_mo {} (rms {:.1}% of compute time)",
                    law_name(co),
                    law_name(mo),
                    err * 100.0
                ),
            )
        }
        None => {
            // W_mo as the profile says; W_co takes the rest of the overhead time.
            let mut rest = Vec::with_capacity(runs.len());
            for (r, o) in runs.iter().zip(&over) {
                rest.push(o - ev(&app.w_mo, r.p as f64, "w_mo")? * r.t_m);
            }
            let term = Term {
                current: &app.w_co,
                mult: t_cs.clone(),
            };
            let (chosen, err) = fit(&[term], n, &ps, &rest, &scale, choose).ok_or_else(|| {
                RefitError::NoLawFits {
                    what: "w_co".to_string(),
                }
            })?;
            let (co, kc) = &chosen[0];
            let why = if !spread {
                "the runs share one t_c/t_m, so compute time cannot tell instructions from memory accesses"
            } else if !enough {
                "two runs fit two coefficients exactly and check nothing"
            } else {
                "its law cannot be told from w_co's"
            };
            (
                scaled(co, *kc)?,
                app.w_mo.clone(),
                format!(
                    "w_co {} (rms {:.1}% of compute time); w_mo kept: {why}",
                    law_name(co),
                    err * 100.0
                ),
            )
        }
    };
    let list: Vec<String> = counts.iter().map(|c| c.to_string()).collect();
    Ok(Refit {
        w_co,
        w_mo,
        m,
        b,
        note: format!(
            "overheads from {} runtime-measured runs on p = {}: {o_note}; {m_note}; {b_note}",
            runs.len(),
            list.join(", ")
        ),
    })
}

/// The waiting share learned from runs, and from how many.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WaitShare {
    /// The share of `dP_c` a processor draws while it waits in MPI, 0 to 1.
    pub share: f64,
    /// What the least-squares fit gave before it was held to 0..1.
    pub fitted: f64,
    /// Runs it was learned from.
    pub runs: usize,
}

/// The share of `dP_c` a processor draws while it waits in MPI, from runs whose every
/// node measured its energy and its time inside MPI: least squares of each run's
/// `E − Σ P_idle(f) T − Σ dP_c(f) c` on `Σ dP_c(f) w` (c the node's time outside MPI, w
/// inside, f its clock, the rest of T at idle), held to 0..1. The watts are the model's,
/// the site's node type's where it takes them, so the share is what the node draws
/// while it waits beyond what those watts already say. `None` when no run measured
/// both, or none waited.
///
/// Why one column: the watts come from their one home (the site, measured per clock by
/// RAPL); what is the program's own is how hard its ranks poll. Runs on several node
/// counts wait for different shares of their time, which is what lets the fit see it
/// even when every run ran at one clock.
pub fn wait_share(
    model: &IsoEnergy,
    outcomes: &[&Outcome],
) -> Result<Option<WaitShare>, ModelError> {
    let (mut xy, mut xx, mut runs) = (0.0, 0.0, 0);
    'runs: for o in outcomes {
        let (mut y, mut x) = (0.0, 0.0);
        for n in &o.nodes {
            let (Some(e), Some(c), Some(w)) = (n.energy_j, n.compute_s, n.comm_s) else {
                continue 'runs;
            };
            let (p_idle, dp_c, _) = model.watts(n.freq_ghz)?;
            y += e - p_idle * o.time_s - dp_c * c;
            x += dp_c * w;
        }
        if o.nodes.is_empty() || !(x.is_finite() && y.is_finite()) {
            continue;
        }
        xy += x * y;
        xx += x * x;
        runs += 1;
    }
    if runs == 0 || xx <= 0.0 {
        return Ok(None);
    }
    let fitted = xy / xx;
    Ok(Some(WaitShare {
        share: fitted.clamp(0.0, 1.0),
        fitted,
        runs,
    }))
}
