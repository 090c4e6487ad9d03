//! A kind of node as the models see it: the frequencies it offers and the power one
//! node draws at each. The site config names and fills these; the models only read them.

use crate::expr::{Expr, ExprError};

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

    /// Dynamic watts at `f` GHz.
    pub fn dynamic_w(&self, f: f64) -> Result<f64, ExprError> {
        match &self.power {
            PowerModel::AtMax {
                dynamic_w, gamma, ..
            } => Ok(dynamic_w * (f / self.fmax()).powf(*gamma)),
            PowerModel::Expr { dynamic_w, .. } => dynamic_w.eval(&[f]),
        }
    }

    /// Static watts at `f` GHz.
    pub fn static_w(&self, f: f64) -> Result<f64, ExprError> {
        match &self.power {
            PowerModel::AtMax { static_w, .. } => Ok(*static_w),
            PowerModel::Expr { static_w, .. } => static_w.eval(&[f]),
        }
    }
}
