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
//! Clock sensitivity: paper 004 lets all compute time scale with the clock. A
//! memory-bound program slows much less, so each type may also carry `T_mem`,
//! seconds per iteration that do not shrink or grow with the clock:
//!
//! `t(f) = T_cp * f_max / f + T_mem`
//!
//! This is the form of Hsu and Feng's beta model (a power-aware DVFS
//! scheduler, SC 2005): `beta = T_cp / (T_cp + T_mem)` is the share of the
//! time at f_max that scales with the clock. Without a learned `T_mem` the
//! program is taken as compute-bound (`T_mem = 0`, beta = 1), which never
//! promises less slowdown than the program may show. [`TypeTimes::compute_s`]
//! is the one home of this rule.
//!
//! The dynamic power at frequency f is the site's `dynamic_w(f)` for the node
//! type, so `dynamic_w(f) * T_cp * S` equals `S^-2 * P_d * T_cp` when the site
//! gives power at maximum frequency with the cube law of eq. 8. A profile may
//! instead give its own measured `p_dyn_w` and `p_static_w` (at maximum
//! frequency); then `p_dyn_w` sets the level and the node type's curve the
//! shape: `p_dyn_w * dynamic_w(f) / dynamic_w(f_max)`, which is eq. 8's
//! `P_d * S^-3` under the site's cube law and keeps a measured curve's real
//! shape otherwise ([`dynamic_shape`]). Dynamic energy is that power times the
//! whole compute time `t(f)`, memory stalls included.
//!
//! Unequal work: a program may give the nodes of one type unequal shares (NAS DT's
//! sources and sink only start and finish). The type's `T_cp` is its mean node's, which
//! prices its energy right, but the job waits for its slowest node. So a type may carry
//! a `lead`, its slowest node's compute time over its mean node's, learned from runs
//! where each node measured its own ([`crate::profile::lead`]): a node's time in the
//! table is `lead * t(f)` and its dynamic energy stays `P_d(f) * t(f)`.
//! [`TypeTimes::slowest_s`] is the one home of this rule.
//!
//! Synchronised steps: with a step model ([`super::steps`]) the compute part of an
//! iteration is `sum_k max_τ share[k][τ] * t_τ(f_τ)` instead of `max_i t_i`, each type
//! τ's time being its slowest node's. The table then carries the node types as groups
//! of a [`StepTable`]; [`super::steps::ModelChoice`] records which of the two models
//! predicted the measured runs better, and only the winner predicts.

use std::collections::BTreeMap;

use super::steps::{ModelChoice, Steps};
use super::{
    Choice, ModelError, NodeSlot, Predictor, StepTable, SweepTable, finite, finite_or, node_count,
    node_freq, power_error, rows_by_kind, site_type,
};
use crate::expr::ExprError;
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
    /// Compute seconds per iteration that do not scale with the clock (memory
    /// stalls, `T_mem`). `None`: not learned, taken as 0 (compute-bound).
    pub t_mem_s: Option<f64>,
    /// How `t_mem_s` was fitted, when runs at several clocks taught it.
    pub t_mem_fit: Option<ClockFit>,
    /// How much longer the type's slowest node computes than its mean node where the
    /// program gives the nodes unequal work (1.45: 45 % longer); `None`: equal work.
    pub lead: Option<f64>,
    /// The share of its dynamic watts at a clock that a node of this type draws while it
    /// waits for the others (about 0.8 where MPI polls, 0 where a wait sleeps); `None`:
    /// a waiting node draws its static watts only.
    pub wait_share: Option<f64>,
}

/// How a type's clock sensitivity (`t_cp_s` against `t_mem_s`) was fitted.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockFit {
    /// Distinct clocks among the measured runs.
    pub clocks: u32,
    /// Node runs the fit used.
    pub samples: u32,
    /// Root-mean-square relative error of the fitted compute time over those runs (0.01 = 1%).
    pub rms_error: f64,
    /// Where the runs came from, in words (e.g. which command fitted them).
    pub source: String,
}

impl TypeTimes {
    /// A type known only by its compute and communication seconds per iteration:
    /// compute-bound, drawing the site's watts, its nodes doing equal work.
    pub fn timed(t_cp_s: f64, t_cm_s: f64) -> TypeTimes {
        TypeTimes {
            t_cp_s,
            t_cm_s,
            p_dyn_w: None,
            p_static_w: None,
            t_mem_s: None,
            t_mem_fit: None,
            lead: None,
            wait_share: None,
        }
    }

    /// Compute seconds of one iteration at scaling factor `s = f_max / f`:
    /// `t_cp_s * s + t_mem_s`, with an unlearned `t_mem_s` taken as 0.
    pub fn compute_s(&self, s: f64) -> f64 {
        self.t_cp_s * s + self.t_mem_s.unwrap_or(0.0)
    }

    /// Compute seconds of one iteration of the type's slowest node at `s = f_max / f`,
    /// the time the job waits for: [`Self::compute_s`] times the type's `lead`.
    pub fn slowest_s(&self, s: f64) -> f64 {
        self.compute_s(s) * self.lead.unwrap_or(1.0)
    }

    /// Dynamic watts of one node of type `nt` at `f` GHz: the profile's own level on
    /// the type's curve shape when it measured one, else the site's curve.
    pub fn dynamic_w(&self, nt: &NodeType, f: f64) -> Result<f64, ExprError> {
        match self.p_dyn_w {
            Some(pd) => Ok(pd * dynamic_shape(nt, f)),
            None => nt.dynamic_w(f),
        }
    }

    /// One line on which clock-sensitivity assumption holds for this type, for reports.
    pub fn clock_sensitivity(&self) -> String {
        match (self.t_mem_s, &self.t_mem_fit) {
            (Some(m), Some(fit)) => format!(
                "learned from runs at {} clocks (t_mem {} s per iteration, fit error {:.1}%)",
                fit.clocks,
                short(m),
                fit.rms_error * 100.0
            ),
            (Some(m), None) => format!(
                "given in the profile (t_mem {} s per iteration, not fitted)",
                short(m)
            ),
            (None, _) => "assumed compute-bound: measured at one clock only".to_string(),
        }
    }
}

/// A seconds figure to three significant digits, for one-line reports.
fn short(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}

/// Dynamic power at `f` relative to `f_max` on node type `nt`: the type's own curve,
/// `dynamic_w(f) / dynamic_w(f_max)`. Where that curve gives nothing usable (zero or
/// failing at f_max), paper 004's cube law `(f / f_max)^3`.
pub fn dynamic_shape(nt: &NodeType, f: f64) -> f64 {
    let fmax = nt.fmax();
    let cube = (f / fmax).powi(3);
    match (nt.dynamic_w(f), nt.dynamic_w(fmax)) {
        (Ok(at), Ok(top)) if top > 0.0 && top.is_finite() && at.is_finite() => at / top,
        _ => cube,
    }
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
    /// The step model that predicts time, when it won against the max model; `None`:
    /// paper 004's max model. A type with no share in any class leads no step, so a
    /// profile's `steps:` must give every type one (the profile check refuses it otherwise).
    pub steps: Option<Steps>,
    /// Which time model won and by how much, for the decision's reason.
    pub time_choice: Option<ModelChoice>,
}

impl Hetero {
    /// Whether `steps` predicts at least the max model's slowdown wherever a decision
    /// may go, probed at each node type alone at its lowest clock (the others at their
    /// maximum) and at every type at its lowest: then it is the safe one for a
    /// `max_slowdown` bound ([`super::steps::choose`]'s rule for too few runs).
    pub fn steps_safer(&self, steps: &Steps) -> bool {
        // Per type: compute seconds per iteration at f_max and at the lowest clock.
        let mut at: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        let mut comm = f64::INFINITY;
        for (ty, times) in &self.types {
            let Some(nt) = self.site_types.get(ty) else {
                continue;
            };
            let fmax = nt.fmax();
            let fmin = nt.freqs_ghz.iter().copied().fold(f64::INFINITY, f64::min);
            if !(fmax > 0.0 && fmin > 0.0 && fmin.is_finite()) {
                continue;
            }
            at.insert(
                ty.clone(),
                (times.slowest_s(1.0), times.slowest_s(fmax / fmin)),
            );
            comm = comm.min(times.t_cm_s);
        }
        if at.is_empty() {
            return false;
        }
        let comm = if comm.is_finite() { comm } else { 0.0 };
        let top: BTreeMap<String, f64> = at.iter().map(|(k, v)| (k.clone(), v.0)).collect();
        let steps_comm = steps.comm_s(comm, &top);
        let both = |t: &BTreeMap<String, f64>| {
            let max = t.values().copied().fold(0.0, f64::max) + comm;
            (max, steps.compute_s(t) + steps_comm)
        };
        let (max0, steps0) = both(&top);
        if !(max0 > 0.0 && steps0 > 0.0) {
            return false;
        }
        let mut probes: Vec<BTreeMap<String, f64>> = at
            .keys()
            .map(|slow| {
                at.iter()
                    .map(|(k, v)| (k.clone(), if k == slow { v.1 } else { v.0 }))
                    .collect()
            })
            .collect();
        probes.push(at.iter().map(|(k, v)| (k.clone(), v.1)).collect());
        probes.iter().all(|p| {
            let (m, s) = both(p);
            s / steps0 >= m / max0 - 1e-12
        })
    }

    /// One line saying which clock-sensitivity assumption holds for the node types
    /// `used` (each named when they differ), for a decision's reason.
    pub fn clock_sensitivity(&self, used: &[&str]) -> String {
        let lines: Vec<(&str, String)> = self
            .used_types(used)
            .into_iter()
            .map(|(ty, t)| (ty, t.clock_sensitivity()))
            .collect();
        let same = lines.windows(2).all(|w| w[0].1 == w[1].1);
        match lines.as_slice() {
            [] => "clock sensitivity: no node type of the profile used".to_string(),
            [(_, one), ..] if same => format!("clock sensitivity: {one}"),
            _ => {
                let each: Vec<String> = lines.iter().map(|(t, l)| format!("{t} {l}")).collect();
                format!("clock sensitivity: {}", each.join("; "))
            }
        }
    }

    /// The node types of `used` that the profile lists, each once, in the order `used`
    /// first names them: what a decision's reason speaks of.
    fn used_types<'a>(&'a self, used: &[&'a str]) -> Vec<(&'a str, &'a TypeTimes)> {
        let mut out: Vec<(&str, &TypeTimes)> = Vec::new();
        for &ty in used {
            if let Some(t) = self.types.get(ty)
                && !out.iter().any(|(seen, _)| *seen == ty)
            {
                out.push((ty, t));
            }
        }
        out
    }

    /// For a decision's reason, where the types `used` carry a lead: the run is timed by
    /// each such type's slowest node, so a user sees why the plan is longer than the
    /// type's mean node computes.
    pub fn unequal_work(&self, used: &[&str]) -> Option<String> {
        self.per_used_type(used, |t| t.lead.map(|l| format!("x{l:.2}")))
            .map(|each| {
                format!("unequal work: timed by each type's slowest node against its mean ({each})")
            })
    }

    /// For a decision's reason, where the types `used` draw while they wait: a lower
    /// clock also lowers their waits' watts, which the plan counted.
    pub fn waiting_draw(&self, used: &[&str]) -> Option<String> {
        self.per_used_type(used, |t| t.wait_share.map(|w| format!("{w:.2}")))
            .map(|each| {
                format!("waiting nodes draw a share of their clock's dynamic watts ({each})")
            })
    }

    /// "type figure" for each type of `used` that `figure` has one for, joined; `None`
    /// where none has.
    fn per_used_type(
        &self,
        used: &[&str],
        figure: impl Fn(&TypeTimes) -> Option<String>,
    ) -> Option<String> {
        let each: Vec<String> = self
            .used_types(used)
            .into_iter()
            .filter_map(|(ty, t)| figure(t).map(|f| format!("{ty} {f}")))
            .collect();
        (!each.is_empty()).then(|| each.join(", "))
    }

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
            return Err(ModelError::NoFrequencies {
                node_type: nt.name.clone(),
            });
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
            // The job waits for the slowest node; the energy is the mean node's, which
            // also waits while the slowest computes on.
            let compute_s = times.slowest_s(s) * self.iterations;
            let mean_s = times.compute_s(s) * self.iterations;
            let p_dyn = times.dynamic_w(nt, f).map_err(expr_err)?;
            let wait_w = p_dyn * times.wait_share.unwrap_or(0.0);
            let dynamic_j = p_dyn * mean_s + wait_w * (compute_s - mean_s);
            choices.push(Choice {
                wait_w: finite_or(wait_w, || {
                    format!("waiting power of node {} at {f} GHz", slot.name)
                })?,
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

    fn clock_note(&self, node_types: &[&str]) -> Option<String> {
        let mut clock = self.clock_sensitivity(node_types);
        for extra in [self.unequal_work(node_types), self.waiting_draw(node_types)]
            .into_iter()
            .flatten()
        {
            clock = format!("{clock}; {extra}");
        }
        Some(match &self.time_choice {
            Some(c) => format!("{}; {clock}", c.note()),
            None => clock,
        })
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
        let mut fixed_time_s = finite("communication time", min_cm * self.iterations)?;
        if let Some(steps) = &self.steps {
            let at_fmax: BTreeMap<String, f64> = nodes
                .iter()
                .filter_map(|s| {
                    let t = self.types.get(&s.node_type)?;
                    Some((s.node_type.clone(), t.slowest_s(1.0) * self.iterations))
                })
                .collect();
            fixed_time_s = steps.comm_s(fixed_time_s, &at_fmax);
        }
        let steps = self.steps.as_ref().map(|steps| {
            // The job's node types are the groups, in the order nodes bring them.
            let mut groups: Vec<String> = Vec::new();
            let group_of = nodes
                .iter()
                .map(|s| match groups.iter().position(|g| *g == s.node_type) {
                    Some(g) => g,
                    None => {
                        groups.push(s.node_type.clone());
                        groups.len() - 1
                    }
                })
                .collect();
            let weights = steps
                .classes
                .iter()
                .map(|c| {
                    groups
                        .iter()
                        .map(|g| c.share.get(g).copied().unwrap_or(0.0))
                        .collect()
                })
                .collect();
            StepTable {
                groups,
                group_of,
                weights,
            }
        });
        Ok(SweepTable {
            nodes: rows,
            fixed_time_s,
            fixed_energy_j: 0.0,
            steps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;
    use crate::model::{Config, NodeSetting, PowerModel};

    /// Node type `a` at 1.0 and 2.0 GHz with dynamic power `10 + 5 f` W (20 W at f_max,
    /// 15 W at 1 GHz: shape 0.75, where the cube law would say 0.125) and 3 W static.
    fn expr_type() -> NodeType {
        NodeType {
            name: "a".into(),
            freqs_ghz: vec![1.0, 2.0],
            power: PowerModel::Expr {
                dynamic_w: Expr::parse("10 + 5 * f", &["f"]).unwrap(),
                static_w: Expr::parse("3", &["f"]).unwrap(),
            },
        }
    }

    fn model(nt: NodeType, t_mem_s: Option<f64>, p_dyn_w: Option<f64>) -> Hetero {
        Hetero {
            iterations: 10.0,
            types: BTreeMap::from([(
                "a".to_string(),
                TypeTimes {
                    t_cp_s: 1.0,
                    t_cm_s: 0.5,
                    p_dyn_w,
                    p_static_w: None,
                    t_mem_s,
                    t_mem_fit: None,
                    lead: None,
                    wait_share: None,
                },
            )]),
            site_types: BTreeMap::from([("a".to_string(), nt)]),
            steps: None,
            time_choice: None,
        }
    }

    fn at(f: f64) -> Config {
        Config {
            nodes: vec![NodeSetting {
                name: "n1".into(),
                node_type: "a".into(),
                freq_ghz: f,
                gpu_mhz: None,
            }],
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn t_mem_does_not_scale_with_the_clock() {
        // t_cp 1.0, t_mem 0.5, t_cm 0.5, 10 iterations, profile's p_dyn_w 40 W.
        // At 1 GHz (S = 2): compute 2 + 0.5 = 2.5 s/iter, time 10 * (2.5 + 0.5) = 30 s;
        // dynamic 40 W * 15 / 20 = 30 W over 25 s = 750 J; static 3 W * 30 s = 90 J.
        let m = model(expr_type(), Some(0.5), Some(40.0));
        let p = m.predict(&at(1.0)).unwrap();
        assert!(close(p.time_s, 30.0), "{p:?}");
        assert!(close(p.energy_j, 840.0), "{p:?}");
        // At 2 GHz: compute 1.5 s/iter, time 20 s, 40 W * 15 s + 3 W * 20 s = 660 J.
        let p = m.predict(&at(2.0)).unwrap();
        assert!(close(p.time_s, 20.0) && close(p.energy_j, 660.0), "{p:?}");
        // Unlearned t_mem: the compute-bound law, 10 * (2 + 0.5) = 25 s at 1 GHz and
        // 30 W * 20 s + 3 W * 25 s = 675 J.
        let p = model(expr_type(), None, Some(40.0))
            .predict(&at(1.0))
            .unwrap();
        assert!(close(p.time_s, 25.0) && close(p.energy_j, 675.0), "{p:?}");
    }

    #[test]
    fn a_lead_sets_the_time_and_leaves_the_energy_to_the_mean_node() {
        // The first test's type with lead 1.25: at 2 GHz the mean node computes
        // 10 * 1.5 = 15 s and the slowest 18.75 s, so the job takes 18.75 + 10 * 0.5 =
        // 23.75 s; energy 40 W * 15 s (the mean node) + 3 W * 23.75 s = 671.25 J.
        let mut m = model(expr_type(), Some(0.5), Some(40.0));
        m.types.get_mut("a").unwrap().lead = Some(1.25);
        let p = m.predict(&at(2.0)).unwrap();
        assert!(close(p.time_s, 23.75), "{p:?}");
        assert!(close(p.energy_j, 671.25), "{p:?}");
        // The decision's reason says so; a type without a lead adds nothing.
        assert_eq!(
            m.clock_note(&["a", "a"]).unwrap(),
            "clock sensitivity: given in the profile (t_mem 0.500 s per iteration, not fitted); unequal work: timed by each type's slowest node against its mean (a x1.25)"
        );
        m.types.get_mut("a").unwrap().lead = None;
        assert!(!m.clock_note(&["a"]).unwrap().contains("unequal"));
    }

    #[test]
    fn a_waiting_node_draws_its_share_of_the_clocks_dynamic_watts() {
        // The lead test's type, whose nodes draw half their dynamic watts while they
        // wait. At 2 GHz (40 W dynamic, so 20 W waiting): the mean node computes 15 s
        // of the job's 23.75 s, so it waits 8.75 s: 600 J + 20 W * 8.75 s + 3 W *
        // 23.75 s = 846.25 J. At 1 GHz (30 W, so 15 W waiting): the mean node computes
        // 10 * 2.5 = 25 s, the slowest 31.25 s, the job 36.25 s: 30 W * 25 s + 15 W *
        // 11.25 s + 3 W * 36.25 s = 1027.5 J.
        let mut m = model(expr_type(), Some(0.5), Some(40.0));
        let a = m.types.get_mut("a").unwrap();
        a.lead = Some(1.25);
        a.wait_share = Some(0.5);
        let p = m.predict(&at(2.0)).unwrap();
        assert!(close(p.time_s, 23.75) && close(p.energy_j, 846.25), "{p:?}");
        let p = m.predict(&at(1.0)).unwrap();
        assert!(close(p.time_s, 36.25) && close(p.energy_j, 1027.5), "{p:?}");
        // Without a lead the node waits only through communication: 20 s at 2 GHz,
        // 15 s of compute, 5 s of waiting at 20 W: 600 + 100 + 60 = 760 J.
        m.types.get_mut("a").unwrap().lead = None;
        let p = m.predict(&at(2.0)).unwrap();
        assert!(close(p.time_s, 20.0) && close(p.energy_j, 760.0), "{p:?}");
        assert!(
            m.clock_note(&["a"])
                .unwrap()
                .ends_with("; waiting nodes draw a share of their clock's dynamic watts (a 0.50)"),
            "{:?}",
            m.clock_note(&["a"])
        );
    }

    #[test]
    fn a_profiles_power_level_follows_the_node_types_curve() {
        let nt = expr_type();
        assert!(close(dynamic_shape(&nt, 1.0), 0.75));
        // Under the site's cube law the shape is (f / f_max)^3, paper 004's S^-3.
        let cube = NodeType {
            name: "a".into(),
            freqs_ghz: vec![1.0, 2.0],
            power: PowerModel::AtMax {
                dynamic_w: 20.0,
                static_w: 3.0,
                gamma: 3.0,
            },
        };
        assert!(close(dynamic_shape(&cube, 1.0), 0.125));
        // p_dyn_w 40 W, compute-bound, 1 GHz: 40 W / 8 over 20 s = 100 J, static 75 J.
        let p = model(cube, None, Some(40.0)).predict(&at(1.0)).unwrap();
        assert!(close(p.energy_j, 175.0), "{p:?}");
        // A curve with nothing at f_max falls back to the cube law.
        let flat = NodeType {
            power: PowerModel::Expr {
                dynamic_w: Expr::parse("0", &["f"]).unwrap(),
                static_w: Expr::parse("3", &["f"]).unwrap(),
            },
            ..expr_type()
        };
        assert!(close(dynamic_shape(&flat, 1.0), 0.125));
    }

    #[test]
    fn the_reason_names_the_assumption_per_type() {
        let mut m = model(expr_type(), None, None);
        assert_eq!(
            m.clock_sensitivity(&["a", "a"]),
            "clock sensitivity: assumed compute-bound: measured at one clock only"
        );
        let t = m.types.get_mut("a").unwrap();
        t.t_mem_s = Some(0.0123);
        t.t_mem_fit = Some(ClockFit {
            clocks: 3,
            samples: 9,
            rms_error: 0.0234,
            source: "test".into(),
        });
        assert_eq!(
            m.clock_sensitivity(&["a"]),
            "clock sensitivity: learned from runs at 3 clocks (t_mem 0.0123 s per iteration, fit error 2.3%)"
        );
        let mut b = m.types["a"].clone();
        b.t_mem_s = None;
        m.types.insert("b".into(), b);
        assert_eq!(
            m.clock_sensitivity(&["a", "b"]),
            "clock sensitivity: a learned from runs at 3 clocks (t_mem 0.0123 s per iteration, fit error 2.3%); b assumed compute-bound: measured at one clock only"
        );
    }
}
