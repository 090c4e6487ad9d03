//! `plan::plan_with` end to end on a small model defined here: limits merge,
//! node slots come from the site, node counts are searched, monitor changes nothing.

mod models_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use models_common::{node_type, slots};

use greenup::model::{Choice, ModelError, NodeChoices, NodeSlot, Predictor, SweepTable};
use greenup::optimize::brute::brute;
use greenup::optimize::{Goal, Limits};
use greenup::plan::{Algorithm, NodeRequest, PlanError, PlanRequest, plan_with};
use greenup::policy::{Policy, PolicySet};
use greenup::site::{Partition, Site};
use greenup_core::quantity::{Joules, Watts};

/// Bulk-synchronous work of `GFLOP` shared evenly over n nodes, each computing at
/// its type's GFLOPS scaled by f / f_max; communication takes 0.5 s per node.
/// Dynamic power scales as (f / f_max)^3 (paper 004, eq. 8).
struct Model<'a> {
    site: &'a Site,
    gflops: BTreeMap<&'static str, f64>,
}

const GFLOP: f64 = 4000.0;

impl Predictor for Model<'_> {
    fn name(&self) -> &'static str {
        "test"
    }

    fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError> {
        let n = nodes.len() as f64;
        let rows = nodes
            .iter()
            .map(|slot| {
                let ty = &self.site.node_types[&slot.node_type];
                let speed = self.gflops[slot.node_type.as_str()];
                let choices = slot
                    .freqs_ghz
                    .iter()
                    .map(|&f| {
                        let compute_s = GFLOP / n / speed * ty.fmax() / f;
                        Choice {
                            wait_w: 0.0,
                            gpu_mhz: None,
                            freq_ghz: f,
                            compute_s,
                            dynamic_j: ty.dynamic_w(f).unwrap() * compute_s,
                        }
                    })
                    .collect();
                NodeChoices {
                    name: slot.name.clone(),
                    node_type: slot.node_type.clone(),
                    choices,
                    static_w: ty.static_w(ty.fmax()).unwrap(),
                }
            })
            .collect();
        Ok(SweepTable {
            nodes: rows,
            fixed_time_s: 0.5 * n,
            fixed_energy_j: 0.0,
            steps: None,
        })
    }
}

/// Four nodes: n1, n2 of type slow (1.2-2.5 GHz), n3, n4 of type fast (1.6-3.4 GHz).
fn site() -> Site {
    let mut site = models_common::site(
        vec![
            node_type("slow", vec![1.2, 1.5, 2.0, 2.5], 20.0, 4.0),
            node_type("fast", vec![1.6, 2.2, 2.8, 3.4], 35.0, 7.0),
        ],
        &[
            ("n1", "slow"),
            ("n2", "slow"),
            ("n3", "fast"),
            ("n4", "fast"),
        ],
    );
    site.partitions.insert(
        "fast".to_string(),
        Partition {
            nodes: vec!["n3".into(), "n4".into()],
            power_cap_w: Some(60.0),
        },
    );
    site.default_policy = "min-energy".into();
    site.policy_dirs = vec![policies_dir()];
    site
}

fn model(site: &Site) -> Model<'_> {
    Model {
        site,
        gflops: [("slow", 40.0), ("fast", 70.0)].into_iter().collect(),
    }
}

fn policies_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("policies")
}

fn policy(name: &str) -> Policy {
    PolicySet::load(&[policies_dir()])
        .unwrap()
        .get(name)
        .unwrap()
        .clone()
}

fn request(policy: &str, nodes: NodeRequest) -> PlanRequest {
    PlanRequest {
        policy: policy.into(),
        nodes,
        partition: None,
        energy_cap_j: None,
        power_cap_w: None,
        time_limit: greenup::record::TimeLimit::Unknown,
        algorithm: Algorithm::Exact,
        max_freq_ghz: None,
    }
}

fn all_four() -> NodeRequest {
    NodeRequest::List {
        names: vec!["n1".into(), "n2".into(), "n3".into(), "n4".into()],
        min: None,
    }
}

/// The brute-force optimum of the first `n` nodes of `names` under `goal`.
fn oracle(site: &Site, names: &[&str], goal: &Goal) -> (f64, f64) {
    let slots = slots(site, names);
    let t = model(site).table(&slots).unwrap();
    let o = brute(&t, goal).unwrap();
    (o.time_s, o.energy_j)
}

fn baseline_goal(
    site: &Site,
    names: &[&str],
    objective: greenup::optimize::Objective,
    limits: Limits,
) -> Goal {
    let slots = slots(site, names);
    let t = model(site).table(&slots).unwrap();
    let (bt, be) = t.totals(&t.max_pick());
    Goal {
        objective,
        limits,
        baseline_time_s: bt,
        baseline_energy_j: be,
    }
}

#[test]
fn a_fixed_allocation_gets_the_brute_force_optimum() {
    let s = site();
    let p = plan_with(
        &s,
        &model(&s),
        &policy("max-dist"),
        &request("max-dist", all_four()),
    )
    .unwrap();
    let names = ["n1", "n2", "n3", "n4"];
    let (t, e) = oracle(
        &s,
        &names,
        &baseline_goal(
            &s,
            &names,
            greenup::optimize::Objective::MaxDist,
            Limits::default(),
        ),
    );
    assert!(p.feasible);
    assert_eq!(p.node_count, 4);
    assert!((p.predicted.time_s.0 - t).abs() < 1e-9 && (p.predicted.energy_j.0 - e).abs() < 1e-6);
    assert_eq!(
        p.nodes
            .iter()
            .map(|n| n.node_type.as_str())
            .collect::<Vec<_>>(),
        ["slow", "slow", "fast", "fast"]
    );
    // Baseline: the slow nodes take 4000/4/40 = 25 s, plus 4 x 0.5 s communication.
    assert!((p.baseline.time_s.0 - 27.0).abs() < 1e-9);
    assert!(
        p.objective > 0.0,
        "the fast nodes can slow down for free, so the distance is positive"
    );
    assert_eq!(p.search.algorithm, Algorithm::Exact);
    assert!(p.search.candidates > 0);
}

#[test]
fn the_three_algorithms_are_selectable() {
    let s = site();
    let mut plans = Vec::new();
    for algorithm in [Algorithm::Exact, Algorithm::Paper, Algorithm::Brute] {
        let req = PlanRequest {
            algorithm,
            ..request("max-dist", all_four())
        };
        let p = plan_with(&s, &model(&s), &policy("max-dist"), &req).unwrap();
        assert_eq!(p.search.algorithm, algorithm);
        plans.push(p);
    }
    assert!(
        (plans[0].objective - plans[2].objective).abs() < 1e-12,
        "exact equals brute"
    );
    assert!(
        plans[1].objective <= plans[0].objective + 1e-12,
        "Algorithm 1 is never better"
    );
}

#[test]
fn a_user_cannot_lift_the_site_power_cap() {
    let mut s = site();
    s.power_cap_w = Some(80.0);
    let p = policy("min-time");
    let loose = PlanRequest {
        power_cap_w: Some(Watts(1000.0)),
        ..request("min-time", all_four())
    };
    let capped = plan_with(&s, &model(&s), &p, &loose).unwrap();
    assert!(capped.feasible);
    assert!(capped.predicted.avg_power_w.0 <= 80.0 + 1e-9);
    assert!(
        capped.baseline.avg_power_w.0 > 80.0,
        "the cap binds: at full speed the job draws more"
    );
    let none = plan_with(&s, &model(&s), &p, &request("min-time", all_four())).unwrap();
    assert_eq!(capped.nodes, none.nodes);
    // A stricter user cap does bind.
    let strict = PlanRequest {
        power_cap_w: Some(Watts(60.0)),
        ..request("min-time", all_four())
    };
    let tighter = plan_with(&s, &model(&s), &p, &strict).unwrap();
    assert!(tighter.predicted.avg_power_w.0 <= 60.0 + 1e-9);
    assert!(tighter.predicted.time_s.0 > capped.predicted.time_s.0);
}

#[test]
fn the_site_energy_limit_caps_every_job() {
    let mut s = site();
    let free = plan_with(
        &s,
        &model(&s),
        &policy("min-time"),
        &request("min-time", all_four()),
    )
    .unwrap();
    let limit = free.predicted.energy_j.0 * 0.9;
    s.job_energy_limit_j = Some(limit);
    let req = PlanRequest {
        energy_cap_j: Some(free.predicted.energy_j * 10.0),
        ..request("min-time", all_four())
    };
    let p = plan_with(&s, &model(&s), &policy("min-time"), &req).unwrap();
    assert!(p.predicted.energy_j.0 <= limit + 1e-9);
    assert!(p.predicted.time_s.0 > free.predicted.time_s.0);
}

#[test]
fn the_partition_power_cap_applies() {
    let s = site();
    let req = PlanRequest {
        partition: Some("fast".into()),
        ..request("min-time", NodeRequest::Count { min: 2, max: 2 })
    };
    let p = plan_with(&s, &model(&s), &policy("min-time"), &req).unwrap();
    assert_eq!(
        p.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        ["n3", "n4"]
    );
    assert!(p.predicted.avg_power_w.0 <= 60.0 + 1e-9 && p.baseline.avg_power_w.0 > 60.0);
}

#[test]
fn an_impossible_time_limit_gives_an_infeasible_plan_with_a_reason() {
    let s = site();
    let req = PlanRequest {
        time_limit: greenup::record::TimeLimit::Seconds(5.0),
        ..request("min-energy", all_four())
    };
    let p = plan_with(&s, &model(&s), &policy("min-energy"), &req).unwrap();
    assert!(!p.feasible);
    assert!(
        p.reason
            .contains("time limit 5.0 s exceeded (closest 27.0 s)"),
        "{}",
        p.reason
    );
    assert_eq!(
        p.predicted.time_s.0, 27.0,
        "the closest is the fastest: slow nodes at 2.5 GHz"
    );
}

#[test]
fn node_count_is_searched_on_a_uniform_partition() {
    // On the fast partition only: the best count and frequencies must equal brute
    // force over every count (1 or 2 nodes; Slurm order for equal nodes).
    let s = site();
    let req = PlanRequest {
        partition: Some("fast".into()),
        ..request("min-energy", NodeRequest::Count { min: 1, max: 2 })
    };
    let p = plan_with(&s, &model(&s), &policy("min-energy"), &req).unwrap();
    let mut best = f64::INFINITY;
    for names in [&["n3"][..], &["n3", "n4"][..]] {
        let limits = Limits {
            power_cap_w: Some(60.0),
            ..Limits::default()
        };
        let mut g = baseline_goal(
            &s,
            &["n3", "n4"],
            greenup::optimize::Objective::MinEnergy,
            limits,
        );
        g.limits = limits;
        let (_, e) = oracle(&s, names, &g);
        best = best.min(e);
    }
    assert!(
        (p.predicted.energy_j.0 - best).abs() < 1e-9,
        "{} vs {best}",
        p.predicted.energy_j.0
    );
    // 1 node: 4000/70 s of compute, 0.5 s comms; 2 nodes halve compute but add 0.5 s: fewer is cheaper here.
    assert_eq!(p.node_count, 1);
}

#[test]
fn fewer_nodes_of_a_list_prefers_a_defensible_subset() {
    let s = site();
    let req = request(
        "min-time",
        NodeRequest::List {
            names: vec!["n1".into(), "n2".into(), "n3".into(), "n4".into()],
            min: Some(2),
        },
    );
    let p = plan_with(&s, &model(&s), &policy("min-time"), &req).unwrap();
    // More nodes share the work: 4 nodes are fastest (27 s vs 2 fast nodes 4000/2/70 + 1 = 29.6 s).
    assert_eq!(p.node_count, 4);
    let req = PlanRequest {
        nodes: NodeRequest::List {
            names: vec!["n1".into(), "n3".into(), "n4".into()],
            min: Some(2),
        },
        ..req
    };
    let p = plan_with(&s, &model(&s), &policy("min-time"), &req).unwrap();
    // 3 nodes: the slow one takes 4000/3/40 = 33.3 s + 1.5; the two fast ones 28.6 s + 1: drop n1.
    assert_eq!(
        p.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        ["n3", "n4"]
    );
    assert_eq!(
        p.baseline.time_s.0,
        4000.0 / 3.0 / 40.0 + 1.5,
        "baseline: all three listed nodes at maximum"
    );
}

#[test]
fn monitor_changes_nothing() {
    let s = site();
    let p = plan_with(
        &s,
        &model(&s),
        &policy("monitor"),
        &request("monitor", all_four()),
    )
    .unwrap();
    assert!(p.feasible);
    assert!(p.reason.starts_with("monitor"), "{}", p.reason);
    assert_eq!(p.predicted, p.baseline);
    let freqs: Vec<f64> = p.nodes.iter().map(|n| n.freq_ghz.0).collect();
    assert_eq!(freqs, [2.5, 2.5, 3.4, 3.4]);
}

#[test]
fn the_slowdown_of_the_edp_policy_holds() {
    let s = site();
    let p = plan_with(&s, &model(&s), &policy("edp"), &request("edp", all_four())).unwrap();
    assert!(p.predicted.time_s.0 <= p.baseline.time_s.0 * 1.10 + 1e-9);
}

#[test]
fn bad_requests_are_refused_clearly() {
    let mut s = site();
    let m = model(&s);
    let err = |r: Result<_, PlanError>| r.unwrap_err().to_string();
    let unknown = request(
        "min-time",
        NodeRequest::List {
            names: vec!["n9".into()],
            min: None,
        },
    );
    assert_eq!(
        err(plan_with(&s, &m, &policy("min-time"), &unknown)),
        "request field nodes: node: invalid value 'n9': expected a node listed in the site config's node types"
    );
    let neg = PlanRequest {
        energy_cap_j: Some(Joules(-1.0)),
        ..request("min-time", all_four())
    };
    assert!(
        err(plan_with(&s, &m, &policy("min-time"), &neg))
            .contains("energy_cap_j: invalid value '-1'")
    );
    let part = PlanRequest {
        partition: Some("gpu".into()),
        ..request("min-time", NodeRequest::Count { min: 1, max: 2 })
    };
    assert!(
        err(plan_with(&s, &m, &policy("min-time"), &part))
            .contains("expected one of the site's partitions: fast")
    );
    let mut narrow = policy("min-time");
    narrow.constraints.nodes = Some((1, 2));
    assert!(
        err(plan_with(&s, &m, &narrow, &request("min-time", all_four()))).contains("allows (1-2)")
    );
    assert!(
        err(plan_with(
            &s,
            &m,
            &policy("iso-ee"),
            &request("iso-ee", all_four())
        ))
        .contains("does not define iso-energy-efficiency")
    );
    s.allowed_policies = vec!["min-energy".into()];
    let m = model(&s);
    assert!(
        err(plan_with(
            &s,
            &m,
            &policy("min-time"),
            &request("min-time", all_four())
        ))
        .contains("allowed policies: min-energy")
    );
}

#[test]
fn the_plan_serializes_with_the_documented_keys() {
    let s = site();
    let p = plan_with(
        &s,
        &model(&s),
        &policy("min-energy"),
        &request("min-energy", all_four()),
    )
    .unwrap();
    let v = serde_json::to_value(&p).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let mut want = vec![
        "policy",
        "feasible",
        "reason",
        "node_count",
        "nodes",
        "predicted",
        "baseline",
        "objective",
        "search",
    ];
    want.sort();
    let mut got = keys.clone();
    got.sort();
    assert_eq!(got, want);
    assert_eq!(
        v["nodes"][0]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["freq_ghz", "name", "type"]
    );
    assert_eq!(v["search"]["algorithm"], "exact");
}

/// `plan()` on the shipped site config and Table I profile: 144 nodes, with the exact
/// sweep never behind Algorithm 1, and the site's partition cap binding.
#[test]
fn plan_on_the_shipped_site_and_table1_profile() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let s = greenup::site::load(root.join("etc/greenup.yaml")).unwrap();
    let profile =
        greenup::profile::Profile::load(&root.join("etc/profiles/hetero-table1.yaml")).unwrap();
    let set = PolicySet::load(&s.policy_dirs).unwrap();
    let names: Vec<String> = (1..=144).map(|i| format!("h{i:03}")).collect();
    let mut objectives = Vec::new();
    for algorithm in [Algorithm::Exact, Algorithm::Paper] {
        let req = PlanRequest {
            partition: Some("hetero".into()),
            algorithm,
            ..request(
                "max-dist",
                NodeRequest::List {
                    names: names.clone(),
                    min: None,
                },
            )
        };
        let p = greenup::plan::plan(&s, &profile, set.get("max-dist").unwrap(), &req).unwrap();
        assert_eq!(p.node_count, 144);
        if p.feasible {
            assert!(
                p.predicted.avg_power_w.0 <= 3500.0 + 1e-6,
                "the partition's 3.5kW cap holds"
            );
        }
        objectives.push((p.feasible, p.objective));
    }
    let (exact, paper) = (objectives[0], objectives[1]);
    assert!(
        exact.0 || !paper.0,
        "exact is feasible whenever Algorithm 1 is"
    );
    if exact.0 && paper.0 {
        assert!(
            exact.1 >= paper.1 - 1e-12,
            "exact {} vs Algorithm 1 {}",
            exact.1,
            paper.1
        );
    }
}

/// The fast nodes with two GPUs each: 50 W static and 250 W dynamic at their top clock.
fn site_with_gpus() -> Site {
    let mut s = site();
    s.gpu_types.insert(
        "fast".into(),
        greenup::site::GpuType {
            count: 2,
            clocks_mhz: None,
            clock_step_mhz: None,
            power_limit_w: None,
            dynamic_w: 250.0,
            static_w: 50.0,
            gamma: 3.0,
        },
    );
    s
}

/// The plan of `policy` for n3 and n4 on `s`, with the model above.
fn fast_pair_plan(s: &Site, policy_name: &str) -> greenup::plan::Plan {
    plan_with(
        s,
        &model(s),
        &policy(policy_name),
        &request(policy_name, fast_pair()),
    )
    .unwrap()
}

fn fast_pair() -> NodeRequest {
    NodeRequest::List {
        names: vec!["n3".into(), "n4".into()],
        min: None,
    }
}

/// The closed form of `Model` on n3 and n4 at `f3`, `f4` GHz: (time, CPU energy).
fn fast_pair_closed_form(f3: f64, f4: f64) -> (f64, f64) {
    let c = |f: f64| GFLOP / 2.0 / 70.0 * 3.4 / f;
    let t = c(f3).max(c(f4)) + 1.0;
    let dynamic = |f: f64| 35.0 * (f / 3.4_f64).powi(3) * c(f);
    (t, dynamic(f3) + dynamic(f4) + 2.0 * 7.0 * t)
}

#[test]
fn a_gpu_nodes_gpus_count_in_its_plan_flat_out_and_rapls_part_stays_apart() {
    let s = site_with_gpus();
    let p = fast_pair_plan(&s, "monitor");
    // Two nodes x two GPUs x (50 + 250) W, for the whole wall time.
    let (t, cpu_j) = fast_pair_closed_form(3.4, 3.4);
    let gpus_w = 2.0 * 2.0 * 300.0;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(close(p.predicted.time_s.0, t));
    assert!(
        close(p.predicted.energy_j.0, cpu_j + gpus_w * t),
        "{:?}",
        p.predicted
    );
    assert!(close(p.predicted.avg_power_w.0, cpu_j / t + gpus_w));
    let g = p.gpus.expect("the plan counts the GPUs");
    assert_eq!((g.planned_w.0, g.baseline_w.0), (gpus_w, gpus_w));
    let (cpu, base) = p.without_gpus();
    assert!(close(cpu.energy_j.0, cpu_j) && close(cpu.avg_power_w.0, cpu_j / t));
    assert!(close(base.energy_j.0, cpu_j));
    // A CPU-only site's plans say nothing of GPUs.
    let s = site();
    let p = fast_pair_plan(&s, "monitor");
    assert_eq!(p.gpus, None);
}

#[test]
fn a_power_cap_the_cpus_alone_would_fit_at_top_speed_slows_a_gpu_job_to_fit_with_its_gpus() {
    let s = site_with_gpus();
    let gpus_w = 1200.0;
    let (t, cpu_j) = fast_pair_closed_form(3.4, 3.4);
    // At top speed the CPUs draw ~82 W: far under the cap alone, over it with the GPUs.
    let cap = 1270.0;
    assert!(cpu_j / t < cap && cpu_j / t + gpus_w > cap);
    let req = PlanRequest {
        power_cap_w: Some(Watts(cap)),
        ..request("min-energy", fast_pair())
    };
    let p = plan_with(&s, &model(&s), &policy("min-energy"), &req).unwrap();
    assert!(p.feasible, "{}", p.reason);
    // Oracle: every pair of the fast type's frequencies by the closed form, GPUs drawing
    // 1200 W the whole time; the least energy whose average power fits the cap.
    let freqs = [1.6, 2.2, 2.8, 3.4];
    let mut best: Option<(f64, f64, f64, f64)> = None;
    for &a in &freqs {
        for &b in &freqs {
            let (t, cpu_j) = fast_pair_closed_form(a, b);
            let e = cpu_j + gpus_w * t;
            if e / t <= cap && best.is_none_or(|(_, _, be, _)| e < be - 1e-9) {
                best = Some((a, b, e, t));
            }
        }
    }
    let (_, _, e, t) = best.expect("some pair fits");
    assert!(
        (p.predicted.energy_j.0 - e).abs() < 1e-6 * e,
        "plan {:?}, oracle {e} J",
        p.predicted
    );
    assert!((p.predicted.time_s.0 - t).abs() < 1e-6 * t);
    assert!(p.predicted.avg_power_w.0 <= cap + 1e-9);
    assert!(
        p.nodes.iter().any(|n| n.freq_ghz.0 < 3.4),
        "the GPUs leave the CPUs less: {:?}",
        p.nodes
    );
}

/// The model above with the profile's GPU times: each fast node's GPUs busy 6 s at
/// their top clock when the job runs on 2 nodes.
struct WithBusy<'a>(Model<'a>, greenup::model::gpus::GpuBusy);

impl Predictor for WithBusy<'_> {
    fn name(&self) -> &'static str {
        "test"
    }
    fn table(&self, nodes: &[NodeSlot]) -> Result<SweepTable, ModelError> {
        self.0.table(nodes)
    }
    fn gpu_busy(&self) -> Option<&greenup::model::gpus::GpuBusy> {
        Some(&self.1)
    }
}

fn busy_model(s: &Site) -> WithBusy<'_> {
    WithBusy(
        model(s),
        greenup::model::gpus::GpuBusy {
            nodes: 2,
            types: [(
                "fast".to_string(),
                greenup::model::gpus::TypeBusy::seconds(6.0),
            )]
            .into_iter()
            .collect(),
        },
    )
}

/// The fast nodes' GPUs with SM clocks 800-1600 MHz in steps of 400.
fn site_with_gpu_gears() -> Site {
    let mut s = site_with_gpus();
    let g = s.gpu_types.get_mut("fast").unwrap();
    g.clocks_mhz = Some((800, 1600));
    g.clock_step_mhz = Some(400);
    s
}

/// Oracle for n3 and n4 with GPU clocks: every CPU frequency and GPU clock of both nodes
/// by the closed form of greenup::model::gpus, written out here: (time, energy) of each.
/// One point of [`gpu_pair_space`]: each node's (GHz, MHz), the time and the energy.
type PairPoint = ([(f64, u32); 2], f64, f64);

fn gpu_pair_space(cpu: &[f64], gpu: &[u32]) -> Vec<PairPoint> {
    let c = |f: f64| GFLOP / 2.0 / 70.0 * 3.4 / f;
    let b = 6.0;
    let mut out = Vec::new();
    for &f3 in cpu {
        for &g3 in gpu {
            for &f4 in cpu {
                for &g4 in gpu {
                    let node = |f: f64, g: u32| {
                        let s = 1600.0 / f64::from(g);
                        let t = c(f) + b * (s - 1.0);
                        // CPU dynamic over its compute; 2 GPUs x 250 W x S^-3 while busy b S.
                        let j =
                            35.0 * (f / 3.4_f64).powi(3) * c(f) + 2.0 * 250.0 / s.powi(3) * b * s;
                        (t, j)
                    };
                    let (t3, j3) = node(f3, g3);
                    let (t4, j4) = node(f4, g4);
                    let t = t3.max(t4) + 1.0;
                    // Static: 7 W per CPU, 2 x 50 W of GPUs per node, the whole wall time.
                    let e = j3 + j4 + (2.0 * 7.0 + 2.0 * 2.0 * 50.0) * t;
                    out.push(([(f3, g3), (f4, g4)], t, e));
                }
            }
        }
    }
    out
}

#[test]
fn gpu_clocks_are_chosen_like_cpu_gears_and_the_plan_is_the_brute_force_optimum() {
    let s = site_with_gpu_gears();
    assert_eq!(s.gpu_types["fast"].gears_mhz(), [800, 1200, 1600]);
    let m = busy_model(&s);
    let p = plan_with(
        &s,
        &m,
        &policy("min-energy"),
        &request("min-energy", fast_pair()),
    )
    .unwrap();
    let space = gpu_pair_space(&[1.6, 2.2, 2.8, 3.4], &[800, 1200, 1600]);
    let (_, _, e) = space
        .iter()
        .min_by(|a, b| a.2.total_cmp(&b.2))
        .copied()
        .unwrap();
    assert!(
        (p.predicted.energy_j.0 - e).abs() < 1e-6 * e,
        "plan {:?} {:?}, oracle {e} J",
        p.predicted,
        p.nodes
    );
    // The chosen clocks give that energy by the closed form (the top clock is left unset).
    let chosen: Vec<(f64, u32)> = p
        .nodes
        .iter()
        .map(|n| (n.freq_ghz.0, n.gpu_mhz.unwrap_or(1600)))
        .collect();
    let hit = space.iter().find(|(k, _, _)| k[..] == chosen[..]).unwrap();
    assert!((hit.2 - e).abs() < 1e-6 * e, "{chosen:?}");
    assert!(p.nodes.iter().all(|n| n.gpu_mhz != Some(1600)));
    // Lowering the GPUs pays here (their dynamic energy falls as S^-2, 6 s of 31 s).
    assert!(p.nodes.iter().any(|n| n.gpu_mhz.is_some()), "{:?}", p.nodes);
    // The GPUs' part: the plan's energy less the CPUs' by the closed form.
    let g = p.gpus.unwrap();
    let cpu_j: f64 = p
        .nodes
        .iter()
        .map(|n| {
            let f = n.freq_ghz.0;
            35.0 * (f / 3.4_f64).powi(3) * (GFLOP / 2.0 / 70.0 * 3.4 / f)
        })
        .sum::<f64>()
        + 14.0 * p.predicted.time_s.0;
    let gpu_j = p.predicted.energy_j.0 - cpu_j;
    assert!(
        (g.planned_w.0 * p.predicted.time_s.0 - gpu_j).abs() < 1e-6 * gpu_j,
        "{g:?}"
    );
}

#[test]
fn a_policy_saves_on_the_devices_it_names() {
    let s = site_with_gpu_gears();
    let m = busy_model(&s);
    let cpu_top = [1.6, 2.2, 2.8, 3.4];
    let best = |cpu: &[f64], gpu: &[u32]| {
        gpu_pair_space(cpu, gpu)
            .into_iter()
            .map(|x| x.2)
            .fold(f64::INFINITY, f64::min)
    };
    for (devices, cpu, gpu) in [
        (
            greenup::model::gpus::Devices::Cpu,
            &cpu_top[..],
            &[1600][..],
        ),
        (
            greenup::model::gpus::Devices::Gpu,
            &[3.4][..],
            &[800, 1200, 1600][..],
        ),
        (
            greenup::model::gpus::Devices::Both,
            &cpu_top[..],
            &[800, 1200, 1600][..],
        ),
    ] {
        let mut pol = policy("min-energy");
        pol.devices = devices;
        let p = plan_with(&s, &m, &pol, &request("min-energy", fast_pair())).unwrap();
        let e = best(cpu, gpu);
        assert!(
            (p.predicted.energy_j.0 - e).abs() < 1e-6 * e,
            "{devices:?}: plan {:?} {:?}, oracle {e} J",
            p.predicted,
            p.nodes
        );
        for n in &p.nodes {
            assert!(cpu.contains(&n.freq_ghz.0), "{devices:?}: {n:?}");
            assert!(
                gpu.contains(&n.gpu_mhz.unwrap_or(1600)),
                "{devices:?}: {n:?}"
            );
        }
    }
    // Algorithm 1 knows CPU gears only: it leaves the GPUs alone.
    let req = PlanRequest {
        algorithm: Algorithm::Paper,
        ..request("min-energy", fast_pair())
    };
    let p = plan_with(&s, &m, &policy("min-energy"), &req).unwrap();
    assert!(p.nodes.iter().all(|n| n.gpu_mhz.is_none()), "{:?}", p.nodes);
}
