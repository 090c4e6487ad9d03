//! How stored jobs are asked for: the filters of a job listing or a listing of records,
//! and one listed job's summary. The protocol carries them; the store answers them.

use serde::{Deserialize, Serialize};

use greenup_core::quantity::{Joules, Watts};

use crate::record::{JobState, Verdict, job_id};

/// [`job_id`] for an optional field.
fn opt_job_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct Id(#[serde(deserialize_with = "job_id")] u64);
    Ok(Option::<Id>::deserialize(d)?.map(|Id(id)| id))
}

/// Filters for a job listing (the protocol's `list_jobs`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListJobs {
    /// Only this user's jobs (admins and root only may name another uid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Only jobs in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,
    /// Only jobs with a smaller id: the next page after a `truncated` reply.
    #[serde(
        default,
        deserialize_with = "opt_job_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub before_job_id: Option<u64>,
    /// At most this many jobs (default 100, at most 10,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// The most jobs one a listing of records (the protocol's `list_records`) reply holds.
pub const MAX_RECORDS: u32 = 1_000;

/// Filters for a listing of records (the protocol's `list_records`); every filter given must match.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListRecords {
    /// Only this uid's jobs (admins and root only may name another uid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Only jobs of this user name (ordinary users still see only their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Only jobs in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<JobState>,
    /// Only jobs decided with this application profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Only jobs closed at or after this time (seconds since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_since: Option<i64>,
    /// Only jobs closed before this time (seconds since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_before: Option<i64>,
    /// Only jobs with a smaller id: the next page after a `truncated` reply.
    #[serde(
        default,
        deserialize_with = "opt_job_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub before_job_id: Option<u64>,
    /// At most this many jobs (default 100, at most [`MAX_RECORDS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// One row of a job listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSummary {
    /// Slurm job id.
    pub job_id: u64,
    /// The owner's uid.
    pub uid: u32,
    /// The owner's name, when known.
    pub user: Option<String>,
    /// Partition.
    pub partition: Option<String>,
    /// Open, closed or reclaimed.
    pub state: JobState,
    /// The policy applied.
    pub policy: String,
    /// What was decided.
    pub verdict: Verdict,
    /// Nodes the plan uses (0 when unchanged).
    pub node_count: usize,
    /// Watts reserved while open.
    pub reserved_w: Watts,
    /// Predicted energy in joules, if planned.
    pub predicted_energy_j: Option<Joules>,
    /// Measured energy so far (sum over recorded nodes), in joules.
    pub measured_energy_j: Option<Joules>,
    /// Outcomes recorded.
    pub outcomes: usize,
    /// Unix seconds the job was opened.
    pub opened_at: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_jobs_figures_cross_the_wire_as_bare_numbers() {
        let s = JobSummary {
            job_id: 42,
            uid: 1000,
            user: Some("ada".into()),
            partition: Some("cpu".into()),
            state: JobState::Closed,
            policy: "min-energy".into(),
            verdict: Verdict::Planned,
            node_count: 4,
            reserved_w: Watts(1250.5),
            predicted_energy_j: Some(Joules(3.6e6)),
            measured_energy_j: Some(Joules(3_512_345.25)),
            outcomes: 4,
            opened_at: 1_700_000_000,
        };
        let line = r#"{"job_id":42,"uid":1000,"user":"ada","partition":"cpu","state":"closed","policy":"min-energy","verdict":"planned","node_count":4,"reserved_w":1250.5,"predicted_energy_j":3600000.0,"measured_energy_j":3512345.25,"outcomes":4,"opened_at":1700000000}"#;
        assert_eq!(serde_json::to_string(&s).unwrap(), line);
        assert_eq!(serde_json::from_str::<JobSummary>(line).unwrap(), s);
        let unplanned = JobSummary {
            user: None,
            partition: None,
            state: JobState::Open,
            verdict: Verdict::Unchanged,
            node_count: 0,
            reserved_w: Watts(0.0),
            predicted_energy_j: None,
            measured_energy_j: None,
            outcomes: 0,
            ..s
        };
        let line = r#"{"job_id":42,"uid":1000,"user":null,"partition":null,"state":"open","policy":"min-energy","verdict":"unchanged","node_count":0,"reserved_w":0.0,"predicted_energy_j":null,"measured_energy_j":null,"outcomes":0,"opened_at":1700000000}"#;
        assert_eq!(serde_json::to_string(&unplanned).unwrap(), line);
        assert_eq!(serde_json::from_str::<JobSummary>(line).unwrap(), unplanned);
    }
}
