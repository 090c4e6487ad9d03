//! How a job ended, as far as a job epilog can know it.
//!
//! slurmd gives the epilog the batch script's wait status (`SLURM_JOB_EXIT_CODE`,
//! `SLURM_JOB_EXIT_CODE2` = `exit:signal`), but that is taken when slurmctld tells the
//! nodes to end the job: a job cancelled with scancel or ended by its time limit shows
//! `0:0` there. slurmctld knows more by the time the batch node's epilog runs: the
//! script's real status (`ExitCode=0:15` when scancel killed it) and `Reason=TimeLimit`.
//! So the job's first node also reads `scontrol -o show job`, and only it closes the job.
//!
//! The two readings disagree in a way that tells who ended the job. slurmctld copies the
//! job's exit code into the epilog's environment when it tells the nodes to end it. A script
//! that ends on its own has reported its status by then, so both readings agree. When
//! slurmctld ended the job first (scancel, preemption), the environment still says `0:0`
//! and the script's status arrives later: `0:15` if the shell died of the signal, or
//! `143:0` if its child died first and the shell exited with 128+15 itself.

use std::time::Duration;

use greenup::record::JobEnd;
use greenup::slurm::job::exit_pair;
pub use greenup::slurm::job::{CtldView, parse_scontrol};

/// `exit:signal` from `SLURM_JOB_EXIT_CODE2`, or decoded from the raw wait status in
/// `SLURM_JOB_EXIT_CODE`.
pub fn exit_from_env(get: impl Fn(&str) -> Option<String>) -> Option<(u32, u32)> {
    if let Some(pair) = get("SLURM_JOB_EXIT_CODE2").and_then(|v| exit_pair(&v)) {
        return Some(pair);
    }
    let raw: u32 = get("SLURM_JOB_EXIT_CODE")?.trim().parse().ok()?;
    // A wait status: the exit code in bits 8-15, a terminating signal in bits 0-6.
    Some(((raw >> 8) & 0xff, raw & 0x7f))
}

/// How the job ended, from the epilog's environment and (when it could be asked)
/// slurmctld; `None` while the job still runs (this node was released by a shrink, so
/// it must not close the job). A `Completed` here is the node's claim: greenupd settles
/// it against Slurm's final record before anything learns from the run.
pub fn classify(env_exit: Option<(u32, u32)>, ctld: Option<&CtldView>) -> Option<JobEnd> {
    if let Some(c) = ctld {
        let state = c.state.as_deref().unwrap_or("");
        if matches!(state, "RUNNING" | "SUSPENDED" | "CONFIGURING") {
            return None;
        }
        if let Some(end) = JobEnd::from_slurm_state(state) {
            return Some(end);
        }
        if c.reason.as_deref() == Some("TimeLimit") {
            return Some(JobEnd::Timeout);
        }
        if matches!(
            c.reason.as_deref(),
            Some("NodeFail") | Some("NonZeroExitCode") | Some("RaisedSignal") | Some("OutOfMemory")
        ) {
            return Some(JobEnd::Failed);
        }
    }
    if let Some((code, signal)) = env_exit
        && (code != 0 || signal != 0)
    {
        return Some(JobEnd::Failed);
    }
    Some(match ctld.and_then(|c| c.exit) {
        Some((0, 0)) => JobEnd::Completed,
        Some((0, _)) => JobEnd::Cancelled,
        // The status came after slurmctld had ended the job: it was ended from outside.
        Some(_) if env_exit == Some((0, 0)) => JobEnd::Cancelled,
        Some(_) => JobEnd::Failed,
        None if env_exit.is_some() && ctld.is_some() => JobEnd::Completed,
        None => JobEnd::Unknown,
    })
}

/// The end a first node claims from its environment alone, for a greenupd that settles
/// every claimed completion against Slurm's final record (`settle`): a non-zero status is
/// the script's own failure, as [`classify`] has it too; anything else is claimed
/// completed, which greenupd stores as unknown until Slurm's final state (COMPLETED,
/// CANCELLED, TIMEOUT, ...) says which it was.
pub fn claim(env_exit: Option<(u32, u32)>) -> JobEnd {
    match env_exit {
        Some((code, signal)) if code != 0 || signal != 0 => JobEnd::Failed,
        _ => JobEnd::Completed,
    }
}

/// Ask slurmctld about `job_id` with `scontrol -o show job`, waiting at most `limit`.
/// `None` when it cannot be asked.
pub fn ask_slurmctld(job_id: u32, limit: Duration) -> Option<CtldView> {
    let mut cmd = std::process::Command::new("scontrol");
    cmd.args(["-o", "show", "job", &job_id.to_string()]);
    greenup_host::command::stdout_of(&mut cmd, limit)
        .ok()
        .map(|t| parse_scontrol(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as Slurm 22.05's `scontrol -o show job` prints them during the job epilog
    // (trimmed to the fields read here), one per way of ending.
    const COMPLETED: &str = "JobId=33 JobName=wrap JobState=COMPLETING Reason=None Dependency=(null) Requeue=1 ExitCode=0:0";
    const EXIT3: &str =
        "JobId=34 JobState=COMPLETING Reason=NonZeroExitCode Dependency=(null) ExitCode=3:0";
    const SCANCEL: &str =
        "JobId=35 JobState=COMPLETING Reason=None Dependency=(null) ExitCode=0:15";
    const SCANCEL_SHELL_EXIT: &str =
        "JobId=38 JobState=COMPLETING Reason=None Dependency=(null) ExitCode=143:0";
    const TIMELIMIT: &str =
        "JobId=36 JobState=COMPLETING Reason=TimeLimit Dependency=(null) ExitCode=0:15";
    const SHRUNK: &str = "JobId=37 JobState=RUNNING Reason=None Dependency=(null) ExitCode=0:0";

    fn env(pairs: &[(&str, &str)]) -> Option<(u32, u32)> {
        exit_from_env(|k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn environment_gives_the_scripts_wait_status() {
        assert_eq!(env(&[("SLURM_JOB_EXIT_CODE2", "3:0")]), Some((3, 0)));
        // 768 = exit 3 << 8; 9 = killed by SIGKILL.
        assert_eq!(env(&[("SLURM_JOB_EXIT_CODE", "768")]), Some((3, 0)));
        assert_eq!(env(&[("SLURM_JOB_EXIT_CODE", "9")]), Some((0, 9)));
        assert_eq!(env(&[("SLURM_JOB_EXIT_CODE", "x")]), None);
        assert_eq!(env(&[]), None);
    }

    #[test]
    fn each_way_of_ending_is_told_apart() {
        let ok = Some((0, 0));
        let c = |t: &str| classify(ok, Some(&parse_scontrol(t)));
        assert_eq!(c(COMPLETED), Some(JobEnd::Completed));
        assert_eq!(
            classify(Some((3, 0)), Some(&parse_scontrol(EXIT3))),
            Some(JobEnd::Failed)
        );
        assert_eq!(c(SCANCEL), Some(JobEnd::Cancelled));
        // scancel killed the shell's child first and the shell exited 143 by itself.
        assert_eq!(c(SCANCEL_SHELL_EXIT), Some(JobEnd::Cancelled));
        // The same status, but known when slurmctld ended the job: the script's own failure.
        assert_eq!(
            classify(Some((143, 0)), Some(&parse_scontrol(SCANCEL_SHELL_EXIT))),
            Some(JobEnd::Failed)
        );
        // Without the environment's reading, a non-zero code is a failure.
        assert_eq!(
            classify(None, Some(&parse_scontrol(SCANCEL_SHELL_EXIT))),
            Some(JobEnd::Failed)
        );
        assert_eq!(c(TIMELIMIT), Some(JobEnd::Timeout));
        assert_eq!(c(SHRUNK), None);
    }

    #[test]
    fn without_slurmctld_only_a_failure_is_known() {
        assert_eq!(classify(Some((1, 0)), None), Some(JobEnd::Failed));
        assert_eq!(classify(Some((0, 0)), None), Some(JobEnd::Unknown));
        assert_eq!(classify(None, None), Some(JobEnd::Unknown));
    }

    #[test]
    fn a_claim_from_the_environment_names_only_a_failure_for_sure() {
        assert_eq!(claim(Some((1, 0))), JobEnd::Failed);
        assert_eq!(claim(Some((0, 9))), JobEnd::Failed);
        // scancel and the time limit leave 0:0 here: greenupd's settling tells them apart.
        assert_eq!(claim(Some((0, 0))), JobEnd::Completed);
        assert_eq!(claim(None), JobEnd::Completed);
        // The same as slurmctld's word where the environment alone knows the answer.
        for exit in [(1, 0), (0, 9), (3, 0)] {
            assert_eq!(
                Some(claim(Some(exit))),
                classify(Some(exit), Some(&parse_scontrol(COMPLETED)))
            );
        }
    }

    #[test]
    fn odd_scontrol_output_does_not_invent_an_end() {
        assert_eq!(parse_scontrol(""), CtldView::default());
        let v = parse_scontrol("JobState=COMPLETING ExitCode=zz");
        assert_eq!(v.exit, None);
        assert_eq!(classify(None, Some(&v)), Some(JobEnd::Unknown));
    }
}
