//! A node type's busy watts at the clocks its nodes measured, laid over the site
//! config's power model ([`crate::model::PowerModel::Measured`]): where each value at a
//! clock comes from, and how clocks between and beyond the measured ones are filled in.
//! Learning the curve from runs is `profile::node_power`'s.
//!
//! Why: real CPUs do not follow the cube law the site's `gamma` assumes (an EPYC 7502
//! measures 173/221/260 W busy at 1.5/2.2/2.5 GHz over a 77 W idle), so the prior
//! overstates what a lower clock saves.

use std::collections::BTreeMap;

use crate::model::NodeType;
use greenup_core::plan::Plan;
use greenup_wire::record::TypeWatts;

/// Where a node type's watts at one clock come from: the wire's type, since decisions
/// store it.
pub use greenup_wire::record::PowerSource;

/// One clock of a measured curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredClock {
    /// The clock in GHz.
    pub freq_ghz: f64,
    /// Mean watts of one node while computing at this clock.
    pub busy_w: f64,
    /// Distinct runs that measured it (at least `profile::node_power::MIN_RUNS`).
    pub runs: usize,
    /// Node samples averaged.
    pub samples: usize,
}

/// A node type's measured busy watts at the clocks enough runs measured, ascending.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PowerCurve {
    /// The measured clocks, ascending by frequency.
    pub clocks: Vec<MeasuredClock>,
}

impl PowerCurve {
    /// Busy watts of one node at `f` GHz and their source, given the site's busy watts
    /// (`site_busy_w`, static plus dynamic) at any clock. Between measured clocks the
    /// value is a straight line; outside them the site's shape is kept and scaled to
    /// meet the nearest measured clock, so the curve has no step where measurement ends.
    pub fn busy_w(&self, f: f64, site_busy_w: impl Fn(f64) -> f64) -> (f64, PowerSource) {
        let (Some(lo), Some(hi)) = (self.clocks.first(), self.clocks.last()) else {
            return (site_busy_w(f), PowerSource::Site);
        };
        if let Some(c) = self.clocks.iter().find(|c| same_clock(c.freq_ghz, f)) {
            return (c.busy_w, PowerSource::Measured { runs: c.runs });
        }
        if f > lo.freq_ghz && f < hi.freq_ghz {
            for w in self.clocks.windows(2) {
                let (a, b) = (w[0], w[1]);
                if f > a.freq_ghz && f < b.freq_ghz {
                    let t = (f - a.freq_ghz) / (b.freq_ghz - a.freq_ghz);
                    return (
                        a.busy_w + t * (b.busy_w - a.busy_w),
                        PowerSource::Interpolated,
                    );
                }
            }
        }
        let near = if f < lo.freq_ghz { lo } else { hi };
        let at_near = site_busy_w(near.freq_ghz);
        if !(at_near.is_finite() && at_near > 0.0) {
            return (site_busy_w(f), PowerSource::Site);
        }
        (
            site_busy_w(f) * near.busy_w / at_near,
            PowerSource::SiteScaled,
        )
    }
}

fn same_clock(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// `types` with `curves` laid over their site models; a type without a curve gets its
/// site model back.
pub fn overlay(
    types: &BTreeMap<String, NodeType>,
    curves: &BTreeMap<String, PowerCurve>,
) -> BTreeMap<String, NodeType> {
    types
        .iter()
        .map(|(k, t)| (k.clone(), t.with_measured(curves.get(k).cloned())))
        .collect()
}

/// The watts `plan` was made with: for each node type and clock its nodes run at, one
/// node's busy and idle watts by `types` (the site's models with any measured curves
/// laid over them) and the busy watts' source, by type then clock. A type `types` does
/// not know, or whose watts do not evaluate, is left out: the plan was made without it.
pub fn planned(types: &BTreeMap<String, NodeType>, plan: &Plan) -> Vec<TypeWatts> {
    let mut out: Vec<TypeWatts> = Vec::new();
    for n in &plan.nodes {
        let f = n.freq_ghz.0;
        if out
            .iter()
            .any(|w| w.node_type == n.node_type && same_clock(w.freq_ghz, f))
        {
            continue;
        }
        let Some(nt) = types.get(&n.node_type) else {
            continue;
        };
        let Ok(w) = nt.watts(f) else {
            continue;
        };
        out.push(TypeWatts {
            node_type: n.node_type.clone(),
            freq_ghz: f,
            busy_w: w.busy_w,
            idle_w: w.idle_w,
            source: w.source,
        });
    }
    out.sort_by(|a, b| {
        a.node_type
            .cmp(&b.node_type)
            .then(a.freq_ghz.total_cmp(&b.freq_ghz))
    });
    out
}

/// Each node type's watts at each clock it offers, with their source, one line each:
/// what an admin reads to see which values greenup plans with. A clock whose
/// expression fails there shows the error in place of its watts.
pub fn table(types: &BTreeMap<String, NodeType>) -> String {
    let mut out = format!(
        "{:<16} {:>7} {:>9} {:>9}  {}\n",
        "node type", "GHz", "idle W", "busy W", "source"
    );
    for (name, nt) in types {
        for &f in &nt.freqs_ghz {
            out += &match nt.watts(f) {
                Ok(w) => format!(
                    "{name:<16} {f:>7.2} {:>9.1} {:>9.1}  {}\n",
                    w.idle_w, w.busy_w, w.source
                ),
                Err(e) => format!("{name:<16} {f:>7.2} {:>9} {:>9}  error: {e}\n", "-", "-"),
            };
        }
    }
    out
}

#[cfg(test)]
mod table_tests {
    use super::*;
    use crate::expr::Expr;
    use crate::model::PowerModel;

    #[test]
    fn a_clock_whose_expression_fails_shows_the_error_in_place_of_its_watts() {
        // Busy 10 + 100 / (2 - f): 110 W at 1 GHz, no number at 2 GHz.
        let nt = NodeType {
            name: "t".into(),
            freqs_ghz: vec![1.0, 2.0],
            power: PowerModel::Expr {
                dynamic_w: Expr::parse("100 / (2 - f)", &["f"]).unwrap(),
                static_w: Expr::parse("10", &["f"]).unwrap(),
            },
        };
        let w = nt.watts(1.0).unwrap();
        assert_eq!(
            (w.idle_w, w.busy_w, w.source),
            (10.0, 110.0, PowerSource::Site)
        );
        assert!(nt.watts(2.0).is_err());
        let types = BTreeMap::from([("t".to_string(), nt)]);
        let text = table(&types);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["t", "1.00", "10.0", "110.0", "site"]
        );
        let bad: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(bad[..5], ["t", "2.00", "-", "-", "error:"], "{text}");
        assert!(lines[2].contains("100 / (2 - f)"), "{text}");
    }
}
