//! Writing a closed job's measured energy into Slurm's accounting, where the site asks
//! for it (`daemon.slurm_energy`); the rule is [`crate::slurm_energy`]'s.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::Shared;
use crate::slurm_energy::{Answer, Energy, energy_of, parse_answer, sacctmgr_args};
use crate::store::Change;
use greenup::record::JobState;

/// What greenupd knows of its writes to Slurm's accounting since it started.
#[derive(Default)]
pub(super) struct Writes {
    /// This Slurm's sacctmgr refused the TRES option: no more tries until a reload.
    cannot: AtomicBool,
    written: AtomicU64,
    failed: AtomicU64,
}

impl Writes {
    /// A reload tries again: the site may have upgraded Slurm meanwhile.
    pub(super) fn reloaded(&self) {
        self.cannot.store(false, Ordering::Relaxed);
    }

    /// The counters, in Prometheus's text format.
    pub(super) fn prometheus(&self) -> String {
        format!(
            "# HELP greenup_slurm_energy_written_total Jobs whose measured energy greenupd \
             wrote into Slurm's accounting (daemon.slurm_energy).\n\
             # TYPE greenup_slurm_energy_written_total counter\n\
             greenup_slurm_energy_written_total {}\n\
             # HELP greenup_slurm_energy_failed_total Jobs whose measured energy greenupd \
             could not write into Slurm's accounting.\n\
             # TYPE greenup_slurm_energy_failed_total counter\n\
             greenup_slurm_energy_failed_total {}\n",
            self.written.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed)
        )
    }
}

/// How long one sacct or sacctmgr may take.
const SLURM_LIMIT: Duration = Duration::from_secs(10);

/// After job `job_id` closed: once every node measured it and Slurm's accounting has its
/// end, write its energy there with sacctmgr and keep that greenupd did. Asks as the
/// settling of the job's end does (`settle::waits`, within `settle::SETTLE_WITHIN`),
/// since both wait for the job to leave COMPLETING. Failures are only logged.
pub(super) async fn write_after_close(shared: Arc<Shared>, job_id: u64) {
    let writes = &shared.slurm_energy;
    let mut waited = Duration::ZERO;
    let mut why = "not every node has sent its outcome".to_string();
    let mut tried = false;
    for w in crate::settle::waits() {
        if waited >= crate::settle::SETTLE_WITHIN {
            break;
        }
        tokio::time::sleep(w).await;
        waited += w;
        let enabled = (shared.ctx.read().unwrap_or_else(|e| e.into_inner()))
            .site
            .daemon
            .slurm_energy;
        if !enabled || writes.cannot.load(Ordering::Relaxed) {
            return;
        }
        let rec = match shared.store.read(move |s| s.job(job_id)).await {
            Ok(Some(rec)) => rec,
            Ok(None) => return,
            Err(e) => {
                why = format!("cannot read the job: {e}");
                continue;
            }
        };
        // Requeued meanwhile: the record is the next run's, which closes by itself.
        if rec.state != JobState::Closed || rec.slurm_energy_j.is_some() {
            return;
        }
        let joules = match energy_of(&rec) {
            Energy::Ready(j) => j,
            Energy::Waiting => continue,
            Energy::Never(reason) => {
                tracing::debug!(job_id, reason, "energy not written into Slurm's accounting");
                return;
            }
        };
        let bin = shared.opts.slurm_bin_dir.clone();
        let answer =
            tokio::task::spawn_blocking(move || ask_sacctmgr(bin.as_deref(), job_id, joules))
                .await
                .unwrap_or_else(|e| Answer::Failed(e.to_string()));
        tried = true;
        match answer {
            Answer::Written => {
                let change = Change::SlurmEnergy {
                    job_id,
                    restart_count: rec.request.restart_count,
                    joules,
                };
                if let Err(e) = shared.store.write(change).await {
                    tracing::error!(job_id, error = %e, "wrote the energy into Slurm's accounting but could not store that it did");
                }
                writes.written.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    job_id,
                    joules,
                    "measured energy written into Slurm's accounting"
                );
                return;
            }
            Answer::NotYet => why = "Slurm's accounting has not ended the job".into(),
            Answer::Failed(words) => why = words,
            Answer::Unsupported(words) => {
                writes.failed.fetch_add(1, Ordering::Relaxed);
                if !writes.cannot.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "daemon.slurm_energy: this Slurm's sacctmgr cannot set a finished job's TRES (Slurm 25.11 and later can): {words}"
                    );
                }
                return;
            }
        }
    }
    if tried {
        writes.failed.fetch_add(1, Ordering::Relaxed);
    }
    tracing::info!(
        job_id,
        why = %why,
        "measured energy not written into Slurm's accounting: gave up waiting"
    );
}

/// sacctmgr's answer to the write, asked only once sacct shows the job's end: until
/// then (or while sacct cannot say) [`Answer::NotYet`], unasked.
fn ask_sacctmgr(bin: Option<&Path>, job_id: u64, joules: u64) -> Answer {
    let id = job_id.to_string();
    let mut sacct = greenup_host::command::slurm(bin, "sacct");
    sacct.args(["-X", "-n", "-P", "-o", "State", "-j", &id]);
    // Slurm 26.05's sacctmgr also modifies a job that is still running, and the job's end
    // record then replaces the energy (tests/slurm24/hres.sh): a write counts only after
    // accounting has the end.
    let ended = greenup_host::command::stdout_of(&mut sacct, SLURM_LIMIT)
        .ok()
        .and_then(|out| greenup::slurm::job::state_in_sacct(&out).map(str::to_string))
        .and_then(|state| greenup::record::JobEnd::from_slurm_state(&state))
        .is_some();
    if !ended {
        return Answer::NotYet;
    }
    let mut cmd = greenup_host::command::slurm(bin, "sacctmgr");
    cmd.args(sacctmgr_args(job_id, joules));
    match greenup_host::command::run(&mut cmd, SLURM_LIMIT) {
        Ok(f) => parse_answer(f.status.success(), &f.stdout, &f.stderr),
        Err(greenup_host::command::CommandError::NotFound { .. }) => {
            Answer::Unsupported("sacctmgr is not installed".into())
        }
        Err(e) => Answer::Failed(e.to_string()),
    }
}
