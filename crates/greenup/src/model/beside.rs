//! A model together with what its profile says beside it: how long the job's GPUs are
//! busy (`gpu:`) and the node counts its program starts on (`node_counts:`). A decision
//! reads them through [`Predictor::gpu_busy`] and [`Predictor::node_counts`]; everything
//! else is the model's own.

use crate::model::gpus::GpuBusy;
use crate::model::node_counts::NodeCounts;
use crate::model::{Config, ModelError, NodeSlot, Prediction, Predictor, SweepTable};

/// A model with its profile's GPU busy times and node counts.
pub struct Beside {
    /// The model.
    pub inner: Box<dyn Predictor + Send + Sync>,
    /// The profile's `gpu:` section.
    pub gpu_busy: Option<GpuBusy>,
    /// The profile's `node_counts:`.
    pub node_counts: Option<NodeCounts>,
}

/// `inner` with what the profile says beside it; `inner` itself where it says nothing.
pub fn wrap(
    inner: Box<dyn Predictor + Send + Sync>,
    gpu_busy: Option<GpuBusy>,
    node_counts: Option<NodeCounts>,
) -> Box<dyn Predictor + Send + Sync> {
    if gpu_busy.is_none() && node_counts.is_none() {
        return inner;
    }
    Box::new(Beside {
        inner,
        gpu_busy,
        node_counts,
    })
}

impl Predictor for Beside {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError> {
        self.inner.table(nodes)
    }

    fn predict(&self, config: &Config) -> Result<Prediction, ModelError> {
        self.inner.predict(config)
    }

    fn efficiency(&self, config: &Config, prediction: &Prediction) -> Option<f64> {
        self.inner.efficiency(config, prediction)
    }

    fn gpu_busy(&self) -> Option<&GpuBusy> {
        self.gpu_busy.as_ref().or_else(|| self.inner.gpu_busy())
    }

    fn clock_note(&self, node_types: &[&str]) -> Option<String> {
        self.inner.clock_note(node_types)
    }

    fn node_counts(&self) -> Option<&NodeCounts> {
        self.node_counts
            .as_ref()
            .or_else(|| self.inner.node_counts())
    }
}
