//! Opening and closing jobs: one decision per job however many nodes ask, its
//! reservation in the ledger, and the store's record of both.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::OnceCell;

use super::handlers::Outcome;
use super::refine::{refine_after_close, settle_then_refine};
use super::{Ctx, Shared, lock, store_error};
use crate::daemon::protocol::{
    Decision, ErrorCode, ErrorReply, JobEnd, JobState, OpenJob, Reply, Verdict,
};
use crate::store::sqlite::now;
use crate::store::{Applied, Change, NewJob};

/// A job whose decision is being made, shared by every node that asks meanwhile.
pub(super) type Pending = Arc<OnceCell<Decision>>;

/// Decisions kept in memory so the other nodes of a job are answered without the store.
const RECENT: usize = 1024;

/// The last [`RECENT`] decisions, oldest first out.
#[derive(Default)]
pub(super) struct Recent {
    pub(super) by_job: HashMap<u64, Decision>,
    order: std::collections::VecDeque<u64>,
}

impl Recent {
    fn insert(&mut self, d: Decision) {
        let id = d.job_id;
        if self.by_job.insert(id, d).is_none() {
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

pub(super) async fn open_job(
    shared: &Arc<Shared>,
    ctx: Arc<Ctx>,
    req: OpenJob,
) -> Result<Decision, ErrorReply> {
    let job_id = req.job_id;
    if let Some(d) = lock(&shared.recent).by_job.get(&job_id) {
        return Ok(d.clone());
    }
    // Every node that asks while the decision is being made waits for that one
    // decision. A job decided earlier (before a restart, or pushed out of `recent`)
    // is decided again, and the store then returns the decision it holds.
    let cell = lock(&shared.deciding).entry(job_id).or_default().clone();
    let result = cell
        .get_or_try_init(|| decide_and_store(shared, ctx, req))
        .await
        .cloned();
    if let Ok(d) = &result {
        lock(&shared.recent).insert(d.clone());
    }
    let mut deciding = lock(&shared.deciding);
    if deciding.get(&job_id).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
        deciding.remove(&job_id);
    }
    result
}

async fn decide_and_store(
    shared: &Arc<Shared>,
    ctx: Arc<Ctx>,
    req: OpenJob,
) -> Result<Decision, ErrorReply> {
    let req = crate::daemon::time_limit::complete(
        req,
        shared.opts.slurm_check,
        shared.opts.slurm_bin_dir.clone(),
        &ctx.site,
    )
    .await;
    let at = now();
    let job_id = req.job_id;
    let limit_s = req
        .time_limit_s
        .unwrap_or(crate::daemon::time_limit::UNLIMITED_HOLD_S);
    let expires_at = at
        .saturating_add(limit_s as i64)
        .saturating_add(ctx.site.daemon.grace_s as i64);
    // Plan outside the ledger lock (planning is the costly part), then reserve under
    // it. If the budget shrank meanwhile and the plan no longer fits, plan again;
    // after a few tries, plan under the lock so the job cannot starve.
    let part = req.partition.clone();
    let mut tries = 0;
    let p = loop {
        tries += 1;
        let free = lock(&shared.ledger).free_w(part.as_deref());
        let p = if tries > 3 {
            let mut ledger = lock(&shared.ledger);
            let free = ledger.free_w(part.as_deref());
            let p = ctx.decider.decide_or_refuse(&ctx.site, &req, free);
            if p.verdict.holds_reservation(p.reserve_w) {
                ledger.reserve(job_id, part.as_deref(), p.reserve_w, expires_at, at);
            }
            break p;
        } else {
            let (ctx2, req2) = (ctx.clone(), req.clone());
            tokio::task::spawn_blocking(move || {
                ctx2.decider.decide_or_refuse(&ctx2.site, &req2, free)
            })
            .await
            .map_err(|e| {
                ErrorReply::new(ErrorCode::Internal, format!("decision task failed: {e}"))
            })?
        };
        let mut ledger = lock(&shared.ledger);
        let now_free = ledger.free_w(part.as_deref());
        let shrank_past_it = match (free, now_free) {
            (Some(then), Some(now)) => now < then && p.reserve_w > now,
            _ => false,
        };
        if shrank_past_it {
            continue;
        }
        if p.verdict.holds_reservation(p.reserve_w) {
            ledger.reserve(job_id, part.as_deref(), p.reserve_w, expires_at, at);
        }
        break p;
    };
    let decision = Decision {
        job_id,
        verdict: p.verdict,
        reason: p.reason,
        policy: p.policy,
        monitor: p.monitor,
        profile: p.profile,
        profile_version: p.profile_version,
        power_cap_w: p.power_cap_w,
        reserved_w: p.reserve_w,
        plan: p.plan,
        decided_at: at,
        refusal: p.refusal,
    };
    let inputs = p.inputs;
    let partition = req.partition.clone();
    let change = Change::Open(Box::new(NewJob {
        request: req,
        decision,
        inputs,
        expires_at,
    }));
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
            // Stored before (a restart, or a job closed already): the stored decision wins.
            let mut ledger = lock(&shared.ledger);
            ledger.release(job_id);
            if state == JobState::Open && decision.holds_reservation() {
                ledger.reserve(
                    job_id,
                    partition.as_deref(),
                    decision.reserved_w,
                    expires_at,
                    decision.decided_at,
                );
            }
            Ok(*decision)
        }
        Ok(Applied::Stored { .. }) => {
            lock(&shared.ledger).release(job_id);
            Err(ErrorReply::new(
                ErrorCode::Internal,
                "store answered an open with a plain ack",
            ))
        }
        Err(e) => {
            lock(&shared.ledger).release(job_id);
            Err(store_error(e))
        }
    }
}

pub(super) async fn close_job(
    shared: &Arc<Shared>,
    job_id: u64,
    state: JobState,
    end: Option<JobEnd>,
) -> Outcome {
    // A node's "completed" is a claim until Slurm's final record says so (see
    // `settle`); until then nothing may learn from the run.
    let settling = state == JobState::Closed
        && shared.opts.slurm_check
        && crate::daemon::settle::needs_settling(end);
    let stored_end = if settling { Some(JobEnd::Unknown) } else { end };
    let applied = shared
        .store
        .write(Change::Close {
            job_id,
            state,
            end: stored_end,
            at: now(),
        })
        .await
        .map_err(store_error)?;
    lock(&shared.ledger).release(job_id);
    let app = {
        let mut recent = lock(&shared.recent);
        // A refused job ran without a plan: there is nothing to learn from it.
        let app = recent.by_job.get(&job_id).map(|d| match d.verdict {
            Verdict::Refused => None,
            _ => d.profile.clone(),
        });
        recent.remove(job_id);
        app
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
            Ok(Reply::Stored { job_id, new })
        }
        Applied::Opened { .. } => Err(ErrorReply::new(
            ErrorCode::Internal,
            "store answered a close with an open",
        )),
    }
}
