//! greenupd's wire protocol: one JSON object per line, version 1.
//!
//! A request line is `{"v":1,"cred":"MUNGE:...","req":{"op":"open_job",...}}`.
//! The MUNGE credential's payload is the exact bytes of `req`, so a credential
//! cannot be moved onto another request. A reply line is
//! `{"v":1,"ok":true,"reply":{"kind":...}}` or
//! `{"v":1,"ok":false,"error":{"code":...,"message":...}}`.
//! docs/protocol.md is the reference for site admins and other clients.
//!
//! The SPANK plugin, the CLI and greenupd all speak it.

use serde::{Deserialize, Serialize};

use greenup_core::quantity::Watts;
use greenup_wire::budget::{Quote, Standing};
pub use greenup_wire::query::{JobSummary, ListJobs, ListRecords, MAX_RECORDS};
use greenup_wire::record::job_id;
pub use greenup_wire::record::{
    Decision, ErrorCode, JobEnd, JobRecord, JobState, MAX_JOB_ID, NodeOutcome, OpenJob, Verdict,
};
pub use greenup_wire::settings::{NodeGears, NodeSettings};

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;

/// The longest line (request or reply) either side accepts, newline excluded.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Bytes of a record's JSON text in one [`Reply::JobPart`]: escaped inside a reply
/// string it at most doubles, so a part always fits in a line.
pub const PART_BYTES: usize = MAX_LINE_BYTES / 4;

/// The most outcomes one `end_node` carries: a node's own and the records of steps
/// that crashed before their end, far fewer in practice.
pub const MAX_END_OUTCOMES: usize = 256;

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
    /// The reply carries the whole plan, so it grows with the job: a node's prolog asks
    /// with [`Request::StartNode`] instead.
    OpenJob(OpenJob),
    /// A node's prolog: this node's settings, the job decided by the first node to ask.
    /// The job's nodes travel as Slurm's compressed hostlist, and the reply is this
    /// node's part only, so request and reply stay the same size however large the job.
    /// Root or SlurmUser only.
    StartNode {
        /// The node asking, one of the job's.
        node: String,
        /// The job as the node sees it, with `nodelist` (not `nodes`).
        job: OpenJob,
    },
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
        /// How the job ended, as its first node saw it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<JobEnd>,
        /// The run that ended, as its open's `restart_count`: a late close of a run
        /// before a requeue is refused rather than taken for the run after it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        restart_count: Option<u32>,
    },
    /// A node's end in one request: its outcomes (the node's own and any its crashed
    /// steps left), and on the job's first node the close, taken only once every node
    /// greenupd opened the job with has an outcome stored. What a newer epilog sends
    /// when its settings say `ends_in_one`. Root or SlurmUser only.
    EndNode {
        /// Slurm job id; every outcome must be of this job.
        #[serde(deserialize_with = "job_id")]
        job_id: u64,
        /// The node's outcomes, at most [`MAX_END_OUTCOMES`].
        outcomes: Vec<NodeOutcome>,
        /// Close the job with this end once every node has reported: the first node's
        /// claim, settled by greenupd against Slurm's final record.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        close: Option<JobEnd>,
        /// The run that ended, as its open's `restart_count`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        restart_count: Option<u32>,
    },
    /// How many nodes of a job have recorded their outcome: what the closing node
    /// waits on, without reading the job's record.
    CountOutcomes {
        /// Slurm job id.
        #[serde(deserialize_with = "job_id")]
        job_id: u64,
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
    /// The energy budgets: the site's, and the partitions' and accounts' (all of them,
    /// or the one named). Anyone may read them, as Slurm shows every account's usage.
    Budgets {
        /// Only this account's budget (with the site's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        account: Option<String>,
        /// Only this partition's budget (with the site's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partition: Option<String>,
    },
    /// What a job described like an open_job would be predicted and charged if it
    /// started now; nothing is stored or reserved. Anyone may ask.
    Quote(OpenJob),
    /// Apply `policy` to `profile`'s jobs again after greenupd held it for missing its
    /// `max_slowdown` (`baseline.on_miss: monitor`). Root or SlurmUser only.
    ClearHold {
        /// Application profile.
        profile: String,
        /// Policy name.
        policy: String,
    },
    /// A node's measured power since its last report, from its `greenup meter`.
    /// Root or SlurmUser only; a node outside the named jobs is refused.
    PowerReport(crate::live_power::PowerReport),
    /// The power caps now and over the last hours (measured, granted, stranded): cluster
    /// totals with no job's own data, so anyone may read them.
    PowerStatus {
        /// Hours of timeline wanted (default and most: what greenupd keeps, 6).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hours: Option<f64>,
    },
}

impl Request {
    /// The request's `op` name, for logs and latency tables.
    pub fn op(&self) -> &'static str {
        match self {
            Request::OpenJob(_) => "open_job",
            Request::StartNode { .. } => "start_node",
            Request::CountOutcomes { .. } => "count_outcomes",
            Request::NodeSettings { .. } => "node_settings",
            Request::RecordOutcome(_) => "record_outcome",
            Request::EndNode { .. } => "end_node",
            Request::CloseJob { .. } => "close_job",
            Request::GetJob { .. } => "get_job",
            Request::GetJobPart { .. } => "get_job_part",
            Request::ListJobs(_) => "list_jobs",
            Request::ListRecords(_) => "list_records",
            Request::Status {} => "status",
            Request::Budgets { .. } => "budgets",
            Request::Quote(_) => "quote",
            Request::ClearHold { .. } => "clear_hold",
            Request::PowerReport(_) => "power_report",
            Request::PowerStatus { .. } => "power_status",
        }
    }
}

/// One cap in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetLine {
    /// `site` or the partition's name.
    pub scope: String,
    /// The cap in watts (`None`: no cap).
    pub cap_w: Option<Watts>,
    /// Watts reserved by open jobs.
    pub reserved_w: Watts,
    /// Watts still free (`None`: no cap).
    pub free_w: Option<Watts>,
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
    /// Jobs decided since greenupd started: one per job, however many of its nodes ask.
    #[serde(default)]
    pub decisions: u64,
    /// The site line first, then one per partition.
    pub ledger: Vec<BudgetLine>,
}

/// The body of a successful reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    /// The job's decision (open_job).
    Decision(Decision),
    /// A hold was lifted (clear_hold); `held` is false when there was none.
    HoldCleared {
        /// Whether the pair was held.
        held: bool,
    },
    /// One node's settings (node_settings, start_node).
    NodeSettings(NodeSettings),
    /// How many of a job's nodes have recorded an outcome (count_outcomes).
    OutcomeCount {
        /// Slurm job id.
        job_id: u64,
        /// Nodes with an outcome stored.
        outcomes: u64,
        /// The nodes the job was opened with: whether every one of them has reported,
        /// which a node released by a shrink cannot tell from its own environment (it
        /// lists only the released nodes). Absent from an older greenupd.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nodes: Option<u64>,
    },
    /// A node's end is stored (end_node): the job's outcome count after it, and whether
    /// the close it carried was taken.
    NodeEnded {
        /// Slurm job id.
        job_id: u64,
        /// Nodes with an outcome stored, this one's included.
        outcomes: u64,
        /// The nodes the job was opened with.
        nodes: u64,
        /// The job is closed: every node had reported, and the close was stored.
        closed: bool,
    },
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
    /// The energy budgets (budgets).
    Budgets {
        /// Each budget's standing, site first.
        budgets: Vec<Standing>,
    },
    /// A job's quote (quote).
    Quote(Quote),
    /// A power report was counted (power_report).
    PowerTaken {
        /// Samples counted.
        samples: u64,
        /// The lower long-term limit, in watts, this node is to hold for its job from now
        /// on: greenupd gives the job's unused watts back to Slurm's queue once every
        /// node holds its own (`power.give_back_after_s`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit_w: Option<Watts>,
    },
    /// The power caps now and over the last hours (power_status).
    Power(Box<crate::live_power::PowerView>),
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
    use greenup_core::quantity::Ghz;

    #[test]
    fn request_line_round_trips_and_embeds_body_verbatim() {
        let req = Request::CloseJob {
            job_id: 42,
            end: Some(JobEnd::Completed),
            restart_count: Some(1),
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

    /// A planned decision for nodes n1..=n (greenup-wire's fixture).
    fn planned(n: usize) -> Decision {
        greenup_wire::fixtures::planned_decision(n)
    }

    #[test]
    fn a_nodes_start_request_and_reply_do_not_grow_with_the_job() {
        let line = |n: usize, node: &str| {
            let req = Request::StartNode {
                node: node.into(),
                job: OpenJob {
                    restart_count: None,
                    job_id: 4242,
                    uid: 1000,
                    user: Some("alice".into()),
                    partition: Some("batch".into()),
                    nodes: Vec::new(),
                    nodelist: Some(format!("n[1-{n}]")),
                    min_nodes: None,
                    time_limit: greenup_wire::record::TimeLimit::Seconds(3600.0),
                    policy: Some("min-energy".into()),
                    profile: Some("lammps".into()),
                    energy_cap_j: None,
                    power_cap_w: None,
                    algorithm: None,
                    account: None,
                    granted_w: None,
                },
            };
            request_body(&req).unwrap().len()
        };
        let reply = |n: usize, node: &str| {
            let d = planned(n);
            let s = NodeSettings::from_decision(&d, node, n);
            ReplyLine::ok(Reply::NodeSettings(s)).to_line().len()
        };
        // From 10 nodes to 20,000 only the digits of the count grow (4 more).
        assert!(line(20_000, "n17") - line(10, "n17") <= 4);
        assert!(reply(20_000, "n17") - reply(10, "n17") <= 4);
        assert!(line(20_000, "n17") < 400 && reply(20_000, "n17") < 400);
        // The whole plan, by contrast, grows with every node.
        let whole = |n| ReplyLine::ok(Reply::Decision(planned(n))).to_line().len();
        assert!(whole(20_000) > 100 * whole(10));
        // Each node is told its own frequency.
        let d = planned(4);
        assert_eq!(
            NodeSettings::from_decision(&d, "n2", 4).freq_ghz,
            Some(Ghz(1.8))
        );
        assert_eq!(
            NodeSettings::from_decision(&d, "n3", 4).freq_ghz,
            Some(Ghz(2.2))
        );
        let gone = NodeSettings::from_decision(&d, "n9", 5);
        assert_eq!((gone.used, gone.freq_ghz), (false, None));
    }

    #[test]
    fn a_node_is_told_its_run_is_a_measured_baseline_only_when_it_is_one() {
        let told = |monitor: bool, profile: Option<&str>| {
            let d = Decision {
                monitor,
                profile: profile.map(String::from),
                ..planned(2)
            };
            let s = NodeSettings::from_decision(&d, "n1", 2);
            let json = serde_json::to_string(&s).unwrap();
            (s.baseline, json.contains("\"baseline\""))
        };
        assert_eq!(told(true, Some("lammps")), (true, true));
        // No application to measure for, or no monitor decision: said by absence.
        assert_eq!(told(true, None), (false, false));
        assert_eq!(told(false, Some("lammps")), (false, false));
    }

    #[test]
    fn error_reply_display_names_the_code() {
        let e = ErrorReply::new(ErrorCode::CredReplayed, "credential already used");
        assert_eq!(e.to_string(), "cred_replayed: credential already used");
    }

    #[test]
    fn the_ledgers_watts_cross_the_wire_as_bare_numbers() {
        let capped = BudgetLine {
            scope: "site".into(),
            cap_w: Some(Watts(100_000.0)),
            reserved_w: Watts(62_500.5),
            free_w: Some(Watts(37_499.5)),
            jobs: 3,
        };
        let line =
            r#"{"scope":"site","cap_w":100000.0,"reserved_w":62500.5,"free_w":37499.5,"jobs":3}"#;
        assert_eq!(serde_json::to_string(&capped).unwrap(), line);
        assert_eq!(serde_json::from_str::<BudgetLine>(line).unwrap(), capped);
        let uncapped = BudgetLine {
            scope: "gpu".into(),
            cap_w: None,
            reserved_w: Watts(0.0),
            free_w: None,
            jobs: 0,
        };
        let line = r#"{"scope":"gpu","cap_w":null,"reserved_w":0.0,"free_w":null,"jobs":0}"#;
        assert_eq!(serde_json::to_string(&uncapped).unwrap(), line);
        assert_eq!(serde_json::from_str::<BudgetLine>(line).unwrap(), uncapped);
    }
}
