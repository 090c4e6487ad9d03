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
use greenup_core::quantity::Watts;
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

/// How much one node of a type draws against its type's curve, learned from its own runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeFactor {
    /// The node's watts over its type's at the same clock: 1.06 draws 6 % more.
    pub factor: f64,
    /// Distinct runs it was learned from (at least `profile::node_power::MIN_RUNS`).
    pub runs: usize,
}

/// A node type's measured busy watts at the clocks enough runs measured, ascending.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PowerCurve {
    /// The measured clocks, ascending by frequency.
    pub clocks: Vec<MeasuredClock>,
    /// The type's nodes that draw measurably more or less than the curve, by node name:
    /// chips of one model differ (docs/power.md, "Nodes of one type that differ"). A
    /// node not listed plans with the curve as it is.
    pub nodes: BTreeMap<String, NodeFactor>,
    /// Whether a clock below every measured one gets the voltage-held floor
    /// ([`PowerCurve::busy_w`]): set where the site samples clocks
    /// (`power.sample_clocks`), so that sampling, bounded, measures a lower clock before
    /// any plan takes it, rather than a plan trying it on a guess.
    pub floor_below: bool,
}

impl PowerCurve {
    /// Busy watts of one node at `f` GHz and their source, given the site's idle and
    /// busy watts (`site_idle_w`, `site_busy_w`) at any clock. Between measured clocks
    /// the value is a straight line. Outside them the site's shape is kept and scaled to
    /// meet the nearest measured clock, so the curve has no step where measurement ends.
    /// With [`PowerCurve::floor_below`], a clock below every measured one takes the
    /// larger of that and the lowest measured clock's dynamic watts scaled with the clock
    /// alone (`idle + (busy_lo - idle) f / f_lo`).
    ///
    /// Why the floor: dynamic power is `C V^2 f`, and a lower clock never raises the
    /// voltage, so below the lowest measured clock dynamic watts fall at least as fast as
    /// `f` and the floor is the most they can be. The site's shape, a cube law, assumes
    /// the voltage keeps falling, which real chips stop doing near their lowest P-states
    /// (an EPYC 7502 node draws 173 W busy at 1.5 GHz, tests/physics/cpus.yaml; a prior
    /// of 72 W static and 288 W dynamic at 2.5 GHz under the cube law, scaled to the
    /// measured 221 W at 2.2 GHz, says 111 W there, and the floor 174 W). With the floor
    /// an unmeasured lower clock never wins on energy for a program whose time follows the
    /// clock, so without sampling no plan would ever try it and nothing would measure
    /// it; a site that does not sample keeps the scaled shape, whose optimism is how its
    /// plans come to run, and so measure, a lower clock (docs/evaluation.md).
    pub fn busy_w(
        &self,
        f: f64,
        site_idle_w: impl Fn(f64) -> f64,
        site_busy_w: impl Fn(f64) -> f64,
    ) -> (f64, PowerSource) {
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
        let scaled = site_busy_w(f) * near.busy_w / at_near;
        if f > hi.freq_ghz || !self.floor_below {
            return (scaled, PowerSource::SiteScaled);
        }
        let (idle, dynamic_lo) = (site_idle_w(f), lo.busy_w - site_idle_w(lo.freq_ghz));
        // Idle watts that do not evaluate leave the scaled shape alone, as a floor would.
        let busy = if idle.is_finite() {
            idle + held_dynamic_w(scaled - idle, dynamic_lo, lo.freq_ghz, f)
        } else {
            scaled
        };
        (busy, PowerSource::SiteScaled)
    }
}

/// Dynamic watts at `f` GHz, below a clock `at_ghz` whose dynamic watts are `at_w`, held
/// to the floor: the larger of `guess` and `at_w f / at_ghz`. Dynamic power is C V^2 f
/// and a lower clock never raises the voltage, so the floor is the most they can be
/// ([`PowerCurve::floor_below`], [`floored`]). A floor that does not evaluate leaves the
/// guess alone.
pub(crate) fn held_dynamic_w(guess: f64, at_w: f64, at_ghz: f64, f: f64) -> f64 {
    let held = at_w.max(0.0) * f / at_ghz.max(f64::MIN_POSITIVE);
    if held.is_finite() {
        guess.max(held)
    } else {
        guess
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

/// `types` with a floor under every curve ([`PowerCurve::floor_below`]): the watts a
/// plan under an energy or power cap prices clocks with, whether or not the site samples
/// clocks. A cap is a promise, and below the lowest measured clock the site's shape,
/// scaled, can say far less than the chip draws (EPYC 7502 nodes measured at 2.5 GHz
/// alone: 97 W at 1.5 GHz, where they draw 173 W); the floor is the most they can draw.
/// A type nothing measured is held the same way under the site's own f_max watts (a
/// cube law from 360 W at 2.5 GHz says 134 W at 1.5; the floor 245 W).
pub fn floored(types: &BTreeMap<String, NodeType>) -> BTreeMap<String, NodeType> {
    types
        .iter()
        .map(|(k, t)| {
            let curve = PowerCurve {
                floor_below: true,
                ..t.measured().cloned().unwrap_or_default()
            };
            (k.clone(), t.with_measured(Some(curve)))
        })
        .collect()
}

/// The watts `plan` was made with: for each node type and clock its nodes run at, one
/// node's busy and idle watts by `types` (the site's models with any measured curves
/// laid over them), the busy watts' source, and the nodes there that planned with their
/// own factor ([`crate::model::node_scale`]), by type then clock. A type `types` does
/// not know, or whose watts do not evaluate, is left out: the plan was made without it.
pub fn planned(types: &BTreeMap<String, NodeType>, plan: &Plan) -> Vec<TypeWatts> {
    let mut out: Vec<TypeWatts> = Vec::new();
    for n in &plan.nodes {
        let f = n.freq_ghz.0;
        let Some(nt) = types.get(&n.node_type) else {
            continue;
        };
        let at = match out
            .iter()
            .position(|w| w.node_type == n.node_type && same_clock(w.freq_ghz.0, f))
        {
            Some(i) => i,
            None => {
                let Ok(w) = nt.watts(f) else {
                    continue;
                };
                out.push(TypeWatts {
                    node_type: n.node_type.clone(),
                    freq_ghz: n.freq_ghz,
                    busy_w: Watts(w.busy_w),
                    idle_w: Watts(w.idle_w),
                    source: w.source,
                    node_factors: BTreeMap::new(),
                });
                out.len() - 1
            }
        };
        if let Some(k) = nt.measured().and_then(|c| c.nodes.get(&n.name)) {
            out[at].node_factors.insert(n.name.clone(), k.factor);
        }
    }
    out.sort_by(|a, b| {
        a.node_type
            .cmp(&b.node_type)
            .then(a.freq_ghz.0.total_cmp(&b.freq_ghz.0))
    });
    out
}

/// Each node type's watts at each clock it offers, with their source, one line each,
/// then each node that draws measurably more or less than its type, with its factor:
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
    let nodes: Vec<(&str, &str, &NodeFactor)> = types
        .iter()
        .filter_map(|(name, t)| t.measured().map(|c| (name, c)))
        .flat_map(|(name, c)| {
            c.nodes
                .iter()
                .map(move |(n, f)| (n.as_str(), name.as_str(), f))
        })
        .collect();
    if !nodes.is_empty() {
        out += &format!(
            "\n{:<16} {:<16} {:>7} {:>5}  (each node's watts are its type's times its factor)\n",
            "node", "node type", "factor", "runs"
        );
        for (n, ty, f) in nodes {
            out += &format!("{n:<16} {ty:<16} {:>7.3} {:>5}\n", f.factor, f.runs);
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

    /// EPYC 7502 nodes as a site types them from the vendor's TDP: 72 W static, 288 W
    /// dynamic at 2.5 GHz, scaling as `(f / 2.5)^gamma`.
    fn rome(gamma: f64) -> NodeType {
        NodeType {
            name: "rome".into(),
            freqs_ghz: vec![1.5, 2.2, 2.5],
            power: PowerModel::AtMax {
                dynamic_w: 288.0,
                static_w: 72.0,
                gamma,
            },
        }
    }

    /// [`rome`] whose only measured clock is 2.2 GHz at 221.4 W busy, with or without
    /// the floor below it.
    fn measured_at_2_2(gamma: f64, floor_below: bool) -> NodeType {
        rome(gamma).with_measured(Some(PowerCurve {
            clocks: vec![MeasuredClock {
                freq_ghz: 2.2,
                busy_w: 221.4,
                runs: 3,
                samples: 24,
            }],
            floor_below,
            nodes: BTreeMap::new(),
        }))
    }

    #[test]
    fn below_every_measured_clock_the_watts_never_fall_faster_than_the_clock() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let site = |f: f64, gamma: f64| 72.0 + 288.0 * (f / 2.5f64).powf(gamma);
        // The cube law scaled to 221.4 W at 2.2 GHz would say 110.8 W at 1.5 GHz; the
        // dynamic 149.4 W at 2.2 GHz scaled with the clock alone says 72 + 149.4 x 1.5 /
        // 2.2 = 173.86 W, and that floor binds. The EPYC 7502's published figure there is
        // 172.8 W (tests/physics/cpus.yaml): the floor is within 1 % above it, where the
        // scaled cube promised 36 % less.
        let t = measured_at_2_2(3.0, true);
        let scaled = site(1.5, 3.0) * 221.4 / site(2.2, 3.0);
        assert!((scaled - 110.76).abs() < 0.01, "{scaled}");
        let w = t.watts(1.5).unwrap();
        assert!(close(w.busy_w, 72.0 + 149.4 * 1.5 / 2.2), "{}", w.busy_w);
        assert!(w.busy_w >= 172.8 && w.busy_w <= 172.8 * 1.01);
        assert_eq!(w.source, PowerSource::SiteScaled);
        assert_eq!(
            w.source.to_string(),
            "scaled from the nearest measured clock"
        );
        // Above the highest measured clock the scaled shape alone holds: 360 W x 221.4 /
        // the site's 268.26 W at 2.2 GHz.
        let above = t.watts(2.5).unwrap();
        assert!(
            close(above.busy_w, 360.0 * 221.4 / site(2.2, 3.0)),
            "{}",
            above.busy_w
        );
        // A site shape flatter than the clock (gamma 0.5) keeps more watts than the
        // floor, and then it holds: 295.08 x 221.4 / 342.18 = 190.9 W.
        let flat = measured_at_2_2(0.5, true).watts(1.5).unwrap();
        let flat_scaled = site(1.5, 0.5) * 221.4 / site(2.2, 0.5);
        assert!(flat_scaled > 72.0 + 149.4 * 1.5 / 2.2);
        assert!(close(flat.busy_w, flat_scaled), "{}", flat.busy_w);
        // The measured clock itself is as measured.
        assert!(close(t.watts(2.2).unwrap().busy_w, 221.4));
        // Where the site does not sample clocks, the scaled shape alone holds below too.
        let unfloored = measured_at_2_2(3.0, false).watts(1.5).unwrap();
        assert!(close(unfloored.busy_w, scaled), "{}", unfloored.busy_w);
    }

    fn busy(types: &BTreeMap<String, NodeType>, f: f64) -> (f64, PowerSource) {
        let w = types["rome"].watts(f).unwrap();
        (w.busy_w, w.source)
    }

    #[test]
    fn under_a_cap_a_clock_below_every_measured_one_is_priced_at_the_most_it_can_draw() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        // Nothing measured: the cube law says 72 + 288 (1.5/2.5)^3 = 134.208 W at 1.5 GHz;
        // floored, dynamic watts fall no faster than the clock from the site's 288 W at
        // 2.5 GHz: 72 + 288 x 0.6 = 244.8 W. At f_max nothing changes.
        let site = BTreeMap::from([("rome".to_string(), rome(3.0))]);
        let capped = floored(&site);
        assert!(close(busy(&site, 1.5).0, 134.208));
        assert!(close(busy(&capped, 1.5).0, 244.8));
        assert_eq!(busy(&capped, 1.5).1, PowerSource::Site);
        assert!(close(busy(&capped, 2.5).0, 360.0));
        // 260 W measured at 2.5 GHz alone: scaled, 134.208 x 260 / 360 = 96.93 W at 1.5;
        // floored, 72 + (260 - 72) x 1.5 / 2.5 = 184.8 W; at 2.2 GHz 268.33 x 260 / 360 =
        // 193.8 W against 72 + 188 x 0.88 = 237.44 W.
        let curve = PowerCurve {
            clocks: vec![MeasuredClock {
                freq_ghz: 2.5,
                busy_w: 260.0,
                runs: 4,
                samples: 120,
            }],
            ..PowerCurve::default()
        };
        let measured = overlay(&site, &BTreeMap::from([("rome".to_string(), curve)]));
        let capped = floored(&measured);
        assert!(close(busy(&measured, 1.5).0, 134.208 * 260.0 / 360.0));
        assert!(close(busy(&capped, 1.5).0, 184.8));
        assert!(close(busy(&capped, 2.2).0, 237.44));
        assert_eq!(busy(&capped, 1.5).1, PowerSource::SiteScaled);
        assert_eq!(
            busy(&capped, 2.5),
            (260.0, PowerSource::Measured { runs: 4 })
        );
        // Floored twice is floored once.
        assert_eq!(floored(&capped), capped);
    }
}
