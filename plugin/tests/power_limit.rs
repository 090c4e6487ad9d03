//! A decision's power limit on a node (issue 23): the prolog's part sets the node's RAPL
//! long-term and short-term limits to its share of the job's watts, with the site's
//! windows, whatever the verdict; the epilog restores exactly what was there and
//! reports the node as held; a limit that cannot be written is "not held", and under
//! `enforce: strict` the job's steps fail on that node. The sysfs tree is a stand-in laid
//! out as the kernel's powercap class (and tests/cluster/sysfs.sh) lays it out.

mod common;

use std::path::Path;

use greenup_platform::dvfs::job::Scope;
use greenup_platform::dvfs::powercap::PowerHeld;
use greenup_proto::protocol::NodeSettings;
use spank_greenup::args::Args;
use spank_greenup::node::{self, JobEnv, Level};
use spank_greenup::step::{self, StepInfo};
use spank_greenup::{epilog, prolog};

use common::{node_args, node_tree, second_node_job};

fn zone_file(sys: &Path, f: &str) -> String {
    std::fs::read_to_string(sys.join("class/powercap/intel-rapl:0").join(f))
        .unwrap()
        .trim()
        .to_string()
}

/// The site: power held in Slurm's queue and by RAPL, a 2 s long-term window and a
/// short-term limit 1.5 times the long-term one over 10 ms; greenupd unreachable (port
/// 9 on loopback), so the epilog spools what it reports.
fn setup(t: &Path, enforce: &str) -> (Args, JobEnv) {
    node_tree(&t.join("sys/n1"));
    let yaml = format!(
        "node_types:\n  a:\n    frequencies: [1.0, 2.0]\n    power: {{dynamic_w: 100, static_w: 20, gamma: 3}}\nnodes:\n  a: \"n[0-1]\"\nenforce: {enforce}\ndaemon:\n  listen: 127.0.0.1:9\n  timeout_ms: 100\n  spool_dir: {t}/spool/%n\ndvfs:\n  run_dir: {t}/run\npower:\n  enforce: queue\n  rapl_window_s: 2\n  short_term: 1.5\n  short_window_ms: 10\n",
        t = t.display()
    );
    let config = t.join("greenup.yaml");
    std::fs::write(&config, yaml).unwrap();
    (node_args(t, &config), second_node_job(&[]))
}

/// greenupd's answer for n1: a refused job (it runs unmanaged) that still holds 150 W.
fn refused_with_150_w() -> NodeSettings {
    serde_json::from_value(serde_json::json!({
        "job_id": 77, "node": "n1", "used": true, "freq_ghz": null,
        "verdict": "refused", "reason": "no profile", "power_limit_w": 150.0
    }))
    .unwrap()
}

fn quiet(_: Level, _: &str) {}

#[test]
fn a_decisions_power_limit_is_set_for_any_verdict_and_restored_at_the_epilog() {
    let t = tempfile::tempdir().unwrap();
    let (args, job) = setup(t.path(), "open");
    let site = node::settings(&args).unwrap();
    let paths = node::node_paths(&args, &site, "n1");
    let d = refused_with_150_w();
    // The prolog keeps the decision for the epilog; then applies it.
    let dir = greenup_platform::dvfs::run_dir::JobDir::new(&paths.run_dir, 77);
    dir.create().unwrap();
    std::fs::write(dir.decision("n1"), serde_json::to_vec(&d).unwrap()).unwrap();
    let rec = prolog::apply_settings(&paths, &site, &job, Some(&d), &Scope::Node, &quiet).unwrap();
    assert_eq!(
        rec.power,
        Some(PowerHeld::Held {
            asked_w: 150.0,
            held_w: 150.0,
            note: None
        })
    );
    let sys = &paths.sysfs_root;
    assert_eq!(zone_file(sys, "constraint_0_power_limit_uw"), "150000000");
    assert_eq!(zone_file(sys, "constraint_0_time_window_us"), "2000000");
    // 1.5 x 150 W over 10 ms.
    assert_eq!(zone_file(sys, "constraint_1_power_limit_uw"), "225000000");
    assert_eq!(zone_file(sys, "constraint_1_time_window_us"), "10000");
    // Nothing went wrong: no warning for the job's steps, and strict would let them run.
    assert!(!dir.warning("n1").exists());

    epilog::epilog(&args, &job, &quiet);
    assert_eq!(zone_file(sys, "constraint_0_power_limit_uw"), "0");
    assert_eq!(zone_file(sys, "constraint_0_time_window_us"), "976562");
    assert_eq!(zone_file(sys, "constraint_1_power_limit_uw"), "0");
    assert_eq!(zone_file(sys, "constraint_1_time_window_us"), "2440");
    // greenupd is down: the outcome waits in the spool, the node reported as held.
    let spooled: serde_json::Value =
        serde_json::from_slice(&std::fs::read(t.path().join("spool/n1/77.n1.json")).unwrap())
            .unwrap();
    assert_eq!(
        spooled["outcomes"][0]["power"],
        serde_json::json!({"asked_w": 150.0, "held_w": 150.0})
    );
    assert!(!paths.run_dir.join("77").exists());
}

#[test]
fn a_limit_that_cannot_be_written_is_not_held_and_strict_stops_the_job_there() {
    for enforce in ["open", "strict"] {
        let t = tempfile::tempdir().unwrap();
        let (args, job) = setup(t.path(), enforce);
        let site = node::settings(&args).unwrap();
        let paths = node::node_paths(&args, &site, "n1");
        // A limit no one may write, root included: a link to a read-only sysctl.
        let file = paths
            .sysfs_root
            .join("class/powercap/intel-rapl:0/constraint_0_power_limit_uw");
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/proc/sys/kernel/ngroups_max", &file).unwrap();
        let warnings = std::cell::RefCell::new(Vec::new());
        let log = |l: Level, m: &str| {
            if l == Level::Warning {
                warnings.borrow_mut().push(m.to_string());
            }
        };
        let d = refused_with_150_w();
        let rec =
            prolog::apply_settings(&paths, &site, &job, Some(&d), &Scope::Node, &log).unwrap();
        assert!(
            matches!(&rec.power, Some(PowerHeld::NotHeld { asked_w, .. }) if *asked_w == 150.0),
            "{:?}",
            rec.power
        );
        let said = warnings.borrow().join("\n");
        assert!(
            said.contains("power limit of 150.0 W not set"),
            "{enforce}: {said}"
        );
        // The window written before the limit failed is back as it was.
        assert_eq!(
            zone_file(&paths.sysfs_root, "constraint_0_time_window_us"),
            "976562"
        );
        let first_step = StepInfo {
            job_id: 77,
            step_id: 0,
            node: "n1".into(),
        };
        let r = step::enforce(&site, &first_step);
        assert_eq!(r.is_err(), enforce == "strict", "{enforce}: {r:?}");
    }
}

#[test]
fn a_shared_node_is_reported_not_held_without_failing_the_job() {
    let t = tempfile::tempdir().unwrap();
    let (args, job) = setup(t.path(), "strict");
    let site = node::settings(&args).unwrap();
    let paths = node::node_paths(&args, &site, "n1");
    let d = refused_with_150_w();
    let rec =
        prolog::apply_settings(&paths, &site, &job, Some(&d), &Scope::SharedNode, &quiet).unwrap();
    assert!(matches!(rec.power, Some(PowerHeld::NotHeld { .. })));
    assert_eq!(
        zone_file(&paths.sysfs_root, "constraint_0_power_limit_uw"),
        "0"
    );
    let step = StepInfo {
        job_id: 77,
        step_id: 0,
        node: "n1".into(),
    };
    assert!(step::enforce(&site, &step).is_ok());
}
