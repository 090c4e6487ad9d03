//! Plans kept for the next job of the same shape.
//!
//! A plan depends on a job's nodes only through their types, the power factor each
//! node learned (greenup::model::node_scale; 1 for the many that draw as their type)
//! and their order: the models and optimizers read a node's name for nothing else. So
//! the tasks of a job array, or any later job with the same node types and factors,
//! policy, caps and limits, get the stored plan with their own node names put in, and
//! skip the search. A cache belongs to one
//! loaded profile version under one site config: a new version or a reload starts an
//! empty one, so a reused plan is always the plan a fresh search would make.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Instant;

use greenup::plan::{Algorithm, NodeRequest, Plan, PlanRequest};
use greenup::site::Site;

/// Planned nodes the cache may hold in all; the oldest plans go first beyond it.
const MAX_NODES: usize = 1 << 16;

/// Everything a plan depends on besides the profile and the site config.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    policy: String,
    /// Each listed node's type, as its index among the site's node types, and its
    /// learned power factor's bits.
    types: Vec<(u32, u64)>,
    min: Option<usize>,
    partition: Option<String>,
    energy_cap_j: Option<u64>,
    power_cap_w: Option<u64>,
    time_limit_s: Option<u64>,
    algorithm: Algorithm,
    max_freq_ghz: Option<u64>,
}

impl Shape {
    /// The shape of `req` on `site`; `None` when its nodes are not a list of known
    /// nodes (a count of the partition's nodes, or a node the site does not type).
    pub fn of(site: &Site, req: &PlanRequest) -> Option<Shape> {
        let NodeRequest::List { names, min } = &req.nodes else {
            return None;
        };
        let types = names
            .iter()
            .map(|n| {
                let t = site.nodes.get(n)?;
                let (i, nt) = site
                    .node_types
                    .iter()
                    .enumerate()
                    .find(|(_, (k, _))| *k == t)?;
                Some((i.try_into().ok()?, nt.1.node_factor(n).to_bits()))
            })
            .collect::<Option<Vec<(u32, u64)>>>()?;
        Some(Shape {
            policy: req.policy.clone(),
            types,
            min: *min,
            partition: req.partition.clone(),
            energy_cap_j: req.energy_cap_j.map(|j| j.0.to_bits()),
            power_cap_w: req.power_cap_w.map(|w| w.0.to_bits()),
            // Unknown and unlimited plan alike: neither bounds the plan.
            time_limit_s: req.time_limit.seconds().map(f64::to_bits),
            algorithm: req.algorithm,
            max_freq_ghz: req.max_freq_ghz.map(|g| g.0.to_bits()),
        })
    }
}

/// A stored plan and, for each of its nodes, that node's place in the request's list.
struct Kept {
    plan: Plan,
    picks: Vec<usize>,
    /// Whether it was made at the most the chips can draw, to hold a cap.
    floored: bool,
}

#[derive(Default)]
struct Inner {
    plans: HashMap<Shape, Kept>,
    order: VecDeque<Shape>,
    nodes: usize,
}

/// Plans by job shape, bounded by the number of planned nodes held.
#[derive(Default)]
pub struct PlanCache {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for PlanCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("PlanCache")
            .field("plans", &inner.plans.len())
            .field("nodes", &inner.nodes)
            .finish()
    }
}

impl PlanCache {
    /// The plan stored for `shape`, with the nodes of `names` (the new job's list) put in,
    /// and whether it was made at the most the chips can draw.
    pub fn get(&self, shape: &Shape, names: &[String]) -> Option<(Plan, bool)> {
        let started = Instant::now();
        let (mut plan, floored) = {
            let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let kept = inner.plans.get(shape)?;
            if kept.picks.iter().any(|&i| i >= names.len()) {
                return None;
            }
            let mut plan = kept.plan.clone();
            for (node, &i) in plan.nodes.iter_mut().zip(&kept.picks) {
                node.name.clone_from(&names[i]);
            }
            (plan, kept.floored)
        };
        plan.search.reused = true;
        plan.search.elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        Some((plan, floored))
    }

    /// Keep `plan`, made for the nodes `names` (at the most the chips can draw where
    /// `floored`), for later jobs of `shape`.
    pub fn put(&self, shape: Shape, names: &[String], plan: &Plan, floored: bool) {
        let index: HashMap<&str, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        let Some(picks) = plan
            .nodes
            .iter()
            .map(|n| index.get(n.name.as_str()).copied())
            .collect::<Option<Vec<usize>>>()
        else {
            return;
        };
        let size = names.len().max(1);
        if size > MAX_NODES {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let kept = Kept {
            plan: plan.clone(),
            picks,
            floored,
        };
        if inner.plans.insert(shape.clone(), kept).is_some() {
            return;
        }
        inner.order.push_back(shape);
        inner.nodes += size;
        while inner.nodes > MAX_NODES {
            let Some(old) = inner.order.pop_front() else {
                break;
            };
            if inner.plans.remove(&old).is_some() {
                inner.nodes = inner.nodes.saturating_sub(old.types.len().max(1));
            }
        }
    }
}
