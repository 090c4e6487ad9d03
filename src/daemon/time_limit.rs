//! The time limit a job is decided under: the one its node sent (from the job
//! credential, Slurm 23.02 and later), else slurmctld's, asked once per job while the
//! job is being decided (never once per node).

use std::path::PathBuf;
use std::time::Duration;

use super::protocol::OpenJob;
use crate::site::Site;
use crate::slurm::time_limit::{self, TimeLimit};

/// How long a reservation is held for a job without a time limit (or whose limit could
/// not be learnt): a year, as slurmctld's own end time for such a job. Reclaim releases
/// it sooner once squeue no longer lists the job.
pub const UNLIMITED_HOLD_S: f64 = time_limit::YEAR_S;

/// How long squeue may take: half of what the job's nodes wait for the decision
/// (`daemon.timeout_ms`), and never more than [`time_limit::ASK_BOUND`].
pub fn ask_bound(site: &Site) -> Duration {
    (Duration::from_millis(site.daemon.timeout_ms) / 2).min(time_limit::ASK_BOUND)
}

/// `req` with its time limit filled in from slurmctld when the node sent none and
/// greenupd may ask Slurm (`ask_slurm`, with its commands in `bin_dir` or on the PATH).
/// When slurmctld cannot say, the job is planned without a limit and a warning says so.
pub async fn complete(
    mut req: OpenJob,
    ask_slurm: bool,
    bin_dir: Option<PathBuf>,
    site: &Site,
) -> OpenJob {
    if req.time_limit_s.is_some() || !ask_slurm {
        return req;
    }
    let job_id = req.job_id;
    let bound = ask_bound(site);
    let asked = tokio::task::spawn_blocking(move || {
        time_limit::ask(&mut time_limit::squeue(bin_dir.as_deref(), job_id), bound)
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r);
    match asked {
        Ok(TimeLimit::Seconds(s)) => req.time_limit_s = Some(s),
        Ok(TimeLimit::Unlimited) => {}
        Err(e) => tracing::warn!(
            job_id,
            error = %e,
            "time limit unknown: the job is planned without one"
        ),
    }
    req
}
