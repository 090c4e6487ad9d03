//! The steps of a run, from the compute windows its nodes counted: what the step model
//! (`model::steps`) is learned from.
//!
//! Each node's MPI runtime (or greenup-sim, from SimGrid's trace) counts its slowest
//! rank's compute seconds per window of wall time (`comm::StepTimes`). Per run, each node
//! type's count in a window is its slowest node's, since the type's step ends when that
//! node is done; the types are brought to one window length, and every window of every
//! run is one step. Only runs with every node at its type's maximum clock are used, so
//! the seconds are what the step model calls the type's time at f_max.

use std::collections::{BTreeMap, HashMap};

use crate::comm::StepTimes;
use crate::record::JobRecord;

use super::outcome::Outcome;

/// Per step, each node type's compute seconds (its slowest node's), from the runs'
/// windows, and the jobs they came from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunSteps {
    /// One map per step: node type to seconds.
    pub steps: Vec<BTreeMap<String, f64>>,
    /// The jobs whose windows were used.
    pub jobs: Vec<u64>,
    /// The window each used job's steps were counted in, seconds.
    pub window_s: Vec<f64>,
    /// How many windows each used job's run spans at its window (idle ones included).
    pub windows: Vec<usize>,
}

/// The steps of `runs` (outcomes at every node's maximum clock), reading each node's
/// windows from its job's record in `records`. A run with a node that counted no
/// windows is left out: its steps would lack that node's type.
pub fn run_steps(runs: &[&Outcome], records: &[JobRecord]) -> RunSteps {
    run_steps_at(runs, records, 0.0)
}

/// The steps of `runs` as [`run_steps`] makes them, with every window at least
/// `window_s` long (a greenup window: the nodes' counts are coarsened to it).
///
/// Each node is coarsened before its type's slowest node is taken: in a longer window
/// the type's step ends when the node with the most compute in that whole window is
/// done, which is not the sum of each shorter window's slowest node.
pub fn run_steps_at(runs: &[&Outcome], records: &[JobRecord], window_s: f64) -> RunSteps {
    let mut out = RunSteps::default();
    for o in runs {
        let Some(rec) = records.iter().find(|r| r.job_id == o.job_id) else {
            continue;
        };
        // Indexed once: a run of thousands of nodes would otherwise search its outcomes
        // once per node.
        let by_node: HashMap<&str, &crate::record::NodeOutcome> =
            rec.outcomes.iter().map(|x| (x.node.as_str(), x)).collect();
        let mut per_type: BTreeMap<&str, StepTimes> = BTreeMap::new();
        let mut all = true;
        for n in &o.nodes {
            let windows = by_node
                .get(n.name.as_str())
                .and_then(|x| x.comm.as_ref())
                .and_then(|c| c.steps.as_ref())
                .filter(|s| s.fits(o.time_s));
            let Some(w) = windows else {
                all = false;
                break;
            };
            let w = w.coarsened(window_s);
            per_type
                .entry(n.node_type.as_str())
                .and_modify(|t| t.max_with(&w))
                .or_insert(w);
        }
        if !all || per_type.is_empty() {
            continue;
        }
        let window = per_type.values().map(|t| t.window_s.0).fold(0.0, f64::max);
        let aligned: BTreeMap<&str, StepTimes> = per_type
            .into_iter()
            .map(|(ty, t)| (ty, t.coarsened(window)))
            .collect();
        let len = aligned
            .values()
            .map(|t| t.compute_s.len())
            .max()
            .unwrap_or(0);
        for k in 0..len {
            let step: BTreeMap<String, f64> = aligned
                .iter()
                .map(|(ty, t)| (ty.to_string(), t.compute_s.get(k).copied().unwrap_or(0.0)))
                .collect();
            // A window where no type computed is no step.
            if step.values().any(|c| *c > 0.0) {
                out.steps.push(step);
            }
        }
        out.jobs.push(o.job_id);
        out.window_s.push(window);
        out.windows.push(len);
    }
    out
}
