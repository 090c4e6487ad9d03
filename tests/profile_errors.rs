//! Bad profiles: one line naming file:line:column, the key, the value and what is valid.

use std::path::Path;

use greenup::profile::Profile;

const GOOD: &str = "name: app
version: 1
hetero:
  iterations: 100
  node_types:
    type1: { t_cp_s: 0.5, t_cm_s: 0.05 }
";

fn err(text: &str) -> String {
    let e = Profile::from_str(Path::new("/etc/greenup/profiles/app.yaml"), text).unwrap_err();
    let s = e.to_string();
    assert_eq!(s.lines().count(), 1, "one line: {s}");
    s
}

fn has(s: &str, parts: &[&str]) {
    for p in parts {
        assert!(s.contains(p), "'{p}' missing from: {s}");
    }
}

#[test]
fn good_profile_loads() {
    Profile::from_str(Path::new("app.yaml"), GOOD).unwrap();
}

#[test]
fn unknown_key() {
    let s = err(&GOOD.replace("version: 1", "version: 1\nmodel: fast"));
    println!("{s}");
    has(
        &s,
        &[
            "/etc/greenup/profiles/app.yaml:3:",
            "model",
            "name",
            "hetero",
        ],
    );
}

#[test]
fn unknown_nested_key() {
    let s = err(&GOOD.replace("t_cm_s: 0.05", "t_cm_s: 0.05, t_io_s: 1"));
    println!("{s}");
    has(&s, &["app.yaml:6:", "t_io_s", "t_cp_s"]);
}

#[test]
fn a_hetero_type_without_t_mem_still_loads_and_one_with_it_too() {
    // Profiles written before clock sensitivity existed: compute-bound, as before.
    let p = Profile::from_str(Path::new("app.yaml"), GOOD).unwrap();
    let mut sites =
        greenup::site::load(concat!(env!("CARGO_MANIFEST_DIR"), "/etc/greenup.yaml")).unwrap();
    let any = sites.node_types.values().next().unwrap().clone();
    sites.node_types.insert("type1".into(), any);
    let t = &p.hetero_model(&sites).unwrap().types["type1"];
    assert_eq!(t.t_mem_s, None);
    let with = GOOD.replace(
        "t_cm_s: 0.05 }",
        "t_cm_s: 0.05, t_mem_s: 0.2, t_mem_fit: { clocks: 2, samples: 4, rms_error: 0.01, source: refine } }",
    );
    let p = Profile::from_str(Path::new("app.yaml"), &with).unwrap();
    let t = &p.hetero_model(&sites).unwrap().types["type1"];
    assert_eq!(t.t_mem_s, Some(0.2));
    assert_eq!(t.t_mem_fit.as_ref().map(|f| f.clocks), Some(2));
}

#[test]
fn negative_or_nan_t_mem_is_refused() {
    for (bad, shown) in [("-0.2", "'-0.2'"), ("fast", "'fast'")] {
        let s = err(&GOOD.replace("t_cm_s: 0.05", &format!("t_cm_s: 0.05, t_mem_s: {bad}")));
        println!("{s}");
        has(
            &s,
            &[
                "/etc/greenup/profiles/app.yaml:6:50:",
                "hetero.node_types.type1.t_mem_s",
                shown,
                "expected a finite number >= 0",
            ],
        );
    }
    // The YAML reader refuses NaN before any key is checked: the line names the place
    // (the t_mem_s value at 6:50), the value and the rule.
    let s = err(&GOOD.replace("t_cm_s: 0.05", "t_cm_s: 0.05, t_mem_s: .nan"));
    println!("{s}");
    assert_eq!(
        s,
        "/etc/greenup/profiles/app.yaml:6:50: invalid value '.nan': expected a finite number"
    );
    let s = err(&GOOD.replace(
        "t_cm_s: 0.05",
        "t_cm_s: 0.05, t_mem_s: 0.1, t_mem_fit: { clocks: 1, samples: 4, rms_error: 0, source: x }",
    ));
    println!("{s}");
    has(
        &s,
        &[
            "app.yaml:6:",
            "hetero.node_types.type1.t_mem_fit.clocks",
            "'1'",
            "a whole number >= 2",
        ],
    );
}

#[test]
fn negative_time() {
    let s = err(&GOOD.replace("t_cp_s: 0.5", "t_cp_s: -0.5"));
    println!("{s}");
    has(
        &s,
        &[
            "app.yaml:6:",
            "hetero.node_types.type1.t_cp_s",
            "'-0.5'",
            ">= 0",
        ],
    );
}

#[test]
fn bad_expression_variable() {
    let text = "name: ep\nversion: 1\niso_energy:\n  n: 1000\n  machine:\n    t_c: \"11.9e-10 / g\"\n    t_m: 1.12e-7\n    t_msg: 2.53e-5\n    t_byte: 1.82e-8\n    p_idle: \"18.9 * f^2\"\n    dp_c: \"2.67 * f^2\"\n    dp_m: \"1.52 * f^2\"\n  application:\n    alpha: 0.93\n    w_c: \"109.4 * n\"\n    w_m: \"1.03e-6 * n\"\n    w_co: 0\n    w_mo: \"6.7e-7 * n * (p - 1)\"\n    m: 0\n    b: 0\n";
    let s = err(text);
    println!("{s}");
    has(
        &s,
        &[
            "app.yaml:6:10",
            "iso_energy.machine.t_c",
            "'11.9e-10 / g'",
            "'g'",
            "in f",
        ],
    );
    // An application expression may use n and p but not f.
    let s = err(&text
        .replace("\"11.9e-10 / g\"", "\"11.9e-10 / f\"")
        .replace("\"109.4 * n\"", "\"109.4 * n * f\""));
    has(
        &s,
        &["app.yaml:15:", "iso_energy.application.w_c", "'f'", "n, p"],
    );
}

#[test]
fn iso_machine_watts_named_twice_or_not_at_all_and_a_bad_waiting_share() {
    let base = "name: ep\nversion: 1\niso_energy:\n  n: 1\n  machine:\n    t_c: \"1e-9 / f\"\n    t_m: 0\n    t_msg: 1e-3\n    t_byte: 0\n    power: rome\n    wait_share: 0.5\n  application:\n    alpha: 1\n    w_c: 1e10\n    w_m: 0\n    w_co: 0\n    w_mo: 0\n    m: p\n    b: 0\n";
    // A node type's watts and the profile's own together: which one is meant?
    let s = err(&base.replace(
        "    power: rome\n",
        "    power: rome\n    p_idle: 72\n    dp_c: 288\n    dp_m: 0\n",
    ));
    println!("{s}");
    has(
        &s,
        &[
            "app.yaml:10:",
            "iso_energy.machine.power",
            "'rome'",
            "not both",
        ],
    );
    // Neither: the machine has no watts.
    let s = err(&base.replace("    power: rome\n", ""));
    println!("{s}");
    has(
        &s,
        &[
            "app.yaml:6:",
            "iso_energy.machine",
            "p_idle, dp_c and dp_m",
            "power: a node type",
        ],
    );
    assert_eq!(s.lines().count(), 1, "{s}");
    // A type's name is a word.
    let s = err(&base.replace("power: rome", "power: [rome]"));
    has(
        &s,
        &["app.yaml:10:", "iso_energy.machine.power", "node types"],
    );
    for bad in ["1.5", "-0.1", "polls"] {
        let s = err(&base.replace("wait_share: 0.5", &format!("wait_share: {bad}")));
        println!("{s}");
        has(
            &s,
            &[
                "app.yaml:11:",
                "iso_energy.machine.wait_share",
                &format!("'{bad}'"),
                "a number from 0 to 1",
            ],
        );
    }
}

#[test]
fn node_counts_that_name_no_count_get_one_line() {
    let base = "name: is\nversion: 1\nnode_counts: powers_of_two\namdahl:\n  t_c1_s: 100\n  parallel_fraction: 0.9\n  comm: {law: linear, coeff_s: 1}\n";
    // What is valid loads: the words, a list, one count.
    for ok in ["powers_of_two", "squares", "\"8, 16, 32\"", "16"] {
        Profile::from_str(
            Path::new("/etc/greenup/profiles/app.yaml"),
            &base.replace("powers_of_two", ok),
        )
        .unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
    for bad in [
        "powers of two",
        "\"8, x\"",
        "0",
        "-4",
        "2.5",
        "\"8,,16\"",
        "[8, 16]",
    ] {
        let s = err(&base.replace("powers_of_two", bad));
        println!("{s}");
        has(
            &s,
            &[
                "app.yaml:3:",
                "node_counts",
                "powers_of_two, squares, or whole numbers >= 1 separated by commas",
            ],
        );
    }
}

#[test]
fn missing_model() {
    let s = err("name: app\nversion: 1\ndescription: nothing here\n");
    println!("{s}");
    has(
        &s,
        &[
            "app.yaml:1:1",
            "model section",
            "iso_energy",
            "roofline",
            "amdahl",
            "hetero",
        ],
    );
}

#[test]
fn wrong_type() {
    let s = err(&GOOD.replace("iterations: 100", "iterations: lots"));
    println!("{s}");
    has(&s, &["app.yaml:4:", "lots"]);
    let s = err(&GOOD.replace("version: 1", "version: [1]"));
    println!("{s}");
    has(&s, &["app.yaml:2:"]);
}

#[test]
fn bad_law_and_fraction() {
    let text = "name: app\nversion: 1\namdahl:\n  t_c1_s: 100\n  parallel_fraction: 1.5\n  comm: { law: cubic, coeff_s: 1 }\n";
    let s = err(text);
    println!("{s}");
    has(
        &s,
        &[
            "app.yaml:5:22",
            "amdahl.parallel_fraction",
            "'1.5'",
            "0 to 1",
        ],
    );
    let s = err(&text.replace("1.5", "0.5"));
    has(
        &s,
        &[
            "app.yaml:6:",
            "amdahl.comm.law",
            "'cubic'",
            "log, linear, quadratic",
        ],
    );
}

#[test]
fn prefer_must_name_a_present_section() {
    let s = err(&GOOD.replace("version: 1", "version: 1\nprefer: roofline"));
    println!("{s}");
    has(&s, &["app.yaml:3:9", "prefer", "'roofline'", "hetero"]);
}

#[test]
fn duplicate_key() {
    let s = err(&GOOD.replace("version: 1", "version: 1\nversion: 2"));
    println!("{s}");
    has(&s, &["app.yaml:3:", "version"]);
}

#[test]
fn version_zero_and_bad_name() {
    has(
        &err(&GOOD.replace("version: 1", "version: 0")),
        &["app.yaml:2:10", "version", "'0'", ">= 1"],
    );
    has(
        &err(&GOOD.replace("name: app", "name: \"my app\"")),
        &["app.yaml:1:7", "name", "'my app'"],
    );
}

#[test]
fn empty_and_unreadable() {
    let s = err("");
    println!("{s}");
    has(&s, &["app.yaml"]);
    let e = Profile::load(Path::new("/nonexistent/greenup/p.yaml"))
        .unwrap_err()
        .to_string();
    has(&e, &["/nonexistent/greenup/p.yaml", "cannot read"]);
}

#[test]
fn find_refuses_paths_and_names_the_option() {
    use greenup::input::Origin;
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("etc/profiles");
    let opt = || Origin::Option("--energy-profile".into());
    assert_eq!(
        Profile::find(&dir, "lammps", opt()).unwrap().name(),
        "lammps"
    );
    for bad in ["../../etc/passwd", "/etc/passwd", ".hidden", "", "a/b"] {
        let s = Profile::find(&dir, bad, opt()).unwrap_err().to_string();
        has(&s, &["option --energy-profile", "profile"]);
    }
    let s = Profile::find(&dir, "nosuch", opt())
        .unwrap_err()
        .to_string();
    has(&s, &["option --energy-profile", "'nosuch'", "etc/profiles"]);
}

#[test]
fn hetero_nodes_must_be_a_whole_number_of_nodes() {
    for bad in ["0", "2.5", "-4"] {
        let s = err(&GOOD.replace(
            "  iterations: 100",
            &format!("  iterations: 100\n  nodes: {bad}"),
        ));
        println!("{s}");
        has(
            &s,
            &["app.yaml:5:", "hetero.nodes", bad, "a whole number >= 1"],
        );
    }
    let ok = GOOD.replace("  iterations: 100", "  iterations: 100\n  nodes: 4");
    let p = Profile::from_str(Path::new("app.yaml"), &ok).unwrap();
    assert_eq!(p.hetero_nodes(), Some(4));
}

const GPU: &str = "gpu:
  nodes: 2
  node_types:
    type1: { busy_s: 30, clock_mhz: 1372, power_w: 697 }
";

#[test]
fn a_gpu_section_loads_and_each_bad_gpu_value_is_one_line_at_its_place() {
    let good = format!("{GOOD}{GPU}");
    let p = Profile::from_str(Path::new("app.yaml"), &good).unwrap();
    let t = p.gpu_busy().unwrap().types["type1"];
    assert_eq!(
        (t.busy_s, t.clock_mhz, t.power_w),
        (30.0, Some(1372), Some(697.0))
    );
    for (from, to, place, parts) in [
        (
            "busy_s: 30",
            "busy_s: -1",
            ":10:",
            &["gpu.node_types.type1.busy_s", "'-1'", ">= 0"][..],
        ),
        (
            "clock_mhz: 1372",
            "clock_mhz: 13.5",
            ":10:",
            &["gpu.node_types.type1.clock_mhz", "'13.5'", "whole number"][..],
        ),
        (
            "power_w: 697",
            "power_w: lots",
            ":10:",
            &["gpu.node_types.type1.power_w", "'lots'"][..],
        ),
        (
            "nodes: 2",
            "nodes: 0",
            ":8:",
            &["gpu.nodes", "'0'", "whole number >= 1"][..],
        ),
        (
            "busy_s: 30,",
            "busy: 30,",
            ":10:",
            &["unknown field `busy`", "busy_s"][..],
        ),
    ] {
        let s = err(&good.replace(from, to));
        has(&s, &[place]);
        has(&s, parts);
    }
    let s = err(&good.replace(
        "  node_types:\n    type1: { busy_s: 30, clock_mhz: 1372, power_w: 697 }\n",
        "  node_types: {}\n",
    ));
    has(&s, &["gpu.node_types", "at least one node type with GPUs"]);
}

#[test]
fn hetero_steps_and_model_choice_are_checked_one_line_each() {
    let with = |tail: &str| format!("{GOOD}  steps:\n{tail}");
    let ok = with(
        "    - { steps: 3, share: { type1: 1.0 } }\n  model_choice: { winner: steps, max_model_error: 0.1, step_model_error: 0.02, runs: 4 }\n",
    );
    Profile::from_str(Path::new("app.yaml"), &ok).unwrap();
    let s = err(&with(
        "    - { steps: 3, share: { type1: 1.0, type9: 0.5 } }\n",
    ));
    has(
        &s,
        &[
            "app.yaml:8:",
            "hetero.steps[0].share.type9",
            "a node type of this hetero section (type1)",
        ],
    );
    let s = err(&with("    - { steps: 3, share: { type1: -0.5 } }\n"));
    has(
        &s,
        &[
            "hetero.steps[0].share.type1",
            "-0.5",
            "a finite number >= 0",
        ],
    );
    // NaN is refused by the YAML reader, at its place, like every number of a profile.
    let s = err(&with("    - { steps: 3, share: { type1: .nan } }\n"));
    has(&s, &["app.yaml:8:35:", "'.nan'", "a finite number"]);
    let s = err(&with("    - { steps: 0, share: { type1: 1 } }\n"));
    has(&s, &["hetero.steps[0].steps", "a whole number >= 1"]);
    let s = err(&with("    - { steps: 2, share: { type1: 0 } }\n"));
    has(&s, &["hetero.steps", "a share > 0 for every node type"]);
    let s = err(&ok.replace("winner: steps", "winner: best"));
    has(
        &s,
        &["hetero.model_choice.winner", "'best'", "max or steps"],
    );
    let s = err(&ok.replace("step_model_error: 0.02", "step_model_error: -1"));
    has(
        &s,
        &[
            "hetero.model_choice.step_model_error",
            "a finite number >= 0",
        ],
    );
    let s = err(&format!(
        "{GOOD}  model_choice: {{ winner: steps, max_model_error: 0.1, step_model_error: 0.02, runs: 4 }}\n"
    ));
    has(&s, &["hetero.model_choice.winner", "add a steps: list"]);
}

#[test]
fn the_steps_example_of_profiles_md_loads() {
    let doc = include_str!("../docs/profiles.md");
    let start = doc.find("```yaml\nhetero:\n  iterations: 1000\n  node_types:\n    type1: { t_cp_s: 0.5, t_cm_s: 0.05 }\n    type4").unwrap();
    let block = &doc[start + 8..];
    let block = &block[..block.find("```").unwrap()];
    let text = format!("name: hpl\nversion: 1\n{block}");
    let p = Profile::from_str(Path::new("hpl.yaml"), &text).unwrap();
    assert_eq!(p.hetero_steps().unwrap().classes.len(), 2);
}

#[test]
fn hetero_step_windows_are_checked_one_line_each() {
    let with = |tail: &str| format!("{GOOD}  step_windows:\n{tail}");
    let entry = |w: &str, share: &str| {
        format!(
            "    - window_s: {w}\n      classes:\n        - {{ steps: 3, share: {{ {share} }} }}\n"
        )
    };
    let ok = with(&format!(
        "{}{}",
        entry("0.04", "type1: 1.0"),
        entry("0.01", "type1: 1.0")
    ));
    let p = Profile::from_str(Path::new("app.yaml"), &ok).unwrap();
    // Listed in any order, returned shortest first.
    let w: Vec<f64> = p.hetero_step_windows().iter().map(|x| x.0).collect();
    assert_eq!(w, [0.01, 0.04]);
    assert!(p.hetero_steps().is_none());
    for bad in ["0", "-0.01", "fast"] {
        let s = err(&with(&entry(bad, "type1: 1.0")));
        has(
            &s,
            &[
                "app.yaml:8:",
                "hetero.step_windows[0].window_s",
                "a finite number > 0",
            ],
        );
    }
    let s = err(&with(&entry(".inf", "type1: 1.0")));
    has(&s, &["app.yaml:8:", "a finite number"]);
    let s = err(&with(&format!(
        "{}{}",
        entry("0.01", "type1: 1.0"),
        entry("0.01", "type1: 1.0")
    )));
    has(
        &s,
        &[
            "app.yaml:11:",
            "hetero.step_windows[1].window_s",
            "a window length not already listed",
        ],
    );
    let s = err(&with(&entry("0.01", "type1: 1.0, type9: 0.5")));
    has(
        &s,
        &[
            "app.yaml:10:",
            "hetero.step_windows[0].classes[0].share.type9",
            "a node type of this hetero section (type1)",
        ],
    );
    let s = err(&with(&entry("0.01", "type1: -1")));
    has(
        &s,
        &[
            "hetero.step_windows[0].classes[0].share.type1",
            "a finite number >= 0",
        ],
    );
    let s = err(&with(&entry("0.01", "type1: 0")));
    has(
        &s,
        &[
            "hetero.step_windows[0].classes",
            "a share > 0 for every node type",
        ],
    );
    let s = err(&with("    - { window_s: 0.01, classes: [] }\n"));
    has(
        &s,
        &["hetero.step_windows[0].classes", "at least one step class"],
    );
    let s = err(&format!("{GOOD}  step_windows: []\n"));
    has(&s, &["hetero.step_windows", "at least one window length"]);
    let s = err(&with("    - { window_s: 0.01 }\n"));
    has(&s, &["app.yaml:8:", "classes"]);
    // model_choice.window_s, written by refinement, is a length too.
    let choice = |w: &str| {
        format!(
            "{GOOD}  steps:\n    - {{ steps: 3, share: {{ type1: 1.0 }} }}\n  model_choice: {{ winner: steps, max_model_error: 0.1, step_model_error: 0.02, runs: 4, window_s: {w} }}\n"
        )
    };
    Profile::from_str(Path::new("app.yaml"), &choice("0.08")).unwrap();
    let s = err(&choice("0"));
    has(
        &s,
        &["hetero.model_choice.window_s", "'0'", "a finite number > 0"],
    );
}

#[test]
fn a_lead_loads_and_one_below_1_is_refused() {
    let mut sites =
        greenup::site::load(concat!(env!("CARGO_MANIFEST_DIR"), "/etc/greenup.yaml")).unwrap();
    let any = sites.node_types.values().next().unwrap().clone();
    sites.node_types.insert("type1".into(), any);
    let with = GOOD.replace("t_cm_s: 0.05 }", "t_cm_s: 0.05, lead: 1.45 }");
    let p = Profile::from_str(Path::new("app.yaml"), &with).unwrap();
    assert_eq!(
        p.hetero_model(&sites).unwrap().types["type1"].lead,
        Some(1.45)
    );
    // A slowest node faster than the mean is no slowest node.
    for (bad, shown) in [("0.9", "'0.9'"), ("-1", "'-1'"), ("slow", "'slow'")] {
        let s = err(&GOOD.replace("t_cm_s: 0.05", &format!("t_cm_s: 0.05, lead: {bad}")));
        println!("{s}");
        has(
            &s,
            &[
                "/etc/greenup/profiles/app.yaml:6:",
                "hetero.node_types.type1.lead",
                shown,
                "expected a finite number >= 1",
            ],
        );
    }
}

#[test]
fn a_wait_share_loads_and_one_outside_0_to_1_is_refused() {
    let mut sites =
        greenup::site::load(concat!(env!("CARGO_MANIFEST_DIR"), "/etc/greenup.yaml")).unwrap();
    let any = sites.node_types.values().next().unwrap().clone();
    sites.node_types.insert("type1".into(), any);
    let with = GOOD.replace("t_cm_s: 0.05 }", "t_cm_s: 0.05, wait_share: 0.78 }");
    let p = Profile::from_str(Path::new("app.yaml"), &with).unwrap();
    assert_eq!(
        p.hetero_model(&sites).unwrap().types["type1"].wait_share,
        Some(0.78)
    );
    // A waiting node drawing more than its busy dynamic watts, or less than none.
    for (bad, shown) in [("1.5", "'1.5'"), ("-0.1", "'-0.1'"), ("polls", "'polls'")] {
        let s = err(&GOOD.replace("t_cm_s: 0.05", &format!("t_cm_s: 0.05, wait_share: {bad}")));
        has(
            &s,
            &[
                "/etc/greenup/profiles/app.yaml:6:",
                "hetero.node_types.type1.wait_share",
                shown,
                "expected a number from 0 to 1",
            ],
        );
    }
}
