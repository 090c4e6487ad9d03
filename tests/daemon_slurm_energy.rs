//! greenupd writing a finished job's measured energy into Slurm's accounting
//! (`daemon.slurm_energy`), against stand-in Slurm commands: a sacctmgr that answers as
//! Slurm 26.05 does, and one that refuses as 22.05 and 24.11 do.

mod daemon_support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use daemon_support::*;
use greenup::record::{JobEnd, NodeGpu, Source};
use greenup::report::accounting::SlurmEnergy;
use greenup::report::record::{Context, from_record};
use greenup_core::quantity::{Joules, Seconds};
use greenup_proto::protocol::NodeOutcome;

/// What the stand-in sacctmgr answers.
#[derive(Clone, Copy, PartialEq)]
enum Slurm {
    /// 26.05: the change is made.
    Modern,
    /// 22.05 and 24.11: the option is unknown for jobs (22.05.8's sacctmgr prints
    /// " Unknown option: TRES=energy=5" and exits 1).
    Old,
    /// 26.05 with the job still running in accounting (sacct says RUNNING): sacctmgr
    /// would change it, and the job's end record would then replace the energy.
    Running,
}

/// A directory of stand-in Slurm commands: sacct says every job COMPLETED (RUNNING for
/// [`Slurm::Running`]), and sacctmgr appends its arguments to `sacctmgr.args` beside it
/// and answers as `slurm` would.
fn slurm_bin(dir: &Path, slurm: Slurm) -> PathBuf {
    let bin = dir.join("slurm-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = dir.join("sacctmgr.args");
    let answer = match slurm {
        Slurm::Modern | Slurm::Running => "echo ' Modified jobs...'\necho \"  $4\"\n".to_string(),
        Slurm::Old => "echo \" Unknown option: $6\" >&2\n\
             echo \" Use keyword 'where' to modify condition\" >&2\nexit 1\n"
            .to_string(),
    };
    for (name, body) in [
        (
            "sacct",
            format!(
                "#!/bin/sh\necho {}\n",
                if slurm == Slurm::Running {
                    "RUNNING"
                } else {
                    "COMPLETED"
                }
            ),
        ),
        ("squeue", "#!/bin/sh\nexit 1\n".to_string()),
        ("scontrol", "#!/bin/sh\nexit 1\n".to_string()),
        (
            "sacctmgr",
            format!("#!/bin/sh\necho \"$*\" >> {}\n{answer}", log.display()),
        ),
    ] {
        let p = bin.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// The argument lines the stand-in sacctmgr was called with, in order.
fn sacctmgr_calls(d: &Daemon) -> Vec<String> {
    std::fs::read_to_string(d.dir.path().join("sacctmgr.args"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// greenupd with `daemon.slurm_energy: on`, the stand-in Slurm, and metrics on `metrics`.
fn start_writing(on: bool, slurm: Slurm, metrics: Option<&str>) -> Daemon {
    let metrics = metrics.map(str::to_string);
    start(2, |dir, s, o| {
        s.daemon.slurm_energy = on;
        s.daemon.metrics_listen = metrics;
        o.slurm_bin_dir = Some(slurm_bin(dir, slurm));
    })
}

/// The value of metric `name` on greenupd's Prometheus page at `addr`.
fn metric(addr: &str, name: &str) -> Option<f64> {
    metrics_page(addr)
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// A node's outcome: `energy_j` measured by `source`, and `gpu_j` of its GPU when given.
fn outcome(
    job_id: u64,
    node: &str,
    energy_j: f64,
    source: &str,
    gpu_j: Option<f64>,
) -> NodeOutcome {
    NodeOutcome {
        restart_count: None,
        comm: None,
        job_id,
        node: node.into(),
        freq_ghz: None,
        energy_j: Some(Joules(energy_j)),
        elapsed_s: Some(Seconds(60.0)),
        source: Some(Source::parse(source)),
        restored: true,
        note: None,
        gpu: gpu_j.map(|j| {
            Box::new(NodeGpu {
                gpus: 1,
                source: Default::default(),
                energy_j: Some(Joules(j)),
                avg_power_w: None,
                sm_mhz: None,
                util_pct: None,
                note: None,
            })
        }),
        power: None,
    }
}

/// Open job `job_id` on n1 and n2, send `outcomes`, close it as completed.
fn run_job(d: &Daemon, job_id: u64, outcomes: Vec<NodeOutcome>) {
    let mut c = d.tcp_client();
    c.open_job(open_req(job_id, 0, 2)).unwrap();
    for o in outcomes {
        c.record_outcome(o).unwrap();
    }
    assert!(c.close_job(job_id, Some(JobEnd::Completed), None).unwrap());
}

/// Long enough for greenupd's first tries (its first waits are 0.25, 0.5 and 1 s).
fn let_it_try() {
    std::thread::sleep(Duration::from_millis(2000));
}

#[test]
fn a_measured_jobs_energy_is_written_into_slurm_and_the_report_says_greenupd_wrote_it() {
    let addr = format!("127.0.0.1:{}", free_port());
    let d = start_writing(true, Slurm::Modern, Some(&addr));
    let outcomes = vec![
        outcome(31, "n1", 1234.4, "rapl", None),
        outcome(31, "n2", 2000.2, "rapl", Some(500.0)),
    ];
    // Every node's CPU energy and its GPUs', in whole joules, worked out here.
    let expected: f64 = outcomes
        .iter()
        .map(|o| {
            o.energy_j.unwrap()
                + o.gpu
                    .as_ref()
                    .and_then(|g| g.energy_j)
                    .unwrap_or(Joules(0.0))
        })
        .sum::<Joules>()
        .0;
    let expected = expected.round() as u64;
    assert_eq!(expected, 3735);
    run_job(&d, 31, outcomes);
    wait_for(|| d.tcp_client().get_job(31).unwrap().slurm_energy_j.is_some());
    assert_eq!(
        sacctmgr_calls(&d),
        [format!("-i modify job jobid=31 set TRES=energy={expected}")]
    );
    let rec = d.tcp_client().get_job(31).unwrap();
    assert_eq!(rec.slurm_energy_j, Some(expected));
    assert_eq!(
        metric(&addr, "greenup_slurm_energy_written_total"),
        Some(1.0)
    );
    assert_eq!(
        metric(&addr, "greenup_slurm_energy_failed_total"),
        Some(0.0)
    );

    // sacct now shows that figure as ConsumedEnergy: the report says whose it is.
    let ctx = Context {
        slurm_energy: SlurmEnergy::Measured {
            joules: expected as f64,
        },
        ..Context::default()
    };
    let r = from_record(&rec, &ctx);
    assert_eq!(r.slurm_energy.status(), "written_by_greenupd");
    let text = greenup::report::text::job_report(&r);
    assert!(
        text.contains("written there by greenupd from this measurement"),
        "{text}"
    );
}

#[test]
fn nothing_is_written_for_an_unmeasured_node_or_with_the_setting_off() {
    let d = start_writing(true, Slurm::Modern, None);
    run_job(
        &d,
        41,
        vec![
            outcome(41, "n1", 1000.0, "rapl", None),
            outcome(41, "n2", 1000.0, "unmeasured", None),
        ],
    );
    let_it_try();
    assert!(sacctmgr_calls(&d).is_empty());
    assert_eq!(d.tcp_client().get_job(41).unwrap().slurm_energy_j, None);

    let off = start_writing(false, Slurm::Modern, None);
    run_job(
        &off,
        42,
        vec![
            outcome(42, "n1", 1000.0, "rapl", None),
            outcome(42, "n2", 1000.0, "rapl", None),
        ],
    );
    let_it_try();
    assert!(sacctmgr_calls(&off).is_empty());
    assert_eq!(off.tcp_client().get_job(42).unwrap().slurm_energy_j, None);
}

#[test]
fn a_slurm_that_cannot_is_asked_once_and_not_again_until_a_reload() {
    let addr = format!("127.0.0.1:{}", free_port());
    let d = start_writing(true, Slurm::Old, Some(&addr));
    let measured = |job| {
        vec![
            outcome(job, "n1", 1000.0, "rapl", None),
            outcome(job, "n2", 1000.0, "rapl", None),
        ]
    };
    run_job(&d, 51, measured(51));
    wait_for(|| !sacctmgr_calls(&d).is_empty());
    run_job(&d, 52, measured(52));
    let_it_try();
    // The refusal stopped the tries: job 52 was never asked for, nor 51 again.
    assert_eq!(
        sacctmgr_calls(&d),
        ["-i modify job jobid=51 set TRES=energy=2000"]
    );
    for job in [51, 52] {
        assert_eq!(d.tcp_client().get_job(job).unwrap().slurm_energy_j, None);
    }
    assert_eq!(
        metric(&addr, "greenup_slurm_energy_failed_total"),
        Some(1.0)
    );
    assert_eq!(
        metric(&addr, "greenup_slurm_energy_written_total"),
        Some(0.0)
    );
}

#[test]
fn a_job_accounting_still_runs_is_never_written() {
    let d = start_writing(true, Slurm::Running, None);
    run_job(
        &d,
        61,
        vec![
            outcome(61, "n1", 1000.0, "rapl", None),
            outcome(61, "n2", 1000.0, "rapl", None),
        ],
    );
    let_it_try();
    assert!(sacctmgr_calls(&d).is_empty(), "{:?}", sacctmgr_calls(&d));
    assert_eq!(d.tcp_client().get_job(61).unwrap().slurm_energy_j, None);
}
