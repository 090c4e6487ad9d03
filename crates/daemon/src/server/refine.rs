//! Refining a profile after its jobs close: at most one waiting per application,
//! at most one a second, one at a time.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Shared, lock};
use crate::store::{Change, SqliteStore};
use greenup_proto::protocol::JobEnd;

/// Ask Slurm how `job_id` really ended, store that, and refine its application only if
/// Slurm says COMPLETED (and `learn`: the job was decided with a profile).
pub(super) async fn settle_then_refine(
    shared: Arc<Shared>,
    job_id: u64,
    learn: bool,
    app: Option<String>,
) {
    use crate::settle;
    let bin = shared.opts.slurm_bin_dir.clone();
    let end = tokio::task::spawn_blocking(move || {
        settle::settle(
            || slurm_state_of(bin.as_deref(), job_id),
            std::thread::sleep,
            settle::waits(),
            settle::SETTLE_WITHIN,
        )
    })
    .await
    .unwrap_or(JobEnd::Unknown);
    if let Err(e) = shared.store.write(Change::SettleEnd { job_id, end }).await {
        tracing::error!(job_id, error = %e, "could not store how the job ended");
        return;
    }
    if end != JobEnd::Completed {
        tracing::info!(
            job_id,
            end = end.as_str(),
            "Slurm does not confirm the completion; not learned from"
        );
        return;
    }
    tokio::spawn(super::power_curves::relearn(shared.clone()));
    if learn {
        refine_after_close(shared, job_id, app).await;
    }
}

/// The job's state word as slurmctld has it, else as Slurm's accounting has it.
fn slurm_state_of(bin: Option<&Path>, job_id: u64) -> Option<String> {
    let id = job_id.to_string();
    let ctld = slurm_output(bin, "scontrol", &["-o", "show", "job", &id]);
    if let Some(s) = ctld.and_then(|t| greenup::slurm::job::parse_scontrol(&t).state) {
        return Some(s);
    }
    let acct = slurm_output(bin, "sacct", &["-X", "-n", "-P", "-o", "State", "-j", &id])?;
    greenup::slurm::job::state_in_sacct(&acct).map(str::to_string)
}

/// How long one Slurm command may take before greenupd gives up on it.
const SLURM_LIMIT: Duration = Duration::from_secs(10);

/// A Slurm command's standard output, or `None` when it failed or ran past [`SLURM_LIMIT`].
fn slurm_output(bin: Option<&Path>, prog: &str, args: &[&str]) -> Option<String> {
    let mut cmd = greenup_host::command::slurm(bin, prog);
    cmd.args(args);
    greenup_host::command::stdout_of(&mut cmd, SLURM_LIMIT)
        .inspect_err(|e| tracing::debug!(error = %e, "Slurm could not say how a job ended"))
        .ok()
}

/// Closed jobs a refinement learns from: the newest of the application's.
const REFINE_FROM: u32 = 50;

/// Least time between the end of one refinement of an application and the next.
const REFINE_GAP: Duration = Duration::from_secs(1);

/// After `job_id` closed (and the close was answered): refine its application's profile
/// (`app`, or the one its stored decision names) from its newest closed jobs and store
/// the next version. Failures are only logged.
pub(super) async fn refine_after_close(shared: Arc<Shared>, job_id: u64, app: Option<String>) {
    let app = match app {
        Some(app) => app,
        // Not among the recent decisions: ask the store for the profile alone, since
        // every close comes here and a whole job is costly to read.
        None => match shared.store.read(move |s| s.profile_of(job_id)).await {
            Ok(Some(Some(app))) => app,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(job_id, error = %e, "refinement skipped: cannot read the job");
                return;
            }
        },
    };
    // At most one refinement waits per application: it reads the newest closed jobs
    // once it runs, so it learns from this close too. A burst of closes then costs a
    // few refinements, not one each.
    if !lock(&shared.refine_waiting).insert(app.clone()) {
        return;
    }
    // And at most one a second: reading and refitting compete with the requests for
    // the CPU, and a burst of closes teaches little more every millisecond.
    let last = lock(&shared.refined_at).get(&app).copied();
    if let Some(last) = last {
        tokio::time::sleep_until((last + REFINE_GAP).into()).await;
    }
    let _one_at_a_time = shared.refining.lock().await;
    lock(&shared.refine_waiting).remove(&app);
    let ctx = shared.ctx.read().unwrap_or_else(|e| e.into_inner()).clone();
    let name = app.clone();
    // Reading 50 whole jobs takes milliseconds: a connection of its own keeps that off
    // the store thread, whose commits other requests wait for.
    let done = tokio::task::spawn_blocking(move || {
        let records = SqliteStore::open_reader(&ctx.site.daemon.store)
            .and_then(|mut s| crate::store::Store::closed_jobs_of(&mut s, &name, REFINE_FROM))
            .map_err(|e| format!("cannot read the jobs: {e}"))?;
        let next = greenup::profile::refine::next_version(&ctx.site, &name, &records)
            .map_err(|e| e.to_string())?;
        if let Some(v) = &next {
            greenup_core::fs::write_files(&v.writes)
                .map_err(|e| format!("cannot store version {}: {e}", v.version))?;
        }
        Ok::<_, String>(next)
    })
    .await;
    lock(&shared.refined_at).insert(app.clone(), Instant::now());
    match done {
        Ok(Ok(Some(v))) => tracing::info!(
            job_id,
            profile = %app,
            version = v.version,
            samples = v.fit.samples,
            residual = v.fit.residual,
            note = v.fit.note.as_deref().unwrap_or(""),
            "profile refined"
        ),
        Ok(Ok(None)) => tracing::debug!(job_id, profile = %app, "no usable outcome to refine from"),
        Ok(Err(e)) => tracing::warn!(job_id, profile = %app, error = %e, "refinement failed"),
        Err(e) => tracing::warn!(job_id, profile = %app, error = %e, "refinement stopped"),
    }
}
