//! The shipped profiles on the shipped site config (etc/greenup.yaml): they name its
//! node types, predict on its nodes, and plan through the shipped policies.

mod models_common;

use std::path::PathBuf;

use greenup::plan::{Algorithm, NodeRequest, PlanRequest, plan_with};
use greenup::policy::PolicySet;
use greenup::profile::Profile;
use greenup::site::Site;
use models_common::at_max;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn site() -> Site {
    greenup::site::load(root().join("etc/greenup.yaml")).unwrap()
}

fn profile(name: &str) -> Profile {
    let site = site();
    Profile::find(
        &site.profile_dir,
        name,
        greenup::input::Origin::Option("--energy-profile".into()),
    )
    .unwrap()
}

#[test]
fn every_profile_predicts_on_the_site() {
    let site = site();
    let cases: [(&str, &[&str]); 6] = [
        ("hetero-table1", &["h001", "h037", "h073", "h109"]),
        ("lammps", &["n1", "n2", "n3", "n4"]),
        ("lammps", &["h001", "h037"]),
        ("ep", &["n1", "n2"]),
        ("cg", &["h001", "h002", "h003", "h004"]),
        ("stream-i7", &["n1"]),
    ];
    for (name, nodes) in cases {
        let p = profile(name);
        let model = p.predictor(&site).unwrap();
        let out = model
            .predict(&at_max(&site, nodes))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            out.time_s > 0.0 && out.energy_j > 0.0 && out.per_node.len() == nodes.len(),
            "{name}"
        );
    }
}

#[test]
fn hetero_table1_at_max_frequency_by_hand() {
    // One node of each Table I type at maximum frequency, 1000 iterations:
    // T = 1000 * (max(0.5, 0.4, 0.3333, 0.2857) + min T_cm 0.05) = 550 s;
    // E = 1000 * (20*0.5 + 25*0.4 + 30*0.3333 + 35*0.2857) + (4+5+6+7) * 550.
    let site = site();
    let out = profile("hetero-table1")
        .predictor(&site)
        .unwrap()
        .predict(&at_max(&site, &["h001", "h037", "h073", "h109"]))
        .unwrap();
    assert!((out.time_s - 550.0).abs() < 1e-9, "{out:?}");
    let e = 1000.0 * (20.0 * 0.5 + 25.0 * 0.4 + 30.0 * 0.3333 + 35.0 * 0.2857) + 22.0 * 550.0;
    assert!(
        (out.energy_j - e).abs() < 1e-6 * e,
        "{} vs {e}",
        out.energy_j
    );
}

#[test]
fn max_dist_plans_hetero_table1_below_its_baseline() {
    let site = site();
    let policies = PolicySet::load(&site.policy_dirs).unwrap();
    let p = profile("hetero-table1");
    let model = p.predictor(&site).unwrap();
    let names: Vec<String> = [
        "h001", "h002", "h037", "h038", "h073", "h074", "h109", "h110",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let req = PlanRequest {
        policy: "max-dist".into(),
        nodes: NodeRequest::List { names, min: None },
        partition: Some("hetero".into()),
        energy_cap_j: None,
        power_cap_w: None,
        time_limit: greenup::record::TimeLimit::Seconds(7200.0),
        algorithm: Algorithm::Exact,
        max_freq_ghz: None,
    };
    let plan = plan_with(
        &site,
        model.as_ref(),
        policies.get("max-dist").unwrap(),
        &req,
    )
    .unwrap();
    assert!(plan.feasible, "{}", plan.reason);
    assert_eq!(plan.node_count, 8);
    // The slowest type keeps the pace; the faster ones slow down and save energy.
    assert!(plan.predicted.energy_j.0 < plan.baseline.energy_j.0);
    // P_norm - E_norm is 0 at the baseline; the plan does better.
    assert!(plan.objective > 0.0, "{plan:?}");
    let fast = plan.nodes.iter().find(|n| n.node_type == "type4").unwrap();
    assert!(fast.freq_ghz.0 < 3.4, "{plan:?}");
}
