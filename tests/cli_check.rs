//! `greenup site check`, `profile check`, `policy list`, `model ee` and `meter` end to end.

mod daemon_support;

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

fn one_stderr_line(a: &assert_cmd::assert::Assert) -> String {
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert_eq!(err.lines().count(), 1, "want one line, got: {err}");
    err.trim_end().to_string()
}

#[test]
fn shipped_site_checks_ok() {
    let a = greenup()
        .args(["site", "check", &repo("etc/greenup.yaml")])
        .assert()
        .success();
    let out = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(
        out.contains(": ok") && out.contains("type4: 36 nodes h[109-144]"),
        "{out}"
    );
}

#[test]
fn site_licenses_writes_resources_yaml_only_under_hres() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("resources.yaml");
    // The shipped site holds its caps in greenupd's ledger: nothing is written.
    let a = greenup()
        .args(["site", "licenses", &repo("etc/greenup.yaml"), "--resources"])
        .arg(&out)
        .assert()
        .failure();
    let line = one_stderr_line(&a);
    assert!(
        line.contains("--resources")
            && line.contains("power.enforce: hres")
            && line.contains("ledger"),
        "{line}"
    );
    assert!(!out.exists());
    // Under hres it is written, and stdout keeps only the partitions' Licenses= line.
    let text =
        std::fs::read_to_string(repo("etc/greenup.yaml")).unwrap() + "power: {enforce: hres}\n";
    let site = dir.path().join("hres.yaml");
    std::fs::write(&site, text).unwrap();
    let a = greenup()
        .args(["site", "licenses"])
        .arg(&site)
        .arg("--resources")
        .arg(&out)
        .assert()
        .success();
    let said = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    assert!(
        said.starts_with("Licenses=greenup_w_") && said.lines().count() == 1,
        "{said}"
    );
    let yaml = std::fs::read_to_string(&out).unwrap();
    assert!(
        yaml.contains("- resource: greenup_w\n  mode: MODE_3"),
        "{yaml}"
    );
}

#[test]
fn broken_site_names_file_line_column_key_value() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("enforce: lenient\n", "7:10: enforce", "lenient"),
        ("nodes:\n  b: n1\n", "7:6: nodes.b", "node type"),
        ("power_cap: 0\n", "7:12: power_cap", "a power above 0"),
        (
            "daemon:\n  listen: nowhere\n",
            "8:11: daemon.listen",
            "HOST:PORT",
        ),
    ];
    let base = "node_types:\n  a:\n    frequencies: {min: 1.0, max: 2.0, step: 0.5}\n    power: {dynamic_w: 10, static_w: 2}\nnodes:\n  a: n[1-2]\n";
    for (tail, at, word) in cases {
        let file = dir.path().join("site.yaml");
        let text = if tail.starts_with("nodes:") {
            format!("{base}{}", &tail[7..])
        } else {
            format!("{base}{tail}")
        };
        std::fs::write(&file, text).unwrap();
        let a = greenup()
            .args(["site", "check", &file.display().to_string()])
            .assert()
            .code(2);
        let line = one_stderr_line(&a);
        assert!(
            line.contains(&format!("{}:{at}", file.display())) && line.contains(word),
            "{tail}: {line}"
        );
    }
}

#[test]
fn site_naming_an_unknown_policy_fails_check() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("site.yaml");
    let text = format!(
        "node_types:\n  a:\n    frequencies: [1.0]\n    power: {{dynamic_w: 1, static_w: 1}}\npolicy_dirs: [{}]\ndefault_policy: greenest\n",
        repo("policies")
    );
    std::fs::write(&file, text).unwrap();
    let line = one_stderr_line(
        &greenup()
            .args(["site", "check", &file.display().to_string()])
            .assert()
            .code(2),
    );
    assert!(
        line.contains("default_policy") && line.contains("greenest") && line.contains("min-energy"),
        "{line}"
    );
}

#[test]
fn missing_site_file_is_bad_input() {
    let line = one_stderr_line(
        &greenup()
            .args(["site", "check", "/nonexistent/g.yaml"])
            .assert()
            .code(2),
    );
    assert!(line.contains("/nonexistent/g.yaml"), "{line}");
}

#[test]
fn profile_check() {
    greenup()
        .args(["profile", "check", &repo("etc/profiles/ep.yaml")])
        .assert()
        .success();
    greenup()
        .args([
            "profile",
            "check",
            &repo("etc/profiles/hetero-table1.yaml"),
            "--site",
            &repo("etc/greenup.yaml"),
        ])
        .assert()
        .success();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, "name: bad\nversion: 1\nhetero:\n  iterations: ten\n").unwrap();
    let line = one_stderr_line(
        &greenup()
            .args(["profile", "check", &file.display().to_string()])
            .assert()
            .code(2),
    );
    assert!(
        line.starts_with(&format!("greenup: {}:4:", file.display())),
        "{line}"
    );
}

#[test]
fn policy_list_shows_allowed_policies() {
    let a = greenup()
        .args(["policy", "list", "--site", &repo("etc/greenup.yaml")])
        .assert()
        .success();
    let out = String::from_utf8_lossy(&a.get_output().stdout).to_string();
    for p in [
        "monitor (default)",
        "min-energy",
        "min-time",
        "max-dist",
        "edp",
        "iso-ee",
    ] {
        assert!(out.contains(p), "{p} missing: {out}");
    }
}

#[test]
fn model_ee_rows_per_p_and_f() {
    let a = greenup()
        .args([
            "model",
            "ee",
            "--profile",
            &repo("etc/profiles/ep.yaml"),
            "--n",
            "1e6",
            "--p",
            "1,2,4-5",
            "--f",
            "1.6,2.8",
        ])
        .arg("--json")
        .assert()
        .success();
    let rows: Vec<Value> = serde_json::from_slice(&a.get_output().stdout).unwrap();
    assert_eq!(rows.len(), 8);
    let pf: Vec<(u64, f64)> = rows
        .iter()
        .map(|r| (r["p"].as_u64().unwrap(), r["f_ghz"].as_f64().unwrap()))
        .collect();
    assert_eq!(pf[..3], [(1, 1.6), (1, 2.8), (2, 1.6)]);
    assert_eq!(pf[7], (5, 2.8));
    for r in &rows {
        let mut k: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        k.sort_unstable();
        assert_eq!(
            k,
            ["e1_j", "ee", "eef", "ep_j", "f_ghz", "p", "t1_s", "tp_s"]
        );
        // Definitions of paper 000: EE = E1/Ep and EEF = (Ep - E1)/E1, so EE = 1/(1 + EEF).
        let (ee, eef) = (r["ee"].as_f64().unwrap(), r["eef"].as_f64().unwrap());
        assert!((ee - 1.0 / (1.0 + eef)).abs() < 1e-12, "{r}");
    }
}

#[test]
fn model_ee_bad_input() {
    let ep = repo("etc/profiles/ep.yaml");
    for (opt, val) in [("--p", "0,2"), ("--f", "fast"), ("--n", "-1")] {
        let mut args = vec![
            "model",
            "ee",
            "--profile",
            ep.as_str(),
            "--n",
            "10",
            "--p",
            "1",
            "--f",
            "2",
        ];
        let i = args.iter().position(|a| *a == opt).unwrap();
        args[i + 1] = val;
        let line = one_stderr_line(&greenup().args(&args).assert().code(2));
        assert!(line.contains(opt) && line.contains(val), "{line}");
    }
    let line = one_stderr_line(
        &greenup()
            .args([
                "model",
                "ee",
                "--profile",
                &repo("etc/profiles/hetero-table1.yaml"),
                "--n",
                "1",
                "--p",
                "1",
                "--f",
                "2",
            ])
            .assert()
            .code(2),
    );
    assert!(line.contains("iso_energy"), "{line}");
}

#[test]
fn help_and_version_exit_0() {
    greenup().arg("--help").assert().success();
    greenup().arg("--version").assert().success();
    greenup().args(["plan", "--help"]).assert().success();
}

#[test]
fn unknown_command_is_bad_input() {
    let line = one_stderr_line(&greenup().arg("frobnicate").assert().code(2));
    assert!(line.contains("frobnicate"), "{line}");
}

#[test]
fn meter_counts_every_wrap_of_a_running_job_and_stops_at_its_end() {
    use greenup_platform::dvfs::job::{NodePaths, end, tally_path};
    use greenup_platform::meter::Energy;
    use std::time::{Duration, Instant};
    let t = tempfile::tempdir().unwrap();
    let paths = NodePaths {
        sysfs_root: t.path().join("sys"),
        run_dir: t.path().join("run"),
    };
    // A 1 J counter: it wraps at 1_000_000 uJ.
    daemon_support::rapl_tree(&paths.sysfs_root, 0, 1_000_000);
    daemon_support::begin_shared(&paths, 77, "n1");
    let mut meter = std::process::Command::new(env!("CARGO_BIN_EXE_greenup"))
        .args([
            "meter",
            "77",
            "--node",
            "n1",
            "--every-at-most",
            "1",
            "--run-dir",
        ])
        .arg(&paths.run_dir)
        .arg("--sysfs-root")
        .arg(&paths.sysfs_root)
        .spawn()
        .unwrap();
    // Advance the counter by 0.6 J at a time, three times, each time waiting until the
    // meter has counted it: 1.8 J in all, where the last value alone (0.8 J) shows less.
    let tally = tally_path(&paths.run_dir, 77, "n1");
    // The counter value of the meter's last reading.
    let last_read = || {
        let text = std::fs::read_to_string(&tally).ok()?;
        serde_json::from_str::<Value>(&text).ok()?["last"]["zones"][0]["energy_uj"].as_u64()
    };
    for value in [600_000u64, 200_000, 800_000] {
        daemon_support::set_counter(&paths.sysfs_root, value);
        let waited = Instant::now();
        while last_read() != Some(value) {
            assert!(
                waited.elapsed() < Duration::from_secs(20),
                "the meter did not read {value}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let out = end(&paths, 77, "n1").unwrap().unwrap();
    assert_eq!(out.energy, Energy::Measured { joules: 1.8 });
    // The job has ended here: the meter stops by itself, with success.
    assert!(daemon_support::wait_exit(&mut meter).success());
    assert!(!paths.run_dir.join("77").exists());
}

#[test]
fn meter_bad_input_is_one_line() {
    let t = tempfile::tempdir().unwrap();
    let run = t.path().display().to_string();
    let a = greenup()
        .args(["meter", "5", "--node", "n9", "--run-dir", &run])
        .assert()
        .code(2);
    assert_eq!(
        one_stderr_line(&a),
        format!(
            "greenup: {run}: no saved record of job 5 for node 'n9': greenup meter counts a job its prolog has started (see --run-dir and --node)"
        )
    );
    let a = greenup()
        .args(["meter", "5", "--node", "n9", "--every-at-most", "0"])
        .assert()
        .code(2);
    let line = one_stderr_line(&a);
    assert!(
        line.contains("--every-at-most") && line.contains("'0'") && line.contains("1..=3600"),
        "{line}"
    );
}

#[test]
fn model_ee_of_a_machine_that_names_a_node_type_reads_the_site() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("greenup.yaml");
    // rome: 72 W static, 288 W dynamic at 2.5 GHz, cube law.
    std::fs::write(
        &site,
        "node_types:\n  rome:\n    frequencies: [1.5, 2.5]\n    power: {dynamic_w: 288, static_w: 72}\nnodes:\n  rome: \"r[1-4]\"\n",
    )
    .unwrap();
    let prof = dir.path().join("typed.yaml");
    std::fs::write(
        &prof,
        "name: typed\nversion: 1\niso_energy:\n  n: 1\n  machine:\n    t_c: \"1e-9 / f\"\n    t_m: 0\n    t_msg: 1e-3\n    t_byte: 0\n    power: rome\n    wait_share: 0.5\n  application:\n    alpha: 1\n    w_c: 1e10\n    w_m: 0\n    w_co: 0\n    w_mo: 0\n    m: \"100 * p\"\n    b: 0\n",
    )
    .unwrap();
    let a = greenup()
        .args(["model", "ee", "--profile", prof.to_str().unwrap()])
        .args([
            "--n",
            "1",
            "--p",
            "4",
            "--f",
            "1.5",
            "--json",
            "--site-only",
        ])
        .args(["--site", site.to_str().unwrap()])
        .assert()
        .success();
    let rows: Vec<Value> = serde_json::from_slice(&a.get_output().stdout).unwrap();
    // Tc = 1e10 cycles / 1.5 GHz, 0.4 s in MPI over 4 nodes; P_idle 72 W and
    // dP_c = 288 (1.5 / 2.5)^3 = 62.208 W: Ep = 72 Tp + dP_c Tc + 0.5 dP_c 0.4.
    let (tc, comm, dp) = (10.0 / 1.5, 0.4, 62.208);
    let want = 72.0 * (tc + comm) + dp * tc + 0.5 * dp * comm;
    let got = rows[0]["ep_j"].as_f64().unwrap();
    assert!((got / want - 1.0).abs() < 1e-12, "{got} vs {want}");
    // A site without the type: one line naming it and what the site has.
    std::fs::write(
        &site,
        "node_types:\n  milan:\n    frequencies: [2.0]\n    power: {dynamic_w: 200, static_w: 80}\nnodes:\n  milan: \"m1\"\n",
    )
    .unwrap();
    let a = greenup()
        .args(["model", "ee", "--profile", prof.to_str().unwrap()])
        .args(["--n", "1", "--p", "4", "--f", "1.5", "--site-only"])
        .args(["--site", site.to_str().unwrap()])
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&a.get_output().stderr).to_string();
    assert!(
        err.contains("node type 'rome' is not in the site config (it has: milan)"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
