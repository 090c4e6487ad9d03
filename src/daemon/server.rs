//! greenupd's server: TCP and Unix listeners, one task per connection, the
//! ledger, the store thread, reclaiming vanished jobs, SIGHUP and SIGTERM.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{OnceCell, Semaphore};

use super::auth::{Caller, Roles, authenticate};
use super::decide::{Decider, validate_open};
use super::ledger::Ledger;
use super::munge::Munge;
use super::protocol::{
    Decision, ErrorCode, ErrorReply, JobRecord, JobState, ListJobs, ListRecords, MAX_LINE_BYTES,
    MAX_RECORDS, NodeOutcome, NodeSettings, OpenJob, Reply, ReplyLine, Request, Status, VERSION,
    Verdict,
};
use super::store_thread::StoreHandle;
use crate::report::metrics::{Snapshot, render};
use crate::site::Site;
use crate::store::sqlite::{Checkpointer, now};
use crate::store::{Applied, Change, NewJob, SqliteStore, StoreError};

/// Reads a site config file (greenupd passes `greenup::site::load`).
pub type SiteLoader = Arc<dyn Fn(&Path) -> Result<Site, String> + Send + Sync>;

/// How greenupd runs, beyond the site config.
#[derive(Debug, Clone)]
pub struct Options {
    /// The site config file.
    pub config: PathBuf,
    /// The most connections served at once; more get a `busy` reply.
    pub max_connections: usize,
    /// How long a client may take to send a whole line.
    pub idle_timeout: Duration,
    /// How often open jobs are checked for vanishing or expiry.
    pub reclaim_every: Duration,
    /// Ask Slurm (`squeue`) whether open jobs still exist.
    pub slurm_check: bool,
    /// Jobs younger than this are never reclaimed for missing from Slurm.
    pub min_age_s: i64,
}

impl Options {
    /// Defaults for `config`.
    pub fn new(config: PathBuf) -> Options {
        Options {
            config,
            max_connections: 1024,
            idle_timeout: Duration::from_secs(10),
            reclaim_every: Duration::from_secs(60),
            slurm_check: true,
            min_age_s: 120,
        }
    }
}

/// A loaded site config with everything derived from it.
struct Ctx {
    site: Site,
    roles: Roles,
    decider: Decider,
}

fn build_ctx(site: Site) -> Result<Ctx, String> {
    let (roles, warnings) = Roles::from_site(&site);
    for w in warnings {
        tracing::warn!("{}: {w}", site.path.display());
    }
    let decider = Decider::new(&site)?;
    Ok(Ctx {
        site,
        roles,
        decider,
    })
}

/// A job whose decision is being made, shared by every node that asks meanwhile.
type Pending = Arc<OnceCell<Decision>>;

/// Decisions kept in memory so the other nodes of a job are answered without the store.
const RECENT: usize = 1024;

/// How often the write-ahead log is copied into the database, beside the writer.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

/// The last [`RECENT`] decisions, oldest first out.
#[derive(Default)]
struct Recent {
    by_job: HashMap<u64, Decision>,
    order: std::collections::VecDeque<u64>,
}

impl Recent {
    fn insert(&mut self, d: Decision) {
        let id = d.job_id;
        if self.by_job.insert(id, d).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > RECENT {
            if let Some(old) = self.order.pop_front() {
                self.by_job.remove(&old);
            }
        }
    }

    fn remove(&mut self, id: u64) {
        if self.by_job.remove(&id).is_some() {
            self.order.retain(|j| *j != id);
        }
    }
}

struct Shared {
    opts: Options,
    loader: SiteLoader,
    ctx: RwLock<Arc<Ctx>>,
    ledger: Mutex<Ledger>,
    deciding: Mutex<HashMap<u64, Pending>>,
    recent: Mutex<Recent>,
    store: StoreHandle,
    munge: Option<Munge>,
    started: Instant,
    connections: AtomicU64,
    /// Held while a profile is refined, so two closes never number a version alike.
    refining: tokio::sync::Mutex<()>,
    /// Applications with a refinement waiting for `refining`.
    refine_waiting: Mutex<std::collections::HashSet<String>>,
    /// When each application's last refinement ended.
    refined_at: Mutex<HashMap<String, Instant>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn store_error(e: StoreError) -> ErrorReply {
    match e {
        StoreError::NoSuchJob(id) => ErrorReply::new(
            ErrorCode::NotFound,
            format!("job {id} is not known to greenupd"),
        ),
        other => ErrorReply::new(ErrorCode::StoreFailed, other.to_string()),
    }
}

/// Where a connection came from.
#[derive(Debug, Clone, Copy)]
enum Peer {
    /// TCP: every request must carry a credential.
    Tcp,
    /// Unix socket: the kernel told us who it is.
    Unix(Caller),
}

/// Check a site config the way greenupd would load it; returns the warnings.
pub fn check_config(path: &Path, loader: &SiteLoader) -> Result<Vec<String>, String> {
    let site = loader(path)?;
    let (_, warnings) = Roles::from_site(&site);
    Decider::new(&site)?;
    Ok(warnings)
}

/// Run greenupd until SIGTERM or SIGINT.
pub async fn serve(opts: Options, loader: SiteLoader) -> Result<(), String> {
    serve_until(opts, loader, std::future::pending()).await
}

/// Run greenupd until SIGTERM, SIGINT, or `stop` completes.
pub async fn serve_until(
    opts: Options,
    loader: SiteLoader,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    let site = loader(&opts.config)?;
    let listen = site.daemon.listen.clone();
    let socket = site.daemon.socket.clone();
    let store_path = site.daemon.store.clone();
    let metrics_listen = site.daemon.metrics_listen.clone();
    let ctx = build_ctx(site)?;

    let mut store = SqliteStore::open(&store_path).map_err(|e| e.to_string())?;
    let reservations = crate::store::Store::reservations(&mut store).map_err(|e| e.to_string())?;
    let mut ledger = Ledger::new(&ctx.site);
    ledger.rebuild(&reservations);
    tracing::info!(open_jobs = reservations.len(), store = %store_path.display(), "ledger rebuilt from the store");
    let (store, store_thread) = StoreHandle::spawn(Box::new(store)).map_err(|e| e.to_string())?;
    // A store that cannot be written (read-only) needs no checkpoints; it still serves reads.
    let checkpointer = Checkpointer::start(&store_path, CHECKPOINT_EVERY)
        .inspect_err(|e| tracing::warn!(error = %e, "no background checkpoints"))
        .ok();

    let munge = match Munge::load() {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::error!("{e}; TCP requests will be refused");
            None
        }
    };

    let tcp = TcpListener::bind(&listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    if socket.exists() {
        let _ = std::fs::remove_file(&socket);
    }
    let unix = UnixListener::bind(&socket)
        .map_err(|e| format!("cannot listen on {}: {e}", socket.display()))?;
    // Any local user may connect; SO_PEERCRED says who they are.
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666));
    }
    tracing::info!(tcp = %listen, unix = %socket.display(), "greenupd listening");

    let shared = Arc::new(Shared {
        opts: opts.clone(),
        loader,
        ctx: RwLock::new(Arc::new(ctx)),
        ledger: Mutex::new(ledger),
        deciding: Mutex::new(HashMap::new()),
        recent: Mutex::new(Recent::default()),
        store,
        munge,
        started: Instant::now(),
        connections: AtomicU64::new(0),
        refining: tokio::sync::Mutex::new(()),
        refine_waiting: Mutex::new(Default::default()),
        refined_at: Mutex::new(HashMap::new()),
    });
    let mut metrics = MetricsListener::default();
    metrics.follow(&shared, metrics_listen.as_deref()).await?;
    let limit = Arc::new(Semaphore::new(opts.max_connections));

    let tcp_task = tokio::spawn(accept_tcp(shared.clone(), tcp, limit.clone()));
    let unix_task = tokio::spawn(accept_unix(shared.clone(), unix, limit.clone()));
    let reclaim_task = tokio::spawn(reclaim_loop(shared.clone()));

    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let mut hup = signal(SignalKind::hangup()).map_err(|e| e.to_string())?;
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => {
                reload(&shared);
                let want = shared.ctx.read().unwrap_or_else(|e| e.into_inner()).site.daemon.metrics_listen.clone();
                if let Err(e) = metrics.follow(&shared, want.as_deref()).await {
                    tracing::error!("{e}; metrics stay where they were");
                }
            }
        }
    }
    tracing::info!("stopping: no new connections; finishing requests in flight");
    tcp_task.abort();
    unix_task.abort();
    reclaim_task.abort();
    metrics.stop();
    let all = u32::try_from(opts.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(Duration::from_secs(5), limit.acquire_many(all)).await;
    let _ = std::fs::remove_file(&socket);
    drop(shared);
    // The store thread ends once the last handle is gone, after its last commit.
    let _ = tokio::task::spawn_blocking(move || {
        let _ = store_thread.join();
        drop(checkpointer);
    })
    .await;
    tracing::info!("greenupd stopped");
    Ok(())
}

/// The Prometheus listener, moved when a reload changes `daemon.metrics_listen`.
#[derive(Default)]
struct MetricsListener {
    addr: Option<String>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl MetricsListener {
    /// Serve metrics on `addr` (`None`: nowhere). A new address is bound before the
    /// old listener closes, so a failed bind leaves metrics where they were.
    async fn follow(&mut self, shared: &Arc<Shared>, addr: Option<&str>) -> Result<(), String> {
        if self.addr.as_deref() == addr {
            return Ok(());
        }
        let task = match addr {
            Some(a) => {
                let l = TcpListener::bind(a)
                    .await
                    .map_err(|e| format!("cannot listen on {a} (daemon.metrics_listen): {e}"))?;
                tracing::info!(metrics = %a, "serving Prometheus metrics");
                let s = shared.clone();
                Some(tokio::spawn(super::metrics_http::serve(l, move || {
                    metrics_page(s.clone())
                })))
            }
            None => {
                tracing::info!("metrics listener closed");
                None
            }
        };
        self.stop();
        self.addr = addr.map(str::to_string);
        self.task = task;
        Ok(())
    }

    fn stop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

fn reload(shared: &Arc<Shared>) {
    let path = shared.opts.config.clone();
    match (shared.loader)(&path).and_then(build_ctx) {
        Ok(ctx) => {
            let old = shared.ctx.read().unwrap_or_else(|e| e.into_inner()).clone();
            if old.site.daemon.listen != ctx.site.daemon.listen
                || old.site.daemon.socket != ctx.site.daemon.socket
            {
                tracing::warn!("listen addresses and the store path change only on restart");
            }
            lock(&shared.ledger).set_caps(&ctx.site);
            *shared.ctx.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(ctx);
            tracing::info!(config = %path.display(), "config reloaded");
        }
        Err(e) => tracing::error!("config not reloaded, keeping the old one: {e}"),
    }
}

async fn accept_tcp(shared: Arc<Shared>, listener: TcpListener, limit: Arc<Semaphore>) {
    loop {
        let (stream, addr) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let limit = limit.clone();
        tokio::spawn(async move {
            tracing::debug!(%addr, "connection");
            serve_conn(shared, stream, Peer::Tcp, limit).await;
        });
    }
}

async fn accept_unix(shared: Arc<Shared>, listener: UnixListener, limit: Arc<Semaphore>) {
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        let limit = limit.clone();
        tokio::spawn(async move {
            let peer = match stream.peer_cred() {
                Ok(c) => Peer::Unix(Caller {
                    uid: c.uid(),
                    gid: c.gid(),
                }),
                Err(e) => {
                    tracing::warn!("SO_PEERCRED failed: {e}");
                    Peer::Tcp
                }
            };
            serve_conn(shared, stream, peer, limit).await;
        });
    }
}

async fn write_reply<W: AsyncWrite + Unpin>(w: &mut W, reply: &ReplyLine) -> bool {
    let line = reply.to_line();
    matches!(
        tokio::time::timeout(Duration::from_secs(5), w.write_all(&line)).await,
        Ok(Ok(()))
    )
}

async fn serve_conn<S: AsyncRead + AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    stream: S,
    peer: Peer,
    limit: Arc<Semaphore>,
) {
    let (r, mut w) = tokio::io::split(stream);
    let Ok(_permit) = limit.try_acquire_owned() else {
        let busy = ErrorReply::new(
            ErrorCode::Busy,
            "greenupd is serving its maximum number of connections; retry",
        );
        write_reply(&mut w, &ReplyLine::err(busy)).await;
        return;
    };
    shared.connections.fetch_add(1, Ordering::Relaxed);
    let mut reader = BufReader::new(r);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        let mut limited = (&mut reader).take(MAX_LINE_BYTES as u64 + 1);
        let read = limited.read_until(b'\n', &mut line);
        match tokio::time::timeout(shared.opts.idle_timeout, read).await {
            Err(_) => {
                if !line.is_empty() {
                    let msg = format!(
                        "no complete line within {:?}; closing",
                        shared.opts.idle_timeout
                    );
                    write_reply(
                        &mut w,
                        &ReplyLine::err(ErrorReply::new(ErrorCode::Timeout, msg)),
                    )
                    .await;
                }
                break;
            }
            Ok(Err(_)) | Ok(Ok(0)) => break,
            Ok(Ok(_)) => {}
        }
        if line.last() != Some(&b'\n') {
            if line.len() > MAX_LINE_BYTES {
                let msg =
                    format!("line longer than {MAX_LINE_BYTES} bytes; closing this connection");
                write_reply(
                    &mut w,
                    &ReplyLine::err(ErrorReply::new(ErrorCode::TooLong, msg)),
                )
                .await;
            }
            // Otherwise the client hung up mid-line: nothing to answer.
            break;
        }
        let reply = handle_line(&shared, &line, peer).await;
        if !write_reply(&mut w, &reply).await {
            break;
        }
    }
    let _ = w.shutdown().await;
    shared.connections.fetch_sub(1, Ordering::Relaxed);
}

#[derive(Deserialize)]
struct Incoming<'a> {
    v: Option<serde_json::Value>,
    cred: Option<String>,
    #[serde(borrow)]
    req: Option<&'a RawValue>,
}

async fn handle_line(shared: &Arc<Shared>, line: &[u8], peer: Peer) -> ReplyLine {
    let started = Instant::now();
    let (op, result) = match parse_and_run(shared, line, peer).await {
        Ok((op, r)) => (op, r),
        Err(e) => ("-", Err(e)),
    };
    if let Err(e) = &result {
        tracing::info!(op, error = %e, "request refused");
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

type Outcome = Result<Reply, ErrorReply>;

async fn parse_and_run(
    shared: &Arc<Shared>,
    line: &[u8],
    peer: Peer,
) -> Result<(&'static str, Outcome), ErrorReply> {
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
    let req: Request = serde_json::from_str(raw.get())
        .map_err(|e| ErrorReply::new(ErrorCode::BadRequest, format!("invalid \"req\": {e}")))?;
    let op = req.op();
    Ok((op, run(shared, caller, req).await))
}

async fn run(shared: &Arc<Shared>, caller: Caller, req: Request) -> Outcome {
    let ctx = shared.ctx.read().unwrap_or_else(|e| e.into_inner()).clone();
    match req {
        Request::OpenJob(o) => {
            ctx.roles.require_write(caller, "open jobs")?;
            validate_open(&o)?;
            let d = open_job(shared, ctx.clone(), o).await?;
            if d.verdict == Verdict::Refused {
                return Err(ErrorReply::new(
                    ErrorCode::OverBudget,
                    format!("job {}: {}", d.job_id, d.reason),
                ));
            }
            Ok(Reply::Decision(d))
        }
        Request::NodeSettings { job_id, node } => {
            let (owner, d) = decision_of(shared, job_id).await?;
            ctx.roles.require_read(caller, owner, job_id)?;
            let used = d
                .plan
                .as_ref()
                .is_none_or(|p| p.nodes.iter().any(|n| n.name == node));
            Ok(Reply::NodeSettings(NodeSettings {
                job_id,
                freq_ghz: d.freq_for(&node),
                node,
                used,
                verdict: d.verdict,
            }))
        }
        Request::RecordOutcome(o) => {
            ctx.roles.require_write(caller, "record outcomes")?;
            validate_outcome(&o)?;
            let job_id = o.job_id;
            match shared
                .store
                .write(Change::Outcome {
                    outcome: o,
                    at: now(),
                })
                .await
                .map_err(store_error)?
            {
                Applied::Stored { new } => Ok(Reply::Stored { job_id, new }),
                Applied::Opened { .. } => Err(ErrorReply::new(
                    ErrorCode::Internal,
                    "store answered an outcome with an open",
                )),
            }
        }
        Request::CloseJob { job_id, end } => {
            ctx.roles.require_write(caller, "close jobs")?;
            close_job(shared, job_id, JobState::Closed, end).await
        }
        Request::GetJob { job_id } => {
            let job = stored_job(shared, job_id, "is not known to greenupd").await?;
            ctx.roles.require_read(caller, job.uid, job_id)?;
            Ok(Reply::Job(Box::new(job)))
        }
        Request::ListJobs(ListJobs { uid, state, limit }) => {
            let uid = readable_uid(&ctx, caller, uid)?;
            let limit = limit.unwrap_or(100).min(10_000);
            let jobs = shared
                .store
                .read(move |s| s.list_jobs(uid, state, limit))
                .await
                .map_err(store_error)?;
            Ok(Reply::Jobs { jobs })
        }
        Request::ListRecords(filter) => {
            let limit = filter.limit.unwrap_or(100).clamp(1, MAX_RECORDS);
            let filter = ListRecords {
                uid: readable_uid(&ctx, caller, filter.uid)?,
                // One more than asked, to tell whether more match.
                limit: Some(limit + 1),
                ..filter
            };
            let mut jobs = shared
                .store
                .read(move |s| s.job_records(&filter))
                .await
                .map_err(store_error)?;
            let mut truncated = jobs.len() > limit as usize;
            jobs.truncate(limit as usize);
            // Keep the reply well inside one line; the client asks for the rest.
            let mut bytes = 0;
            let fits = jobs
                .iter()
                .take_while(|j| {
                    bytes += serde_json::to_vec(j).map_or(MAX_LINE_BYTES, |v| v.len() + 1);
                    bytes <= MAX_LINE_BYTES / 2
                })
                .count()
                .max(1);
            if fits < jobs.len() {
                truncated = true;
                jobs.truncate(fits);
            }
            Ok(Reply::Records { jobs, truncated })
        }
        Request::Status => Ok(Reply::Status(status(shared, &ctx).await?)),
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
async fn status(shared: &Arc<Shared>, ctx: &Ctx) -> Result<Status, ErrorReply> {
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
        ledger: lock(&shared.ledger).lines(),
    })
}

/// The Prometheus page: the status reply's budget and jobs plus what the store counts.
/// A store that cannot be read leaves its metrics out rather than failing the scrape.
async fn metrics_page(shared: Arc<Shared>) -> String {
    let ctx = shared.ctx.read().unwrap_or_else(|e| e.into_inner()).clone();
    let mut snap = match status(&shared, &ctx).await {
        Ok(st) => Snapshot::from_status(&st),
        Err(e) => {
            tracing::warn!(error = %e.message, "metrics: status unavailable");
            Snapshot::default()
        }
    };
    match shared.store.read(|s| s.metrics()).await {
        Ok(m) => {
            snap.decisions_by_policy = m.decisions_by_policy;
            snap.fallbacks_by_reason = m.fallbacks_by_reason;
            snap.prediction_error = m.prediction_error;
        }
        Err(e) => tracing::warn!(error = %e, "metrics: store unavailable"),
    }
    let db = &ctx.site.daemon.store;
    let mut wal = db.clone().into_os_string();
    wal.push("-wal");
    snap.store_bytes = [db.as_os_str(), wal.as_os_str()]
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    render(&snap)
}

fn validate_outcome(o: &NodeOutcome) -> Result<(), ErrorReply> {
    use super::decide::bad_field;
    if o.node.is_empty() || o.node.len() > 255 {
        return Err(bad_field(
            "node",
            &o.node,
            "a node name of 1 to 255 characters",
        ));
    }
    for (field, v) in [
        ("freq_ghz", o.freq_ghz),
        ("energy_j", o.energy_j),
        ("elapsed_s", o.elapsed_s),
    ] {
        if let Some(x) = v
            && !(x.is_finite() && x >= 0.0)
        {
            return Err(bad_field(field, x, "a finite number, 0 or more"));
        }
    }
    Ok(())
}

/// The decision of a job and its owner, from memory if open, else from the store.
async fn decision_of(shared: &Arc<Shared>, job_id: u64) -> Result<(u32, Decision), ErrorReply> {
    let job = stored_job(shared, job_id, "is not open: open it first").await?;
    Ok((job.uid, job.decision))
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

async fn open_job(
    shared: &Arc<Shared>,
    ctx: Arc<Ctx>,
    req: OpenJob,
) -> Result<Decision, ErrorReply> {
    let job_id = req.job_id;
    if let Some(d) = lock(&shared.recent).by_job.get(&job_id) {
        return Ok(d.clone());
    }
    // Every node that asks while the decision is being made waits for that one
    // decision. A job decided earlier (before a restart, or pushed out of `recent`)
    // is decided again, and the store then returns the decision it holds.
    let cell = lock(&shared.deciding).entry(job_id).or_default().clone();
    let result = cell
        .get_or_try_init(|| decide_and_store(shared, ctx, req))
        .await
        .cloned();
    if let Ok(d) = &result {
        lock(&shared.recent).insert(d.clone());
    }
    let mut deciding = lock(&shared.deciding);
    if deciding.get(&job_id).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
        deciding.remove(&job_id);
    }
    result
}

async fn decide_and_store(
    shared: &Arc<Shared>,
    ctx: Arc<Ctx>,
    req: OpenJob,
) -> Result<Decision, ErrorReply> {
    let req = super::time_limit::complete(req, shared.opts.slurm_check, &ctx.site).await;
    let at = now();
    let job_id = req.job_id;
    let limit_s = req
        .time_limit_s
        .unwrap_or(super::time_limit::UNLIMITED_HOLD_S);
    let expires_at = at
        .saturating_add(limit_s as i64)
        .saturating_add(ctx.site.daemon.grace_s as i64);
    // Plan outside the ledger lock (planning is the costly part), then reserve under
    // it. If the budget shrank meanwhile and the plan no longer fits, plan again;
    // after a few tries, plan under the lock so the job cannot starve.
    let part = req.partition.clone();
    let mut tries = 0;
    let p = loop {
        tries += 1;
        let free = lock(&shared.ledger).free_w(part.as_deref());
        let p = if tries > 3 {
            let mut ledger = lock(&shared.ledger);
            let free = ledger.free_w(part.as_deref());
            let p = ctx.decider.decide(&ctx.site, &req, free)?;
            if p.verdict != Verdict::Refused {
                ledger.reserve(job_id, part.as_deref(), p.reserve_w, expires_at, at);
            }
            break p;
        } else {
            let (ctx2, req2) = (ctx.clone(), req.clone());
            tokio::task::spawn_blocking(move || ctx2.decider.decide(&ctx2.site, &req2, free))
                .await
                .map_err(|e| {
                    ErrorReply::new(ErrorCode::Internal, format!("decision task failed: {e}"))
                })??
        };
        let mut ledger = lock(&shared.ledger);
        let now_free = ledger.free_w(part.as_deref());
        let shrank_past_it = match (free, now_free) {
            (Some(then), Some(now)) => now < then && p.reserve_w > now,
            _ => false,
        };
        if shrank_past_it {
            continue;
        }
        if p.verdict != Verdict::Refused {
            ledger.reserve(job_id, part.as_deref(), p.reserve_w, expires_at, at);
        }
        break p;
    };
    let decision = Decision {
        job_id,
        verdict: p.verdict,
        reason: p.reason,
        policy: p.policy,
        profile: p.profile,
        profile_version: p.profile_version,
        power_cap_w: p.power_cap_w,
        reserved_w: p.reserve_w,
        plan: p.plan,
        decided_at: at,
    };
    let inputs = p.inputs;
    let partition = req.partition.clone();
    let change = Change::Open(Box::new(NewJob {
        request: req,
        decision,
        inputs,
        expires_at,
    }));
    match shared.store.write(change).await {
        Ok(Applied::Opened {
            new: true,
            decision,
            ..
        }) => Ok(*decision),
        Ok(Applied::Opened {
            new: false,
            decision,
            state,
        }) => {
            // Stored before (a restart, or a job closed already): the stored decision wins.
            let mut ledger = lock(&shared.ledger);
            ledger.release(job_id);
            if state == JobState::Open && decision.verdict != Verdict::Refused {
                ledger.reserve(
                    job_id,
                    partition.as_deref(),
                    decision.reserved_w,
                    expires_at,
                    decision.decided_at,
                );
            }
            Ok(*decision)
        }
        Ok(Applied::Stored { .. }) => {
            lock(&shared.ledger).release(job_id);
            Err(ErrorReply::new(
                ErrorCode::Internal,
                "store answered an open with a plain ack",
            ))
        }
        Err(e) => {
            lock(&shared.ledger).release(job_id);
            Err(store_error(e))
        }
    }
}

async fn close_job(
    shared: &Arc<Shared>,
    job_id: u64,
    state: JobState,
    end: Option<String>,
) -> Outcome {
    let applied = shared
        .store
        .write(Change::Close {
            job_id,
            state,
            end,
            at: now(),
        })
        .await
        .map_err(store_error)?;
    lock(&shared.ledger).release(job_id);
    let app = {
        let mut recent = lock(&shared.recent);
        let app = recent.by_job.get(&job_id).map(|d| d.profile.clone());
        recent.remove(job_id);
        app
    };
    match applied {
        Applied::Stored { new } => {
            // A repeated close teaches nothing new; a reclaimed job has no outcome worth it.
            // A job decided without a profile has nothing to refine.
            if new && state == JobState::Closed && app != Some(None) {
                tokio::spawn(refine_after_close(shared.clone(), job_id, app.flatten()));
            }
            Ok(Reply::Stored { job_id, new })
        }
        Applied::Opened { .. } => Err(ErrorReply::new(
            ErrorCode::Internal,
            "store answered a close with an open",
        )),
    }
}

/// Closed jobs a refinement learns from: the newest of the application's.
const REFINE_FROM: u32 = 50;

/// Least time between the end of one refinement of an application and the next.
const REFINE_GAP: Duration = Duration::from_secs(1);

/// After `job_id` closed (and the close was answered): refine its application's profile
/// (`app`, or the one its stored decision names) from its newest closed jobs and store
/// the next version. Failures are only logged.
async fn refine_after_close(shared: Arc<Shared>, job_id: u64, app: Option<String>) {
    let app = match app {
        Some(app) => app,
        // Not among the recent decisions: ask the store for the profile alone, since
        // every close comes here and a whole job is costly to read.
        None => match shared.store.read(move |s| s.profile_of(job_id)).await {
            Ok(Some(Some(app))) => app,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(job_id, error = %e, "refinement skipped: cannot read the job");
                return;
            }
        },
    };
    // At most one refinement waits per application: it reads the newest closed jobs
    // once it runs, so it learns from this close too. A burst of closes then costs a
    // few refinements, not one each.
    if !lock(&shared.refine_waiting).insert(app.clone()) {
        return;
    }
    // And at most one a second: reading and refitting compete with the requests for
    // the CPU, and a burst of closes teaches little more every millisecond.
    let last = lock(&shared.refined_at).get(&app).copied();
    if let Some(last) = last {
        tokio::time::sleep_until((last + REFINE_GAP).into()).await;
    }
    let _one_at_a_time = shared.refining.lock().await;
    lock(&shared.refine_waiting).remove(&app);
    let ctx = shared.ctx.read().unwrap_or_else(|e| e.into_inner()).clone();
    let name = app.clone();
    // Reading 50 whole jobs takes milliseconds: a connection of its own keeps that off
    // the store thread, whose commits other requests wait for.
    let done = tokio::task::spawn_blocking(move || {
        let records = SqliteStore::open_reader(&ctx.site.daemon.store)
            .and_then(|mut s| crate::store::Store::closed_jobs_of(&mut s, &name, REFINE_FROM))
            .map_err(|e| format!("cannot read the jobs: {e}"))?;
        crate::profile::refine::refine_and_store(&ctx.site, &name, &records)
            .map_err(|e| e.to_string())
    })
    .await;
    lock(&shared.refined_at).insert(app.clone(), Instant::now());
    match done {
        Ok(Ok(Some(v))) => tracing::info!(
            job_id,
            profile = %app,
            version = v.version,
            samples = v.fit.samples,
            residual = v.fit.residual,
            "profile refined"
        ),
        Ok(Ok(None)) => tracing::debug!(job_id, profile = %app, "no usable outcome to refine from"),
        Ok(Err(e)) => tracing::warn!(job_id, profile = %app, error = %e, "refinement failed"),
        Err(e) => tracing::warn!(job_id, profile = %app, error = %e, "refinement stopped"),
    }
}

/// How long reclaim waits for squeue; past it, reclaim goes by time limits alone.
const SQUEUE_BOUND: Duration = Duration::from_secs(20);

/// Job ids Slurm still knows, or `None` if Slurm could not be asked.
fn slurm_jobs() -> Option<std::collections::HashSet<u64>> {
    let mut squeue = std::process::Command::new("squeue");
    squeue.args(["-h", "-o", "%A %T", "-t", "all"]);
    let out = crate::slurm::command::stdout_of(&mut squeue, SQUEUE_BOUND)
        .inspect_err(|e| tracing::warn!(error = %e, "reclaim cannot ask Slurm"))
        .ok()?;
    Some(live_jobs(&out))
}

/// Job ids in `squeue -o "%A %T"` output that still hold or will hold nodes. A job
/// slurmctld still lists in a final state (for MinJobAge after it ended) has
/// released its nodes, so its reservation is reclaimed without waiting for it to
/// drop out of the list.
fn live_jobs(squeue: &str) -> std::collections::HashSet<u64> {
    const ENDED: [&str; 9] = [
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    ];
    squeue
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let id = words.next()?.parse().ok()?;
            let state = words.next().unwrap_or("");
            (!ENDED.contains(&state)).then_some(id)
        })
        .collect()
}

async fn reclaim_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.opts.reclaim_every);
    tick.tick().await;
    loop {
        tick.tick().await;
        reclaim_once(&shared).await;
    }
}

async fn reclaim_once(shared: &Arc<Shared>) {
    let t = now();
    let (mut gone, candidates) = {
        let l = lock(&shared.ledger);
        (l.expired(t), l.opened_before(t - shared.opts.min_age_s))
    };
    if shared.opts.slurm_check && !candidates.is_empty() {
        match tokio::task::spawn_blocking(slurm_jobs).await.ok().flatten() {
            Some(alive) => gone.extend(candidates.into_iter().filter(|id| !alive.contains(id))),
            None => tracing::debug!("squeue unavailable; reclaiming by time limit only"),
        }
    }
    gone.sort_unstable();
    gone.dedup();
    for job_id in gone {
        match close_job(
            shared,
            job_id,
            JobState::Reclaimed,
            Some("vanished or past its time limit".into()),
        )
        .await
        {
            Ok(_) => tracing::info!(job_id, "reservation reclaimed"),
            Err(e) => tracing::warn!(job_id, error = %e, "could not reclaim"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::live_jobs;

    #[test]
    fn jobs_listed_in_a_final_state_are_not_live() {
        // What `squeue -h -o "%A %T" -t all` prints, including a job still listed
        // after it ended and an array task.
        let out = "101 RUNNING\n102 PENDING\n103 COMPLETED\n104 COMPLETING\n\
                   105 CANCELLED\n106 CONFIGURING\n107 TIMEOUT\n108 SUSPENDED\n\
                   109 NODE_FAIL\nnot-a-job RUNNING\n\n110\n";
        let mut live: Vec<u64> = live_jobs(out).into_iter().collect();
        live.sort_unstable();
        assert_eq!(live, vec![101, 102, 104, 106, 108, 110]);
    }
}
