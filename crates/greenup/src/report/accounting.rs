//! Slurm accounting's own energy figure for a job (ConsumedEnergy): what to ask `sacct`
//! and how to translate its answer into what a report may honestly say about it. The
//! CLI runs sacct (through `greenup-host`, under [`SACCT_TIMEOUT`]).
//!
//! Slurm prints 0 J when no energy plugin (`AcctGatherEnergyType`) counted the
//! job, and its figure is final only once the job has ended. Both cases, and a
//! cluster without accounting at all, become [`SlurmEnergy`] values that say
//! why there is no number, so no report ever shows "0 J" for "not measured".

use std::time::Duration;

use greenup_core::text::last_line;
use serde::{Deserialize, Serialize};

/// How long `greenup report` waits for sacct before saying accounting did not answer.
pub const SACCT_TIMEOUT: Duration = Duration::from_secs(5);

/// Slurm's NO_VAL64 and above: sacct's way of saying "no value recorded".
const NO_VAL64: u64 = 0xffff_ffff_ffff_fffe;

/// Slurm accounting's ConsumedEnergy for one job, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SlurmEnergy {
    /// Slurm's energy plugin measured this many joules for the finished job.
    Measured {
        /// ConsumedEnergy in joules.
        joules: f64,
    },
    /// Slurm's accounting holds the energy greenupd measured and wrote there itself
    /// (`daemon.slurm_energy`): greenup's figure, not an independent measurement.
    WrittenByGreenupd {
        /// ConsumedEnergy in joules.
        joules: f64,
    },
    /// Accounting has the finished job but reports 0 J: no energy plugin counted it.
    Zero,
    /// The job has not ended in Slurm's accounting yet, so its figure is not final.
    NotFinal,
    /// Slurm accounting has no record of the job.
    NoRecord,
    /// The cluster keeps no accounting (storage disabled, or sacct not installed).
    NoAccounting {
        /// What sacct (or the system) said.
        detail: String,
    },
    /// Accounting exists but could not be asked (slurmdbd down, sacct timed out).
    Unreachable {
        /// What went wrong.
        detail: String,
    },
    /// Nobody asked Slurm accounting for this report.
    #[default]
    NotAsked,
}

impl SlurmEnergy {
    /// What the in-job `--energy-report` paragraph may say: the job epilog that writes
    /// it runs before Slurm's accounting of the job is final, so sacct is not asked.
    pub fn in_job_epilog() -> Self {
        SlurmEnergy::NotFinal
    }

    /// What accounting says once greenupd's record is known: a figure equal to the one
    /// greenupd wrote there (`written`, whole joules) is greenupd's, not Slurm's own.
    pub fn written_by_greenupd(self, written: Option<u64>) -> Self {
        match (self, written) {
            // sacct prints whole joules, so the figure written comes back exactly.
            (SlurmEnergy::Measured { joules }, Some(w)) if (joules - w as f64).abs() < 0.5 => {
                SlurmEnergy::WrittenByGreenupd { joules }
            }
            (e, _) => e,
        }
    }

    /// The joules accounting holds; `None` for every "not available" case (a 0 is never a
    /// figure).
    pub fn joules(&self) -> Option<f64> {
        match self {
            SlurmEnergy::Measured { joules } | SlurmEnergy::WrittenByGreenupd { joules }
                if *joules > 0.0 && joules.is_finite() =>
            {
                Some(*joules)
            }
            _ => None,
        }
    }

    /// Why there is no figure, in a site admin's words; `None` when there is one.
    pub fn reason(&self) -> Option<String> {
        Some(match self {
            SlurmEnergy::Measured { .. } | SlurmEnergy::WrittenByGreenupd { .. }
                if self.joules().is_some() =>
            {
                return None;
            }
            SlurmEnergy::Measured { .. }
            | SlurmEnergy::WrittenByGreenupd { .. }
            | SlurmEnergy::Zero => {
                "Slurm accounting measured 0 J: no energy plugin counted this job".to_string()
            }
            SlurmEnergy::NotFinal => "Slurm accounting is final only after the job ends".into(),
            SlurmEnergy::NoRecord => "Slurm accounting has no record of this job".into(),
            SlurmEnergy::NoAccounting { detail } => format!("no Slurm accounting: {detail}"),
            SlurmEnergy::Unreachable { detail } => {
                format!("Slurm accounting did not answer: {detail}")
            }
            SlurmEnergy::NotAsked => "Slurm accounting was not asked".into(),
        })
    }

    /// The status word used in CSV (`measured`, `zero`, `not_final`, ...).
    pub fn status(&self) -> &'static str {
        match self {
            SlurmEnergy::Measured { .. } if self.joules().is_some() => "measured",
            SlurmEnergy::WrittenByGreenupd { .. } if self.joules().is_some() => {
                "written_by_greenupd"
            }
            SlurmEnergy::Measured { .. }
            | SlurmEnergy::WrittenByGreenupd { .. }
            | SlurmEnergy::Zero => "zero",
            SlurmEnergy::NotFinal => "not_final",
            SlurmEnergy::NoRecord => "no_record",
            SlurmEnergy::NoAccounting { .. } => "no_accounting",
            SlurmEnergy::Unreachable { .. } => "unreachable",
            SlurmEnergy::NotAsked => "not_asked",
        }
    }
}

/// States after which Slurm no longer adds to a job's accounting.
fn is_final(state: &str) -> bool {
    // sacct appends who cancelled: "CANCELLED by 1001".
    let word = state.split_whitespace().next().unwrap_or("");
    matches!(
        word,
        "COMPLETED"
            | "CANCELLED"
            | "FAILED"
            | "TIMEOUT"
            | "PREEMPTED"
            | "NODE_FAIL"
            | "OUT_OF_MEMORY"
            | "BOOT_FAIL"
            | "DEADLINE"
    )
}

/// Translate what `sacct -n -P -X -j JOBID -o State,ConsumedEnergyRaw` printed.
///
/// `success` is sacct's exit status. A heterogeneous job prints one line per
/// component; their energies add up, and the job is final only when all are.
pub fn parse(success: bool, stdout: &str, stderr: &str) -> SlurmEnergy {
    if !success {
        let detail = last_line(stderr);
        // What sacct says when slurm.conf has AccountingStorageType=accounting_storage/none.
        return if stderr.contains("accounting storage is disabled") {
            SlurmEnergy::NoAccounting { detail }
        } else {
            SlurmEnergy::Unreachable { detail }
        };
    }
    let mut total: u64 = 0;
    let mut seen = false;
    for line in stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let Some((state, energy)) = line.split_once('|') else {
            return SlurmEnergy::Unreachable {
                detail: format!("unexpected sacct line {line:?}"),
            };
        };
        seen = true;
        if !is_final(state) {
            return SlurmEnergy::NotFinal;
        }
        let energy = energy.trim_end_matches('|').trim();
        let joules = if energy.is_empty() {
            0
        } else {
            match energy.parse::<u64>() {
                Ok(j) if j >= NO_VAL64 => 0,
                Ok(j) => j,
                Err(_) => {
                    return SlurmEnergy::Unreachable {
                        detail: format!("unexpected ConsumedEnergyRaw {energy:?}"),
                    };
                }
            }
        };
        total = total.saturating_add(joules);
    }
    match (seen, total) {
        (false, _) => SlurmEnergy::NoRecord,
        (true, 0) => SlurmEnergy::Zero,
        (true, j) => SlurmEnergy::Measured { joules: j as f64 },
    }
}

/// The arguments that make sacct print each of a job's components' state and
/// ConsumedEnergy in joules, one `STATE|JOULES` line each, as [`parse`] reads them.
pub fn sacct_args(job_id: u64) -> [String; 7] {
    [
        "-n".into(),
        "-P".into(),
        "-X".into(),
        "-j".into(),
        job_id.to_string(),
        "-o".into(),
        "State,ConsumedEnergyRaw".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_job_with_an_energy_plugin_has_its_joules() {
        let e = parse(true, "COMPLETED|123456\n", "");
        assert_eq!(e, SlurmEnergy::Measured { joules: 123_456.0 });
        assert_eq!(e.joules(), Some(123_456.0));
        assert_eq!(e.reason(), None);
        assert_eq!(e.status(), "measured");
    }

    #[test]
    fn heterogeneous_components_add_up() {
        let e = parse(true, "COMPLETED|1000\nCANCELLED by 1001|250\n", "");
        assert_eq!(e.joules(), Some(1250.0));
    }

    #[test]
    fn zero_empty_and_no_value_are_not_a_figure() {
        // Slurm 22.05 without an energy plugin prints "COMPLETED|" for the allocation.
        for out in [
            "COMPLETED|\n",
            "COMPLETED|0\n",
            "TIMEOUT|18446744073709551614\n",
        ] {
            let e = parse(true, out, "");
            assert_eq!(e, SlurmEnergy::Zero, "{out:?}");
            assert_eq!(e.joules(), None);
            assert!(e.reason().unwrap().contains("measured 0 J"), "{out:?}");
        }
        // A stored Measured { 0 } (hand-written JSON) is not a figure either.
        assert_eq!(SlurmEnergy::Measured { joules: 0.0 }.joules(), None);
        assert_eq!(SlurmEnergy::Measured { joules: 0.0 }.status(), "zero");
    }

    #[test]
    fn a_running_job_is_not_final_even_with_energy_so_far() {
        for out in ["RUNNING|500\n", "PENDING|0\n", "COMPLETED|9\nRUNNING|1\n"] {
            assert_eq!(parse(true, out, ""), SlurmEnergy::NotFinal, "{out:?}");
        }
    }

    #[test]
    fn an_unknown_job_has_no_record() {
        assert_eq!(parse(true, "", ""), SlurmEnergy::NoRecord);
        assert_eq!(parse(true, "\n", ""), SlurmEnergy::NoRecord);
    }

    #[test]
    fn disabled_storage_is_no_accounting_and_a_dead_slurmdbd_is_unreachable() {
        // What Slurm 22.05's sacct prints with accounting_storage/none (exit 1).
        let e = parse(false, "", "Slurm accounting storage is disabled\n");
        assert_eq!(
            e,
            SlurmEnergy::NoAccounting {
                detail: "Slurm accounting storage is disabled".into()
            }
        );
        // ... and with accounting_storage/slurmdbd but no slurmdbd listening (exit 1).
        let err = "sacct: error: slurm_persist_conn_open_without_init: failed to open persistent connection to host:localhost:6819: Connection refused\n\
                   sacct: error: Sending PersistInit msg: Connection refused\n\
                   sacct: error: Problem talking to the database: Connection refused\n";
        let e = parse(false, "", err);
        assert_eq!(e.status(), "unreachable");
        assert_eq!(
            e.reason().unwrap(),
            "Slurm accounting did not answer: sacct: error: Problem talking to the database: Connection refused"
        );
    }

    #[test]
    fn garbage_is_reported_not_guessed() {
        assert_eq!(parse(true, "COMPLETED|12kJ\n", "").status(), "unreachable");
        assert_eq!(parse(true, "COMPLETED\n", "").status(), "unreachable");
    }

    #[test]
    fn serialised_with_a_status_tag() {
        let v = serde_json::to_value(SlurmEnergy::Zero).unwrap();
        assert_eq!(v, serde_json::json!({"status": "zero"}));
        let v = serde_json::to_value(SlurmEnergy::Measured { joules: 5.0 }).unwrap();
        assert_eq!(v, serde_json::json!({"status": "measured", "joules": 5.0}));
    }

    #[test]
    fn a_figure_greenupd_wrote_is_told_apart_from_slurms_own() {
        let slurm = SlurmEnergy::Measured { joules: 4321.0 };
        let ours = slurm.clone().written_by_greenupd(Some(4321));
        assert_eq!(ours, SlurmEnergy::WrittenByGreenupd { joules: 4321.0 });
        assert_eq!(ours.joules(), Some(4321.0));
        assert_eq!(ours.status(), "written_by_greenupd");
        // Nothing written, or a figure someone changed since: Slurm's, as read.
        assert_eq!(slurm.clone().written_by_greenupd(None), slurm);
        assert_eq!(slurm.clone().written_by_greenupd(Some(9999)), slurm);
        assert_eq!(
            SlurmEnergy::NotAsked.written_by_greenupd(Some(4321)),
            SlurmEnergy::NotAsked
        );
    }

    #[test]
    fn sacct_is_asked_for_the_job_and_exactly_these_fields() {
        assert_eq!(
            sacct_args(42),
            [
                "-n",
                "-P",
                "-X",
                "-j",
                "42",
                "-o",
                "State,ConsumedEnergyRaw"
            ]
        );
    }
}
