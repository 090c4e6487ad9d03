//! The Prometheus listener and its page.

use std::sync::Arc;

use tokio::net::TcpListener;

use super::Shared;
use super::handlers::status;
use crate::metrics_http::snapshot_of;
use greenup::report::metrics::{Snapshot, render};

/// The Prometheus listener, moved when a reload changes `daemon.metrics_listen`.
#[derive(Default)]
pub(super) struct MetricsListener {
    addr: Option<String>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl MetricsListener {
    /// Serve metrics on `addr` (`None`: nowhere). A new address is bound before the
    /// old listener closes, so a failed bind leaves metrics where they were.
    pub(super) async fn follow(
        &mut self,
        shared: &Arc<Shared>,
        addr: Option<&str>,
    ) -> Result<(), super::ServeError> {
        if self.addr.as_deref() == addr {
            return Ok(());
        }
        let task = match addr {
            Some(a) => {
                let l = TcpListener::bind(a).await.map_err(|source| {
                    super::ServeError::MetricsListen {
                        addr: a.to_string(),
                        source,
                    }
                })?;
                tracing::info!(metrics = %a, "serving Prometheus metrics");
                let s = shared.clone();
                Some(tokio::spawn(crate::metrics_http::serve(l, move || {
                    metrics_page(s.clone())
                })))
            }
            None => {
                tracing::info!("metrics listener closed");
                None
            }
        };
        self.stop();
        self.addr = addr.map(str::to_string);
        self.task = task;
        Ok(())
    }

    pub(super) fn stop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

/// The Prometheus page: the status reply's budget and jobs plus what the store counts.
/// A store that cannot be read leaves its metrics out rather than failing the scrape.
pub(super) async fn metrics_page(shared: Arc<Shared>) -> String {
    let ctx = shared.ctx.read().unwrap_or_else(|e| e.into_inner()).clone();
    let mut snap = match status(&shared, &ctx).await {
        Ok(st) => snapshot_of(&st),
        Err(e) => {
            tracing::warn!(error = %e.message, "metrics: status unavailable");
            Snapshot::default()
        }
    };
    match shared.store.read(|s| s.metrics()).await {
        Ok(m) => {
            snap.decisions_by_policy = m.decisions_by_policy;
            snap.fallbacks_by_reason = m.fallbacks_by_reason;
            snap.prediction_error = m.prediction_error;
            snap.power_limit_nodes = m.power_limit_nodes;
            snap.measurement_runs = m.measurement_runs;
        }
        Err(e) => tracing::warn!(error = %e, "metrics: store unavailable"),
    }
    let db = &ctx.site.daemon.store;
    let mut wal = db.clone().into_os_string();
    wal.push("-wal");
    snap.store_bytes = [db.as_os_str(), wal.as_os_str()]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let budgets = super::budget::standings(&shared, &ctx, None, None);
    let power = super::live_power::view(&shared, Some(0.0001))
        .map(|v| greenup_proto::live_power::prometheus(&v.caps))
        .unwrap_or_default();
    render(&snap)
        + &greenup::budget::prometheus(&budgets)
        + &power
        + &greenup::report::metrics::node_type_power(&ctx.site.node_types)
        + &super::lock(&shared.silent).prometheus()
        + &shared.slurm_energy.prometheus()
}
