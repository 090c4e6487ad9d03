//! Energy budgets through greenupd: each job is charged at admission against every budget
//! it falls under, warning levels act on the decision, a job that would overspend is
//! refused with the quote, closing settles from measured energy, a restart keeps every
//! charge, a period rolls over, and jobs racing for the last joules never overspend.
//! Real munged, real SQLite.
//!
//! Every job here names no profile, so it runs unchanged and is charged its nodes' full
//! power (200 W dynamic + 100 W static each) for its time limit: one node for 100 s is
//! 30 kJ, a figure that needs no model.

mod daemon_support;

use std::time::Duration;

use daemon_support::*;
use greenup::budget::{Action, Budget, Level, Period, Scope};
use greenup::site::{Enforce, Site};
use greenup_core::quantity::{Ghz, Joules, Seconds};
use greenup_proto::protocol::{Decision, NodeOutcome, OpenJob, Verdict};

/// One node for 100 s at 300 W.
const JOB_J: f64 = 30_000.0;

fn job(job_id: u64, account: &str) -> OpenJob {
    OpenJob {
        restart_count: None,
        account: Some(account.into()),
        time_limit: greenup::record::TimeLimit::Seconds(100.0),
        ..open_req(job_id, 0, 1)
    }
}

fn budget(scope: Scope, amount_j: f64, levels: &[(f64, Action)]) -> Budget {
    Budget {
        scope,
        amount_j: Joules(amount_j),
        period: Period::Month { reset_s: 0 },
        levels: levels
            .iter()
            .map(|(at, action)| Level {
                at: *at,
                action: action.clone(),
            })
            .collect(),
    }
}

/// A four-node job of account chem with the shipped lammps profile under `policy`.
fn lammps_job(job_id: u64, policy: &str) -> OpenJob {
    OpenJob {
        restart_count: None,
        profile: Some("lammps".into()),
        policy: Some(policy.into()),
        account: Some("chem".into()),
        ..open_req(job_id, 0, 4)
    }
}

fn chem(amount_j: f64) -> Budget {
    budget(
        Scope::Account("chem".into()),
        amount_j,
        &[(1.0, Action::Refuse)],
    )
}

fn strict(s: &mut Site, budgets: Vec<Budget>) {
    s.enforce = Enforce::Strict;
    s.budgets = budgets;
}

fn open(d: &Daemon, req: OpenJob) -> Decision {
    d.tcp_client().open_job(req).unwrap()
}

fn charged(d: &Daemon, job_id: u64, budget: &str) -> f64 {
    let c =
        rusqlite::Connection::open_with_flags(&d.store, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    c.query_row(
        "SELECT coalesce(settled_j, charged_j) FROM budget_charges WHERE job_id = ?1 AND budget = ?2",
        rusqlite::params![job_id as i64, budget],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn racing_jobs_for_the_last_joules_never_overspend() {
    // 1 MJ fits floor(1e6 / 3e4) = 33 jobs of 30 kJ: the 34th would reach 1.02 MJ.
    let amount = 1.0e6;
    let fits = (amount / JOB_J).floor() as usize;
    assert_eq!(fits, 33);
    let d = start(4, |_, s, _| strict(s, vec![chem(amount)]));
    let threads: Vec<_> = (1..=80u64)
        .map(|id| {
            let tcp = d.tcp.clone();
            std::thread::spawn(move || {
                let mut c = greenup_proto::client::Client::connect(
                    &greenup_proto::client::Endpoint::Tcp(tcp),
                    Duration::from_secs(30),
                )
                .unwrap();
                c.open_job(job(id, "chem")).unwrap()
            })
        })
        .collect();
    let decisions: Vec<Decision> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let admitted = decisions
        .iter()
        .filter(|d| d.verdict != Verdict::Refused)
        .count();
    assert_eq!(admitted, fits);
    // The store agrees: the admitted jobs' charges sum to 33 x 30 kJ, the refused hold nothing.
    let held = count(
        &d.store,
        "SELECT CAST(total(charged_j) AS INTEGER) FROM budget_charges WHERE budget = 'account:chem'",
    );
    assert_eq!(held, 33 * 30_000);
}

#[test]
fn a_job_that_would_overspend_is_refused_with_the_quote() {
    let d = start(4, |_, s, _| strict(s, vec![chem(50_000.0)]));
    let a = open(&d, job(1, "chem"));
    assert_eq!(a.verdict, Verdict::Unchanged, "{}", a.reason);
    assert_eq!(a.budgets[0].charged_j, Joules(JOB_J));
    let b = open(&d, job(2, "chem"));
    assert_eq!(b.verdict, Verdict::Refused);
    // 50 kJ - 30 kJ held = 20 kJ left before the job; 100 s is 00:01:40.
    assert!(
        b.reason
            .contains("predicted 30.0 kJ, 00:01:40 on 1 node; account chem: 20.0 kJ of 50.0 kJ left this month"),
        "{}",
        b.reason
    );
    assert!(b.reason.contains("past its 100% level"), "{}", b.reason);
    assert_eq!(b.budgets[0].level_pct, Some(100.0));
    // A refused job fails under enforce: strict, so it is charged nothing, and it is
    // settled at once: the budget counts it as a job with no use and no hold.
    assert_eq!(charged(&d, 2, "account:chem"), 0.0);
    let st = d.unix_client().budgets(None, None).unwrap();
    assert_eq!(
        (st[0].used_j, st[0].held_j, st[0].jobs),
        (Joules(0.0), Joules(JOB_J), 2)
    );
    // Another account's jobs do not touch chem's budget.
    let other = open(&d, job(3, "phys"));
    assert_eq!(other.verdict, Verdict::Unchanged);
    assert!(other.budgets.is_empty());
}

#[test]
fn closing_settles_from_measured_energy_else_from_the_prediction() {
    let d = start(4, |_, s, _| strict(s, vec![chem(50_000.0)]));
    open(&d, job(1, "chem"));
    assert_eq!(open(&d, job(2, "chem")).verdict, Verdict::Refused);
    let mut c = d.tcp_client();
    c.record_outcome(NodeOutcome {
        restart_count: None,
        job_id: 1,
        node: "n1".into(),
        freq_ghz: None,
        energy_j: Some(Joules(12_000.0)),
        elapsed_s: Some(Seconds(40.0)),
        source: None,
        restored: true,
        note: None,
        comm: None,
        gpu: None,
        power: None,
    })
    .unwrap();
    c.close_job(1, None, None).unwrap();
    assert_eq!(charged(&d, 1, "account:chem"), 12_000.0);
    assert_eq!(
        count(
            &d.store,
            "SELECT measured FROM budget_charges WHERE job_id = 1"
        ),
        1
    );
    // 12 kJ used + 30 kJ = 42 kJ <= 50 kJ: now it fits.
    assert_eq!(open(&d, job(3, "chem")).verdict, Verdict::Unchanged);
    // Closed with nothing measured: settled with the prediction, flagged.
    d.tcp_client().close_job(3, None, None).unwrap();
    assert_eq!(charged(&d, 3, "account:chem"), JOB_J);
    assert_eq!(
        count(
            &d.store,
            "SELECT measured FROM budget_charges WHERE job_id = 3"
        ),
        0
    );
    // 12 + 30 + 30 = 72 kJ > 50 kJ.
    assert_eq!(open(&d, job(4, "chem")).verdict, Verdict::Refused);
}

#[test]
fn a_gpu_nodes_settlement_counts_its_gpus_and_unmeasured_gpus_fall_back_to_the_prediction() {
    use greenup::record::{GpuSource, NodeGpu};
    let d = start(4, |_, s, _| strict(s, vec![chem(200_000.0)]));
    let gpu = |energy_j: Option<f64>| NodeGpu {
        gpus: 2,
        source: GpuSource::Nvml,
        energy_j: energy_j.map(Joules),
        avg_power_w: None,
        sm_mhz: None,
        util_pct: None,
        note: None,
    };
    let outcome = |job_id: u64, cpu_j: f64, g: Option<NodeGpu>| NodeOutcome {
        restart_count: None,
        job_id,
        node: "n1".into(),
        freq_ghz: None,
        energy_j: Some(Joules(cpu_j)),
        elapsed_s: Some(Seconds(40.0)),
        source: None,
        restored: true,
        note: None,
        comm: None,
        gpu: g.map(Box::new),
        power: None,
    };
    // The node's RAPL 12 kJ and its two GPUs' 50 kJ: 62 kJ, measured.
    open(&d, job(1, "chem"));
    let mut c = d.tcp_client();
    c.record_outcome(outcome(1, 12_000.0, Some(gpu(Some(50_000.0)))))
        .unwrap();
    c.close_job(1, None, None).unwrap();
    assert_eq!(charged(&d, 1, "account:chem"), 62_000.0);
    assert_eq!(
        count(
            &d.store,
            "SELECT measured FROM budget_charges WHERE job_id = 1"
        ),
        1
    );
    // GPUs held but not measured: the job's energy is unknown, so the prediction
    // (30 kJ) is charged, flagged.
    open(&d, job(2, "chem"));
    c.record_outcome(outcome(2, 12_000.0, Some(gpu(None))))
        .unwrap();
    c.close_job(2, None, None).unwrap();
    assert_eq!(charged(&d, 2, "account:chem"), JOB_J);
    assert_eq!(
        count(
            &d.store,
            "SELECT measured FROM budget_charges WHERE job_id = 2"
        ),
        0
    );
}

#[test]
fn warning_levels_force_a_policy_and_shrink_the_power_share() {
    let d = start(4, |_, s, _| {
        s.budgets = vec![
            budget(
                Scope::Site,
                100_000.0,
                &[(0.5, Action::Policy("monitor".into()))],
            ),
            budget(
                Scope::Partition("debug".into()),
                1.0e9,
                &[(0.00001, Action::PowerShare(0.5))],
            ),
        ];
    });
    // 30 kJ of the site's 100 kJ: below 50%. The partition's level (past 10 kJ of
    // 1 GJ) acts from the first job: half of one node's 300 W.
    let a = open(&d, job(1, "chem"));
    assert_eq!(a.policy, "min-energy");
    assert_eq!(a.power_cap_w, Some(greenup_core::quantity::Watts(150.0)));
    assert_eq!(a.budgets.len(), 2);
    assert_eq!(a.budgets[0].level_pct, None);
    assert_eq!(a.budgets[1].action.as_deref(), Some("power share 50%"));
    // 60 kJ of 100 kJ passes 50%: the site forces monitor.
    let b = open(&d, job(2, "chem"));
    assert_eq!(b.policy, "monitor", "{}", b.reason);
    assert_eq!(b.budgets[0].level_pct, Some(50.0));
    assert!(
        b.reason.contains("site budget past its 50% level"),
        "{}",
        b.reason
    );
}

#[test]
fn a_period_rolls_over_to_an_empty_budget() {
    // Periods of 4 s from the epoch (the config allows no less than an hour; the rule is
    // the same), and a budget of one job per period.
    let d = start(4, |_, s, _| {
        let mut b = chem(JOB_J);
        b.period = Period::Every {
            length_s: 4,
            anchor: 0,
        };
        strict(s, vec![b]);
    });
    // Two jobs in one period: the second finds the budget spent. (Should a boundary fall
    // between them, try again with the next pair.)
    let mut id = 0;
    let start = loop {
        id += 2;
        let a = open(&d, job(id - 1, "chem"));
        let b = open(&d, job(id, "chem"));
        if a.budgets[0].period_start == b.budgets[0].period_start && a.verdict == Verdict::Unchanged
        {
            assert_eq!(b.verdict, Verdict::Refused, "{}", b.reason);
            break a.budgets[0].period_start;
        }
        assert!(id < 20, "no two jobs in one 4 s period");
    };
    assert_eq!(start % 4, 0);
    wait_for(|| greenup_daemon::store::sqlite::now() >= start + 4);
    let c = open(&d, job(100, "chem"));
    assert_eq!(c.verdict, Verdict::Unchanged, "{}", c.reason);
    assert!(c.budgets[0].period_start >= start + 4);
    assert_eq!(c.budgets[0].used_j + c.budgets[0].held_j, Joules(0.0));
    // The spent period keeps its charge.
    assert_eq!(
        count(
            &d.store,
            &format!(
                "SELECT CAST(total(charged_j) AS INTEGER) FROM budget_charges WHERE period_start = {start}"
            )
        ),
        30_000
    );
}

/// greenupd, the binary, on `dir`'s config; returns once its socket answers.
fn greenupd(dir: &std::path::Path) -> std::process::Child {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_greenupd"))
        .args([
            "--config",
            dir.join("greenup.yaml").to_str().unwrap(),
            "--no-slurm-check",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let sock = dir.join("greenupd.sock");
    wait_for(|| {
        greenup_proto::client::Client::connect(
            &greenup_proto::client::Endpoint::Unix(sock.clone()),
            Duration::from_secs(5),
        )
        .and_then(|mut c| c.status())
        .is_ok()
    });
    child
}

#[test]
fn kill_9_and_restart_keep_every_charge() {
    munged();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    std::fs::write(
        dir.path().join("greenup.yaml"),
        format!(
            "node_types:
  std:
    frequencies: [1.2, 2.4]
    power: {{dynamic_w: 200, static_w: 100}}
nodes:
  std: \"n[1-4]\"
partitions:
  debug: {{nodes: \"n[1-4]\"}}
enforce: strict
default_policy: min-energy
policy_dirs: [{root}/policies]
profile_dir: {root}/etc/profiles
budgets:
  accounts:
    chem:
      amount: 70 kJ
      period: month
      levels: [{{at: 100%, refuse: true}}]
daemon:
  listen: 127.0.0.1:{port}
  socket: {dir}/greenupd.sock
  store: {dir}/greenup.db
  slurm_user: root
",
            root = repo().display(),
            dir = dir.path().display()
        ),
    )
    .unwrap();
    let tcp = greenup_proto::client::Endpoint::Tcp(format!("127.0.0.1:{port}"));
    let client = || greenup_proto::client::Client::connect(&tcp, Duration::from_secs(10)).unwrap();
    let mut first = greenupd(dir.path());
    client().open_job(job(1, "chem")).unwrap();
    client().open_job(job(2, "chem")).unwrap();
    client()
        .record_outcome(NodeOutcome {
            restart_count: None,
            job_id: 2,
            node: "n1".into(),
            freq_ghz: None,
            energy_j: Some(Joules(10_000.0)),
            elapsed_s: None,
            source: None,
            restored: true,
            note: None,
            comm: None,
            gpu: None,
            power: None,
        })
        .unwrap();
    client().close_job(2, None, None).unwrap();
    // Every write above was acknowledged; kill -9 gives greenupd no chance to save more.
    std::process::Command::new("kill")
        .args(["-KILL", &first.id().to_string()])
        .status()
        .unwrap();
    let _ = first.wait();

    let mut second = greenupd(dir.path());
    // 30 kJ held by job 1 and 10 kJ settled for job 2: 30 kJ more makes exactly 70 kJ.
    let three = client().open_job(job(3, "chem")).unwrap();
    assert_eq!(three.verdict, Verdict::Unchanged, "{}", three.reason);
    assert_eq!(
        (three.budgets[0].used_j, three.budgets[0].held_j),
        (Joules(10_000.0), Joules(JOB_J))
    );
    // Had the restart lost job 1's hold, job 4 would fit: it does not.
    let four = client().open_job(job(4, "chem")).unwrap();
    assert_eq!(four.verdict, Verdict::Refused, "{}", four.reason);
    // Job 1 still settles after the restart, from the prediction (nothing measured).
    client().close_job(1, None, None).unwrap();
    let left: Vec<greenup::budget::Standing> = greenup_proto::client::Client::connect(
        &greenup_proto::client::Endpoint::Unix(dir.path().join("greenupd.sock")),
        Duration::from_secs(5),
    )
    .unwrap()
    .budgets(None, None)
    .unwrap();
    assert_eq!(
        (left[0].used_j, left[0].held_j, left[0].jobs),
        (Joules(40_000.0), Joules(JOB_J), 4)
    );
    std::process::Command::new("kill")
        .args(["-TERM", &second.id().to_string()])
        .status()
        .unwrap();
    let _ = second.wait();
}

fn greenup_cli(d: &Daemon, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_greenup"))
        .args(args)
        .args(["--connect", &format!("unix:{}", d.socket.display())])
        .output()
        .unwrap()
}

#[test]
fn greenup_budget_and_quote_show_the_accounts() {
    let d = start(4, |_, s, _| strict(s, vec![chem(50_000.0)]));
    open(&d, job(1, "chem"));
    let out = greenup_cli(&d, &["budget", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Vec<greenup::budget::Standing> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(
        (
            list[0].budget.as_str(),
            list[0].held_j,
            list[0].left_j,
            list[0].jobs
        ),
        ("account:chem", Joules(JOB_J), Joules(20_000.0), 1)
    );
    let csv = greenup_cli(&d, &["budget", "--csv", "--account", "chem"]);
    let text = String::from_utf8_lossy(&csv.stdout);
    assert!(
        text.lines().nth(1).unwrap().starts_with("account:chem,"),
        "{text}"
    );
    let job = greenup_cli(&d, &["job", "1"]);
    assert!(
        String::from_utf8_lossy(&job.stdout)
            .contains("account:chem: charged 30.0 kJ; before it 0 J used, 0 J held of 50.0 kJ"),
        "{}",
        String::from_utf8_lossy(&job.stdout)
    );
    let svg = d.dir.path().join("b.svg");
    let plot = greenup_cli(&d, &["budget", "--plot", svg.to_str().unwrap()]);
    assert!(plot.status.success());
    assert!(
        std::fs::read_to_string(&svg)
            .unwrap()
            .contains("account:chem")
    );

    // 10 minutes on 1 node fits nothing of the 20 kJ left: refused, exit 1, quote printed.
    let q = greenup_cli(
        &d,
        &[
            "quote",
            "--nodes",
            "n1",
            "--time",
            "10:00",
            "--account",
            "chem",
            "--partition",
            "debug",
        ],
    );
    assert_eq!(q.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&q.stdout).trim(),
        "predicted 180 kJ, 00:10:00 on 1 node; account chem: 20.0 kJ of 50.0 kJ left this month"
    );
    // 60 s fits (18 kJ); a quote charges nothing: the budget is as it was.
    let q = greenup_cli(
        &d,
        &[
            "quote",
            "--nodes",
            "n1",
            "--time",
            "1:00",
            "--account",
            "chem",
        ],
    );
    assert_eq!(
        q.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&q.stderr)
    );
    let again: Vec<greenup::budget::Standing> =
        serde_json::from_slice(&greenup_cli(&d, &["budget", "--json"]).stdout).unwrap();
    assert_eq!(again[0].held_j, Joules(JOB_J));
    // A node count is the partition's first nodes, as the site config lists them.
    let site = cli_site(&d);
    let q = greenup_cli(
        &d,
        &[
            "quote",
            "--node-count",
            "2",
            "--time",
            "1:00",
            "--config",
            site.to_str().unwrap(),
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&q.stdout).trim(),
        "predicted 36.0 kJ, 00:01:00 on 2 nodes",
        "{}",
        String::from_utf8_lossy(&q.stderr)
    );
    let bad = greenup_cli(
        &d,
        &[
            "quote",
            "--node-count",
            "9",
            "--config",
            site.to_str().unwrap(),
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--node-count: invalid value '9'"));
    let bad = greenup_cli(&d, &["quote", "--nodes", "n1", "--time", "soon"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--time: invalid value 'soon'"));
}

#[test]
fn prometheus_shows_each_budget() {
    let addr = format!("127.0.0.1:{}", free_port());
    let listen = addr.clone();
    let d = start(4, move |_, s, _| {
        strict(s, vec![chem(50_000.0)]);
        s.daemon.metrics_listen = Some(listen);
    });
    open(&d, job(1, "chem"));
    let page = metrics_page(&addr);
    for (series, value) in [
        (
            "greenup_budget_amount_joules{budget=\"account:chem\"}",
            "50000",
        ),
        (
            "greenup_budget_held_joules{budget=\"account:chem\"}",
            "30000",
        ),
        (
            "greenup_budget_left_joules{budget=\"account:chem\"}",
            "20000",
        ),
        ("greenup_budget_used_joules{budget=\"account:chem\"}", "0"),
    ] {
        assert!(
            page.contains(&format!("{series} {value}\n")),
            "{series} in:\n{page}"
        );
    }
}

#[test]
fn the_quote_gives_the_spread_and_runs_of_a_refined_profile() {
    let d = start(4, |_, s, _| s.budgets = vec![chem(1.0e12)]);
    let lammps = |job_id| lammps_job(job_id, "min-energy");
    // The admin's own file: no run has confirmed it, so no spread is claimed.
    let q = d.tcp_client().quote(lammps(1)).unwrap();
    assert!(
        q.line.starts_with("predicted ") && !q.line.contains('±'),
        "{}",
        q.line
    );
    // Runs measured 10% above the prediction refine it into a new version with a fit.
    let versions = greenup::profile::versions::Versions::for_store(&d.store);
    for id in 1..=2 {
        let dec = open(&d, lammps(id));
        let pred = dec.plan.as_ref().unwrap().predicted.energy_j.0;
        finish_planned(&d, &dec, pred * 1.1, Some("rapl"));
    }
    wait_for(|| versions.list("lammps").unwrap().len() >= 2);
    let newest = *versions.list("lammps").unwrap().last().unwrap();
    let fit = versions.fit("lammps", newest).expect("a fit record");
    let q = d.tcp_client().quote(lammps(9)).unwrap();
    let runs = match fit.samples {
        1 => "1 run".to_string(),
        n => format!("{n} runs"),
    };
    let want = format!("(±{:.0}%, from {runs})", fit.residual * 100.0);
    assert!(q.line.contains(&want), "{want} in {}", q.line);
    // 1e12 J is 277.8 MWh.
    assert!(
        q.line.ends_with(" of 278 MWh left this month"),
        "{}",
        q.line
    );
}

#[test]
fn a_version_2_store_gains_the_budget_charges_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("greenup.db");
    drop(greenup_daemon::store::SqliteStore::open(&db).unwrap());
    // Back to what a version 2 store holds: no budget_charges, nor what later versions add.
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "DROP TABLE budget_charges; DROP TABLE policy_holds;
         ALTER TABLE outcomes DROP COLUMN comm; ALTER TABLE outcomes DROP COLUMN gpu;
         ALTER TABLE outcomes DROP COLUMN power;
         ALTER TABLE jobs DROP COLUMN restart_count; ALTER TABLE jobs DROP COLUMN slurm_energy_j;
         DROP TABLE earlier_runs; DROP TABLE earlier_charges;
         PRAGMA user_version = 2;",
    )
    .unwrap();
    drop(c);
    for _ in 0..2 {
        drop(greenup_daemon::store::SqliteStore::open(&db).unwrap());
        // At least 3: later migrations may follow this one.
        assert_eq!(
            count(&db, "SELECT user_version >= 3 FROM pragma_user_version"),
            1
        );
        assert_eq!(
            count(
                &db,
                "SELECT count(*) FROM sqlite_master WHERE name = 'budget_charges'"
            ),
            1
        );
    }
}

#[test]
fn a_frequency_ceiling_level_plans_no_node_above_it() {
    let lammps = |job_id| lammps_job(job_id, "min-time");
    let freqs = |d: &Decision| -> Vec<f64> {
        d.plan
            .as_ref()
            .expect("a plan")
            .nodes
            .iter()
            .map(|n| n.freq_ghz.0)
            .collect()
    };
    // min-time with nothing to stop it runs every node at its highest gear, 2.4 GHz.
    let free = start(4, |_, _, _| {});
    assert_eq!(freqs(&open(&free, lammps(1))), [2.4; 4]);
    // A level that acts from the first joule caps every node at 1.6 GHz: the fastest
    // plan left is every node at 1.6, and the record says which level did it.
    let capped = start(4, |_, s, _| {
        s.budgets = vec![budget(
            Scope::Account("chem".into()),
            1.0e12,
            &[(1.0e-9, Action::MaxFreqGhz(Ghz(1.6)))],
        )]
    });
    let d = open(&capped, lammps(2));
    assert_eq!(freqs(&d), [1.6; 4], "{}", d.reason);
    assert_eq!(
        d.budgets[0].action.as_deref(),
        Some("frequency ceiling 1.6 GHz")
    );
    // The baseline the saving is measured against is still every node at 2.4 GHz.
    let p = d.plan.as_ref().unwrap();
    assert!(p.baseline.time_s.0 < p.predicted.time_s.0, "{p:?}");
}
