//! Loading named policies: the shipped set, site additions, and clear errors.

use std::path::{Path, PathBuf};

use greenup::optimize::Objective;
use greenup::policy::{Policy, PolicySet, parse_range};

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("policies")
}

fn write(dir: &Path, file: &str, text: &str) -> PathBuf {
    let p = dir.join(file);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn the_shipped_policies_load() {
    let set = PolicySet::load(&[shipped()]).unwrap();
    assert_eq!(
        set.names(),
        vec![
            "edp",
            "iso-ee",
            "max-dist",
            "max-dist-comm",
            "min-energy",
            "min-time",
            "monitor"
        ]
    );
    assert_eq!(set.get("max-dist").unwrap().objective, Objective::MaxDist);
    assert_eq!(set.get("edp").unwrap().constraints.max_slowdown, Some(0.10));
    assert_eq!(set.get("iso-ee").unwrap().constraints.min_ee, Some(0.5));
    let monitor = set.get("monitor").unwrap();
    assert!(monitor.monitor);
    assert!(!set.get("min-energy").unwrap().monitor);
    assert!(set.get("nope").is_none());
}

#[test]
fn a_site_adds_a_policy_without_code() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "night.yaml",
        "name: night\ndescription: cheap and slow\nobjective: min_ed2p\nconstraints:\n  energy_cap: 5MJ\n  power_cap: 1200.5\n  nodes: \"2-8\"\n",
    );
    let set = PolicySet::load(&[dir.path().to_path_buf(), shipped()]).unwrap();
    let p = set.get("night").unwrap();
    assert_eq!(p.objective, Objective::MinEd2p);
    assert_eq!(p.constraints.energy_cap_j, Some(5_000_000.0), "5MJ");
    assert_eq!(p.constraints.power_cap_w, Some(1200.5));
    assert_eq!(p.constraints.nodes, Some((2, 8)));
    assert_eq!(p.description, "cheap and slow");
    assert!(
        set.get("min-energy").is_some(),
        "the shipped ones are still there"
    );
}

#[test]
fn an_earlier_directory_overrides_a_shipped_policy() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "mine.yaml",
        "name: min-energy\nobjective: min_energy\nconstraints:\n  max_slowdown: 0.2\n",
    );
    let set = PolicySet::load(&[dir.path().to_path_buf(), shipped()]).unwrap();
    assert_eq!(
        set.get("min-energy").unwrap().constraints.max_slowdown,
        Some(0.2)
    );
    let set = PolicySet::load(&[shipped(), dir.path().to_path_buf()]).unwrap();
    assert_eq!(
        set.get("min-energy").unwrap().constraints.max_slowdown,
        None
    );
}

#[test]
fn the_same_name_twice_in_one_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", "name: x\nobjective: min_time\n");
    let second = write(dir.path(), "b.yml", "name: x\nobjective: min_energy\n");
    let e = PolicySet::load(&[dir.path().to_path_buf()])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with(&second.display().to_string()), "{e}");
    assert!(
        e.contains("name: invalid value 'x'") && e.contains("a.yaml"),
        "{e}"
    );
}

#[test]
fn a_bad_objective_names_file_line_column_key_value_and_the_valid_set() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "bad.yaml",
        "name: bad\ndescription: x\nobjective: fastest\n",
    );
    let e = Policy::load(&p).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}:3:12: objective: invalid value 'fastest': expected one of min_energy, min_time, max_dist, min_edp, min_ed2p, max_ee",
            p.display()
        )
    );
}

#[test]
fn bad_constraints_point_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "constraints:\n  energy_cap: -5\n",
            "5:15: constraints.energy_cap: invalid value '-5'",
        ),
        (
            "constraints:\n  power_cap: lots\n",
            "5:14: constraints.power_cap: invalid value 'lots'",
        ),
        (
            "constraints:\n  max_slowdown: -0.1\n",
            "5:17: constraints.max_slowdown: invalid value '-0.1'",
        ),
        (
            "constraints:\n  min_ee: 1.5\n",
            "5:11: constraints.min_ee: invalid value '1.5': expected a number in (0, 1]",
        ),
        (
            "constraints:\n  nodes: \"8-2\"\n",
            "5:10: constraints.nodes: invalid value '8-2'",
        ),
    ];
    for (i, (tail, want)) in cases.iter().enumerate() {
        let p = write(
            dir.path(),
            &format!("c{i}.yaml"),
            &format!("name: c\ndescription: d\nobjective: min_time\n{tail}"),
        );
        let e = Policy::load(&p).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}:{want}", p.display())),
            "{e}\nwanted {want}"
        );
    }
}

#[test]
fn an_unknown_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "k.yaml",
        "name: k\nobjective: min_time\nconstraints:\n  energy_limit: 5\n",
    );
    let e = Policy::load(&p).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}:4:", p.display())), "{e}");
    assert!(e.contains("energy_limit"), "{e}");
}

#[test]
fn a_missing_directory_is_named() {
    let e = PolicySet::load(&[PathBuf::from("/nonexistent/greenup-policies")])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("/nonexistent/greenup-policies: cannot read policy directory"),
        "{e}"
    );
}

#[test]
fn node_ranges() {
    assert_eq!(parse_range("2-8"), Some((2, 8)));
    assert_eq!(parse_range("4"), Some((4, 4)));
    assert_eq!(parse_range("0-3"), None);
    assert_eq!(parse_range("5-3"), None);
    assert_eq!(parse_range("x"), None);
}
