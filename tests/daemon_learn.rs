//! An application with no profile is run under monitor on 1, 2 and 4 nodes; greenupd
//! records the runs under its name, `greenup profile learn` (root only) builds the first
//! version from them with amdahl's fit, greenupd decides the next job from it, and later
//! runs, planned or monitor, refine it.

mod daemon_support;

use std::os::unix::fs::PermissionsExt;

use daemon_support::*;
use greenup::profile::versions::Versions;
use greenup::record::{JobEnd, Source};
use greenup_core::quantity::{Ghz, Joules, Seconds};
use greenup_proto::protocol::{NodeOutcome, OpenJob, Verdict};

/// The measured wall time on `n` nodes at f_max, from the closed form
/// T(n) = 900 / n + 100 + 20 log2 n (T_C(0,1) = 1000 s, F_p = 0.9, log law with 20 s).
fn truth(n: usize) -> f64 {
    900.0 / n as f64 + 100.0 + 20.0 * (n as f64).log2()
}

fn monitor(job_id: u64, n: usize) -> OpenJob {
    OpenJob {
        restart_count: None,
        policy: Some("monitor".into()),
        profile: Some("newapp".into()),
        ..open_req(job_id, 0, n)
    }
}

/// Record every node of `job_id` (nodes n1..=n) at `ghz` for `secs`, then close it.
fn run(d: &Daemon, job_id: u64, n: usize, ghz: f64, secs: f64) {
    let mut c = d.tcp_client();
    for i in 1..=n {
        c.record_outcome(NodeOutcome {
            restart_count: None,
            comm: None,
            job_id,
            node: format!("n{i}"),
            freq_ghz: Some(Ghz(ghz)),
            energy_j: Some(Joules(300.0 * secs)),
            elapsed_s: Some(Seconds(secs)),
            source: Some(Source::Rapl),
            restored: true,
            note: None,
            gpu: None,
            power: None,
        })
        .unwrap();
    }
    assert!(c.close_job(job_id, Some(JobEnd::Completed), None).unwrap());
}

#[test]
fn monitor_runs_build_the_first_version_that_decides_and_later_runs_refine_it() {
    test_user_uid();
    let d = start(4, |dir, s, _| {
        let admin = dir.join("admin");
        std::fs::create_dir(&admin).unwrap();
        s.profile_dir = admin;
    });
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let admin_file = d.dir.path().join("admin/newapp.yaml");
    let versions = Versions::for_store(&d.store);

    // No profile yet: the monitor jobs are accepted and recorded under the name.
    for (job, n) in [(1, 1), (2, 2), (3, 4)] {
        let dec = d.tcp_client().open_job(monitor(job, n)).unwrap();
        assert_eq!(dec.verdict, Verdict::Unchanged);
        assert!(dec.monitor);
        assert_eq!(dec.profile.as_deref(), Some("newapp"));
        run(&d, job, n, 2.4, truth(n));
    }
    // A run below f_max says nothing of the times at f_max: learning leaves it out (were
    // it in, the fit below would not come out exact).
    d.tcp_client().open_job(monitor(4, 4)).unwrap();
    run(&d, 4, 4, 2.0, truth(4) * 1.2);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(versions.list("newapp").unwrap().is_empty());
    assert!(!admin_file.exists());

    let site = d.dir.path().join("cli-site.yaml");
    std::fs::write(
        &site,
        format!(
            "node_types:\n  std:\n    frequencies: [1.2, 1.6, 2.0, 2.4]\n    power: {{dynamic_w: 200, static_w: 100}}\n\
             nodes:\n  std: \"n[1-4]\"\nprofile_dir: {}\n\
             daemon:\n  socket: {}\n  store: {}\n  slurm_user: root\n",
            d.dir.path().join("admin").display(),
            d.socket.display(),
            d.store.display()
        ),
    )
    .unwrap();
    let site = site.to_str().unwrap();

    // An ordinary user may not write a profile jobs read, and learns nothing from
    // other people's jobs even into a file of their own.
    let (rc, out, err) = cli(
        Some(TEST_USER),
        &[
            "profile", "learn", "newapp", "--model", "amdahl", "--site", site,
        ],
    );
    assert_eq!(rc, 3, "{out}{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("greenup: profile learn: only root or the SlurmUser (root) may write ")
            && err.contains("newapp.yaml"),
        "{err}"
    );
    assert!(!admin_file.exists());
    // Nor by naming the file itself, however the path is spelled.
    let sneaky = d.dir.path().join("admin/../admin/newapp.yaml");
    let (rc, _, err) = cli(
        Some(TEST_USER),
        &[
            "profile",
            "learn",
            "newapp",
            "--model",
            "amdahl",
            "--out",
            sneaky.to_str().unwrap(),
            "--site",
            site,
        ],
    );
    assert_eq!(rc, 3, "{err}");
    assert!(err.contains("only root or the SlurmUser"), "{err}");
    let (rc, _, err) = cli(
        Some(TEST_USER),
        &[
            "profile", "learn", "newapp", "--model", "amdahl", "--out", "-", "--site", site,
        ],
    );
    assert_eq!(rc, 3);
    assert!(
        err.contains("amdahl needs monitor runs of newapp on 3 node counts; have none"),
        "{err}"
    );

    // Root learns from every run: 1, 2 and 4 nodes at f_max.
    let (rc, out, err) = cli(
        None,
        &[
            "profile", "learn", "newapp", "--model", "amdahl", "--site", site,
        ],
    );
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("amdahl version 1 written to"), "{out}");
    let learned = greenup::profile::Profile::load(&admin_file).unwrap();
    assert_eq!(learned.version(), 1);
    let site_cfg = greenup::site::load(site).unwrap();
    let a = learned.amdahl_model(&site_cfg).unwrap();
    assert!((a.t_c1_s - 1000.0).abs() < 1e-6, "{}", a.t_c1_s);
    assert!((a.parallel_fraction - 0.9).abs() < 1e-9);
    assert!((a.coeff_s - 20.0).abs() < 1e-6);
    // A second learn does not overwrite it unasked.
    let (rc, _, err) = cli(
        None,
        &[
            "profile", "learn", "newapp", "--model", "amdahl", "--site", site,
        ],
    );
    assert_eq!(rc, 2);
    assert!(err.contains("--force"), "{err}");

    // greenupd now decides from it: the baseline (every node at f_max) is T(4) = 365 s.
    let dec = d
        .tcp_client()
        .open_job(OpenJob {
            restart_count: None,
            policy: Some("min-energy".into()),
            profile: Some("newapp".into()),
            ..open_req(5, 0, 4)
        })
        .unwrap();
    assert_eq!(dec.verdict, Verdict::Planned);
    assert_eq!(dec.profile_version.as_deref(), Some("1"));
    let plan = dec.plan.as_ref().unwrap();
    assert!(
        (plan.baseline.time_s.0 - truth(4)).abs() < 1e-6,
        "{}",
        plan.baseline.time_s
    );
    assert!(finish_planned(
        &d,
        &dec,
        300.0 * 4.0 * plan.predicted.time_s.0,
        Some("rapl")
    ));
    wait_for(|| versions.list("newapp").unwrap() == vec![2]);

    // And a later monitor run refines it again, with every run so far.
    d.tcp_client().open_job(monitor(6, 2)).unwrap();
    run(&d, 6, 2, 2.4, truth(2));
    wait_for(|| versions.list("newapp").unwrap() == vec![2, 3]);
    // Refinement uses all six runs: job 4, below f_max, teaches the slowdown per gear.
    let fit = versions.fit("newapp", 3).unwrap();
    assert_eq!(fit.samples, 6);
}
