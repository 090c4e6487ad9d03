//! Predictors: each model turns a configuration (nodes, their types, their
//! frequencies) into predicted time, energy and power.
//!
//! Every model reduces, for a fixed node set, to the same separable form, a
//! [`SweepTable`]: per node and frequency a compute time and a dynamic energy,
//! per node a static power, plus a time and energy that no choice changes.
//! Wall time is the slowest node's compute time plus the fixed time, because
//! the nodes of a bulk-synchronous job wait for the slowest one (paper 004,
//! eq. 11). The optimizers search that table; [`Predictor::predict`] evaluates
//! one configuration of it. A new model is one file that builds the table.

pub mod amdahl;
pub mod beside;
pub mod gpus;
pub mod hetero;
pub mod iso_energy;
pub mod measured_power;
pub mod node_counts;
pub mod node_scale;
pub mod node_type;
pub mod roofline;
pub mod steps;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::expr::ExprError;

pub use node_type::{NodeType, NodeWatts, PowerModel};

/// One node of a configuration: its Slurm name, its type and its frequency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSetting {
    /// Slurm node name, e.g. `n3`.
    pub name: String,
    /// Node type from the site config, e.g. `xeon-2.6`.
    pub node_type: String,
    /// CPU frequency in GHz.
    pub freq_ghz: f64,
    /// SM clock of the node's GPUs in MHz, when the decision chooses one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_mhz: Option<u32>,
}

/// A configuration: the nodes that run the job, each at its own frequency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Config {
    /// The nodes, in the order the job holds them.
    pub nodes: Vec<NodeSetting>,
}

impl Config {
    /// Each node as a slot offering only its own frequency: the table of exactly this
    /// configuration (GPU clocks aside, which a table offers beside each frequency).
    pub fn slots(&self) -> Vec<NodeSlot> {
        self.nodes
            .iter()
            .map(|n| NodeSlot {
                name: n.name.clone(),
                node_type: n.node_type.clone(),
                freqs_ghz: vec![n.freq_ghz],
            })
            .collect()
    }
}

/// A node a search may use: its name, type and the frequencies it may run at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSlot {
    /// Slurm node name.
    pub name: String,
    /// Node type from the site config.
    pub node_type: String,
    /// Allowed frequencies in GHz, ascending; the last is the maximum.
    pub freqs_ghz: Vec<f64>,
}

/// Predicted time, energy and power of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodePrediction {
    /// Slurm node name.
    pub name: String,
    /// Frequency in GHz.
    pub freq_ghz: f64,
    /// SM clock of its GPUs in MHz, when the decision chooses one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_mhz: Option<u32>,
    /// Seconds this node computes (it waits for the slowest node the rest of the time).
    pub compute_s: f64,
    /// Joules this node uses over the whole job.
    pub energy_j: f64,
    /// Average watts of this node over the whole job.
    pub avg_power_w: f64,
}

/// What a model predicts for one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Wall time of the job in seconds.
    pub time_s: f64,
    /// Energy of the job in joules, all nodes together.
    pub energy_j: f64,
    /// Average power in watts (energy / time).
    pub avg_power_w: f64,
    /// Each node's share.
    pub per_node: Vec<NodePrediction>,
}

/// One frequency choice of one node in a [`SweepTable`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// Frequency in GHz.
    pub freq_ghz: f64,
    /// SM clock of the node's GPUs in MHz, when this choice sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_mhz: Option<u32>,
    /// Seconds this node computes at this frequency.
    pub compute_s: f64,
    /// Joules above static power this node uses while computing at this frequency.
    pub dynamic_j: f64,
    /// Watts above static power this node draws at this frequency while it waits for
    /// the others (a polling MPI wait draws with the clock); 0 where a wait sleeps.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub wait_w: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Choice {
    /// Joules above static power this node uses in a run of `wall_s` seconds: its
    /// compute's, and its waiting draw for the rest of the run. The one home of the
    /// rule that the sweep, the step search and every prediction use.
    pub fn energy_j(&self, wall_s: f64) -> f64 {
        if self.wait_w == 0.0 {
            return self.dynamic_j;
        }
        self.dynamic_j + self.wait_w * (wall_s - self.compute_s).max(0.0)
    }
}

/// One node's row of a [`SweepTable`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeChoices {
    /// Slurm node name.
    pub name: String,
    /// Node type from the site config.
    pub node_type: String,
    /// The node's choices, ascending by frequency (and by GPU clock within one); the
    /// last is the maximum.
    pub choices: Vec<Choice>,
    /// Watts this node draws for the whole wall time whatever it does.
    pub static_w: f64,
}

/// The separable form of a model for a fixed node set, which the optimizers search.
///
/// For a pick `k` (one choice index per node):
/// `T = max_i compute_s[i][k_i] + fixed_time_s`,
/// `E = sum_i (dynamic_j[i][k_i] + wait_w[i][k_i] * (T - compute_s[i][k_i]))
///      + T * sum_i static_w[i] + fixed_energy_j`.
/// With [`StepTable`] steps, `max_i compute_s` becomes `sum_k max_g w[k][g] * m_g`,
/// `m_g` being the slowest compute time among the nodes of group g.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepTable {
    /// One row per node.
    pub nodes: Vec<NodeChoices>,
    /// Seconds added to the slowest node's compute time (e.g. communication).
    pub fixed_time_s: f64,
    /// Joules no frequency choice changes (e.g. communication energy).
    pub fixed_energy_j: f64,
    /// Synchronised steps led by different groups of nodes; `None`: the slowest node
    /// sets the time (every model but hetero with a step model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<StepTable>,
}

/// The step structure of a [`SweepTable`]: which group each node belongs to and how
/// much of each step class each group's slowest node computes ([`steps`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepTable {
    /// Name of each group (for hetero, the node type).
    pub groups: Vec<String>,
    /// Group index of each node row, in the order of [`SweepTable::nodes`].
    pub group_of: Vec<usize>,
    /// Per step class, per group, the weight of the group's slowest compute time.
    pub weights: Vec<Vec<f64>>,
}

impl StepTable {
    /// Compute seconds of the step classes given each group's slowest compute time:
    /// `sum_k max_g w[k][g] * m[g]`.
    pub fn compute_s(&self, m: &[f64]) -> f64 {
        self.weights
            .iter()
            .map(|w| w.iter().zip(m).map(|(w, m)| w * m).fold(0.0, f64::max))
            .sum()
    }
}

impl SweepTable {
    /// Sum of all nodes' static power in watts.
    pub fn static_w(&self) -> f64 {
        self.nodes.iter().map(|n| n.static_w).sum()
    }

    /// The pick with every node at its maximum frequency: the baseline.
    pub fn max_pick(&self) -> Vec<usize> {
        self.nodes
            .iter()
            .map(|n| n.choices.len().saturating_sub(1))
            .collect()
    }

    /// The table with each node's choices above `ghz` left out (its lowest kept if all
    /// are): what a frequency ceiling lets a search choose from. Choices run from the
    /// lowest frequency up, so an index into the result means the same in `self`.
    pub fn capped(&self, ghz: f64) -> SweepTable {
        let mut t = self.clone();
        for n in &mut t.nodes {
            let keep = n
                .choices
                .iter()
                .take_while(|c| c.freq_ghz <= ghz + 1e-9)
                .count()
                .max(1);
            n.choices.truncate(keep);
        }
        t
    }

    /// Whether some choice draws while it waits: then each node's energy depends on
    /// the wall time, which the sweep's fast path and the step search do not model.
    pub fn waits_draw(&self) -> bool {
        self.nodes
            .iter()
            .any(|n| n.choices.iter().any(|c| c.wait_w != 0.0))
    }

    /// Total (time, energy) of a pick, without the per-node breakdown.
    pub fn totals(&self, pick: &[usize]) -> (f64, f64) {
        let mut tmax: f64 = 0.0;
        let mut dyn_j = 0.0;
        let mut waits = false;
        let mut slowest = self.steps.as_ref().map(|s| vec![0.0f64; s.groups.len()]);
        for (i, (node, &k)) in self.nodes.iter().zip(pick).enumerate() {
            let c = &node.choices[k];
            tmax = tmax.max(c.compute_s);
            dyn_j += c.dynamic_j;
            waits |= c.wait_w != 0.0;
            if let (Some(m), Some(s)) = (slowest.as_mut(), self.steps.as_ref())
                && let Some(g) = s.group_of.get(i).and_then(|&g| m.get_mut(g))
            {
                *g = g.max(c.compute_s);
            }
        }
        if let (Some(m), Some(s)) = (&slowest, &self.steps) {
            tmax = s.compute_s(m);
        }
        let t = tmax + self.fixed_time_s;
        if waits {
            // Each node's waiting draw needs the wall time, known only now.
            dyn_j = self
                .nodes
                .iter()
                .zip(pick)
                .map(|(node, &k)| node.choices[k].energy_j(t))
                .sum();
        }
        (t, dyn_j + t * self.static_w() + self.fixed_energy_j)
    }

    /// The full prediction of a pick, one choice index per node.
    pub fn evaluate(&self, pick: &[usize]) -> Prediction {
        let (time_s, energy_j) = self.totals(pick);
        let n = self.nodes.len().max(1) as f64;
        let per_node = self
            .nodes
            .iter()
            .zip(pick)
            .map(|(node, &k)| {
                let c = &node.choices[k];
                // Energy that belongs to no node is shared evenly.
                let e = c.energy_j(time_s) + node.static_w * time_s + self.fixed_energy_j / n;
                NodePrediction {
                    name: node.name.clone(),
                    freq_ghz: c.freq_ghz,
                    gpu_mhz: c.gpu_mhz,
                    compute_s: c.compute_s,
                    energy_j: e,
                    avg_power_w: if time_s > 0.0 { e / time_s } else { 0.0 },
                }
            })
            .collect();
        Prediction {
            time_s,
            energy_j,
            avg_power_w: if time_s > 0.0 { energy_j / time_s } else { 0.0 },
            per_node,
        }
    }

    /// The configuration a pick stands for.
    pub fn config(&self, pick: &[usize]) -> Config {
        Config {
            nodes: self
                .nodes
                .iter()
                .zip(pick)
                .map(|(n, &k)| NodeSetting {
                    name: n.name.clone(),
                    node_type: n.node_type.clone(),
                    freq_ghz: n.choices[k].freq_ghz,
                    gpu_mhz: n.choices[k].gpu_mhz,
                })
                .collect(),
        }
    }
}

/// Why a model could not predict.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The profile has nothing for this node type.
    #[error("node {node}: the profile has no parameters for node type '{node_type}'")]
    UnknownNodeType {
        /// The node.
        node: String,
        /// Its type, as the site names it.
        node_type: String,
    },
    /// An expression in the profile could not be evaluated.
    #[error("{what}: {message}")]
    Expression {
        /// Which parameter.
        what: String,
        /// The evaluator's message.
        message: String,
    },
    /// A value came out negative, infinite or not a number.
    #[error("{what} is {value}, which is not a finite non-negative number")]
    NotFinite {
        /// Which quantity.
        what: String,
        /// The value it came out as.
        value: f64,
    },
    /// A table was asked for no nodes at all.
    #[error("no nodes to predict for")]
    NoNodes,
    /// A node type offers no frequency.
    #[error("node type '{node_type}' has no frequencies")]
    NoFrequencies {
        /// The site's node type.
        node_type: String,
    },
    /// A frequency that is not a positive number of GHz.
    #[error("frequency {ghz} GHz is not positive")]
    BadFrequency {
        /// The frequency asked for.
        ghz: f64,
    },
    /// A node's frequency that is not a positive number of GHz.
    #[error("node {node}: frequency {ghz} GHz is not positive")]
    NodeFrequency {
        /// Slurm node name.
        node: String,
        /// The frequency asked for.
        ghz: f64,
    },
    /// An iso_energy question about zero processors.
    #[error("iso_energy needs at least one processor")]
    NoProcessors,
    /// An amdahl profile whose computing power is below its blocked power at a clock.
    #[error(
        "node {node}: computing power {compute_w} W at {ghz} GHz is below blocked power {blocked_w} W"
    )]
    ComputeBelowBlocked {
        /// Slurm node name.
        node: String,
        /// The frequency.
        ghz: f64,
        /// Watts while computing.
        compute_w: f64,
        /// Watts while blocked.
        blocked_w: f64,
    },
    /// Iso-energy-efficiency asked where E1 or Ep is not positive.
    #[error("E1 = {e1_j} J and Ep = {ep_j} J at n={n}, p={p}, f={ghz} GHz; EE needs both positive")]
    NoEfficiency {
        /// Problem size.
        n: f64,
        /// Processors.
        p: usize,
        /// Frequency in GHz.
        ghz: f64,
        /// Energy on one processor.
        e1_j: f64,
        /// Energy on p processors.
        ep_j: f64,
    },
    /// A GPU clock the node's type does not offer a decision.
    #[error("node {node}: GPU clock {} MHz is not one a decision may choose for its type", .mhz.map_or_else(|| "top".to_string(), |m| m.to_string()))]
    GpuClockNotOffered {
        /// Slurm node name.
        node: String,
        /// The clock asked for (None: the top one).
        mhz: Option<u32>,
    },
    /// A profile asked for a model it has no section for.
    #[error("profile '{profile}' has no '{model}' section")]
    NoSection {
        /// The profile's name.
        profile: String,
        /// The model asked for.
        model: String,
    },
}

/// A model of a job's time and energy on a set of nodes.
pub trait Predictor {
    /// The model's name as written in profiles: `iso_energy`, `roofline`, `amdahl` or `hetero`.
    fn name(&self) -> &'static str;

    /// The separable table of this job on exactly these nodes (n = `nodes.len()`).
    fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError>;

    /// Predict one configuration.
    fn predict(&self, config: &Config) -> Result<Prediction, ModelError> {
        let slots = config.slots();
        let table = self.table(&slots)?;
        Ok(table.evaluate(&vec![0; slots.len()]))
    }

    /// Iso-energy-efficiency EE = E1 / Ep of a configuration (paper 000), for models that define it.
    fn efficiency(&self, _config: &Config, _prediction: &Prediction) -> Option<f64> {
        None
    }

    /// How long the application's GPUs are busy, when its profile says ([`gpus`]).
    fn gpu_busy(&self) -> Option<&gpus::GpuBusy> {
        None
    }

    /// One line on what the model knows of how the job's time follows the clock on
    /// these node types, for a decision's reason; `None` for models that do not say.
    fn clock_note(&self, _node_types: &[&str]) -> Option<String> {
        None
    }

    /// The node counts the program runs on, where its profile says
    /// ([`node_counts`]); a plan that may shrink the job picks no other.
    fn node_counts(&self) -> Option<&node_counts::NodeCounts> {
        None
    }
}

/// Check that a model output is finite and non-negative, naming it otherwise.
pub fn finite(what: &str, value: f64) -> Result<f64, ModelError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(ModelError::NotFinite {
            what: what.to_string(),
            value,
        })
    }
}

/// Like [`finite`], but builds the name only when the value is bad (tables check many values).
pub fn finite_or(value: f64, what: impl FnOnce() -> String) -> Result<f64, ModelError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(ModelError::NotFinite {
            what: what(),
            value,
        })
    }
}

/// Build one table row per node, computing each distinct (node type, frequency list) once:
/// nodes of one kind have identical rows apart from their names, and sites have thousands.
pub fn rows_by_kind(
    nodes: &[NodeSlot],
    mut row: impl FnMut(&NodeSlot) -> Result<(Vec<Choice>, f64), ModelError>,
) -> Result<Vec<NodeChoices>, ModelError> {
    // Per type, the rows built so far with the frequency list each was built for.
    type Built<'a> = Vec<(&'a [f64], Vec<Choice>, f64)>;
    let mut done: std::collections::HashMap<&str, Built> = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(nodes.len());
    for slot in nodes {
        let built = done.entry(slot.node_type.as_str()).or_default();
        let k = match built
            .iter()
            .position(|(f, _, _)| *f == slot.freqs_ghz.as_slice())
        {
            Some(k) => k,
            // Many different frequency lists for one type would make this scan quadratic:
            // past a few, rows are built without being kept.
            None if built.len() >= 8 => {
                let (choices, static_w) = row(slot)?;
                out.push(NodeChoices {
                    name: slot.name.clone(),
                    node_type: slot.node_type.clone(),
                    choices,
                    static_w,
                });
                continue;
            }
            None => {
                let (choices, static_w) = row(slot)?;
                built.push((slot.freqs_ghz.as_slice(), choices, static_w));
                built.len() - 1
            }
        };
        let (_, choices, static_w) = &built[k];
        out.push(NodeChoices {
            name: slot.name.clone(),
            node_type: slot.node_type.clone(),
            choices: choices.clone(),
            static_w: *static_w,
        });
    }
    Ok(out)
}

/// The node count of a table request, refused when there are no nodes.
pub fn node_count(nodes: &[NodeSlot]) -> Result<usize, ModelError> {
    match nodes.len() {
        0 => Err(ModelError::NoNodes),
        n => Ok(n),
    }
}

/// A node's frequency, refused unless it is positive and finite.
pub fn node_freq(slot: &NodeSlot, f: f64) -> Result<f64, ModelError> {
    if f > 0.0 && f.is_finite() {
        Ok(f)
    } else {
        Err(ModelError::NodeFrequency {
            node: slot.name.clone(),
            ghz: f,
        })
    }
}

/// The site's type of a node, or an error naming the node and its type.
pub fn site_type<'a>(
    types: &'a BTreeMap<String, NodeType>,
    slot: &NodeSlot,
) -> Result<&'a NodeType, ModelError> {
    types
        .get(&slot.node_type)
        .ok_or_else(|| ModelError::UnknownNodeType {
            node: slot.name.clone(),
            node_type: slot.node_type.clone(),
        })
}

/// Turns a node type's power-expression failure into an error naming the type.
pub fn power_error(nt: &NodeType) -> impl Fn(ExprError) -> ModelError + Copy + '_ {
    move |e| ModelError::Expression {
        what: format!("power of node type '{}'", nt.name),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod capped_tests {
    use super::*;

    fn row(name: &str, freqs: &[f64]) -> NodeChoices {
        NodeChoices {
            name: name.into(),
            node_type: "t".into(),
            choices: freqs
                .iter()
                .map(|&f| Choice {
                    wait_w: 0.0,
                    gpu_mhz: None,
                    freq_ghz: f,
                    compute_s: 10.0 / f,
                    dynamic_j: f * f,
                })
                .collect(),
            static_w: 10.0,
        }
    }

    #[test]
    fn a_ceiling_keeps_each_nodes_choices_up_to_it_and_at_least_its_lowest() {
        let t = SweepTable {
            nodes: vec![row("a", &[1.2, 1.6, 2.0, 2.4]), row("b", &[1.8, 2.6])],
            fixed_time_s: 0.0,
            fixed_energy_j: 0.0,
            steps: None,
        };
        let c = t.capped(1.6);
        let freqs = |n: &NodeChoices| n.choices.iter().map(|c| c.freq_ghz).collect::<Vec<_>>();
        assert_eq!(freqs(&c.nodes[0]), [1.2, 1.6]);
        // Nothing of b fits under 1.6 GHz: its lowest gear stays, so a plan still exists.
        assert_eq!(freqs(&c.nodes[1]), [1.8]);
        // An index into the capped table is the same choice in the full one.
        assert_eq!(c.nodes[0].choices[1], t.nodes[0].choices[1]);
        assert_eq!(t.capped(9.0), t);
    }
}
