//! `greenup plan` end to end: the JSON shape, exit statuses 0/1/2, and one-line errors
//! that name the option and the value.

use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::Value;

fn repo(p: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(p)
        .display()
        .to_string()
}

fn greenup() -> Command {
    Command::cargo_bin("greenup").expect("greenup binary")
}

/// `greenup plan` on the example site and the Table I profile, plus `extra` options.
fn plan(extra: &[&str]) -> assert_cmd::assert::Assert {
    let site = repo("etc/greenup.yaml");
    let profile = repo("etc/profiles/hetero-table1.yaml");
    let mut args = vec!["plan", "--site", &site, "--profile", &profile];
    args.extend_from_slice(extra);
    greenup().args(&args).assert()
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k
}

fn stderr_line(a: &assert_cmd::assert::Assert) -> String {
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert_eq!(err.lines().count(), 1, "want one line, got: {err}");
    err.trim_end().to_string()
}

#[test]
fn json_has_exactly_the_plan_keys() {
    let a = plan(&[
        "--policy",
        "max-dist",
        "--nodes",
        "h[001-002,037-038,073-074,109-110]",
        "--json",
    ])
    .success();
    let v: Value = serde_json::from_slice(&a.get_output().stdout).expect("one JSON object");
    assert_eq!(
        keys(&v),
        [
            "baseline",
            "feasible",
            "node_count",
            "nodes",
            "objective",
            "policy",
            "predicted",
            "reason",
            "search"
        ]
    );
    for n in v["nodes"].as_array().unwrap() {
        assert_eq!(keys(n), ["freq_ghz", "name", "type"]);
    }
    assert_eq!(keys(&v["predicted"]), ["avg_power_w", "energy_j", "time_s"]);
    assert_eq!(keys(&v["baseline"]), ["avg_power_w", "energy_j", "time_s"]);
    assert_eq!(
        keys(&v["search"]),
        ["algorithm", "candidates", "elapsed_us"]
    );
    assert_eq!(v["policy"], "max-dist");
    assert_eq!(v["feasible"], true);
    assert_eq!(v["node_count"], 8);
    assert_eq!(v["search"]["algorithm"], "exact");
}

#[test]
fn baseline_matches_paper_004_by_hand() {
    // Two type1 nodes of Table I at 2.5 GHz, 1000 iterations of T_cp = 0.5 s, T_cm = 0.05 s:
    // T = 1000 (0.5 + 0.05) = 550 s; E = 2 (20 W * 0.5 s * 1000) + 2 * 4 W * 550 s = 24 400 J.
    let a = plan(&["--policy", "monitor", "--nodes", "h[001-002]", "--json"]).success();
    let v: Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
    let b = &v["baseline"];
    assert!((b["time_s"].as_f64().unwrap() - 550.0).abs() < 1e-9, "{b}");
    assert!(
        (b["energy_j"].as_f64().unwrap() - 24_400.0).abs() < 1e-6,
        "{b}"
    );
    assert_eq!(v["predicted"], v["baseline"], "monitor changes nothing");
    for n in v["nodes"].as_array().unwrap() {
        assert_eq!(n["freq_ghz"], 2.5);
        assert_eq!(n["type"], "type1");
    }
    // Table I was measured at f_max only: the reason says the time rests on that.
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.ends_with("; clock sensitivity: assumed compute-bound: measured at one clock only"),
        "{reason}"
    );
}

#[test]
fn algorithms_are_selectable() {
    for alg in ["exact", "paper", "brute"] {
        let a = plan(&[
            "--policy",
            "max-dist",
            "--nodes",
            "h[001,037,073,109]",
            "--algorithm",
            alg,
            "--json",
        ])
        .success();
        let v: Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
        assert_eq!(v["search"]["algorithm"], alg);
    }
}

#[test]
fn text_output_by_default() {
    let a = plan(&[
        "--policy",
        "min-time",
        "--node-count",
        "2",
        "--partition",
        "hetero",
        "--time-limit",
        "2:00:00",
    ])
    .success();
    let out = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(
        out.contains("policy min-time: feasible") && out.contains("baseline"),
        "{out}"
    );
}

#[test]
fn infeasible_exits_1_with_reason() {
    let a = plan(&[
        "--policy",
        "min-time",
        "--nodes",
        "h[001-002]",
        "--energy-cap",
        "1kJ",
        "--json",
    ])
    .code(1);
    let v: Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
    assert_eq!(v["feasible"], false);
    let line = stderr_line(&a);
    assert!(
        line.contains("infeasible") && line.contains("energy cap"),
        "{line}"
    );
}

#[test]
fn time_limit_below_any_plan_is_infeasible() {
    // The fastest two type1 nodes take 550 s; 5 minutes cannot be met.
    let a = plan(&[
        "--policy",
        "min-energy",
        "--nodes",
        "h[001-002]",
        "--time-limit",
        "5",
    ])
    .code(1);
    assert!(stderr_line(&a).contains("infeasible"));
}

#[test]
fn bad_option_values_exit_2_naming_option_and_value() {
    let cases: &[(&[&str], &str, &str)] = &[
        (&["--energy-cap", "20XJ"], "--energy-cap", "20XJ"),
        (&["--energy-cap", "-5MJ"], "--energy-cap", "-5MJ"),
        (&["--power-cap", "2kWh"], "--power-cap", "2kWh"),
        (&["--time-limit", "1:60:00"], "--time-limit", "1:60:00"),
        (&["--algorithm", "fast"], "--algorithm", "fast"),
        (&["--node-count", "0"], "--node-count", "0"),
        (&["--node-count", "8-2"], "--node-count", "8-2"),
        (&["--nodes", "h[2-1]"], "--nodes", "h[2-1]"),
        (&["--nodes", "zz9"], "--nodes", "zz9"),
        (&["--policy", "nope"], "--policy", "nope"),
        (&["--partition", "nope"], "--partition", "nope"),
    ];
    for (extra, option, value) in cases {
        let mut args: Vec<&str> = extra.to_vec();
        if !args.contains(&"--nodes") && !args.contains(&"--node-count") {
            args.extend(["--nodes", "h001"]);
        }
        if !args.contains(&"--policy") {
            args.extend(["--policy", "min-energy"]);
        }
        let a = plan(&args).code(2);
        let line = stderr_line(&a);
        assert!(
            line.contains(option) && line.contains(value),
            "{extra:?}: {line}"
        );
        assert!(a.get_output().stdout.is_empty(), "{extra:?}");
    }
}

#[test]
fn missing_node_choice_is_bad_input() {
    let line = stderr_line(&plan(&["--policy", "min-energy"]).code(2));
    assert!(
        line.contains("--nodes") && line.contains("--node-count"),
        "{line}"
    );
    let line = stderr_line(
        &plan(&[
            "--policy",
            "min-energy",
            "--nodes",
            "h001",
            "--node-count",
            "1",
        ])
        .code(2),
    );
    assert!(
        line.contains("--node-count") && line.contains("--nodes"),
        "{line}"
    );
}

#[test]
fn profile_without_the_nodes_types_is_bad_input() {
    let line = stderr_line(&plan(&["--policy", "min-energy", "--nodes", "n1"]).code(2));
    assert!(line.contains("fast"), "{line}");
}

#[test]
fn broken_site_names_file_line_column() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("greenup.yaml");
    std::fs::write(
        &site,
        "node_types:\n  a:\n    frequencies: [1.0, 2.0]\n    power: {dynamic_w: 10, static_w: 2}\npower_cap: 2kWh\n",
    )
    .unwrap();
    let a = greenup()
        .args([
            "plan",
            "--site",
            &site.display().to_string(),
            "--profile",
            "x",
            "--nodes",
            "n1",
        ])
        .assert()
        .code(2);
    let line = stderr_line(&a);
    assert!(
        line.contains(&format!("{}:5:12: power_cap", site.display())) && line.contains("2kWh"),
        "{line}"
    );
}

/// The test cluster's site config with its profiles, store and policies under `dir`.
fn site_in(dir: &std::path::Path) -> PathBuf {
    let text = std::fs::read_to_string(repo("tests/cluster/greenup.yaml")).unwrap();
    let text = text
        .lines()
        .map(|l| {
            if l.starts_with("profile_dir:") {
                format!("profile_dir: {}", dir.join("admin").display())
            } else if l.starts_with("policy_dirs:") {
                format!("policy_dirs: [{}]", repo("policies"))
            } else if l.trim_start().starts_with("store:") {
                format!("  store: {}", dir.join("greenup.db").display())
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let site = dir.join("greenup.yaml");
    std::fs::write(&site, text).unwrap();
    site
}

#[test]
fn a_profile_name_plans_from_the_version_a_job_would_use() {
    let dir = tempfile::tempdir().unwrap();
    let site = site_in(dir.path());
    let amdahl = |t: u32| {
        format!(
            "name: app\nversion: 1\ndescription: one node, compute only\namdahl:\n  t_c1_s: {t}\n  parallel_fraction: 0.9\n  comm:\n    law: log\n    coeff_s: 5\n  slowdown: \"fmax / f\"\n"
        )
    };
    std::fs::create_dir_all(dir.path().join("admin")).unwrap();
    std::fs::write(dir.path().join("admin/app.yaml"), amdahl(100)).unwrap();
    let time = || {
        let a = greenup()
            .args([
                "plan",
                "--site",
                &site.display().to_string(),
                "--profile",
                "app",
                "--policy",
                "min-time",
                "--nodes",
                "n1",
                "--json",
            ])
            .assert()
            .success();
        let v: Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
        v["predicted"]["time_s"].as_f64().unwrap()
    };
    // One node at its maximum frequency: T = t_c1 * fmax / f = t_c1, with no communication
    // (log 1 = 0).
    assert!((time() - 100.0).abs() < 1e-6, "{}", time());
    // greenupd refined it: the version in use is what a job would be decided with.
    let refined = dir.path().join("profiles/app");
    std::fs::create_dir_all(&refined).unwrap();
    std::fs::write(
        refined.join("v2.yaml"),
        amdahl(200).replace("version: 1", "version: 2"),
    )
    .unwrap();
    assert!((time() - 200.0).abs() < 1e-6, "{}", time());
}
