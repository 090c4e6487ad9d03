//! Asking Slurm accounting for a job's ConsumedEnergy for `greenup report`: the library
//! says what to ask (`accounting::sacct_args`) and reads the answer (`accounting::parse`);
//! this runs sacct, under a time bound, through greenup-host.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use greenup::report::accounting::{self, SlurmEnergy};
use greenup_host::command::{self, CommandError};

/// Ask Slurm accounting (the `sacct` on PATH) for a job's ConsumedEnergy, waiting at most `timeout`.
pub fn query(job_id: u64, timeout: Duration) -> SlurmEnergy {
    query_with(Path::new("sacct"), job_id, timeout)
}

/// [`query`] with a given sacct program (tests use a stand-in).
fn query_with(sacct: &Path, job_id: u64, timeout: Duration) -> SlurmEnergy {
    // sacct without a slurm.conf retries for a minute, and an unreachable slurmdbd can
    // hang: a report never waits longer than `timeout`.
    let mut cmd = Command::new(sacct);
    cmd.args(accounting::sacct_args(job_id));
    match command::run(&mut cmd, timeout) {
        Ok(f) => accounting::parse(f.status.success(), &f.stdout, &f.stderr),
        Err(CommandError::NotFound { .. }) => SlurmEnergy::NoAccounting {
            detail: format!("{} is not installed", sacct.display()),
        },
        Err(e) => SlurmEnergy::Unreachable {
            detail: e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup::report::accounting::SACCT_TIMEOUT;

    /// A stand-in sacct in `dir`, running `body`.
    fn script(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
        greenup_host::fixtures::script(dir, "sacct", body)
    }

    #[test]
    fn query_passes_the_job_and_fields_and_reads_the_answer() {
        let t = tempfile::tempdir().unwrap();
        // The stand-in answers only to exactly the arguments greenup must pass.
        let p = script(
            t.path(),
            r#"[ "$*" = "-n -P -X -j 42 -o State,ConsumedEnergyRaw" ] && echo 'COMPLETED|7000' && exit 0
echo "bad args: $*" >&2; exit 2"#,
        );
        assert_eq!(
            query_with(&p, 42, Duration::from_secs(30)),
            SlurmEnergy::Measured { joules: 7000.0 }
        );
        assert_eq!(
            query_with(&p, 43, Duration::from_secs(30)),
            SlurmEnergy::Unreachable {
                detail: "bad args: -n -P -X -j 43 -o State,ConsumedEnergyRaw".into()
            }
        );
    }

    #[test]
    fn query_gives_up_on_a_hung_sacct_and_names_a_missing_one() {
        let t = tempfile::tempdir().unwrap();
        let p = script(t.path(), "exec sleep 30");
        let e = query_with(&p, 1, Duration::from_millis(200));
        assert_eq!(e.status(), "unreachable");
        assert!(
            e.reason().unwrap().contains("no answer within 0.2 s"),
            "{e:?}"
        );
        let missing = t.path().join("no-such-sacct");
        assert_eq!(
            query_with(&missing, 1, SACCT_TIMEOUT).status(),
            "no_accounting"
        );
    }
}
