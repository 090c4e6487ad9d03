//! Every shipped profile loads and predicts on a site it fits.

mod models_common;

use greenup::model::{Config, NodeSetting};
use greenup::profile::Profile;
use models_common::*;

#[test]
fn every_shipped_profile_loads() {
    let mut seen = 0;
    for entry in std::fs::read_dir(profiles_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let p = Profile::load(&path).unwrap_or_else(|e| panic!("{e}"));
            assert!(!p.models().is_empty());
            seen += 1;
        }
    }
    assert!(seen >= 6, "expected the six shipped profiles, saw {seen}");
}

#[test]
fn shipped_profiles_pick_their_model() {
    let expect = [
        ("ep.yaml", "iso_energy"),
        ("ft.yaml", "iso_energy"),
        ("cg.yaml", "iso_energy"),
        ("hetero-table1.yaml", "hetero"),
        ("lammps.yaml", "amdahl"),
        ("stream-i7.yaml", "roofline"),
    ];
    let site = table1_site(2);
    for (file, model) in expect {
        let p = Profile::load(&profiles_dir().join(file)).unwrap();
        assert_eq!(p.chosen_model(), model, "{file}");
        let pred = p.predictor(&site).unwrap();
        assert_eq!(pred.name(), model);
        let cfg = Config {
            nodes: ["n1", "n2", "n3", "n4"]
                .iter()
                .map(|n| {
                    let t = site.node_type_of(n).unwrap();
                    NodeSetting {
                        name: n.to_string(),
                        node_type: t.name.clone(),
                        freq_ghz: t.fmax(),
                    }
                })
                .collect(),
        };
        let out = pred.predict(&cfg).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(out.time_s > 0.0 && out.energy_j > 0.0, "{file}: {out:?}");
        assert!(close(out.avg_power_w, out.energy_j / out.time_s, 1e-12));
    }
}
