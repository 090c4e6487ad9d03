//! greenupd's wire protocol: one JSON object per line, version 1.
//!
//! A request line is `{"v":1,"cred":"MUNGE:...","req":{"op":"open_job",...}}`.
//! The MUNGE credential's payload is the exact bytes of `req`, so a credential
//! cannot be moved onto another request. A reply line is
//! `{"v":1,"ok":true,"reply":{"kind":...}}` or
//! `{"v":1,"ok":false,"error":{"code":...,"message":...}}`.
//! docs/protocol.md is the reference for site admins and other clients.
//!
//! This module builds without the `daemon` feature: the SPANK plugin uses it.

use serde::{Deserialize, Serialize};

use crate::plan::{Algorithm, Plan};

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;

/// The longest line (request or reply) either side accepts, newline excluded.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The largest job id greenupd takes: the store keeps ids as signed 64-bit integers.
pub const MAX_JOB_ID: u64 = i64::MAX as u64;

/// Bytes of a record's JSON text in one [`Reply::JobPart`]: escaped inside a reply
/// string it at most doubles, so a part always fits in a line.
pub const PART_BYTES: usize = MAX_LINE_BYTES / 4;

/// The one rule for a job id on the wire: 1 to [`MAX_JOB_ID`], checked as the request
/// is read, so an id the store cannot hold is a `bad_request`, never a store failure.
fn job_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let id = u64::deserialize(d)?;
    if (1..=MAX_JOB_ID).contains(&id) {
        Ok(id)
    } else {
        Err(serde::de::Error::custom(format!(
            "job id {id} is out of range: expected a Slurm job id, 1 to {MAX_JOB_ID}"
        )))
    }
}

/// [`job_id`] for an optional field.
fn opt_job_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct Id(#[serde(deserialize_with = "job_id")] u64);
    Ok(Option::<Id>::deserialize(d)?.map(|Id(id)| id))
}

/// One request line as a client writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestLine {
    /// Protocol version; always [`VERSION`].
    pub v: u32,
    /// MUNGE credential whose payload is the serialized `req`; may be absent on the Unix socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cred: Option<String>,
    /// The request.
    pub req: Request,
}

/// A request to greenupd.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Make (or fetch) the job's decision. Idempotent by job id. Root or SlurmUser only.
    OpenJob(OpenJob),
    /// One node's settings for a job that is already open.
    NodeSettings {
        /// Slurm job id.
        #[serde(deserialize_with = "job_id")]
        job_id: u64,
        /// The node asking.
        node: String,
    },
    /// Record one node's measured outcome. Root or SlurmUser only.
    RecordOutcome(NodeOutcome),
    /// Close a job and release its power reservation. Root or SlurmUser only.
    CloseJob {
        /// Slurm job id.
        #[serde(deserialize_with = "job_id")]
        job_id: u64,
        /// How the job ended, e.g. `completed`, `failed`, `cancelled`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<String>,
    },
    /// One job with its decision and outcomes.
    GetJob {
        /// Slurm job id.
        #[serde(deserialize_with = "job_id")]
        job_id: u64,
    },
    /// Part of one job's record as JSON text, for a record too large for one reply
    /// (a job of thousands of nodes); the parts joined are what get_job would send.
    GetJobPart {
        /// Slurm job id.
        #[serde(deserialize_with = "job_id")]
        job_id: u64,
        /// Byte offset into the record's JSON text.
        offset: u64,
    },
    /// Jobs, newest first; ordinary users see only their own.
    ListJobs(ListJobs),
    /// Whole jobs (request, decision, outcomes), newest first, in one reply; ordinary
    /// users see only their own. What `greenup jobs` and `greenup app` print.
    ListRecords(ListRecords),
    /// The ledger, the daemon's version and counts.
    Status {},
}

impl Request {
    /// The request's `op` name, for logs and latency tables.
    pub fn op(&self) -> &'static str {
        match self {
            Request::OpenJob(_) => "open_job",
            Request::NodeSettings { .. } => "node_settings",
            Request::RecordOutcome(_) => "record_outcome",
            Request::CloseJob { .. } => "close_job",
            Request::GetJob { .. } => "get_job",
            Request::GetJobPart { .. } => "get_job_part",
            Request::ListJobs(_) => "list_jobs",
            Request::ListRecords(_) => "list_records",
            Request::Status {} => "status",
        }
    }
}

/// What the plugin knows about a job when it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenJob {
    /// Slurm job id.
    #[serde(deserialize_with = "job_id")]
    pub job_id: u64,
    /// The job owner's uid.
    pub uid: u32,
    /// The job owner's name, when known (for listings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Slurm partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// The allocated nodes, expanded, in Slurm order.
    pub nodes: Vec<String>,
    /// The fewest nodes the job accepts (a shrink never goes below it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_nodes: Option<usize>,
    /// The job's time limit in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_s: Option<f64>,
    /// The policy asked for; the site default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The application profile name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The user's energy cap in joules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_cap_j: Option<f64>,
    /// The user's power cap in watts (the ledger may lower it, never raise it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_cap_w: Option<f64>,
    /// The optimizer; the exact sweep when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<Algorithm>,
}

/// One node's measured outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeOutcome {
    /// Slurm job id.
    #[serde(deserialize_with = "job_id")]
    pub job_id: u64,
    /// The node reporting.
    pub node: String,
    /// Frequency the node actually ran at, in GHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_ghz: Option<f64>,
    /// Measured energy in joules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Measured wall time in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// Where the energy came from: `rapl`, `slurm`, `nvml` or `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Whether the node restored its settings cleanly.
    #[serde(default = "yes")]
    pub restored: bool,
    /// Anything the node wants recorded (a warning, a fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn yes() -> bool {
    true
}

/// Filters for [`Request::ListJobs`].
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

/// The most jobs one [`Request::ListRecords`] reply holds.
pub const MAX_RECORDS: u32 = 1_000;

/// Filters for [`Request::ListRecords`]; every filter given must match.
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

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Decided and holding a power reservation.
    Open,
    /// Closed by Slurm's epilog; reservation released.
    Closed,
    /// Gone from Slurm without a close, or past its time limit plus grace; reservation reclaimed.
    Reclaimed,
}

impl JobState {
    /// The lowercase name used on the wire and in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Open => "open",
            JobState::Closed => "closed",
            JobState::Reclaimed => "reclaimed",
        }
    }

    /// Parse the lowercase name.
    pub fn parse(s: &str) -> Option<JobState> {
        match s {
            "open" => Some(JobState::Open),
            "closed" => Some(JobState::Closed),
            "reclaimed" => Some(JobState::Reclaimed),
            _ => None,
        }
    }
}

/// What greenupd decided for a job, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Apply the plan.
    Planned,
    /// The budget could not fit the policy's choice; the plan is the lowest-power configuration.
    BudgetLimited,
    /// Run the job as submitted (no profile, `monitor` policy, or `over_budget: unchanged`).
    Unchanged,
    /// greenup does not manage the job: the budget is used up and the site refuses
    /// (`over_budget: refuse`), or no plan can be made for what the job asked (a
    /// policy the site does not allow, a bad profile, an invalid cap). The reason says
    /// which; under `enforce: open` the job runs unmanaged and holds its nodes' full power.
    Refused,
}

impl Verdict {
    /// Whether a job decided so, reserving `reserved_w`, holds it in the ledger; see
    /// [`Decision::holds_reservation`].
    pub fn holds_reservation(self, reserved_w: f64) -> bool {
        self != Verdict::Refused || reserved_w > 0.0
    }
}

/// A job's stored decision: the same for every node that asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Slurm job id.
    pub job_id: u64,
    /// What to do.
    pub verdict: Verdict,
    /// Why, in one line (empty when there is nothing to say).
    pub reason: String,
    /// The policy applied.
    pub policy: String,
    /// The profile used, if any.
    pub profile: Option<String>,
    /// The profile's version, if any.
    pub profile_version: Option<String>,
    /// The power cap the plan was made under (the user's cap or the budget left, whichever is lower).
    pub power_cap_w: Option<f64>,
    /// Watts reserved in the ledger for this job.
    pub reserved_w: f64,
    /// The plan, when there is one.
    pub plan: Option<Plan>,
    /// Unix seconds when the decision was made.
    pub decided_at: i64,
    /// For a refused job, the error every node is answered with (`over_budget`,
    /// `plan_failed`, `bad_request`); absent in decisions stored before it existed,
    /// which were all `over_budget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<ErrorCode>,
}

impl Decision {
    /// Whether the job holds its `reserved_w` in the ledger until it is closed: every
    /// job greenup manages, and a refused one that still runs (unmanaged, at full
    /// power) under `enforce: open`. A refused job that holds nothing fails under
    /// `enforce: strict` and is closed as it is stored.
    pub fn holds_reservation(&self) -> bool {
        self.verdict.holds_reservation(self.reserved_w)
    }

    /// The frequency (GHz) this node should run at, or `None` to leave it alone.
    pub fn freq_for(&self, node: &str) -> Option<f64> {
        match self.verdict {
            Verdict::Planned | Verdict::BudgetLimited => self
                .plan
                .as_ref()?
                .nodes
                .iter()
                .find(|n| n.name == node)
                .map(|n| n.freq_ghz),
            Verdict::Unchanged | Verdict::Refused => None,
        }
    }
}

/// One node's part of a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSettings {
    /// Slurm job id.
    pub job_id: u64,
    /// The node.
    pub node: String,
    /// Whether the plan uses this node (false: the job is shrunk off it).
    pub used: bool,
    /// Frequency to set in GHz; `None` leaves the node as it is.
    pub freq_ghz: Option<f64>,
    /// The job's verdict.
    pub verdict: Verdict,
}

/// A job as stored: request, decision, outcomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
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
    /// How the job ended, when closed.
    pub end: Option<String>,
    /// Unix seconds the job was opened.
    pub opened_at: i64,
    /// Unix seconds it was closed or reclaimed.
    pub closed_at: Option<i64>,
    /// The request that opened it.
    pub request: OpenJob,
    /// The decision.
    pub decision: Decision,
    /// Outcomes recorded so far, by node name.
    pub outcomes: Vec<NodeOutcome>,
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
    pub reserved_w: f64,
    /// Predicted energy in joules, if planned.
    pub predicted_energy_j: Option<f64>,
    /// Measured energy so far (sum over recorded nodes), in joules.
    pub measured_energy_j: Option<f64>,
    /// Outcomes recorded.
    pub outcomes: usize,
    /// Unix seconds the job was opened.
    pub opened_at: i64,
}

/// One cap in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetLine {
    /// `site` or the partition's name.
    pub scope: String,
    /// The cap in watts (`None`: no cap).
    pub cap_w: Option<f64>,
    /// Watts reserved by open jobs.
    pub reserved_w: f64,
    /// Watts still free (`None`: no cap).
    pub free_w: Option<f64>,
    /// Open jobs counted here.
    pub jobs: usize,
}

/// greenupd's state at a glance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// greenupd's version.
    pub version: String,
    /// Protocol version.
    pub protocol: u32,
    /// Seconds since start.
    pub uptime_s: u64,
    /// The site config in use.
    pub config: String,
    /// Jobs currently open.
    pub open_jobs: u64,
    /// Jobs ever stored.
    pub total_jobs: u64,
    /// Node outcomes ever stored.
    pub outcomes: u64,
    /// Connections being served now.
    pub connections: u64,
    /// The site line first, then one per partition.
    pub ledger: Vec<BudgetLine>,
}

/// The body of a successful reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    /// The job's decision (open_job).
    Decision(Decision),
    /// One node's settings (node_settings).
    NodeSettings(NodeSettings),
    /// The write is stored (record_outcome, close_job).
    Stored {
        /// Slurm job id.
        job_id: u64,
        /// False when the same thing was already stored (a repeat is harmless).
        new: bool,
    },
    /// One job (get_job).
    Job(Box<JobRecord>),
    /// Jobs (list_jobs).
    Jobs {
        /// The jobs, newest first.
        jobs: Vec<JobSummary>,
        /// More jobs match: ask again with `before_job_id` set to the last job's id.
        #[serde(default)]
        truncated: bool,
    },
    /// Whole jobs (list_records).
    Records {
        /// The jobs, newest first.
        jobs: Vec<JobRecord>,
        /// More jobs match: ask again with `before_job_id` set to the last job's id.
        truncated: bool,
        /// The next job matching is too large for any reply: fetch it with
        /// get_job_part, then ask again with `before_job_id` set to its id.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        oversized: Option<u64>,
    },
    /// Part of a job's record (get_job_part).
    JobPart {
        /// Slurm job id.
        job_id: u64,
        /// Byte offset of `text` in the record's JSON text.
        offset: u64,
        /// Length of the whole JSON text in bytes.
        total: u64,
        /// At most [`PART_BYTES`] bytes of it, cut on a character boundary.
        text: String,
    },
    /// Status (status).
    Status(Status),
}

/// Why a request failed. Clients branch on these; messages are for people.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not JSON, or not a request object.
    BadJson,
    /// The `v` field is missing or not a version this daemon speaks.
    BadVersion,
    /// Unknown `op`, or a field is missing or has the wrong type.
    BadRequest,
    /// The line is longer than [`MAX_LINE_BYTES`].
    TooLong,
    /// No MUNGE credential on a TCP request.
    CredMissing,
    /// The credential has expired.
    CredExpired,
    /// The credential was already used.
    CredReplayed,
    /// The credential is forged, damaged or from another realm.
    CredInvalid,
    /// The credential was made for another request.
    CredMismatch,
    /// MUNGE itself failed (munged down?).
    AuthUnavailable,
    /// The caller may not do this.
    Forbidden,
    /// No such job.
    NotFound,
    /// The job was opened before with different facts, or is already closed.
    Conflict,
    /// The power budget cannot fit the job and the site refuses.
    OverBudget,
    /// The decision could not be made (unknown policy, bad profile...).
    PlanFailed,
    /// The store could not save the change; nothing was acknowledged.
    StoreFailed,
    /// Too many connections; try again.
    Busy,
    /// The client was too slow.
    Timeout,
    /// A fault inside greenupd.
    Internal,
}

/// A refusal or failure, in one line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// Machine-readable cause.
    pub code: ErrorCode,
    /// What went wrong and what would be valid.
    pub message: String,
}

impl std::fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = serde_json::to_value(self.code)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned));
        write!(
            f,
            "{}: {}",
            code.as_deref().unwrap_or("error"),
            self.message
        )
    }
}

impl ErrorReply {
    /// An error reply with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorReply {
            code,
            message: message.into(),
        }
    }
}

/// One reply line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyLine {
    /// Protocol version.
    pub v: u32,
    /// Whether the request succeeded.
    pub ok: bool,
    /// The result, when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<Reply>,
    /// The failure, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorReply>,
}

impl ReplyLine {
    /// A success line.
    pub fn ok(reply: Reply) -> Self {
        ReplyLine {
            v: VERSION,
            ok: true,
            reply: Some(reply),
            error: None,
        }
    }

    /// A failure line.
    pub fn err(error: ErrorReply) -> Self {
        ReplyLine {
            v: VERSION,
            ok: false,
            reply: None,
            error: Some(error),
        }
    }

    /// The line's result.
    pub fn into_result(self) -> Result<Reply, ErrorReply> {
        match (self.ok, self.reply, self.error) {
            (true, Some(r), _) => Ok(r),
            (false, _, Some(e)) => Err(e),
            _ => Err(ErrorReply::new(
                ErrorCode::Internal,
                "reply has neither a result nor an error",
            )),
        }
    }

    /// The line as JSON with a trailing newline.
    pub fn to_line(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec(self).unwrap_or_else(|_| {
            br#"{"v":1,"ok":false,"error":{"code":"internal","message":"reply could not be serialized"}}"#.to_vec()
        });
        out.push(b'\n');
        out
    }
}

/// Serialize a request body exactly as it is sent and credentialed.
pub fn request_body(req: &Request) -> Result<String, serde_json::Error> {
    serde_json::to_string(req)
}

/// Build a request line from a serialized body and an optional credential.
///
/// The body is embedded verbatim, so the server sees the same bytes the credential binds.
pub fn request_line(body: &str, cred: Option<&str>) -> Result<Vec<u8>, serde_json::Error> {
    let mut out = Vec::with_capacity(body.len() + cred.map_or(0, str::len) + 32);
    out.extend_from_slice(br#"{"v":"#);
    out.extend_from_slice(VERSION.to_string().as_bytes());
    if let Some(c) = cred {
        out.extend_from_slice(br#","cred":"#);
        serde_json::to_writer(&mut out, c)?;
    }
    out.extend_from_slice(br#","req":"#);
    out.extend_from_slice(body.as_bytes());
    out.extend_from_slice(b"}\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_line_round_trips_and_embeds_body_verbatim() {
        let req = Request::CloseJob {
            job_id: 42,
            end: Some("completed".into()),
        };
        let body = request_body(&req).unwrap();
        let line = request_line(&body, Some("MUNGE:abc\"x")).unwrap();
        let text = std::str::from_utf8(&line).unwrap();
        assert!(text.ends_with('\n'));
        assert!(text.contains(&body));
        let parsed: RequestLine = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(parsed.v, 1);
        assert_eq!(parsed.cred.as_deref(), Some("MUNGE:abc\"x"));
        assert_eq!(parsed.req, req);
    }

    #[test]
    fn unknown_op_and_unknown_field_are_rejected() {
        assert!(serde_json::from_str::<Request>(r#"{"op":"explode"}"#).is_err());
        // Every op refuses a field it does not know, `status` included.
        for bad in [
            r#"{"op":"status","x":1}"#,
            r#"{"op":"open_job","job_id":1,"uid":0,"nodes":["n1"],"x":1}"#,
            r#"{"op":"node_settings","job_id":1,"node":"n1","x":1}"#,
            r#"{"op":"record_outcome","job_id":1,"node":"n1","x":1}"#,
            r#"{"op":"close_job","job_id":1,"x":1}"#,
            r#"{"op":"get_job_part","job_id":1,"offset":0,"x":1}"#,
            r#"{"op":"list_jobs","x":1}"#,
            r#"{"op":"list_records","x":1}"#,
        ] {
            let e = serde_json::from_str::<Request>(bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("unknown field"), "{bad}: {e}");
        }
        assert!(
            serde_json::from_str::<RequestLine>(r#"{"v":1,"req":{"op":"status"},"x":1}"#).is_err()
        );
        assert!(serde_json::from_str::<Request>(r#"{"op":"get_job","job_id":1,"x":2}"#).is_err());
        assert_eq!(
            serde_json::from_str::<Request>(r#"{"op":"status"}"#).unwrap(),
            Request::Status {}
        );
    }

    #[test]
    fn job_ids_the_store_cannot_hold_are_refused_as_the_request_is_read() {
        // 2^63 is one past the largest signed 64-bit integer.
        for id in ["0", "9223372036854775808", "18446744073709551615"] {
            for req in [
                format!(r#"{{"op":"get_job","job_id":{id}}}"#),
                format!(r#"{{"op":"close_job","job_id":{id}}}"#),
                format!(r#"{{"op":"open_job","job_id":{id},"uid":0,"nodes":["n1"]}}"#),
                format!(r#"{{"op":"record_outcome","job_id":{id},"node":"n1"}}"#),
                format!(r#"{{"op":"list_records","before_job_id":{id}}}"#),
            ] {
                let e = serde_json::from_str::<Request>(&req)
                    .unwrap_err()
                    .to_string();
                assert!(e.contains("out of range"), "{req}: {e}");
            }
        }
        let top = r#"{"op":"get_job","job_id":9223372036854775807}"#;
        assert_eq!(
            serde_json::from_str::<Request>(top).unwrap(),
            Request::GetJob {
                job_id: 9_223_372_036_854_775_807
            }
        );
    }

    #[test]
    fn error_reply_display_names_the_code() {
        let e = ErrorReply::new(ErrorCode::CredReplayed, "credential already used");
        assert_eq!(e.to_string(), "cred_replayed: credential already used");
    }
}
