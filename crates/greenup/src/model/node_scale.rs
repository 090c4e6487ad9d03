//! Nodes of one type that draw more or less than their type: each node's learned factor
//! ([`crate::model::measured_power::NodeFactor`]) applied to its row of any model's
//! table, so that a plan on a node that runs hot predicts its watts, its energy and its
//! share of a power cap as that node draws them.
//!
//! Why a factor on the whole node, idle and busy alike: chips of one model differ
//! mostly in leakage, which sets idle and busy watts together, and greenupd measures
//! only a node's energy over whole runs, which cannot tell the two apart. One factor
//! per node, over every clock, because a node's runs are spread over the clocks its
//! jobs chose: a factor per clock would wait several times as long for its runs.

use std::collections::{BTreeMap, HashMap};

use crate::model::gpus::GpuBusy;
use crate::model::{Config, ModelError, NodeSlot, NodeType, Prediction, Predictor, SweepTable};

/// A model whose table scales each node with a learned factor by that factor.
pub struct PerNode {
    /// The model.
    pub inner: Box<dyn Predictor + Send + Sync>,
    /// Node name to (its type, its factor): a factor applies only to a row of that type.
    /// Hashed: a table of 10,000 rows looks each row up.
    pub factors: HashMap<String, (String, f64)>,
}

/// Every node with a learned factor in `types`, by name, with its type.
pub fn factors(types: &BTreeMap<String, NodeType>) -> HashMap<String, (String, f64)> {
    types
        .values()
        .filter_map(|t| t.measured().map(|c| (t, c)))
        .flat_map(|(t, c)| {
            c.nodes
                .iter()
                .map(|(n, f)| (n.clone(), (t.name.clone(), f.factor)))
        })
        .collect()
}

/// `inner`, with the factors `types` learned for their nodes applied; `inner` itself
/// where no node has one.
pub fn wrap(
    inner: Box<dyn Predictor + Send + Sync>,
    types: &BTreeMap<String, NodeType>,
) -> Box<dyn Predictor + Send + Sync> {
    let factors = factors(types);
    if factors.is_empty() {
        inner
    } else {
        Box::new(PerNode { inner, factors })
    }
}

impl PerNode {
    /// `t` with each node that has a factor scaled by it.
    fn scale(&self, mut t: SweepTable) -> SweepTable {
        for row in &mut t.nodes {
            let Some((ty, k)) = self.factors.get(&row.name) else {
                continue;
            };
            if *ty != row.node_type {
                continue;
            }
            row.static_w *= k;
            for c in &mut row.choices {
                c.dynamic_j *= k;
            }
        }
        t
    }
}

impl Predictor for PerNode {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError> {
        Ok(self.scale(self.inner.table(nodes)?))
    }

    /// Iso-energy-efficiency is the inner model's, on its own prediction: it compares
    /// the program's energy on one node and on p, a property of the program rather than
    /// of the chips that happen to run it.
    fn efficiency(&self, config: &Config, _prediction: &Prediction) -> Option<f64> {
        let own = self.inner.predict(config).ok()?;
        self.inner.efficiency(config, &own)
    }

    fn gpu_busy(&self) -> Option<&GpuBusy> {
        self.inner.gpu_busy()
    }

    fn clock_note(&self, node_types: &[&str]) -> Option<String> {
        self.inner.clock_note(node_types)
    }
    fn node_counts(&self) -> Option<&crate::model::node_counts::NodeCounts> {
        self.inner.node_counts()
    }
}
