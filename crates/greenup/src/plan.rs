//! The decision entry point: a job request, a site, a profile and a policy in;
//! a node count, a frequency per node and the predicted outcome out.
//!
//! `greenup plan`, greenupd and the cluster tests all decide through [`plan`].

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::input::{InputError, Origin};
use crate::model::gpus::{Devices, Gears, GpuNode, WithGpus};
use crate::model::{ModelError, NodeSlot, Prediction, Predictor};
use crate::optimize::nodes::{self, Search};
use crate::optimize::{self, Goal, Limits, OptimizeError};
use crate::policy::Policy;
use crate::profile::Profile;
use crate::site::Site;
use greenup_core::quantity::{Ghz, Joules, Seconds, Watts};
use greenup_core::time_limit::TimeLimit;

pub use greenup_core::plan::{Algorithm, Estimate, Plan, PlannedGpus, PlannedNode, SearchInfo};

/// Which nodes a job may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeRequest {
    /// Exactly these nodes (a job's allocation), in Slurm order; with `min` set the
    /// plan may use fewer of them, but never fewer than `min`.
    List {
        /// The allocated nodes.
        names: Vec<String>,
        /// The fewest the plan may use.
        min: Option<usize>,
    },
    /// Any `min..=max` nodes of the partition (or of the site).
    Count {
        /// The fewest nodes.
        min: usize,
        /// The most nodes.
        max: usize,
    },
}

/// What a job asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRequest {
    /// Policy name, e.g. `min-energy`.
    pub policy: String,
    /// The nodes the job has or may have.
    pub nodes: NodeRequest,
    /// Slurm partition, for per-partition caps.
    pub partition: Option<String>,
    /// The user's energy cap in joules.
    pub energy_cap_j: Option<Joules>,
    /// The user's (or ledger's) power cap in watts.
    pub power_cap_w: Option<Watts>,
    /// The job's time limit; the plan never goes past a limit of seconds.
    #[serde(
        rename = "time_limit_s",
        default,
        skip_serializing_if = "TimeLimit::is_unknown"
    )]
    pub time_limit: TimeLimit,
    /// The optimizer.
    pub algorithm: Algorithm,
    /// No node above this frequency in GHz (set by an energy budget's warning level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_freq_ghz: Option<Ghz>,
}

/// Why no plan could be made (as opposed to an infeasible plan, which is still a plan).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// A request field, policy or site setting is unusable.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The model could not predict.
    #[error("model: {0}")]
    Model(#[from] ModelError),
    /// The optimizer could not search.
    #[error("optimizer: {0}")]
    Optimize(#[from] OptimizeError),
}

/// Decide for a job: the profile's model on the site's nodes, searched under the policy.
/// See [`plan_with`].
pub fn plan(
    site: &Site,
    profile: &Profile,
    policy: &Policy,
    req: &PlanRequest,
) -> Result<Plan, PlanError> {
    let predictor = profile.predictor(site)?;
    plan_with(site, predictor.as_ref(), policy, req)
}

/// Decide with the model `predictor`: merge the user's, the policy's and the site's
/// limits (the strictest wins, so no request lifts a site cap), choose the nodes
/// and their frequencies with the requested optimizer, and describe the result.
pub fn plan_with(
    site: &Site,
    predictor: &dyn Predictor,
    policy: &Policy,
    req: &PlanRequest,
) -> Result<Plan, PlanError> {
    if !site.allowed_policies.is_empty() && !site.allowed_policies.iter().any(|p| p == &policy.name)
    {
        return Err(InputError::new(
            Origin::Request("policy".into()),
            "policy",
            &policy.name,
            format!(
                "one of the site's allowed policies: {}",
                site.allowed_policies.join(", ")
            ),
        )
        .into());
    }
    let limits = limits(site, policy, req)?;
    let (slots, lo, hi) = node_slots(site, policy, req)?;

    let started = Instant::now();
    let search = Search {
        slots: &slots,
        min_nodes: lo,
        max_nodes: hi,
        objective: policy.objective,
        limits,
        min_ee: policy.constraints.min_ee,
        algorithm: req.algorithm,
        max_freq_ghz: req.max_freq_ghz.map(|g| g.0),
    };
    let gpu_nodes = gpu_nodes(site);
    let gears = Gears {
        // Algorithm 1 steps a node one gear down at a time: it knows CPU gears only.
        devices: match req.algorithm {
            Algorithm::Paper => Devices::Cpu,
            _ => policy.devices,
        },
        cpu_ceiling_ghz: req.max_freq_ghz.map(|g| g.0),
    };
    let with_gpus = WithGpus::new(predictor, &gpu_nodes, predictor.gpu_busy(), gears);
    let gpus_apply = !gpu_nodes.is_empty() || gears.devices == Devices::Gpu;
    let predictor: &dyn Predictor = if gpus_apply { &with_gpus } else { predictor };
    let decision = if policy.monitor {
        monitor(predictor, &search)?
    } else {
        nodes::decide(predictor, &search)?
    };

    let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);

    let types: BTreeMap<&str, &str> = slots
        .iter()
        .map(|s| (s.name.as_str(), s.node_type.as_str()))
        .collect();
    // Say whether the time the plan promises rests on a learned clock sensitivity or
    // on the compute-bound assumption.
    let mut reason = decision.reason;
    let used: Vec<&str> = decision
        .config
        .nodes
        .iter()
        .filter_map(|n| types.get(n.name.as_str()).copied())
        .collect();
    if let Some(note) = predictor.clock_note(&used) {
        if !reason.is_empty() {
            reason.push_str("; ");
        }
        reason.push_str(&note);
    }
    Ok(Plan {
        policy: policy.name.clone(),
        feasible: decision.feasible,
        reason,
        node_count: decision.config.nodes.len(),
        nodes: decision
            .config
            .nodes
            .iter()
            .map(|n| PlannedNode {
                name: n.name.clone(),
                node_type: types
                    .get(n.name.as_str())
                    .map_or_else(|| n.node_type.clone(), |t| t.to_string()),
                freq_ghz: Ghz(n.freq_ghz),
                gpu_mhz: n.gpu_mhz,
            })
            .collect(),
        predicted: estimate(&decision.prediction),
        baseline: estimate(&decision.baseline),
        objective: decision.objective,
        search: SearchInfo {
            algorithm: req.algorithm,
            candidates: decision.candidates,
            elapsed_us,
            reused: false,
        },
        gpus: (!gpu_nodes.is_empty())
            .then(|| {
                // The GPUs' average watts over a prediction's whole run.
                let of = |p: &Prediction| -> f64 {
                    if p.time_s <= 0.0 {
                        return 0.0;
                    }
                    let n = p.per_node.len();
                    let j: f64 = p
                        .per_node
                        .iter()
                        .filter_map(|x| {
                            let t = types.get(x.name.as_str())?;
                            Some(with_gpus.gpus_j(t, x.gpu_mhz, n, p.time_s))
                        })
                        .sum();
                    j / p.time_s
                };
                PlannedGpus {
                    planned_w: Watts(of(&decision.prediction)),
                    baseline_w: Watts(of(&decision.baseline)),
                }
            })
            .filter(|g| g.planned_w.0 > 0.0 || g.baseline_w.0 > 0.0),
    })
}

/// The plan of exactly `config`, each node at the clock it names, predicted `predicted`
/// against `baseline` (every node at f_max), under `policy` and `limits`: what greenupd
/// records when the site, not the policy's search, chose the clocks (a clock sample).
/// Its nodes' GPUs are left at their top clock.
pub fn fixed(
    policy: &Policy,
    limits: Limits,
    algorithm: Algorithm,
    config: &crate::model::Config,
    predicted: &Prediction,
    baseline: &Prediction,
) -> Plan {
    let goal = Goal {
        objective: policy.objective,
        limits,
        baseline_time_s: baseline.time_s,
        baseline_energy_j: baseline.energy_j,
    };
    Plan {
        policy: policy.name.clone(),
        feasible: true,
        reason: String::new(),
        node_count: config.nodes.len(),
        nodes: config
            .nodes
            .iter()
            .map(|n| PlannedNode {
                name: n.name.clone(),
                node_type: n.node_type.clone(),
                freq_ghz: Ghz(n.freq_ghz),
                gpu_mhz: None,
            })
            .collect(),
        predicted: estimate(predicted),
        baseline: estimate(baseline),
        objective: goal
            .assess(predicted.time_s, predicted.energy_j, None)
            .value,
        search: SearchInfo {
            algorithm,
            candidates: 1,
            elapsed_us: 0,
            reused: false,
        },
        gpus: None,
    }
}

/// The GPUs of each site node type that has them, as a decision sees them.
fn gpu_nodes(site: &Site) -> BTreeMap<String, GpuNode> {
    site.gpu_types
        .iter()
        .map(|(t, g)| {
            (
                t.clone(),
                GpuNode {
                    count: g.count,
                    gears_mhz: g.gears_mhz(),
                    dynamic_w: g.dynamic_w,
                    static_w: g.static_w,
                    gamma: g.gamma,
                },
            )
        })
        .filter(|(_, g)| g.count > 0 && g.static_w + g.dynamic_w > 0.0)
        .collect()
}

/// The monitor policy: the baseline itself, every node at maximum frequency, nothing changed.
fn monitor(predictor: &dyn Predictor, search: &Search) -> Result<nodes::Decision, PlanError> {
    let slots = &search.slots[..search.max_nodes.min(search.slots.len())];
    let table = predictor.table(slots)?;
    optimize::check_table(&table)?;
    let top = table.max_pick();
    let baseline = table.evaluate(&top);
    let goal = Goal {
        objective: search.objective,
        limits: search.limits,
        baseline_time_s: baseline.time_s,
        baseline_energy_j: baseline.energy_j,
    };
    let config = table.config(&top);
    let ee = predictor.efficiency(&config, &baseline);
    let a = goal.assess(baseline.time_s, baseline.energy_j, ee);
    let mut reason = "monitor: every node at maximum frequency, nothing changed".to_string();
    if !a.feasible {
        reason.push_str("; note: ");
        reason.push_str(&goal.explain(baseline.time_s, baseline.energy_j));
    }
    Ok(nodes::Decision {
        config,
        prediction: baseline.clone(),
        baseline,
        objective: a.value,
        feasible: true,
        reason,
        candidates: 1,
    })
}

fn estimate(p: &Prediction) -> Estimate {
    Estimate {
        time_s: Seconds(p.time_s),
        energy_j: Joules(p.energy_j),
        avg_power_w: Watts(p.avg_power_w),
    }
}

/// The one rule for a cap or limit a job asks for (`energy_cap_j`, `power_cap_w`,
/// `time_limit_s`): absent, or a positive finite number. greenupd applies it to what a
/// node sends, and every plan to its request.
pub fn check_cap(field: &str, v: Option<f64>) -> Result<Option<f64>, InputError> {
    match v {
        Some(x) if !(x.is_finite() && x > 0.0) => Err(InputError::new(
            Origin::Request(field.into()),
            field,
            x,
            "a positive finite number",
        )),
        _ => Ok(v),
    }
}

/// The limits a job is planned under, merged and checked in this one place: for each,
/// the strictest of the user's (or the ledger's), the policy's, the partition's and the
/// site's, so no request lifts a site cap. Every plan uses them, and greenupd asks the
/// same question before it runs a job at f_max (a baseline sample, a held policy).
pub fn limits(site: &Site, policy: &Policy, req: &PlanRequest) -> Result<Limits, PlanError> {
    let check = |field: &str, v: Option<f64>| check_cap(field, v).map_err(PlanError::from);
    let min_of = |vals: &[Option<f64>]| vals.iter().flatten().copied().reduce(f64::min);
    let partition_cap = match &req.partition {
        Some(p) => site.partitions.get(p).and_then(|p| p.power_cap_w),
        None => None,
    };
    Ok(Limits {
        energy_cap_j: min_of(&[
            check("energy_cap_j", req.energy_cap_j.map(|j| j.0))?,
            policy.constraints.energy_cap_j,
            site.job_energy_limit_j,
        ]),
        power_cap_w: min_of(&[
            check("power_cap_w", req.power_cap_w.map(|w| w.0))?,
            policy.constraints.power_cap_w,
            site.power_cap_w,
            partition_cap,
        ]),
        time_limit_s: check("time_limit_s", req.time_limit.seconds())?,
        max_slowdown: policy.constraints.max_slowdown,
    })
}

/// Whether a plan under `limits` keeps an energy or power cap.
pub fn keeps_cap(limits: &Limits) -> bool {
    limits.energy_cap_j.is_some() || limits.power_cap_w.is_some()
}

/// The node types a plan prices clocks with: `floored` below each type's lowest
/// measured clock ([`crate::model::measured_power::floored`]), `site`'s as they are
/// otherwise.
pub fn priced_types(
    site: &Site,
    floored: bool,
) -> std::borrow::Cow<'_, BTreeMap<String, crate::model::NodeType>> {
    if floored {
        std::borrow::Cow::Owned(crate::model::measured_power::floored(&site.node_types))
    } else {
        std::borrow::Cow::Borrowed(&site.node_types)
    }
}

/// `site` with [`priced_types`]: what the floored predictor [`plan_within_caps`] takes
/// is built on.
pub fn priced(site: &Site, floored: bool) -> Site {
    Site {
        node_types: priced_types(site, floored).into_owned(),
        ..site.clone()
    }
}

/// [`plan_with`], with every cap it keeps held at the most the chips can draw. The plan
/// `predictor` makes stands where `floored` (the same profile on [`priced`] node types)
/// prices its choice within every energy and power cap too. Otherwise the plan is made
/// again with `floored`, and the second value says so.
///
/// Why a check and not the floor throughout: below the lowest measured clock the
/// site's shape, scaled, can say far less than the chip draws (EPYC 7502 nodes measured
/// at 2.5 GHz alone are guessed at 97 W at 1.5 GHz, where they draw 173 W), and a cap is a
/// promise. But under the floor a lower clock never saves energy for a program whose
/// time follows the clock, so pricing every plan with it would keep every plan on the
/// clocks already measured; a cap far from the plan's draw (a site's whole power cap)
/// needs no such caution.
pub fn plan_within_caps(
    site: &Site,
    predictor: &dyn Predictor,
    floored: &dyn Predictor,
    policy: &Policy,
    req: &PlanRequest,
) -> Result<(Plan, bool), PlanError> {
    let plan = plan_with(site, predictor, policy, req)?;
    let limits = limits(site, policy, req)?;
    if !keeps_cap(&limits) {
        return Ok((plan, false));
    }
    let config = crate::model::Config {
        nodes: plan
            .nodes
            .iter()
            .map(|n| crate::model::NodeSetting {
                name: n.name.clone(),
                node_type: n.node_type.clone(),
                freq_ghz: n.freq_ghz.0,
                gpu_mhz: n.gpu_mhz,
            })
            .collect(),
    };
    // The two pricings differ in the CPUs' watts alone, so the difference of the CPU
    // models' predictions moves the plan's whole one (GPUs included) to the floor.
    let (Ok(own), Ok(held)) = (predictor.predict(&config), floored.predict(&config)) else {
        return Ok((plan, false));
    };
    let energy_j = plan.predicted.energy_j.0 + (held.energy_j - own.energy_j);
    let time_s = plan.predicted.time_s.0 + (held.time_s - own.time_s);
    let within = |cap: Option<f64>, v: f64| cap.is_none_or(|c| v <= c * (1.0 + 1e-9));
    let holds = within(limits.energy_cap_j, energy_j)
        && (time_s <= 0.0 || within(limits.power_cap_w, energy_j / time_s));
    if holds {
        return Ok((plan, false));
    }
    let mut plan = plan_with(site, floored, policy, req)?;
    let note = "caps held at the most the chips can draw: clocks below each type's lowest measured one priced at the floor";
    plan.reason = if plan.reason.is_empty() {
        note.to_string()
    } else {
        format!("{}; {note}", plan.reason)
    };
    Ok((plan, true))
}

/// The candidate nodes (in the job's order) and the allowed node-count range.
fn node_slots(
    site: &Site,
    policy: &Policy,
    req: &PlanRequest,
) -> Result<(Vec<NodeSlot>, usize, usize), PlanError> {
    let origin = || Origin::Request("nodes".into());
    let (names, lo, hi): (Vec<String>, usize, usize) = match &req.nodes {
        NodeRequest::List { names, min } => {
            if names.is_empty() {
                return Err(InputError::new(origin(), "nodes", "", "at least one node").into());
            }
            let lo = min.unwrap_or(names.len());
            if lo == 0 || lo > names.len() {
                return Err(InputError::new(
                    origin(),
                    "min",
                    lo,
                    format!("between 1 and the {} nodes listed", names.len()),
                )
                .into());
            }
            (names.clone(), lo, names.len())
        }
        NodeRequest::Count { min, max } => {
            if *min == 0 || min > max {
                return Err(InputError::new(
                    origin(),
                    "node count",
                    format!("{min}-{max}"),
                    "MIN-MAX with 1 <= MIN <= MAX",
                )
                .into());
            }
            let Some(pool) = site.pool(req.partition.as_deref()) else {
                return Err(InputError::new(
                    Origin::Request("partition".into()),
                    "partition",
                    req.partition.as_deref().unwrap_or_default(),
                    site.partitions_valid(),
                )
                .into());
            };
            if *min > pool.len() {
                return Err(InputError::new(
                    origin(),
                    "node count",
                    format!("{min}-{max}"),
                    format!("at most the {} nodes greenup knows here", pool.len()),
                )
                .into());
            }
            let hi = (*max).min(pool.len());
            (pool, *min, hi)
        }
    };
    let (lo, hi) = match policy.constraints.nodes {
        Some((plo, phi)) => {
            let (a, b) = (lo.max(plo), hi.min(phi));
            if a > b {
                return Err(InputError::new(
                    origin(),
                    "nodes",
                    format!("{lo}-{hi}"),
                    format!("a node count policy '{}' allows ({plo}-{phi})", policy.name),
                )
                .into());
            }
            (a, b)
        }
        None => (lo, hi),
    };
    let mut slots = Vec::with_capacity(names.len());
    for name in names {
        let Some(ty) = site.node_type_of(&name) else {
            return Err(InputError::new(
                origin(),
                "node",
                &name,
                "a node listed in the site config's node types",
            )
            .into());
        };
        slots.push(NodeSlot {
            name,
            node_type: ty.name.clone(),
            freqs_ghz: ty.freqs_ghz.clone(),
        });
    }
    Ok((slots, lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requests_caps_cross_the_wire_as_bare_numbers() {
        let req = PlanRequest {
            policy: "min-energy".into(),
            nodes: NodeRequest::Count { min: 2, max: 8 },
            partition: Some("cpu".into()),
            energy_cap_j: Some(Joules(3.6e6)),
            power_cap_w: Some(Watts(1250.5)),
            time_limit: TimeLimit::of_seconds(3600.0),
            algorithm: Algorithm::Exact,
            max_freq_ghz: Some(Ghz(2.2)),
        };
        let line = r#"{"policy":"min-energy","nodes":{"count":{"min":2,"max":8}},"partition":"cpu","energy_cap_j":3600000.0,"power_cap_w":1250.5,"time_limit_s":3600.0,"algorithm":"exact","max_freq_ghz":2.2}"#;
        assert_eq!(serde_json::to_string(&req).unwrap(), line);
        assert_eq!(serde_json::from_str::<PlanRequest>(line).unwrap(), req);
        let uncapped = PlanRequest {
            nodes: NodeRequest::List {
                names: vec!["n1".into(), "n2".into()],
                min: None,
            },
            partition: None,
            energy_cap_j: None,
            power_cap_w: None,
            time_limit: TimeLimit::default(),
            max_freq_ghz: None,
            ..req
        };
        let line = r#"{"policy":"min-energy","nodes":{"list":{"names":["n1","n2"],"min":null}},"partition":null,"energy_cap_j":null,"power_cap_w":null,"algorithm":"exact"}"#;
        assert_eq!(serde_json::to_string(&uncapped).unwrap(), line);
        assert_eq!(serde_json::from_str::<PlanRequest>(line).unwrap(), uncapped);
    }
}
