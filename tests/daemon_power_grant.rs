//! Under `power.enforce: queue` a job is planned under the watts Slurm granted it (its
//! licenses), never refused for power, and each node is told its share of the grant in
//! proportion to what its type draws at the frequency it is told. Real munged, real
//! SQLite, greenupd on loopback; shares are checked against the node type's closed form.

mod daemon_support;

use daemon_support::{open_req, start};
use greenup::site::{OverBudget, PowerEnforce};
use greenup_core::quantity::{Ghz, Watts};
use greenup_proto::protocol::{NodeSettings, OpenJob, Verdict};

/// daemon_support's node type `std`: 100 W static, 200 W dynamic at 2.4 GHz, cube law.
fn std_w(f: f64) -> f64 {
    100.0 + 200.0 * (f / 2.4_f64).powi(3)
}

fn job(job_id: u64, granted_w: Option<f64>, policy: &str, min_nodes: Option<usize>) -> OpenJob {
    OpenJob {
        restart_count: None,
        nodes: Vec::new(),
        nodelist: Some("n[1-4]".into()),
        profile: Some("lammps".into()),
        policy: Some(policy.into()),
        granted_w: granted_w.map(Watts),
        min_nodes,
        ..open_req(job_id, 0, 1)
    }
}

fn start_all(d: &daemon_support::Daemon, j: &OpenJob) -> Vec<NodeSettings> {
    (1..=4)
        .map(|i| {
            d.tcp_client()
                .start_node(&format!("n{i}"), j.clone())
                .unwrap()
        })
        .collect()
}

fn queue(enforce: PowerEnforce) -> daemon_support::Daemon {
    queue_with(enforce, OverBudget::Refuse)
}

fn queue_with(enforce: PowerEnforce, over_budget: OverBudget) -> daemon_support::Daemon {
    start(4, move |_, site, _| {
        site.power.enforce = enforce;
        // A ledger cap far below the grants and, by default, a site that refuses
        // over-budget jobs: under the queue neither may matter.
        site.power_cap_w = Some(400.0);
        site.daemon.over_budget = over_budget;
    })
}

/// Each used node's limit is the grant times its weight over the used nodes' weights.
fn assert_shares(nodes: &[NodeSettings], granted: f64) {
    let used: Vec<&NodeSettings> = nodes.iter().filter(|n| n.used).collect();
    let weights: Vec<f64> = used
        .iter()
        .map(|n| std_w(n.freq_ghz.map_or(2.4, |f| f.0)))
        .collect();
    let total: f64 = weights.iter().sum();
    for (n, w) in used.iter().zip(&weights) {
        let want = granted * w / total;
        let got = n.power_limit_w.expect("a used node is told its share").0;
        assert!(
            (got - want).abs() < 1e-6,
            "{}: {got} W, want {want} W",
            n.node
        );
    }
    let sum: f64 = used.iter().filter_map(|n| n.power_limit_w).sum::<Watts>().0;
    assert!(
        (sum - granted).abs() < 1e-6,
        "shares sum to {sum} W, granted {granted} W"
    );
    for n in nodes.iter().filter(|n| !n.used) {
        assert_eq!(n.power_limit_w, None, "{} is not used", n.node);
    }
}

#[test]
fn a_granted_job_is_planned_under_its_grant_and_its_nodes_share_it() {
    let d = queue(PowerEnforce::Queue);
    let nodes = start_all(&d, &job(1, Some(900.0), "min-energy", None));
    assert!(
        matches!(nodes[0].verdict, Verdict::Planned | Verdict::BudgetLimited),
        "{:?}: {}",
        nodes[0].verdict,
        nodes[0].reason
    );
    let predicted = nodes[0].predicted.as_ref().expect("a plan").avg_power_w;
    assert!(
        predicted <= greenup_core::quantity::Watts(900.0 + 1e-6),
        "planned {predicted} W over a 900 W grant"
    );
    assert_shares(&nodes, 900.0);
}

#[test]
fn under_hres_every_node_holds_what_its_rack_counted_for_it_whatever_the_plan_uses() {
    // Slurm counted the grant per node, 225 W on each of the four (900 W in all): a plan
    // on fewer nodes cannot move a node's watts to another, whose rack counted 225 W.
    let d = start(4, |_, site, _| {
        site.power.enforce = PowerEnforce::Hres;
        site.power_cap_w = Some(4000.0);
    });
    let nodes = start_all(&d, &job(3, Some(900.0), "min-energy", Some(1)));
    let used: Vec<&NodeSettings> = nodes.iter().filter(|n| n.used).collect();
    assert!(
        used.len() < 4,
        "min-energy uses {} of 4 nodes: {}",
        used.len(),
        nodes[0].reason
    );
    for n in &used {
        let got = n.power_limit_w.expect("a used node is told its share").0;
        assert!(
            (got - 225.0).abs() < 1e-6,
            "{}: {got} W, want 900 / 4",
            n.node
        );
    }
    // Under the queue the same grant is the used nodes' to share.
    let d = queue(PowerEnforce::Queue);
    let nodes = start_all(&d, &job(3, Some(900.0), "min-energy", Some(1)));
    assert_shares(&nodes, 900.0);
}

#[test]
fn the_quote_under_the_queue_is_planned_within_what_slurm_can_ever_grant() {
    // The ledger cap of 400 W less a 25% reserve: Slurm counts 300 licenses, so a job
    // asking for more is refused by Slurm itself. Four nodes at the top clock draw
    // 4 x 300 W, at the lowest (daemon_support's 1.2 GHz) 4 x 125 W: min-time must come
    // down to what fits, and the cli_filter's -L then asks for at most 300 W.
    let d = start(4, |_, site, _| {
        site.power.enforce = PowerEnforce::Queue;
        site.power.reserve = 0.25;
        site.power_cap_w = Some(400.0);
    });
    let q = d
        .tcp_client()
        .quote(job(1, None, "min-time", Some(1)))
        .unwrap();
    let hold = q.hold.expect("a planned job under the queue holds watts");
    assert!(hold.watts <= 300, "the quote holds {} W of 300", hold.watts);
    assert!(hold.watts > 0, "{}", q.line);
}

#[test]
fn a_grant_too_small_for_any_plan_runs_at_the_lowest_power_under_every_over_budget_setting() {
    for over_budget in [
        OverBudget::Refuse,
        OverBudget::Lowest,
        OverBudget::Unchanged,
    ] {
        let d = queue_with(PowerEnforce::Queue, over_budget);
        // Four nodes at their lowest, 1.2 GHz, draw 4 x 125 W = 500 W: more than 200 W.
        let nodes = start_all(&d, &job(2, Some(200.0), "min-energy", Some(4)));
        let why = format!("over_budget {over_budget:?}: {}", nodes[0].reason);
        assert_eq!(nodes[0].verdict, Verdict::BudgetLimited, "{why}");
        assert!(nodes[0].reason.contains("Slurm granted 200 W"), "{why}");
        for n in &nodes {
            assert_eq!(n.freq_ghz, Some(Ghz(1.2)), "{}: {why}", n.node);
            let got = n.power_limit_w.unwrap().0;
            assert!(
                (got - 50.0).abs() < 1e-6,
                "{}: {got} W, want 200 / 4",
                n.node
            );
        }
    }
}

#[test]
fn a_refused_job_still_holds_its_grant_on_every_node() {
    let d = queue(PowerEnforce::Queue);
    // A profile greenup does not have: the job runs unmanaged, yet within its watts.
    let j = OpenJob {
        restart_count: None,
        profile: Some("no-such-app".into()),
        ..job(5, Some(800.0), "min-energy", None)
    };
    let nodes = start_all(&d, &j);
    assert_eq!(nodes[0].verdict, Verdict::Refused, "{}", nodes[0].reason);
    for n in &nodes {
        assert_eq!(n.freq_ghz, None);
        let got = n.power_limit_w.unwrap().0;
        assert!(
            (got - 200.0).abs() < 1e-6,
            "{}: {got} W, want 800 / 4",
            n.node
        );
    }
}

#[test]
fn a_monitored_job_holds_its_grant_over_its_nodes_at_their_top_clock() {
    let d = queue(PowerEnforce::Queue);
    let nodes = start_all(&d, &job(3, Some(1000.0), "monitor", None));
    for n in &nodes {
        assert_eq!(n.freq_ghz, None, "monitor changes no clock");
        let got = n.power_limit_w.unwrap().0;
        assert!(
            (got - 250.0).abs() < 1e-6,
            "{}: {got} W, want 1000 / 4",
            n.node
        );
    }
}

#[test]
fn under_the_ledger_a_grant_is_ignored_and_no_node_is_limited() {
    let d = queue(PowerEnforce::Ledger);
    let nodes = start_all(&d, &job(4, Some(900.0), "min-energy", None));
    for n in &nodes {
        assert_eq!(n.power_limit_w, None, "{}", n.node);
    }
    // The ledger's 400 W cap binds again: the plan fits it or runs at its lowest.
    let predicted = nodes[0].predicted.as_ref().expect("a plan").avg_power_w;
    assert!(
        predicted <= greenup_core::quantity::Watts(400.0 + 1e-6)
            || nodes[0].verdict == Verdict::Refused,
        "{predicted} W under a 400 W ledger: {:?} {}",
        nodes[0].verdict,
        nodes[0].reason
    );
}

#[test]
fn a_gpu_jobs_plan_lowers_its_gpus_clock_and_each_node_is_told_it_and_weighed_at_it() {
    // Every node gets two GPUs of 50 W static and 250 W dynamic at 1600 MHz, with gears
    // 800 and 1600 MHz; the application's profile says each node's GPUs compute 30 s
    // on two nodes, so the GPUs' clock is a gear a decision may lower.
    let d = start(2, |dir, site, _| {
        site.power.enforce = PowerEnforce::Queue;
        site.gpu_types.insert(
            "std".into(),
            greenup::site::GpuType {
                count: 2,
                clocks_mhz: Some((800, 1600)),
                clock_step_mhz: Some(800),
                power_limit_w: None,
                dynamic_w: 250.0,
                static_w: 50.0,
                gamma: 3.0,
            },
        );
        let profiles = dir.join("profiles");
        std::fs::create_dir_all(&profiles).unwrap();
        std::fs::write(
            profiles.join("gpuapp.yaml"),
            "name: gpuapp\nversion: 1\nhetero:\n  iterations: 1\n  nodes: 2\n  node_types:\n    std: {t_cp_s: 10, t_cm_s: 1}\ngpu:\n  nodes: 2\n  node_types:\n    std: {busy_s: 30}\n",
        )
        .unwrap();
        site.profile_dir = profiles;
    });
    let j = OpenJob {
        restart_count: None,
        nodes: Vec::new(),
        nodelist: Some("n[1-2]".into()),
        profile: Some("gpuapp".into()),
        policy: Some("min-energy".into()),
        granted_w: Some(Watts(5000.0)),
        ..open_req(9, 0, 2)
    };
    let told: Vec<NodeSettings> = (1..=2)
        .map(|i| {
            d.tcp_client()
                .start_node(&format!("n{i}"), j.clone())
                .unwrap()
        })
        .collect();
    assert_eq!(told[0].verdict, Verdict::Planned, "{}", told[0].reason);
    // At 1600 MHz the GPUs' dynamic energy is 2 x 250 W x 30 s = 15 kJ a node; at 800
    // MHz a quarter of it over twice the time, 3.75 kJ, for 30 s more of 2 x 50 W of GPU
    // static power and the CPU's 100 W, 6 kJ: the clock is lowered.
    for n in &told {
        assert_eq!(n.gpu_mhz, Some(800), "{}: {n:?}", n.node);
        // Two nodes alike share 5000 W evenly; the CPU's part is in proportion to its
        // draw at its frequency against the GPUs' at 800 MHz: 50 + 250 / 8 W each.
        let f = n.freq_ghz.unwrap().0;
        let (cpu, gpu) = (std_w(f), 50.0 + 250.0 / 8.0);
        let share = 2500.0;
        let want_cpu = share * cpu / (cpu + 2.0 * gpu);
        let got = n.power_limit_w.unwrap().0;
        assert!(
            (got - want_cpu).abs() < 1e-6,
            "{}: {got} W, want {want_cpu}",
            n.node
        );
        let part = n.gpu_power.unwrap().part_w.0;
        assert!(
            (part - share * gpu / (cpu + 2.0 * gpu)).abs() < 1e-6,
            "{part}"
        );
    }
}
