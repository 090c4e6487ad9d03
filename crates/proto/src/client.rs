//! A blocking greenupd client over plain std sockets with timeouts.
//!
//! It starts no threads and no runtime, so the SPANK plugin can use it inside
//! slurmstepd's forked children. Every TCP request carries a fresh MUNGE
//! credential whose payload is the request body; on the Unix socket the
//! daemon reads the caller's uid with SO_PEERCRED and no credential is needed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::munge::{Munge, MungeError};
use crate::protocol::{
    Decision, ErrorCode, ErrorReply, JobEnd, JobRecord, JobSummary, ListJobs, ListRecords,
    MAX_LINE_BYTES, MAX_RECORDS, NodeOutcome, NodeSettings, OpenJob, Reply, ReplyLine, Request,
    Status, request_body, request_line,
};

/// What greenupd answered a node's end ([`Client::end_node`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeEnded {
    /// The job's nodes with an outcome stored, the asking node's included.
    pub outcomes: u64,
    /// The nodes greenupd opened the job with.
    pub nodes: u64,
    /// The close the node carried was taken: the job is closed.
    pub closed: bool,
}

/// Where greenupd listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `host:port`, for the nodes.
    Tcp(String),
    /// A local socket path, for the CLI on the daemon's host.
    Unix(PathBuf),
}

impl Endpoint {
    /// `unix:/path` or a path starting with `/` is a Unix socket; anything else is `host:port`.
    pub fn parse(s: &str) -> Endpoint {
        if let Some(p) = s.strip_prefix("unix:") {
            Endpoint::Unix(PathBuf::from(p))
        } else if s.starts_with('/') {
            Endpoint::Unix(PathBuf::from(s))
        } else {
            Endpoint::Tcp(s.to_string())
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp(a) => write!(f, "{a}"),
            Endpoint::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// Why a call to greenupd failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The daemon could not be reached.
    #[error("cannot connect to greenupd at {endpoint}: {source}")]
    Connect {
        /// Where we tried.
        endpoint: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The daemon did not answer in time.
    #[error("greenupd did not answer within {0:?}")]
    Timeout(Duration),
    /// The connection broke.
    #[error("connection to greenupd failed: {0}")]
    Io(std::io::Error),
    /// No credential could be made.
    #[error("cannot make a MUNGE credential: {0}")]
    Munge(#[from] MungeError),
    /// The daemon's answer was not a valid reply line.
    #[error("greenupd sent an invalid reply: {0}")]
    Protocol(String),
    /// The daemon answered with an error.
    #[error("greenupd refused: {0}")]
    Server(ErrorReply),
}

enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Tcp(s) => s.flush(),
            Conn::Unix(s) => s.flush(),
        }
    }
}

/// A connection to greenupd. One request at a time; it may be reused.
pub struct Client {
    conn: BufReader<Conn>,
    munge: Option<Munge>,
    timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connect with `timeout` for the connect and for every read and write.
    ///
    /// TCP needs libmunge; on a Unix socket credentials are used only if libmunge loads.
    pub fn connect(endpoint: &Endpoint, timeout: Duration) -> Result<Client, ClientError> {
        let connect_err = |source| ClientError::Connect {
            endpoint: endpoint.to_string(),
            source,
        };
        let (conn, munge) = match endpoint {
            Endpoint::Tcp(addr) => {
                let munge = Munge::load()?;
                let addrs = addr.to_socket_addrs().map_err(connect_err)?;
                let mut last = std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "address resolves to nothing",
                );
                let mut stream = None;
                for a in addrs {
                    match TcpStream::connect_timeout(&a, timeout) {
                        Ok(s) => {
                            stream = Some(s);
                            break;
                        }
                        Err(e) => last = e,
                    }
                }
                let s = stream.ok_or_else(|| connect_err(last))?;
                s.set_read_timeout(Some(timeout)).map_err(connect_err)?;
                s.set_write_timeout(Some(timeout)).map_err(connect_err)?;
                let _ = s.set_nodelay(true);
                (Conn::Tcp(s), Some(munge))
            }
            Endpoint::Unix(path) => {
                let s = UnixStream::connect(path).map_err(connect_err)?;
                s.set_read_timeout(Some(timeout)).map_err(connect_err)?;
                s.set_write_timeout(Some(timeout)).map_err(connect_err)?;
                (Conn::Unix(s), None)
            }
        };
        Ok(Client {
            conn: BufReader::new(conn),
            munge,
            timeout,
        })
    }

    /// Wait at most `timeout` in each following read and write (e.g. a shrinking budget).
    pub fn set_timeout(&mut self, timeout: Duration) -> std::io::Result<()> {
        let t = Some(timeout.max(Duration::from_millis(1)));
        match self.conn.get_ref() {
            Conn::Tcp(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)?;
            }
            Conn::Unix(s) => {
                s.set_read_timeout(t)?;
                s.set_write_timeout(t)?;
            }
        }
        self.timeout = timeout;
        Ok(())
    }

    /// Send one request and wait for its reply.
    pub fn call(&mut self, req: &Request) -> Result<Reply, ClientError> {
        let body = request_body(req).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let cred = match &self.munge {
            Some(m) => Some(m.encode(body.as_bytes())?),
            None => None,
        };
        let line = request_line(&body, cred.as_deref())
            .map_err(|e| ClientError::Protocol(e.to_string()))?;
        self.call_raw(&line)?
            .into_result()
            .map_err(ClientError::Server)
    }

    /// Send a line exactly as given (a newline is added if missing) and read one reply line.
    ///
    /// For tests and tools that must send what a well-behaved client would not.
    pub fn call_raw(&mut self, line: &[u8]) -> Result<ReplyLine, ClientError> {
        let io = |e: std::io::Error, t: Duration| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                ClientError::Timeout(t)
            }
            _ => ClientError::Io(e),
        };
        let t = self.timeout;
        let w = self.conn.get_mut();
        w.write_all(line).map_err(|e| io(e, t))?;
        if !line.ends_with(b"\n") {
            w.write_all(b"\n").map_err(|e| io(e, t))?;
        }
        w.flush().map_err(|e| io(e, t))?;
        let mut buf = Vec::with_capacity(512);
        let n = (&mut self.conn)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| io(e, t))?;
        if n == 0 {
            return Err(ClientError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "greenupd closed the connection without a reply",
            )));
        }
        if buf.last() != Some(&b'\n') {
            return Err(ClientError::Protocol(format!(
                "reply longer than {MAX_LINE_BYTES} bytes or cut short"
            )));
        }
        serde_json::from_slice(&buf).map_err(|e| ClientError::Protocol(e.to_string()))
    }

    /// Open a job (or fetch its decision if it is open already).
    pub fn open_job(&mut self, req: OpenJob) -> Result<Decision, ClientError> {
        match self.call(&Request::OpenJob(req))? {
            Reply::Decision(d) => Ok(d),
            other => Err(unexpected("decision", &other)),
        }
    }

    /// A node's prolog: this node's settings, the job decided by the first node to ask
    /// (`job` names its nodes as a compressed `nodelist`).
    pub fn start_node(&mut self, node: &str, job: OpenJob) -> Result<NodeSettings, ClientError> {
        match self.call(&Request::StartNode {
            node: node.to_string(),
            job,
        })? {
            Reply::NodeSettings(s) => Ok(s),
            other => Err(unexpected("node_settings", &other)),
        }
    }

    /// How many of a job's nodes have recorded an outcome.
    pub fn count_outcomes(&mut self, job_id: u64) -> Result<u64, ClientError> {
        self.outcomes_of(job_id).map(|(outcomes, _)| outcomes)
    }

    /// How many of a job's nodes have recorded an outcome, and how many nodes greenupd
    /// opened the job with (`None` from an older greenupd).
    pub fn outcomes_of(&mut self, job_id: u64) -> Result<(u64, Option<u64>), ClientError> {
        match self.call(&Request::CountOutcomes { job_id })? {
            Reply::OutcomeCount {
                outcomes, nodes, ..
            } => Ok((outcomes, nodes)),
            other => Err(unexpected("outcome_count", &other)),
        }
    }

    /// One node's settings for an open job.
    pub fn node_settings(&mut self, job_id: u64, node: &str) -> Result<NodeSettings, ClientError> {
        match self.call(&Request::NodeSettings {
            job_id,
            node: node.to_string(),
        })? {
            Reply::NodeSettings(s) => Ok(s),
            other => Err(unexpected("node_settings", &other)),
        }
    }

    /// A node's end in one request: its outcomes, and with `close` (the first node) the
    /// job's close once every node greenupd opened it with has reported.
    pub fn end_node(
        &mut self,
        job_id: u64,
        outcomes: Vec<NodeOutcome>,
        close: Option<JobEnd>,
        restart_count: Option<u32>,
    ) -> Result<NodeEnded, ClientError> {
        match self.call(&Request::EndNode {
            job_id,
            outcomes,
            close,
            restart_count,
        })? {
            Reply::NodeEnded {
                outcomes,
                nodes,
                closed,
                ..
            } => Ok(NodeEnded {
                outcomes,
                nodes,
                closed,
            }),
            other => Err(unexpected("node_ended", &other)),
        }
    }

    /// Record a node's outcome; `Ok(false)` when the same outcome was stored before.
    pub fn record_outcome(&mut self, outcome: NodeOutcome) -> Result<bool, ClientError> {
        match self.call(&Request::RecordOutcome(outcome))? {
            Reply::Stored { new, .. } => Ok(new),
            other => Err(unexpected("stored", &other)),
        }
    }

    /// Apply `policy` to `profile` again after a hold; `Ok(false)` when none was held.
    pub fn clear_hold(&mut self, profile: &str, policy: &str) -> Result<bool, ClientError> {
        let req = Request::ClearHold {
            profile: profile.to_string(),
            policy: policy.to_string(),
        };
        match self.call(&req)? {
            Reply::HoldCleared { held } => Ok(held),
            other => Err(unexpected("hold_cleared", &other)),
        }
    }

    /// Close run `restart_count` of a job (any run: `None`); `Ok(false)` when it was
    /// closed before.
    pub fn close_job(
        &mut self,
        job_id: u64,
        end: Option<JobEnd>,
        restart_count: Option<u32>,
    ) -> Result<bool, ClientError> {
        let req = Request::CloseJob {
            job_id,
            end,
            restart_count,
        };
        match self.call(&req)? {
            Reply::Stored { new, .. } => Ok(new),
            other => Err(unexpected("stored", &other)),
        }
    }

    /// One job with its decision and outcomes; a record too large for one reply (a job
    /// of thousands of nodes) is fetched in parts.
    pub fn get_job(&mut self, job_id: u64) -> Result<JobRecord, ClientError> {
        match self.call(&Request::GetJob { job_id }) {
            Ok(Reply::Job(j)) => Ok(*j),
            Ok(other) => Err(unexpected("job", &other)),
            Err(ClientError::Server(e)) if e.code == ErrorCode::TooLong => {
                self.job_in_parts(job_id)
            }
            Err(e) => Err(e),
        }
    }

    /// One job's record, part by part. A record that grows meanwhile (an outcome
    /// arrived) is read again from the start, a few times at most.
    pub fn job_in_parts(&mut self, job_id: u64) -> Result<JobRecord, ClientError> {
        for _ in 0..4 {
            let mut text = String::new();
            let mut want_total = None;
            let consistent = loop {
                let offset = text.len() as u64;
                let (got, total, part) = match self.call(&Request::GetJobPart { job_id, offset })? {
                    Reply::JobPart {
                        offset,
                        total,
                        text,
                        ..
                    } => (offset, total, text),
                    other => return Err(unexpected("job_part", &other)),
                };
                if got != offset || *want_total.get_or_insert(total) != total {
                    break false;
                }
                if part.is_empty() && text.len() as u64 != total {
                    return Err(ClientError::Protocol(format!(
                        "job {job_id}: an empty part at byte {offset} of {total}"
                    )));
                }
                text.push_str(&part);
                if text.len() as u64 >= total {
                    break text.len() as u64 == total;
                }
            };
            if consistent {
                return serde_json::from_str(&text)
                    .map_err(|e| ClientError::Protocol(format!("job {job_id}'s record: {e}")));
            }
        }
        Err(ClientError::Protocol(format!(
            "job {job_id}'s record kept changing while it was read in parts"
        )))
    }

    /// Jobs the caller may see, newest first: up to `filter.limit` (default 100), asking
    /// page by page when one reply cannot hold them all.
    pub fn list_jobs(&mut self, mut filter: ListJobs) -> Result<Vec<JobSummary>, ClientError> {
        let max = filter.limit.unwrap_or(100) as usize;
        pages(max, max, filter.before_job_id, |limit, before| {
            filter.limit = Some(limit);
            filter.before_job_id = before;
            match self.call(&Request::ListJobs(filter.clone()))? {
                Reply::Jobs { jobs, truncated } => Ok((jobs, truncated)),
                other => Err(unexpected("jobs", &other)),
            }
        })
    }

    /// One page of whole jobs the caller may see, newest first, and whether more match.
    /// A job too large for any page comes alone, fetched in parts.
    pub fn list_records(
        &mut self,
        filter: ListRecords,
    ) -> Result<(Vec<JobRecord>, bool), ClientError> {
        match self.call(&Request::ListRecords(filter))? {
            Reply::Records {
                mut jobs,
                truncated,
                oversized,
            } => {
                if let Some(id) = oversized {
                    jobs.push(self.job_in_parts(id)?);
                }
                Ok((jobs, truncated))
            }
            other => Err(unexpected("records", &other)),
        }
    }

    /// Up to `max` whole jobs matching `filter`, newest first, asking page by page
    /// (pages of `filter.limit`, default and at most [`MAX_RECORDS`]; one round trip
    /// unless more than a page matches).
    pub fn records(
        &mut self,
        mut filter: ListRecords,
        max: usize,
    ) -> Result<Vec<JobRecord>, ClientError> {
        let page_size = filter.limit.unwrap_or(MAX_RECORDS).clamp(1, MAX_RECORDS) as usize;
        pages(max, page_size, filter.before_job_id, |limit, before| {
            filter.limit = Some(limit);
            filter.before_job_id = before;
            self.list_records(filter.clone())
        })
    }

    /// The daemon's status and ledger.
    pub fn status(&mut self) -> Result<Status, ClientError> {
        match self.call(&Request::Status {})? {
            Reply::Status(s) => Ok(s),
            other => Err(unexpected("status", &other)),
        }
    }

    /// Send a node's measured power; returns the samples greenupd counted and, when
    /// greenupd gives part of the job's watts back, the lower limit the node is to hold.
    pub fn power_report(
        &mut self,
        report: crate::live_power::PowerReport,
    ) -> Result<(u64, Option<greenup_core::quantity::Watts>), ClientError> {
        match self.call(&Request::PowerReport(report))? {
            Reply::PowerTaken { samples, limit_w } => Ok((samples, limit_w)),
            other => Err(unexpected("power_taken", &other)),
        }
    }

    /// The power caps now and over the last `hours` (default: all greenupd keeps).
    pub fn power_status(
        &mut self,
        hours: Option<f64>,
    ) -> Result<crate::live_power::PowerView, ClientError> {
        match self.call(&Request::PowerStatus { hours })? {
            Reply::Power(v) => Ok(*v),
            other => Err(unexpected("power", &other)),
        }
    }

    /// The energy budgets, optionally only one account's or partition's (with the site's).
    pub fn budgets(
        &mut self,
        account: Option<String>,
        partition: Option<String>,
    ) -> Result<Vec<greenup_wire::budget::Standing>, ClientError> {
        match self.call(&Request::Budgets { account, partition })? {
            Reply::Budgets { budgets } => Ok(budgets),
            other => Err(unexpected("budgets", &other)),
        }
    }

    /// What `job` would be predicted and charged if it started now.
    pub fn quote(&mut self, job: OpenJob) -> Result<greenup_wire::budget::Quote, ClientError> {
        match self.call(&Request::Quote(job))? {
            Reply::Quote(q) => Ok(q),
            other => Err(unexpected("quote", &other)),
        }
    }
}

/// A listed job: its id is where the next page starts.
trait Listed {
    fn job_id(&self) -> u64;
}

impl Listed for JobSummary {
    fn job_id(&self) -> u64 {
        self.job_id
    }
}

impl Listed for JobRecord {
    fn job_id(&self) -> u64 {
        self.job_id
    }
}

/// Up to `max` jobs, newest first, below job `before` if given, from pages of at most
/// `page_size` that `fetch` (given a page's limit and the id it starts below) gets with
/// whether more match.
fn pages<T: Listed>(
    max: usize,
    page_size: usize,
    mut before: Option<u64>,
    mut fetch: impl FnMut(u32, Option<u64>) -> Result<(Vec<T>, bool), ClientError>,
) -> Result<Vec<T>, ClientError> {
    let mut out: Vec<T> = Vec::new();
    while out.len() < max {
        let want = (max - out.len()).min(page_size) as u32;
        let (page, truncated) = fetch(want, before)?;
        let last = page.last().map(Listed::job_id);
        out.extend(page);
        match last {
            Some(id) if truncated => before = Some(id),
            _ => break,
        }
    }
    out.truncate(max);
    Ok(out)
}

fn unexpected(wanted: &str, got: &Reply) -> ClientError {
    let kind = serde_json::to_value(got)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
        .unwrap_or_default();
    ClientError::Protocol(format!("expected a {wanted} reply, got {kind}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_parse() {
        assert_eq!(
            Endpoint::parse("unix:/run/g.sock"),
            Endpoint::Unix("/run/g.sock".into())
        );
        assert_eq!(
            Endpoint::parse("/run/g.sock"),
            Endpoint::Unix("/run/g.sock".into())
        );
        assert_eq!(
            Endpoint::parse("ctl:7470"),
            Endpoint::Tcp("ctl:7470".into())
        );
    }

    #[test]
    fn connect_to_nothing_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let ep = Endpoint::Unix(dir.path().join("none.sock"));
        let e = Client::connect(&ep, Duration::from_millis(100)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot connect to greenupd at unix:"),
            "{e}"
        );
    }
}
