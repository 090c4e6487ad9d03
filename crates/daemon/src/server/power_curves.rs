//! Each node type's busy watts per clock, learned from the nodes' measured energy in
//! closed jobs ([`greenup::model::measured_power`]) and laid over the site's power
//! models, so that decisions plan with what the nodes draw rather than the cube law.
//!
//! Relearned at start, on reload and after each job whose completion is confirmed, from
//! the newest [`LEARN_FROM`] closed jobs (some tens of milliseconds of one core): at
//! most one relearning waits, at most one runs at a time and one a second, on a read
//! connection of its own off the store thread. Nothing is written: the curves are
//! recomputed from the stored jobs after every restart.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Ctx, Shared, lock};
use crate::store::{SqliteStore, Store};
use greenup::model::measured_power::{LEARN_FROM, PowerCurve, learn_from_records, overlay};
use greenup_proto::protocol::{JobState, ListRecords};

/// Least time between the end of one relearning and the next.
const LEARN_GAP: Duration = Duration::from_secs(1);

/// The learned curves and when they were last learned.
#[derive(Default)]
pub(super) struct Curves {
    /// By node type.
    pub(super) by_type: BTreeMap<String, PowerCurve>,
    /// When the last relearning ended.
    pub(super) at: Option<Instant>,
}

/// `ctx` with `curves` laid over its site; None when that changes nothing.
pub(super) fn with_curves(ctx: &Ctx, curves: &BTreeMap<String, PowerCurve>) -> Option<Ctx> {
    let types = overlay(&ctx.site.node_types, curves);
    if types == ctx.site.node_types {
        return None;
    }
    let mut site = ctx.site.clone();
    site.node_types = types;
    Some(Ctx {
        site,
        roles: ctx.roles.clone(),
        decider: ctx.decider.clone(),
    })
}

/// Relearn the curves from the store and lay them over the loaded site. Failures are
/// only logged: decisions keep the curves they had.
pub(super) async fn relearn(shared: Arc<Shared>) {
    // A relearning that waits reads the newest jobs once it runs: a burst of closes
    // costs one more, not one each.
    if shared.power_waiting.swap(true, Ordering::AcqRel) {
        return;
    }
    let last = lock(&shared.power_curves).at;
    if let Some(last) = last {
        tokio::time::sleep_until((last + LEARN_GAP).into()).await;
    }
    let _one_at_a_time = shared.power_learning.lock().await;
    shared.power_waiting.store(false, Ordering::Release);
    let ctx = shared.ctx.read().unwrap_or_else(|e| e.into_inner()).clone();
    let done = tokio::task::spawn_blocking(move || {
        let records = SqliteStore::open_reader(&ctx.site.daemon.store)
            .and_then(|mut s| {
                s.job_records(&ListRecords {
                    state: Some(JobState::Closed),
                    limit: Some(LEARN_FROM as u32),
                    ..ListRecords::default()
                })
            })
            .map_err(|e| format!("cannot read the jobs: {e}"))?;
        Ok::<_, String>(learn_from_records(&records, &ctx.site))
    })
    .await;
    let learned = match done {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "node power not relearned");
            lock(&shared.power_curves).at = Some(Instant::now());
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "node power relearning stopped");
            lock(&shared.power_curves).at = Some(Instant::now());
            return;
        }
    };
    for l in &learned.left_out {
        tracing::warn!("node power: {l}");
    }
    install(&shared, learned.curves);
}

/// Keep `curves` and lay them over the loaded site's node types.
fn install(shared: &Shared, curves: BTreeMap<String, PowerCurve>) {
    {
        let mut ctx = shared.ctx.write().unwrap_or_else(|e| e.into_inner());
        if let Some(next) = with_curves(&ctx, &curves) {
            for (ty, c) in &curves {
                let clocks: Vec<String> = c
                    .clocks
                    .iter()
                    .map(|k| format!("{} GHz {:.1} W ({} runs)", k.freq_ghz, k.busy_w, k.runs))
                    .collect();
                tracing::info!(node_type = %ty, "measured busy power: {}", clocks.join(", "));
            }
            *ctx = Arc::new(next);
        }
    }
    let mut kept = lock(&shared.power_curves);
    kept.by_type = curves;
    kept.at = Some(Instant::now());
}
