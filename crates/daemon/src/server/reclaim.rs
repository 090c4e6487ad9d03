//! Taking back the reservations of jobs that vanished from Slurm or outlived their
//! time limit plus grace.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use super::jobs::close_job;
use super::lock;
use crate::store::sqlite::now;
use greenup_proto::protocol::JobState;

/// How long reclaim waits for squeue; past it, reclaim goes by time limits alone.
const SQUEUE_BOUND: Duration = Duration::from_secs(20);

/// Job ids Slurm still knows, or `None` if Slurm could not be asked.
fn slurm_jobs(bin_dir: Option<&Path>) -> Option<std::collections::HashSet<u64>> {
    let mut squeue = greenup_host::command::slurm(bin_dir, "squeue");
    squeue.args(["-h", "-o", "%A %T", "-t", "all"]);
    let out = greenup_host::command::stdout_of(&mut squeue, SQUEUE_BOUND)
        .inspect_err(|e| tracing::warn!(error = %e, "reclaim cannot ask Slurm"))
        .ok()?;
    Some(live_jobs(&out))
}

/// Job ids in `squeue -o "%A %T"` output that still hold or will hold nodes. A job
/// slurmctld still lists in a final state (for MinJobAge after it ended) has
/// released its nodes, so its reservation is reclaimed without waiting for it to
/// drop out of the list.
fn live_jobs(squeue: &str) -> std::collections::HashSet<u64> {
    squeue
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let id = words.next()?.parse().ok()?;
            let state = words.next().unwrap_or("");
            greenup::record::JobEnd::from_slurm_state(state)
                .is_none()
                .then_some(id)
        })
        .collect()
}

pub(super) async fn reclaim_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.opts.reclaim_every);
    tick.tick().await;
    loop {
        tick.tick().await;
        reclaim_once(&shared).await;
    }
}

async fn reclaim_once(shared: &Arc<Shared>) {
    let t = now();
    let (mut gone, candidates) = {
        let l = lock(&shared.ledger);
        (l.expired(t), l.opened_before(t - shared.opts.min_age_s))
    };
    if shared.opts.slurm_check && !candidates.is_empty() {
        let bin = shared.opts.slurm_bin_dir.clone();
        match tokio::task::spawn_blocking(move || slurm_jobs(bin.as_deref()))
            .await
            .ok()
            .flatten()
        {
            Some(alive) => gone.extend(candidates.into_iter().filter(|id| !alive.contains(id))),
            None => tracing::debug!("squeue unavailable; reclaiming by time limit only"),
        }
    }
    gone.sort_unstable();
    gone.dedup();
    for job_id in gone {
        match close_job(shared, job_id, JobState::Reclaimed, None, None).await {
            Ok(_) => tracing::info!(job_id, "reservation reclaimed"),
            Err(e) => tracing::warn!(job_id, error = %e, "could not reclaim"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::live_jobs;

    #[test]
    fn jobs_listed_in_a_final_state_are_not_live() {
        // What `squeue -h -o "%A %T" -t all` prints, including a job still listed
        // after it ended and an array task.
        let out = "101 RUNNING\n102 PENDING\n103 COMPLETED\n104 COMPLETING\n\
                   105 CANCELLED\n106 CONFIGURING\n107 TIMEOUT\n108 SUSPENDED\n\
                   109 NODE_FAIL\nnot-a-job RUNNING\n\n110\n";
        let mut live: Vec<u64> = live_jobs(out).into_iter().collect();
        live.sort_unstable();
        assert_eq!(live, vec![101, 102, 104, 106, 108, 110]);
    }
}
