//! A job's time limit at its start: greenupd asks slurmctld (squeue, once per job) when
//! the node sent none, never plans past it, and holds the job's reservation until the
//! limit plus `daemon.grace_s`; a node that hangs up while greenupd waits for Slurm has
//! its start dropped. A stand-in squeue on greenupd's PATH answers for Slurm.

mod daemon_support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use daemon_support::*;
use greenup_proto::client::{Client, Endpoint};
use greenup_proto::protocol::{Decision, OpenJob, Request, request_body, request_line};

/// The test cluster's node types and partition, with the md profile, in `dir`.
fn config(dir: &Path, port: u16) -> String {
    let profiles = dir.join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::copy(
        repo().join("tests/cluster/profiles/md.yaml"),
        profiles.join("md.yaml"),
    )
    .unwrap();
    format!(
        "node_types:
  fast:
    frequencies: [1.0, 1.4, 1.8, 2.2, 2.6, 3.0]
    power: {{dynamic_w: 120, static_w: 40, gamma: 3}}
nodes:
  fast: \"n[1-2]\"
partitions:
  debug:
    nodes: \"n[1-2]\"
default_policy: min-energy
policy_dirs: [{root}/policies]
profile_dir: {profiles}
daemon:
  listen: 127.0.0.1:{port}
  socket: {dir}/greenupd.sock
  store: {dir}/greenup.db
  slurm_user: root
  grace_s: 60
power:
  enforce: queue
",
        root = repo().display(),
        profiles = profiles.display(),
        dir = dir.display(),
    )
}

/// A squeue that knows jobs 101 (`-t 11`), 102 (no limit), 105 (`-t 11`, 120 W of the
/// debug partition's power licenses) and hangs on 103 and 104, as a client
/// of an unresponsive slurmctld does; it lists no job for reclaim.
const SQUEUE: &str = r#"
echo "$*" >> "$(dirname "$0")/asked"
case "$*" in
"-h -j 101 -o %l %a %W") echo "11:00 physics" ;;
"-h -j 102 -o %l %a %W") echo "UNLIMITED physics (null)" ;;
"-h -j 105 -o %l %a %W") echo "11:00 physics matlab:1,greenup_w:130,greenup_w_debug:120" ;;
"-h -j 103 -o %l %a %W"|"-h -j 104 -o %l %a %W") exec sleep 300 ;;
"-h -j "*) echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1 ;;
esac
"#;

struct Greenupd {
    child: Child,
    sock: std::path::PathBuf,
    store: std::path::PathBuf,
    bin: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Greenupd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Greenupd {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    greenup_host::fixtures::script(&bin, "squeue", SQUEUE);
    let cfg = dir.path().join("greenup.yaml");
    std::fs::write(&cfg, config(dir.path(), free_port())).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Slurm is asked (no --no-slurm-check): the stand-in squeue is first on PATH.
    let child = Command::new(env!("CARGO_BIN_EXE_greenupd"))
        .args(["--config", cfg.to_str().unwrap()])
        .env("PATH", path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sock = dir.path().join("greenupd.sock");
    wait_for(|| std::os::unix::net::UnixStream::connect(&sock).is_ok());
    Greenupd {
        child,
        store: dir.path().join("greenup.db"),
        sock,
        bin,
        _dir: dir,
    }
}

/// What a 22.05 node's prolog sends for a min-energy md job on n1: no time limit.
fn open(d: &Greenupd, job_id: u64) -> Decision {
    let mut c = Client::connect(&Endpoint::Unix(d.sock.clone()), Duration::from_secs(10)).unwrap();
    c.open_job(md_job(job_id)).unwrap()
}

/// A min-energy md job on n1 as a 22.05 node describes it: no time limit.
fn md_job(job_id: u64) -> OpenJob {
    OpenJob {
        restart_count: None,
        job_id,
        uid: 0,
        user: None,
        partition: Some("debug".into()),
        nodes: vec!["n1".into()],
        nodelist: None,
        min_nodes: None,
        time_limit: greenup::record::TimeLimit::Unknown,
        policy: Some("min-energy".into()),
        profile: Some("md".into()),
        energy_cap_j: None,
        power_cap_w: None,
        algorithm: None,
        account: None,
        granted_w: None,
    }
}

/// Seconds between the job's opening and its reservation's expiry.
fn held_s(d: &Greenupd, job_id: u64) -> i64 {
    count(
        &d.store,
        &format!(
            "SELECT r.expires_at - j.opened_at FROM reservations r JOIN jobs j USING (job_id) WHERE job_id = {job_id}"
        ),
    )
}

// By hand from md.yaml on a `fast` node (n = 1, so no communication): T(f) = 600 s * 3.0/f
// and P(f) = 40 W + 120 W * (f/3.0)^3. E(f) = T * P is 67.1 kJ at 1.4 GHz, 65.9 kJ at
// 1.8 GHz and 71.5 kJ at 2.2 GHz: min-energy without a limit picks 1.8 GHz, 1,000 s.
// Within 660 s (`-t 11`), f >= 600 * 3.0 / 660 = 2.73 GHz: only 3.0 GHz fits, at 600 s.

#[test]
fn a_limit_asked_of_slurm_is_never_planned_past_and_bounds_the_reservation() {
    let d = start();
    let dec = open(&d, 101);
    let plan = dec.plan.as_ref().expect("a plan");
    assert_eq!(plan.nodes.len(), 1);
    assert_eq!(
        plan.nodes[0].freq_ghz,
        greenup_core::quantity::Ghz(3.0),
        "{plan:?}"
    );
    assert!((plan.predicted.time_s.0 - 600.0).abs() < 1e-6, "{plan:?}");
    assert!(plan.predicted.time_s.0 <= 660.0);
    // Held until the limit plus grace_s, not for days.
    assert_eq!(held_s(&d, 101), 660 + 60);
    // Every node of the job asks; slurmctld is asked once.
    for _ in 0..3 {
        assert_eq!(open(&d, 101).plan, dec.plan);
    }
    let asked = std::fs::read_to_string(d.bin.join("asked")).unwrap_or_default();
    let about_101 = asked.lines().filter(|l| l.contains("-j 101")).count();
    assert_eq!(about_101, 1, "{asked}");
}

#[test]
fn an_unlimited_job_is_planned_freely_and_a_hung_slurmctld_does_not_stop_the_decision() {
    let d = start();
    let dec = open(&d, 102);
    let plan = dec.plan.as_ref().expect("a plan");
    assert_eq!(
        plan.nodes[0].freq_ghz,
        greenup_core::quantity::Ghz(1.8),
        "{plan:?}"
    );
    assert!((plan.predicted.time_s.0 - 1000.0).abs() < 1e-6, "{plan:?}");
    // Held for a year (slurmctld's own end time for it) unless reclaim sees it gone.
    assert_eq!(held_s(&d, 102), 365 * 86_400 + 60);
    // squeue hangs: it is stopped at its bound and the job is decided without a limit.
    let dec = open(&d, 103);
    assert_eq!(
        dec.plan.as_ref().expect("a plan").nodes[0].freq_ghz,
        greenup_core::quantity::Ghz(1.8)
    );
}

#[test]
fn a_limit_the_node_knows_is_not_asked_again_unlimited_included() {
    let d = start();
    let told = |job_id, limit| {
        let mut job = md_job(job_id);
        job.time_limit = limit;
        // PrologSlurmctld sent the grant, so nothing else is missing either.
        job.granted_w = Some(greenup_core::quantity::Watts(1000.0));
        let mut c =
            Client::connect(&Endpoint::Unix(d.sock.clone()), Duration::from_secs(10)).unwrap();
        c.open_job(job).unwrap()
    };
    // A 23.02 credential's unlimited job (its end a year after its start): planned
    // without a limit and held a year, as when squeue says UNLIMITED.
    let dec = told(106, greenup::record::TimeLimit::Unlimited);
    assert_eq!(
        dec.plan.as_ref().expect("a plan").nodes[0].freq_ghz,
        greenup_core::quantity::Ghz(1.8)
    );
    assert_eq!(held_s(&d, 106), 365 * 86_400 + 60);
    // Eleven minutes from the credential: 3.0 GHz, as when squeue says 11:00.
    let dec = told(107, greenup::record::TimeLimit::Seconds(660.0));
    assert_eq!(
        dec.plan.as_ref().expect("a plan").nodes[0].freq_ghz,
        greenup_core::quantity::Ghz(3.0)
    );
    assert_eq!(held_s(&d, 107), 660 + 60);
    // An unknown limit is asked (job 108 is not one squeue knows: planned without one).
    let dec = told(108, greenup::record::TimeLimit::Unknown);
    assert_eq!(
        dec.plan.as_ref().expect("a plan").nodes[0].freq_ghz,
        greenup_core::quantity::Ghz(1.8)
    );
    let asked = std::fs::read_to_string(d.bin.join("asked")).unwrap_or_default();
    for (job, times) in [(106, 0), (107, 0), (108, 1)] {
        let n = asked
            .lines()
            .filter(|l| l.contains(&format!("-j {job} ")))
            .count();
        assert_eq!(n, times, "job {job}: {asked}");
    }
}

/// A node's start for a 22.05 job on n1 (no time limit: greenupd asks squeue first).
fn start_line(job_id: u64) -> Vec<u8> {
    let req = Request::StartNode {
        node: "n1".into(),
        job: OpenJob {
            restart_count: None,
            nodes: Vec::new(),
            nodelist: Some("n1".into()),
            ..md_job(job_id)
        },
    };
    request_line(&request_body(&req).unwrap(), None).unwrap()
}

#[test]
fn a_start_whose_node_hung_up_is_dropped_and_never_stored() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let d = start();
    let asked = |job: u64| {
        std::fs::read_to_string(d.bin.join("asked"))
            .unwrap_or_default()
            .contains(&format!("-j {job} "))
    };
    // Job 103's node asks, and gives up while greenupd waits on the hung squeue (a prolog
    // past its timeout).
    let mut gone = UnixStream::connect(&d.sock).unwrap();
    gone.write_all(&start_line(103)).unwrap();
    wait_for(|| asked(103));
    drop(gone);
    // Job 104's node asks the same way afterwards and waits: the same squeue bound, then
    // its decision, stored.
    let mut waits = UnixStream::connect(&d.sock).unwrap();
    waits.write_all(&start_line(104)).unwrap();
    let mut reply = String::new();
    BufReader::new(&waits).read_line(&mut reply).unwrap();
    assert!(reply.contains("\"freq_ghz\":1.8"), "{reply}");
    // Job 103's work, begun first, would have been stored by now had it gone on.
    std::thread::sleep(Duration::from_millis(500));
    let stored = |job: u64| {
        count(
            &d.store,
            &format!("SELECT COUNT(*) FROM jobs WHERE job_id = {job}"),
        )
    };
    assert_eq!(stored(104), 1);
    assert_eq!(
        stored(103),
        0,
        "a hung-up node's start was decided and stored"
    );
}

#[test]
fn under_the_queue_a_node_path_job_is_granted_the_watts_squeue_lists() {
    let d = start();
    // No PrologSlurmctld: the node sent no grant; squeue lists 130 W of the site's
    // license and 120 W of the partition's, and the smaller one binds.
    let dec = open(&d, 105);
    let g = dec.grant.expect("the job's grant, from squeue");
    assert_eq!(g.granted_w.0, 120.0);
    assert_eq!(dec.reserved_w.0, 120.0, "the ledger mirrors the grant");
    // n1 at 3.0 GHz draws 160 W flat out: a 120 W grant caps the plan below that.
    let p = dec.plan.expect("a plan");
    assert!(
        p.predicted.avg_power_w.0 <= 120.0 + 1e-6,
        "{:?}",
        p.predicted
    );
    // A job whose licenses are none of greenup's is planned under the ledger.
    assert_eq!(open(&d, 102).grant, None);
}
