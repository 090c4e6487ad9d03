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
