//! Iso-energy-efficiency (paper 000, Song et al., eqs. 13-21).
//!
//! A machine vector `(t_c, t_m, t_msg, t_Byte, P_idle, dP_c, dP_m)`, each a
//! function of the frequency f in GHz, and an application vector
//! `(alpha, W_c, W_m, W_co, W_mo, M, B)`, each a function of the problem size
//! n and the processor count p, give
//!
//! - `T1 = W_c t_c + W_m t_m`                                          (eq. 13)
//! - `E1 = alpha T1 P_idle + W_c t_c dP_c + W_m t_m dP_m`              (eq. 13)
//! - `Tp = (W_c+W_co) t_c + (W_m+W_mo) t_m + M t_msg + B t_Byte`       (eqs. 15, 17)
//! - `Ep = alpha Tp P_idle + (W_c+W_co) t_c dP_c + (W_m+W_mo) t_m dP_m` (eq. 15)
//! - `Eo = Ep - E1`, `EEF = Eo / E1`, `EE = 1 / (1 + EEF) = E1 / Ep`   (eqs. 16-21)
//!
//! `Tp` is the paper's sum of all p processors' busy times, not a wall time.
//! greenup assumes balanced work, so each processor is busy `Tp / p` and,
//! with the overlap factor, the job's wall time is `alpha * Tp / p`. Both the
//! sequential and the parallel energy use the application vector at the same
//! (n, p), so that `Ep - E1` is exactly eq. 16.
//!
//! One processor is one node (p = node count). The machine vector's watts are either
//! the profile's own expressions or, with `power: TYPE`, the site's node type's (its
//! measured curve laid over, [`crate::model::measured_power`]): one home for a node's
//! watts, which a learned profile would otherwise copy and let drift.
//!
//! A processor that waits in MPI polls: paper 000 books that time at `P_idle`, but a
//! polling core draws with its clock. The machine vector's `wait_share` ω adds
//! `ω dP_c (M t_msg + B t_Byte)` to `Ep` (0, the paper's, unless learned or stated).
//!
//! Clock sensitivity needs no extra term here: `W_c t_c(f) + W_m t_m(f)` is already
//! the compute-plus-memory split of hetero's `t(f) = T_cp f_max / f + T_mem` (Hsu and
//! Feng's beta form) when `t_c` scales as `1 / f` and `t_m` is constant, and each
//! is an expression in `f` the profile states.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{
    Choice, Config, ModelError, NodeChoices, NodeSlot, NodeType, Prediction, Predictor, SweepTable,
    finite, finite_or, node_count,
};
use crate::expr::Expr;

/// Paper 000's machine vector; every entry is an expression in `f` (GHz).
#[derive(Debug, Clone, PartialEq)]
pub struct MachineVector {
    /// Seconds per on-chip instruction.
    pub t_c: Expr,
    /// Seconds per memory access.
    pub t_m: Expr,
    /// Seconds to start a message.
    pub t_msg: Expr,
    /// Seconds per byte sent.
    pub t_byte: Expr,
    /// Where one processor's watts come from.
    pub power: MachinePower,
    /// Share of `dP_c` a processor draws while it waits in MPI (0 to 1; 0 is paper 000's
    /// idle wait).
    pub wait_share: f64,
}

/// Where the machine vector's watts come from.
// One per profile, never in a collection: boxing the larger variant would save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum MachinePower {
    /// The profile's own expressions in `f`.
    Stated {
        /// Idle watts of one processor's system.
        p_idle: Expr,
        /// Extra watts while computing.
        dp_c: Expr,
        /// Extra watts while accessing memory.
        dp_m: Expr,
    },
    /// The site's node type: `P_idle` its idle watts, `dP_c` its busy watts over idle
    /// (measured where greenupd measured them), `dP_m` 0. `watts` is filled when the
    /// profile is placed on a site ([`IsoEnergy::on_site`]).
    Site {
        /// The node type's name in the site config.
        node_type: String,
        /// The site's node type, once placed.
        watts: Option<Box<NodeType>>,
    },
}

/// Paper 000's application vector; every entry is an expression in `n` and `p`.
#[derive(Debug, Clone, PartialEq)]
pub struct AppVector {
    /// Overlap factor (0 to 1).
    pub alpha: Expr,
    /// Instructions of the sequential run.
    pub w_c: Expr,
    /// Memory accesses of the sequential run.
    pub w_m: Expr,
    /// Extra instructions of the parallel run.
    pub w_co: Expr,
    /// Extra memory accesses of the parallel run.
    pub w_mo: Expr,
    /// Messages.
    pub m: Expr,
    /// Bytes sent.
    pub b: Expr,
}

/// The iso-energy-efficiency model of one application on one machine.
#[derive(Debug, Clone, PartialEq)]
pub struct IsoEnergy {
    /// Problem size used when planning.
    pub n: f64,
    /// Machine vector.
    pub machine: MachineVector,
    /// Application vector.
    pub app: AppVector,
}

/// One row of `greenup model ee`: the paper's quantities at (n, p, f).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EeRow {
    /// Processors (nodes).
    pub p: usize,
    /// Frequency in GHz.
    pub f_ghz: f64,
    /// Sequential busy time T1 in seconds (eq. 13).
    pub t1_s: f64,
    /// Parallel busy time Tp in seconds, summed over all processors (eq. 15).
    pub tp_s: f64,
    /// Sequential energy E1 in joules (eq. 13).
    pub e1_j: f64,
    /// Parallel energy Ep in joules (eq. 15).
    pub ep_j: f64,
    /// Energy efficiency factor Eo / E1 (eq. 19).
    pub eef: f64,
    /// Iso-energy-efficiency E1 / Ep (eq. 21).
    pub ee: f64,
}

impl EeRow {
    /// Parallel energy overhead Eo = Ep - E1 in joules (eq. 16).
    pub fn eo_j(&self) -> f64 {
        self.ep_j - self.e1_j
    }
}

/// The evaluated vectors at one point.
#[derive(Clone, Copy)]
struct Point {
    alpha: f64,
    t1: f64,
    tp: f64,
    e1: f64,
    ep: f64,
    p_idle: f64,
    dp_c: f64,
}

fn ev(e: &Expr, what: &str, vals: &[f64]) -> Result<f64, ModelError> {
    e.eval(vals).map_err(|m| ModelError::Expression {
        what: format!("iso_energy {what}"),
        message: m.to_string(),
    })
}

impl IsoEnergy {
    /// This model with its `power: TYPE` resolved against the site's node types (those
    /// greenupd decides with, measured curves laid over). Stated watts are kept.
    pub fn on_site(
        &self,
        types: &std::collections::BTreeMap<String, NodeType>,
    ) -> Result<IsoEnergy, ModelError> {
        let mut placed = self.clone();
        if let MachinePower::Site { node_type, watts } = &mut placed.machine.power {
            let nt = types
                .get(node_type.as_str())
                .ok_or_else(|| ModelError::Expression {
                    what: "iso_energy machine.power".into(),
                    message: format!(
                        "node type '{node_type}' is not in the site config (it has: {})",
                        types.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                })?;
            *watts = Some(Box::new(nt.clone()));
        }
        Ok(placed)
    }

    /// One processor's `P_idle`, `dP_c` and `dP_m` at `f` GHz.
    pub fn watts(&self, f: f64) -> Result<(f64, f64, f64), ModelError> {
        match &self.machine.power {
            MachinePower::Stated { p_idle, dp_c, dp_m } => {
                let fv = [f];
                Ok((
                    ev(p_idle, "machine.p_idle", &fv)?,
                    ev(dp_c, "machine.dp_c", &fv)?,
                    ev(dp_m, "machine.dp_m", &fv)?,
                ))
            }
            MachinePower::Site {
                node_type,
                watts: Some(nt),
            } => {
                let w = nt.watts(f).map_err(|m| ModelError::Expression {
                    what: format!("iso_energy machine.power (node type {node_type})"),
                    message: m.to_string(),
                })?;
                Ok((w.idle_w, w.busy_w - w.idle_w, 0.0))
            }
            MachinePower::Site {
                node_type,
                watts: None,
            } => Err(ModelError::Expression {
                what: "iso_energy machine.power".into(),
                message: format!(
                    "node type '{node_type}''s watts are the site's: give the site config"
                ),
            }),
        }
    }

    fn point(&self, n: f64, p: usize, f: f64) -> Result<Point, ModelError> {
        if p == 0 {
            return Err(ModelError::NoProcessors);
        }
        if !(f > 0.0 && f.is_finite()) {
            return Err(ModelError::BadFrequency { ghz: f });
        }
        let m = &self.machine;
        let fv = [f];
        let t_c = ev(&m.t_c, "machine.t_c", &fv)?;
        let t_m = ev(&m.t_m, "machine.t_m", &fv)?;
        let t_msg = ev(&m.t_msg, "machine.t_msg", &fv)?;
        let t_byte = ev(&m.t_byte, "machine.t_byte", &fv)?;
        let (p_idle, dp_c, dp_m) = self.watts(f)?;
        let a = &self.app;
        let np = [n, p as f64];
        let alpha = ev(&a.alpha, "application.alpha", &np)?;
        let w_c = ev(&a.w_c, "application.w_c", &np)?;
        let w_m = ev(&a.w_m, "application.w_m", &np)?;
        let w_co = ev(&a.w_co, "application.w_co", &np)?;
        let w_mo = ev(&a.w_mo, "application.w_mo", &np)?;
        let msgs = ev(&a.m, "application.m", &np)?;
        let bytes = ev(&a.b, "application.b", &np)?;

        let t1 = w_c * t_c + w_m * t_m;
        let e1 = alpha * t1 * p_idle + w_c * t_c * dp_c + w_m * t_m * dp_m;
        let comm = msgs * t_msg + bytes * t_byte;
        let tp = (w_c + w_co) * t_c + (w_m + w_mo) * t_m + comm;
        let ep = alpha * tp * p_idle
            + (w_c + w_co) * t_c * dp_c
            + (w_m + w_mo) * t_m * dp_m
            + m.wait_share * comm * dp_c;
        let at = format!("n={n}, p={p}, f={f} GHz");
        Ok(Point {
            alpha: finite(&format!("alpha at {at}"), alpha)?,
            t1: finite(&format!("T1 at {at}"), t1)?,
            tp: finite(&format!("Tp at {at}"), tp)?,
            e1: finite(&format!("E1 at {at}"), e1)?,
            ep: finite(&format!("Ep at {at}"), ep)?,
            p_idle: finite(&format!("P_idle at f={f} GHz"), p_idle)?,
            dp_c: finite(&format!("dP_c at f={f} GHz"), dp_c)?,
        })
    }

    /// T1, Tp, E1, Ep, EEF and EE at problem size `n`, `p` processors and `f_ghz`.
    pub fn ee_row(&self, n: f64, p: usize, f_ghz: f64) -> Result<EeRow, ModelError> {
        let pt = self.point(n, p, f_ghz)?;
        if pt.e1 <= 0.0 || pt.ep <= 0.0 {
            return Err(ModelError::NoEfficiency {
                n,
                p,
                ghz: f_ghz,
                e1_j: pt.e1,
                ep_j: pt.ep,
            });
        }
        let eef = (pt.ep - pt.e1) / pt.e1;
        Ok(EeRow {
            p,
            f_ghz,
            t1_s: pt.t1,
            tp_s: pt.tp,
            e1_j: pt.e1,
            ep_j: pt.ep,
            eef,
            ee: pt.e1 / pt.ep,
        })
    }

    /// Wall time `alpha * Tp / p` in seconds, assuming balanced work.
    pub fn wall_time_s(&self, n: f64, p: usize, f_ghz: f64) -> Result<f64, ModelError> {
        let pt = self.point(n, p, f_ghz)?;
        Ok(pt.alpha * pt.tp / p as f64)
    }
}

impl Predictor for IsoEnergy {
    fn name(&self) -> &'static str {
        "iso_energy"
    }

    /// Each node computes `alpha * Tp(f) / p` and uses `Ep(f) / p`. Its static
    /// power is `P_idle` at its lowest allowed frequency: the least it draws
    /// while it waits for a slower node, above which it polls at `ω dP_c(f)`; the rest
    /// of `Ep(f) / p` is its dynamic energy. With every node at one frequency no node
    /// waits, so the table's energy is exactly the paper's Ep.
    fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError> {
        let p = node_count(nodes)?;
        let mut rows = Vec::with_capacity(p);
        // Every node at one frequency shares one point: evaluate each frequency once.
        let mut seen: HashMap<u64, Point> = HashMap::new();
        for slot in nodes {
            let mut points = Vec::with_capacity(slot.freqs_ghz.len());
            for &f in &slot.freqs_ghz {
                let pt = match seen.get(&f.to_bits()) {
                    Some(pt) => *pt,
                    None => {
                        let pt = self.point(self.n, p, f)?;
                        seen.insert(f.to_bits(), pt);
                        pt
                    }
                };
                points.push((f, pt));
            }
            let static_w = points
                .iter()
                .map(|(_, pt)| pt.p_idle)
                .fold(f64::INFINITY, f64::min);
            let static_w = if static_w.is_finite() { static_w } else { 0.0 };
            let mut choices = Vec::with_capacity(points.len());
            for (f, pt) in points {
                let compute_s = pt.alpha * pt.tp / p as f64;
                let dynamic_j = pt.ep / p as f64 - static_w * compute_s;
                choices.push(Choice {
                    wait_w: self.machine.wait_share * pt.dp_c,
                    gpu_mhz: None,
                    freq_ghz: f,
                    compute_s: finite_or(compute_s, || {
                        format!("iso_energy wall time of node {} at {f} GHz", slot.name)
                    })?,
                    dynamic_j: finite_or(dynamic_j, || {
                        format!("iso_energy busy energy of node {} at {f} GHz", slot.name)
                    })?,
                });
            }
            rows.push(NodeChoices {
                name: slot.name.clone(),
                node_type: slot.node_type.clone(),
                choices,
                static_w,
            });
        }
        Ok(SweepTable {
            nodes: rows,
            fixed_time_s: 0.0,
            fixed_energy_j: 0.0,
            steps: None,
        })
    }

    /// EE = E1 / Ep with E1 at the configuration's frequency (its highest when nodes differ).
    fn efficiency(&self, config: &Config, prediction: &Prediction) -> Option<f64> {
        let f = config
            .nodes
            .iter()
            .map(|n| n.freq_ghz)
            .fold(f64::NAN, f64::max);
        let pt = self.point(self.n, config.nodes.len(), f).ok()?;
        (prediction.energy_j > 0.0).then(|| pt.e1 / prediction.energy_j)
    }
}
