//! Request lines in, reply lines out: parsing, authentication, and one handler per op.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::jobs::{Outcome, close_job, open_job, recent_settings, start_node};
use super::{Ctx, Shared, known, lock, store_error};
use crate::auth::{Caller, authenticate, require_read, require_write};
use crate::decide::{bad_field, expand_open};
use crate::store::sqlite::now;
use crate::store::{Applied, Change};
use greenup::power::split::with_node_type;
use greenup_proto::protocol::{
    ErrorCode, ErrorReply, JobRecord, JobState, ListJobs, ListRecords, MAX_END_OUTCOMES,
    MAX_LINE_BYTES, MAX_RECORDS, NodeOutcome, NodeSettings, PART_BYTES, Reply, ReplyLine, Request,
    Status, VERSION,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Incoming<'a> {
    v: Option<serde_json::Value>,
    cred: Option<String>,
    #[serde(borrow)]
    req: Option<&'a RawValue>,
}

/// A request line whose caller is known (the Unix socket's peer, or a valid
/// credential), parsed or not.
pub(super) type Checked = (Caller, Result<Request, ErrorReply>);

/// Read one request line and find out who sent it; the request is not run yet, so
/// the connection can be moved to its caller's slot first.
pub(super) async fn check_line(
    shared: &Arc<Shared>,
    line: &[u8],
    peer: Peer,
) -> Result<Checked, ErrorReply> {
    let text = line.strip_suffix(b"\n").unwrap_or(line);
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    let inc: Incoming<'_> = serde_json::from_slice(text).map_err(|e| {
        ErrorReply::new(
            ErrorCode::BadJson,
            format!("line is not a JSON request object: {e}"),
        )
    })?;
    match &inc.v {
        Some(v) if v.as_u64() == Some(u64::from(VERSION)) => {}
        Some(v) => {
            return Err(ErrorReply::new(
                ErrorCode::BadVersion,
                format!(
                    "protocol version {v} is not supported: this greenupd speaks \"v\": {VERSION}"
                ),
            ));
        }
        None => {
            return Err(ErrorReply::new(
                ErrorCode::BadVersion,
                format!("missing \"v\": expected \"v\": {VERSION}"),
            ));
        }
    }
    let Some(raw) = inc.req else {
        return Err(ErrorReply::new(
            ErrorCode::BadRequest,
            "missing \"req\": expected a request object with an \"op\"",
        ));
    };
    let caller = match peer {
        Peer::Unix(c) => c,
        Peer::Tcp => {
            let shared2 = shared.clone();
            let cred = inc.cred.clone();
            let body = raw.get().as_bytes().to_vec();
            tokio::task::spawn_blocking(move || {
                authenticate(shared2.munge.as_ref(), cred.as_deref(), &body)
            })
            .await
            .map_err(|e| {
                ErrorReply::new(ErrorCode::Internal, format!("credential check failed: {e}"))
            })??
        }
    };
    let req = serde_json::from_str(raw.get())
        .map_err(|e| ErrorReply::new(ErrorCode::BadRequest, format!("invalid \"req\": {e}")));
    Ok((caller, req))
}

/// Run a checked request line (or report why it could not be) and log the outcome.
pub(super) async fn answer(
    shared: &Arc<Shared>,
    checked: Result<Checked, ErrorReply>,
) -> ReplyLine {
    let started = Instant::now();
    let (op, result) = match checked {
        Ok((caller, Ok(req))) => (req.op(), run(shared, caller, req).await),
        Ok((_, Err(e))) | Err(e) => ("-", Err(e)),
    };
    if let Err(e) = &result {
        // greenupd's own failures (a full disk, a fault) need an admin; a caller's
        // mistake or a refusal by rule is routine.
        match e.code {
            ErrorCode::StoreFailed | ErrorCode::Internal | ErrorCode::AuthUnavailable => {
                tracing::error!(op, error = %e, "request failed")
            }
            _ => tracing::info!(op, error = %e, "request refused"),
        }
    } else {
        tracing::debug!(
            op,
            us = started.elapsed().as_micros() as u64,
            "request served"
        );
    }
    match result {
        Ok(r) => ReplyLine::ok(r),
        Err(e) => ReplyLine::err(e),
    }
}

/// What a node is told beside its settings: whether greenupd settles a claimed
/// completion with Slurm itself, so that the first node's epilog need not ask slurmctld,
/// and that it takes the node's end (outcomes and close) in one request.
fn told(shared: &Shared, mut s: NodeSettings) -> NodeSettings {
    s.asks_slurm_end = shared.opts.slurm_check;
    s.ends_in_one = true;
    s
}

/// Where a connection came from.
#[derive(Debug, Clone, Copy)]
pub(super) enum Peer {
    /// TCP: every request must carry a credential.
    Tcp,
    /// Unix socket: the kernel told us who it is.
    Unix(Caller),
}

async fn run(shared: &Arc<Shared>, caller: Caller, req: Request) -> Outcome {
    let ctx = shared.ctx.read().unwrap_or_else(|e| e.into_inner()).clone();
    match req {
        Request::OpenJob(mut o) => {
            require_write(&ctx.roles, caller, "open jobs")?;
            expand_open(&mut o, &ctx.site.daemon.limits)?;
            // A refused job is on record: every node gets that decision (verdict
            // `refused`, its `refusal` and reason), so each node runs the job unchanged,
            // measures it and its first node closes it, giving the watts it holds back.
            Ok(Reply::Decision(open_job(shared, ctx.clone(), o).await?))
        }
        Request::StartNode { node, job } => {
            require_write(&ctx.roles, caller, "start jobs")?;
            check_node_name("node", &node)?;
            // A refused job's nodes get its refused settings, as with open_job.
            Ok(Reply::NodeSettings(told(
                shared,
                start_node(shared, ctx.clone(), node, job).await?,
            )))
        }
        Request::NodeSettings { job_id, node } => {
            if let Some((owner, s)) = recent_settings(shared, job_id, &node) {
                require_read(&ctx.roles, caller, owner, job_id)?;
                return Ok(Reply::NodeSettings(told(
                    shared,
                    with_node_type(s, &ctx.site),
                )));
            }
            let job = stored_job(shared, job_id, "is not open: open it first").await?;
            require_read(&ctx.roles, caller, job.uid, job_id)?;
            let allocated = job.request.nodes.len();
            Ok(Reply::NodeSettings(told(
                shared,
                with_node_type(
                    NodeSettings::from_decision(&job.decision, &node, allocated),
                    &ctx.site,
                ),
            )))
        }
        Request::CountOutcomes { job_id } => {
            let (owner, outcomes, nodes) = outcome_count(shared, job_id).await?;
            require_read(&ctx.roles, caller, owner, job_id)?;
            Ok(Reply::OutcomeCount {
                job_id,
                outcomes,
                nodes: Some(nodes),
            })
        }
        Request::RecordOutcome(o) => {
            require_write(&ctx.roles, caller, "record outcomes")?;
            validate_outcome(&o)?;
            let job_id = o.job_id;
            let new = store_outcome(shared, o).await?;
            Ok(Reply::Stored { job_id, new })
        }
        Request::EndNode {
            job_id,
            outcomes,
            close,
            restart_count,
        } => {
            require_write(&ctx.roles, caller, "record outcomes and close jobs")?;
            if outcomes.len() > MAX_END_OUTCOMES {
                return Err(bad_field(
                    "outcomes",
                    format!("{} outcomes", outcomes.len()),
                    &format!("at most {MAX_END_OUTCOMES}"),
                ));
            }
            // Checked whole before anything is stored: a bad request stores nothing.
            for o in &outcomes {
                validate_outcome(o)?;
                if o.job_id != job_id {
                    return Err(bad_field(
                        "outcomes[].job_id",
                        o.job_id,
                        &format!("{job_id}, the request's job"),
                    ));
                }
            }
            for o in outcomes {
                store_outcome(shared, o).await?;
            }
            // Only a request that carries the close is counted: a count reads the job's
            // stored request and every outcome so far, so counting every node's end
            // made a 10,000-node job's ends quadratic (docs/BENCHMARKS.md).
            let Some(end) = close else {
                return Ok(Reply::NodeEnded {
                    job_id,
                    outcomes: 0,
                    nodes: 0,
                    closed: false,
                });
            };
            let (_, reported, nodes) = outcome_count(shared, job_id).await?;
            let everywhere = nodes > 0 && reported >= nodes;
            let closed = everywhere
                && match close_job(shared, job_id, JobState::Closed, Some(end), restart_count).await
                {
                    Ok(_) => true,
                    Err(e) => {
                        // The node then closes with its own request, whose error it
                        // sees, spools and logs on its side as before.
                        tracing::info!(job_id, error = %e, "end_node: close not taken");
                        false
                    }
                };
            Ok(Reply::NodeEnded {
                job_id,
                outcomes: reported,
                nodes,
                closed,
            })
        }
        Request::ClearHold { profile, policy } => {
            require_write(&ctx.roles, caller, "clear policy holds")?;
            for (field, v) in [("profile", &profile), ("policy", &policy)] {
                if !greenup::names::is_name(v) {
                    return Err(crate::decide::bad_field(
                        field,
                        v,
                        greenup::names::NAME_RULE,
                    ));
                }
            }
            match shared
                .store
                .write(Change::ClearHold { profile, policy })
                .await
                .map_err(store_error)?
            {
                Applied::Stored { new } => Ok(Reply::HoldCleared { held: new }),
                Applied::Opened { .. } => Err(ErrorReply::new(
                    ErrorCode::Internal,
                    "store answered a clear_hold with an open",
                )),
            }
        }
        Request::CloseJob {
            job_id,
            end,
            restart_count,
        } => {
            require_write(&ctx.roles, caller, "close jobs")?;
            close_job(shared, job_id, JobState::Closed, end, restart_count).await
        }
        Request::GetJob { job_id } => {
            let job = job_with_runs(shared, job_id).await?;
            require_read(&ctx.roles, caller, job.uid, job_id)?;
            let bytes = serde_json::to_vec(&job).map_or(0, |v| v.len());
            if bytes > PAGE_BYTES {
                return Err(ErrorReply::new(
                    ErrorCode::TooLong,
                    format!(
                        "job {job_id}'s record is {bytes} bytes, more than one reply holds: ask for it with get_job_part"
                    ),
                ));
            }
            Ok(Reply::Job(Box::new(job)))
        }
        Request::GetJobPart { job_id, offset } => {
            let job = job_with_runs(shared, job_id).await?;
            require_read(&ctx.roles, caller, job.uid, job_id)?;
            let text = serde_json::to_string(&job).map_err(|e| {
                ErrorReply::new(ErrorCode::Internal, format!("record not serialized: {e}"))
            })?;
            let total = text.len() as u64;
            if offset > total || !text.is_char_boundary(offset as usize) {
                return Err(bad_field(
                    "offset",
                    offset,
                    &format!("a part boundary within the record's {total} bytes"),
                ));
            }
            let start = offset as usize;
            let mut end = (start + PART_BYTES).min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            Ok(Reply::JobPart {
                job_id,
                offset,
                total,
                text: text[start..end].to_string(),
            })
        }
        Request::ListJobs(filter) => {
            let limit = filter.limit.unwrap_or(100).clamp(1, 10_000);
            let filter = ListJobs {
                uid: readable_uid(&ctx, caller, filter.uid)?,
                // One more than asked, to tell whether more match.
                limit: Some(limit + 1),
                ..filter
            };
            let jobs = shared
                .store
                .read(move |s| s.job_summaries(&filter))
                .await
                .map_err(store_error)?;
            let page = fit_page(jobs, limit);
            Ok(Reply::Jobs {
                jobs: page.items,
                truncated: page.truncated,
            })
        }
        Request::ListRecords(filter) => {
            let limit = filter.limit.unwrap_or(100).clamp(1, MAX_RECORDS);
            let filter = ListRecords {
                uid: readable_uid(&ctx, caller, filter.uid)?,
                // One more than asked, to tell whether more match.
                limit: Some(limit + 1),
                ..filter
            };
            let jobs = shared
                .store
                .read(move |s| s.job_records(&filter))
                .await
                .map_err(store_error)?;
            let page = fit_page(jobs, limit);
            Ok(Reply::Records {
                jobs: page.items,
                truncated: page.truncated,
                oversized: page.oversized.map(|j| j.job_id),
            })
        }
        Request::Status {} => Ok(Reply::Status(status(shared, &ctx).await?)),
        Request::Budgets { account, partition } => Ok(Reply::Budgets {
            budgets: super::budget::standings(shared, &ctx, account, partition),
        }),
        Request::Quote(job) => Ok(Reply::Quote(
            super::budget::quote_for(shared, ctx.clone(), job).await?,
        )),
        Request::PowerReport(r) => {
            require_write(&ctx.roles, caller, "report measured power")?;
            super::live_power::report(shared, &ctx, r).await
        }
        // Cluster totals only, no job's own data: anyone may read them.
        Request::PowerStatus { hours } => Ok(Reply::Power(Box::new(super::live_power::view(
            shared, hours,
        )?))),
    }
}

/// Bytes of listed items one reply may hold: half a line, the rest is the envelope's.
const PAGE_BYTES: usize = MAX_LINE_BYTES / 2;

/// One page of a listing, as [`fit_page`] cut it.
struct Page<T> {
    /// What the reply carries.
    items: Vec<T>,
    /// Items were left out: the client asks for the next page.
    truncated: bool,
    /// The first item alone is larger than a page (it was left out too).
    oversized: Option<T>,
}

/// The leading items, at most `limit`, whose JSON fits in [`PAGE_BYTES`], so no listing
/// reply outgrows a line however large one job is. `items` holds up to one more than
/// `limit`, to tell whether more match. A first item too large for any page is handed
/// back as `oversized`, for the caller to send by other means.
fn fit_page<T: serde::Serialize>(mut items: Vec<T>, limit: u32) -> Page<T> {
    let more = items.len() > limit as usize;
    items.truncate(limit as usize);
    let mut bytes = 0;
    let fits = items
        .iter()
        .take_while(|j| {
            bytes += serde_json::to_vec(j).map_or(usize::MAX / 2, |v| v.len() + 1);
            bytes <= PAGE_BYTES
        })
        .count();
    let truncated = more || fits < items.len();
    let oversized = (fits == 0 && !items.is_empty()).then(|| items.remove(0));
    items.truncate(fits);
    Page {
        items,
        truncated,
        oversized,
    }
}

/// The uid a listing is restricted to: ordinary users only their own, admins and root
/// any one (`Some`) or all (`None`).
fn readable_uid(ctx: &Ctx, caller: Caller, uid: Option<u32>) -> Result<Option<u32>, ErrorReply> {
    let all = ctx.roles.may_read_all(caller.uid);
    match uid {
        Some(u) if u != caller.uid && !all => Err(ErrorReply::new(
            ErrorCode::Forbidden,
            format!(
                "uid {} may list only their own jobs, not uid {u}'s",
                caller.uid
            ),
        )),
        Some(u) => Ok(Some(u)),
        None if all => Ok(None),
        None => Ok(Some(caller.uid)),
    }
}

/// greenupd's status: the store's counts and the ledger.
pub(super) async fn status(shared: &Arc<Shared>, ctx: &Ctx) -> Result<Status, ErrorReply> {
    let counts = shared
        .store
        .read(|s| s.counts())
        .await
        .map_err(store_error)?;
    Ok(Status {
        version: env!("CARGO_PKG_VERSION").to_string(),
        protocol: VERSION,
        uptime_s: shared.started.elapsed().as_secs(),
        config: ctx.site.path.display().to_string(),
        open_jobs: counts.open_jobs,
        total_jobs: counts.total_jobs,
        outcomes: counts.outcomes,
        connections: shared.connections.load(Ordering::Relaxed),
        decisions: shared.decisions.load(Ordering::Relaxed),
        ledger: lock(&shared.ledger).lines(),
    })
}

/// A node name as a request field, by the one names rule.
fn check_node_name(field: &str, node: &str) -> Result<(), ErrorReply> {
    if !greenup::names::is_node(node) {
        return Err(bad_field(field, node, greenup::names::NODE_RULE));
    }
    Ok(())
}

/// How many of `job_id`'s nodes have an outcome stored: the job's owner, the count,
/// and the nodes it was opened with.
async fn outcome_count(shared: &Arc<Shared>, job_id: u64) -> Result<(u32, u64, u64), ErrorReply> {
    known(
        shared.store.read(move |s| s.outcome_count(job_id)).await,
        job_id,
    )
}

/// Store one node's outcome, checked by [`validate_outcome`]; `false` when it was
/// stored before.
async fn store_outcome(shared: &Arc<Shared>, o: NodeOutcome) -> Result<bool, ErrorReply> {
    if lock(&shared.silent).heard(&o.node) {
        tracing::info!(node = %o.node, job_id = o.job_id, "node reports again: its jobs are greenup's once more");
    }
    match shared
        .store
        .write(Change::Outcome {
            outcome: Box::new(o),
            at: now(),
        })
        .await
        .map_err(store_error)?
    {
        Applied::Stored { new } => Ok(new),
        Applied::Opened { .. } => Err(ErrorReply::new(
            ErrorCode::Internal,
            "store answered an outcome with an open",
        )),
    }
}

fn validate_outcome(o: &NodeOutcome) -> Result<(), ErrorReply> {
    check_node_name("node", &o.node)?;
    for (field, v) in [
        ("freq_ghz", o.freq_ghz.map(|f| f.0)),
        ("energy_j", o.energy_j.map(|j| j.0)),
        ("elapsed_s", o.elapsed_s.map(|t| t.0)),
        ("power.asked_w", o.power.as_ref().map(|p| p.asked_w.0)),
        (
            "power.held_w",
            o.power.as_ref().and_then(|p| p.held_w).map(|w| w.0),
        ),
    ] {
        if let Some(x) = v
            && !(x.is_finite() && x >= 0.0)
        {
            return Err(bad_field(field, x, "a finite number, 0 or more"));
        }
    }
    Ok(())
}

/// A job as get_job and get_job_part send it: with its runs before a requeue, so a
/// report shows the energy of every run.
async fn job_with_runs(shared: &Arc<Shared>, job_id: u64) -> Result<JobRecord, ErrorReply> {
    let mut job = known(
        shared.store.read(move |s| s.job_with_runs(job_id)).await,
        job_id,
    )?;
    // Slurm reuses job ids once they wrap: a run of another owner under this id is not
    // the asker's to read, whoever may read the current one.
    let owner = job.uid;
    job.earlier_runs.retain(|r| r.uid == owner);
    job.earlier_run_count = job.earlier_runs.len().try_into().unwrap_or(u32::MAX);
    Ok(job)
}

/// A job as the store has it, or "job ID `missing`" as a not-found reply.
async fn stored_job(
    shared: &Arc<Shared>,
    job_id: u64,
    missing: &str,
) -> Result<JobRecord, ErrorReply> {
    let job = shared
        .store
        .read(move |s| s.job(job_id))
        .await
        .map_err(store_error)?;
    job.ok_or_else(|| ErrorReply::new(ErrorCode::NotFound, format!("job {job_id} {missing}")))
}
