//! greenupd's server: starting and stopping, the shared state, and SIGHUP reloads.
//!
//! One module per job: [`listen`] accepts connections and limits them, [`handlers`]
//! parses and answers requests, [`jobs`] opens and closes jobs with the ledger,
//! [`refine`] schedules profile refinement, [`reclaim`] takes back the reservations
//! of vanished jobs, [`metrics`] serves the Prometheus page.

mod budget;
mod give_back;
mod handlers;
mod jobs;
mod listen;
mod live_power;
mod metrics;
mod missed;
mod power_curves;
mod reclaim;
mod refine;
mod silent;
mod slots;
mod slurm_energy;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, UnixListener};

use super::decide::{Decider, DeciderError};
use super::ledger::Ledger;
use super::store_thread::StoreHandle;
use crate::auth::Roles;
use crate::store::sqlite::Checkpointer;
use crate::store::{SqliteStore, StoreError};
use greenup::input::InputError;
use greenup::site::Site;
use greenup_proto::munge::Munge;
use greenup_proto::protocol::{ErrorCode, ErrorReply};
use jobs::{Pending, Recent};
use metrics::MetricsListener;

/// Reads a site config file (greenupd passes `greenup::site::load`).
pub type SiteLoader = Arc<dyn Fn(&Path) -> Result<Site, InputError> + Send + Sync>;

/// Why greenupd cannot start, or refuses a site config; the message goes to its log.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The site config could not be loaded.
    #[error(transparent)]
    Config(#[from] InputError),
    /// The site config's policies cannot be planned with.
    #[error(transparent)]
    Policies(#[from] DeciderError),
    /// The store could not be opened or read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store's thread could not be started.
    #[error("{0}")]
    StoreThread(std::io::Error),
    /// An address of `daemon.listen` or `daemon.socket` could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address or socket path.
        addr: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The metrics address (`daemon.metrics_listen`) could not be bound.
    #[error("cannot listen on {addr} (daemon.metrics_listen): {source}")]
    MetricsListen {
        /// The address.
        addr: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// A signal handler could not be installed.
    #[error("{0}")]
    Signal(std::io::Error),
}

/// How greenupd runs, beyond the site config.
#[derive(Debug, Clone)]
pub struct Options {
    /// The site config file.
    pub config: PathBuf,
    /// The most connections from root and SlurmUser (the nodes) served at once; more
    /// get a `busy` reply. Ordinary users' and unauthenticated connections have limits
    /// of their own in the site config (`daemon.user_connections` and others).
    pub max_connections: usize,
    /// How long a client may take to send a whole line.
    pub idle_timeout: Duration,
    /// How often open jobs are checked for vanishing or expiry.
    pub reclaim_every: Duration,
    /// Ask Slurm (`squeue`) whether open jobs still exist.
    pub slurm_check: bool,
    /// Jobs younger than this are never reclaimed for missing from Slurm.
    pub min_age_s: i64,
    /// Where greenupd finds Slurm's commands (squeue, scontrol, sacct); `None`: its PATH.
    pub slurm_bin_dir: Option<PathBuf>,
}

impl Options {
    /// Defaults for `config`.
    pub fn new(config: PathBuf) -> Options {
        Options {
            config,
            max_connections: 16_384,
            idle_timeout: Duration::from_secs(10),
            reclaim_every: Duration::from_secs(60),
            slurm_check: true,
            min_age_s: 120,
            slurm_bin_dir: None,
        }
    }
}

/// A loaded site config with everything derived from it.
pub(super) struct Ctx {
    pub(super) site: Site,
    pub(super) roles: Roles,
    /// Shared by the contexts that differ only in measured power curves.
    pub(super) decider: Arc<Decider>,
}

fn build_ctx(site: Site) -> Result<Ctx, DeciderError> {
    let (roles, warnings) = Roles::from_site(&site, greenup_host::users::uid_of);
    for w in warnings {
        tracing::warn!("{}: {w}", site.path.display());
    }
    let decider = Arc::new(Decider::new(&site)?);
    Ok(Ctx {
        site,
        roles,
        decider,
    })
}

/// How often the write-ahead log is copied into the database, beside the writer.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

struct Shared {
    opts: Options,
    loader: SiteLoader,
    ctx: RwLock<Arc<Ctx>>,
    ledger: Mutex<Ledger>,
    /// Energy budget accounts; the check and the charge of one admission hold it together.
    budget: Mutex<greenup::budget::book::Book>,
    deciding: Mutex<HashMap<u64, Pending>>,
    recent: Mutex<Recent>,
    store: StoreHandle,
    munge: Option<Munge>,
    started: Instant,
    connections: AtomicU64,
    /// Every connection's slot, by kind of caller.
    slots: Arc<slots::Slots>,
    /// Jobs decided since start (each job's decision is made once).
    decisions: AtomicU64,
    /// Held while a profile is refined, so two closes never number a version alike.
    refining: tokio::sync::Mutex<()>,
    /// Applications with a refinement waiting for `refining`.
    refine_waiting: Mutex<std::collections::HashSet<String>>,
    /// When each application's last refinement ended.
    refined_at: Mutex<HashMap<String, Instant>>,
    /// Measured power, live: the nodes' latest reports and each cap's sums and timeline.
    live: Mutex<live_power::Live>,
    /// Each node type's measured busy watts per clock, laid over `ctx`'s site.
    power_curves: Mutex<power_curves::Curves>,
    /// Whether a relearning of the power curves waits for `power_learning`.
    power_waiting: AtomicBool,
    /// Held while the power curves are relearned.
    power_learning: tokio::sync::Mutex<()>,
    /// Nodes whose closed jobs sent no outcome, in a row.
    silent: Mutex<silent::Silent>,
    /// Measured energies written into Slurm's accounting (`daemon.slurm_energy`).
    slurm_energy: slurm_energy::Writes,
}

impl Shared {
    /// The loaded config's connection and request limits.
    fn limits(&self) -> greenup::site::DaemonLimits {
        self.ctx
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .site
            .daemon
            .limits
    }

    /// Whether `uid` is root or SlurmUser: a node's, with slots apart from users'.
    fn is_node(&self, uid: u32) -> bool {
        self.ctx
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .roles
            .may_write(uid)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The refusal of a request about a job greenupd has never stored.
fn unknown_job(job_id: u64) -> ErrorReply {
    ErrorReply::new(
        ErrorCode::NotFound,
        format!("job {job_id} is not known to greenupd"),
    )
}

/// A store read of job `job_id`'s data as a request's answer: a store failure, or the
/// job unknown.
fn known<T>(read: Result<Option<T>, StoreError>, job_id: u64) -> Result<T, ErrorReply> {
    read.map_err(store_error)?
        .ok_or_else(|| unknown_job(job_id))
}

fn store_error(e: StoreError) -> ErrorReply {
    match e {
        StoreError::NoSuchJob(id) => unknown_job(id),
        StoreError::OtherRun(why) => ErrorReply::new(ErrorCode::Conflict, why),
        other => ErrorReply::new(ErrorCode::StoreFailed, other.to_string()),
    }
}

/// Check a site config the way greenupd would load it; returns the warnings.
pub fn check_config(path: &Path, loader: &SiteLoader) -> Result<Vec<String>, ServeError> {
    let site = loader(path)?;
    let (_, warnings) = Roles::from_site(&site, greenup_host::users::uid_of);
    Decider::new(&site)?;
    Ok(warnings)
}

/// Run greenupd until SIGTERM or SIGINT.
pub async fn serve(opts: Options, loader: SiteLoader) -> Result<(), ServeError> {
    serve_until(opts, loader, std::future::pending()).await
}

/// Run greenupd until SIGTERM, SIGINT, or `stop` completes.
pub async fn serve_until(
    opts: Options,
    loader: SiteLoader,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), ServeError> {
    let site = loader(&opts.config)?;
    let listen = site.daemon.listen.clone();
    let socket = site.daemon.socket.clone();
    let store_path = site.daemon.store.clone();
    let metrics_listen = site.daemon.metrics_listen.clone();
    let live_site = site.clone();
    warn_license_drift(&site);
    let ctx = build_ctx(site)?;

    let mut store = SqliteStore::open(&store_path)?;
    let reservations = crate::store::Store::reservations(&mut store)?;
    let mut ledger = Ledger::new(&ctx.site);
    ledger.rebuild(&reservations);
    tracing::info!(open_jobs = reservations.len(), store = %store_path.display(), "ledger rebuilt from the store");
    let mut book = greenup::budget::book::Book::default();
    let accounts = crate::store::Store::budget_state(&mut store)?;
    book.restore(accounts.totals, accounts.held);
    let (store, store_thread) =
        StoreHandle::spawn(Box::new(store)).map_err(ServeError::StoreThread)?;
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

    let backlog = opts
        .max_connections
        .max(ctx.site.daemon.limits.max_job_nodes);
    let tcp = bind_tcp(&listen, backlog)
        .await
        .map_err(|source| ServeError::Listen {
            addr: listen.clone(),
            source,
        })?;
    if socket.exists() {
        let _ = std::fs::remove_file(&socket);
    }
    let unix = UnixListener::bind(&socket).map_err(|source| ServeError::Listen {
        addr: socket.display().to_string(),
        source,
    })?;
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
        budget: Mutex::new(book),
        deciding: Mutex::new(HashMap::new()),
        recent: Mutex::new(Recent::default()),
        store,
        munge,
        started: Instant::now(),
        connections: AtomicU64::new(0),
        slots: Arc::new(slots::Slots::default()),
        decisions: AtomicU64::new(0),
        refining: tokio::sync::Mutex::new(()),
        refine_waiting: Mutex::new(Default::default()),
        refined_at: Mutex::new(HashMap::new()),
        silent: Mutex::new(silent::Silent::default()),
        live: Mutex::new(live_power::Live::new(&live_site)),
        power_curves: Mutex::new(power_curves::Curves::default()),
        power_waiting: AtomicBool::new(false),
        power_learning: tokio::sync::Mutex::new(()),
        slurm_energy: slurm_energy::Writes::default(),
    });
    tokio::spawn(power_curves::relearn(shared.clone()));
    let mut metrics = MetricsListener::default();
    metrics.follow(&shared, metrics_listen.as_deref()).await?;

    let tcp_task = tokio::spawn(listen::accept_tcp(shared.clone(), tcp));
    let unix_task = tokio::spawn(listen::accept_unix(shared.clone(), unix));
    let reclaim_task = tokio::spawn(reclaim::reclaim_loop(shared.clone()));
    let live_task = tokio::spawn(live_power::tick_loop(shared.clone()));

    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).map_err(ServeError::Signal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(ServeError::Signal)?;
    let mut hup = signal(SignalKind::hangup()).map_err(ServeError::Signal)?;
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
    live_task.abort();
    metrics.stop();
    let drained = async {
        while shared.slots.held() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), drained).await;
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

/// Listen on `addr` with room for `backlog` connections not yet accepted: every node of
/// the largest job connects at once when it starts. The kernel caps the backlog at
/// `net.core.somaxconn`.
async fn bind_tcp(addr: &str, backlog: usize) -> std::io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let socket = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket
            .bind(a)
            .and_then(|()| socket.listen(u32::try_from(backlog).unwrap_or(u32::MAX)))
        {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the address resolves to nothing",
        )
    }))
}

/// slurm.conf as slurmctld reads it: `$SLURM_CONF`, else /etc/slurm/slurm.conf.
fn slurm_conf_path() -> PathBuf {
    std::env::var_os("SLURM_CONF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/slurm/slurm.conf"))
}

/// A slurm.conf's text with its `Include` files in place (relative paths from its folder,
/// four levels at most, as deep as any site nests them), so licenses declared in an
/// included file count.
fn read_slurm_conf(path: &Path, depth: u32) -> std::io::Result<String> {
    let text = std::fs::read_to_string(path)?;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let t = line.trim();
        let include = t
            .split_once(char::is_whitespace)
            .filter(|(k, _)| k.eq_ignore_ascii_case("include"))
            .map(|(_, v)| v.trim());
        match include {
            Some(inc) if depth < 4 => {
                let p = Path::new(inc);
                let p = if p.is_relative() {
                    path.parent().unwrap_or(Path::new("/")).join(p)
                } else {
                    p.to_path_buf()
                };
                match read_slurm_conf(&p, depth + 1) {
                    Ok(t) => out.push_str(&t),
                    Err(e) => {
                        tracing::info!(file = %p.display(), "slurm.conf's Include not read: {e}")
                    }
                }
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    Ok(out)
}

/// Where Slurm holds the caps (`power.enforce: queue` or `hres`), say in the log where
/// slurm.conf's `Licenses=` (and under `hres` the `resources.yaml` beside it) and the
/// site config's caps differ: a cap changed in one file and not the other queues jobs by
/// the wrong watts, silently. Checked at start and at each reload.
fn warn_license_drift(site: &greenup::site::Site) {
    use greenup::power::slurm;
    if !site.power.enforce.in_slurm() {
        return;
    }
    let path = slurm_conf_path();
    let text = match read_slurm_conf(&path, 0) {
        Ok(t) => t,
        Err(e) => {
            tracing::info!(slurm_conf = %path.display(), "licenses not compared with slurm.conf: {e}");
            return;
        }
    };
    let mut drift = slurm::license_drift(site, &text);
    if site.power.enforce == greenup::site::PowerEnforce::Hres {
        let resources = path.with_file_name("resources.yaml");
        // A missing file declares no layer: each is then named as missing.
        let yaml = std::fs::read_to_string(&resources).unwrap_or_default();
        drift.extend(slurm::resources_drift(site, &yaml));
    }
    for d in &drift {
        tracing::warn!(slurm_conf = %path.display(), "{d}");
    }
    if drift.is_empty() {
        return;
    }
    if let Some(line) = slurm::licenses_line(site) {
        tracing::warn!(
            "the site config's caps need `{line}` in slurm.conf (`greenup site licenses`), then `scontrol reconfigure`"
        );
    }
    if slurm::resources_yaml(site).is_some() {
        tracing::warn!(
            "the site config's caps need Slurm's resources.yaml beside slurm.conf rewritten (`greenup site licenses --resources`), then `scontrol reconfigure`"
        );
    }
}

fn reload(shared: &Arc<Shared>) {
    let path = shared.opts.config.clone();
    let loaded = (shared.loader)(&path)
        .map_err(ServeError::from)
        .and_then(|site| Ok(build_ctx(site)?));
    match loaded {
        Ok(ctx) => {
            let old = shared.ctx.read().unwrap_or_else(|e| e.into_inner()).clone();
            if old.site.daemon.listen != ctx.site.daemon.listen
                || old.site.daemon.socket != ctx.site.daemon.socket
            {
                tracing::warn!("listen addresses and the store path change only on restart");
            }
            lock(&shared.ledger).set_caps(&ctx.site);
            lock(&shared.live).configure(&ctx.site);
            shared.slurm_energy.reloaded();
            // The curves learned so far until they are relearned on the new site's
            // idle watts.
            let ctx =
                power_curves::with_curves(&ctx, &lock(&shared.power_curves).by_type).unwrap_or(ctx);
            *shared.ctx.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(ctx);
            tracing::info!(config = %path.display(), "config reloaded");
            warn_license_drift(&shared.ctx.read().unwrap_or_else(|e| e.into_inner()).site);
            tokio::spawn(power_curves::relearn(shared.clone()));
        }
        Err(e) => tracing::error!("config not reloaded, keeping the old one: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::read_slurm_conf;

    #[test]
    fn included_files_count_relative_to_the_including_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("conf.d")).unwrap();
        std::fs::write(
            dir.path().join("slurm.conf"),
            "ClusterName=c\ninclude conf.d/power.conf\nInclude /nonexistent/x.conf\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("conf.d/power.conf"),
            "Licenses=greenup_w:300\n",
        )
        .unwrap();
        let text = read_slurm_conf(&dir.path().join("slurm.conf"), 0).unwrap();
        let got = greenup::power::slurm::declared_licenses(&text);
        assert_eq!(got.get("greenup_w"), Some(&300), "{text}");
        // An Include that names itself stops at the depth limit instead of recursing on.
        std::fs::write(
            dir.path().join("loop.conf"),
            "Include loop.conf\nLicenses=a:1\n",
        )
        .unwrap();
        let text = read_slurm_conf(&dir.path().join("loop.conf"), 0).unwrap();
        assert_eq!(text.matches("Licenses=a:1").count(), 5, "{text}");
    }
}
