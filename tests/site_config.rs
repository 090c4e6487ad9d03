//! The site config loader: the shipped example, defaults, and one test per kind of bad input,
//! each checking that the error names the file, line and column, the key, the value and what
//! would be valid.

mod site_common;

use std::path::{Path, PathBuf};

use greenup::input::Origin;
use greenup::site::{self, Enforce, OverBudget, PowerModel};
use site_common::{bad, parse};

const MINIMAL: &str = "\
node_types:
  a:
    frequencies: [1.0, 2.0]
    power: {dynamic_w: 10, static_w: 2}
nodes:
  a: n[1-2]
";

#[test]
fn shipped_example_loads() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("etc/greenup.yaml");
    let s = site::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.node_types.len(), 6);
    assert_eq!(s.nodes.len(), 148);
    let t1 = &s.node_types["type1"];
    assert_eq!(t1.freqs_ghz.len(), 14);
    assert_eq!((t1.fmin(), t1.fmax()), (1.2, 2.5));
    assert_eq!(s.node_types["type3"].freqs_ghz.len(), 18);
    assert_eq!(s.node_types["type4"].fmax(), 3.4);
    // Table I: 20 W dynamic at 2.5 GHz, cube law below it.
    assert!((t1.dynamic_w(1.25).unwrap() - 20.0 / 8.0).abs() < 1e-12);
    assert_eq!(t1.static_w(1.25).unwrap(), 4.0);
    assert_eq!(s.node_type_of("h037").unwrap().name, "type2");
    assert_eq!(s.node_type_of("n2").unwrap().name, "fast");
    assert_eq!(s.node_type_of("n4").unwrap().name, "eco");
    // The expression type equals the cube law: 60 (f/2.4)^3 at f = 1.2 is 60 / 8.
    let eco = &s.node_types["eco"];
    assert!((eco.dynamic_w(1.2).unwrap() - 7.5).abs() < 1e-9);
    assert_eq!(eco.static_w(2.0).unwrap(), 20.0);
    assert_eq!(s.power_cap_w, Some(4000.0));
    assert_eq!(s.partitions["hetero"].nodes.len(), 144);
    assert_eq!(s.partitions["debug"].power_cap_w, Some(1000.0));
    assert_eq!(s.job_energy_limit_j, Some(20e6));
    assert_eq!(
        s.policy_dirs,
        vec![path.parent().unwrap().join("../policies")]
    );
    assert_eq!(s.profile_dir, path.parent().unwrap().join("profiles"));
    assert_eq!(s.daemon.metrics_listen.as_deref(), Some("127.0.0.1:7471"));
}

#[test]
fn defaults_suit_a_debian_site() {
    let s = parse(MINIMAL).unwrap();
    assert_eq!(s.default_policy, "monitor");
    assert!(s.allowed_policies.is_empty());
    assert_eq!(s.enforce, Enforce::Open);
    assert_eq!(s.power_cap_w, None);
    assert_eq!(s.job_energy_limit_j, None);
    assert_eq!(s.profile_dir, Path::new("/etc/slurm/greenup/profiles"));
    assert_eq!(s.daemon.listen, "127.0.0.1:7470");
    assert_eq!(s.daemon.socket, Path::new("/run/greenupd/greenupd.sock"));
    assert_eq!(s.daemon.store, Path::new("/var/lib/greenup/greenup.db"));
    assert_eq!(s.daemon.slurm_user, "slurm");
    assert_eq!(s.daemon.over_budget, OverBudget::Lowest);
    assert_eq!(s.daemon.metrics_listen, None);
    assert!(!s.daemon.slurm_energy, "off unless the site asks");
    assert_eq!(s.dvfs.sysfs_root, Path::new("/sys"));
    assert_eq!(s.dvfs.run_dir, Path::new("/run/greenup"));
    assert!(!s.dvfs.per_core_shared);
    assert!(s.dvfs.measure_baselines);
    assert_eq!(s.daemon.spool_dir, Path::new("/var/spool/greenup"));
    assert_eq!(
        s.node_types["a"].power,
        PowerModel::AtMax {
            dynamic_w: 10.0,
            static_w: 2.0,
            gamma: 3.0
        }
    );
}

#[test]
fn frequency_range_expands_exactly() {
    let s = parse(&MINIMAL.replace("[1.0, 2.0]", "{min: 1.2, max: 2.0, step: 0.2}")).unwrap();
    assert_eq!(s.node_types["a"].freqs_ghz, vec![1.2, 1.4, 1.6, 1.8, 2.0]);
    let s = parse(&MINIMAL.replace("[1.0, 2.0]", "[2.0, 1.5, 1.0]")).unwrap();
    assert_eq!(
        s.node_types["a"].freqs_ghz,
        vec![1.0, 1.5, 2.0],
        "lists are sorted"
    );
}

#[test]
fn caps_take_units() {
    let s = parse(&format!(
        "{MINIMAL}power_cap: 2kW\njob_energy_limit: 1.5kWh\npartitions:\n  p: {{nodes: n1, power_cap: 350}}\n"
    ))
    .unwrap();
    assert_eq!(s.power_cap_w, Some(2000.0));
    assert_eq!(s.job_energy_limit_j, Some(5.4e6));
    assert_eq!(s.partitions["p"].power_cap_w, Some(350.0));
    assert_eq!(s.partitions["p"].nodes, vec!["n1"]);
}

#[test]
fn node_in_two_types() {
    let text = format!(
        "{}  b: n[2-3]\n",
        MINIMAL.replace(
            "nodes:\n",
            "  b:\n    frequencies: [1.0]\n    power: {dynamic_w: 1, static_w: 1}\nnodes:\n"
        )
    );
    bad(
        &text,
        10,
        6,
        &["nodes.b", "n[2-3]", "node n2 is already of type a"],
    );
}

#[test]
fn node_twice_in_one_type() {
    bad(
        &MINIMAL.replace("n[1-2]", "n[1-2],n2"),
        6,
        6,
        &["nodes.a", "n2 is listed twice"],
    );
}

#[test]
fn type_with_no_frequencies() {
    bad(
        &MINIMAL.replace("[1.0, 2.0]", "[]"),
        3,
        18,
        &[
            "node_types.a.frequencies",
            "no frequencies",
            "[1.2, 1.6, 2.0]",
        ],
    );
}

#[test]
fn step_that_does_not_divide() {
    bad(
        &MINIMAL.replace("[1.0, 2.0]", "{min: 1.6, max: 2.66, step: 0.133}"),
        3,
        18,
        &[
            "node_types.a.frequencies",
            "step 0.133 does not divide",
            "1.06",
        ],
    );
}

#[test]
fn range_below_min_and_bad_keys() {
    bad(
        &MINIMAL.replace("[1.0, 2.0]", "{min: 2, max: 1, step: 0.1}"),
        3,
        18,
        &["max 1 is below min 2"],
    );
    bad(
        &MINIMAL.replace("[1.0, 2.0]", "{min: 1, max: 2, stp: 0.1}"),
        3,
        18,
        &["unknown key 'stp'"],
    );
    bad(
        &MINIMAL.replace("[1.0, 2.0]", "{min: 1, max: 2}"),
        3,
        18,
        &["missing 'step'"],
    );
    bad(
        &MINIMAL.replace("[1.0, 2.0]", "{min: 1, max: 2, step: 0}"),
        3,
        18,
        &["step '0'"],
    );
    bad(
        &MINIMAL.replace("[1.0, 2.0]", "{min: 1, max: 2, step: 1e-9}"),
        3,
        18,
        &["more than 1000"],
    );
}

#[test]
fn bad_frequency_values() {
    bad(
        &MINIMAL.replace("[1.0, 2.0]", "[1.0, fast]"),
        3,
        18,
        &["'fast' is not a frequency"],
    );
    bad(
        &MINIMAL.replace("[1.0, 2.0]", "[1.0, -2]"),
        3,
        18,
        &["'-2' is not a frequency"],
    );
    bad(
        &MINIMAL.replace("[1.0, 2.0]", "[1.0, 1.0]"),
        3,
        18,
        &["1 GHz is listed twice"],
    );
    bad(
        &MINIMAL.replace("[1.0, 2.0]", "fast"),
        3,
        18,
        &["not a list or a range"],
    );
}

#[test]
fn unknown_type_in_nodes() {
    bad(
        &MINIMAL.replace("  a: n[1-2]", "  x: n[1-2]"),
        6,
        6,
        &["nodes.x", "'x'", "a node type from node_types: a"],
    );
}

#[test]
fn bad_hostlist() {
    bad(
        &MINIMAL.replace("n[1-2]", "n[2-1]"),
        6,
        6,
        &["nodes.a", "n[2-1]", "runs backwards"],
    );
    bad(
        &MINIMAL.replace("n[1-2]", "\"n[1-\""),
        6,
        6,
        &["nodes.a", "without ']'"],
    );
}

#[test]
fn control_characters_stay_on_one_line() {
    bad(
        &MINIMAL.replace("n[1-2]", "\"n1\\nn2\""),
        6,
        6,
        &["nodes.a", "n1\\nn2"],
    );
}

#[test]
fn caps_must_be_positive() {
    bad(
        &format!("{MINIMAL}power_cap: 0\n"),
        7,
        12,
        &["power_cap", "'0'", "a power above 0"],
    );
    bad(
        &format!("{MINIMAL}power_cap: -3kW\n"),
        7,
        12,
        &["power_cap", "'-3kW'"],
    );
    bad(
        &format!("{MINIMAL}power_cap: 2kWh\n"),
        7,
        12,
        &["power_cap", "2kWh", "2kW"],
    );
    bad(
        &format!("{MINIMAL}job_energy_limit: 20MW\n"),
        7,
        19,
        &["job_energy_limit", "20MW", "20MJ"],
    );
    bad(
        &format!("{MINIMAL}job_energy_limit: [1]\n"),
        7,
        19,
        &["job_energy_limit", "an energy above 0"],
    );
    bad(
        &format!("{MINIMAL}partitions:\n  p:\n    nodes: n1\n    power_cap: 0W\n"),
        10,
        16,
        &["partitions.p.power_cap", "'0W'"],
    );
}

#[test]
fn unknown_enforce_value() {
    bad(
        &format!("{MINIMAL}enforce: lenient\n"),
        7,
        10,
        &["enforce", "'lenient'", "open or strict"],
    );
}

#[test]
fn slurm_energy_is_a_boolean() {
    let on = parse(&format!("{MINIMAL}daemon:\n  slurm_energy: true\n")).unwrap();
    assert!(on.daemon.slurm_energy);
    bad(
        &format!("{MINIMAL}daemon:\n  slurm_energy: sometimes\n"),
        8,
        17,
        &["daemon.slurm_energy", "true or false"],
    );
}

#[test]
fn unknown_over_budget_value() {
    bad(
        &format!("{MINIMAL}daemon:\n  over_budget: maybe\n"),
        8,
        16,
        &["daemon.over_budget", "lowest, unchanged or refuse"],
    );
}

#[test]
fn bad_daemon_addresses_and_timeouts() {
    bad(
        &format!("{MINIMAL}daemon:\n  listen: localhost\n"),
        8,
        11,
        &["daemon.listen", "HOST:PORT"],
    );
    bad(
        &format!("{MINIMAL}daemon:\n  metrics_listen: \":99999\"\n"),
        8,
        19,
        &["daemon.metrics_listen"],
    );
    bad(
        &format!("{MINIMAL}daemon:\n  timeout_ms: 0\n"),
        8,
        15,
        &["daemon.timeout_ms", "1-600000"],
    );
    bad(
        &format!("{MINIMAL}daemon:\n  slurm_user: \"a b\"\n"),
        8,
        15,
        &["daemon.slurm_user"],
    );
}

#[test]
fn partition_with_unknown_node() {
    bad(
        &format!("{MINIMAL}partitions:\n  p: {{nodes: \"n[1-3]\"}}\n"),
        8,
        14,
        &["partitions.p.nodes", "node n3 is not in `nodes`"],
    );
}

#[test]
fn default_policy_must_be_allowed() {
    bad(
        &format!("{MINIMAL}allowed_policies: [min-energy]\ndefault_policy: min-time\n"),
        8,
        17,
        &[
            "default_policy",
            "min-time",
            "one of allowed_policies: min-energy",
        ],
    );
    bad(
        &format!("{MINIMAL}default_policy: \"no good\"\n"),
        7,
        17,
        &["default_policy", "a policy name"],
    );
}

#[test]
fn power_expressions() {
    let s = parse(&MINIMAL.replace(
        "{dynamic_w: 10, static_w: 2}",
        "{dynamic_w: \"5 * f^3\", static_w: 2W}",
    ))
    .unwrap();
    assert!((s.node_types["a"].dynamic_w(2.0).unwrap() - 40.0).abs() < 1e-12);
    assert_eq!(s.node_types["a"].static_w(1.0).unwrap(), 2.0);
    bad(
        &MINIMAL.replace(
            "{dynamic_w: 10, static_w: 2}",
            "{dynamic_w: \"5 * g\", static_w: 2}",
        ),
        4,
        24,
        &[
            "node_types.a.power.dynamic_w",
            "unknown variable 'g'",
            "expression in f",
        ],
    );
    bad(
        &MINIMAL.replace(
            "{dynamic_w: 10, static_w: 2}",
            "{dynamic_w: \"10 - 8 * f\", static_w: 2}",
        ),
        4,
        24,
        &[
            "node_types.a.power.dynamic_w",
            "watts >= 0 at every frequency",
            "f = 2 GHz",
        ],
    );
    bad(
        &MINIMAL.replace(
            "{dynamic_w: 10, static_w: 2}",
            "{dynamic_w: \"f\", static_w: 2, gamma: 2}",
        ),
        4,
        49,
        &["node_types.a.power.gamma", "no gamma"],
    );
    bad(
        &MINIMAL.replace(
            "{dynamic_w: 10, static_w: 2}",
            "{dynamic_w: 10, static_w: -2}",
        ),
        4,
        38,
        &["power.static_w", "-2"],
    );
    bad(
        &MINIMAL.replace(
            "{dynamic_w: 10, static_w: 2}",
            "{dynamic_w: 10, static_w: 2, gamma: 0}",
        ),
        4,
        48,
        &["gamma", "(0, 10]"],
    );
}

#[test]
fn unknown_fields_are_refused_with_position() {
    bad(
        &format!("{MINIMAL}power_capp: 3kW\n"),
        7,
        1,
        &["power_capp"],
    );
    bad(
        &MINIMAL.replace("power: {", "power: {idle_w: 3, "),
        4,
        13,
        &["idle_w", "expected one of dynamic_w"],
    );
    bad(&format!("{MINIMAL}dvfs:\n  root: /x\n"), 8, 3, &["root"]);
}

#[test]
fn wrong_yaml_types_have_positions() {
    bad(
        &format!("{MINIMAL}daemon:\n  timeout_ms: soon\n"),
        8,
        15,
        &["daemon.timeout_ms", "'soon'", "milliseconds in 1-600000"],
    );
    bad(
        &format!("{MINIMAL}dvfs:\n  per_core_shared: maybe\n"),
        8,
        20,
        &["dvfs.per_core_shared", "true or false"],
    );
    bad(
        &format!("{MINIMAL}dvfs:\n  measure_baselines: sometimes\n"),
        8,
        22,
        &[
            "dvfs.measure_baselines",
            "'sometimes'",
            "expected true or false",
        ],
    );
    let off = parse(&format!("{MINIMAL}dvfs:\n  measure_baselines: false\n")).unwrap();
    assert!(!off.dvfs.measure_baselines);
    bad(
        &format!("{MINIMAL}daemon:\n  admins: [root, 7]\n"),
        8,
        11,
        &["daemon.admins", "'7'"],
    );
    bad(&format!("{MINIMAL}node_types:\n"), 7, 1, &["node_types"]);
}

#[test]
fn empty_and_typeless_files() {
    let e = parse("# nothing\n\n").unwrap_err();
    assert_eq!(
        e.origin,
        Origin::Path(PathBuf::from("/etc/slurm/greenup.yaml"))
    );
    assert!(e.to_string().contains("empty"), "{e}");
    let e = parse("enforce: open\n").unwrap_err();
    assert!(e.to_string().contains("node_types"), "{e}");
}

#[test]
fn duplicate_keys_are_refused() {
    let err = parse(&format!("{MINIMAL}enforce: open\nenforce: strict\n")).unwrap_err();
    assert!(matches!(err.origin, Origin::File { line: 8, .. }), "{err}");
}

#[test]
fn relative_paths_follow_the_config_file() {
    let text = format!("{MINIMAL}profile_dir: profiles\npolicy_dirs: [p1, /abs/p2]\n");
    let s = site::parse("conf/greenup.yaml", &text).unwrap();
    let here = std::env::current_dir().unwrap();
    assert_eq!(s.profile_dir, here.join("conf/profiles"));
    assert_eq!(
        s.policy_dirs,
        vec![here.join("conf/p1"), PathBuf::from("/abs/p2")]
    );
    assert_eq!(
        s.path,
        Path::new("conf/greenup.yaml"),
        "errors name the file as given"
    );
}

#[test]
fn unreadable_file_names_the_path() {
    let e = site::load("/nonexistent/greenup.yaml").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("/nonexistent/greenup.yaml: cannot read site config"),
        "{e}"
    );
}

#[test]
fn spool_dir_takes_the_node_name_and_nothing_else() {
    let s = parse(&format!("{MINIMAL}daemon:\n  spool_dir: /var/spool/g/%n\n")).unwrap();
    assert_eq!(s.daemon.spool_dir, Path::new("/var/spool/g/%n"));
    bad(
        &format!("{MINIMAL}daemon:\n  spool_dir: /var/spool/g/%h\n"),
        8,
        14,
        &[
            "daemon.spool_dir",
            "'/var/spool/g/%h'",
            "%n stands for the node's name",
        ],
    );
    bad(
        &format!("{MINIMAL}daemon:\n  spool_dir: \"\"\n"),
        8,
        14,
        &["daemon.spool_dir", "a path"],
    );
}

#[test]
fn daemon_limits_are_checked_and_a_user_may_not_exceed_all_users() {
    let s = parse(&format!(
        "{MINIMAL}daemon:\n  max_job_nodes: 20000\n  user_connections: 4\n  users_connections: 8\n  unauthenticated: 32\n"
    ))
    .unwrap();
    let l = s.daemon.limits;
    assert_eq!(
        (
            l.max_job_nodes,
            l.user_connections,
            l.users_connections,
            l.unauthenticated
        ),
        (20_000, 4, 8, 32)
    );
    bad(
        &format!("{MINIMAL}daemon:\n  max_job_nodes: 0\n"),
        8,
        18,
        &["daemon.max_job_nodes", "1-1000000"],
    );
    bad(
        &format!("{MINIMAL}daemon:\n  unauthenticated: -3\n"),
        8,
        20,
        &["daemon.unauthenticated", "1-65536"],
    );
    bad(
        &format!("{MINIMAL}daemon:\n  user_connections: 200\n"),
        8,
        21,
        &[
            "daemon.user_connections",
            "at most daemon.users_connections (128)",
        ],
    );
}

#[test]
fn clock_sampling_is_off_unless_written_and_bad_values_say_what_is_valid() {
    assert!(parse(MINIMAL).unwrap().power.sample_clocks.is_none());
    let s = parse(&format!("{MINIMAL}power:\n  sample_clocks: {{}}\n")).unwrap();
    let c = s.power.sample_clocks.unwrap();
    assert_eq!((c.fraction, c.max_slowdown), (0.02, 0.1));
    let s = parse(&format!(
        "{MINIMAL}power:\n  sample_clocks: {{fraction: 0.05, max_slowdown: 0.25}}\n"
    ))
    .unwrap();
    let c = s.power.sample_clocks.unwrap();
    assert_eq!((c.fraction, c.max_slowdown), (0.05, 0.25));

    bad(
        &format!("{MINIMAL}power:\n  sample_clocks:\n    fraction: 2\n"),
        9,
        15,
        &["power.sample_clocks.fraction", "'2'", "0-1"],
    );
    bad(
        &format!("{MINIMAL}power:\n  sample_clocks:\n    max_slowdown: ten percent\n"),
        9,
        19,
        &["power.sample_clocks.max_slowdown", "'ten percent'", "0-1"],
    );
}

#[test]
fn baseline_section_defaults_and_bad_values() {
    let s = parse(&format!("{MINIMAL}baseline: {{}}\n")).unwrap();
    let b = s.baseline.unwrap();
    assert_eq!((b.fraction, b.min_runs), (0.05, 3));
    assert_eq!(b.on_miss, site::OnMiss::Report);
    let s = parse(&format!(
        "{MINIMAL}baseline: {{fraction: 0.1, min_runs: 0, on_miss: monitor}}\n"
    ))
    .unwrap();
    let b = s.baseline.unwrap();
    assert_eq!(
        (b.fraction, b.min_runs, b.on_miss),
        (0.1, 0, site::OnMiss::Monitor)
    );
    assert!(parse(MINIMAL).unwrap().baseline.is_none());

    bad(
        &format!("{MINIMAL}baseline:\n  fraction: 1.5\n"),
        8,
        13,
        &["baseline.fraction", "'1.5'", "0-1"],
    );
    bad(
        &format!("{MINIMAL}baseline:\n  min_runs: -1\n"),
        8,
        13,
        &["baseline.min_runs", "'-1'", "0-1000"],
    );
    bad(
        &format!("{MINIMAL}baseline:\n  on_miss: drop\n"),
        8,
        12,
        &["baseline.on_miss", "'drop'", "report or monitor"],
    );
}
