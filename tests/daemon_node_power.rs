//! greenupd learns each node type's busy watts per clock from the energy its nodes
//! measured in closed jobs, plans with them, and shows them on its metrics page and
//! through `greenup site power`.

mod daemon_support;

use daemon_support::*;
use greenup::record::Decision;
use greenup_proto::protocol::OpenJob;

/// The busy watts gauge of type `std` at `ghz` from `source`, if the page has it.
fn busy(page: &str, ghz: &str, source: &str) -> Option<f64> {
    let name = format!(
        "greenup_node_type_busy_watts{{node_type=\"std\",ghz=\"{ghz}\",source=\"{source}\"}} "
    );
    page.lines()
        .find_map(|l| l.strip_prefix(&name))
        .and_then(|v| v.trim().parse().ok())
}

/// A monitor job on n1 and n2 that ran 100 s at `ghz`, each node computing 95 s and
/// drawing `busy_w[i]` while it did and the site's 100 W idle the other 5 s.
fn run(d: &Daemon, job_id: u64, ghz: f64, busy_w: [f64; 2]) {
    let mut c = d.tcp_client();
    let req = OpenJob {
        restart_count: None,
        policy: Some("monitor".into()),
        ..open_req(job_id, 0, 2)
    };
    c.open_job(req).unwrap();
    for (i, w) in busy_w.iter().enumerate() {
        c.record_outcome(computing_outcome(job_id, &format!("n{}", i + 1), ghz, *w))
            .unwrap();
    }
    c.close_job(job_id, Some(greenup::record::JobEnd::Completed), None)
        .unwrap();
}

/// A site file for the CLI naming `d`'s greenupd, and what `greenup site power` prints
/// with it.
fn site_power(d: &Daemon) -> (std::path::PathBuf, String) {
    let site = d.dir.path().join("power-site.yaml");
    std::fs::write(
        &site,
        format!(
            "node_types:\n  std:\n    frequencies: [1.2, 1.6, 2.0, 2.4]\n    power: {{dynamic_w: 200, static_w: 100}}\n\
             nodes:\n  std: \"n[1-2]\"\n\
             daemon:\n  socket: {}\n  store: {}\n",
            d.socket.display(),
            d.store.display()
        ),
    )
    .unwrap();
    let (rc, out, err) = cli(None, &["site", "power", "--site", site.to_str().unwrap()]);
    assert_eq!(rc, 0, "{out}{err}");
    (site, out)
}

#[test]
fn measured_node_power_replaces_the_site_model_and_is_shown_with_its_source() {
    let addr = format!("127.0.0.1:{}", free_port());
    let listen = addr.clone();
    let d = start(2, move |_, s, _| s.daemon.metrics_listen = Some(listen));
    // Before any run the site's cube law: 100 + 200 W at 2.4 GHz.
    let page = metrics_page(&addr);
    assert_eq!(busy(&page, "2.4", "site"), Some(300.0), "{page}");
    let lammps = |job_id| OpenJob {
        restart_count: None,
        profile: Some("lammps".into()),
        policy: Some("min-energy".into()),
        ..open_req(job_id, 0, 2)
    };
    let before = d.tcp_client().open_job(lammps(100)).unwrap();

    for j in 1..=3 {
        run(&d, j, 1.6, [180.0, 180.0]);
    }
    // n2 of job 6 reads 400 W where the others read 260 W: left out.
    for j in 4..=6 {
        run(&d, j, 2.4, [260.0, if j == 6 { 400.0 } else { 260.0 }]);
    }
    let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-6);
    let mut page = String::new();
    wait_for(|| {
        page = metrics_page(&addr);
        close(busy(&page, "2.4", "measured"), 260.0)
    });
    assert!(close(busy(&page, "1.6", "measured"), 180.0), "{page}");
    // How many runs set a measured clock is a gauge of its own, never part of a label.
    assert!(
        page.lines()
            .any(|l| l == "greenup_node_type_power_runs{node_type=\"std\",ghz=\"2.4\"} 3"),
        "{page}"
    );
    // 2.0 GHz is halfway from 1.6 to 2.4: (180 + 260) / 2.
    assert!(close(busy(&page, "2", "interpolated"), 220.0), "{page}");
    // 1.2 GHz is below every measured clock: the site's 100 + 200 (1.2/2.4)^3 = 125 W,
    // scaled by 180 W over the site's 100 + 200 (1.6/2.4)^3 at 1.6 GHz.
    let site_16 = 100.0 + 200.0 * (1.6f64 / 2.4).powi(3);
    assert!(
        close(busy(&page, "1.2", "site_scaled"), 125.0 * 180.0 / site_16),
        "{page}"
    );

    // Decisions plan with it. lammps (amdahl) computes 3600 s x (0.97 / 2 + 0.03) =
    // 1854 s per node at f_max, at computing watts 300 by the site and 260 measured:
    // 40 W x 1854 s x 2 nodes less in the all-f_max baseline, in the same time.
    let after = d.tcp_client().open_job(lammps(101)).unwrap();
    let (b, a) = (
        &before.plan.as_ref().unwrap().baseline,
        &after.plan.as_ref().unwrap().baseline,
    );
    assert!((a.time_s.0 - b.time_s.0).abs() < 1e-6);
    assert!(
        (b.energy_j.0 - a.energy_j.0 - 40.0 * 1854.0 * 2.0).abs() < 1e-3,
        "{} -> {}",
        b.energy_j.0,
        a.energy_j.0
    );
    // Each decision stores the watts it planned with at the clock it chose, and their
    // source: the site's law before any run, the curve above after.
    use greenup::model::measured_power::PowerSource;
    let expected_after = |f: f64| match f {
        f if (f - 1.2).abs() < 1e-9 => (125.0 * 180.0 / site_16, PowerSource::SiteScaled),
        f if (f - 1.6).abs() < 1e-9 => (180.0, PowerSource::Measured { runs: 3 }),
        f if (f - 2.0).abs() < 1e-9 => (220.0, PowerSource::Interpolated),
        _ => (260.0, PowerSource::Measured { runs: 3 }),
    };
    for (decision, after_runs) in [(&before, false), (&after, true)] {
        // One entry per clock the plan set n1 and n2 to.
        let clocks: std::collections::BTreeSet<String> = ["n1", "n2"]
            .iter()
            .filter_map(|n| decision.freq_for(n))
            .map(|f| format!("{f:.3}"))
            .collect();
        let listed: std::collections::BTreeSet<String> = decision
            .watts
            .iter()
            .map(|w| format!("{:.3}", w.freq_ghz.0))
            .collect();
        assert!(!clocks.is_empty(), "{decision:?}");
        assert_eq!(listed, clocks, "{:?}", decision.watts);
        assert_eq!(decision.watts.len(), clocks.len(), "{:?}", decision.watts);
        for w in &decision.watts {
            assert_eq!(w.node_type, "std");
            let (busy_w, source) = if after_runs {
                expected_after(w.freq_ghz.0)
            } else {
                (
                    100.0 + 200.0 * (w.freq_ghz.0 / 2.4).powi(3),
                    PowerSource::Site,
                )
            };
            assert!(close(Some(w.busy_w.0), busy_w), "{w:?} against {busy_w}");
            assert_eq!(w.source, source, "{w:?}");
            assert!(close(Some(w.idle_w.0), 100.0), "{w:?}");
        }
    }

    // The CLI learns the same from the same stored jobs, and names what it left out.
    let (site, out) = site_power(&d);
    assert!(
        out.contains("std                 2.00     100.0     220.0  interpolated"),
        "{out}"
    );
    assert!(
        out.contains("std                 2.40     100.0     260.0  measured, 3 runs"),
        "{out}"
    );
    assert!(
        out.contains("left out: node n2 (type std) job 6 at 2.4 GHz: busy 400.0 W"),
        "{out}"
    );
    let (rc, out, _) = cli(
        None,
        &[
            "site",
            "power",
            "--site-only",
            "--site",
            site.to_str().unwrap(),
        ],
    );
    assert_eq!(rc, 0);
    assert!(
        out.contains("std                 2.40     100.0     300.0  site"),
        "{out}"
    );
}

/// greenupd after three runs in which n1 drew 234 W and n2 286 W computing at 2.4 GHz:
/// the type's 260 W, n1 0.9 of it and n2 1.1.
fn cool_and_hot() -> Daemon {
    let d = start(2, |_, _, _| {});
    for j in 1..=3 {
        run(&d, j, 2.4, [234.0, 286.0]);
    }
    d
}

/// lammps under `policy` on one node, with a power cap if given.
fn on_one(job_id: u64, node: &str, policy: &str, cap_w: Option<f64>) -> OpenJob {
    OpenJob {
        restart_count: None,
        profile: Some("lammps".into()),
        policy: Some(policy.into()),
        nodes: vec![node.into()],
        power_cap_w: cap_w.map(greenup_core::quantity::Watts),
        ..open_req(job_id, 0, 1)
    }
}

/// The same job opened on n1 and on n2, again until `ready` says the factors are in use:
/// the curve is relearned after each close.
fn once_learned(
    d: &Daemon,
    policy: &str,
    cap_w: Option<f64>,
    ready: impl Fn(&Decision, &Decision) -> bool,
) -> (Decision, Decision) {
    let (mut pair, mut next) = (None, 100);
    wait_for(|| {
        next += 2;
        let (a, b) = (
            d.tcp_client()
                .open_job(on_one(next, "n1", policy, cap_w))
                .unwrap(),
            d.tcp_client()
                .open_job(on_one(next + 1, "n2", policy, cap_w))
                .unwrap(),
        );
        let done = ready(&a, &b);
        pair = Some((a, b));
        done
    });
    pair.unwrap()
}

#[test]
fn a_node_that_draws_more_than_its_type_plans_with_its_own_factor() {
    let d = cool_and_hot();
    // The two jobs have one shape but for their nodes' factors, so greenupd's plan cache
    // must not hand n1's plan to n2 (it did, before the factor joined the shape).
    let (a, b) = once_learned(&d, "min-time", None, |a, b| {
        let (ea, eb) = (
            a.plan.as_ref().unwrap().baseline.energy_j.0,
            b.plan.as_ref().unwrap().baseline.energy_j.0,
        );
        (eb / ea - 1.1 / 0.9).abs() < 1e-9
    });
    // The same program on one node of the same type at the same clocks takes the same
    // time on either; n2's whole node, idle and busy alike, costs 1.1 / 0.9 of n1's.
    let (pa, pb) = (a.plan.as_ref().unwrap(), b.plan.as_ref().unwrap());
    assert!((pa.baseline.time_s.0 - pb.baseline.time_s.0).abs() < 1e-9);
    assert!(
        (pb.predicted.energy_j.0 / pa.predicted.energy_j.0 - 1.1 / 0.9).abs() < 1e-9,
        "{:?} {:?}",
        pa.predicted,
        pb.predicted
    );

    // Each decision names the node that planned with its own factor.
    let factors = |d: &Decision| -> Vec<(String, f64)> {
        d.watts
            .iter()
            .flat_map(|w| w.node_factors.iter().map(|(n, k)| (n.clone(), *k)))
            .collect()
    };
    let (fa, fb) = (factors(&a), factors(&b));
    assert!(
        fa.len() == 1 && fa[0].0 == "n1" && (fa[0].1 - 0.9).abs() < 1e-9,
        "{fa:?}"
    );
    assert!(
        fb.len() == 1 && fb[0].0 == "n2" && (fb[0].1 - 1.1).abs() < 1e-9,
        "{fb:?}"
    );

    // `greenup site power` lists each node's factor under its type's watts.
    let (_, out) = site_power(&d);
    assert!(
        out.contains("std                 2.40     100.0     260.0  measured, 3 runs"),
        "{out}"
    );
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip_while(|l| !l.contains("factor"))
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [["n1", "std", "0.900", "3"], ["n2", "std", "1.100", "3"]],
        "{out}"
    );
}

#[test]
fn a_power_cap_holds_each_node_to_its_own_watts() {
    let d = cool_and_hot();
    // min-time under a 250 W cap on one node. 2.4 GHz is the only measured clock, and
    // a plan under a cap prices a lower one at the most it can draw: dynamic watts that
    // fall no faster than the clock, 100 + 160 f / 2.4 W (233.3 W at 2.0 GHz, 206.7 W at
    // 1.6), not the site's law scaled to 2.4 GHz (260/300 of 100 + 200 (f/2.4)^3 W, 187.0
    // W at 2.0 GHz), each times the node's factor. n1 fits at 2.4 GHz (234 W); n2 does
    // not (286 W), nor at 2.0 GHz (256.7 W), and takes 1.6 GHz (227.3 W). Priced by the
    // scaled law it would take 2.0 GHz, where a chip that draws the floor breaks the cap.
    let (a, b) = once_learned(&d, "min-time", Some(250.0), |a, b| {
        [a, b]
            .iter()
            .all(|x| x.watts.iter().any(|w| !w.node_factors.is_empty()))
    });
    let floor = |f: f64| 100.0 + 160.0 * f / 2.4;
    assert!(1.1 * floor(2.0) > 250.0 && 1.1 * floor(1.6) <= 250.0);
    assert_eq!(a.freq_for("n1"), Some(2.4), "{a:?}");
    assert_eq!(b.freq_for("n2"), Some(1.6), "{b:?}");
    assert!(
        b.reason
            .contains("caps held at the most the chips can draw")
            && !a.reason.contains("caps held"),
        "{} / {}",
        a.reason,
        b.reason
    );
    // The decision records the watts it priced 1.6 GHz with, and that they are no
    // measurement.
    let w = &b.watts[0];
    assert!((w.busy_w.0 - floor(1.6)).abs() < 1e-9, "{w:?}");
    assert_eq!(
        w.source,
        greenup::model::measured_power::PowerSource::SiteScaled
    );
    for (decision, node_w) in [(&a, 234.0), (&b, 1.1 * floor(1.6))] {
        let p = &decision.plan.as_ref().unwrap().predicted;
        // lammps on one node computes all but its communication, where it draws idle
        // watts: its average lies at most at its computing watts, under the cap.
        assert!(p.avg_power_w.0 <= 250.0 + 1e-9, "{p:?}");
        assert!(p.avg_power_w.0 <= node_w + 1e-6, "{p:?} against {node_w}");
        assert!(p.avg_power_w.0 > 0.9 * node_w, "{p:?} against {node_w}");
    }
}
