//! What Slurm says about one job, read from its commands' output: the fields greenup
//! needs from `scontrol -o show job` and `sacct`, parsed in one place for the epilog
//! (how the job ended) and for greenupd (settling that end against Slurm's record).

/// `exit:signal` as Slurm prints it (`ExitCode=0:15`, `SLURM_JOB_EXIT_CODE2`).
pub fn exit_pair(v: &str) -> Option<(u32, u32)> {
    let (a, b) = v.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// What `scontrol -o show job` says about a job, the few fields greenup needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CtldView {
    /// `JobState=` (COMPLETING while epilogs run; RUNNING for a node released by a shrink).
    pub state: Option<String>,
    /// The first word of `Reason=`.
    pub reason: Option<String>,
    /// `ExitCode=exit:signal` of the batch script.
    pub exit: Option<(u32, u32)>,
    /// `Licenses=`: the licenses the job holds, `name:count` comma-separated.
    pub licenses: Option<String>,
}

/// Read the fields from `scontrol -o show job` output.
pub fn parse_scontrol(text: &str) -> CtldView {
    let mut v = CtldView::default();
    for word in text.split_whitespace() {
        if let Some(s) = word.strip_prefix("JobState=") {
            v.state.get_or_insert_with(|| s.to_string());
        } else if let Some(l) = word.strip_prefix("Licenses=") {
            v.licenses.get_or_insert_with(|| l.to_string());
        } else if let Some(r) = word.strip_prefix("Reason=") {
            v.reason.get_or_insert_with(|| r.to_string());
        } else if let Some(e) = word.strip_prefix("ExitCode=")
            && v.exit.is_none()
        {
            v.exit = exit_pair(e);
        }
    }
    v
}

/// The job's state word from `sacct -X -n -P -o State -j ID` output (`CANCELLED by 0`).
pub fn state_in_sacct(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|l| !l.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_words_are_read_from_scontrol_and_sacct() {
        let line =
            "JobId=7 JobName=x UserId=alice(1000) JobState=CANCELLED Reason=None ExitCode=0:0";
        assert_eq!(parse_scontrol(line).state.as_deref(), Some("CANCELLED"));
        let held =
            "JobId=8 JobState=RUNNING Licenses=greenup_w:160,greenup_w_debug:160 Network=(null)";
        assert_eq!(
            parse_scontrol(held).licenses.as_deref(),
            Some("greenup_w:160,greenup_w_debug:160")
        );
        assert_eq!(
            parse_scontrol("slurm_load_jobs error: Invalid job id").state,
            None
        );
        assert_eq!(state_in_sacct("\nCANCELLED by 0\n"), Some("CANCELLED by 0"));
        assert_eq!(state_in_sacct(""), None);
    }
}
