//! greenup's job_submit script (etc/job_submit.lua) sizes each job's watts from the table
//! `greenup site licenses --lua` writes: run under Lua 5.3 (Slurm's) with a stand-in of
//! Slurm's `slurm` table, against the test cluster's site with the queue turned on.

use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The site's job_submit table, its SlurmUser resolved as `greenup site licenses --lua`
/// resolves it.
fn lua_table(site: &greenup::site::Site) -> String {
    greenup::power::slurm::lua_table(site, greenup_host::users::uid_of(&site.daemon.slurm_user))
}

/// The test cluster's site config with the queue turned on.
fn queue_site() -> String {
    std::fs::read_to_string(format!("{ROOT}/tests/cluster/greenup.yaml"))
        .unwrap()
        .replace("enforce: open", "enforce: open\npower: {enforce: queue}")
}

/// The test cluster's site (`text`, under the queue) under `power.enforce: hres`: site
/// and debug caps 400 W, racks r1 = n[1-2] at 200 W and r2 = n[3-4] at 120 W, reserve 0.3.
fn hres_site(text: &str) -> String {
    text.replace("power_cap: 2kW", "power_cap: 400W")
        .replace("power_cap: 1kW", "power_cap: 400W")
        .replace(
            "power: {enforce: queue}",
            "power:\n  enforce: hres\n  reserve: 0.3\n  racks:\n    r1: {nodes: \"n[1-2]\", power_cap: 200W}\n    r2: {nodes: \"n[3-4]\", power_cap: 120W}",
        )
}

#[test]
fn under_hres_slurm_gets_the_site_and_rack_layers_and_nothing_flat_for_them() {
    let text = queue_site();
    let t = tempfile::tempdir().unwrap();
    let cfg = t.path().join("greenup.yaml");
    std::fs::write(&cfg, hres_site(&text)).unwrap();
    let site = greenup::site::load(&cfg).unwrap();
    use greenup::power::slurm;
    // The site's license is the resource; only the partition's cap stays flat.
    assert_eq!(
        slurm::licenses_line(&site).as_deref(),
        Some("Licenses=greenup_w_debug:280")
    );
    let yaml = slurm::resources_yaml(&site).unwrap();
    let body: Vec<&str> = yaml.lines().skip(1).collect();
    assert_eq!(
        body,
        [
            "---",
            "- resource: greenup_w",
            "  mode: MODE_3",
            "  layers:",
            "    - nodes: [\"n[1-4]\"]",
            "      count: 280",
            "    - nodes: [\"n[1-2]\"]",
            "      count: 140",
            "    - nodes: [\"n[3-4]\"]",
            "      count: 84",
        ]
    );
    assert!(slurm::resources_drift(&site, &yaml).is_empty());
    // A rack's count changed by hand, a layer dropped: each named with both figures.
    let edited = yaml
        .replace("count: 140", "count: 150")
        .replace("    - nodes: [\"n[3-4]\"]\n      count: 84\n", "");
    let d: Vec<String> = slurm::resources_drift(&site, &edited)
        .iter()
        .map(|d| d.to_string())
        .collect();
    assert_eq!(
        d,
        [
            "license greenup_w over n[1-2]: the site config grants 140 W under its cap, resources.yaml counts 150; Slurm queues jobs by 150",
            "license greenup_w over n[3-4]: the site config grants 84 W under its cap, resources.yaml declares none; Slurm refuses every job job_submit gives it",
        ]
    );
    // A file Slurm has none of: every layer is missing.
    assert_eq!(slurm::resources_drift(&site, "").len(), 3);
    // slurm.conf still declaring the site's flat license is named too.
    let conf = "Licenses=greenup_w:280,greenup_w_debug:280\n";
    let d = slurm::license_drift(&site, conf);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        d[0].to_string(),
        "license greenup_w: slurm.conf counts 280, but no cap in the site config uses it"
    );
}

#[test]
fn the_job_submit_script_holds_every_job_within_its_nodes_power() {
    let text = queue_site();
    let t = tempfile::tempdir().unwrap();
    let cfg = t.path().join("greenup.yaml");
    std::fs::write(&cfg, &text).unwrap();
    let site = greenup::site::load(&cfg).unwrap();
    let table = t.path().join("greenup_power.lua");
    std::fs::write(&table, lua_table(&site)).unwrap();
    // The same site under a cap too small for its four nodes at their lowest clock.
    let tight_cfg = t.path().join("tight.yaml");
    std::fs::write(
        &tight_cfg,
        text.replace("power_cap: 2kW", "power_cap: 150W")
            .replace("power_cap: 1kW", "power_cap: 237W"),
    )
    .unwrap();
    let tight = t.path().join("tight.lua");
    let tight_site = greenup::site::load(&tight_cfg).unwrap();
    std::fs::write(&tight, lua_table(&tight_site)).unwrap();
    // The same site under Slurm's hierarchical resources, two racks of two nodes.
    let hres_cfg = t.path().join("hres.yaml");
    std::fs::write(&hres_cfg, hres_site(&text)).unwrap();
    let hres = t.path().join("hres.lua");
    std::fs::write(&hres, lua_table(&greenup::site::load(&hres_cfg).unwrap())).unwrap();
    let out = Command::new("lua5.3")
        .arg(format!("{ROOT}/tests/lua/job_submit_test.lua"))
        .arg(format!("{ROOT}/etc/job_submit.lua"))
        .arg(&table)
        .arg(&tight)
        .arg(&hres)
        .output()
        .expect("lua5.3 runs (Debian's lua5.3, which scripts/lib.sh installs)");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("all passed"), "{said}");
}
