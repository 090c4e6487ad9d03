//! Power as it crosses the wire: the watts Slurm granted a job and how its nodes weigh
//! them ([`Grant`]), each GPU's part of a node's share and the limit it is set to
//! ([`GpuPart`]), and how often a node's meter reports ([`REPORT_PERIOD_S`]). How a grant
//! is weighed and split by each node's type is the decision library's `power`.

use greenup_core::quantity::Watts;
use serde::{Deserialize, Serialize};

/// `power.report_period_s` by default: a node's meter sends its samples at most this
/// often, in seconds. At 10,000 nodes sampling every 5 s, one report per node a minute
/// (167 a second, 12 samples each) keeps greenupd under 5 % of a core, where a report
/// per sample (2,000 a second) takes a quarter of one, and every 30 s a tenth
/// (docs/BENCHMARKS.md). The live view lags by up to this much; each sample keeps its
/// own time, so the over-grant warning does not.
pub const REPORT_PERIOD_S: f64 = 60.0;

/// The watts Slurm granted a job and the sum of its nodes' weights, so each node's share
/// is `granted_w * weight / weight_w`; under Slurm's hierarchical resources every node's
/// share is the same, `node_w`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    /// Watts the job holds as greenup's licenses.
    pub granted_w: Watts,
    /// The sum over the job's used nodes of their weights: what each would draw flat out
    /// at the frequency and GPU clock it is told (the library's `power::node_weight_w`).
    pub weight_w: Watts,
    /// Each node's share, watts, where Slurm counts the grant per node
    /// (`power.enforce: hres`): a rack counts that much for each of the job's nodes in it,
    /// so no node may draw more, whatever its weight. None: shares follow the weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_w: Option<Watts>,
}

impl Grant {
    /// The share of a node of weight `weight_w`, in watts.
    pub fn share_w(&self, weight_w: Watts) -> Watts {
        self.node_w
            .unwrap_or(Watts(self.granted_w.0 * weight_w.0 / self.weight_w.0))
    }
}

/// Each GPU's part of a node's share and the limit it is set to.
// Unknown fields are let through, as in the rest of a node's settings: a newer greenupd
// must not leave an older plugin without its decision.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GpuPart {
    /// Each GPU's part of the node's share, watts: the node's share times one GPU's
    /// modelled power over the node's.
    pub part_w: Watts,
    /// The power limit each of the job's GPUs is set to, watts: the part clamped into the
    /// range greenup may set.
    pub limit_w: Watts,
}

impl GpuPart {
    /// The part `part_w` with its limit clamped into `range_w` (none: the part itself).
    pub fn of(part_w: Watts, range_w: Option<(Watts, Watts)>) -> GpuPart {
        GpuPart {
            part_w,
            limit_w: part_w,
        }
        .clamped(range_w)
    }

    /// This part with its limit clamped further into `range_w` (NVML's, at the node).
    pub fn clamped(self, range_w: Option<(Watts, Watts)>) -> GpuPart {
        let limit_w = match range_w {
            Some((lo, hi)) if lo <= hi => Watts(self.limit_w.0.clamp(lo.0, hi.0)),
            _ => self.limit_w,
        };
        GpuPart { limit_w, ..self }
    }

    /// Watts each GPU may draw beyond its part because its lowest limit is above it:
    /// what the node may draw over its share, per GPU.
    pub fn over_w(&self) -> Watts {
        Watts((self.limit_w - self.part_w).0.max(0.0))
    }

    /// One line when the limit is not the part: held at the lowest limit (the node may
    /// draw more than its share) or at the highest (the GPU leaves watts unused).
    pub fn note(&self) -> Option<String> {
        let (limit, part) = (self.limit_w.0, self.part_w.0);
        if (limit - part).abs() < 0.05 {
            None
        } else if limit > part {
            Some(format!(
                "GPU limit {limit:.1} W is its lowest, {:.1} W above its {part:.1} W part of the node's share",
                limit - part
            ))
        } else {
            Some(format!(
                "GPU limit {limit:.1} W is its highest, {:.1} W of its {part:.1} W part unused",
                part - limit
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_and_a_gpu_part_cross_the_wire_as_bare_numbers() {
        let g = Grant {
            granted_w: Watts(500.0),
            weight_w: Watts(1000.0),
            node_w: None,
        };
        let line = r#"{"granted_w":500.0,"weight_w":1000.0}"#;
        assert_eq!(serde_json::to_string(&g).unwrap(), line);
        assert_eq!(serde_json::from_str::<Grant>(line).unwrap(), g);
        assert_eq!(g.share_w(Watts(850.0)), Watts(425.0));
        let p = GpuPart::of(Watts(140.0), Some((Watts(200.0), Watts(700.0))));
        let line = r#"{"part_w":140.0,"limit_w":200.0}"#;
        assert_eq!(serde_json::to_string(&p).unwrap(), line);
        assert_eq!(serde_json::from_str::<GpuPart>(line).unwrap(), p);
        assert_eq!(p.over_w(), Watts(60.0));
    }
}
