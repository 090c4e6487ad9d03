//! Learning from outcomes: refit an application's model parameters from the
//! measured runs, so the next prediction for it is better.
//!
//! Everything here is a pure function of a model and its outcomes. Each
//! returns the refined parameters, how many outcomes they came from and the
//! fit's residual; the caller stores them as a new profile version and never
//! touches the admin's file. Outliers (failed, cancelled, far too short, not
//! fully measured) are left out, and [`check`] says why so the report can.
//!
//! - hetero (paper 004): per node type compute time, communication time and
//!   dynamic and static power, all at maximum frequency.
//! - amdahl (paper 003): F_p and the communication law by the paper's
//!   regressions (the models' own [`amdahl::fit`]) once runs on three node
//!   counts exist, plus the per-gear slowdown S_g.
//! - iso_energy (paper 000): the overhead terms W_co, W_mo, M and B from the MPI
//!   runtime's measurements once they cover two node counts, then alpha = actual /
//!   theoretical execution time.

use std::collections::BTreeMap;

use crate::expr::Expr;
use crate::input::Spanned;
use crate::model::amdahl::{self, Amdahl, FitError};
use crate::model::hetero::{ClockFit, Hetero, TypeTimes, dynamic_shape};
use crate::model::iso_energy::{AppVector, IsoEnergy};
use crate::model::steps::{self, ModelChoice, Steps};
use crate::model::{ModelError, Predictor};
use crate::profile::iso_overheads::{self, Run};
use crate::profile::lead;
use crate::profile::versions::{Fit, Versions};
use crate::profile::{
    ClockFitFile, ModelChoiceFile, Param, Profile, ProfileFile, StepClassFile, unspanned,
};
use crate::record::JobRecord;
use crate::site::Site;
use greenup_core::fs::FileWrite;

pub use super::outcome::{NodeOutcome, Outcome, Outlier, check, outcome_from_record, usable};

/// Refined parameters, the outcomes they came from and how well they fit them.
#[derive(Debug, Clone, PartialEq)]
pub struct Refined<P> {
    /// The refined parameters.
    pub params: P,
    /// Outcomes used.
    pub samples: u32,
    /// Root-mean-square relative error of the refined model over those outcomes
    /// (energy for hetero, time for amdahl, alpha spread for iso_energy).
    pub residual: f64,
}

/// Why refinement could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RefineError {
    /// No outcome passed [`check`].
    #[error("no usable outcome to refine from")]
    NoSamples,
    /// The model could not predict an outcome's configuration.
    #[error("model: {0}")]
    Model(#[from] ModelError),
    /// The amdahl regression failed.
    #[error("amdahl fit: {0}")]
    Fit(#[from] FitError),
    /// The profile's model cannot be refined (roofline) or its section is missing.
    #[error("model '{0}' is not refined from outcomes")]
    NoModel(&'static str),
    /// An outcome ran on a node type the model does not know.
    #[error("node type '{0}' is not in the model")]
    UnknownType(String),
    /// The application's profile could not be found or read.
    #[error("{0}")]
    Profile(crate::input::InputError),
    /// The refined profile does not pass the checks every profile file passes.
    #[error("refined profile does not check: {0}")]
    Unchecked(crate::input::InputError),
}

fn rms(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        (v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64).sqrt()
    }
}

/// The outcomes that may refine; a refiner fitted from none would only restate its model.
fn usable_or_none(outcomes: &[Outcome]) -> Result<Vec<&Outcome>, RefineError> {
    let (used, _) = usable(outcomes);
    if used.is_empty() {
        return Err(RefineError::NoSamples);
    }
    Ok(used)
}

/// Relative error of the model's energy over outcomes (predicted / measured - 1).
fn energy_errors(model: &dyn Predictor, used: &[&Outcome]) -> Result<Vec<f64>, RefineError> {
    used.iter()
        .map(|o| {
            let p = model.predict(&o.config())?;
            let m = o.energy_j().unwrap_or(f64::NAN);
            Ok(p.energy_j / m - 1.0)
        })
        .collect()
}

/// Refine a hetero model: per node type T_cp, T_mem, T_cm, P_dyn and P_static.
///
/// Time: where nodes report their compute seconds c per iteration, at two or more
/// clocks [`fit_clock`] fits `c = T_cp * S + T_mem` (S = f_max / f); at one clock
/// T_cp = c / S averaged per type, with a T_mem the profile already has kept and taken
/// off first (none stays none: compute-bound). T_cm = the node's measured MPI seconds /
/// iterations (without them, wall - compute). Where nodes did not report compute
/// seconds every type's times are scaled by the mean measured-over-predicted wall time.
/// Power: per type, least squares of each node's energy
/// `E = P_static * T + P_dyn * shape(f) * compute` over its outcomes, shape being the
/// node type's dynamic power curve relative to f_max ([`dynamic_shape`]); when the
/// outcomes cannot separate the two (one frequency, one wall time) both are scaled by
/// one factor.
pub fn hetero(
    model: &Hetero,
    outcomes: &[Outcome],
) -> Result<Refined<BTreeMap<String, TypeTimes>>, RefineError> {
    let used = usable_or_none(outcomes)?;
    let iters = model.iterations.max(f64::MIN_POSITIVE);
    let fmax_of = |ty: &str| -> Result<f64, RefineError> {
        model
            .site_types
            .get(ty)
            .map(|t| t.fmax())
            .filter(|f| *f > 0.0)
            .ok_or_else(|| RefineError::UnknownType(ty.to_string()))
    };

    // Wall-time scale over all outcomes, for types whose compute time nobody measured.
    let mut ratios = Vec::new();
    for o in &used {
        let p = model.predict(&o.config())?;
        if p.time_s > 0.0 {
            ratios.push(o.time_s / p.time_s);
        }
    }
    let k = if ratios.is_empty() {
        1.0
    } else {
        ratios.iter().sum::<f64>() / ratios.len() as f64
    };

    let mut types = model.types.clone();
    for (ty, times) in types.iter_mut() {
        let fmax = fmax_of(ty)?;
        // (clock GHz, compute seconds per iteration) per node.
        let mut cp = Vec::new();
        let mut cm = Vec::new();
        let mut all_timed = true;
        for o in &used {
            // A node's own blocked time includes its wait for the slowest node: learning
            // that would teach a type the waiting a past decision caused (min(T_cm) in
            // the model then grows with every lowered run).
            let floor = o.comm_floor_s();
            for n in o.nodes.iter().filter(|n| &n.node_type == ty) {
                match (o.split(n), floor) {
                    (Some((c, _)), Some(comm)) => {
                        cp.push((n.freq_ghz, c / iters));
                        cm.push(comm / iters);
                    }
                    _ => all_timed = false,
                }
            }
        }
        if all_timed && !cp.is_empty() {
            if let Some(fit) = fit_clock(fmax, &cp) {
                times.t_cp_s = fit.t_cp_s;
                times.t_mem_s = Some(fit.t_mem_s);
                times.t_mem_fit = Some(fit.record("refined from the jobs' measured compute time"));
            } else {
                // One clock cannot tell the parts apart: keep what the profile knew of
                // T_mem (none: compute-bound, the conservative reading) and fit T_cp to it.
                let mem = times.t_mem_s.unwrap_or(0.0);
                let per: Vec<f64> = cp
                    .iter()
                    .map(|(f, c)| (c - mem).max(0.0) / (fmax / f))
                    .collect();
                times.t_cp_s = per.iter().sum::<f64>() / per.len() as f64;
            }
            times.t_cm_s = cm.iter().sum::<f64>() / cm.len() as f64;
            times.lead = lead::of_type(&used, ty, fmax, times, iters);
        } else {
            times.t_cp_s *= k;
            times.t_cm_s *= k;
            times.t_mem_s = times.t_mem_s.map(|m| m * k);
        }
    }

    // Power per type, against the refined times.
    for (ty, times) in types.iter_mut() {
        let fmax = fmax_of(ty)?;
        let site = model
            .site_types
            .get(ty)
            .ok_or_else(|| RefineError::UnknownType(ty.clone()))?;
        let p_dyn0 = match times.p_dyn_w {
            Some(w) => w,
            None => site.dynamic_w(fmax).map_err(|m| ModelError::Expression {
                what: format!("power of {ty}"),
                message: m.to_string(),
            })?,
        };
        let p_st0 = match times.p_static_w {
            Some(w) => w,
            None => site.static_w(fmax).map_err(|m| ModelError::Expression {
                what: format!("power of {ty}"),
                message: m.to_string(),
            })?,
        };
        // Rows: x1 = wall time (static), x2 = shape(f) * compute seconds (dynamic),
        // x3 = shape(f) * the rest of the run (the node waiting), y = energy.
        let mut rows: Vec<[f64; 4]> = Vec::new();
        for o in &used {
            for n in o.nodes.iter().filter(|n| &n.node_type == ty) {
                let s = fmax / n.freq_ghz;
                let compute = n.compute_s.unwrap_or(times.compute_s(s) * iters);
                let shape = dynamic_shape(site, n.freq_ghz);
                rows.push([
                    o.time_s,
                    compute * shape,
                    (o.time_s - compute).max(0.0) * shape,
                    n.energy_j.unwrap_or(0.0),
                ]);
            }
        }
        if rows.is_empty() {
            continue;
        }
        // A waiting draw is told apart from static and busy watts only by runs at two
        // or more clocks (at one, x3 is a sum of the other two columns); where it is
        // not, the type keeps the share it had and the two others are fitted to it.
        let three = waiting_fit(&rows).and_then(|[ps, pd, w]| {
            // A waiting draw within rounding of none is none; one above the busy
            // draw is no physics greenup knows, and is left out.
            let w = if w.abs() <= 1e-6 * pd.abs() { 0.0 } else { w };
            let physical = [ps, pd, w].iter().all(|x| x.is_finite() && *x >= 0.0);
            (physical && pd > 0.0 && w <= pd).then_some([ps, pd, w])
        });
        let (p_st, p_dyn) = match three {
            Some([ps, pd, w]) => {
                times.wait_share = (w > 0.0).then_some(w / pd);
                (ps, pd)
            }
            None => {
                let omega = times.wait_share.unwrap_or(0.0);
                let two: Vec<(f64, f64, f64)> = rows
                    .iter()
                    .map(|r| (r[0], r[1] + omega * r[2], r[3]))
                    .collect();
                static_and_dynamic(&two, p_st0, p_dyn0)
            }
        };
        times.p_static_w = Some(p_st);
        times.p_dyn_w = Some(p_dyn);
    }

    let refined = Hetero {
        iterations: model.iterations,
        types: types.clone(),
        site_types: model.site_types.clone(),
        steps: model.steps.clone(),
        time_choice: None,
    };
    let residual = rms(&energy_errors(&refined, &used)?);
    Ok(Refined {
        params: types,
        samples: used.len() as u32,
        residual,
    })
}

/// Static and dynamic watts from rows of (wall seconds, shape x busy seconds, joules):
/// least squares where the two columns can be told apart and give non-negative watts,
/// else the prior `(p_st0, p_dyn0)` scaled by one factor to the measured joules.
fn static_and_dynamic(rows: &[(f64, f64, f64)], p_st0: f64, p_dyn0: f64) -> (f64, f64) {
    let (s11, s12, s22, s1y, s2y) =
        rows.iter()
            .fold((0.0, 0.0, 0.0, 0.0, 0.0), |a, (x1, x2, y)| {
                (
                    a.0 + x1 * x1,
                    a.1 + x1 * x2,
                    a.2 + x2 * x2,
                    a.3 + x1 * y,
                    a.4 + x2 * y,
                )
            });
    let det = s11 * s22 - s12 * s12;
    // Columns that are nearly parallel cannot tell static from dynamic power.
    let separable = det > 1e-6 * s11 * s22;
    let two = separable.then(|| ((s1y * s22 - s2y * s12) / det, (s2y * s11 - s1y * s12) / det));
    match two {
        Some((ps, pd)) if ps >= 0.0 && pd >= 0.0 && ps.is_finite() && pd.is_finite() => (ps, pd),
        _ => {
            let pred: Vec<f64> = rows
                .iter()
                .map(|(x1, x2, _)| p_st0 * x1 + p_dyn0 * x2)
                .collect();
            let num: f64 = rows.iter().zip(&pred).map(|((_, _, y), p)| y * p).sum();
            let den: f64 = pred.iter().map(|p| p * p).sum();
            let m = if den > 0.0 { num / den } else { 1.0 };
            (p_st0 * m, p_dyn0 * m)
        }
    }
}

/// Static watts, busy dynamic watts and waiting dynamic watts by least squares over
/// rows of (wall seconds, shape x busy seconds, shape x waiting seconds, joules);
/// `None` where the three columns cannot be told apart (runs at one clock).
fn waiting_fit(rows: &[[f64; 4]]) -> Option<[f64; 3]> {
    let mut a = [[0.0f64; 3]; 3];
    let mut b = [0.0f64; 3];
    for r in rows {
        for i in 0..3 {
            for j in 0..3 {
                a[i][j] += r[i] * r[j];
            }
            b[i] += r[i] * r[3];
        }
    }
    let det3 = |m: &[[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let det = det3(&a);
    // Nearly dependent columns: the determinant is a vanishing share of the diagonal's product.
    if !(det.is_finite() && det > 1e-6 * a[0][0] * a[1][1] * a[2][2]) {
        return None;
    }
    let mut out = [0.0; 3];
    for (k, x) in out.iter_mut().enumerate() {
        let mut m = a;
        for i in 0..3 {
            m[i][k] = b[i];
        }
        *x = det3(&m) / det;
    }
    Some(out)
}

/// Which time model, paper 004's max model or `steps`, predicts the wall time of the
/// measured runs better (RMS relative error over the usable outcomes), by
/// [`steps::choose`]: the step model wins only with the smaller error over at least
/// [`steps::MIN_RUNS`] runs, or, with fewer, only if it predicts at least the max
/// model's slowdown ([`Hetero::steps_safer`]).
pub fn time_model_choice(
    model: &Hetero,
    with_steps: &Steps,
    outcomes: &[Outcome],
) -> Result<ModelChoice, RefineError> {
    let (used, _) = usable(outcomes);
    let max = Hetero {
        steps: None,
        time_choice: None,
        ..model.clone()
    };
    let stepped = Hetero {
        steps: Some(with_steps.clone()),
        time_choice: None,
        ..model.clone()
    };
    let mut runs = Vec::with_capacity(used.len());
    for o in &used {
        let config = o.config();
        runs.push((
            max.predict(&config)?.time_s,
            stepped.predict(&config)?.time_s,
            o.time_s,
        ));
    }
    Ok(steps::choose(&runs, max.steps_safer(with_steps)))
}

/// Of step models learned at several window lengths (`(window_s, steps)`, shortest
/// first), the one whose step model predicts the measured runs' wall time best, with
/// [`time_model_choice`]'s verdict between it and the max model (its `window_s` set).
///
/// The window length is chosen by measured error because no length is right for every
/// program: windows shorter than its steps cut them apart and overstate what slowing a
/// type costs, longer ones merge steps different types lead. With fewer than
/// [`steps::MIN_RUNS`] runs no error is trusted and the shortest is kept, as learn wrote
/// it: it predicts the most slowdown. A tie keeps the shorter window for the same reason.
/// `None` when `candidates` is empty.
pub fn best_step_window(
    model: &Hetero,
    candidates: &[(f64, Steps)],
    outcomes: &[Outcome],
) -> Result<Option<(ModelChoice, Steps)>, RefineError> {
    let mut best: Option<(ModelChoice, Steps)> = None;
    for (w, s) in candidates {
        let mut c = time_model_choice(model, s, outcomes)?;
        c.window_s = Some(*w);
        let better = match &best {
            None => true,
            Some((b, _)) => {
                (b.runs as usize) >= steps::MIN_RUNS && c.step_model_error < b.step_model_error
            }
        };
        if better {
            best = Some((c, s.clone()));
        }
    }
    Ok(best)
}

/// Relative tolerance for two clocks being the same: sysfs gives kHz, decisions GHz.
const SAME_CLOCK: f64 = 1e-3;

/// The least ratio of the fitted runs' highest to lowest clock for which a program that
/// did not slow down is taken as memory-bound: below it, a few percent of noise in the
/// measured compute time hides the slowdown of a compute-bound program.
pub const MIN_FLAT_SPAN: f64 = 1.1;

/// A type's compute time per iteration split into the part that scales with the clock
/// and the part that does not, fitted by [`fit_clock`].
#[derive(Debug, Clone, PartialEq)]
pub struct ClockTerm {
    /// Seconds per iteration at f_max that scale with the clock (`T_cp`).
    pub t_cp_s: f64,
    /// Seconds per iteration that do not (`T_mem`).
    pub t_mem_s: f64,
    /// The distinct clocks fitted, GHz, ascending.
    pub clocks_ghz: Vec<f64>,
    /// Node runs fitted.
    pub samples: u32,
    /// Root-mean-square relative error of the fitted compute time over them.
    pub rms_error: f64,
}

impl ClockTerm {
    /// The fit as a profile records it; `how` says which runs it came from.
    pub fn record(&self, how: &str) -> ClockFit {
        let clocks: Vec<String> = self.clocks_ghz.iter().map(|f| format!("{f}")).collect();
        ClockFit {
            clocks: self.clocks_ghz.len() as u32,
            samples: self.samples,
            rms_error: self.rms_error,
            source: format!(
                "{how}: {} node runs at {} GHz",
                self.samples,
                clocks.join(", ")
            ),
        }
    }
}

/// Least squares `y = a + k * x`: (a, k), or None when x does not vary.
pub(crate) fn least_squares_line(x: &[f64], y: &[f64]) -> Option<(f64, f64)> {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxx: f64 = x.iter().map(|v| (v - mx) * (v - mx)).sum();
    if sxx.is_nan() || sxx <= f64::EPSILON * (1.0 + mx * mx) {
        return None;
    }
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let k = sxy / sxx;
    Some((my - k * mx, k))
}

/// Least squares `y = k * x` through the origin: k.
pub(crate) fn slope_through_origin(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum::<f64>() / x.iter().map(|a| a * a).sum::<f64>()
}

/// Fit `c = T_cp * S + T_mem` (S = `fmax / f`) by least squares to `(f GHz, compute
/// seconds per iteration)` samples of one node type; `None` below two distinct clocks.
///
/// Neither part may be negative. A negative T_mem is clamped to 0 and T_cp refitted (a
/// compute-bound program). A negative T_cp means the program did not slow as the
/// clock fell; that is believed (T_cp = 0, all time in T_mem) only when the runs span
/// clocks at least [`MIN_FLAT_SPAN`] apart, so that a compute-bound program would have
/// slowed visibly, and the flat fit's error is under half the compute-bound fit's.
/// Otherwise the evidence is noise and the compute-bound fit, which never
/// under-promises slowdown, is kept.
pub fn fit_clock(fmax: f64, samples: &[(f64, f64)]) -> Option<ClockTerm> {
    let pts: Vec<(f64, f64, f64)> = samples
        .iter()
        .filter(|(f, c)| f.is_finite() && *f > 0.0 && c.is_finite() && *c > 0.0)
        .map(|&(f, c)| (f, fmax / f, c))
        .collect();
    let mut clocks: Vec<f64> = Vec::new();
    let mut sorted: Vec<f64> = pts.iter().map(|p| p.0).collect();
    sorted.sort_by(f64::total_cmp);
    for f in sorted {
        if clocks
            .last()
            .is_none_or(|last| (f - last).abs() > SAME_CLOCK * f)
        {
            clocks.push(f);
        }
    }
    if clocks.len() < 2 || !(fmax.is_finite() && fmax > 0.0) {
        return None;
    }
    let s: Vec<f64> = pts.iter().map(|p| p.1).collect();
    let c: Vec<f64> = pts.iter().map(|p| p.2).collect();
    let mc = c.iter().sum::<f64>() / c.len() as f64;
    let err = |a: f64, b: f64| {
        rms(&pts
            .iter()
            .map(|p| (a * p.1 + b) / p.2 - 1.0)
            .collect::<Vec<_>>())
    };
    // Through the origin: all compute scales with the clock.
    let bound = slope_through_origin(&s, &c);
    let (b, a) = least_squares_line(&s, &c).unwrap_or((f64::NAN, f64::NAN));
    // A free line that cannot be had, or one below zero at S = 0: compute-bound.
    let (t_cp, t_mem) = if !(a.is_finite() && b.is_finite()) || b < 0.0 {
        (bound, 0.0)
    } else if a < 0.0 {
        let span = clocks[clocks.len() - 1] / clocks[0];
        if span >= MIN_FLAT_SPAN && err(0.0, mc) < 0.5 * err(bound, 0.0) {
            (0.0, mc)
        } else {
            (bound, 0.0)
        }
    } else {
        (a, b)
    };
    Some(ClockTerm {
        t_cp_s: t_cp,
        t_mem_s: t_mem,
        clocks_ghz: clocks,
        samples: pts.len() as u32,
        rms_error: err(t_cp, t_mem),
    })
}

/// A refined amdahl model and the per-gear slowdowns it was fitted from.
#[derive(Debug, Clone, PartialEq)]
pub struct AmdahlRefinement {
    /// The model with refined T_C(0,1), F_p, communication law and slowdown.
    pub model: Amdahl,
    /// Measured S_g per frequency (GHz, slowdown), averaged over runs at that frequency.
    pub slowdown_by_gear: Vec<(f64, f64)>,
    /// Whether F_p and the law were refitted (runs on three node counts at top gear exist).
    pub refitted_scaling: bool,
}

/// Refine an amdahl model: F_p, T_C(0,1) and the communication law by [`amdahl::fit`]
/// over top-gear runs once three node counts exist, then the per-gear slowdown
/// `S_g = (T - T_B(n)) / T_C(0, n)` of the other runs, summarised as
/// `S(f) = 1 + beta * (fmax / f - 1)` (beta = 1: compute-bound, beta = 0: memory-bound).
pub fn amdahl(
    model: &Amdahl,
    outcomes: &[Outcome],
) -> Result<Refined<AmdahlRefinement>, RefineError> {
    let used = usable_or_none(outcomes)?;
    let fmax_of = |o: &Outcome| -> Result<f64, RefineError> {
        let ty = &o.nodes[0].node_type;
        model
            .site_types
            .get(ty)
            .map(|t| t.fmax())
            .ok_or_else(|| RefineError::UnknownType(ty.clone()))
    };
    let mean_f =
        |o: &Outcome| o.nodes.iter().map(|n| n.freq_ghz).sum::<f64>() / o.nodes.len() as f64;

    let mut top = Vec::new();
    let mut geared = Vec::new();
    for o in &used {
        let fmax = fmax_of(o)?;
        if o.nodes.iter().all(|n| n.freq_ghz >= fmax * (1.0 - 1e-6)) {
            top.push(amdahl::Run {
                nodes: o.nodes.len(),
                time_s: o.time_s,
                blocked_s: o.blocked_s(),
            });
        } else {
            geared.push((*o, fmax));
        }
    }
    let mut refined = model.clone();
    let mut counts: Vec<usize> = top.iter().map(|r| r.nodes).collect();
    counts.sort_unstable();
    counts.dedup();
    let refitted_scaling = counts.len() >= 3;
    if refitted_scaling {
        let fit = amdahl::fit(&top)?;
        refined.t_c1_s = fit.t_c1_s;
        refined.parallel_fraction = fit.parallel_fraction;
        refined.law = fit.law;
        refined.coeff_s = fit.coeff_s;
    }

    // Per-gear slowdown, grouped by frequency in MHz.
    let mut by_gear: BTreeMap<u64, (f64, Vec<f64>, f64)> = BTreeMap::new();
    for (o, fmax) in &geared {
        let n = o.nodes.len();
        let tc0 = refined.compute_s(n);
        if tc0 <= 0.0 {
            continue;
        }
        // Measured blocked time where the MPI runtime gave it; the law's otherwise.
        let blocked = o.blocked_s().unwrap_or_else(|| refined.blocked_s(n));
        let s = (o.time_s - blocked) / tc0;
        if s.is_finite() && s > 0.0 {
            let f = mean_f(o);
            by_gear
                .entry((f * 1000.0).round() as u64)
                .or_insert((f, Vec::new(), *fmax))
                .1
                .push(s);
        }
    }
    let slowdown_by_gear: Vec<(f64, f64)> = by_gear
        .values()
        .map(|(f, v, _)| (*f, v.iter().sum::<f64>() / v.len() as f64))
        .collect();
    // Least squares through the origin of (S - 1) against (fmax / f - 1).
    let (num, den) = by_gear.values().fold((0.0, 0.0), |(a, b), (f, v, fmax)| {
        let x = fmax / f - 1.0;
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        (
            a + x * (mean - 1.0) * v.len() as f64,
            b + x * x * v.len() as f64,
        )
    });
    if den > 0.0 {
        let beta = (num / den).max(0.0);
        let src = format!("1 + {beta} * (fmax / f - 1)");
        refined.slowdown =
            Some(
                Expr::parse(&src, &["f", "fmax"]).map_err(|m| ModelError::Expression {
                    what: "refined slowdown".into(),
                    message: m.to_string(),
                })?,
            );
    }

    let mut errs = Vec::new();
    for o in &used {
        let p = refined.predict(&o.config())?;
        errs.push(p.time_s / o.time_s - 1.0);
    }
    Ok(Refined {
        params: AmdahlRefinement {
            model: refined,
            slowdown_by_gear,
            refitted_scaling,
        },
        samples: used.len() as u32,
        residual: rms(&errs),
    })
}

/// A refined iso_energy application vector and how it was fitted.
#[derive(Debug, Clone, PartialEq)]
pub struct IsoRefinement {
    /// The application vector with refined alpha and, when refitted, W_co, W_mo, M and B.
    pub app: AppVector,
    /// The refined alpha, as a number.
    pub alpha: f64,
    /// Whether W_co, W_mo, M and B were refitted from the runtime's measurements.
    pub refitted_overheads: bool,
    /// The machine vector's waiting share, where the runs' energy taught one.
    pub wait_share: Option<f64>,
    /// One line for the fit record: what was refitted from what, or why only alpha.
    pub note: String,
}

/// Refine iso_energy (paper 000). First the overhead terms from the runs the MPI runtime
/// measured on every node ([`super::iso_overheads`]: M and B from its counted calls and
/// bytes, W_co and W_mo from its time outside MPI beyond the sequential work), once they
/// cover two node counts; otherwise those terms are kept and the note says why. Then
/// alpha = actual execution time / theoretical execution time, the theoretical time being
/// the (refined) model's wall time without alpha. The paper finds alpha the same across
/// levels of parallelism, so the refined alpha is the mean over runs, at most 1 (the
/// paper's range), and the residual the relative spread of the runs' alphas around it.
/// Last, the waiting share from the runs' measured energy ([`iso_overheads::wait_share`]).
/// `model` must be placed on the site ([`IsoEnergy::on_site`]) where it takes its
/// watts from a node type.
pub fn iso_energy(
    model: &IsoEnergy,
    outcomes: &[Outcome],
) -> Result<Refined<IsoRefinement>, RefineError> {
    let used = usable_or_none(outcomes)?;
    let mut runs = Vec::new();
    for o in &used {
        runs.extend(Run::of(model, o)?);
    }
    let mut refined = model.clone();
    let (refitted_overheads, mut note) = match iso_overheads::refit(model, &runs) {
        Ok(r) => {
            refined.app.w_co = r.w_co;
            refined.app.w_mo = r.w_mo;
            refined.app.m = r.m;
            refined.app.b = r.b;
            (true, r.note)
        }
        Err(why) => (false, format!("alpha only: {why}")),
    };
    let mut alphas = Vec::new();
    for o in &used {
        let p = o.nodes.len();
        let f = o.nodes.iter().map(|n| n.freq_ghz).sum::<f64>() / p as f64;
        let alpha_now =
            refined
                .app
                .alpha
                .eval(&[model.n, p as f64])
                .map_err(|m| ModelError::Expression {
                    what: "application.alpha".into(),
                    message: m.to_string(),
                })?;
        if !(alpha_now.is_finite() && alpha_now > 0.0) {
            return Err(ModelError::NotFinite {
                what: "application.alpha".into(),
                value: alpha_now,
            }
            .into());
        }
        let theoretical = refined.wall_time_s(model.n, p, f)? / alpha_now;
        if theoretical > 0.0 {
            alphas.push(o.time_s / theoretical);
        }
    }
    if alphas.is_empty() {
        return Err(RefineError::NoSamples);
    }
    let mean = alphas.iter().sum::<f64>() / alphas.len() as f64;
    let spread: Vec<f64> = alphas.iter().map(|a| a / mean - 1.0).collect();
    let alpha = if mean > 1.0 {
        note.push_str(&format!(
            "; alpha {mean:.3} > 1 kept at 1: the busy time misses part of the wall time"
        ));
        1.0
    } else {
        mean
    };
    refined.app.alpha = Expr::constant(alpha);
    let wait_share = iso_overheads::wait_share(model, &used)?;
    if let Some(w) = wait_share {
        note.push_str(&format!(
            "; waiting share {:.2} from the measured energy of {} runs",
            w.share, w.runs
        ));
        if w.share != w.fitted {
            note.push_str(&format!(" (fitted {:.2}, held to 0..1)", w.fitted));
        }
    }
    Ok(Refined {
        params: IsoRefinement {
            app: refined.app,
            alpha,
            refitted_overheads,
            wait_share: wait_share.map(|w| w.share),
            note,
        },
        samples: alphas.len() as u32,
        residual: rms(&spread),
    })
}

/// A profile refined from outcomes: the next version's file and how it was fitted.
#[derive(Debug, Clone)]
pub struct RefinedProfile {
    /// The refined profile file; its version is the input's plus one.
    pub file: ProfileFile,
    /// The model refined.
    pub model: &'static str,
    /// Outcomes used.
    pub samples: u32,
    /// Fit residual (relative RMS).
    pub residual: f64,
    /// Outcomes left out, with the reason.
    pub left_out: Vec<(u64, Outlier)>,
    /// What was refitted from what, when the model says (iso_energy does).
    pub note: Option<String>,
}

impl RefinedProfile {
    /// The fit record a stored version of this refinement keeps beside its file.
    pub fn fit(&self) -> Fit {
        Fit {
            samples: self.samples,
            residual: self.residual,
            note: self.note.clone(),
        }
    }
}

/// Refine the model a profile uses (hetero, amdahl or iso_energy) from its outcomes, and
/// write the result into a copy of the profile file as the next version. The admin's
/// file is never touched; [`super::versions`] stores the copy.
pub fn refine_profile(
    profile: &Profile,
    site: &Site,
    outcomes: &[Outcome],
) -> Result<RefinedProfile, RefineError> {
    let mut file = profile.file.clone();
    let model = profile.chosen_model();
    let mut note = None;
    let (samples, residual) = match model {
        "hetero" => {
            let current = profile
                .hetero_model(site)
                .ok_or(RefineError::NoModel(model))?;
            // Times that hold for n nodes learn nothing from runs on other counts.
            let on_count: Vec<Outcome> = outcomes
                .iter()
                .filter(|o| profile.hetero_nodes().is_none_or(|n| o.nodes.len() == n))
                .cloned()
                .collect();
            let r = hetero(&current, &on_count)?;
            // The refitted times decide afresh which time model predicts them better.
            let refitted = Hetero {
                types: r.params.clone(),
                ..current.clone()
            };
            // With step models at several window lengths, the one that predicts best is
            // kept in `steps:`; the others stay listed for later runs to judge again.
            let (choice, kept) =
                match best_step_window(&refitted, profile.hetero_step_windows(), &on_count)? {
                    Some((c, s)) => (Some(c), Some(s)),
                    None => match profile.hetero_steps() {
                        Some(s) => (Some(time_model_choice(&refitted, s, &on_count)?), None),
                        None => (None, None),
                    },
                };
            let h = file.hetero.as_mut().ok_or(RefineError::NoModel(model))?;
            if let Some(c) = &choice {
                h.model_choice = Some(ModelChoiceFile::from_choice(c));
            }
            if let Some(s) = &kept {
                h.steps = Some(StepClassFile::from_steps(s));
            }
            for (k, t) in &r.params {
                if let Some(f) = h.node_types.get_mut(k) {
                    f.t_cp_s = number(t.t_cp_s);
                    f.t_cm_s = number(t.t_cm_s);
                    f.p_dyn_w = t.p_dyn_w.map(number);
                    f.p_static_w = t.p_static_w.map(number);
                    f.t_mem_s = t.t_mem_s.map(number);
                    f.t_mem_fit = t.t_mem_fit.as_ref().map(ClockFitFile::from_fit);
                    f.lead = t.lead.map(number);
                    f.wait_share = t.wait_share.map(number);
                }
            }
            (r.samples, r.residual)
        }
        "amdahl" => {
            let current = profile
                .amdahl_model(site)
                .ok_or(RefineError::NoModel(model))?;
            let r = amdahl(&current, outcomes)?;
            let m = &r.params.model;
            let a = file.amdahl.as_mut().ok_or(RefineError::NoModel(model))?;
            a.t_c1_s = number(m.t_c1_s);
            a.parallel_fraction = number(m.parallel_fraction);
            a.comm.law = unspanned(Param::Text(m.law.name().to_string()));
            a.comm.coeff_s = number(m.coeff_s);
            if let Some(s) = &m.slowdown {
                a.slowdown = Some(unspanned(Param::Text(s.source().to_string())));
            }
            (r.samples, r.residual)
        }
        "iso_energy" => {
            let iso = profile
                .iso_energy()
                .ok_or(RefineError::NoModel(model))?
                .on_site(&site.node_types)?;
            let r = iso_energy(&iso, outcomes)?;
            let f = file
                .iso_energy
                .as_mut()
                .ok_or(RefineError::NoModel(model))?;
            if let Some(w) = r.params.wait_share {
                f.machine.wait_share = Some(number(w));
            }
            let a = &mut f.application;
            a.alpha = number(r.params.alpha);
            if r.params.refitted_overheads {
                let text = |e: &Expr| unspanned(Param::Text(e.source().to_string()));
                a.w_co = text(&r.params.app.w_co);
                a.w_mo = text(&r.params.app.w_mo);
                a.m = text(&r.params.app.m);
                a.b = text(&r.params.app.b);
            }
            note = Some(r.params.note);
            (r.samples, r.residual)
        }
        other => return Err(RefineError::NoModel(other)),
    };
    file.version = number(profile.version() as f64 + 1.0);
    // The refined file must load like any profile before anyone stores it.
    Profile::from_file(&profile.path, file.clone()).map_err(RefineError::Unchecked)?;
    let (_, left_out) = usable(outcomes);
    Ok(RefinedProfile {
        file,
        model,
        samples,
        residual,
        left_out,
        note,
    })
}

/// A new version made by [`next_version`], for greenupd to store.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a new version is stored only once its writes are written"]
pub struct NextVersion {
    /// The version number its files give it.
    pub version: u64,
    /// The model refined.
    pub model: &'static str,
    /// Outcomes used and fit residual.
    pub fit: Fit,
    /// The files that store it, in the order they must be written
    /// (`greenup_core::fs::write_files`).
    pub writes: Vec<FileWrite>,
}

/// After a job closes: refine application `app` from the stored jobs decided for it
/// (any order; others are ignored), starting from the version in use, as the next
/// version. `Ok(None)` when no outcome is usable yet.
pub fn next_version(
    site: &Site,
    app: &str,
    records: &[JobRecord],
) -> Result<Option<NextVersion>, RefineError> {
    let versions = Versions::for_store(&site.daemon.store);
    let to_model = RefineError::Profile;
    let origin = crate::input::Origin::Request("profile".into());
    // Monitor runs of an application with no profile yet wait for its first version
    // (`greenup profile learn`); nothing is refined before it exists.
    if !super::locate::exists(site, app) {
        return Ok(None);
    }
    let located = super::locate::for_job(site, app, origin).map_err(to_model)?;
    let profile = Profile::load(&located.path).map_err(to_model)?;
    let outcomes: Vec<Outcome> = records
        .iter()
        .filter(|r| r.decision.profile.as_deref() == Some(app))
        .filter_map(|r| outcome_from_record(r, site))
        .collect();
    let refined = match refine_profile(&profile, site, &outcomes) {
        Err(RefineError::NoSamples) => return Ok(None),
        other => other?,
    };
    let fit = refined.fit();
    let new = versions.next(refined.file, &fit).map_err(to_model)?;
    Ok(Some(NextVersion {
        version: new.version,
        model: refined.model,
        fit,
        writes: new.writes,
    }))
}

/// A refined number as a profile value with no position.
fn number(x: f64) -> Spanned<Param> {
    unspanned(Param::Number(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::amdahl::CommLaw;
    use crate::model::iso_energy::{AppVector, MachineVector};
    use crate::record::RunState;
    use crate::site::{NodeType, PowerModel};

    /// Paper 004 Table I types 1 and 3 as a site declares them (power at maximum frequency).
    fn site_types() -> BTreeMap<String, NodeType> {
        let t = |name: &str, fmax: f64, fmin: f64, pd: f64, ps: f64| {
            let count = ((fmax - fmin) / 0.1).round() as usize + 1;
            let mut freqs: Vec<f64> = (0..count)
                .map(|k| ((fmax - k as f64 * 0.1) * 10.0).round() / 10.0)
                .collect();
            freqs.reverse();
            let power = PowerModel::AtMax {
                dynamic_w: pd,
                static_w: ps,
                gamma: 3.0,
            };
            (
                name.to_string(),
                NodeType {
                    name: name.into(),
                    freqs_ghz: freqs,
                    power,
                },
            )
        };
        BTreeMap::from([
            t("type1", 2.5, 1.2, 20.0, 4.0),
            t("type3", 2.9, 1.2, 30.0, 6.0),
        ])
    }

    /// Ground truth per type: (t_cp s/iter, t_cm s/iter, P_dyn W, P_static W) at fmax.
    const TRUTH: [(&str, f64, f64, f64, f64, f64); 2] = [
        ("type1", 2.5, 1.0, 0.20, 26.0, 5.5),
        ("type3", 2.9, 0.8, 0.25, 33.0, 4.0),
    ];
    const ITERS: f64 = 100.0;

    /// Deterministic noise in [-1 %, +1 %] (a 64-bit LCG).
    struct Noise(u64);
    impl Noise {
        fn next(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            1.0 + ((self.0 >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 0.02
        }
    }

    /// Simulate one run from the ground truth with paper 004's equations, written out here
    /// independently of the model code: T = iters * (max_i T_cp_i S_i + min_i T_cm_i),
    /// E_i = P_d_i S_i^-2 T_cp_i iters + P_s_i T.
    fn simulate(job_id: u64, freqs: &[(&str, &str, f64)], noise: &mut Noise) -> Outcome {
        let truth = |ty: &str| TRUTH.iter().find(|t| t.0 == ty).copied().unwrap();
        let mut slowest: f64 = 0.0;
        let mut min_cm = f64::INFINITY;
        for (_, ty, f) in freqs {
            let (_, fmax, cp, cm, _, _) = truth(ty);
            slowest = slowest.max(cp * fmax / f);
            min_cm = min_cm.min(cm);
        }
        let t = ITERS * (slowest + min_cm);
        let nodes = freqs
            .iter()
            .map(|(name, ty, f)| {
                let (_, fmax, cp, _, pd, ps) = truth(ty);
                let s = fmax / f;
                let e = pd * s.powi(-2) * cp * ITERS + ps * t;
                NodeOutcome {
                    gpu: None,
                    comm_s: None,
                    calls: None,
                    bytes: None,
                    name: name.to_string(),
                    node_type: ty.to_string(),
                    freq_ghz: *f,
                    energy_j: Some(e * noise.next()),
                    compute_s: None,
                }
            })
            .collect();
        completed(job_id, t, nodes, noise)
    }

    /// A completed run of wall time `t` (measured off by the noise) on `nodes`.
    fn completed(job_id: u64, t: f64, nodes: Vec<NodeOutcome>, noise: &mut Noise) -> Outcome {
        Outcome {
            time_s: t * noise.next(),
            ..ran(job_id, t, nodes)
        }
    }

    /// A completed run that took exactly the wall time `t` it was predicted to.
    fn ran(job_id: u64, t: f64, nodes: Vec<NodeOutcome>) -> Outcome {
        Outcome {
            gpu_locked: false,
            job_id,
            state: RunState::Completed,
            time_s: t,
            predicted_time_s: t,
            nodes,
        }
    }

    fn wrong_hetero() -> Hetero {
        // Compute times 30 % and 37.5 % short, communication half as long as it is,
        // and the site's generic power instead of this application's.
        let tt = TypeTimes::timed;
        Hetero {
            iterations: ITERS,
            types: BTreeMap::from([
                ("type1".into(), tt(0.7, 0.1)),
                ("type3".into(), tt(0.5, 0.1)),
            ]),
            site_types: site_types(),
            steps: None,
            time_choice: None,
        }
    }

    /// Four type1 nodes, three computing 1.0 s an iteration at f_max and one 0.2 s
    /// (NAS DT's ranks that only start and finish), 0.2 s of communication: a run at
    /// 2.5 GHz takes 100 * (1.0 + 0.2) = 120 s, at 2.0 GHz (S = 1.25) 100 * (1.25 + 0.2)
    /// = 145 s. Each node draws the truth's 5.5 W static over the run, 26 W * (f / 2.5)^3
    /// while it computes, and `wait_share` of that for the rest of the run.
    fn unequal_run(job_id: u64, f: f64, wait_share: f64) -> Outcome {
        let s = 2.5 / f;
        let busy_w = 26.0 * (f / 2.5f64).powi(3);
        let wall = ITERS * (1.0 * s + 0.2);
        let nodes = [1.0, 1.0, 1.0, 0.2]
            .iter()
            .enumerate()
            .map(|(k, per)| {
                let c = ITERS * per * s;
                let energy = 5.5 * wall + busy_w * c + wait_share * busy_w * (wall - c);
                timed(&format!("n{}", k + 1), f, c, wall, energy)
            })
            .collect();
        ran(job_id, wall, nodes)
    }

    #[test]
    fn a_type_whose_nodes_do_unequal_work_is_timed_by_its_slowest_node() {
        let runs = [unequal_run(1, 2.5, 0.0), unequal_run(2, 2.0, 0.0)];
        let model = one_type_model();
        let r = hetero(&model, &runs).unwrap();
        // The mean node computes 0.8 s at f_max, and no time that ignores the clock;
        // the slowest computes 1.0 s: a lead of 1.25.
        let t = &r.params["type1"];
        assert!((t.t_cp_s - 0.8).abs() < 1e-9, "{t:?}");
        assert!(t.t_mem_s.unwrap().abs() < 1e-9, "{t:?}");
        assert!((t.lead.unwrap() - 1.25).abs() < 1e-9, "{t:?}");
        let refined = Hetero {
            types: r.params.clone(),
            ..model.clone()
        };
        // Each run's time and energy predicted exactly; the mean node alone would say
        // 100 * (0.8 + 0.2) = 100 s for the first, 17 % short. Energy: 5.5 W * 120 s * 4
        // nodes + 26 W * 80 s * 4 (the mean node) = 10,960 J, the three busy nodes'
        // 3,260 J and the fourth's 1,180 J.
        for (o, time, energy) in [(&runs[0], 120.0, 10_960.0), (&runs[1], 145.0, 0.0)] {
            let p = refined.predict(&o.config()).unwrap();
            assert!((p.time_s - time).abs() < 1e-6, "{p:?}");
            let measured = o.energy_j().unwrap();
            if energy > 0.0 {
                assert!((measured - energy).abs() < 1e-6, "{measured}");
            }
            assert!(
                (p.energy_j - measured).abs() < 1e-6 * measured,
                "{p:?} {measured}"
            );
        }
    }

    #[test]
    fn a_node_that_polls_while_it_waits_teaches_its_share_from_runs_at_two_clocks() {
        // The unequal-work test's four nodes, each also drawing 0.6 of its clock's
        // dynamic watts, 0.6 * 26 W * (f / 2.5)^3, for the rest of the run (its waits).
        // At 2.5 GHz the fourth node computes 20 s of the 120 s run: 5.5 * 120 +
        // 26 * 20 + 15.6 * 100 = 2,740 J; each busy node 660 + 2,600 + 15.6 * 20 =
        // 3,572 J; the job 13,456 J. The fit recovers 5.5 W, 26 W and the share 0.6.
        let run = |job_id, f| unequal_run(job_id, f, 0.6);
        let runs = [run(1, 2.5), run(2, 2.0)];
        assert!((runs[0].energy_j().unwrap() - 13_456.0).abs() < 1e-6);
        let model = one_type_model();
        let r = hetero(&model, &runs).unwrap();
        let t = &r.params["type1"];
        assert!((t.p_static_w.unwrap() - 5.5).abs() < 1e-6, "{t:?}");
        assert!((t.p_dyn_w.unwrap() - 26.0).abs() < 1e-6, "{t:?}");
        assert!((t.wait_share.unwrap() - 0.6).abs() < 1e-6, "{t:?}");
        // And predicts a third clock it never ran, 1.5 GHz, exactly.
        let third = run(3, 1.5);
        let refined = Hetero {
            types: r.params.clone(),
            ..model.clone()
        };
        let p = refined.predict(&third.config()).unwrap();
        let measured = third.energy_j().unwrap();
        assert!(
            (p.energy_j - measured).abs() < 1e-6 * measured,
            "{p:?} {measured}"
        );
        // At one clock the share cannot be told from static watts: none is learned.
        let r = hetero(&model, &runs[..1]).unwrap();
        assert_eq!(r.params["type1"].wait_share, None);
    }

    #[test]
    fn the_time_model_is_the_one_whose_time_error_is_smaller() {
        use crate::model::steps::{StepClass, TimeModel};
        // type1 leads half the steps (share 0.8 against type3's 0.2), type3 the other half.
        let share =
            |a: f64, b: f64| BTreeMap::from([("type1".to_string(), a), ("type3".to_string(), b)]);
        let steps = Steps {
            classes: vec![
                StepClass {
                    steps: 10,
                    share: share(0.8, 0.2),
                },
                StepClass {
                    steps: 10,
                    share: share(0.2, 0.8),
                },
            ],
        };
        // Runs that follow the steps block 0.2 s plus type1's wait in type3's steps,
        // max(0.8, 0.16) + max(0.2, 0.64) - 1.0 = 0.44 s, at f_max.
        let model = truth_hetero(0.44);
        let runs: [[f64; 2]; 4] = [[2.5, 2.9], [2.0, 2.9], [2.5, 2.0], [1.8, 2.3]];
        let mut noise = Noise(7);
        // Runs whose wall time follows the steps, written out: per iteration
        // max(0.8 t1, 0.2 t3) + max(0.2 t1, 0.8 t3) + min T_cm, t = T_cp * f_max / f.
        let stepped: Vec<Outcome> = runs
            .iter()
            .enumerate()
            .map(|(k, [f1, f3])| {
                let t1 = 1.0 * 2.5 / f1;
                let t3 = 0.8 * 2.9 / f3;
                let t = ITERS * ((0.8 * t1).max(0.2 * t3) + (0.2 * t1).max(0.8 * t3) + 0.2);
                let mut o = simulate(
                    k as u64 + 1,
                    &[("n1", "type1", *f1), ("n3", "type3", *f3)],
                    &mut noise,
                );
                o.time_s = t * noise.next();
                o.predicted_time_s = t;
                o
            })
            .collect();
        let c = time_model_choice(&model, &steps, &stepped).unwrap();
        assert_eq!(c.winner, TimeModel::Steps, "{c:?}");
        assert_eq!(c.runs, 4);
        assert!(c.step_model_error < 0.011, "{c:?}");
        // Both say 1.64 s an iteration at f_max; below it the max model is off by
        // +2.7 %, -6.6 % and -4.2 % (1.89 s against 1.84, 1.80 against 1.93, 2.03
        // against 2.12): 4.1 % RMS over the four runs.
        assert!(c.max_model_error > 0.03, "{c:?}");
        // Runs that follow paper 004's max model choose it.
        let maxed: Vec<Outcome> = runs
            .iter()
            .enumerate()
            .map(|(k, [f1, f3])| {
                simulate(
                    k as u64 + 1,
                    &[("n1", "type1", *f1), ("n3", "type3", *f3)],
                    &mut noise,
                )
            })
            .collect();
        let c = time_model_choice(&truth_hetero(0.0), &steps, &maxed).unwrap();
        assert_eq!(c.winner, TimeModel::Max, "{c:?}");
        assert!(c.max_model_error < 0.011, "{c:?}");
        // One run is too few: the safer slowdown decides, and slowing type1 alone costs
        // the max model more than the steps here, so the max model stays.
        let c = time_model_choice(&model, &steps, &stepped[..1]).unwrap();
        assert_eq!((c.winner, c.runs), (TimeModel::Max, 1));
        assert!(!model.steps_safer(&steps));
    }

    /// The ground truth's times with `waits` seconds of blocked time added to each type,
    /// as a profile measures them at f_max when steps make the slowest type wait.
    fn truth_hetero(waits: f64) -> Hetero {
        Hetero {
            types: BTreeMap::from_iter(TRUTH.iter().map(|t| {
                (
                    t.0.to_string(),
                    TypeTimes {
                        p_dyn_w: Some(t.4),
                        p_static_w: Some(t.5),
                        ..TypeTimes::timed(t.2, t.3 + waits)
                    },
                )
            })),
            ..wrong_hetero()
        }
    }

    /// Two classes of 10 steps each: type1's share `a` in the first and `1 - a` in the
    /// second, type3's the other way round.
    fn two_classes(a: f64) -> Steps {
        use crate::model::steps::StepClass;
        let share =
            |x: f64, y: f64| BTreeMap::from([("type1".to_string(), x), ("type3".to_string(), y)]);
        Steps {
            classes: vec![
                StepClass {
                    steps: 10,
                    share: share(a, 1.0 - a),
                },
                StepClass {
                    steps: 10,
                    share: share(1.0 - a, a),
                },
            ],
        }
    }

    /// Runs at `clocks` (type1's, type3's GHz) whose wall time follows two classes of
    /// share `a`, written out: per iteration max(a t1, (1 - a) t3) + max((1 - a) t1, a t3)
    /// + 0.2 s (type1's true T_cm, the least), t = T_cp * f_max / f.
    fn runs_following(a: f64, clocks: &[[f64; 2]]) -> Vec<Outcome> {
        let mut noise = Noise(11);
        clocks
            .iter()
            .enumerate()
            .map(|(k, [f1, f3])| {
                let t1 = 1.0 * 2.5 / f1;
                let t3 = 0.8 * 2.9 / f3;
                let b = 1.0 - a;
                let t = ITERS * ((a * t1).max(b * t3) + (b * t1).max(a * t3) + 0.2);
                let mut o = simulate(
                    k as u64 + 1,
                    &[("n1", "type1", *f1), ("n3", "type3", *f3)],
                    &mut noise,
                );
                o.time_s = t * noise.next();
                o.predicted_time_s = t;
                o
            })
            .collect()
    }

    const CLOCKS: [[f64; 2]; 4] = [[2.5, 2.9], [2.0, 2.9], [2.5, 2.0], [1.8, 2.3]];

    #[test]
    fn of_several_window_lengths_the_one_predicting_the_runs_best_is_kept() {
        use crate::model::steps::TimeModel;
        // 10 ms windows cut steps apart (shares 0.8 / 0.2), 40 ms ones see them as the
        // runs take them (0.6 / 0.4). At f_max type1 computes 1.0 s, type3 0.8 s, so the
        // slowest type waits max(0.6, 0.32) + max(0.4, 0.48) - 1.0 = 0.08 s in the steps:
        // the profile measured that as blocked time.
        let candidates = [(0.01, two_classes(0.8)), (0.04, two_classes(0.6))];
        let runs = runs_following(0.6, &CLOCKS);
        let model = truth_hetero(0.08);
        let (c, kept) = best_step_window(&model, &candidates, &runs)
            .unwrap()
            .unwrap();
        assert_eq!(kept, candidates[1].1);
        assert_eq!(c.window_s, Some(0.04));
        assert_eq!((c.winner, c.runs), (TimeModel::Steps, 4), "{c:?}");
        assert!(c.step_model_error < 0.011, "{c:?}");
        // The 10 ms classes, judged alone on the same runs, do worse.
        let lost = time_model_choice(&model, &candidates[0].1, &runs).unwrap();
        assert!(lost.step_model_error > 2.0 * c.step_model_error, "{lost:?}");
        assert!(
            c.note().contains("classes from 0.04 s windows"),
            "{}",
            c.note()
        );
        // One run: no error is trusted, and the finest length stays, as learn wrote it.
        let (c, kept) = best_step_window(&model, &candidates, &runs[..1])
            .unwrap()
            .unwrap();
        assert_eq!((kept, c.window_s), (candidates[0].1.clone(), Some(0.01)));
        assert!(best_step_window(&model, &[], &runs).unwrap().is_none());
    }

    #[test]
    fn a_profile_with_step_windows_is_refined_to_the_best_one_and_loads_again() {
        let yaml = "name: hpl\nversion: 1\nhetero:\n  iterations: 100\n  node_types:\n    type1: { t_cp_s: 1.0, t_cm_s: 0.28, p_dyn_w: 26, p_static_w: 5.5 }\n    type3: { t_cp_s: 0.8, t_cm_s: 0.33, p_dyn_w: 33, p_static_w: 4 }\n  steps:\n    - { steps: 10, share: { type1: 0.8, type3: 0.2 } }\n    - { steps: 10, share: { type1: 0.2, type3: 0.8 } }\n  step_windows:\n    - window_s: 0.01\n      classes:\n        - { steps: 10, share: { type1: 0.8, type3: 0.2 } }\n        - { steps: 10, share: { type1: 0.2, type3: 0.8 } }\n    - window_s: 0.04\n      classes:\n        - { steps: 10, share: { type1: 0.6, type3: 0.4 } }\n        - { steps: 10, share: { type1: 0.4, type3: 0.6 } }\n";
        let profile = Profile::from_str(std::path::Path::new("hpl.yaml"), yaml).unwrap();
        assert_eq!(profile.hetero_step_windows().len(), 2);
        let mut site = crate::site::example();
        site.node_types = site_types();
        let r = refine_profile(&profile, &site, &runs_following(0.6, &CLOCKS)).unwrap();
        let text = serde_saphyr::to_string(&r.file).unwrap();
        let again = Profile::from_str(std::path::Path::new("hpl.yaml"), &text).unwrap();
        // Both lengths stay for later runs to judge; steps: holds the 40 ms classes.
        let w: Vec<f64> = again.hetero_step_windows().iter().map(|x| x.0).collect();
        assert_eq!(w, [0.01, 0.04]);
        assert_eq!(again.hetero_steps(), Some(&two_classes(0.6)), "{text}");
        let h = again.hetero_model(&site).unwrap();
        let c = h.time_choice.unwrap();
        assert_eq!(c.window_s, Some(0.04), "{text}");
        assert_eq!(c.winner, steps::TimeModel::Steps, "{text}");
        assert_eq!(h.steps, Some(two_classes(0.6)));
    }

    #[test]
    fn five_runs_halve_the_energy_error() {
        // Frequencies a policy might pick over five submissions of the same job.
        let runs: [[f64; 2]; 5] = [[2.5, 2.9], [2.0, 2.3], [2.2, 2.9], [1.8, 2.0], [2.4, 2.5]];
        let mut noise = Noise(42);
        let mut model = wrong_hetero();
        let mut history = Vec::new();
        let mut errors = Vec::new();
        for (k, [f1, f3]) in runs.iter().enumerate() {
            let layout = [
                ("n1", "type1", *f1),
                ("n2", "type1", *f1),
                ("n3", "type3", *f3),
                ("n4", "type3", *f3),
            ];
            let outcome = simulate(k as u64 + 1, &layout, &mut noise);
            let predicted = model.predict(&outcome.config()).unwrap().energy_j;
            let measured = outcome.energy_j().unwrap();
            errors.push(((predicted - measured) / measured).abs());
            eprintln!(
                "run {}: predicted {predicted:.0} J, measured {measured:.0} J",
                k + 1
            );
            history.push(outcome);
            let refined = hetero(&model, &history).unwrap();
            assert_eq!(refined.samples as usize, history.len());
            model.types = refined.params;
        }
        assert!(
            errors[0] > 0.10,
            "the starting profile is clearly wrong: {errors:?}"
        );
        assert!(
            errors[4] <= errors[0] / 2.0,
            "energy error after run 5 must be at most half of run 1: {errors:?}"
        );
    }

    /// One type1 node (f_max 2.5 GHz) running ITERS iterations at `f`, of a program whose
    /// compute per iteration is `cp * 2.5 / f + mem` and whose communication is 0.2 s per
    /// iteration; energy `5.5 W * wall + 26 W * (f / 2.5)^3 * compute`, all written out
    /// here by hand.
    fn memory_bound_run(job_id: u64, f: f64, cp: f64, mem: f64) -> Outcome {
        let compute = (cp * 2.5 / f + mem) * ITERS;
        let wall = compute + 0.2 * ITERS;
        let energy = 5.5 * wall + 26.0 * (f / 2.5_f64).powi(3) * compute;
        ran(job_id, wall, vec![timed("n1", f, compute, wall, energy)])
    }

    /// A type1 node at `f` GHz that computed `compute` seconds of a `wall`-second run,
    /// blocked the rest, and measured `energy` joules.
    fn timed(name: &str, f: f64, compute: f64, wall: f64, energy: f64) -> NodeOutcome {
        NodeOutcome {
            gpu: None,
            comm_s: Some(wall - compute),
            calls: None,
            bytes: None,
            name: name.into(),
            node_type: "type1".into(),
            freq_ghz: f,
            energy_j: Some(energy),
            compute_s: Some(compute),
        }
    }

    fn one_type_model() -> Hetero {
        let mut m = wrong_hetero();
        m.types.remove("type3");
        m
    }

    #[test]
    fn runs_at_two_clocks_recover_t_cp_and_t_mem() {
        // Truth: t_cp 0.6 s, t_mem 0.4 s per iteration. At 2.5 GHz (S = 1) compute is
        // 100 s, at 1.25 GHz (S = 2) 160 s, at 2.0 GHz (S = 1.25) 115 s.
        let runs = [
            memory_bound_run(1, 2.5, 0.6, 0.4),
            memory_bound_run(2, 1.25, 0.6, 0.4),
            memory_bound_run(3, 2.0, 0.6, 0.4),
        ];
        let r = hetero(&one_type_model(), &runs).unwrap();
        let t = &r.params["type1"];
        assert!((t.t_cp_s - 0.6).abs() < 1e-9, "{t:?}");
        assert!((t.t_mem_s.unwrap() - 0.4).abs() < 1e-9, "{t:?}");
        let fit = t.t_mem_fit.as_ref().unwrap();
        assert_eq!((fit.clocks, fit.samples), (3, 3));
        assert!(fit.rms_error < 1e-9, "{fit:?}");
        // The energy regression's dynamic column is compute * (f / f_max)^3 under the
        // site's cube law, so the truth's 26 W and 5.5 W come back exactly.
        assert!((t.p_dyn_w.unwrap() - 26.0).abs() < 1e-6, "{t:?}");
        assert!((t.p_static_w.unwrap() - 5.5).abs() < 1e-6, "{t:?}");
        // At 1.0 GHz (S = 2.5): 100 * (0.6 * 2.5 + 0.4 + 0.2) = 210 s, where the
        // compute-bound law would say 100 * (1.0 * 2.5 + 0.2) = 270 s.
        let mut model = one_type_model();
        model.types = r.params.clone();
        let mut at = runs[0].config();
        at.nodes[0].freq_ghz = 1.0;
        let p = model.predict(&at).unwrap();
        assert!((p.time_s - 210.0).abs() < 1e-6, "{p:?}");
        // Energy there: 5.5 W * 210 s + 26 W * 0.4^3 * 190 s.
        let e = 5.5 * 210.0 + 26.0 * 0.064 * 190.0;
        assert!((p.energy_j - e).abs() < 1e-6, "{} against {e}", p.energy_j);
    }

    #[test]
    fn one_clock_leaves_t_mem_unlearned_and_the_compute_bound_law() {
        // Two runs at f_max only: compute 100 s is all taken as clock-scaled, t_cp 1.0.
        let runs = [
            memory_bound_run(1, 2.5, 0.6, 0.4),
            memory_bound_run(2, 2.5, 0.6, 0.4),
        ];
        let r = hetero(&one_type_model(), &runs).unwrap();
        let t = &r.params["type1"];
        assert!((t.t_cp_s - 1.0).abs() < 1e-12, "{t:?}");
        assert_eq!((t.t_mem_s, t.t_mem_fit.as_ref()), (None, None));
        assert_eq!(
            t.clock_sensitivity(),
            "assumed compute-bound: measured at one clock only"
        );
        // At 1.25 GHz: 100 * (1.0 * 2 + 0.2) = 220 s, paper 004's law unchanged.
        let mut model = one_type_model();
        model.types = r.params.clone();
        let mut at = runs[0].config();
        at.nodes[0].freq_ghz = 1.25;
        assert!((model.predict(&at).unwrap().time_s - 220.0).abs() < 1e-9);
    }

    #[test]
    fn the_clock_fit_keeps_both_parts_non_negative() {
        // f_max 2 GHz. (S, c) = (1, 1.0), (2, 2.2): the free line is 1.2 S - 0.2; t_mem
        // clamps to 0 and t_cp refits through the origin: (1 + 4.4) / (1 + 4) = 1.08.
        let t = fit_clock(2.0, &[(2.0, 1.0), (1.0, 2.2)]).unwrap();
        assert!((t.t_cp_s - 1.08).abs() < 1e-12 && t.t_mem_s == 0.0, "{t:?}");
        // (1, 1.0), (2, 0.98): halving the clock did not slow it; the flat fit (0.99,
        // errors -1 % and +1 %) beats the compute-bound one (0.592, errors -41 % and
        // +21 %) by far, so it is memory-bound: t_cp 0, t_mem 0.99.
        let t = fit_clock(2.0, &[(2.0, 1.0), (1.0, 0.98)]).unwrap();
        assert!(t.t_cp_s == 0.0 && (t.t_mem_s - 0.99).abs() < 1e-12, "{t:?}");
        let e = ((0.01f64.powi(2) + (0.99 / 0.98 - 1.0f64).powi(2)) / 2.0).sqrt();
        assert!((t.rms_error - e).abs() < 1e-12, "{t:?}");
        // Clocks 1 % apart and a 0.5 % speed-up: noise, not evidence. Compute-bound,
        // t_cp (1 + 1.01 * 0.995) / (1 + 1.01^2).
        let t = fit_clock(2.0, &[(2.0, 1.0), (2.0 / 1.01, 0.995)]).unwrap();
        let want = (1.0 + 1.01 * 0.995) / (1.0 + 1.01 * 1.01);
        assert!((t.t_cp_s - want).abs() < 1e-12 && t.t_mem_s == 0.0, "{t:?}");
        // One clock, or nothing usable: no fit.
        assert_eq!(fit_clock(2.0, &[(2.0, 1.0), (2.0005, 1.1)]), None);
        assert_eq!(
            fit_clock(2.0, &[(2.0, 1.0), (1.0, f64::NAN), (1.0, -1.0)]),
            None
        );
    }

    #[test]
    fn a_refined_profile_writes_t_mem_with_its_fit_and_loads_again() {
        let yaml = "name: mem\nversion: 1\nhetero:\n  iterations: 100\n  node_types:\n    type1: { t_cp_s: 0.7, t_cm_s: 0.1 }\n";
        let profile = Profile::from_str(std::path::Path::new("mem.yaml"), yaml).unwrap();
        let mut site = crate::site::example();
        site.node_types = site_types();
        let runs = [
            memory_bound_run(1, 2.5, 0.6, 0.4),
            memory_bound_run(2, 1.25, 0.6, 0.4),
        ];
        let r = refine_profile(&profile, &site, &runs).unwrap();
        let text = serde_saphyr::to_string(&r.file).unwrap();
        assert!(
            text.contains("t_mem_s: 0.4") || text.contains("t_mem_s: 0.3999"),
            "{text}"
        );
        assert!(text.contains("clocks: 2"), "{text}");
        assert!(text.contains("rms_error:"), "{text}");
        let again = Profile::from_str(std::path::Path::new("mem.yaml"), &text).unwrap();
        let h = again.hetero_model(&site).unwrap();
        assert!((h.types["type1"].t_mem_s.unwrap() - 0.4).abs() < 1e-9);
        assert!(
            h.clock_sensitivity(&["type1"]).starts_with(
                "clock sensitivity: learned from runs at 2 clocks (t_mem 0.400 s per iteration, fit error 0.0%)"
            ),
            "{}",
            h.clock_sensitivity(&["type1"])
        );
    }

    #[test]
    fn a_refined_profile_with_steps_records_which_time_model_won() {
        let yaml = "name: mem\nversion: 1\nhetero:\n  iterations: 100\n  node_types:\n    type1: { t_cp_s: 0.7, t_cm_s: 0.1 }\n  steps:\n    - { steps: 4, share: { type1: 1 } }\n";
        let profile = Profile::from_str(std::path::Path::new("mem.yaml"), yaml).unwrap();
        let mut site = crate::site::example();
        site.node_types = site_types();
        let runs = [
            memory_bound_run(1, 2.5, 0.6, 0.4),
            memory_bound_run(2, 1.25, 0.6, 0.4),
        ];
        let r = refine_profile(&profile, &site, &runs).unwrap();
        let text = serde_saphyr::to_string(&r.file).unwrap();
        // One type with share 1 is the max model: equal errors, and a tie keeps paper 004's.
        assert!(text.contains("winner: max"), "{text}");
        assert!(text.contains("runs: 2"), "{text}");
        let again = Profile::from_str(std::path::Path::new("mem.yaml"), &text).unwrap();
        let h = again.hetero_model(&site).unwrap();
        assert!(h.steps.is_none());
        let c = h.time_choice.unwrap();
        assert_eq!((c.winner, c.runs), (steps::TimeModel::Max, 2));
        assert!(
            (c.max_model_error - c.step_model_error).abs() < 1e-12,
            "{c:?}"
        );
    }

    #[test]
    fn measured_compute_times_recover_each_type() {
        // With per-node compute seconds, T_cp is compute / (S * iters), exactly.
        let mut noise = Noise(7);
        let layout = [("n1", "type1", 2.0), ("n3", "type3", 2.9)];
        let mut o = simulate(1, &layout, &mut noise);
        o.time_s = 135.0;
        o.nodes[0].compute_s = Some(125.0); // 1.0 s/iter * 2.5/2.0 * 100
        o.nodes[1].compute_s = Some(80.0); // 0.8 s/iter * 1 * 100
        let r = hetero(&wrong_hetero(), std::slice::from_ref(&o)).unwrap();
        assert!((r.params["type1"].t_cp_s - 1.0).abs() < 1e-12);
        assert!((r.params["type3"].t_cp_s - 0.8).abs() < 1e-12);
        // Paper 004's T_cm is the run's communication, not a node's wait for the slowest:
        // the least blocked time, (135 - 125) / 100, for both types; type3's 55 s blocked
        // is 45 s of waiting for type1.
        assert!((r.params["type1"].t_cm_s - 0.10).abs() < 1e-12);
        assert!((r.params["type3"].t_cm_s - 0.10).abs() < 1e-12);
    }

    /// The frequencies (type1 node, type3 node) MaxDist picks under `model` for one node
    /// of each type.
    fn max_dist_freqs(model: &Hetero) -> (f64, f64) {
        use crate::model::NodeSlot;
        use crate::optimize::{Goal, Limits, Objective, sweep::sweep};
        let types = site_types();
        let slots: Vec<NodeSlot> = [("n1", "type1"), ("n3", "type3")]
            .iter()
            .map(|(n, t)| NodeSlot {
                name: n.to_string(),
                node_type: t.to_string(),
                freqs_ghz: types[*t].freqs_ghz.clone(),
            })
            .collect();
        let table = model.table(&slots).unwrap();
        let (bt, be) = table.totals(&table.max_pick());
        let goal = Goal {
            objective: Objective::MaxDist,
            limits: Limits::default(),
            baseline_time_s: bt,
            baseline_energy_j: be,
        };
        let best = sweep(&table, &goal).unwrap();
        let f = |i: usize| table.nodes[i].choices[best.pick[i]].freq_ghz;
        (f(0), f(1))
    }

    #[test]
    fn a_swapped_bottleneck_is_corrected_by_measured_times_and_the_decision_follows() {
        // The profile says type3 is the slower per iteration (1.0 s against 0.8 s); the
        // truth is the reverse. MaxDist keeps the bottleneck at its top gear and slows the
        // other, so the wrong profile slows the real bottleneck.
        let mut model = wrong_hetero();
        model.types.get_mut("type1").unwrap().t_cp_s = 0.8;
        model.types.get_mut("type3").unwrap().t_cp_s = 1.0;
        let first = max_dist_freqs(&model);
        // Relative speed f / f_max: the type believed faster is slowed more.
        let rel = |(f1, f3): (f64, f64)| (f1 / 2.5, f3 / 2.9);
        assert!(rel(first).0 < rel(first).1, "type1 slowed more: {first:?}");
        let mut noise = Noise(11);
        let mut history = Vec::new();
        let mut corrected_at = None;
        for run in 1..=3u64 {
            let (f1, f3) = max_dist_freqs(&model);
            let mut o = simulate(run, &[("n1", "type1", f1), ("n3", "type3", f3)], &mut noise);
            // What the MPI runtime measures, from the truth: compute = T_cp * S * iters,
            // the rest of the wall time inside MPI.
            for (n, (cp, fmax, f)) in o.nodes.iter_mut().zip([(1.0, 2.5, f1), (0.8, 2.9, f3)]) {
                let c = cp * fmax / f * ITERS;
                n.compute_s = Some(c);
                n.comm_s = Some(o.time_s - c);
            }
            history.push(o);
            model.types = hetero(&model, &history).unwrap().params;
            let ok = (model.types["type1"].t_cp_s - 1.0).abs() < 1e-9
                && (model.types["type3"].t_cp_s - 0.8).abs() < 1e-9;
            if ok && corrected_at.is_none() {
                corrected_at = Some(run);
            }
        }
        assert!(corrected_at.is_some_and(|r| r <= 3), "{:?}", model.types);
        let next = max_dist_freqs(&model);
        eprintln!("decision before {first:?}, after {next:?}");
        assert!(
            rel(next).0 > rel(next).1,
            "now type3 is slowed more: {next:?}"
        );
        assert_ne!(next, first);
    }

    #[test]
    fn lowered_runs_do_not_teach_a_type_the_wait_a_decision_caused() {
        // Runs where either type is the slowest, each node measured by the runtime
        // (blocked = wall - compute). By the closed form every run takes
        // ITERS * (max(T_cp * f_max / f) + min(T_cm)); refined from them, the model must
        // give each run's time back, and T_cm must stay the 0.20 s per iteration of the
        // truth for both types, however long type3 waited when type1 was slowed.
        let runs: [[f64; 2]; 4] = [[2.5, 2.9], [1.2, 2.9], [2.5, 1.5], [1.0, 2.0]];
        let mut noise = Noise(11);
        let mut history = Vec::new();
        for (k, [f1, f3]) in runs.iter().enumerate() {
            let mut o = simulate(
                k as u64 + 1,
                &[("n1", "type1", *f1), ("n3", "type3", *f3)],
                &mut noise,
            );
            // The wall time exactly by the closed form (simulate's carries noise).
            let slowest = (ITERS * 1.0 * 2.5 / f1).max(ITERS * 0.8 * 2.9 / f3);
            o.time_s = slowest + ITERS * 0.20;
            for n in &mut o.nodes {
                let (_, fmax, cp, _, _, _) =
                    TRUTH.iter().find(|t| t.0 == n.node_type).copied().unwrap();
                let c = ITERS * cp * fmax / n.freq_ghz;
                n.compute_s = Some(c);
                n.comm_s = Some(o.time_s - c);
            }
            history.push(o);
        }
        let mut model = wrong_hetero();
        model.types = hetero(&model, &history).unwrap().params;
        for ty in ["type1", "type3"] {
            assert!(
                (model.types[ty].t_cm_s - 0.20).abs() < 1e-9,
                "{ty}: {:?}",
                model.types[ty]
            );
        }
        for o in &history {
            let want = o.time_s;
            let got = model.predict(&o.config()).unwrap().time_s;
            assert!(
                (got - want).abs() < 1e-6 * want,
                "{:?}: predicted {got} s, ran {want} s",
                o.config()
            );
        }
    }

    #[test]
    fn measured_mpi_time_is_the_communication_time_and_the_amdahl_blocked_time() {
        let mut noise = Noise(3);
        let mut o = simulate(1, &[("n1", "type1", 2.5), ("n3", "type3", 2.9)], &mut noise);
        o.time_s = 130.0;
        o.nodes[0].compute_s = Some(100.0);
        o.nodes[0].comm_s = Some(28.0); // 2 s of the wall time outside MPI_Init..Finalize
        o.nodes[1].compute_s = Some(80.0);
        o.nodes[1].comm_s = Some(48.0);
        let r = hetero(&wrong_hetero(), std::slice::from_ref(&o)).unwrap();
        // The least blocked time, 28 / 100, for both: type3's other 20 s were its wait.
        assert!((r.params["type1"].t_cm_s - 0.28).abs() < 1e-12);
        assert!((r.params["type3"].t_cm_s - 0.28).abs() < 1e-12);
        assert_eq!(o.blocked_s(), Some(38.0)); // (28 + 48) / 2
        o.nodes[1].comm_s = None;
        assert_eq!(o.blocked_s(), None, "every node or none");
    }

    fn outcome(
        state: RunState,
        time_s: f64,
        predicted_time_s: f64,
        energy: Option<f64>,
    ) -> Outcome {
        Outcome {
            gpu_locked: false,
            job_id: 9,
            state,
            time_s,
            predicted_time_s,
            nodes: vec![NodeOutcome {
                gpu: None,
                comm_s: None,
                calls: None,
                bytes: None,
                name: "n1".into(),
                node_type: "type1".into(),
                freq_ghz: 2.5,
                energy_j: energy,
                compute_s: None,
            }],
        }
    }

    #[test]
    fn outliers_say_why() {
        assert_eq!(
            check(&outcome(RunState::Completed, 100.0, 110.0, Some(5e3))),
            Ok(())
        );
        let failed = check(&outcome(RunState::Failed, 100.0, 110.0, Some(5e3))).unwrap_err();
        assert_eq!(failed.to_string(), "job ended FAILED");
        assert!(matches!(
            check(&outcome(RunState::Cancelled, 100.0, 110.0, Some(5e3))),
            Err(Outlier::NotCompleted(_))
        ));
        let short = check(&outcome(RunState::Completed, 40.0, 100.0, Some(5e3))).unwrap_err();
        assert_eq!(
            short.to_string(),
            "ran 40 s, under 50% of the predicted 100 s"
        );
        let unmeasured = check(&outcome(RunState::Completed, 100.0, 100.0, None)).unwrap_err();
        assert_eq!(unmeasured.to_string(), "unmeasured nodes (n1)");
        let bad = check(&outcome(RunState::Completed, 100.0, 100.0, Some(f64::NAN)));
        assert!(matches!(bad, Err(Outlier::BadValue(_))));
        // Only outliers: nothing to refine from.
        let only = [outcome(RunState::Failed, 1.0, 1.0, Some(1.0))];
        assert_eq!(
            hetero(&wrong_hetero(), &only).unwrap_err(),
            RefineError::NoSamples
        );
    }

    #[test]
    fn iso_energy_alpha_is_actual_over_theoretical() {
        // W_c = 4e9 operations at t_c = 1 ns: Tp = 4 s; wall time alpha * Tp / p.
        let c = Expr::constant;
        let model = IsoEnergy {
            n: 1.0,
            machine: MachineVector {
                t_c: c(1e-9),
                t_m: c(0.0),
                t_msg: c(0.0),
                t_byte: c(0.0),
                power: crate::model::iso_energy::MachinePower::Stated {
                    p_idle: c(100.0),
                    dp_c: c(20.0),
                    dp_m: c(0.0),
                },
                wait_share: 0.0,
            },
            app: AppVector {
                alpha: c(1.0),
                w_c: c(4e9),
                w_m: c(0.0),
                w_co: c(0.0),
                w_mo: c(0.0),
                m: c(0.0),
                b: c(0.0),
            },
        };
        let run = |p: usize, t: f64| Outcome {
            gpu_locked: false,
            job_id: 1,
            state: RunState::Completed,
            time_s: t,
            predicted_time_s: t,
            nodes: (0..p)
                .map(|i| NodeOutcome {
                    gpu: None,
                    comm_s: None,
                    calls: None,
                    bytes: None,
                    name: format!("n{i}"),
                    node_type: "x".into(),
                    freq_ghz: 2.0,
                    energy_j: Some(1.0),
                    compute_s: None,
                })
                .collect(),
        };
        // Theoretical 1 s on 4 nodes and 2 s on 2 nodes; measured 0.85 s and 1.7 s.
        let r = iso_energy(&model, &[run(4, 0.85), run(2, 1.7)]).unwrap();
        assert!((r.params.alpha - 0.85).abs() < 1e-12);
        assert!(!r.params.refitted_overheads);
        assert!(
            r.params.note.contains("no run was measured"),
            "{}",
            r.params.note
        );
        assert!(r.residual < 1e-12);
        assert_eq!(r.samples, 2);
        // Runs disagreeing by +-10 % around 0.8: residual 10 %.
        let r = iso_energy(&model, &[run(4, 0.88), run(4, 0.72)]).unwrap();
        assert!((r.params.alpha - 0.8).abs() < 1e-12);
        assert!((r.residual - 0.1).abs() < 1e-12);
    }

    /// Paper 000's machine vector for the overhead tests: CPI 2.5 (1 ns per instruction at
    /// 2.5 GHz), 100 ns per memory access, 20 µs per message start-up, 1 ns per byte.
    fn iso_machine() -> MachineVector {
        let e = |s: &str| Expr::parse(s, &["f"]).unwrap();
        MachineVector {
            t_c: e("2.5e-9 / f"),
            t_m: e("1e-7"),
            t_msg: e("2e-5"),
            t_byte: e("1e-9"),
            power: crate::model::iso_energy::MachinePower::Stated {
                p_idle: e("100"),
                dp_c: e("20"),
                dp_m: e("5"),
            },
            wait_share: 0.0,
        }
    }

    /// A profile whose overhead terms are wrong: W_co's law and coefficient, no W_mo,
    /// M's law, and B's coefficient (its law is right).
    fn wrong_iso() -> IsoEnergy {
        let e = |s: &str| Expr::parse(s, &["n", "p"]).unwrap();
        IsoEnergy {
            n: 1.0,
            machine: iso_machine(),
            app: AppVector {
                alpha: e("0.8"),
                w_c: e("4e11"),
                w_m: e("1e9"),
                w_co: e("1e9 * (p - 1)"),
                w_mo: e("0"),
                m: e("10 * p"),
                b: e("1e9 * (p - 1)"),
            },
        }
    }

    // The truth, written out here from paper 000's definitions, apart from the model code.
    const TRUE_ALPHA: f64 = 0.97;
    fn true_w_co(p: f64) -> f64 {
        2e10 * p * p.log2()
    }
    fn true_w_mo(p: f64) -> f64 {
        1e9 * (p - 1.0)
    }
    fn true_m(p: f64) -> f64 {
        500.0 * p * (p - 1.0)
    }
    fn true_b(p: f64) -> f64 {
        2e10 * (p - 1.0)
    }
    /// Total computation and memory time of all p processors (eq. 15 without the network).
    fn true_compute(p: f64, f: f64) -> f64 {
        (4e11 + true_w_co(p)) * 2.5e-9 / f + (1e9 + true_w_mo(p)) * 1e-7
    }
    /// Wall time alpha * Tp / p with Tp = compute + M t_msg + B t_byte (eqs. 15, 17).
    fn true_wall(p: f64, f: f64) -> f64 {
        TRUE_ALPHA * (true_compute(p, f) + true_m(p) * 2e-5 + true_b(p) * 1e-9) / p
    }

    /// One run on `p` nodes at `f` GHz as the runtime measures it: each node's share of the
    /// compute time, calls and bytes, each off by up to 1 %.
    fn iso_run(job_id: u64, p: usize, f: f64, noise: &mut Noise) -> Outcome {
        let pf = p as f64;
        let t = true_wall(pf, f);
        let nodes = (0..p)
            .map(|i| {
                let c = true_compute(pf, f) / pf * noise.next();
                NodeOutcome {
                    gpu: None,
                    name: format!("n{i}"),
                    node_type: "x".into(),
                    freq_ghz: f,
                    energy_j: Some(1.0),
                    compute_s: Some(c),
                    comm_s: Some((t - c).max(0.0)),
                    calls: Some((true_m(pf) / pf * noise.next()).round() as u64),
                    bytes: Some((true_b(pf) / pf * noise.next()).round() as u64),
                }
            })
            .collect();
        completed(job_id, t, nodes, noise)
    }

    fn at(e: &Expr, p: f64) -> f64 {
        e.eval(&[1.0, p]).unwrap()
    }

    fn close(got: f64, want: f64, tol: f64) -> bool {
        ((got - want) / want).abs() <= tol
    }

    #[test]
    fn iso_energy_overheads_come_from_the_runtime_counts_and_compute_time() {
        let mut noise = Noise(5);
        let mut runs = Vec::new();
        for (k, (p, f)) in [(2, 2.5), (4, 2.5), (8, 2.5), (2, 2.0), (4, 2.0), (8, 2.0)]
            .into_iter()
            .enumerate()
        {
            runs.push(iso_run(k as u64 + 1, p, f, &mut noise));
        }
        let r = iso_energy(&wrong_iso(), &runs).unwrap();
        let app = &r.params.app;
        let note = &r.params.note;
        assert!(r.params.refitted_overheads, "{note}");
        // Three node counts choose each law; two frequencies separate W_co from W_mo.
        assert_eq!(
            app.w_co.source(),
            format!(
                "{} * (p * log2(p))",
                app.w_co.source().split(' ').next().unwrap()
            )
        );
        assert!(
            app.w_mo.source().ends_with("* (p - 1)"),
            "{}",
            app.w_mo.source()
        );
        assert!(
            app.m.source().ends_with("* (p * (p - 1))"),
            "{}",
            app.m.source()
        );
        // B keeps the profile's law, with its coefficient refitted (not nested).
        assert!(app.b.source().ends_with(" * (p - 1)"), "{}", app.b.source());
        assert!(note.contains("b profile's p - 1"), "{note}");
        // The laws hold beyond the node counts measured (p = 16 is extrapolated).
        for p in [2.0, 4.0, 8.0, 16.0] {
            assert!(
                close(at(&app.w_co, p), true_w_co(p), 0.05),
                "W_co({p}) {}",
                at(&app.w_co, p)
            );
            assert!(
                close(at(&app.w_mo, p), true_w_mo(p), 0.05),
                "W_mo({p}) {}",
                at(&app.w_mo, p)
            );
            assert!(close(at(&app.m, p), true_m(p), 0.02), "M({p})");
            assert!(close(at(&app.b, p), true_b(p), 0.02), "B({p})");
        }
        assert!(
            close(r.params.alpha, TRUE_ALPHA, 0.02),
            "alpha {}",
            r.params.alpha
        );
        // The refined model predicts an unmeasured configuration from the truth's formula.
        let refined = IsoEnergy {
            app: app.clone(),
            ..wrong_iso()
        };
        let got = refined.wall_time_s(1.0, 16, 2.2).unwrap();
        assert!(
            close(got, true_wall(16.0, 2.2), 0.03),
            "{got} vs {}",
            true_wall(16.0, 2.2)
        );
        let before = wrong_iso().wall_time_s(1.0, 16, 2.2).unwrap();
        assert!(
            !close(before, true_wall(16.0, 2.2), 0.2),
            "the start is clearly wrong: {before}"
        );

        // Refining the refined model again keeps one coefficient per term.
        let again = iso_energy(&refined, &runs).unwrap();
        for e in [&again.params.app.w_co, &again.params.app.b] {
            assert_eq!(e.source().matches(" * (").count(), 1, "{}", e.source());
        }
        assert!(close(at(&again.params.app.b, 8.0), true_b(8.0), 0.02));
    }

    #[test]
    fn a_data_set_shared_out_takes_its_law() {
        // NAS IS's all-to-all shares out one data set of 4e9 bytes: each of p ranks keeps
        // 1/p of its share and receives the rest, so all ranks together receive
        // 4e9 (p - 1) / p bytes from each other (and the profile says p - 1).
        let mut noise = Noise(9);
        let runs: Vec<Outcome> = [2, 4, 8]
            .into_iter()
            .enumerate()
            .map(|(k, p)| {
                let mut o = iso_run(k as u64 + 1, p, 2.5, &mut noise);
                let pf = p as f64;
                for n in &mut o.nodes {
                    n.bytes = Some((4e9 / pf * (pf - 1.0) / pf * noise.next()).round() as u64);
                }
                o
            })
            .collect();
        let r = iso_energy(&wrong_iso(), &runs).unwrap();
        let b = &r.params.app.b;
        assert!(b.source().ends_with(" * ((p - 1) / p)"), "{}", b.source());
        for p in [2.0, 16.0, 64.0] {
            let want = 4e9 * (p - 1.0) / p;
            assert!(close(at(b, p), want, 0.02), "B({p}) {}", at(b, p));
        }
    }

    #[test]
    fn one_frequency_keeps_w_mo_and_w_co_takes_the_whole_overhead() {
        let mut noise = Noise(9);
        let runs: Vec<Outcome> = [2, 4, 8]
            .into_iter()
            .map(|p| iso_run(p as u64, p, 2.5, &mut noise))
            .collect();
        let r = iso_energy(&wrong_iso(), &runs).unwrap();
        let app = &r.params.app;
        assert!(r.params.refitted_overheads);
        assert_eq!(app.w_mo.source(), "0");
        assert!(r.params.note.contains("w_mo kept"), "{}", r.params.note);
        // W_co t_c now carries the memory overhead too, so the computation time of the
        // runs (eq. 15 without the network) is still what was measured.
        for p in [2.0, 4.0, 8.0] {
            let got = (4e11 + at(&app.w_co, p)) * 1e-9 + 1e9 * 1e-7;
            assert!(
                close(got, true_compute(p, 2.5), 0.05),
                "p {p}: {got} {}",
                r.params.note
            );
        }
    }

    #[test]
    fn two_node_counts_refit_the_profiles_law_and_missing_measurements_fall_back() {
        let mut noise = Noise(13);
        let mut runs: Vec<Outcome> = [(2, 2.5), (4, 2.5), (2, 2.0), (4, 2.0)]
            .into_iter()
            .enumerate()
            .map(|(k, (p, f))| iso_run(k as u64, p, f, &mut noise))
            .collect();
        // Two node counts: each term keeps the profile's law (M's is wrong, so it fits badly).
        let r = iso_energy(&wrong_iso(), &runs).unwrap();
        assert!(r.params.refitted_overheads);
        assert!(
            r.params.app.m.source().ends_with("* (10 * p)")
                || r.params.app.m.source().ends_with("* (p)"),
            "{}",
            r.params.app.m.source()
        );
        assert!(close(at(&r.params.app.b, 4.0), true_b(4.0), 0.02));
        // Two runs at two frequencies would fit W_co and W_mo exactly: W_mo is kept.
        let two = [runs[0].clone(), runs[3].clone()];
        let r = iso_energy(&wrong_iso(), &two).unwrap();
        assert!(
            r.params
                .note
                .contains("w_mo kept: two runs fit two coefficients exactly"),
            "{}",
            r.params.note
        );
        assert_eq!(r.params.app.w_mo, wrong_iso().app.w_mo);

        // The runtime did not run on one node of each 4-node run: those runs teach alpha
        // only, and what is left covers one node count.
        for o in runs.iter_mut().filter(|o| o.nodes.len() == 4) {
            o.nodes[3].calls = None;
            o.nodes[3].bytes = None;
            o.nodes[3].compute_s = None;
        }
        let r = iso_energy(&wrong_iso(), &runs).unwrap();
        assert!(!r.params.refitted_overheads);
        assert_eq!(r.samples, 4, "every run still refines alpha");
        assert!(
            r.params.note.starts_with("alpha only: "),
            "{}",
            r.params.note
        );
        assert!(
            r.params.note.contains("one node count only (p = 2)"),
            "{}",
            r.params.note
        );
        assert_eq!(r.params.app.w_co, wrong_iso().app.w_co);
        assert_eq!(r.params.app.m, wrong_iso().app.m);

        // No measurement at all: today's alpha-only refit, and the note says so.
        for o in runs.iter_mut() {
            for n in o.nodes.iter_mut() {
                (n.calls, n.bytes, n.compute_s) = (None, None, None);
            }
        }
        let r = iso_energy(&wrong_iso(), &runs).unwrap();
        // The wrong overheads leave the busy time short of the wall time: alpha stays at 1.
        assert_eq!(
            r.params.note,
            "alpha only: no run was measured by the MPI runtime; \
             alpha 1.582 > 1 kept at 1: the busy time misses part of the wall time"
        );
        assert_eq!(r.params.alpha, 1.0);
        assert_eq!(r.params.app.b, wrong_iso().app.b);
    }

    #[test]
    fn amdahl_refits_scaling_and_gear_slowdown() {
        // Truth: T_C(0,1) = 1000 s, F_p = 0.9, T_B = 2 (n - 1), S_g = 1 + 0.6 (fmax/f - 1).
        let truth_tc = |n: f64| 1000.0 * (0.9 / n + 0.1);
        let tb = |n: f64| 2.0 * (n - 1.0);
        let fmax = 2.5;
        let run = |n: usize, f: f64| {
            let s = 1.0 + 0.6 * (fmax / f - 1.0);
            let t = s * truth_tc(n as f64) + tb(n as f64);
            Outcome {
                gpu_locked: false,
                job_id: n as u64,
                state: RunState::Completed,
                time_s: t,
                predicted_time_s: t,
                nodes: (0..n)
                    .map(|i| NodeOutcome {
                        gpu: None,
                        comm_s: None,
                        calls: None,
                        bytes: None,
                        name: format!("n{i}"),
                        node_type: "type1".into(),
                        freq_ghz: f,
                        energy_j: Some(1.0),
                        compute_s: None,
                    })
                    .collect(),
            }
        };
        let start = Amdahl {
            t_c1_s: 700.0,
            parallel_fraction: 0.5,
            law: CommLaw::Log,
            coeff_s: 10.0,
            slowdown: None,
            compute_w: None,
            blocked_w: None,
            site_types: site_types(),
        };
        // Two node counts only: scaling is kept, as the paper needs three.
        let two = [run(1, 2.5), run(2, 2.5)];
        let r = amdahl(&start, &two).unwrap();
        assert!(!r.params.refitted_scaling);
        assert_eq!(r.params.model.parallel_fraction, 0.5);

        let runs = [
            run(1, 2.5),
            run(2, 2.5),
            run(4, 2.5),
            run(8, 2.5),
            run(4, 2.0),
            run(8, 2.0),
        ];
        let r = amdahl(&start, &runs).unwrap();
        let m = &r.params.model;
        assert!(r.params.refitted_scaling);
        assert!(
            (m.parallel_fraction - 0.9).abs() < 1e-6,
            "F_p {}",
            m.parallel_fraction
        );
        assert!((m.t_c1_s - 1000.0).abs() < 1e-3);
        assert_eq!(m.law, CommLaw::Linear);
        // S_g at 2.0 GHz: 1 + 0.6 * 0.25 = 1.15.
        assert_eq!(r.params.slowdown_by_gear.len(), 1);
        assert!((r.params.slowdown_by_gear[0].1 - 1.15).abs() < 1e-6);
        let s = m.slowdown.as_ref().unwrap().eval(&[2.0, 2.5]).unwrap();
        assert!((s - 1.15).abs() < 1e-6);
        assert!(r.residual < 1e-6, "residual {}", r.residual);
    }
}
