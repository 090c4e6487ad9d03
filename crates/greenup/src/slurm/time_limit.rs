//! A job's time limit as slurmctld enforces it, so that no decision plans past it.
//!
//! slurmctld gives a job without a limit of its own its partition's `DefaultTime`, else
//! its `MaxTime`, when the job starts; that effective limit is what kills the job, and
//! what greenup reads. Two sources are authoritative, and neither can be set by the
//! job's owner:
//! - Slurm 23.02 and later put `SLURM_JOB_START_TIME` and `SLURM_JOB_END_TIME` (from the
//!   job credential slurmctld signs) in the job prolog's environment, after the job's
//!   own SPANK variables, so a user's variable of the same name is overwritten. Slurm
//!   22.05 sets neither, so there a variable of that name could come from the user and
//!   is never read.
//! - `squeue -h -j JOBID -o "%l %a"`, asked once per job by greenupd when it decides.
//!
//! The same squeue line gives the job's Slurm account, which a 22.05 node's prolog does
//! not see (only PrologSlurmctld does), and which account energy budgets need.

use std::time::Duration;

/// The longest greenupd waits for squeue to say a job's time limit: the job's nodes wait
/// for the decision, and their prologs give up after the site's `daemon.timeout_ms`.
pub const ASK_BOUND: Duration = Duration::from_millis(1000);

pub use greenup_core::time_limit::{TimeLimit, YEAR_S};

/// The first Slurm release (23.02, as `SLURM_VERSION_NUMBER`) whose job prolog gets the
/// job's start and end time from the job credential.
pub const CREDENTIAL_TIMES_SINCE: u32 = 0x17_02_00;

/// What slurmctld says of a job at decision time.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// The effective time limit.
    pub limit: TimeLimit,
    /// The Slurm account, when squeue printed one.
    pub account: Option<String>,
    /// The job's licenses as Slurm lists them (`greenup_w:640,...`), when it has any.
    pub licenses: Option<String>,
}

/// A squeue answer greenupd cannot read, so the job is planned without a time limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SqueueError {
    /// squeue printed no line, or several, where one job's line was asked for.
    #[error("squeue printed {text:?}: expected one time limit")]
    NotOneLine {
        /// What squeue printed, trimmed.
        text: String,
    },
    /// The line has more words than the format asked for.
    #[error("squeue printed {line:?}: expected a time limit, an account and licenses")]
    TooManyWords {
        /// The line squeue printed.
        line: String,
    },
    /// The time limit is not in one of Slurm's formats.
    #[error(transparent)]
    Limit(#[from] crate::units::UnitError),
}

/// The arguments that make squeue print one job's time limit, account and licenses and
/// nothing else (greenupd runs `squeue` with them; [`parse_squeue`] reads the answer).
pub fn squeue_args(job_id: u64) -> [String; 5] {
    [
        "-h".into(),
        "-j".into(),
        job_id.to_string(),
        "-o".into(),
        "%l %a %W".into(),
    ]
}

/// Read what `squeue -h -j JOBID -o "%l %a %W"` printed: the limit (`11:00`,
/// `1-00:00:00`, `UNLIMITED`, or `INVALID`, squeue's word for a limit over a year), then
/// the account and the licenses (each absent from a squeue asked for less; `(null)`
/// when the job has none).
pub fn parse_squeue(text: &str) -> Result<Asked, SqueueError> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return Err(SqueueError::NotOneLine {
            text: text.trim().to_string(),
        });
    };
    let mut words = line.split_whitespace();
    let (Some(word), account, licenses, None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(SqueueError::TooManyWords {
            line: line.to_string(),
        });
    };
    let limit = if word == "INVALID" {
        TimeLimit::Unlimited
    } else {
        TimeLimit::parse(word)?
    };
    let account = account
        .filter(|a| crate::names::is_name(a))
        .map(str::to_string);
    let licenses = licenses
        .filter(|l| *l != "(null)" && !l.is_empty())
        .map(str::to_string);
    Ok(Asked {
        limit,
        account,
        licenses,
    })
}

/// The time limit in a job prolog's environment (looked up by `get`), from a Slurm of
/// release `slurm_version` (`SLURM_VERSION_NUMBER`); unknown when this Slurm does not
/// put it there.
pub fn from_prolog_env(get: impl Fn(&str) -> Option<String>, slurm_version: u32) -> TimeLimit {
    if slurm_version < CREDENTIAL_TIMES_SINCE {
        return TimeLimit::Unknown;
    }
    let num = |k: &str| {
        get(k)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|&t| t > 0)
    };
    match (num("SLURM_JOB_START_TIME"), num("SLURM_JOB_END_TIME")) {
        (Some(start), Some(end)) if end > start => TimeLimit::of_seconds((end - start) as f64),
        _ => TimeLimit::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_words_are_read_as_slurm_writes_them() {
        // squeue's %l: minutes:seconds, hours:minutes:seconds, days-hours:minutes:seconds.
        let limit = |t: &str| parse_squeue(t).map(|a| a.limit);
        assert_eq!(limit("11:00\n"), Ok(TimeLimit::Seconds(660.0)));
        assert_eq!(limit("2:00:00 chem\n"), Ok(TimeLimit::Seconds(7200.0)));
        assert_eq!(limit("1-00:00:00\n"), Ok(TimeLimit::Seconds(86_400.0)));
        assert_eq!(limit("UNLIMITED\n"), Ok(TimeLimit::Unlimited));
        assert_eq!(limit("INVALID\n"), Ok(TimeLimit::Unlimited));
        let account = |t: &str| parse_squeue(t).map(|a| a.account);
        assert_eq!(account("11:00 chem\n"), Ok(Some("chem".into())));
        assert_eq!(account("11:00\n"), Ok(None));
        assert_eq!(account("11:00 (null)\n"), Ok(None));
        let licenses = |t: &str| parse_squeue(t).map(|a| a.licenses);
        assert_eq!(
            licenses("11:00 chem greenup_w:640,greenup_w_debug:640\n"),
            Ok(Some("greenup_w:640,greenup_w_debug:640".into()))
        );
        assert_eq!(licenses("11:00 chem (null)\n"), Ok(None));
        assert!(parse_squeue("11:00 chem (null) extra\n").is_err());
        assert!(parse_squeue("NOT_SET\n").is_err());
        assert!(
            parse_squeue("")
                .unwrap_err()
                .to_string()
                .contains("expected one time limit")
        );
        assert!(parse_squeue("11:00\n12:00\n").is_err());
    }

    #[test]
    fn the_credential_times_are_read_only_where_slurm_sets_them() {
        let env = |start: &'static str, end: &'static str| {
            move |k: &str| match k {
                "SLURM_JOB_START_TIME" => Some(start.to_string()),
                "SLURM_JOB_END_TIME" => Some(end.to_string()),
                _ => None,
            }
        };
        let s2311 = 0x17_0b_00;
        assert_eq!(
            from_prolog_env(env("1000", "1660"), s2311),
            TimeLimit::Seconds(660.0)
        );
        // An unlimited job ends a year after it starts, as slurmctld sets it.
        assert_eq!(
            from_prolog_env(env("1000", "31537000"), s2311),
            TimeLimit::Unlimited
        );
        // 22.05 sets neither: a variable of that name there may be the user's own.
        assert_eq!(
            from_prolog_env(env("1000", "1660"), 0x16_05_08),
            TimeLimit::Unknown
        );
        assert_eq!(from_prolog_env(env("x", "1660"), s2311), TimeLimit::Unknown);
        assert_eq!(
            from_prolog_env(env("1660", "1000"), s2311),
            TimeLimit::Unknown
        );
        assert_eq!(from_prolog_env(|_| None, s2311), TimeLimit::Unknown);
    }

    #[test]
    fn a_job_limit_is_asked_of_squeue_with_exactly_these_arguments() {
        assert_eq!(squeue_args(42), ["-h", "-j", "42", "-o", "%l %a %W"]);
    }
}
