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

pub use greenup::query::{JobSummary, ListJobs, ListRecords, MAX_RECORDS};
use greenup::record::job_id;
pub use greenup::record::{
    Decision, ErrorCode, JobEnd, JobRecord, JobState, MAX_JOB_ID, NodeOutcome, OpenJob, Verdict,
};

/// The protocol version this build speaks.
pub const VERSION: u32 = 1;

/// The longest line (request or reply) either side accepts, newline excluded.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Bytes of a record's JSON text in one [`Reply::JobPart`]: escaped inside a reply
/// string it at most doubles, so a part always fits in a line.
pub const PART_BYTES: usize = MAX_LINE_BYTES / 4;

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

/// What a plan sets on one node: its CPU frequency and, on a GPU node, its GPUs' clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeGears {
    /// CPU frequency in GHz.
    pub freq_ghz: f64,
    /// SM clock of the job's GPUs in MHz; None leaves them at their top clock.
    pub gpu_mhz: Option<u32>,
}

impl NodeGears {
    /// A planned node's gears.
    pub fn of(n: &greenup::plan::PlannedNode) -> NodeGears {
        NodeGears {
            freq_ghz: n.freq_ghz.0,
            gpu_mhz: n.gpu_mhz,
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
    /// SM clock to lock the job's GPUs on this node at, in MHz; `None` leaves them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_mhz: Option<u32>,
    /// The job's verdict.
    pub verdict: Verdict,
    /// Why, in one line (empty when there is nothing to say).
    #[serde(default)]
    pub reason: String,
    /// Nodes the plan uses (the allocation's count when there is no plan).
    #[serde(default)]
    pub node_count: usize,
    /// The nodes the plan uses as a compressed hostlist, when they are fewer than the
    /// job holds: sent to the job's first node only, which shrinks the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_nodes: Option<String>,
    /// The plan's predicted time, energy and power, when there is a plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<greenup::plan::Estimate>,
    /// Communication-phase DVFS for the job's MPI ranks on this node, its low gear
    /// resolved; absent when the job's policy does not ask for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm_dvfs: Option<greenup::comm::CommDvfs>,
    /// This node's share of the watts Slurm granted the job (on a GPU node, the CPU
    /// package's part of it): the RAPL long-term limit its prolog sets (`power.enforce:
    /// queue`); absent: the node's limit is left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_limit_w: Option<f64>,
    /// On a GPU node, each GPU's part of the node's share and the power limit each of the
    /// job's GPUs is set to ([`greenup::power::split`]); absent: GPU limits are left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_power: Option<greenup::power::split::GpuPart>,
    /// The job's grant, carried from the decision to [`NodeSettings::with_node_type`],
    /// which weighs this node's share by its type.
    #[serde(skip)]
    grant: Option<greenup::power::Grant>,
}

impl NodeSettings {
    /// `node`'s part of `d`, given the node's planned gears (`planned`: `None` when the
    /// plan leaves it out), how many nodes the job holds, and the used nodes' hostlist to
    /// hand on (the first node's only). The one rule for what a node is told.
    pub fn of(
        d: &Decision,
        node: &str,
        planned: Option<NodeGears>,
        allocated: usize,
        used_nodes: Option<String>,
    ) -> NodeSettings {
        let plan = d.plan.as_ref();
        let applied = planned.filter(|_| d.verdict.applies_plan());
        NodeSettings {
            job_id: d.job_id,
            node: node.to_string(),
            used: plan.is_none() || planned.is_some(),
            freq_ghz: applied.map(|g| g.freq_ghz),
            gpu_mhz: applied.and_then(|g| g.gpu_mhz),
            verdict: d.verdict,
            reason: d.reason.clone(),
            node_count: plan.map_or(allocated, |p| p.nodes.len()),
            used_nodes,
            predicted: plan.map(|p| p.predicted),
            comm_dvfs: d.comm_dvfs,
            power_limit_w: None,
            gpu_power: None,
            grant: d.grant,
        }
    }

    /// Fill in what this node's type in `site` decides: the communication-phase low gear
    /// the policy left unset (its type's lowest frequency; unknown type: the runtime's own
    /// choice), and the node's share of the job's grant, in proportion to what it draws at
    /// the frequency it is told (its top one when none), split between its CPU package and
    /// its GPUs.
    pub fn with_node_type(mut self, site: &greenup::site::Site) -> NodeSettings {
        if let Some(c) = self.comm_dvfs.as_mut()
            && c.low_ghz.is_none()
        {
            c.low_ghz = site
                .node_type_of(&self.node)
                .map(|t| t.fmin())
                .filter(|f| *f > 0.0);
        }
        let split = match (self.grant, self.used) {
            (Some(g), true) => {
                greenup::power::split::node_model(site, &self.node, self.freq_ghz, self.gpu_mhz)
                    .map(|m| greenup::power::split::split(g.share_w(m.total_w()), &m))
            }
            _ => None,
        };
        self.power_limit_w = split.map(|s| s.cpu_w);
        self.gpu_power = split.and_then(|s| s.gpu);
        self
    }

    /// `node`'s part of `d`, looked up in the plan (linear in the job's size: for one
    /// node, not for every node of a job).
    pub fn from_decision(d: &Decision, node: &str, allocated: usize) -> NodeSettings {
        let planned = d
            .plan
            .as_ref()
            .and_then(|p| p.nodes.iter().find(|n| n.name == node))
            .map(NodeGears::of);
        NodeSettings::of(d, node, planned, allocated, None)
    }
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
        budgets: Vec<greenup::budget::Standing>,
    },
    /// A job's quote (quote).
    Quote(greenup::budget::Quote),
    /// A power report was counted (power_report).
    PowerTaken {
        /// Samples counted.
        samples: u64,
        /// The lower long-term limit, in watts, this node is to hold for its job from now
        /// on: greenupd gives the job's unused watts back to Slurm's queue once every
        /// node holds its own (`power.give_back_after_s`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit_w: Option<f64>,
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

    #[test]
    fn request_line_round_trips_and_embeds_body_verbatim() {
        let req = Request::CloseJob {
            job_id: 42,
            end: Some(JobEnd::Completed),
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

    /// A planned decision for nodes n1..=n, every other node at 1.8 GHz, the rest 2.2.
    fn planned(n: usize) -> Decision {
        let nodes: Vec<serde_json::Value> = (1..=n)
            .map(|i| {
                let f = if i % 2 == 0 { 1.8 } else { 2.2 };
                serde_json::json!({"name": format!("n{i}"), "type": "std", "freq_ghz": f})
            })
            .collect();
        let est = serde_json::json!({"time_s": 100.0, "energy_j": 3.0e7, "avg_power_w": 3.0e5});
        serde_json::from_value(serde_json::json!({
            "job_id": 4242, "verdict": "planned", "reason": "", "policy": "min-energy",
            "profile": "lammps", "profile_version": "3", "power_cap_w": null, "reserved_w": 1.0e5,
            "plan": {"policy": "min-energy", "feasible": true, "reason": "", "node_count": n,
                "nodes": nodes, "predicted": est, "baseline": est, "objective": 1.0,
                "search": {"algorithm": "exact", "candidates": 1, "elapsed_us": 1}},
            "decided_at": 1_795_000_000
        }))
        .unwrap()
    }

    #[test]
    fn a_nodes_comm_settings_take_its_types_lowest_gear_unless_the_policy_sets_one() {
        let site = greenup::site::load(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../etc/greenup.yaml"
        ))
        .unwrap();
        let mut d = planned(2);
        assert_eq!(
            NodeSettings::from_decision(&d, "n1", 2)
                .with_node_type(&site)
                .comm_dvfs,
            None
        );
        d.comm_dvfs = Some(greenup::comm::CommDvfs::default());
        // n1 is fast (1.0 to 3.0 GHz), n3 eco (1.2 to 2.4), n9 unknown to the site.
        let low = |d: &Decision, node: &str| {
            NodeSettings::from_decision(d, node, 2)
                .with_node_type(&site)
                .comm_dvfs
                .unwrap()
                .low_ghz
        };
        assert_eq!(low(&d, "n1"), Some(1.0));
        assert_eq!(low(&d, "n3"), Some(1.2));
        assert_eq!(low(&d, "n9"), None);
        d.comm_dvfs = Some(greenup::comm::CommDvfs {
            low_ghz: Some(1.4),
            ..Default::default()
        });
        assert_eq!(low(&d, "n3"), Some(1.4));
    }

    #[test]
    fn a_nodes_start_request_and_reply_do_not_grow_with_the_job() {
        let line = |n: usize, node: &str| {
            let req = Request::StartNode {
                node: node.into(),
                job: OpenJob {
                    job_id: 4242,
                    uid: 1000,
                    user: Some("alice".into()),
                    partition: Some("batch".into()),
                    nodes: Vec::new(),
                    nodelist: Some(format!("n[1-{n}]")),
                    min_nodes: None,
                    time_limit: greenup::record::TimeLimit::Seconds(3600.0),
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
        assert_eq!(NodeSettings::from_decision(&d, "n2", 4).freq_ghz, Some(1.8));
        assert_eq!(NodeSettings::from_decision(&d, "n3", 4).freq_ghz, Some(2.2));
        let gone = NodeSettings::from_decision(&d, "n9", 5);
        assert_eq!((gone.used, gone.freq_ghz), (false, None));
    }

    #[test]
    fn a_gpu_nodes_share_is_told_as_its_cpu_part_and_each_gpus_limit() {
        // g1: CPU 100 W dynamic at 2.0 GHz (cube law) + 50 W static; 2 GPUs, 300 W
        // dynamic + 50 W static, limits 100-400 W. c1: the same CPU, no GPUs.
        let site = greenup::site::parse(
            "/etc/slurm/greenup.yaml",
            "node_types:\n  c:\n    frequencies: [1.0, 2.0]\n    power: {dynamic_w: 100, static_w: 50}\n  g:\n    frequencies: [1.0, 2.0]\n    power: {dynamic_w: 100, static_w: 50}\n    gpus: {count: 2, power_limit: {min: 100, max: 400}, power: {dynamic_w: 300, static_w: 50}}\nnodes:\n  c: c1\n  g: g1\n",
        )
        .unwrap();
        let mut d = planned(1);
        // Nodes at their top: c1 150 W, g1 150 + 2 x 350 = 850 W; 500 W granted, so g1's
        // share is 425 W: CPU 425 x 150/850 = 75 W, each GPU 425 x 350/850 = 175 W.
        d.grant = Some(greenup::power::Grant {
            granted_w: 500.0,
            weight_w: 1000.0,
        });
        let g1 = NodeSettings::of(
            &d,
            "g1",
            Some(NodeGears {
                freq_ghz: 2.0,
                gpu_mhz: None,
            }),
            2,
            None,
        )
        .with_node_type(&site);
        assert!((g1.power_limit_w.unwrap() - 75.0).abs() < 1e-9, "{g1:?}");
        let gpu = g1.gpu_power.unwrap();
        assert!((gpu.part_w - 175.0).abs() < 1e-9 && gpu.limit_w == gpu.part_w);
        let c1 = NodeSettings::of(
            &d,
            "c1",
            Some(NodeGears {
                freq_ghz: 2.0,
                gpu_mhz: None,
            }),
            2,
            None,
        )
        .with_node_type(&site);
        assert!((c1.power_limit_w.unwrap() - 75.0).abs() < 1e-9);
        assert_eq!(c1.gpu_power, None);
        // The wire: absent when none, read back when there.
        let line = serde_json::to_string(&g1).unwrap();
        assert!(line.contains(r#""gpu_power":{"part_w":175"#), "{line}");
        assert_eq!(
            serde_json::from_str::<NodeSettings>(&line)
                .unwrap()
                .gpu_power,
            Some(gpu)
        );
        assert!(!serde_json::to_string(&c1).unwrap().contains("gpu_power"));
    }

    #[test]
    fn error_reply_display_names_the_code() {
        let e = ErrorReply::new(ErrorCode::CredReplayed, "credential already used");
        assert_eq!(e.to_string(), "cred_replayed: credential already used");
    }
}
