//! Settling how a job ended against Slurm's final record before anything learns from it.
//!
//! A job's first node closes the job from its epilog, while slurmctld still shows it
//! COMPLETING. From there a job that completed and a job whose batch step was killed
//! and then cancelled can look the same (exit `0:0` everywhere), so the node's
//! "completed" is a claim. greenupd stores such a claim as [`JobEnd::Unknown`], asks
//! Slurm for the job's final state once the job has left COMPLETING, and only a
//! COMPLETED there makes the run one a profile may learn from.

use std::time::Duration;

use greenup::record::JobEnd;

/// How long greenupd keeps asking before it leaves the end unknown: past every node's
/// epilog (Slurm's own default EpilogMsgTime and PrologEpilogTimeout are far shorter).
pub const SETTLE_WITHIN: Duration = Duration::from_secs(180);

/// The waits between questions: quick at first, since most jobs leave COMPLETING
/// within a second of their first epilog, then every few seconds.
pub fn waits() -> impl Iterator<Item = Duration> {
    [250, 500, 1000, 2000]
        .into_iter()
        .map(Duration::from_millis)
        .chain(std::iter::repeat(Duration::from_secs(5)))
}

/// Whether a node's claimed end needs Slurm's word before it is believed.
pub fn needs_settling(claimed: Option<JobEnd>) -> bool {
    claimed == Some(JobEnd::Completed)
}

/// Ask `ask` for the job's Slurm state word (`None`: Slurm could not say) after each of
/// `waits`, until it is a final state or the waits add up to `within`; `sleep` waits.
/// The end is what that final state stands for, or [`JobEnd::Unknown`] when none came.
pub fn settle(
    mut ask: impl FnMut() -> Option<String>,
    mut sleep: impl FnMut(Duration),
    waits: impl Iterator<Item = Duration>,
    within: Duration,
) -> JobEnd {
    let mut waited = Duration::ZERO;
    for w in waits {
        if waited >= within {
            break;
        }
        sleep(w);
        waited += w;
        if let Some(end) = ask().as_deref().and_then(JobEnd::from_slurm_state) {
            return end;
        }
    }
    JobEnd::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(answers: &[Option<&str>], within: Duration) -> (JobEnd, usize, Duration) {
        let mut asked = 0;
        let mut slept = Duration::ZERO;
        let end = settle(
            || {
                asked += 1;
                answers
                    .get(asked - 1)
                    .copied()
                    .flatten()
                    .map(str::to_string)
            },
            |d| slept += d,
            waits(),
            within,
        );
        (end, asked, slept)
    }

    #[test]
    fn a_killed_then_cancelled_job_is_not_completed() {
        // What a job's state goes through after its first epilog said "completed".
        let (end, asked, _) = run(
            &[
                Some("COMPLETING"),
                Some("COMPLETING"),
                Some("CANCELLED by 1000"),
            ],
            SETTLE_WITHIN,
        );
        assert_eq!((end, asked), (JobEnd::Cancelled, 3));
    }

    #[test]
    fn only_slurms_completed_confirms_a_completion() {
        assert_eq!(
            run(&[Some("COMPLETED")], SETTLE_WITHIN).0,
            JobEnd::Completed
        );
        assert_eq!(run(&[Some("NODE_FAIL")], SETTLE_WITHIN).0, JobEnd::Failed);
    }

    #[test]
    fn slurm_silent_until_the_deadline_leaves_the_end_unknown() {
        let (end, asked, slept) = run(&[], Duration::from_secs(20));
        assert_eq!(end, JobEnd::Unknown);
        // 0.25 + 0.5 + 1 + 2 + 5 + 5 + 5 + 5 = 23.75 s: the eighth wait crosses 20 s.
        assert_eq!(asked, 8);
        assert_eq!(slept, Duration::from_millis(23_750));
    }
}
