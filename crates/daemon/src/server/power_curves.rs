//! Each node type's busy watts per clock, learned from the nodes' measured energy in
//! closed jobs ([`greenup::profile::node_power`]) and laid over the site's power
//! models, so that decisions plan with what the nodes draw rather than the cube law.
//!
//! Relearned at start, on reload and after each job whose completion is confirmed, from
//! the newest [`LEARN_FROM`] closed jobs (some tens of milliseconds of one core for small jobs): at
//! most one relearning waits, at most one runs at a time and one a second, on a read
//! connection of its own off the store thread. Nothing is written: the curves are
//! recomputed from the stored jobs after every restart.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Ctx, Shared, lock};
use crate::store::{SqliteStore, Store};
use greenup::model::measured_power::{PowerCurve, overlay};
use greenup::profile::node_power::{LEARN_FROM, learn_from_records};
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
    let learned = match done.map_err(|e| format!("the relearning stopped: {e}")) {
        Ok(Ok(l)) => l,
        Ok(Err(e)) | Err(e) => {
            tracing::warn!(error = %e, "node power not relearned");
            lock(&shared.power_curves).at = Some(Instant::now());
            return;
        }
    };
    for l in &learned.left_out {
        tracing::warn!("node power: {l}");
    }
    install(&shared, learned.curves);
}

/// The most nodes one log line names.
const LOG_NODES: usize = 20;

/// How much a clock's busy watts must move before greenupd plans with the new curve:
/// each close nudges the means, and every change rebuilds each profile's predictor and
/// empties its plan cache.
const MATERIAL_SHARE: f64 = 0.005;

/// Whether `new` differs from `old` enough to plan with: a clock or a node's factor
/// gained or lost, or busy watts or a factor moved by more than [`MATERIAL_SHARE`].
fn material(old: &BTreeMap<String, PowerCurve>, new: &BTreeMap<String, PowerCurve>) -> bool {
    let moved = |a: f64, b: f64| (a - b).abs() > MATERIAL_SHARE * a.abs();
    old.len() != new.len()
        || old.iter().zip(new).any(|((ta, a), (tb, b))| {
            ta != tb
                || a.clocks.len() != b.clocks.len()
                || a.clocks
                    .iter()
                    .zip(&b.clocks)
                    .any(|(x, y)| x.freq_ghz != y.freq_ghz || moved(x.busy_w, y.busy_w))
                || a.nodes.len() != b.nodes.len()
                || a.nodes
                    .iter()
                    .zip(&b.nodes)
                    .any(|((na, x), (nb, y))| na != nb || moved(x.factor, y.factor))
        })
}

/// Lay `curves` over the loaded site's node types and keep them, unless they differ
/// from those in use by no more than noise (then the old ones, with their run counts,
/// stay in use).
fn install(shared: &Shared, curves: BTreeMap<String, PowerCurve>) {
    let mut kept = lock(&shared.power_curves);
    kept.at = Some(Instant::now());
    if !material(&kept.by_type, &curves) {
        return;
    }
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
                if !c.nodes.is_empty() {
                    // A long line on a big site: the first few, and how many in all
                    // (`greenup site power` lists every one).
                    let nodes: Vec<String> = c
                        .nodes
                        .iter()
                        .take(LOG_NODES)
                        .map(|(n, f)| format!("{n} x{:.3} ({} runs)", f.factor, f.runs))
                        .collect();
                    tracing::info!(
                        node_type = %ty,
                        "{} nodes differ from their type: {}{}",
                        c.nodes.len(),
                        nodes.join(", "),
                        if c.nodes.len() > LOG_NODES { ", ..." } else { "" }
                    );
                }
            }
            *ctx = Arc::new(next);
        }
    }
    kept.by_type = curves;
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup::model::measured_power::{MeasuredClock, NodeFactor};

    fn curve(points: &[(f64, f64)]) -> BTreeMap<String, PowerCurve> {
        let clocks = points
            .iter()
            .map(|&(freq_ghz, busy_w)| MeasuredClock {
                freq_ghz,
                busy_w,
                runs: 3,
                samples: 3,
            })
            .collect();
        BTreeMap::from([(
            "t".to_string(),
            PowerCurve {
                clocks,
                floor_below: false,
                nodes: BTreeMap::new(),
            },
        )])
    }

    #[test]
    fn only_a_new_clock_or_a_move_past_half_a_percent_replaces_the_curve_in_use() {
        let old = curve(&[(2.0, 200.0)]);
        // 0.5% of 200 W is 1 W.
        assert!(!material(&old, &curve(&[(2.0, 200.9)])));
        assert!(material(&old, &curve(&[(2.0, 201.1)])));
        assert!(material(&old, &curve(&[(2.0, 200.0), (2.4, 260.0)])));
        assert!(material(&old, &BTreeMap::new()));
        // A node's factor, new or moved past half a percent, is a change too.
        let with_node = |factor: f64| {
            let mut c = curve(&[(2.0, 200.0)]);
            if let Some(t) = c.get_mut("t") {
                t.nodes.insert("n1".into(), NodeFactor { factor, runs: 3 });
            }
            c
        };
        assert!(material(&old, &with_node(1.1)));
        assert!(!material(&with_node(1.1), &with_node(1.104)));
        assert!(material(&with_node(1.1), &with_node(1.106)));
        assert!(!material(&BTreeMap::new(), &BTreeMap::new()));
    }
}
