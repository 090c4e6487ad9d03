//! A node's GPUs in a decision. The models predict what RAPL measures (a node's CPUs and
//! memory), and profiles learn from that alone; a GPU node's GPUs draw beside it. Until
//! a profile knows how long the GPUs are busy, a decision counts them as running flat
//! out at their top clock for the whole job: what Slurm's queue holds for them
//! unplanned, so a plan never fits a power cap, an energy cap or a budget that its GPUs
//! would break.

use std::collections::BTreeMap;

use super::{Config, ModelError, NodeSlot, Prediction, Predictor, SweepTable};

/// A model with each GPU node's GPUs added as watts drawn for the whole wall time.
pub struct WithGpus<'a> {
    inner: &'a dyn Predictor,
    /// Watts of one node's GPUs, by site node type; types without GPUs are absent.
    watts: &'a BTreeMap<String, f64>,
}

impl<'a> WithGpus<'a> {
    /// `inner` with the GPUs of each node type in `watts` (a node's GPUs together, flat
    /// out at their top clock) counted on top.
    pub fn new(inner: &'a dyn Predictor, watts: &'a BTreeMap<String, f64>) -> Self {
        WithGpus { inner, watts }
    }

    /// Watts the GPUs of `config`'s nodes draw together.
    fn config_w(&self, config: &Config) -> f64 {
        config
            .nodes
            .iter()
            .filter_map(|n| self.watts.get(&n.node_type))
            .sum()
    }
}

impl Predictor for WithGpus<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError> {
        let mut t = self.inner.table(nodes)?;
        for n in &mut t.nodes {
            if let Some(w) = self.watts.get(&n.node_type) {
                n.static_w += w;
            }
        }
        Ok(t)
    }

    /// The model's own efficiency: iso-energy-efficiency speaks of the energy the model
    /// predicts, so the GPUs' part is taken out again.
    fn efficiency(&self, config: &Config, prediction: &Prediction) -> Option<f64> {
        let mut own = prediction.clone();
        own.energy_j -= self.config_w(config) * prediction.time_s;
        self.inner.efficiency(config, &own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Choice, NodeChoices};

    /// A model whose every node computes 10 s at 2 GHz (20 s at 1 GHz), 50 J/s dynamic
    /// at 2 GHz, 30 W static.
    struct Flat;

    impl Predictor for Flat {
        fn name(&self) -> &'static str {
            "flat"
        }
        fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError> {
            Ok(SweepTable {
                nodes: nodes
                    .iter()
                    .map(|s| NodeChoices {
                        name: s.name.clone(),
                        node_type: s.node_type.clone(),
                        choices: s
                            .freqs_ghz
                            .iter()
                            .map(|&f| Choice {
                                freq_ghz: f,
                                compute_s: 20.0 / f,
                                dynamic_j: 50.0 * (f / 2.0).powi(3) * 20.0 / f,
                            })
                            .collect(),
                        static_w: 30.0,
                    })
                    .collect(),
                fixed_time_s: 5.0,
                fixed_energy_j: 0.0,
            })
        }
        fn efficiency(&self, _: &Config, p: &Prediction) -> Option<f64> {
            Some(p.energy_j)
        }
    }

    fn slot(name: &str, t: &str) -> NodeSlot {
        NodeSlot {
            name: name.into(),
            node_type: t.into(),
            freqs_ghz: vec![1.0, 2.0],
        }
    }

    #[test]
    fn gpu_nodes_draw_their_gpus_for_the_whole_wall_time_and_cpu_nodes_nothing_more() {
        let watts = BTreeMap::from([("gpu".to_string(), 1400.0)]);
        let m = WithGpus::new(&Flat, &watts);
        let nodes = [slot("c1", "cpu"), slot("g1", "gpu")];
        let t = m.table(&nodes).unwrap();
        assert_eq!(t.nodes[0].static_w, 30.0);
        assert_eq!(t.nodes[1].static_w, 1430.0);
        // Both at 1 GHz: 20 s of compute + 5 s fixed = 25 s; dynamic 6.25 W x 20 s each;
        // static (30 + 30 + 1400) W x 25 s.
        let p = t.evaluate(&[0, 0]);
        assert_eq!(p.time_s, 25.0);
        let want = 2.0 * 6.25 * 20.0 + 1460.0 * 25.0;
        assert!((p.energy_j - want).abs() < 1e-9, "{} vs {want}", p.energy_j);
        // The model's own efficiency sees its own energy, without the GPUs'.
        let ee = m.efficiency(&t.config(&[0, 0]), &p).unwrap();
        assert!((ee - (want - 1400.0 * 25.0)).abs() < 1e-9);
        assert_eq!(m.name(), "flat");
    }
}
