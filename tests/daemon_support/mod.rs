//! Shared set-up for greenupd's integration tests: real munged, real SQLite,
//! a greenupd server on loopback, and credentials made by real users.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use greenup::site::{
    DaemonSettings, DvfsSettings, Enforce, NodeType, OverBudget, Partition, PowerModel, Site,
};
use greenup_core::quantity::{Ghz, Joules, Seconds};
use greenup_daemon::server::{Options, SiteLoader, serve_until};
use greenup_proto::client::{Client, Endpoint};
use greenup_proto::protocol::{Decision, NodeOutcome, OpenJob};

/// A hetero profile for the test site's `std` nodes whose power is half the truth: any
/// measured run of it teaches something, so a refinement always makes a new version.
pub const WRONG_PROFILE: &str = "name: wrong
version: 1
description: power deliberately half of what the nodes draw
hetero:
  iterations: 100
  node_types:
    std: { t_cp_s: 1.0, t_cm_s: 0.1, p_dyn_w: 200, p_static_w: 100 }
";

/// An admin profile directory under `dir` holding only [`WRONG_PROFILE`], as `wrong.yaml`.
pub fn wrong_profile_dir(dir: &Path) -> PathBuf {
    let admin = dir.join("admin");
    std::fs::create_dir_all(&admin).unwrap();
    std::fs::write(admin.join("wrong.yaml"), WRONG_PROFILE).unwrap();
    admin
}

/// The ordinary user the tests act as.
pub const TEST_USER: &str = "greenup-test";

static MUNGE: Once = Once::new();

/// Start munged (installing it if needed) once per test binary.
pub fn munged() {
    MUNGE.call_once(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/munge/start.sh");
        let st = Command::new("bash")
            .arg(&script)
            .stdout(Stdio::null())
            .status()
            .expect("run tests/munge/start.sh");
        assert!(
            st.success(),
            "tests/munge/start.sh failed: munged is needed for these tests"
        );
    });
}

/// The test user's uid, creating the user if missing.
pub fn test_user_uid() -> u32 {
    let id = || {
        Command::new("id")
            .args(["-u", TEST_USER])
            .output()
            .expect("id")
    };
    let mut out = id();
    if !out.status.success() {
        let _ = Command::new("useradd")
            .args(["-M", "-r", "-s", "/usr/sbin/nologin", TEST_USER])
            .status();
        out = id();
    }
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("test user uid")
}

/// `runuser -u USER --`, the command to append to; the test user is made first where a
/// fresh machine has none.
fn as_user(user: &str) -> Command {
    if user == TEST_USER {
        test_user_uid();
    }
    let mut c = Command::new("runuser");
    c.args(["-u", user, "--"]);
    c
}

/// A MUNGE credential for `payload`, made by `user` (root when `None`), with an optional TTL.
pub fn cred_as(user: Option<&str>, payload: &str, ttl: Option<u32>) -> String {
    let mut cmd = match user {
        Some(u) => {
            let mut c = as_user(u);
            c.arg("munge");
            c
        }
        None => Command::new("munge"),
    };
    if let Some(t) = ttl {
        cmd.args(["-t", &t.to_string()]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run munge");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "munge failed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A free loopback port, below the kernel's ephemeral range (32768 and up) and never the
/// same twice in one test binary. A port the kernel picked (bind to port 0) could be
/// handed to a client connection, or to a parallel test, before greenupd binds it; that
/// test's client then reached another test's greenupd (seen once in daemon_budget).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // Each test binary starts at its own place in 10000-29999.
    let start = std::process::id() % 400 * 50;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 10_000 + (start + n) % 20_000;
        if std::net::TcpListener::bind(("127.0.0.1", port as u16)).is_ok() {
            return port as u16;
        }
    }
}

/// A site with `n` nodes `n1..` of one type (200 W dynamic + 100 W static at 2.4 GHz).
pub fn site(dir: &Path, n: usize) -> Site {
    let names: Vec<String> = (1..=n).map(|i| format!("n{i}")).collect();
    let mut node_types = BTreeMap::new();
    node_types.insert(
        "std".to_string(),
        NodeType {
            name: "std".into(),
            freqs_ghz: vec![1.2, 1.6, 2.0, 2.4],
            power: PowerModel::AtMax {
                dynamic_w: 200.0,
                static_w: 100.0,
                gamma: 3.0,
            },
        },
    );
    let mut partitions = BTreeMap::new();
    partitions.insert(
        "debug".to_string(),
        Partition {
            nodes: names.clone(),
            power_cap_w: None,
        },
    );
    Site {
        path: dir.join("greenup.yaml"),
        node_types,
        gpu_types: Default::default(),
        nodes: names
            .iter()
            .map(|n| (n.clone(), "std".to_string()))
            .collect(),
        partitions,
        power_cap_w: None,
        job_energy_limit_j: None,
        default_policy: "min-energy".into(),
        allowed_policies: vec![],
        policy_dirs: vec![repo().join("policies")],
        profile_dir: repo().join("etc/profiles"),
        enforce: Enforce::Open,
        daemon: DaemonSettings {
            listen: format!("127.0.0.1:{}", free_port()),
            socket: dir.join("greenupd.sock"),
            store: dir.join("greenup.db"),
            slurm_user: "root".into(),
            admins: vec![],
            timeout_ms: 5000,
            grace_s: 60,
            metrics_listen: None,
            over_budget: OverBudget::Lowest,
            spool_dir: "/var/spool/greenup".into(),
            limits: Default::default(),
            slurm_energy: false,
        },
        dvfs: DvfsSettings {
            sysfs_root: "/sys".into(),
            run_dir: dir.join("run"),
            per_core_shared: false,
            mpi_runtime: "/nonexistent/libgreenup_mpi.so".into(),
            measure_baselines: true,
            nvml_library: "libnvidia-ml.so.1".into(),
        },
        budgets: Vec::new(),
        baseline: None,
        power: Default::default(),
    }
}

/// A greenupd running in this test process.
pub struct Daemon {
    /// TCP address.
    pub tcp: String,
    /// Unix socket.
    pub socket: PathBuf,
    /// SQLite file.
    pub store: PathBuf,
    /// The temporary directory holding it all.
    pub dir: tempfile::TempDir,
}

impl Daemon {
    /// A TCP client (root's credentials).
    pub fn tcp_client(&self) -> Client {
        Client::connect(&Endpoint::Tcp(self.tcp.clone()), Duration::from_secs(10))
            .expect("connect tcp")
    }
    /// A Unix-socket client.
    pub fn unix_client(&self) -> Client {
        Client::connect(
            &Endpoint::Unix(self.socket.clone()),
            Duration::from_secs(10),
        )
        .expect("connect unix")
    }
}

/// Start greenupd on a fresh store; `tweak` may change the site and options first.
pub fn start(nodes: usize, tweak: impl FnOnce(&Path, &mut Site, &mut Options)) -> Daemon {
    munged();
    let dir = tempfile::tempdir().unwrap();
    start_in(dir, nodes, tweak)
}

/// Start greenupd in `dir` (which may hold a store already).
pub fn start_in(
    dir: tempfile::TempDir,
    nodes: usize,
    tweak: impl FnOnce(&Path, &mut Site, &mut Options),
) -> Daemon {
    munged();
    let mut s = site(dir.path(), nodes);
    let mut opts = Options::new(s.path.clone());
    opts.slurm_check = false;
    tweak(dir.path(), &mut s, &mut opts);
    let shared = Arc::new(s.clone());
    let loader: SiteLoader = Arc::new(move |_p: &Path| Ok((*shared).clone()));
    spawn(dir, &s, opts, loader)
}

/// Start greenupd like [`start`], reading its site from the returned cell at start and
/// at every reload (SIGHUP), so a test can change the config under it.
pub fn start_reloadable(
    nodes: usize,
    tweak: impl FnOnce(&Path, &mut Site, &mut Options),
) -> (Daemon, Arc<std::sync::Mutex<Site>>) {
    munged();
    let dir = tempfile::tempdir().unwrap();
    let mut s = site(dir.path(), nodes);
    let mut opts = Options::new(s.path.clone());
    opts.slurm_check = false;
    tweak(dir.path(), &mut s, &mut opts);
    let cell = Arc::new(std::sync::Mutex::new(s.clone()));
    let read = cell.clone();
    let loader: SiteLoader = Arc::new(move |_p: &Path| Ok(read.lock().unwrap().clone()));
    (spawn(dir, &s, opts, loader), cell)
}

/// Run greenupd for `s` on a thread of its own and wait for its socket.
fn spawn(dir: tempfile::TempDir, s: &Site, opts: Options, loader: SiteLoader) -> Daemon {
    let (tcp, socket, store) = (
        s.daemon.listen.clone(),
        s.daemon.socket.clone(),
        s.daemon.store.clone(),
    );
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        if let Err(e) = rt.block_on(serve_until(opts, loader, std::future::pending())) {
            eprintln!("greenupd failed: {e}");
        }
    });
    for _ in 0..200 {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Daemon {
        tcp,
        socket,
        store,
        dir,
    }
}

/// An open request for `job_id` on nodes `n1..=n`.
pub fn open_req(job_id: u64, uid: u32, n: usize) -> OpenJob {
    OpenJob {
        restart_count: None,
        job_id,
        uid,
        user: None,
        partition: Some("debug".into()),
        nodes: (1..=n).map(|i| format!("n{i}")).collect(),
        nodelist: None,
        min_nodes: None,
        time_limit: greenup::record::TimeLimit::Seconds(3600.0),
        policy: None,
        profile: None,
        energy_cap_j: None,
        power_cap_w: None,
        algorithm: None,
        account: None,
        granted_w: None,
    }
}

/// Count rows in the store with the sqlite3 C library (a second, independent reader).
pub fn count(store: &Path, sql: &str) -> i64 {
    let c =
        rusqlite::Connection::open_with_flags(store, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Record every planned node of `dec` with `total_j` shared evenly, measured by `source`,
/// at the predicted time, then close the job; returns whether the close was new.
pub fn finish_planned(d: &Daemon, dec: &Decision, total_j: f64, source: Option<&str>) -> bool {
    let plan = dec.plan.as_ref().expect("a plan");
    let mut c = d.tcp_client();
    for n in &plan.nodes {
        c.record_outcome(NodeOutcome {
            restart_count: None,
            comm: None,
            job_id: dec.job_id,
            node: n.name.clone(),
            freq_ghz: Some(Ghz(n.freq_ghz.0)),
            energy_j: Some(Joules(total_j / plan.nodes.len() as f64)),
            elapsed_s: Some(Seconds(plan.predicted.time_s.0)),
            source: source.map(greenup::record::Source::parse),
            restored: true,
            note: None,
            gpu: None,
            power: None,
        })
        .unwrap();
    }
    c.close_job(dec.job_id, Some(greenup::record::JobEnd::Completed), None)
        .unwrap()
}

/// Poll until `f` holds; fails after 20 s (a hang, not a speed requirement).
pub fn wait_for(mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "condition not reached"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A site config for the `greenup` CLI that finds `d` (its socket and store), as a
/// user's shell would: nodes n1-n4 of 200 W dynamic + 100 W static.
pub fn cli_site(d: &Daemon) -> PathBuf {
    let site = d.dir.path().join("cli-site.yaml");
    std::fs::write(
        &site,
        format!(
            "node_types:\n  std:\n    frequencies: [1.2, 2.4]\n    power: {{dynamic_w: 200, static_w: 100}}\n\
             nodes:\n  std: \"n[1-4]\"\n\
             daemon:\n  socket: {}\n  store: {}\n",
            d.socket.display(),
            d.store.display()
        ),
    )
    .unwrap();
    site
}

/// The `greenup` binary this package built.
pub fn greenup_bin() -> String {
    env!("CARGO_BIN_EXE_greenup").to_string()
}

/// `greenup meter` for job `job_id` on `node`, as the prolog starts it, reading the node's
/// counters under `paths` and reporting every second, each sample on its own, to `connect`.
pub fn spawn_meter(
    job_id: u32,
    node: &str,
    paths: &greenup_platform::dvfs::job::NodePaths,
    connect: &str,
) -> std::process::Child {
    Command::new(greenup_bin())
        .args(["meter", &job_id.to_string(), "--node", node, "--run-dir"])
        .arg(&paths.run_dir)
        .arg("--sysfs-root")
        .arg(&paths.sysfs_root)
        .args(["--report-every", "1", "--batch", "1", "--connect", connect])
        .spawn()
        .unwrap()
}

/// A node tree with one RAPL package counter of `range_uj`, at `energy_uj`.
pub fn rapl_tree(root: &Path, energy_uj: u64, range_uj: u64) {
    let z = root.join("class/powercap/intel-rapl:0");
    std::fs::create_dir_all(&z).unwrap();
    std::fs::write(z.join("name"), "package-0\n").unwrap();
    std::fs::write(z.join("max_energy_range_uj"), format!("{range_uj}\n")).unwrap();
    set_counter(root, energy_uj);
}

/// Move the counter of [`rapl_tree`] to `energy_uj` at once, as the kernel does: a reader
/// never sees a half-written value.
pub fn set_counter(root: &Path, energy_uj: u64) {
    let z = root.join("class/powercap/intel-rapl:0");
    std::fs::write(z.join("energy_uj.tmp"), format!("{energy_uj}\n")).unwrap();
    std::fs::rename(z.join("energy_uj.tmp"), z.join("energy_uj")).unwrap();
}

/// Begin job `job_id` on `node` as its prolog does on a node it shares with other jobs,
/// asking for no settings: what `greenup meter` needs to find the job.
pub fn begin_shared(paths: &greenup_platform::dvfs::job::NodePaths, job_id: u32, node: &str) {
    use greenup_platform::dvfs::job::{Apply, Scope, begin};
    begin(
        paths,
        job_id,
        node,
        node,
        &Apply::default(),
        &Scope::SharedNode,
    )
    .unwrap();
}

/// Wait for `child` to exit and return its status; fails after 20 s (a hang, not a speed
/// requirement).
pub fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "process still runs"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Run the `greenup` CLI as `user` (root when `None`); returns (exit code, stdout, stderr).
pub fn cli(user: Option<&str>, args: &[&str]) -> (i32, String, String) {
    let mut cmd = match user {
        Some(u) => {
            let mut c = as_user(u);
            c.arg(greenup_bin());
            c
        }
        None => Command::new(greenup_bin()),
    };
    let out = cmd.args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `node`'s outcome of job `job_id` that ran 100 s at `ghz`, computing 95 s at `busy_w`
/// and idle (the test site's 100 W) the rest, as RAPL measured it, with 1000 synchronised
/// MPI calls: a run the node power learning may use (it computed 95 % of its time).
pub fn computing_outcome(job_id: u64, node: &str, ghz: f64, busy_w: f64) -> NodeOutcome {
    NodeOutcome {
        restart_count: None,
        job_id,
        node: node.into(),
        freq_ghz: Some(Ghz(ghz)),
        energy_j: Some(Joules(95.0 * busy_w + 5.0 * 100.0)),
        elapsed_s: Some(Seconds(100.0)),
        source: Some(greenup::record::Source::parse("rapl")),
        restored: true,
        note: None,
        comm: Some(greenup_comm::NodeComm {
            ranks: 4,
            compute_s: Seconds(95.0),
            comm_s: Seconds(5.0),
            sync_calls: 1000,
            ..Default::default()
        }),
        gpu: None,
        power: None,
    }
}

/// greenupd's metrics page from `addr` (host:port), the HTTP reply whole. greenupd binds
/// its metrics port on a thread of its own after its socket is up, so a loaded machine
/// may refuse the first connections: they are retried for up to 10 s.
pub fn metrics_page(addr: &str) -> String {
    use std::io::Read;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut s = loop {
        match std::net::TcpStream::connect(addr) {
            Ok(s) => break s,
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("greenupd's metrics page at {addr}: {e}"),
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// What greenupd logs in this test binary, as its fmt subscriber writes it (INFO and up):
/// the first call installs the subscriber, and every test of the binary shares the buffer.
pub fn captured_logs() -> Arc<std::sync::Mutex<Vec<u8>>> {
    static LOGS: std::sync::OnceLock<Arc<std::sync::Mutex<Vec<u8>>>> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = buf.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || LogSink(sink.clone()))
            .init();
        buf
    })
    .clone()
}

/// The writer [`captured_logs`] gives the subscriber.
struct LogSink(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogSink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
