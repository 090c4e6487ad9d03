//! Paper 004 (eqs. 2, 11-14) worked by hand on two nodes of different types.

mod models_common;

use std::path::Path;

use greenup::model::{Config, NodeSetting};
use greenup::profile::Profile;
use models_common::*;

// Node a: frequencies 1.0 and 2.0 GHz, T_cp = 1.0 s, T_cm = 0.5 s, P_d = 20 W, P_s = 4 W.
// Node b: frequencies 1.5 and 3.0 GHz, T_cp = 0.5 s, T_cm = 1.0 s, P_d = 30 W, P_s = 6 W.
// 10 iterations. min T_cm = 0.5 s.
const PROFILE: &str = "
name: two-types
version: 1
hetero:
  iterations: 10
  node_types:
    a: { t_cp_s: 1.0, t_cm_s: 0.5 }
    b: { t_cp_s: 0.5, t_cm_s: 1.0 }
";

fn two_type_site(pd_a: f64, ps_a: f64, pd_b: f64, ps_b: f64) -> greenup::site::Site {
    site(
        vec![
            node_type("a", vec![1.0, 2.0], pd_a, ps_a),
            node_type("b", vec![1.5, 3.0], pd_b, ps_b),
        ],
        &[("na", "a"), ("nb", "b")],
    )
}

fn cfg(fa: f64, fb: f64) -> Config {
    Config {
        nodes: vec![
            NodeSetting {
                gpu_mhz: None,
                name: "na".into(),
                node_type: "a".into(),
                freq_ghz: fa,
            },
            NodeSetting {
                gpu_mhz: None,
                name: "nb".into(),
                node_type: "b".into(),
                freq_ghz: fb,
            },
        ],
    }
}

#[test]
fn two_nodes_by_hand() {
    let p = Profile::from_str(Path::new("two.yaml"), PROFILE).unwrap();
    let model = p.predictor(&two_type_site(20.0, 4.0, 30.0, 6.0)).unwrap();
    // (S_a, S_b) = (1, 1): T = max(1, 0.5) + 0.5 = 1.5 s/iter;
    // E = 20*1 + 30*0.5 + (4+6)*1.5 = 50 J/iter.
    let base = model.predict(&cfg(2.0, 3.0)).unwrap();
    assert!(close(base.time_s, 15.0, 1e-12), "{base:?}");
    assert!(close(base.energy_j, 500.0, 1e-12), "{base:?}");
    // (S_a, S_b) = (1, 2): T = max(1, 1) + 0.5 = 1.5; E = 20 + 2^-2*30*0.5 + 10*1.5 = 38.75.
    let slow_b = model.predict(&cfg(2.0, 1.5)).unwrap();
    assert!(close(slow_b.time_s, 15.0, 1e-12));
    assert!(close(slow_b.energy_j, 387.5, 1e-12), "{slow_b:?}");
    // (S_a, S_b) = (2, 1): T = max(2, 0.5) + 0.5 = 2.5; E = 2^-2*20*1 + 15 + 10*2.5 = 45.
    let slow_a = model.predict(&cfg(1.0, 3.0)).unwrap();
    assert!(close(slow_a.time_s, 25.0, 1e-12));
    assert!(close(slow_a.energy_j, 450.0, 1e-12));
    // Eqs. 13-14: P_norm - E_norm of the (1, 2) vector.
    let dist = base.time_s / slow_b.time_s - slow_b.energy_j / base.energy_j;
    assert!(close(dist, 1.0 - 38.75 / 50.0, 1e-12));
    // Per node: node b computes 0.5*2*10 = 10 s; its energy is 3.75*10 + 6*15.
    let nb = &slow_b.per_node[1];
    assert!(close(nb.compute_s, 10.0, 1e-12));
    assert!(close(nb.energy_j, 37.5 + 90.0, 1e-12));
}

#[test]
fn table_is_eq_11_term_by_term() {
    let p = Profile::from_str(Path::new("two.yaml"), PROFILE).unwrap();
    let site = two_type_site(20.0, 4.0, 30.0, 6.0);
    let table = p
        .predictor(&site)
        .unwrap()
        .table(&slots(&site, &["na", "nb"]))
        .unwrap();
    assert!(
        close(table.fixed_time_s, 5.0, 1e-12),
        "min T_cm * iterations"
    );
    assert_eq!(table.fixed_energy_j, 0.0);
    let a = &table.nodes[0];
    assert_eq!(a.static_w, 4.0);
    // Node a at 1.0 GHz: S = 2, compute 1*2*10 = 20 s, dynamic 2^-2*20*1*10 = 50 J.
    assert!(close(a.choices[0].compute_s, 20.0, 1e-12));
    assert!(close(a.choices[0].dynamic_j, 50.0, 1e-12));
}

#[test]
fn profile_power_overrides_the_site() {
    let text = PROFILE.replace(
        "a: { t_cp_s: 1.0, t_cm_s: 0.5 }",
        "a: { t_cp_s: 1.0, t_cm_s: 0.5, p_dyn_w: 20, p_static_w: 4 }",
    );
    let p = Profile::from_str(Path::new("two.yaml"), &text).unwrap();
    // The site claims 100 W / 50 W for type a; the profile's measured values win.
    let model = p.predictor(&two_type_site(100.0, 50.0, 30.0, 6.0)).unwrap();
    assert!(close(
        model.predict(&cfg(2.0, 1.5)).unwrap().energy_j,
        387.5,
        1e-12
    ));
}

#[test]
fn unknown_node_type_is_an_error_not_a_panic() {
    let p = Profile::from_str(Path::new("two.yaml"), PROFILE).unwrap();
    let site = table1_site(1);
    let err = p
        .predictor(&site)
        .unwrap()
        .table(&slots(&site, &["n1"]))
        .unwrap_err();
    assert!(err.to_string().contains("type1"), "{err}");
}

#[test]
fn large_sets_reuse_rows_per_kind_but_keep_names() {
    let p = Profile::load(&profiles_dir().join("hetero-table1.yaml")).unwrap();
    let site = table1_site(250);
    let names: Vec<String> = (1..=1000).map(|i| format!("n{i}")).collect();
    let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    let table = p
        .predictor(&site)
        .unwrap()
        .table(&slots(&site, &refs))
        .unwrap();
    assert_eq!(table.nodes.len(), 1000);
    for (i, row) in table.nodes.iter().enumerate() {
        assert_eq!(row.name, names[i]);
        assert_eq!(row.node_type, format!("type{}", i % 4 + 1));
        assert_eq!(row.choices, table.nodes[i % 4].choices);
    }
    // Type 4 at its lowest gear: S = 3.4 / 1.6, compute 0.2857 * S * 1000 s,
    // dynamic 35 W * S^-2 * 0.2857 s * 1000.
    let s = 3.4 / 1.6;
    let c = table.nodes[3].choices[0];
    assert!(close(c.compute_s, 0.2857 * s * 1000.0, 1e-12));
    assert!(close(c.dynamic_j, 35.0 / (s * s) * 0.2857 * 1000.0, 1e-12));
    assert!(close(table.fixed_time_s, 0.05 * 1000.0, 1e-12));
    assert!(close(
        table.static_w(),
        250.0 * (4.0 + 5.0 + 6.0 + 7.0),
        1e-12
    ));
}

#[test]
fn nodes_with_their_own_frequency_lists_get_their_own_rows() {
    let p = Profile::load(&profiles_dir().join("hetero-table1.yaml")).unwrap();
    let site = table1_site(5);
    // Twenty type1 nodes, each allowed a different top frequency.
    let full = &site.node_types["type1"].freqs_ghz;
    let slots: Vec<greenup::model::NodeSlot> = (0..20)
        .map(|i| greenup::model::NodeSlot {
            name: format!("x{i}"),
            node_type: "type1".into(),
            freqs_ghz: full[..full.len() - i % 12].to_vec(),
        })
        .collect();
    let table = p.predictor(&site).unwrap().table(&slots).unwrap();
    for (slot, row) in slots.iter().zip(&table.nodes) {
        assert_eq!(row.name, slot.name);
        let freqs: Vec<f64> = row.choices.iter().map(|c| c.freq_ghz).collect();
        assert_eq!(&freqs, &slot.freqs_ghz);
        // The scaling factor is against the type's maximum (2.5 GHz), not the node's list.
        let c = row.choices[0];
        assert!(close(c.compute_s, 0.5 * 2.5 / 1.2 * 1000.0, 1e-12));
    }
}

/// PROFILE with a `steps:` list and, when given, the recorded winner.
fn with_steps(classes: &str, winner: Option<&str>) -> String {
    let mut text = format!("{PROFILE}  steps:\n{classes}");
    if let Some(w) = winner {
        text.push_str(&format!(
            "  model_choice: {{ winner: {w}, max_model_error: 0.12, step_model_error: 0.03, runs: 5 }}\n"
        ));
    }
    text
}

#[test]
fn one_step_class_of_share_one_is_paper_004() {
    let site = two_type_site(20.0, 4.0, 30.0, 6.0);
    let plain = Profile::from_str(Path::new("two.yaml"), PROFILE)
        .unwrap()
        .predictor(&site)
        .unwrap();
    let text = with_steps("    - { steps: 1, share: { a: 1, b: 1 } }\n", Some("steps"));
    let stepped = Profile::from_str(Path::new("two.yaml"), &text)
        .unwrap()
        .predictor(&site)
        .unwrap();
    // Without a recorded choice the two models predict the same slowdowns, so the step
    // model is as safe as the max model and is used.
    let text = with_steps("    - { steps: 1, share: { a: 1, b: 1 } }\n", None);
    let unrecorded = Profile::from_str(Path::new("two.yaml"), &text)
        .unwrap()
        .predictor(&site)
        .unwrap();
    let note = unrecorded.clock_note(&["a"]).unwrap();
    assert!(
        note.starts_with("time predicted by the step model")
            && note.contains("it predicts at least the max model's slowdown"),
        "{note}"
    );
    for (fa, fb) in [(2.0, 3.0), (2.0, 1.5), (1.0, 3.0), (1.0, 1.5)] {
        let a = plain.predict(&cfg(fa, fb)).unwrap();
        for m in [&stepped, &unrecorded] {
            let b = m.predict(&cfg(fa, fb)).unwrap();
            assert!(close(a.time_s, b.time_s, 1e-12), "{a:?} {b:?}");
            assert!(close(a.energy_j, b.energy_j, 1e-12), "{a:?} {b:?}");
        }
    }
}

const TWO_CLASSES: &str = "    - { steps: 40, share: { a: 0.8, b: 0.2 } }\n    - { steps: 60, share: { a: 0.2, b: 0.8 } }\n";

#[test]
fn steps_by_hand_and_slowing_the_waiting_type_costs_time() {
    let site = two_type_site(20.0, 4.0, 30.0, 6.0);
    let p = Profile::from_str(
        Path::new("two.yaml"),
        &with_steps(TWO_CLASSES, Some("steps")),
    )
    .unwrap();
    let model = p.predictor(&site).unwrap();
    // (S_a, S_b) = (1, 1): t_a = 1, t_b = 0.5: the steps take max(0.8, 0.1) + max(0.2, 0.4)
    // = 1.2 s/iter, 0.2 s more than a's 1 s: a's wait in b's steps, which comes off
    // T_cm's 0.5 s. 1.2 + 0.3 = 1.5 s/iter, the max model's time at f_max.
    let base = model.predict(&cfg(2.0, 3.0)).unwrap();
    assert!(close(base.time_s, 15.0, 1e-12), "{base:?}");
    // (1, 2): t_b = 1: max(0.8, 0.2) + max(0.2, 0.8) + 0.3 = 1.9 s/iter, where the max
    // model keeps 1.5 (b waits on the whole). Energy: 20 + 2^-2 * 30 * 0.5 + 10 * 1.9
    // = 42.75 J/iter.
    let slow_b = model.predict(&cfg(2.0, 1.5)).unwrap();
    assert!(close(slow_b.time_s, 19.0, 1e-12), "{slow_b:?}");
    assert!(close(slow_b.energy_j, 427.5, 1e-12), "{slow_b:?}");
    let note = model.clock_note(&["a", "b"]).unwrap();
    assert!(
        note.starts_with("time predicted by the step model (each step class led by its slowest type): RMS time error 3.0% against 12.0% for the max model over 5 measured runs"),
        "{note}"
    );
    // A recorded win of the max model keeps paper 004's time.
    let p =
        Profile::from_str(Path::new("two.yaml"), &with_steps(TWO_CLASSES, Some("max"))).unwrap();
    let m = p.predictor(&site).unwrap();
    assert!(close(
        m.predict(&cfg(2.0, 1.5)).unwrap().time_s,
        15.0,
        1e-12
    ));
    assert!(
        m.clock_note(&["a"])
            .unwrap()
            .starts_with("time predicted by the max model")
    );
    // Nothing recorded: slowing a alone (S = 2) costs the max model 1.0 s of 1.5 (67%) and
    // the steps max(1.6, 0.1) + max(0.4, 0.4) + 0.5 = 2.5 s against 1.7 (47%): the steps do
    // not predict at least the max model's slowdown, so the max model predicts.
    let p = Profile::from_str(Path::new("two.yaml"), &with_steps(TWO_CLASSES, None)).unwrap();
    let m = p.predictor(&site).unwrap();
    assert!(close(
        m.predict(&cfg(2.0, 1.5)).unwrap().time_s,
        15.0,
        1e-12
    ));
    let note = m.clock_note(&["a"]).unwrap();
    assert!(note.contains("0 measured run(s), too few to compare errors, and the step model does not predict at least its slowdown"), "{note}");
}

#[test]
fn of_step_windows_only_the_kept_length_in_steps_predicts_and_the_note_names_it() {
    let site = two_type_site(20.0, 4.0, 30.0, 6.0);
    // 10 ms windows saw one class of share 1 (the max model); refinement kept the 80 ms
    // classes, which steps: holds.
    let text = format!(
        "{PROFILE}  steps:\n{TWO_CLASSES}  step_windows:\n    - window_s: 0.01\n      classes:\n        - {{ steps: 1, share: {{ a: 1, b: 1 }} }}\n    - window_s: 0.08\n      classes:\n{}  model_choice: {{ winner: steps, max_model_error: 0.12, step_model_error: 0.03, runs: 5, window_s: 0.08 }}\n",
        TWO_CLASSES.replace("    - ", "        - ")
    );
    let p = Profile::from_str(Path::new("two.yaml"), &text).unwrap();
    assert_eq!(p.hetero_step_windows().len(), 2);
    let model = p.predictor(&site).unwrap();
    // As steps_by_hand_and_slowing_the_waiting_type_costs_time: (S_a, S_b) = (1, 2) takes
    // max(0.8, 0.2) + max(0.2, 0.8) + 0.3 = 1.9 s/iter; the 10 ms class would keep 1.5.
    let slow_b = model.predict(&cfg(2.0, 1.5)).unwrap();
    assert!(close(slow_b.time_s, 19.0, 1e-12), "{slow_b:?}");
    let note = model.clock_note(&["a", "b"]).unwrap();
    assert!(
        note.starts_with("time predicted by the step model (each step class led by its slowest type; classes from 0.08 s windows): RMS time error 3.0% against 12.0%"),
        "{note}"
    );
}

#[test]
fn a_plan_with_steps_bounds_the_slowdown_the_steps_predict_and_says_which_model() {
    use greenup::optimize::nodes::{Search, decide};
    use greenup::optimize::{Goal, Limits, Objective, brute::brute};
    let site = two_type_site(20.0, 4.0, 30.0, 6.0);
    let p = Profile::from_str(
        Path::new("two.yaml"),
        &with_steps(TWO_CLASSES, Some("steps")),
    )
    .unwrap();
    let model = p.predictor(&site).unwrap();
    let slots = slots(&site, &["na", "nb"]);
    let limits = Limits {
        max_slowdown: Some(0.1),
        ..Limits::default()
    };
    let search = Search {
        slots: &slots,
        min_nodes: 2,
        max_nodes: 2,
        objective: Objective::MinEnergy,
        limits,
        min_ee: None,
        algorithm: greenup::plan::Algorithm::Exact,
        max_freq_ghz: None,
    };
    let d = decide(model.as_ref(), &search).unwrap();
    // Within 10% of 17 s only every node at f_max fits (slowing b costs 4 s, a 8 s); the
    // max model would have slowed b for free.
    assert!(d.feasible, "{d:?}");
    assert_eq!(
        d.config
            .nodes
            .iter()
            .map(|n| n.freq_ghz)
            .collect::<Vec<_>>(),
        [2.0, 3.0]
    );
    let table = model.table(&slots).unwrap();
    let goal = Goal {
        objective: Objective::MinEnergy,
        limits,
        baseline_time_s: 17.0,
        baseline_energy_j: d.baseline.energy_j,
    };
    let oracle = brute(&table, &goal).unwrap();
    assert!(close(oracle.energy_j, d.prediction.energy_j, 1e-12));
}

#[test]
fn the_plans_reason_says_which_model_predicted_time() {
    use greenup::plan::{Algorithm, NodeRequest, PlanRequest, plan};
    use greenup::policy::PolicySet;
    let site = two_type_site(20.0, 4.0, 30.0, 6.0);
    let policies =
        PolicySet::load(&[Path::new(env!("CARGO_MANIFEST_DIR")).join("policies")]).unwrap();
    let policy = policies.get("min-energy").unwrap();
    let req = PlanRequest {
        policy: "min-energy".into(),
        nodes: NodeRequest::List {
            names: vec!["na".into(), "nb".into()],
            min: None,
        },
        partition: None,
        energy_cap_j: None,
        power_cap_w: None,
        time_limit: greenup::record::TimeLimit::Unknown,
        algorithm: Algorithm::Exact,
        max_freq_ghz: None,
    };
    let p = Profile::from_str(
        Path::new("two.yaml"),
        &with_steps(TWO_CLASSES, Some("steps")),
    )
    .unwrap();
    let planned = plan(&site, &p, policy, &req).unwrap();
    assert!(
        planned
            .reason
            .starts_with("time predicted by the step model"),
        "{}",
        planned.reason
    );
    assert!(
        planned.reason.contains("; clock sensitivity:"),
        "{}",
        planned.reason
    );
    // The baseline is the max model's 15 s: the steps' waits came off T_cm.
    assert!(close(planned.baseline.time_s.0, 15.0, 1e-12), "{planned:?}");
    let plain = Profile::from_str(Path::new("two.yaml"), PROFILE).unwrap();
    let planned = plan(&site, &plain, policy, &req).unwrap();
    assert!(
        planned.reason.starts_with("clock sensitivity:"),
        "{}",
        planned.reason
    );
}
