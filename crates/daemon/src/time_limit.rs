//! The time limit a job is decided under: the one its node sent (from the job
//! credential, Slurm 23.02 and later), else slurmctld's, asked once per job while the
//! job is being decided (never once per node). The same question fills in the job's
//! Slurm account when the request has none and an account has an energy budget, and
//! under `power.enforce: queue` or `hres` the watts Slurm granted it when no PrologSlurmctld sent
//! them (slurmd gives a node's prolog no licenses).

use std::path::PathBuf;
use std::time::Duration;

use greenup::site::Site;
use greenup::slurm::time_limit;
use greenup_proto::protocol::OpenJob;

/// How long squeue may take: half of what the job's nodes wait for the decision
/// (`daemon.timeout_ms`), and never more than [`time_limit::ASK_BOUND`].
pub fn ask_bound(site: &Site) -> Duration {
    (Duration::from_millis(site.daemon.timeout_ms) / 2).min(time_limit::ASK_BOUND)
}

/// `req` with its time limit (and, where account budgets need it, its account) filled in
/// from slurmctld when the node did not know it and greenupd may ask Slurm (`ask_slurm`,
/// with its commands in `bin_dir` or on the PATH). When slurmctld cannot say, the limit
/// stays unknown: the job is planned without one, held as if unlimited
/// ([`time_limit::TimeLimit::hold_s`]; reclaim releases the hold once squeue no
/// longer lists the job), and a warning says so.
pub async fn complete(
    mut req: OpenJob,
    ask_slurm: bool,
    bin_dir: Option<PathBuf>,
    site: &Site,
) -> OpenJob {
    let needs_account = req.account.is_none()
        && site
            .budgets
            .iter()
            .any(|b| matches!(b.scope, greenup::budget::Scope::Account(_)));
    // A node's prolog is not given the job's licenses: under the queue, greenupd asks.
    let needs_grant = site.power.enforce.in_slurm() && req.granted_w.is_none();
    if (req.time_limit.is_known() && !needs_account && !needs_grant) || !ask_slurm {
        return req;
    }
    let job_id = req.job_id;
    let bound = ask_bound(site);
    let asked = tokio::task::spawn_blocking(move || {
        let mut squeue = greenup_host::command::slurm(bin_dir.as_deref(), "squeue");
        squeue.args(time_limit::squeue_args(job_id));
        let out =
            greenup_host::command::stdout_of(&mut squeue, bound).map_err(|e| e.to_string())?;
        time_limit::parse_squeue(&out).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r);
    match asked {
        Ok(a) => {
            if !req.time_limit.is_known() {
                req.time_limit = a.limit;
            }
            if req.account.is_none() {
                req.account = a.account;
            }
            if needs_grant && let Some(l) = &a.licenses {
                // The request's hostlist is expanded before it is decided.
                let nodes = req.nodes.len();
                match greenup::power::granted_w(&site.power, req.partition.as_deref(), l, nodes) {
                    Ok(g) => req.granted_w = g,
                    Err(e) => tracing::warn!(job_id, error = %e, "the job's grant is unreadable"),
                }
            }
        }
        Err(e) => tracing::warn!(
            job_id,
            error = %e,
            "time limit unknown: the job is planned without one"
        ),
    }
    req
}
