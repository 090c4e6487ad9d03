//! Roofline, arch line and power line (paper 001, Choi and Vuduc, eqs. 1-8
//! and the cache term of eq. 10).
//!
//! A job of W flops and Q bytes of memory traffic (and optionally Q_cache
//! cache accesses) on a machine with `tau_flop`, `tau_mem` (seconds per flop
//! and per byte), `eps_flop`, `eps_mem`, `eps_cache` (joules per flop, byte
//! and cache access) and constant power `pi_0` takes
//!
//! `T = max(W tau_flop, Q tau_mem)`                                (eqs. 1, 3)
//!
//! and uses
//!
//! `E = W eps_flop + Q eps_mem + Q_cache eps_cache + pi_0 T`       (eqs. 2, 4, 10)
//!
//! greenup splits W, Q and Q_cache evenly over the p nodes (they may be
//! expressions in p) and applies the formulas per node.
//!
//! Frequency: every machine coefficient is an expression in `f` (GHz). The
//! paper fits them at one clock; the shipped example assumes the usual
//! reading: `tau_flop` scales with the clock period (`tau_flop(f) =
//! tau_flop(f_max) * f_max / f`), memory time and the energies per operation
//! do not depend on f. A profile states its own dependence in its expressions.
//! This is not hetero's additive `T_cp S + T_mem` ([`super::hetero::TypeTimes::compute_s`]):
//! the roofline's time is the larger of the flop and memory times, as published.

use std::collections::HashMap;

use super::{
    Choice, ModelError, NodeChoices, NodeSlot, Predictor, SweepTable, finite, finite_or,
    node_count, node_freq,
};
use crate::expr::Expr;

/// The roofline model of one application on one kind of node.
#[derive(Debug, Clone, PartialEq)]
pub struct Roofline {
    /// Flops of the whole job; expression in `p`.
    pub flops: Expr,
    /// Memory bytes of the whole job; expression in `p`.
    pub bytes: Expr,
    /// Cache accesses of the whole job (expression in `p`) and joules per access (in `f`).
    pub cache: Option<(Expr, Expr)>,
    /// Seconds per flop on one node; expression in `f`.
    pub tau_flop_s: Expr,
    /// Seconds per byte on one node; expression in `f`.
    pub tau_mem_s: Expr,
    /// Joules per flop; expression in `f`.
    pub eps_flop_j: Expr,
    /// Joules per byte; expression in `f`.
    pub eps_mem_j: Expr,
    /// Constant watts of one node; expression in `f`.
    pub pi0_w: Expr,
}

/// Machine coefficients at one frequency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Machine {
    /// Seconds per flop.
    pub tau_flop: f64,
    /// Seconds per byte.
    pub tau_mem: f64,
    /// Joules per flop.
    pub eps_flop: f64,
    /// Joules per byte.
    pub eps_mem: f64,
    /// Constant watts.
    pub pi0: f64,
}

impl Machine {
    /// Time-balance B_tau = tau_mem / tau_flop, in flops per byte (eq. 3).
    pub fn time_balance(&self) -> f64 {
        self.tau_mem / self.tau_flop
    }

    /// Energy-balance B_eps = eps_mem / eps_flop, in flops per byte (eq. 4).
    pub fn energy_balance(&self) -> f64 {
        self.eps_mem / self.eps_flop
    }

    /// Constant-flop energy efficiency eta = eps_flop / (eps_flop + pi0 tau_flop).
    pub fn eta_flop(&self) -> f64 {
        self.eps_flop / (self.eps_flop + self.pi0 * self.tau_flop)
    }

    /// Effective energy-balance at intensity `i` flops per byte (eq. 6).
    pub fn effective_energy_balance(&self, i: f64) -> f64 {
        let eta = self.eta_flop();
        eta * self.energy_balance() + (1.0 - eta) * (self.time_balance() - i).max(0.0)
    }

    /// Time of W flops and Q bytes (eq. 1).
    pub fn time(&self, w: f64, q: f64) -> f64 {
        (w * self.tau_flop).max(q * self.tau_mem)
    }

    /// Energy of W flops and Q bytes (eq. 4, no cache term).
    pub fn energy(&self, w: f64, q: f64) -> f64 {
        w * self.eps_flop + q * self.eps_mem + self.pi0 * self.time(w, q)
    }

    /// Average power at intensity `i` (eq. 7).
    pub fn power_line(&self, i: f64) -> f64 {
        let bt = self.time_balance();
        let pi_flop = self.eps_flop / self.tau_flop;
        pi_flop / self.eta_flop() * (i.min(bt) / bt + self.effective_energy_balance(i) / i.max(bt))
    }
}

fn ev(e: &Expr, what: &str, vals: &[f64]) -> Result<f64, ModelError> {
    let v = e.eval(vals).map_err(|m| ModelError::Expression {
        what: format!("roofline {what}"),
        message: m.to_string(),
    })?;
    finite(&format!("roofline {what}"), v)
}

impl Roofline {
    /// The machine coefficients at `f` GHz.
    pub fn machine(&self, f: f64) -> Result<Machine, ModelError> {
        let fv = [f];
        Ok(Machine {
            tau_flop: ev(&self.tau_flop_s, "tau_flop_s", &fv)?,
            tau_mem: ev(&self.tau_mem_s, "tau_mem_s", &fv)?,
            eps_flop: ev(&self.eps_flop_j, "eps_flop_j", &fv)?,
            eps_mem: ev(&self.eps_mem_j, "eps_mem_j", &fv)?,
            pi0: ev(&self.pi0_w, "pi0_w", &fv)?,
        })
    }
}

impl Predictor for Roofline {
    fn name(&self) -> &'static str {
        "roofline"
    }

    /// Per node: `compute_s = T`, dynamic energy = the operations' energy plus
    /// the part of `pi_0 T` above the node's lowest `pi_0` over its
    /// frequencies, static power = that lowest `pi_0`. With one frequency per
    /// node this is exactly eq. 10 summed over the nodes.
    fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError> {
        let p = node_count(nodes)?;
        let pv = [p as f64];
        let w = ev(&self.flops, "flops", &pv)? / p as f64;
        let q = ev(&self.bytes, "bytes", &pv)? / p as f64;
        let qc = match &self.cache {
            Some((qc, _)) => ev(qc, "cache_accesses", &pv)? / p as f64,
            None => 0.0,
        };
        // Nodes share frequencies: evaluate each frequency once.
        let mut seen: HashMap<u64, (f64, f64, f64)> = HashMap::new();
        let mut rows = Vec::with_capacity(p);
        for slot in nodes {
            let mut per_f = Vec::with_capacity(slot.freqs_ghz.len());
            for &f in &slot.freqs_ghz {
                if let Some(&(t, ops_j, pi0)) = seen.get(&f.to_bits()) {
                    per_f.push((f, t, ops_j, pi0));
                    continue;
                }
                let m = self.machine(node_freq(slot, f)?)?;
                let eps_cache = match &self.cache {
                    Some((_, e)) => ev(e, "eps_cache_j", &[f])?,
                    None => 0.0,
                };
                let t = m.time(w, q);
                let ops_j = w * m.eps_flop + q * m.eps_mem + qc * eps_cache;
                seen.insert(f.to_bits(), (t, ops_j, m.pi0));
                per_f.push((f, t, ops_j, m.pi0));
            }
            let static_w = per_f.iter().map(|x| x.3).fold(f64::INFINITY, f64::min);
            let static_w = if static_w.is_finite() { static_w } else { 0.0 };
            let mut choices = Vec::with_capacity(per_f.len());
            for (f, t, ops_j, pi0) in per_f {
                choices.push(Choice {
                    wait_w: 0.0,
                    gpu_mhz: None,
                    freq_ghz: f,
                    compute_s: finite_or(t, || {
                        format!("roofline time of node {} at {f} GHz", slot.name)
                    })?,
                    dynamic_j: finite_or(ops_j + (pi0 - static_w) * t, || {
                        format!("roofline energy of node {} at {f} GHz", slot.name)
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
}
