//! Every shipped profile loads and predicts on a site it fits.

mod models_common;

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
        let cfg = at_max(&site, &["n1", "n2", "n3", "n4"]);
        let out = pred.predict(&cfg).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(out.time_s > 0.0 && out.energy_j > 0.0, "{file}: {out:?}");
        assert!(close(out.avg_power_w, out.energy_j / out.time_s, 1e-12));
    }
}

#[test]
fn shipped_profiles_round_trip_through_yaml() {
    let site = table1_site(2);
    let slots = slots(&site, &["n1", "n2", "n3", "n4", "n5"]);
    for entry in std::fs::read_dir(profiles_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let p = Profile::load(&path).unwrap();
        let text = p.to_yaml().unwrap();
        let q = Profile::from_str(&path, &text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(
            (q.name(), q.version(), q.chosen_model()),
            (p.name(), p.version(), p.chosen_model())
        );
        let a = p.predictor(&site).unwrap().table(&slots).unwrap();
        let b = q.predictor(&site).unwrap().table(&slots).unwrap();
        assert_eq!(a, b, "{}", path.display());
    }
}

#[test]
fn refit_writes_a_new_amdahl_version() {
    use greenup::model::amdahl::{Run, fit};
    use greenup::profile::{AmdahlFile, Param, unspanned};
    let p = Profile::load(&profiles_dir().join("lammps.yaml")).unwrap();
    let runs: Vec<Run> = [1usize, 2, 4, 8]
        .iter()
        .map(|&n| Run {
            nodes: n,
            time_s: 1000.0 * (0.5 / n as f64 + 0.5) + 5.0 * (n as f64).log2(),
            blocked_s: None,
        })
        .collect();
    let f = fit(&runs).unwrap();
    let mut file = p.file.clone();
    file.version = unspanned(Param::Number((p.version() + 1) as f64));
    file.amdahl = Some(p.file.amdahl.as_ref().unwrap().refit(&f));
    let text = serde_saphyr::to_string(&file).unwrap();
    let q = Profile::from_str(std::path::Path::new("lammps.v2.yaml"), &text).unwrap();
    assert_eq!(q.version(), 2);
    assert!(text.contains("version: 2"), "{text}");
    assert!(
        text.contains("slowdown"),
        "the old slowdown is kept: {text}"
    );
    let a = q.file.amdahl.unwrap();
    assert_eq!(
        a.parallel_fraction.value,
        Param::Number(f.parallel_fraction)
    );
    let _ = AmdahlFile::from_fit(&f);
}
