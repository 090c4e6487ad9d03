//! Opening and closing jobs: one decision per job however many nodes ask, its
//! reservation in the ledger, and the store's record of both.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::OnceCell;

use super::budget::Admitted;
use super::refine::{refine_after_close, settle_then_refine};
use super::{Ctx, Shared, lock, store_error};
use crate::baseline::AppState;
use crate::decide::{Proposal, bad_field, expand_open};
use crate::ledger::Ledger;
use crate::run::{self, Run};
use crate::store::sqlite::now;
use crate::store::{Applied, Change, NewJob};
use greenup::budget::AtAdmission;
use greenup::budget::book::Charge;
use greenup::power::split::with_node_type;
use greenup_core::quantity::Watts;
use greenup_proto::protocol::{
    Decision, ErrorCode, ErrorReply, JobEnd, JobState, NodeGears, NodeSettings, OpenJob, Reply,
    Verdict,
};

/// What a request comes to: the reply, or the error the caller reads.
pub(super) type Outcome = Result<Reply, ErrorReply>;

/// A job whose decision is being made, shared by every node that asks meanwhile.
pub(super) type Pending = Arc<OnceCell<Arc<JobView>>>;

/// Decisions kept in memory so the other nodes of a job are answered without the store.
const RECENT: usize = 1024;

/// A decided job as its nodes are answered: the decision with its nodes indexed once,
/// so each node's settings cost a lookup however large the job is.
pub(super) struct JobView {
    /// The job's decision.
    pub(super) decision: Decision,
    /// The job's owner.
    pub(super) uid: u32,
    /// The compressed hostlist the job was decided with, when it came as one.
    nodelist: Option<String>,
    /// The allocated nodes, expanded, in Slurm order.
    nodes: Vec<String>,
    /// Each allocated node's position in `nodes`.
    index: HashMap<String, usize>,
    /// Each planned node's gears.
    planned: HashMap<String, NodeGears>,
    /// The used nodes as a hostlist, when the plan uses fewer than the job holds.
    used_nodes: Option<String>,
    /// The job's partition.
    pub(super) partition: Option<String>,
    /// The run decided: Slurm's restart count, when its plugin gave it.
    restart_count: Option<u32>,
}

impl JobView {
    /// Index `decision` for the job opened by `req` (its `nodes` expanded).
    pub(super) fn new(decision: Decision, req: &OpenJob) -> JobView {
        let nodes = req.nodes.clone();
        let index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        let plan = decision.plan.as_ref();
        let planned: HashMap<String, NodeGears> = plan
            .map(|p| {
                p.nodes
                    .iter()
                    .map(|n| (n.name.clone(), NodeGears::of(n)))
                    .collect()
            })
            .unwrap_or_default();
        let used_nodes = plan
            .filter(|p| !p.nodes.is_empty() && p.nodes.len() < nodes.len())
            .map(|p| {
                let names: Vec<String> = p.nodes.iter().map(|n| n.name.clone()).collect();
                greenup::hostlist::compress(&names)
            });
        JobView {
            decision,
            uid: req.uid,
            nodelist: req.nodelist.clone(),
            nodes,
            index,
            planned,
            used_nodes,
            partition: req.partition.clone(),
            restart_count: req.restart_count,
        }
    }

    /// How the run `req` asks for stands to the run decided ([`run::compare`]).
    fn run_of(&self, req: &OpenJob, limits: &greenup::site::DaemonLimits) -> Run {
        run::compare(self.restart_count, req.restart_count, || {
            if req.nodes.is_empty() {
                req.nodelist
                    .as_deref()
                    .is_some_and(|l| self.is_nodelist(l, limits))
            } else {
                req.nodes == self.nodes
            }
        })
    }

    /// Whether `nodelist` names the job's nodes. Every node of a job gets the same
    /// SLURM_JOB_NODELIST: comparing the text is the common case; another spelling is
    /// expanded and compared name by name.
    fn is_nodelist(&self, nodelist: &str, limits: &greenup::site::DaemonLimits) -> bool {
        self.nodelist.as_deref() == Some(nodelist)
            || greenup::hostlist::expand_at_most(nodelist, limits.max_job_nodes)
                .is_ok_and(|names| names == self.nodes)
    }

    /// Whether `node` is one of the job's allocated nodes.
    pub(super) fn has_node(&self, node: &str) -> bool {
        self.index.contains_key(node)
    }

    /// The job's nodes as one short text for messages.
    pub(super) fn nodes_text(&self) -> String {
        self.nodelist_text()
    }

    /// Whether the job's plan runs on `node` (every node runs without a plan): the nodes
    /// its grant is shared among. Constant time: asked on every power report.
    pub(super) fn uses(&self, node: &str) -> bool {
        if self.decision.plan.is_none() {
            self.index.contains_key(node)
        } else {
            self.planned.contains_key(node)
        }
    }

    /// How many nodes the job's plan runs on.
    pub(super) fn used_count(&self) -> usize {
        if self.decision.plan.is_none() {
            self.nodes.len()
        } else {
            self.planned.len()
        }
    }

    /// The nodes the job's plan runs on, in Slurm order (linear in the job's size).
    pub(super) fn used(&self) -> Vec<&str> {
        self.nodes
            .iter()
            .map(String::as_str)
            .filter(|n| self.uses(n))
            .collect()
    }

    /// Each used node's long-term limit were the job granted `granted_w` instead, by the
    /// one rule that set them at its start ([`with_node_type`]). None when
    /// the job has no grant, or a node's share would not be its CPU package's alone (a
    /// GPU node: its GPUs' limits are not lowered while it runs).
    pub(super) fn limits_under(
        &self,
        site: &greenup::site::Site,
        granted_w: Watts,
    ) -> Option<Vec<(String, Watts)>> {
        let mut d = self.decision.clone();
        d.grant.as_mut()?.granted_w = granted_w;
        let n = self.nodes.len();
        self.used()
            .into_iter()
            .map(|node| {
                let s = with_node_type(
                    NodeSettings::of(&d, node, self.planned.get(node).copied(), n, None),
                    site,
                );
                match (s.power_limit_w, s.gpu_power) {
                    (Some(w), None) => Some((node.to_string(), w)),
                    _ => None,
                }
            })
            .collect()
    }

    /// `node`'s settings, for a node that names the job's nodes as `nodelist`: a
    /// conflict when that is not the job's list or the node is not in it.
    fn settings(
        &self,
        node: &str,
        nodelist: &str,
        limits: &greenup::site::DaemonLimits,
    ) -> Result<NodeSettings, ErrorReply> {
        let job_id = self.decision.job_id;
        if !self.is_nodelist(nodelist, limits) {
            return Err(ErrorReply::new(
                ErrorCode::Conflict,
                format!(
                    "job {job_id} was decided for nodes {}, not '{nodelist}'",
                    self.nodelist_text()
                ),
            ));
        }
        let Some(&i) = self.index.get(node) else {
            return Err(ErrorReply::new(
                ErrorCode::Conflict,
                format!("node '{node}' is not one of job {job_id}'s nodes"),
            ));
        };
        let used_nodes = self.used_nodes.clone().filter(|_| i == 0);
        Ok(NodeSettings::of(
            &self.decision,
            node,
            self.planned.get(node).copied(),
            self.nodes.len(),
            used_nodes,
        ))
    }

    /// The job's nodes as one short text for messages.
    fn nodelist_text(&self) -> String {
        self.nodelist
            .clone()
            .unwrap_or_else(|| greenup::hostlist::compress(&self.nodes))
    }
}

/// The last [`RECENT`] decisions, oldest first out.
#[derive(Default)]
pub(super) struct Recent {
    pub(super) by_job: HashMap<u64, Arc<JobView>>,
    order: std::collections::VecDeque<u64>,
}

impl Recent {
    fn insert(&mut self, v: Arc<JobView>) {
        let id = v.decision.job_id;
        if self.by_job.insert(id, v).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > RECENT {
            if let Some(old) = self.order.pop_front() {
                self.by_job.remove(&old);
            }
        }
    }

    fn remove(&mut self, id: u64) {
        if self.by_job.remove(&id).is_some() {
            self.order.retain(|j| *j != id);
        }
    }
}

/// The job's decision, made once (by the first request) however many ask at once.
/// `req` is completed (its `nodes` expanded from a `nodelist`, then checked) only by
/// the request that decides: the others wait for its decision and expand nothing.
/// A request of a run after the one decided (Slurm requeued the job) ends that run and
/// has the job decided again, for its own nodes.
async fn decided(
    shared: &Arc<Shared>,
    ctx: Arc<Ctx>,
    mut req: OpenJob,
) -> Result<Arc<JobView>, ErrorReply> {
    let job_id = req.job_id;
    let limits = ctx.site.daemon.limits;
    if let Some(v) = lock(&shared.recent).by_job.get(&job_id)
        && v.run_of(&req, &limits) == Run::Same
    {
        return Ok(v.clone());
    }
    // Every node that asks while the decision is being made waits for that one
    // decision. A job decided earlier (before a restart, or pushed out of `recent`)
    // is decided again, and the store then returns the decision it holds.
    let cell = lock(&shared.deciding).entry(job_id).or_default().clone();
    let result = cell
        .get_or_try_init(|| async {
            // Under the cell, so that only one of the new run's nodes ends the old run.
            if let Some(held) = held_run(shared, job_id).await? {
                match held.run_of(&req, &limits) {
                    Run::Same => return Ok(held),
                    Run::Earlier => return Err(earlier_run(&held, &req)),
                    Run::Later => end_run(shared, &held, &req).await?,
                }
            }
            // open_job requests come here checked; a node's start_node names a hostlist.
            if req.nodes.is_empty() {
                expand_open(&mut req, &ctx.site.daemon.limits)?;
            }
            let d = decide_and_store(shared, ctx.clone(), req.clone()).await?;
            Ok(Arc::new(JobView::new(d, &req)))
        })
        .await
        .cloned();
    if let Ok(v) = &result {
        lock(&shared.recent).insert(v.clone());
    }
    let mut deciding = lock(&shared.deciding);
    if deciding.get(&job_id).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
        deciding.remove(&job_id);
    }
    drop(deciding);
    // A request that waited on the decision of another run is not answered with it.
    let v = result?;
    match v.run_of(&req, &limits) {
        Run::Same => Ok(v),
        _ => Err(earlier_run(&v, &req)),
    }
}

/// The run greenupd holds for `job_id`: the decision in memory, or, for a job that holds
/// a reservation (so is open) but was pushed out of memory or decided before a
/// restart, the store's.
async fn held_run(shared: &Arc<Shared>, job_id: u64) -> Result<Option<Arc<JobView>>, ErrorReply> {
    if let Some(v) = lock(&shared.recent).by_job.get(&job_id) {
        return Ok(Some(v.clone()));
    }
    if !lock(&shared.ledger).holds(job_id) {
        return Ok(None);
    }
    let rec = shared
        .store
        .read(move |s| s.job(job_id))
        .await
        .map_err(store_error)?;
    Ok(rec
        .filter(|r| r.state == JobState::Open)
        .map(|r| Arc::new(JobView::new(r.decision, &r.request))))
}

/// The refusal of a request whose run is not the one `held` decided.
fn earlier_run(held: &JobView, req: &OpenJob) -> ErrorReply {
    ErrorReply::new(
        ErrorCode::Conflict,
        format!(
            "job {} runs on {} ({}): a request of its run with {} comes too late",
            req.job_id,
            held.nodes_text(),
            run::describe(held.restart_count),
            run::describe(req.restart_count)
        ),
    )
}

/// End `held`, the run before `req`'s: as a close would (its reservation released, its
/// budget charges settled, its power reports forgotten), as reclaimed if its close
/// never came. The store keeps it as an earlier run of the job.
async fn end_run(shared: &Arc<Shared>, held: &JobView, req: &OpenJob) -> Result<(), ErrorReply> {
    let job_id = req.job_id;
    tracing::info!(
        job_id,
        nodes = %held.nodes_text(),
        "job {job_id} runs again (requeued, {}): its run on {} ends, and the job is decided again",
        run::describe(req.restart_count),
        held.nodes_text()
    );
    close_job(
        shared,
        job_id,
        JobState::Reclaimed,
        None,
        held.restart_count,
    )
    .await
    .map(|_| ())
}

/// open_job: the whole decision (its size grows with the job's).
pub(super) async fn open_job(
    shared: &Arc<Shared>,
    ctx: Arc<Ctx>,
    req: OpenJob,
) -> Result<Decision, ErrorReply> {
    Ok(decided(shared, ctx, req).await?.decision.clone())
}

/// start_node: one node's settings, the job decided by the first node to ask.
pub(super) async fn start_node(
    shared: &Arc<Shared>,
    ctx: Arc<Ctx>,
    node: String,
    req: OpenJob,
) -> Result<NodeSettings, ErrorReply> {
    let Some(list) = req.nodelist.clone().filter(|_| req.nodes.is_empty()) else {
        return Err(bad_field(
            "job.nodelist",
            "(none)",
            "the job's nodes as a Slurm hostlist (SLURM_JOB_NODELIST), without nodes",
        ));
    };
    let limits = ctx.site.daemon.limits;
    let site = ctx.clone();
    let view = decided(shared, ctx, req).await?;
    Ok(with_node_type(
        view.settings(&node, &list, &limits)?,
        &site.site,
    ))
}

/// `node`'s settings from a job's decision kept in memory, if it is there.
pub(super) fn recent_settings(
    shared: &Shared,
    job_id: u64,
    node: &str,
) -> Option<(u32, NodeSettings)> {
    let recent = lock(&shared.recent);
    let v = recent.by_job.get(&job_id)?;
    let s = NodeSettings::of(
        &v.decision,
        node,
        v.planned.get(node).copied(),
        v.nodes.len(),
        None,
    );
    Some((v.uid, s))
}

/// What the decision needs from the application's history: only asked of the store
/// when the site samples baselines and the job names a profile. A store that cannot
/// answer leaves the job to `baseline.fraction` and its policy (no hold), and says so.
async fn app_state(shared: &Arc<Shared>, ctx: &Ctx, req: &OpenJob) -> AppState {
    let (Some(_), Some(profile)) = (&ctx.site.baseline, req.profile.clone()) else {
        return AppState::default();
    };
    let policy = req
        .policy
        .clone()
        .unwrap_or_else(|| ctx.site.default_policy.clone());
    match shared
        .store
        .read(move |s| s.app_history(&profile, &policy))
        .await
    {
        Ok((baselines, hold)) => AppState {
            baselines,
            hold,
            ..AppState::default()
        },
        Err(e) => {
            tracing::warn!(job_id = req.job_id, error = %e, "application history unread: this job is sampled by baseline.fraction alone and no hold applies");
            AppState {
                baselines: u32::MAX,
                ..AppState::default()
            }
        }
    }
}

/// The in-job guard's terms for the job decided `p`: asked of the store only when the
/// job's policy promises a `max_slowdown`, the verdict applies a plan and the job names
/// a profile. A store that cannot answer leaves the guard off for want of a baseline.
/// With the terms, which baseline runs their rate came from.
async fn guard_terms(
    shared: &Arc<Shared>,
    ctx: &Ctx,
    req: &OpenJob,
    p: &crate::decide::Proposal,
) -> Option<(
    greenup::comm::GuardTerms,
    Option<crate::baseline::RateBasis>,
)> {
    let max_slowdown = ctx.decider.max_slowdown(&p.policy)?;
    if !p.verdict.applies_plan() {
        return None;
    }
    let nodes = match req.profile.clone() {
        None => Vec::new(),
        Some(profile) => shared
            .store
            .read(move |s| s.baseline_nodes(&profile))
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(job_id = req.job_id, error = %e, "baselines unread: no in-job guard");
                Vec::new()
            }),
    };
    let type_of = |n: &str| ctx.site.nodes.get(n).map(String::as_str);
    let job_types = req.nodes.iter().filter_map(|n| type_of(n)).collect();
    let rate = crate::baseline::baseline_rate(&nodes, &job_types, type_of);
    let basis = rate.as_ref().map(|r| r.2);
    let written = p
        .profile_version
        .as_deref()
        .map(|v| written_version(&ctx.site, p.profile.as_deref(), v));
    let terms = crate::baseline::guard_terms(
        Some(max_slowdown),
        p.verdict,
        written.as_deref(),
        rate.map(|(r, v, _)| (r, v)),
    )?;
    Some((terms, basis))
}

/// The version of `name` the admin (or `profile learn`) wrote that `version` refines, or
/// `version` itself when it is no refinement. Refinement fits the same program's
/// numbers again after every run, so a baseline measured under an earlier refinement
/// measured the same program; only a newly written file may describe another.
fn written_version(site: &greenup::site::Site, name: Option<&str>, version: &str) -> String {
    let (Some(name), Ok(mut v)) = (name, version.parse::<u64>()) else {
        return version.to_string();
    };
    let refined = greenup::profile::versions::Versions::for_store(&site.daemon.store)
        .list(name)
        .unwrap_or_default();
    while v > 1 && refined.binary_search(&v).is_ok() {
        v -= 1;
    }
    v.to_string()
}

/// What a job is decided on, gathered before anything is decided.
struct Facts {
    /// The request, its time limit completed (from slurmctld where the node could not say).
    req: OpenJob,
    /// When it is decided, Unix seconds.
    at: i64,
    /// When its reservation lapses if no close comes: its time limit and the grace.
    expires_at: i64,
    /// What the store says of its application: baselines taken, a hold.
    app: AppState,
}

/// A job's start in one pass, each step a function below in this order: gather the
/// facts, decide under the power ledger, let the energy budgets act, explain the
/// decision (grant, watts, guard), and record it.
async fn decide_and_store(
    shared: &Arc<Shared>,
    ctx: Arc<Ctx>,
    req: OpenJob,
) -> Result<Decision, ErrorReply> {
    shared
        .decisions
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let facts = gather(shared, &ctx, req).await;
    let p = decide_under_ledger(shared, &ctx, &facts).await?;
    let admitted = admit_budgets(shared, &ctx, &facts, p);
    let (decision, inputs) =
        explain(shared, &ctx, &facts, admitted.proposal, admitted.states).await;
    record(shared, facts, decision, inputs, admitted.charges).await
}

/// The facts a job is decided on: its time limit, when its reservation lapses, and its
/// application's history.
async fn gather(shared: &Arc<Shared>, ctx: &Ctx, req: OpenJob) -> Facts {
    let req = crate::time_limit::complete(
        req,
        shared.opts.slurm_check,
        shared.opts.slurm_bin_dir.clone(),
        &ctx.site,
    )
    .await;
    let at = now();
    let expires_at = at
        .saturating_add(req.time_limit.hold_s() as i64)
        .saturating_add(ctx.site.daemon.grace_s as i64);
    let app = app_state(shared, ctx, &req).await;
    Facts {
        req,
        at,
        expires_at,
        app,
    }
}

/// Reserve `p`'s watts for the job in `ledger` when its verdict holds any.
fn hold(ledger: &mut Ledger, f: &Facts, p: &Proposal) {
    if p.verdict.holds_reservation(p.reserve_w) {
        let part = f.req.partition.as_deref();
        ledger.reserve(f.req.job_id, part, p.reserve_w, f.expires_at, f.at);
    }
}

/// Decide under the power ledger: plan outside its lock (planning is the costly part),
/// then reserve under it. If the power left shrank meanwhile past the plan, plan again;
/// after a few tries, plan under the lock so that the job cannot starve.
async fn decide_under_ledger(
    shared: &Arc<Shared>,
    ctx: &Arc<Ctx>,
    f: &Facts,
) -> Result<Proposal, ErrorReply> {
    let part = f.req.partition.as_deref();
    for _ in 0..3 {
        let free = lock(&shared.ledger).free_w(part);
        let free_w = free.map(|w| w.0);
        let (ctx2, req2, app2) = (ctx.clone(), f.req.clone(), f.app.clone());
        let p = tokio::task::spawn_blocking(move || {
            ctx2.decider
                .decide_or_refuse_with(&ctx2.site, &req2, free_w, &app2)
        })
        .await
        .map_err(|e| ErrorReply::new(ErrorCode::Internal, format!("decision task failed: {e}")))?;
        let mut ledger = lock(&shared.ledger);
        let shrank_past_it = match (free, ledger.free_w(part)) {
            (Some(then), Some(now)) => now < then && p.reserve_w > now,
            _ => false,
        };
        if !shrank_past_it {
            hold(&mut ledger, f, &p);
            return Ok(p);
        }
    }
    let mut ledger = lock(&shared.ledger);
    let free_w = ledger.free_w(part).map(|w| w.0);
    let p = ctx
        .decider
        .decide_or_refuse_with(&ctx.site, &f.req, free_w, &f.app);
    hold(&mut ledger, f, &p);
    Ok(p)
}

/// The energy budgets take their turn once the power ledger has: a level's action may
/// decide the job again, and its reservation follows the final decision.
fn admit_budgets(shared: &Arc<Shared>, ctx: &Ctx, f: &Facts, p: Proposal) -> Admitted {
    let (held_w, holds) = (p.reserve_w, p.verdict.holds_reservation(p.reserve_w));
    let free_before = lock(&shared.ledger)
        .free_w(f.req.partition.as_deref())
        .map(|free| if holds { free + held_w } else { free })
        .map(|w| w.0);
    let admitted = super::budget::admit(shared, ctx, &f.req, p, free_before, f.at);
    let p = &admitted.proposal;
    if (p.reserve_w, p.verdict.holds_reservation(p.reserve_w)) != (held_w, holds) {
        let mut ledger = lock(&shared.ledger);
        ledger.release(f.req.job_id);
        hold(&mut ledger, f, p);
    }
    admitted
}

/// The decision as it is stored and sent: the proposal with the job's grant, its watts
/// and the in-job guard's terms (whose reason joins the proposal's); and the plan
/// request the store keeps beside it.
async fn explain(
    shared: &Arc<Shared>,
    ctx: &Ctx,
    f: &Facts,
    p: Proposal,
    budgets: Vec<AtAdmission>,
) -> (Decision, serde_json::Value) {
    let grant = crate::decide::grant_of(&ctx.site, &f.req, p.verdict, p.plan.as_ref());
    let watts = crate::decide::watts_of(&ctx.site, p.verdict, p.plan.as_ref(), p.floored);
    let guard = guard_terms(shared, ctx, &f.req, &p).await;
    let reason = match &guard {
        Some((t, b)) if p.reason.is_empty() => crate::baseline::guard_reason(t, *b),
        Some((t, b)) => format!("{}; {}", p.reason, crate::baseline::guard_reason(t, *b)),
        None => p.reason,
    };
    let decision = Decision {
        job_id: f.req.job_id,
        verdict: p.verdict,
        reason,
        policy: p.policy,
        monitor: p.monitor,
        profile: p.profile,
        profile_version: p.profile_version,
        power_cap_w: p.power_cap_w,
        reserved_w: p.reserve_w,
        plan: p.plan,
        decided_at: f.at,
        baseline_sample: p.baseline_sample,
        clock_sample: p.clock_sample,
        refusal: p.refusal,
        budgets,
        comm_dvfs: p.comm_dvfs,
        grant,
        guard: guard.map(|(t, _)| t),
        watts,
    };
    (decision, p.inputs)
}

/// Store the job with its decision. A job stored before (greenupd restarted, or the job
/// is closed already) keeps the decision stored then, and the ledger and the budgets
/// follow that one; a job not stored holds nothing.
async fn record(
    shared: &Arc<Shared>,
    f: Facts,
    decision: Decision,
    inputs: serde_json::Value,
    charges: Vec<Charge>,
) -> Result<Decision, ErrorReply> {
    let job_id = f.req.job_id;
    let partition = f.req.partition.clone();
    let change = Change::Open(Box::new(NewJob {
        request: f.req,
        decision,
        inputs,
        expires_at: f.expires_at,
        charges,
    }));
    let failed = |e: ErrorReply| {
        lock(&shared.ledger).release(job_id);
        lock(&shared.budget).release(job_id);
        Err(e)
    };
    match shared.store.write(change).await {
        Ok(Applied::Opened {
            new: true,
            decision,
            ..
        }) => Ok(*decision),
        Ok(Applied::Opened {
            new: false,
            decision,
            state,
        }) => {
            {
                let mut ledger = lock(&shared.ledger);
                ledger.release(job_id);
                if state == JobState::Open && decision.holds_reservation() {
                    ledger.reserve(
                        job_id,
                        partition.as_deref(),
                        decision.reserved_w,
                        f.expires_at,
                        decision.decided_at,
                    );
                }
            }
            super::budget::restore(shared, job_id).await;
            Ok(*decision)
        }
        Ok(Applied::Stored { .. }) => failed(ErrorReply::new(
            ErrorCode::Internal,
            "store answered an open with a plain ack",
        )),
        Err(e) => failed(store_error(e)),
    }
}

/// Count the closed job's nodes that sent no outcome for it (`silent`), and say once
/// of each node that has stayed silent for `silent::SILENT_AFTER` jobs in a row.
async fn silent_nodes(shared: Arc<Shared>, job_id: u64) {
    let Ok(Some(rec)) = shared.store.read(move |s| s.job(job_id)).await else {
        return;
    };
    // Requeued meanwhile: the record is the next run's, whose nodes have not run yet.
    if rec.state == JobState::Open {
        return;
    }
    // A set: a job of thousands of nodes would otherwise scan its outcomes once a node.
    let reported: std::collections::HashSet<&str> =
        rec.outcomes.iter().map(|o| o.node.as_str()).collect();
    for node in lock(&shared.silent).closed(&rec.request.nodes, |n| reported.contains(n)) {
        tracing::warn!(
            node,
            job_id,
            jobs = super::silent::SILENT_AFTER,
            "node sent no outcome for its last jobs: is spank_greenup loaded there? (plugstack.conf's optional runs its jobs with no decision, clock or power limit)"
        );
    }
}

/// close_job: close run `restart_count` (the current one: `None`) of a job, or reclaim it.
pub(super) async fn close_job(
    shared: &Arc<Shared>,
    job_id: u64,
    state: JobState,
    end: Option<JobEnd>,
    restart_count: Option<u32>,
) -> Outcome {
    // A node's "completed" is a claim until Slurm's final record says so (see
    // `settle`); until then nothing may learn from the run.
    let settling =
        state == JobState::Closed && shared.opts.slurm_check && crate::settle::needs_settling(end);
    let stored_end = if settling { Some(JobEnd::Unknown) } else { end };
    let applied = shared
        .store
        .write(Change::Close {
            job_id,
            state,
            end: stored_end,
            at: now(),
            restart_count,
        })
        .await
        .map_err(store_error)?;
    lock(&shared.ledger).release(job_id);
    lock(&shared.live).forget_job(job_id);
    super::budget::settle(shared, job_id).await;
    if matches!(applied, Applied::Stored { new: true }) {
        tokio::spawn(silent_nodes(shared.clone(), job_id));
    }
    let (judged, app) = {
        let mut recent = lock(&shared.recent);
        let decision = recent.by_job.get(&job_id).map(|v| &v.decision);
        // A job its policy planned freely (not monitor, not a baseline or clock sample,
        // not held back by the budget) is evidence on how that policy does for its
        // application.
        let judged = decision.and_then(|d| {
            (d.verdict == Verdict::Planned && !d.monitor && !d.clock_sample)
                .then(|| d.profile.clone().map(|p| (p, d.policy.clone())))
                .flatten()
        });
        // A refused job ran without a plan: there is nothing to learn from it.
        let app = decision.map(|d| match d.verdict {
            Verdict::Refused => None,
            _ => d.profile.clone(),
        });
        recent.remove(job_id);
        (judged, app)
    };
    match applied {
        Applied::Stored { new } => {
            // A repeated close teaches nothing new; a reclaimed job has no outcome worth it.
            // A job decided without a profile has nothing to refine.
            if new && settling {
                let learn = app != Some(None);
                tokio::spawn(settle_then_refine(
                    shared.clone(),
                    job_id,
                    learn,
                    app.flatten(),
                ));
            } else if new && state == JobState::Closed && app != Some(None) {
                tokio::spawn(refine_after_close(shared.clone(), job_id, app.flatten()));
            }
            // A settled close relearns once Slurm confirms the completion.
            if new && !settling && state == JobState::Closed {
                tokio::spawn(super::power_curves::relearn(shared.clone()));
            }
            // Slurm's accounting takes the energy only where the site asked for it.
            let write_energy = shared
                .ctx
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .site
                .daemon
                .slurm_energy;
            if new && state == JobState::Closed && write_energy {
                tokio::spawn(super::slurm_energy::write_after_close(
                    shared.clone(),
                    job_id,
                ));
            }
            if let (true, Some((app, policy))) = (new, judged) {
                tokio::spawn(super::missed::judge_after_close(
                    shared.clone(),
                    app,
                    policy,
                ));
            }
            Ok(Reply::Stored { job_id, new })
        }
        Applied::Opened { .. } => Err(ErrorReply::new(
            ErrorCode::Internal,
            "store answered a close with an open",
        )),
    }
}
