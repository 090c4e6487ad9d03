//! Writing a finished job's measured energy into Slurm's accounting (`daemon.slurm_energy`):
//! which figure, the `sacctmgr` command line, and what its answer means.
//!
//! Slurm 25.11 and later let `sacctmgr modify job jobid=J set TRES=energy=N` change a
//! finished job's energy TRES, which sacct then shows as ConsumedEnergy. Older Slurm
//! (22.05, 24.11) refuses the option. sacctmgr modifies only jobs whose end accounting
//! has, and greenupd's close comes from the first node's epilog while the job is still
//! COMPLETING, so a write may have to wait.

use greenup::record::{JobRecord, JobState, Source};
use greenup_core::quantity::Joules;

/// Whether a record's energy can be written, or why not.
#[derive(Debug, Clone, PartialEq)]
pub enum Energy {
    /// Every allocated node measured the job: this many whole joules (CPU plus GPU
    /// where GPUs were measured).
    Ready(u64),
    /// Some allocated node has sent no outcome yet: it may still.
    Waiting,
    /// Never for this run: not closed, a node without a meter, a GPU unmeasured.
    Never(&'static str),
}

/// The energy to write for `rec`, by the rule the report uses for the job's total: only
/// when every allocated node measured it, so a partial sum never reaches accounting.
pub fn energy_of(rec: &JobRecord) -> Energy {
    if rec.state != JobState::Closed {
        return Energy::Never("the job is not closed");
    }
    if rec.request.nodes.is_empty() {
        return Energy::Never("the job has no nodes");
    }
    // By node, once: a job of thousands of nodes would otherwise be searched per node.
    let by_node: std::collections::HashMap<&str, &greenup::record::NodeOutcome> =
        rec.outcomes.iter().map(|o| (o.node.as_str(), o)).collect();
    let mut total = Joules(0.0);
    for node in &rec.request.nodes {
        let Some(o) = by_node.get(node.as_str()) else {
            return Energy::Waiting;
        };
        let Some(cpu) = o.measured_energy_j() else {
            return Energy::Never("a node did not measure the job's energy");
        };
        // Read from Slurm's own accounting: writing it back would only echo Slurm.
        if o.source == Some(Source::Slurm) {
            return Energy::Never("the energy came from Slurm's accounting itself");
        }
        total += cpu;
        // A GPU's energy missing would understate the job: nothing is better than that.
        if let Some(g) = &o.gpu {
            match g.energy_j {
                Some(j) => total += j,
                None => return Energy::Never("a node did not measure its GPUs' energy"),
            }
        }
    }
    // sacctmgr takes whole joules; u64::MAX would be Slurm's "no value" anyway.
    let Joules(total) = total;
    if !total.is_finite() || !(1.0..1e18).contains(&total) {
        return Energy::Never("the measured energy is not a usable figure");
    }
    Energy::Ready(total.round() as u64)
}

/// sacctmgr's arguments that set job `job_id`'s energy to `joules`: numbers only, so no
/// user's text ever reaches the command line (`-i`: no confirmation prompt).
pub fn sacctmgr_args(job_id: u64, joules: u64) -> Vec<String> {
    vec![
        "-i".into(),
        "modify".into(),
        "job".into(),
        format!("jobid={job_id}"),
        "set".into(),
        format!("TRES=energy={joules}"),
    ]
}

/// What sacctmgr's answer means.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Accounting now holds the energy.
    Written,
    /// Nothing was modified: accounting does not have the job's end yet. Ask again later.
    NotYet,
    /// This Slurm's sacctmgr cannot set a job's TRES (before 25.11): its words.
    Unsupported(String),
    /// Anything else (slurmdbd down, a time-out): its words. Ask again later.
    Failed(String),
}

/// Read what `sacctmgr -i modify job ...` printed and how it exited.
///
/// A change prints " Modified jobs..." and the ids (26.05.5, seen; it changes a running
/// job too, so greenupd asks only once sacct shows the end); an option it does not know
/// for jobs prints " Unknown option: TRES=energy=N" and exits 1 (22.05.8, seen). Assumed
/// from sacctmgr's source: a job it would not change prints " Nothing modified". Case
/// and surrounding blanks are ignored, and a refusal naming the TRES option counts as
/// "cannot" only when the words say unknown or invalid.
pub fn parse_answer(success: bool, stdout: &str, stderr: &str) -> Answer {
    let all = format!("{stdout}\n{stderr}");
    let lower = all.to_ascii_lowercase();
    let words = || {
        all.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    };
    if lower.contains("nothing modified") {
        return Answer::NotYet;
    }
    let unknown = lower.contains("unknown option")
        || lower.contains("unknown field")
        || lower.contains("unrecognized option")
        || (lower.contains("tres") && lower.contains("invalid"));
    if unknown {
        return Answer::Unsupported(words());
    }
    if success && lower.contains("modified job") {
        return Answer::Written;
    }
    Answer::Failed(if words().is_empty() {
        format!(
            "sacctmgr exited {} without a word",
            if success { "0" } else { "non-zero" }
        )
    } else {
        words()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup::record::{NodeGpu, NodeOutcome};

    fn outcome(node: &str, energy: Option<f64>, source: Option<Source>) -> NodeOutcome {
        NodeOutcome {
            job_id: 9,
            node: node.into(),
            freq_ghz: None,
            energy_j: energy.map(Joules),
            elapsed_s: Some(greenup_core::quantity::Seconds(10.0)),
            source,
            restored: true,
            note: None,
            comm: None,
            gpu: None,
            power: None,
            restart_count: None,
        }
    }

    fn record(nodes: &[&str], outcomes: Vec<NodeOutcome>) -> JobRecord {
        let mut rec: JobRecord = serde_json::from_value(serde_json::json!({
            "job_id": 9, "uid": 0, "user": null, "partition": null, "state": "closed",
            "end": null, "opened_at": 0, "closed_at": 1,
            "request": {"job_id": 9, "uid": 0, "nodes": [], "time_limit_s": 60},
            "decision": {"job_id": 9, "verdict": "unchanged", "reason": "", "policy": "monitor",
                "profile": null, "profile_version": null, "power_cap_w": null,
                "reserved_w": 0.0, "plan": null, "decided_at": 0},
            "outcomes": []
        }))
        .expect("a valid record");
        rec.request.nodes = nodes.iter().map(|n| n.to_string()).collect();
        rec.outcomes = outcomes;
        rec
    }

    #[test]
    fn every_node_measured_sums_and_rounds_to_whole_joules() {
        let r = record(
            &["n1", "n2"],
            vec![
                outcome("n1", Some(1000.4), Some(Source::Rapl)),
                outcome("n2", Some(2000.3), Some(Source::Rapl)),
            ],
        );
        assert_eq!(energy_of(&r), Energy::Ready(3001));
    }

    #[test]
    fn gpu_energy_is_added_and_an_unmeasured_gpu_writes_nothing() {
        let mut o = outcome("n1", Some(1000.0), Some(Source::Rapl));
        let gpu = |e| {
            Some(Box::new(NodeGpu {
                gpus: 1,
                source: Default::default(),
                energy_j: e,
                avg_power_w: None,
                sm_mhz: None,
                util_pct: None,
                note: None,
            }))
        };
        o.gpu = gpu(Some(Joules(500.0)));
        assert_eq!(
            energy_of(&record(&["n1"], vec![o.clone()])),
            Energy::Ready(1500)
        );
        o.gpu = gpu(None);
        assert!(matches!(
            energy_of(&record(&["n1"], vec![o])),
            Energy::Never(_)
        ));
    }

    #[test]
    fn a_node_still_to_report_waits_and_an_unmeasured_one_never_writes() {
        let one = vec![outcome("n1", Some(1000.0), Some(Source::Rapl))];
        assert_eq!(energy_of(&record(&["n1", "n2"], one)), Energy::Waiting);
        let estimated = vec![
            outcome("n1", Some(1000.0), Some(Source::Rapl)),
            outcome("n2", Some(1000.0), Some(Source::Unmeasured)),
        ];
        assert!(matches!(
            energy_of(&record(&["n1", "n2"], estimated)),
            Energy::Never(_)
        ));
        let mut open = record(&["n1"], vec![outcome("n1", Some(1.0), Some(Source::Rapl))]);
        open.state = JobState::Open;
        assert!(matches!(energy_of(&open), Energy::Never(_)));
    }

    #[test]
    fn the_command_line_carries_only_numbers() {
        assert_eq!(
            sacctmgr_args(1234, 4321),
            [
                "-i",
                "modify",
                "job",
                "jobid=1234",
                "set",
                "TRES=energy=4321"
            ]
        );
    }

    #[test]
    fn sacctmgr_answers_are_read() {
        // 26.05 on a finished job (tests/slurm24/hres.sh H6).
        assert_eq!(
            parse_answer(true, " Modified jobs...\n  1234\n", ""),
            Answer::Written
        );
        // A job accounting has not ended yet.
        assert_eq!(
            parse_answer(false, " Nothing modified\n", ""),
            Answer::NotYet
        );
        // 22.05 and 24.11: the option is not one sacctmgr knows for jobs.
        let old = parse_answer(
            false,
            "",
            " Unknown option: TRES=energy=4321\n Use keyword 'where' to modify condition\n",
        );
        assert_eq!(
            old,
            Answer::Unsupported(
                "Unknown option: TRES=energy=4321 Use keyword 'where' to modify condition".into()
            )
        );
        assert!(matches!(
            parse_answer(false, "", "sacctmgr: error: Problem talking to the database\n"),
            Answer::Failed(w) if w.contains("Problem talking")
        ));
        assert!(matches!(parse_answer(true, "", ""), Answer::Failed(_)));
    }
}
