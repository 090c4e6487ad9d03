//! Sites built in code for the model and profile tests, and sweep tables and goals for
//! the optimizer's.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use greenup::model::{Choice, Config, NodeChoices, NodeSetting, NodeSlot, SweepTable};
use greenup::optimize::{Assessment, Goal, Limits, Objective};
use greenup::site::{
    DaemonSettings, DvfsSettings, Enforce, NodeType, OverBudget, PowerModel, Site,
};

/// Frequencies from `min` to `max` GHz in steps of `step`, rounded to 3 decimals.
pub fn steps(min: f64, max: f64, step: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut k = 0;
    loop {
        let f = ((min + k as f64 * step) * 1000.0).round() / 1000.0;
        if f > max + 1e-9 {
            break;
        }
        out.push(f);
        k += 1;
    }
    if out.last().is_none_or(|l| (l - max).abs() > 1e-6) {
        out.push(max);
    }
    out
}

/// A node type with power given at its maximum frequency and the cube law.
pub fn node_type(name: &str, freqs: Vec<f64>, dynamic_w: f64, static_w: f64) -> NodeType {
    NodeType {
        name: name.into(),
        freqs_ghz: freqs,
        power: PowerModel::AtMax {
            dynamic_w,
            static_w,
            gamma: 3.0,
        },
    }
}

/// A site with the given node types and nodes (name, type).
pub fn site(types: Vec<NodeType>, nodes: &[(&str, &str)]) -> Site {
    Site {
        path: PathBuf::from("test-site.yaml"),
        node_types: types.into_iter().map(|t| (t.name.clone(), t)).collect(),
        gpu_types: Default::default(),
        nodes: nodes
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect(),
        partitions: BTreeMap::new(),
        power_cap_w: None,
        job_energy_limit_j: None,
        default_policy: "monitor".into(),
        allowed_policies: vec![],
        policy_dirs: vec![],
        profile_dir: PathBuf::from("etc/profiles"),
        enforce: Enforce::Open,
        daemon: DaemonSettings {
            listen: "127.0.0.1:7470".into(),
            socket: PathBuf::from("/tmp/greenupd.sock"),
            store: PathBuf::from("/tmp/greenup.db"),
            slurm_user: "slurm".into(),
            admins: vec![],
            timeout_ms: 1000,
            grace_s: 60,
            metrics_listen: None,
            over_budget: OverBudget::Lowest,
            spool_dir: "/var/spool/greenup".into(),
            limits: Default::default(),
            slurm_energy: false,
        },
        dvfs: DvfsSettings {
            sysfs_root: PathBuf::from("/sys"),
            run_dir: PathBuf::from("/run/greenup"),
            per_core_shared: false,
            mpi_runtime: "/nonexistent/libgreenup_mpi.so".into(),
            measure_baselines: true,
            nvml_library: "libnvidia-ml.so.1".into(),
        },
        budgets: Vec::new(),
        baseline: None,
        power: Default::default(),
    }
}

/// The four node types of paper 004, Table I (power per node at maximum frequency).
pub fn table1_types() -> Vec<NodeType> {
    vec![
        node_type("type1", steps(1.2, 2.5, 0.1), 20.0, 4.0),
        node_type("type2", steps(1.6, 2.66, 0.133), 25.0, 5.0),
        node_type("type3", steps(1.2, 2.9, 0.1), 30.0, 6.0),
        node_type("type4", steps(1.6, 3.4, 0.133), 35.0, 7.0),
    ]
}

/// A site of `per_type` nodes of each Table I type, named n1, n2, ...
pub fn table1_site(per_type: usize) -> Site {
    let names: Vec<(String, String)> = (0..4 * per_type)
        .map(|i| (format!("n{}", i + 1), format!("type{}", i % 4 + 1)))
        .collect();
    let refs: Vec<(&str, &str)> = names
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    site(table1_types(), &refs)
}

/// The slots of the named nodes of `site`, each with its type's frequency list.
pub fn slots(site: &Site, names: &[&str]) -> Vec<NodeSlot> {
    names
        .iter()
        .map(|n| {
            let t = site.node_type_of(n).expect("test node has a type");
            NodeSlot {
                name: n.to_string(),
                node_type: t.name.clone(),
                freqs_ghz: t.freqs_ghz.clone(),
            }
        })
        .collect()
}

/// The named nodes of `site`, each at its type's maximum frequency.
pub fn at_max(site: &Site, names: &[&str]) -> Config {
    Config {
        nodes: names
            .iter()
            .map(|n| {
                let t = site.node_type_of(n).unwrap();
                NodeSetting {
                    gpu_mhz: None,
                    name: n.to_string(),
                    node_type: t.name.clone(),
                    freq_ghz: t.fmax(),
                }
            })
            .collect(),
    }
}

/// The repository's etc/profiles directory.
pub fn profiles_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("etc/profiles")
}

/// Relative closeness.
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-300)
}

/// Node `n{i}` of `node_type` in a sweep table: one choice per (compute_s, dynamic_j),
/// at 1.0, 1.1, ... GHz, and its static watts.
pub fn sweep_node(
    i: usize,
    node_type: String,
    choices: &[(f64, f64)],
    static_w: f64,
) -> NodeChoices {
    NodeChoices {
        name: format!("n{i}"),
        node_type,
        choices: choices
            .iter()
            .enumerate()
            .map(|(k, &(compute_s, dynamic_j))| Choice {
                wait_w: 0.0,
                gpu_mhz: None,
                freq_ghz: 1.0 + k as f64 * 0.1,
                compute_s,
                dynamic_j,
            })
            .collect(),
        static_w,
    }
}

/// Equal but for rounding: relatively within 1e-9, absolutely below 1.
pub fn rounding_close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The two results are equally good: same feasibility, same objective, same closeness.
pub fn same_quality(a: &Assessment, b: &Assessment) -> bool {
    a.feasible == b.feasible
        && rounding_close(a.value, b.value)
        && a.excess
            .iter()
            .zip(&b.excess)
            .all(|(x, y)| rounding_close(*x, *y))
}

/// Caps drawn around the table's all-max baseline, each present or not.
pub fn goal_for(t: &SweepTable, objective: Objective, draw: [(bool, f64); 4]) -> Goal {
    let (bt, be) = t.totals(&t.max_pick());
    let on = |(b, x): (bool, f64), v: f64| b.then_some(v * x);
    Goal {
        objective,
        limits: Limits {
            energy_cap_j: on(draw[0], be),
            power_cap_w: on(draw[1], be / bt),
            time_limit_s: on(draw[2], bt),
            max_slowdown: draw[3].0.then_some(draw[3].1 - 0.5),
        },
        baseline_time_s: bt,
        baseline_energy_j: be,
    }
}
