//! A kind of node as the models see it: the frequencies it offers and the power one
//! node draws at each. The site config names and fills these; the models only read them.

use crate::expr::{Expr, ExprError};
use crate::model::measured_power::{PowerCurve, PowerSource};

/// How a node type's power depends on its frequency.
#[derive(Debug, Clone, PartialEq)]
pub enum PowerModel {
    /// Dynamic and static watts measured at the maximum frequency; dynamic power
    /// scales as (f / f_max)^gamma (gamma = 3 by default, as in papers 000 and 004).
    AtMax {
        /// Dynamic watts of one node at f_max.
        dynamic_w: f64,
        /// Static watts of one node, at any frequency.
        static_w: f64,
        /// The exponent of f / f_max.
        gamma: f64,
    },
    /// Dynamic and static watts as expressions in `f` (GHz).
    Expr {
        /// Dynamic watts of one node at `f`.
        dynamic_w: Expr,
        /// Static watts of one node at `f`.
        static_w: Expr,
    },
    /// The site's model with what the type's nodes measured laid over it: busy watts
    /// come from the curve where it has them ([`PowerCurve::busy_w`]), idle watts and
    /// every other clock from the site's model. A variant rather than a field of
    /// [`NodeType`], so that every `NodeType { .. }` written elsewhere stays valid.
    Measured {
        /// The site config's model (never itself `Measured`).
        site: Box<PowerModel>,
        /// The measured busy watts.
        curve: PowerCurve,
    },
}

/// One node's watts at a clock ([`NodeType::watts`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeWatts {
    /// Watts of the node idle.
    pub idle_w: f64,
    /// Watts of the node busy.
    pub busy_w: f64,
    /// Where the busy watts come from.
    pub source: PowerSource,
}

/// A kind of node: the frequencies it offers and the power it draws.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeType {
    /// Name used in the site config and in profiles.
    pub name: String,
    /// Available frequencies in GHz, ascending, without duplicates.
    pub freqs_ghz: Vec<f64>,
    /// Power model of one node of this type.
    pub power: PowerModel,
}

impl NodeType {
    /// The highest frequency in GHz.
    pub fn fmax(&self) -> f64 {
        self.freqs_ghz.last().copied().unwrap_or(0.0)
    }

    /// The lowest frequency in GHz.
    pub fn fmin(&self) -> f64 {
        self.freqs_ghz.first().copied().unwrap_or(0.0)
    }

    /// Dynamic watts at `f` GHz: the measured busy watts less the idle ones where the
    /// type has a measured curve, else the site's.
    pub fn dynamic_w(&self, f: f64) -> Result<f64, ExprError> {
        self.dynamic_and_source(f).map(|(w, _)| w)
    }

    /// One node's idle and busy watts at `f` GHz and where the busy figure comes from:
    /// what `greenup site power`, the decision's `Watts` and greenupd's metrics show.
    pub fn watts(&self, f: f64) -> Result<NodeWatts, ExprError> {
        let idle_w = self.static_w(f)?;
        let (dynamic_w, source) = self.dynamic_and_source(f)?;
        Ok(NodeWatts {
            idle_w,
            busy_w: idle_w + dynamic_w,
            source,
        })
    }

    /// The dynamic watts at `f` GHz with their source, from one look at the curve.
    fn dynamic_and_source(&self, f: f64) -> Result<(f64, PowerSource), ExprError> {
        match &self.power {
            // Nothing measured, and a plan under a cap asks for the floor: the site's own
            // watts at f_max are the clock the floor is held under.
            PowerModel::Measured { curve, .. } if curve.clocks.is_empty() => {
                let top = self.fmax();
                let dynamic = crate::model::measured_power::held_dynamic_w(
                    self.site_dynamic_w(f)?,
                    self.site_dynamic_w(top)?,
                    top,
                    f,
                );
                Ok((dynamic, PowerSource::Site))
            }
            PowerModel::Measured { curve, .. } => {
                let (busy, source) = self.busy_w(curve, f)?;
                match source {
                    PowerSource::Site => Ok((self.site_dynamic_w(f)?, source)),
                    // Never below zero: a curve under the site's idle watts at some
                    // clock (an expression in f) must not make busy nodes cheaper
                    // than idle ones.
                    _ => Ok(((busy - self.site_static_w(f)?).max(0.0), source)),
                }
            }
            _ => Ok((self.site_dynamic_w(f)?, PowerSource::Site)),
        }
    }

    /// Static watts at `f` GHz: always the site's (greenupd measures no idle power).
    pub fn static_w(&self, f: f64) -> Result<f64, ExprError> {
        self.site_static_w(f)
    }

    /// Where [`NodeType::dynamic_w`] at `f` GHz comes from.
    pub fn power_source(&self, f: f64) -> PowerSource {
        self.dynamic_and_source(f)
            .map_or(PowerSource::Site, |(_, source)| source)
    }

    /// How much node `name` of this type draws against the type's watts: the factor
    /// learned from its own runs, or 1 where none was.
    pub fn node_factor(&self, name: &str) -> f64 {
        self.measured()
            .and_then(|c| c.nodes.get(name))
            .map_or(1.0, |n| n.factor)
    }

    /// The measured curve laid over the site's model, if any.
    pub fn measured(&self) -> Option<&PowerCurve> {
        match &self.power {
            PowerModel::Measured { curve, .. } => Some(curve),
            _ => None,
        }
    }

    /// This type with `curve` laid over its site model (replacing any curve before);
    /// an empty curve or None gives the site's model alone, except an empty curve with
    /// its floor set, which holds the site's own watts below f_max to the floor
    /// ([`crate::model::measured_power::floored`]).
    pub fn with_measured(&self, curve: Option<PowerCurve>) -> NodeType {
        let site = self.site_model().clone();
        NodeType {
            name: self.name.clone(),
            freqs_ghz: self.freqs_ghz.clone(),
            power: match curve.filter(|c| !c.clocks.is_empty() || c.floor_below) {
                Some(curve) => PowerModel::Measured {
                    site: Box::new(site),
                    curve,
                },
                None => site,
            },
        }
    }

    /// The site config's power model, without any measured curve.
    pub fn site_model(&self) -> &PowerModel {
        let mut m = &self.power;
        while let PowerModel::Measured { site, .. } = m {
            m = site;
        }
        m
    }

    /// Dynamic watts at `f` GHz by the site config alone.
    pub fn site_dynamic_w(&self, f: f64) -> Result<f64, ExprError> {
        match self.site_model() {
            PowerModel::AtMax {
                dynamic_w, gamma, ..
            } => Ok(dynamic_w * (f / self.fmax()).powf(*gamma)),
            PowerModel::Expr { dynamic_w, .. } => dynamic_w.eval(&[f]),
            // site_model never returns this variant.
            PowerModel::Measured { .. } => Ok(f64::NAN),
        }
    }

    /// Static watts at `f` GHz by the site config alone.
    pub fn site_static_w(&self, f: f64) -> Result<f64, ExprError> {
        match self.site_model() {
            PowerModel::AtMax { static_w, .. } => Ok(*static_w),
            PowerModel::Expr { static_w, .. } => static_w.eval(&[f]),
            PowerModel::Measured { .. } => Ok(f64::NAN),
        }
    }

    /// Busy watts at `f` by `curve` over the site's model, with their source.
    fn busy_w(&self, curve: &PowerCurve, f: f64) -> Result<(f64, PowerSource), ExprError> {
        // The site's busy watts, evaluated up front at the clocks the curve may need
        // (an expression can fail, and the curve's callback cannot).
        // (idle, busy) by the site at a clock.
        let site_at = |g: f64| -> Result<(f64, f64), ExprError> {
            let idle = self.site_static_w(g)?;
            Ok((idle, idle + self.site_dynamic_w(g)?))
        };
        let mut known = vec![(f, site_at(f)?)];
        for g in [curve.clocks.first(), curve.clocks.last()]
            .into_iter()
            .flatten()
        {
            known.push((g.freq_ghz, site_at(g.freq_ghz)?));
        }
        let at = |g: f64| known.iter().find(|(k, _)| *k == g).map(|(_, w)| *w);
        Ok(curve.busy_w(
            f,
            |g| at(g).map_or(f64::NAN, |w| w.0),
            |g| at(g).map_or(f64::NAN, |w| w.1),
        ))
    }
}
