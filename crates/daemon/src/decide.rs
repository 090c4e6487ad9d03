//! Turning an open-job request into a decision under the power budget left.
//!
//! The decision itself comes from [`greenup::plan::plan`]; this module only picks the
//! cap to plan under (the user's cap or the budget left, whichever is lower),
//! applies the site's `over_budget` rule when the budget, not the user, is what
//! makes the plan infeasible (a budget used up, or overdrawn after a reload lowered
//! a cap, included), and turns a request no plan can be made for into a refusal
//! that is recorded like any decision.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::baseline::{self, AppState};
use super::plan_cache::{PlanCache, Shape};
use greenup::model::Predictor;
use greenup::model::measured_power::planned;
use greenup::plan::{Plan, PlanRequest};
use greenup::policy::{Policy, PolicySet};
use greenup::power::{Grant, grant_over};
use greenup::profile::Profile;
use greenup::profile::locate;
use greenup::record::TypeWatts;
use greenup::site::{DaemonLimits, Enforce, OverBudget, Site};
use greenup_core::quantity::{Ghz, Watts};
use greenup_proto::protocol::{ErrorCode, ErrorReply, OpenJob, Verdict};

/// What the decider proposes; the server reserves and stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// What to do.
    pub verdict: Verdict,
    /// Why, in one line.
    pub reason: String,
    /// The policy applied.
    pub policy: String,
    /// Whether that policy only records (its `monitor` flag).
    pub monitor: bool,
    /// The profile used.
    pub profile: Option<String>,
    /// Its version.
    pub profile_version: Option<String>,
    /// The cap the plan was made under.
    pub power_cap_w: Option<Watts>,
    /// The plan, if any.
    pub plan: Option<Plan>,
    /// Watts to reserve.
    pub reserve_w: Watts,
    /// The plan request, for the store.
    pub inputs: serde_json::Value,
    /// Whether the job runs as a measured baseline sample (see [`super::baseline`]).
    pub baseline_sample: bool,
    /// Whether the monitor job runs at a clock its watts are not measured at yet (see
    /// [`super::clock_sample`]).
    pub clock_sample: bool,
    /// For a refusal, the error each node is answered with.
    pub refusal: Option<ErrorCode>,
    /// The policy's communication-phase DVFS, when it asks for it.
    pub comm_dvfs: Option<greenup::comm::CommDvfs>,
    /// Whether the plan was made again at the most the chips can draw, to hold a cap
    /// ([`greenup::plan::plan_within_caps`]).
    pub floored: bool,
}

/// The cap the planner is given when no budget is left: every configuration exceeds
/// it, so the planner ranks them by power alone and its choice is the lowest-power
/// one. A budget of 0 W or less is never passed on: the planner refuses such a cap.
const NO_BUDGET_PROBE_W: f64 = 1.0;

/// Watts a job greenup does not manage holds in the ledger: under `enforce: open` it
/// runs as submitted, so its nodes' full power, and later jobs are planned under what
/// is truly left; under `enforce: strict` it fails, so nothing.
pub fn unmanaged_w(site: &Site, req: &OpenJob) -> Watts {
    match site.enforce {
        Enforce::Open => greenup::power::max_power_w(site, &req.nodes),
        Enforce::Strict => Watts(0.0),
    }
}

/// What becomes of a refused job, for its reason.
pub fn unmanaged_fate(site: &Site) -> &'static str {
    match site.enforce {
        Enforce::Open => {
            "the job runs unmanaged at full power (enforce: open), holding its nodes' full power in the ledger"
        }
        Enforce::Strict => "the job fails (enforce: strict)",
    }
}

/// A loaded profile with its predictor for this site, the file and time it was read at,
/// and the plans made from it so far.
struct Loaded {
    path: PathBuf,
    modified: Option<SystemTime>,
    version: u64,
    /// The site's node types the predictor was built on: measured power curves change
    /// them while the site file stays, and a predictor holds its own copy.
    types: std::collections::BTreeMap<String, greenup::model::NodeType>,
    predictor: Arc<dyn Predictor + Send + Sync>,
    /// The same profile at the most the chips can draw ([`greenup::plan::priced`]), which a
    /// plan that would break a cap at those prices is made with instead.
    floored: Arc<dyn Predictor + Send + Sync>,
    plans: PlanCache,
}

/// Makes decisions for one loaded site config: its policies, and its profiles
/// (read on first use and again whenever the file changes).
pub struct Decider {
    policies: PolicySet,
    profiles: Mutex<HashMap<String, Arc<Loaded>>>,
}

impl std::fmt::Debug for Decider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decider")
            .field("policies", &self.policies.names())
            .finish_non_exhaustive()
    }
}

fn plan_failed(msg: impl Into<String>) -> ErrorReply {
    ErrorReply::new(ErrorCode::PlanFailed, msg)
}

/// The smaller of two optional caps.
/// The watts Slurm granted `req` when the site holds power in Slurm's queue: they, not
/// the ledger's free watts, are what the job may draw. None under the ledger, or for a
/// job that holds none of greenup's licenses (submitted before the queue was turned on).
pub fn queue_grant_w(site: &Site, req: &OpenJob) -> Option<Watts> {
    site.power
        .enforce
        .in_slurm()
        .then_some(req.granted_w)
        .flatten()
        .filter(|g| g.0.is_finite() && g.0 >= 0.0)
}

/// How `req`'s grant is shared among the nodes that run it: the plan's nodes at their
/// planned frequencies and GPU clocks when the verdict applies the plan, else every node
/// at its top ones.
pub fn grant_of(
    site: &Site,
    req: &OpenJob,
    verdict: Verdict,
    plan: Option<&Plan>,
) -> Option<Grant> {
    let g = queue_grant_w(site, req)?;
    let grant = match plan.filter(|_| verdict.applies_plan()) {
        Some(p) => grant_over(
            site,
            g,
            p.nodes
                .iter()
                .map(|n| (n.name.as_str(), Some(n.freq_ghz), n.gpu_mhz)),
        ),
        None => grant_over(site, g, req.nodes.iter().map(|n| (n.as_str(), None, None))),
    };
    grant.map(|g| greenup::power::held(&site.power, g, req.nodes.len()))
}

/// The watts each node type of `plan` was planned with at its clock, and their source,
/// by `site`'s node types (those greenupd decides with, measured curves laid over):
/// what `greenup report` shows of the decision. Empty unless the verdict applies the plan.
/// A `floored` plan priced them as [`greenup::plan::priced_types`] says.
pub fn watts_of(
    site: &Site,
    verdict: Verdict,
    plan: Option<&Plan>,
    floored: bool,
) -> Vec<TypeWatts> {
    plan.filter(|_| verdict.applies_plan())
        .map(|p| planned(&greenup::plan::priced_types(site, floored), p))
        .unwrap_or_default()
}

/// The user's power cap as the planner and the ledger's free watts take it, a bare number.
fn user_cap_w(req: &OpenJob) -> Option<f64> {
    req.power_cap_w.map(|w| w.0)
}

fn min_cap(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Why greenupd cannot plan with a site config's policies; it refuses the config.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeciderError {
    /// A policy directory holds an unreadable or invalid policy.
    #[error(transparent)]
    Policies(#[from] greenup::input::InputError),
    /// A budget level forces a policy that cannot be had.
    #[error(transparent)]
    Forced(#[from] greenup::site::ForcedPolicyError),
}

impl Decider {
    /// A decider for `site`: loads the policies from the site's policy directories.
    pub fn new(site: &Site) -> Result<Decider, DeciderError> {
        let mut policies = PolicySet::load(&site.policy_dirs)?;
        greenup::site::add_forced(site, &mut policies)?;
        Ok(Decider {
            policies,
            profiles: Mutex::new(HashMap::new()),
        })
    }

    /// The name of the policy loaded from `file` (a budget level's `policy_file`).
    pub fn policy_from_file(&self, file: &std::path::Path) -> Option<String> {
        self.policies
            .iter()
            .find(|p| p.source == file)
            .map(|p| p.name.clone())
    }

    /// Policy `name`'s `max_slowdown` (a fraction), if it is loaded and has one.
    pub fn max_slowdown(&self, name: &str) -> Option<f64> {
        self.policies.get(name)?.constraints.max_slowdown
    }

    fn policy(&self, name: &str) -> Result<&Policy, ErrorReply> {
        self.policies.get(name).ok_or_else(|| {
            plan_failed(format!(
                "request field policy: invalid value '{name}': expected one of {}",
                self.policies.names().join(", ")
            ))
        })
    }

    /// The profile `name` with its predictor: the refined version in use (pinned, else
    /// newest) when one exists, else the admin's file; reloaded when that file changes.
    fn profile(&self, site: &Site, name: &str) -> Result<Arc<Loaded>, ErrorReply> {
        let origin = greenup::input::Origin::Request("profile".into());
        if !greenup::names::is_name(name) {
            let e = locate::bad_name(name, origin);
            return Err(ErrorReply::new(ErrorCode::BadRequest, e.to_string()));
        }
        let located =
            locate::for_job(site, name, origin).map_err(|e| plan_failed(e.to_string()))?;
        if let Some(e) = &located.versions_unread {
            tracing::warn!(profile = name, error = %e, "using the admin's profile file");
        }
        let path = located.path;
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        let mut cache = self.profiles.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = cache.get(name)
            && l.path == path
            && l.modified == modified
            && modified.is_some()
            && l.types == site.node_types
        {
            return Ok(l.clone());
        }
        let profile = Profile::load(&path).map_err(|e| plan_failed(e.to_string()))?;
        let build = |site: &Site| {
            profile
                .predictor(site)
                .map(Arc::<dyn Predictor + Send + Sync>::from)
                .map_err(|e| plan_failed(format!("{}: {e}", path.display())))
        };
        let predictor = build(site)?;
        let floored = build(&greenup::plan::priced(site, true))?;
        let loaded = Arc::new(Loaded {
            path,
            modified,
            version: profile.version(),
            types: site.node_types.clone(),
            predictor,
            floored,
            plans: PlanCache::default(),
        });
        cache.insert(name.to_string(), loaded.clone());
        Ok(loaded)
    }

    /// The plan request for `req` under `cap`.
    fn plan_request(site: &Site, req: &OpenJob, cap: Option<f64>) -> PlanRequest {
        PlanRequest {
            policy: req
                .policy
                .clone()
                .unwrap_or_else(|| site.default_policy.clone()),
            nodes: greenup::plan::NodeRequest::List {
                names: req.nodes.clone(),
                min: req.min_nodes,
            },
            partition: req.partition.clone(),
            energy_cap_j: req.energy_cap_j,
            power_cap_w: cap.map(Watts),
            time_limit: req.time_limit,
            algorithm: req.algorithm.unwrap_or_default(),
            max_freq_ghz: None,
        }
    }

    /// Plan `req` as `pr` says, every cap held at the most the chips can draw
    /// ([`greenup::plan::plan_within_caps`]): the plan, whether it was made at those
    /// prices, and the profile's version; `Ok(None)` when the job names no profile.
    #[allow(clippy::type_complexity)]
    fn plan(
        &self,
        site: &Site,
        req: &OpenJob,
        pr: &PlanRequest,
    ) -> Result<Option<(Plan, bool, Option<String>)>, ErrorReply> {
        let Some(name) = &req.profile else {
            return Ok(None);
        };
        let policy = self.policy(&pr.policy)?;
        let loaded = self.profile(site, name)?;
        let version = Some(loaded.version.to_string());
        let shape = Shape::of(site, pr);
        if let Some((plan, floored)) = shape.as_ref().and_then(|s| loaded.plans.get(s, &req.nodes))
        {
            return Ok(Some((plan, floored, version)));
        }
        let (plan, floored) = greenup::plan::plan_within_caps(
            site,
            loaded.predictor.as_ref(),
            loaded.floored.as_ref(),
            policy,
            pr,
        )
        .map_err(|e| plan_failed(e.to_string()))?;
        if let Some(shape) = shape {
            loaded.plans.put(shape, &req.nodes, &plan, floored);
        }
        Ok(Some((plan, floored, version)))
    }

    /// `base` (the monitor job `req`'s proposal) as a clock sample, when
    /// the site samples clocks ([`super::clock_sample`]) and picks it, its profile
    /// predicts it, and some unmeasured clock of its node types fits the bound and every
    /// limit it is under. Anything that stands in the way (no profile, a profile that
    /// does not load, a node the site does not type, a node type with GPUs, whose watts
    /// the learning takes only from runs that left them idle) leaves the job to its
    /// monitor policy: a sample is never worth failing a job over.
    fn clock_sample(
        &self,
        site: &Site,
        req: &OpenJob,
        pr: &PlanRequest,
        app: &AppState,
        base: &Proposal,
    ) -> Option<Proposal> {
        let s = site.power.sample_clocks?;
        let name = req.profile.as_deref()?;
        if !super::clock_sample::picked(&s, req.job_id) {
            return None;
        }
        let policy = self.policies.get(&pr.policy)?;
        let limits = greenup::plan::limits(site, policy, pr).ok()?;
        let nodes: Vec<(&str, &greenup::model::NodeType)> = req
            .nodes
            .iter()
            .map(|n| Some((n.as_str(), site.node_type_of(n)?)))
            .collect::<Option<_>>()?;
        if nodes
            .iter()
            .any(|(_, t)| site.gpu_types.get(&t.name).is_some_and(|g| g.count > 0))
        {
            return None;
        }
        let loaded = match self.profile(site, name) {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(job_id = req.job_id, error = %e.message, "no clock sample");
                return None;
            }
        };
        let sample = super::clock_sample::choose(&nodes, &s, &limits, app.max_freq_ghz, |c| {
            loaded.predictor.predict(c).ok()
        })?;
        let plan = greenup::plan::fixed(
            policy,
            limits,
            pr.algorithm,
            &sample.config,
            &sample.predicted,
            &sample.baseline,
        );
        Some(Proposal {
            verdict: Verdict::Planned,
            reason: super::clock_sample::reason(&s, &sample),
            // The policy only records, but this run applies a plan: it is no measured
            // baseline, and nothing that learns from runs at f_max may take it for one.
            monitor: false,
            clock_sample: true,
            profile_version: Some(loaded.version.to_string()),
            reserve_w: plan.predicted.avg_power_w,
            plan: Some(plan),
            ..base.clone()
        })
    }

    /// Decide for `req` with `free_w` watts of budget left (`None`: no cap; 0 or less:
    /// none left). A request no plan can be made for becomes a refusal whose reason
    /// says why and what becomes of the job.
    pub fn decide_or_refuse(&self, site: &Site, req: &OpenJob, free_w: Option<f64>) -> Proposal {
        self.decide_or_refuse_with(site, req, free_w, &AppState::default())
    }

    /// [`Decider::decide_or_refuse`] knowing the application's history `app` (its
    /// measured baselines and any hold on the job's policy).
    pub fn decide_or_refuse_with(
        &self,
        site: &Site,
        req: &OpenJob,
        free_w: Option<f64>,
        app: &AppState,
    ) -> Proposal {
        self.decide_with(site, req, free_w, app)
            .unwrap_or_else(|e| {
                let granted = queue_grant_w(site, req);
                let free_w = granted.map(|g| g.0).or(free_w);
                let pr = Self::plan_request(site, req, min_cap(user_cap_w(req), free_w));
                Proposal {
                    verdict: Verdict::Refused,
                    reason: format!("{e}; {}", unmanaged_fate(site)),
                    policy: pr.policy.clone(),
                    monitor: false,
                    profile: req.profile.clone(),
                    profile_version: None,
                    power_cap_w: pr.power_cap_w.map(|c| c.max(Watts(0.0))),
                    plan: None,
                    reserve_w: granted.unwrap_or_else(|| unmanaged_w(site, req)),
                    inputs: serde_json::to_value(&pr).unwrap_or(serde_json::Value::Null),
                    baseline_sample: false,
                    clock_sample: false,
                    refusal: Some(e.code),
                    comm_dvfs: None,
                    floored: false,
                }
            })
    }

    /// Decide for `req` with `free_w` watts of budget left (`None`: no cap).
    pub fn decide(
        &self,
        site: &Site,
        req: &OpenJob,
        free_w: Option<f64>,
    ) -> Result<Proposal, ErrorReply> {
        self.decide_with(site, req, free_w, &AppState::default())
    }

    /// [`Decider::decide`] knowing the application's history `app`.
    pub fn decide_with(
        &self,
        site: &Site,
        req: &OpenJob,
        free_w: Option<f64>,
        app: &AppState,
    ) -> Result<Proposal, ErrorReply> {
        let granted = queue_grant_w(site, req);
        let p = self.decide_within(site, req, granted.map(|g| g.0).or(free_w), app)?;
        Ok(match granted {
            Some(g) => Proposal { reserve_w: g, ..p },
            None => p,
        })
    }

    /// [`Decider::decide_with`] under `free_w`, the watts the job may draw.
    fn decide_within(
        &self,
        site: &Site,
        req: &OpenJob,
        free_w: Option<f64>,
        app: &AppState,
    ) -> Result<Proposal, ErrorReply> {
        validate_options(req)?;
        let cap = min_cap(user_cap_w(req), free_w);
        let budget_binds = match (free_w, user_cap_w(req)) {
            (Some(f), Some(u)) => f < u,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let no_budget = free_w.is_some_and(|f| f <= 0.0);
        let pr = PlanRequest {
            max_freq_ghz: app.max_freq_ghz.map(Ghz),
            ..Self::plan_request(
                site,
                req,
                if no_budget {
                    Some(NO_BUDGET_PROBE_W)
                } else {
                    cap
                },
            )
        };
        let inputs = serde_json::to_value(&pr).unwrap_or(serde_json::Value::Null);
        let base = Proposal {
            verdict: Verdict::Unchanged,
            reason: String::new(),
            policy: pr.policy.clone(),
            monitor: self.policies.get(&pr.policy).is_some_and(|p| p.monitor),
            profile: req.profile.clone(),
            profile_version: None,
            power_cap_w: cap.map(|c| Watts(c.max(0.0))),
            plan: None,
            reserve_w: greenup::power::max_power_w(site, &req.nodes),
            inputs,
            baseline_sample: false,
            clock_sample: false,
            refusal: None,
            comm_dvfs: self.policies.get(&pr.policy).and_then(|p| p.comm_dvfs),
            floored: false,
        };
        // The flag is the rule, not the name: a site's own monitoring policy must not
        // pin every node at its maximum frequency either.
        if base.monitor {
            if let Some(sampled) = self.clock_sample(site, req, &pr, app, &base) {
                return Ok(sampled);
            }
            return Ok(Proposal {
                reason: format!("policy {} records only", pr.policy),
                ..base
            });
        }
        // The caps the plan will keep, merged once by the library: a held policy or a
        // baseline sample runs every node at f_max, and must keep them too.
        let limits = match self.policies.get(&pr.policy) {
            Some(p) => {
                greenup::plan::limits(site, p, &pr).map_err(|e| plan_failed(e.to_string()))?
            }
            // No such policy: planning refuses the job below, before any f_max run.
            None => greenup::optimize::Limits::default(),
        };
        if let Some(reason) = baseline::held(site, req, &pr.policy, app, &limits) {
            return Ok(Proposal {
                reason,
                monitor: true,
                ..base
            });
        }
        let Some((plan, floored, version)) = self.plan(site, req, &pr)? else {
            return Ok(Proposal {
                reason: "no profile: the job runs as submitted".into(),
                ..base
            });
        };
        let base = Proposal {
            profile_version: version,
            floored,
            ..base
        };
        if (plan.feasible && !no_budget) || !budget_binds {
            if let Some(reason) = baseline::sampled(site, req, &limits, &plan, app) {
                return Ok(Proposal {
                    reason,
                    monitor: true,
                    baseline_sample: true,
                    plan: Some(plan),
                    ..base
                });
            }
            let reserve_w = plan.predicted.avg_power_w;
            let reason = plan.reason.clone();
            return Ok(Proposal {
                verdict: Verdict::Planned,
                reason,
                reserve_w,
                plan: Some(plan),
                ..base
            });
        }
        let left = free_w.unwrap_or(0.0);
        let budget = if no_budget {
            format!("no power budget is left ({left:.0} W free)")
        } else {
            format!("only {left:.0} W of the power budget is left")
        };
        // Under the queue the job already holds its watts in Slurm: it never runs over
        // them and is never refused for power, so it runs at its lowest power, each node
        // held to its share by its RAPL limit.
        if let Some(g) = queue_grant_w(site, req) {
            return Ok(Proposal {
                verdict: Verdict::BudgetLimited,
                reason: format!(
                    "Slurm granted {:.0} W and no plan fits them; running at the lowest power, each node held to its share in hardware",
                    g.0
                ),
                reserve_w: plan.predicted.avg_power_w,
                plan: Some(plan),
                ..base
            });
        }
        match site.daemon.over_budget {
            OverBudget::Lowest => Ok(Proposal {
                verdict: Verdict::BudgetLimited,
                reason: format!("{budget}; running at the lowest power"),
                reserve_w: plan.predicted.avg_power_w,
                plan: Some(plan),
                ..base
            }),
            OverBudget::Unchanged => Ok(Proposal {
                verdict: Verdict::Unchanged,
                reason: format!("{budget}; the site runs such jobs unchanged"),
                reserve_w: plan.baseline.avg_power_w,
                plan: Some(plan),
                ..base
            }),
            OverBudget::Refuse => Ok(Proposal {
                verdict: Verdict::Refused,
                reason: format!(
                    "{budget} and the site refuses jobs that do not fit; {}",
                    unmanaged_fate(site)
                ),
                reserve_w: unmanaged_w(site, req),
                plan: Some(plan),
                refusal: Some(ErrorCode::OverBudget),
                ..base
            }),
        }
    }
}

/// A request field that is out of range.
pub fn bad_field(field: &str, value: impl std::fmt::Display, expected: &str) -> ErrorReply {
    ErrorReply::new(
        ErrorCode::BadRequest,
        format!("request field {field}: invalid value '{value}': expected {expected}"),
    )
}

/// Fill in `nodes` from a request's compressed `nodelist`, expanding at most the site's
/// `daemon.max_job_nodes` names (a longer list is refused before it is built), then
/// check the request with [`validate_open`]. A request naming its nodes both ways is
/// refused: the two could disagree.
pub fn expand_open(req: &mut OpenJob, limits: &DaemonLimits) -> Result<(), ErrorReply> {
    if let Some(list) = &req.nodelist {
        if !req.nodes.is_empty() {
            return Err(bad_field(
                "nodelist",
                list,
                "either nodelist or nodes, not both",
            ));
        }
        let max = limits.max_job_nodes;
        req.nodes = greenup::hostlist::expand_at_most(list, max).map_err(|e| {
            bad_field(
                "nodelist",
                e,
                &format!(
                    "a Slurm hostlist of at most {max} nodes (the site's daemon.max_job_nodes)"
                ),
            )
        })?;
    }
    validate_open(req, limits)
}

/// Check the numbers and names in an open request before deciding: at least one node,
/// at most the site's `daemon.max_job_nodes`, each named once.
pub fn validate_open(req: &OpenJob, limits: &DaemonLimits) -> Result<(), ErrorReply> {
    if req.nodes.is_empty() {
        return Err(bad_field(
            "nodes",
            "[]",
            "the job's node names, at least one",
        ));
    }
    if req.nodes.len() > limits.max_job_nodes {
        return Err(bad_field(
            "nodes",
            format!("{} nodes", req.nodes.len()),
            &format!(
                "at most {} nodes (the site's daemon.max_job_nodes)",
                limits.max_job_nodes
            ),
        ));
    }
    if let Some(n) = req.nodes.iter().find(|n| !greenup::names::is_node(n)) {
        return Err(bad_field("nodes", n, greenup::names::NODE_RULE));
    }
    let mut seen = std::collections::HashSet::with_capacity(req.nodes.len());
    if let Some(n) = req.nodes.iter().find(|n| !seen.insert(n.as_str())) {
        return Err(bad_field(
            "nodes",
            n,
            "each of the job's nodes once (this one is named twice)",
        ));
    }
    Ok(())
}

/// Check what the job's submitter chose (caps, node minimum). A submission that skipped
/// sbatch's checks reaches greenupd with these unchecked, so a failure here is a
/// refusal on record, not a request error.
fn validate_options(req: &OpenJob) -> Result<(), ErrorReply> {
    for (field, v) in [
        ("time_limit_s", req.time_limit.seconds()),
        ("energy_cap_j", req.energy_cap_j.map(|j| j.0)),
        ("power_cap_w", user_cap_w(req)),
    ] {
        if let Err(e) = greenup::plan::check_cap(field, v) {
            return Err(bad_field(field, e.value.unwrap_or_default(), &e.expected));
        }
    }
    if let Some(m) = req.min_nodes
        && (m == 0 || m > req.nodes.len())
    {
        return Err(bad_field(
            "min_nodes",
            m,
            &format!("1 to {} (the number of nodes)", req.nodes.len()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup::model::measured_power::{MeasuredClock, PowerCurve, PowerSource, overlay};
    use std::collections::BTreeMap;

    const SITE: &str = "\
node_types:
  epyc:
    frequencies: [1.5, 2.2, 2.5]
    power: {dynamic_w: 190, static_w: 77}
  xeon:
    frequencies: [1.2, 2.0, 2.4]
    power: {dynamic_w: 144, static_w: 48, gamma: 2}
nodes:
  epyc: \"e[1-2]\"
  xeon: \"x[1-2]\"
";

    fn plan(nodes: &[(&str, &str, f64)]) -> Plan {
        let nodes: Vec<serde_json::Value> = nodes
            .iter()
            .map(|(n, t, f)| serde_json::json!({"name": n, "type": t, "freq_ghz": f}))
            .collect();
        let est = serde_json::json!({"time_s": 100.0, "energy_j": 1.0e5, "avg_power_w": 1.0e3});
        serde_json::from_value(serde_json::json!({
            "policy": "min-energy", "feasible": true, "reason": "", "node_count": nodes.len(),
            "nodes": nodes, "predicted": est, "baseline": est, "objective": 1.0,
            "search": {"algorithm": "exact", "candidates": 1, "elapsed_us": 1}
        }))
        .expect("a valid plan")
    }

    fn clock(freq_ghz: f64, busy_w: f64, runs: usize) -> MeasuredClock {
        MeasuredClock {
            freq_ghz,
            busy_w,
            runs,
            samples: runs,
        }
    }

    #[test]
    fn a_decision_records_the_learned_watts_it_planned_with_and_the_sites_elsewhere() {
        let mut site = greenup::site::parse("greenup.yaml", SITE).unwrap();
        // As greenupd lays what epyc's nodes measured over the site's model.
        let curves = BTreeMap::from([(
            "epyc".to_string(),
            PowerCurve {
                clocks: vec![clock(1.5, 173.0, 3), clock(2.5, 260.0, 5)],
                floor_below: false,
                // e2 draws 4 % more than its type.
                nodes: BTreeMap::from([(
                    "e2".to_string(),
                    greenup::model::measured_power::NodeFactor {
                        factor: 1.04,
                        runs: 3,
                    },
                )]),
            },
        )]);
        site.node_types = overlay(&site.node_types, &curves);
        let p = plan(&[
            ("e1", "epyc", 2.5),
            ("e2", "epyc", 2.2),
            ("x1", "xeon", 2.0),
            ("x2", "xeon", 2.0),
        ]);

        let w = watts_of(&site, Verdict::Planned, Some(&p), false);
        // One entry per type and clock, by type then clock: x1 and x2 make one.
        let keys: Vec<(&str, f64)> = w
            .iter()
            .map(|w| (w.node_type.as_str(), w.freq_ghz.0))
            .collect();
        assert_eq!(keys, [("epyc", 2.2), ("epyc", 2.5), ("xeon", 2.0)]);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        // 2.2 GHz lies 0.7 of the way from 1.5 to 2.5: 173 + 0.7 x (260 - 173) = 233.9 W.
        assert!(close(w[0].busy_w.0, 233.9), "{:?}", w[0]);
        assert_eq!(w[0].source, PowerSource::Interpolated);
        // The one node with its own factor is named at its type and clock, no other.
        assert_eq!(
            w[0].node_factors,
            BTreeMap::from([("e2".to_string(), 1.04)])
        );
        assert!(w[1].node_factors.is_empty() && w[2].node_factors.is_empty());
        // Measured at 2.5 GHz in 5 runs: 260 W. Idle watts stay the site's 77 W.
        assert!(
            close(w[1].busy_w.0, 260.0) && close(w[1].idle_w.0, 77.0),
            "{:?}",
            w[1]
        );
        assert_eq!(w[1].source, PowerSource::Measured { runs: 5 });
        // xeon has no curve: the site's 48 + 144 x (2.0 / 2.4)^2 = 48 + 100 = 148 W.
        assert!(
            close(w[2].busy_w.0, 148.0) && close(w[2].idle_w.0, 48.0),
            "{:?}",
            w[2]
        );
        assert_eq!(w[2].source, PowerSource::Site);

        assert_eq!(watts_of(&site, Verdict::BudgetLimited, Some(&p), false), w);
        // A job that runs unchanged or is refused applies no plan: no watts to show.
        assert!(watts_of(&site, Verdict::Unchanged, Some(&p), false).is_empty());
        assert!(watts_of(&site, Verdict::Refused, Some(&p), false).is_empty());
        assert!(watts_of(&site, Verdict::Planned, None, false).is_empty());
    }
}
