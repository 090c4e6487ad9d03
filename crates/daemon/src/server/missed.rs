//! Holding a policy whose measured slowdown missed its target for an application, when
//! the site asks for it (`baseline.on_miss: monitor`). Judged after each close of a job
//! that applied the policy, from the application's newest closed runs.

use std::sync::Arc;

use super::Shared;
use crate::baseline;
use crate::store::Change;
use crate::store::sqlite::now;
use greenup::site::OnMiss;

/// Closed runs of an application a judgement reads: enough for several policies'
/// runs and their baselines, few enough to read on every close.
const JUDGE_FROM: u32 = 200;

/// Judge `policy` for `app` after one of its jobs closed, and hold it if it missed.
/// Failures are only logged: the next close judges again.
pub(super) async fn judge_after_close(shared: Arc<Shared>, app: String, policy: String) {
    let ctx = shared.ctx.read().unwrap_or_else(|e| e.into_inner()).clone();
    if ctx.site.baseline.map(|b| b.on_miss) != Some(OnMiss::Monitor) {
        return;
    }
    let Some(target) = ctx.decider.max_slowdown(&policy) else {
        return;
    };
    let (a, p) = (app.clone(), policy.clone());
    let read = shared
        .store
        .read(move |s| {
            if s.app_history(&a, &p)?.1.is_some() {
                return Ok(None);
            }
            s.closed_jobs_of(&a, JUDGE_FROM).map(Some)
        })
        .await;
    let runs = match read {
        Ok(Some(runs)) => runs,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(app, policy, error = %e, "could not judge the policy's measured slowdown");
            return;
        }
    };
    let site = ctx.site.clone();
    let p = policy.clone();
    let Ok(Some(reason)) =
        tokio::task::spawn_blocking(move || baseline::missed(&site, &runs, &p, Some(target))).await
    else {
        return;
    };
    tracing::warn!(
        app,
        policy,
        "{reason}; held: its jobs run as under monitor until an admin clears it"
    );
    let change = Change::Hold {
        profile: app.clone(),
        policy: policy.clone(),
        reason,
        at: now(),
    };
    if let Err(e) = shared.store.write(change).await {
        tracing::error!(app, policy, error = %e, "could not store the hold");
    }
}
