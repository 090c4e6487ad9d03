//! The shipped simulated sites (tests/simgrid/sites) against paper 004's Table I and the
//! bench's config, read through `greenup-sim platform`: expected values are the paper's
//! and the bench's own numbers, worked out here, not greenup's.

use std::path::PathBuf;
use std::process::Command;

fn site(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/simgrid/sites/{name}.yaml"))
}

fn platform(site_name: &str, nodes: &str, speeds: &[&str]) -> Result<String, String> {
    platform_with(site_name, nodes, speeds, &[])
}

/// `greenup-sim platform` with more options (the physics, say).
fn platform_with(
    site_name: &str,
    nodes: &str,
    speeds: &[&str],
    more: &[&str],
) -> Result<String, String> {
    let mut c = Command::new(env!("CARGO_BIN_EXE_greenup-sim"));
    c.arg("platform")
        .arg("--site")
        .arg(site(site_name))
        .arg("--nodes")
        .arg(nodes);
    for s in speeds {
        c.arg("--speed").arg(s);
    }
    c.args(more);
    let out = c.output().expect("run greenup-sim");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8(out.stderr).unwrap())
    }
}

/// The attribute `attr` of host `id`.
fn host_attr<'a>(xml: &'a str, id: &str, attr: &str) -> &'a str {
    let at = xml.find(&format!("<host id=\"{id}\"")).expect("host");
    let rest = &xml[at..];
    let a = rest.find(&format!("{attr}=\"")).expect("attr") + attr.len() + 2;
    &rest[a..a + rest[a..].find('"').unwrap()]
}

/// The host's value of property `prop`.
fn host_prop<'a>(xml: &'a str, id: &str, prop: &str) -> &'a str {
    let at = xml.find(&format!("<host id=\"{id}\"")).expect("host");
    let rest = &xml[at..at + xml[at..].find("</host>").unwrap()];
    let a = rest.find(&format!("id=\"{prop}\" value=\"")).expect("prop") + prop.len() + 13;
    &rest[a..a + rest[a..].find('"').unwrap()]
}

const PAPER: [&str; 4] = ["t1=40", "t2=50", "t3=60", "t4=70"];

#[test]
fn paper004_table_i_on_144_nodes_in_equal_proportion() {
    let xml = platform("paper004", "n[1-144]", &PAPER).unwrap();
    assert_eq!(xml.matches("<host id=").count(), 144);
    // Node i is of type (i - 1) mod 4 + 1: n1 t1, n6 t2, n11 t3, n144 t4.
    // Table I: t1 2.50-1.20 GHz by 0.100 (14 gears), 40 GFLOPS, 20 W + 4 W.
    let s1: Vec<f64> = host_attr(&xml, "n1", "speed")
        .split(',')
        .map(|v| v.trim_end_matches('f').parse().unwrap())
        .collect();
    assert_eq!(s1.len(), 14);
    assert!((s1[0] - 40e9).abs() < 1.0 && (s1[13] - 40e9 * 1.2 / 2.5).abs() < 1.0);
    // t2: 2.66 by 0.133 down to 1.596 (9 gears); t3: 2.9-1.2 by 0.1 (18); t4: 3.4 by
    // 0.133 down to 1.671 (14).
    for (node, gears) in [("n6", 9), ("n11", 18), ("n144", 14)] {
        assert_eq!(
            host_attr(&xml, node, "speed").split(',').count(),
            gears,
            "{node}"
        );
    }
    // At f_max a t4 node draws 7 W idle and 7 + 35 W busy.
    let w4 = host_prop(&xml, "n144", "wattage_per_state");
    assert!(w4.starts_with("7:7:42,"), "{w4}");
    // At t1's lowest gear the dynamic power is 20 W × (1.2 / 2.5)^3 = 2.21184 W.
    let w1 = host_prop(&xml, "n1", "wattage_per_state");
    let last: Vec<f64> = w1
        .rsplit(", ")
        .next()
        .unwrap()
        .split(':')
        .map(|v| v.parse().unwrap())
        .collect();
    assert!((last[2] - (4.0 + 2.21184)).abs() < 1e-9, "{w1}");
}

#[test]
fn power_scenarios_split_the_same_total() {
    for (name, dynamic) in [("paper004-70-30", 0.7), ("paper004-90-10", 0.9)] {
        let xml = platform(name, "n[1-4]", &PAPER).unwrap();
        // t3 at f_max: 36 W in all (Table I's 30 + 6), split dynamic : static.
        let w = host_prop(&xml, "n3", "wattage_per_state");
        let first: Vec<f64> = w
            .split(", ")
            .next()
            .unwrap()
            .split(':')
            .map(|v| v.parse().unwrap())
            .collect();
        assert!(
            (first[0] - 36.0 * (1.0 - dynamic)).abs() < 1e-6,
            "{name}: {w}"
        );
        assert!((first[2] - 36.0).abs() < 1e-6, "{name}: {w}");
    }
}

#[test]
fn bench_types_and_bad_input() {
    let xml = platform("bench", "n[1-8]", &["fast=1", "eco=0.8"]).unwrap();
    assert_eq!(host_attr(&xml, "n1", "speed").split(',').count(), 6);
    assert!(host_attr(&xml, "n8", "speed").starts_with("800000000f,"));
    let missing = platform("bench", "n[1-8]", &["fast=1"]).unwrap_err();
    assert!(missing.contains("--speed eco=GFLOPS"), "{missing}");
    let stranger = platform("bench", "n[1-9]", &["fast=1", "eco=0.8"]).unwrap_err();
    assert!(stranger.contains("node n9"), "{stranger}");
    let bad = platform("bench", "n[1-8]", &["fast=fast"]).unwrap_err();
    assert!(bad.contains("expected a positive number"), "{bad}");
}

/// The shipped physics file (tests/physics/cpus.yaml).
fn physics() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/physics/cpus.yaml")
        .display()
        .to_string()
}

#[test]
fn published_physics_sites_draw_the_papers_watts() {
    let file = physics();
    let epyc = [
        "--physics",
        &file,
        "--cpu",
        "rome=epyc-7502",
        "--beta",
        "0.5",
    ];
    let xml = platform_with("epyc", "n[1-8]", &["rome=133.3"], &epyc).unwrap();
    // Schoene et al.'s EPYC 7502 node, RAPL package: idle 77.1 W, compute 172.8, 221.4
    // and 260.1 W at 1.5, 2.2 and 2.5 GHz; a polling rank adds 0.78 of (busy - idle):
    // 77.1 + 0.78 x 183 = 219.84 W at 2.5 GHz, 77.1 + 0.78 x 95.7 = 151.746 W at 1.5.
    let w: Vec<Vec<f64>> = host_prop(&xml, "n1", "wattage_per_state")
        .split(", ")
        .map(|s| s.split(':').map(|x| x.parse().unwrap()).collect())
        .collect();
    for (got, (wait, busy)) in w
        .iter()
        .zip([(219.84, 260.1), (189.654, 221.4), (151.746, 172.8)])
    {
        assert!(
            (got[0] - wait).abs() < 1e-6 && (got[2] - busy).abs() < 1e-9,
            "{got:?}"
        );
    }
    // With --node-spread, n2 draws 0.966 and n7 (7 - 1 = 6, mod 6 = 0) 0.9434 of n1's
    // figures without it, idle and busy alike: 0.966 x 260.1 = 251.2566 W busy at
    // 2.5 GHz, 0.9434 x 219.84 = 207.397056 W polling.
    let spread: Vec<&str> = epyc.iter().copied().chain(["--node-spread"]).collect();
    let xml2 = platform_with("epyc", "n[1-8]", &["rome=133.3"], &spread).unwrap();
    let first = |xml: &str, n: &str| -> Vec<f64> {
        host_prop(xml, n, "wattage_per_state")
            .split(", ")
            .next()
            .unwrap()
            .split(':')
            .map(|x| x.parse().unwrap())
            .collect()
    };
    assert!(
        (first(&xml2, "n2")[2] - 251.2566).abs() < 1e-6,
        "{:?}",
        first(&xml2, "n2")
    );
    assert!(
        (first(&xml2, "n7")[0] - 207.397056).abs() < 1e-6,
        "{:?}",
        first(&xml2, "n7")
    );
    assert!((first(&xml2, "n1")[2] - 0.9434 * 260.1).abs() < 1e-6);
    // Half the time scales with the clock: at 1.5 GHz of 2.5 the run takes
    // 0.5 x 2.5 / 1.5 + 0.5 = 4/3 as long, so the host computes at 133.3 x 3/4 GFLOPS.
    let speeds: Vec<f64> = host_attr(&xml, "n1", "speed")
        .split(',')
        .map(|s| s.trim_end_matches('f').parse().unwrap())
        .collect();
    assert!(
        (speeds[0] - 133.3e9).abs() < 1.0 && (speeds[2] - 99.975e9).abs() < 1.0,
        "{speeds:?}"
    );
    // The mixed site in node AC watts: the Xeon node was published at 2.0 GHz only.
    let real = [
        "--physics",
        &file,
        "--cpu",
        "rome=epyc-7502",
        "--cpu",
        "hsw=xeon-e5-2680v3",
        "--scope",
        "node-ac",
    ];
    let xml = platform_with("real", "n[1-2]", &["rome=133.3", "hsw=40"], &real).unwrap();
    assert_eq!(host_attr(&xml, "n2", "speed"), "40000000000f");
    // 79.8 + 0.88 x (188.6 - 79.8) = 175.544 W waiting, 188.6 W computing.
    let w: Vec<f64> = host_prop(&xml, "n2", "wattage_per_state")
        .split(':')
        .map(|x| x.parse().unwrap())
        .collect();
    assert!((w[0] - 175.544).abs() < 1e-6 && w[2] == 188.6, "{w:?}");
}

#[test]
fn published_physics_bad_input_names_what_is_wrong() {
    let file = physics();
    let run = |site_name: &str, speeds: &[&str], more: &[&str]| {
        platform_with(site_name, "n[1-2]", speeds, more).unwrap_err()
    };
    // The bench's gears were never measured on the EPYC 7502.
    let e = run(
        "bench",
        &["fast=1", "eco=0.8"],
        &[
            "--physics",
            &file,
            "--cpu",
            "fast=epyc-7502",
            "--cpu",
            "eco=epyc-7502",
        ],
    );
    assert!(
        e.contains(
            "node type fast: 1 GHz is not a measured P-state of cpu epyc-7502 (1.5, 2.2, 2.5 GHz"
        ),
        "{e}"
    );
    let e = run(
        "epyc",
        &["rome=133.3"],
        &["--physics", &file, "--cpu", "rome=epyc-9999"],
    );
    assert!(
        e.contains("has no cpu epyc-9999 (it has: epyc-7502, xeon-e5-2680v3)"),
        "{e}"
    );
    // The Xeon node has AC figures only.
    let e = run(
        "real",
        &["rome=133.3", "hsw=40"],
        &[
            "--physics",
            &file,
            "--cpu",
            "rome=epyc-7502",
            "--cpu",
            "hsw=xeon-e5-2680v3",
        ],
    );
    assert!(
        e.contains("cpu xeon-e5-2680v3: no idle_w at 2 GHz figure (--scope package)"),
        "{e}"
    );
    let e = run(
        "epyc",
        &["rome=133.3"],
        &[
            "--physics",
            &file,
            "--cpu",
            "rome=epyc-7502",
            "--beta",
            "1.5",
        ],
    );
    assert!(e.contains("--beta 1.5: expected a share"), "{e}");
    let e = run(
        "epyc",
        &["rome=133.3"],
        &["--physics", &file, "--cpu", "nosuch=epyc-7502"],
    );
    assert!(e.contains("--cpu: no node type nosuch"), "{e}");
    let e = run("epyc", &["rome=133.3"], &["--cpu", "rome=epyc-7502"]);
    assert!(e.contains("--physics"), "{e}");
    // A count whose trace is missing, with no program to record it.
    let dir = std::env::temp_dir().join("greenup-sim-no-traces");
    let out = Command::new(env!("CARGO_BIN_EXE_greenup-sim"))
        .args(["run", "--site"])
        .arg(site("epyc"))
        .args(["--nodes", "n[1-2]", "--speed", "rome=133.3", "--work"])
        .arg(&dir)
        .arg("--replay-dir")
        .arg(&dir)
        .output()
        .unwrap();
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(
        !out.status.success()
            && e.contains("2.trace for 2 nodes, and no program after -- to record it"),
        "{e}"
    );
}
