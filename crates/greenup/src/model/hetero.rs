//! Heterogeneous iterative jobs (paper 004, Charr et al., eqs. 2 and 11-14).
//!
//! Each node type has its measured compute time `T_cp` and communication time
//! `T_cm` per iteration at maximum frequency, its dynamic power `P_d` and
//! static power `P_s` at maximum frequency, and its frequency list. With the
//! scaling factor `S_i = F_max_i / F_i` of node i, one iteration takes
//!
//! `T_new = max_i(T_cp_i * S_i) + min_i(T_cm_i)`                  (eq. 2)
//!
//! and uses
//!
//! `E = sum_i S_i^-2 * P_d_i * T_cp_i + sum_i P_s_i * T_new`      (eq. 11)
//!
//! The whole job is one iteration times the iteration count. This is exactly
//! the [`SweepTable`] form, so the table is the model:
//! `compute_s = T_cp * S * iters`, `dynamic_j = S^-2 * P_d * T_cp * iters`,
//! `static_w = P_s`, `fixed_time_s = min T_cm * iters`, `fixed_energy_j = 0`.
//!
//! The dynamic power at frequency f is the site's `dynamic_w(f)` for the node
//! type, so `dynamic_w(f) * T_cp * S` equals `S^-2 * P_d * T_cp` when the site
//! gives power at maximum frequency with the cube law of eq. 8. A profile may
//! instead give its own measured `p_dyn_w` and `p_static_w` (at maximum
//! frequency); then eq. 8's `P_d * S^-3` is used as published.

use std::collections::BTreeMap;

use super::{
    Choice, ModelError, NodeSlot, Predictor, SweepTable, finite, finite_or, node_count, node_freq,
    power_error, rows_by_kind, site_type,
};
use crate::model::NodeType;

/// What one node type measures per iteration at its maximum frequency.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeTimes {
    /// Compute seconds per iteration at maximum frequency (`T_cp`).
    pub t_cp_s: f64,
    /// Communication seconds per iteration, slack included (`T_cm`).
    pub t_cm_s: f64,
    /// Dynamic watts at maximum frequency, when the profile measured its own.
    pub p_dyn_w: Option<f64>,
    /// Static watts, when the profile measured its own.
    pub p_static_w: Option<f64>,
}

/// The heterogeneous iterative model of paper 004 on a site's node types.
#[derive(Debug, Clone, PartialEq)]
pub struct Hetero {
    /// Number of iterations the job runs.
    pub iterations: f64,
    /// Per node type measurements, keyed by site node type name.
    pub types: BTreeMap<String, TypeTimes>,
    /// The site's node types (frequencies and power).
    pub site_types: BTreeMap<String, NodeType>,
}

impl Hetero {
    /// One node's choices and static power.
    fn row(&self, slot: &NodeSlot) -> Result<(Vec<Choice>, f64), ModelError> {
        let nt = site_type(&self.site_types, slot)?;
        let times = self
            .types
            .get(&slot.node_type)
            .ok_or_else(|| ModelError::UnknownNodeType {
                node: slot.name.clone(),
                node_type: slot.node_type.clone(),
            })?;
        let fmax = nt.fmax();
        if fmax <= 0.0 {
            return Err(ModelError::Config(format!(
                "node type '{}' has no frequencies",
                nt.name
            )));
        }
        let expr_err = power_error(nt);
        // Static power is constant over frequencies (paper 004, sec. III-B): take it at F_max.
        let static_w = match times.p_static_w {
            Some(w) => w,
            None => nt.static_w(fmax).map_err(expr_err)?,
        };
        let static_w = finite_or(static_w, || format!("static power of node {}", slot.name))?;
        let mut choices = Vec::with_capacity(slot.freqs_ghz.len());
        for &f in &slot.freqs_ghz {
            let s = fmax / node_freq(slot, f)?;
            let compute_s = times.t_cp_s * s * self.iterations;
            let p_dyn = match times.p_dyn_w {
                Some(pd) => pd * s.powi(-3),
                None => nt.dynamic_w(f).map_err(expr_err)?,
            };
            let dynamic_j = p_dyn * compute_s;
            choices.push(Choice {
                gpu_mhz: None,
                freq_ghz: f,
                compute_s: finite_or(compute_s, || {
                    format!("compute time of node {} at {f} GHz", slot.name)
                })?,
                dynamic_j: finite_or(dynamic_j, || {
                    format!("dynamic energy of node {} at {f} GHz", slot.name)
                })?,
            });
        }
        Ok((choices, static_w))
    }
}

impl Predictor for Hetero {
    fn name(&self) -> &'static str {
        "hetero"
    }

    fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError> {
        node_count(nodes)?;
        let rows = rows_by_kind(nodes, |s| self.row(s))?;
        // Eq. 2: communication is the smallest T_cm, the one without slack.
        let mut min_cm = f64::INFINITY;
        for s in nodes {
            if let Some(t) = self.types.get(&s.node_type) {
                min_cm = min_cm.min(t.t_cm_s);
            }
        }
        let fixed_time_s = finite("communication time", min_cm * self.iterations)?;
        Ok(SweepTable {
            nodes: rows,
            fixed_time_s,
            fixed_energy_j: 0.0,
        })
    }
}
