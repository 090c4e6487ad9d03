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

#[test]
fn the_job_submit_script_holds_every_job_within_its_nodes_power() {
    let text = std::fs::read_to_string(format!("{ROOT}/tests/cluster/greenup.yaml"))
        .unwrap()
        .replace("enforce: open", "enforce: open\npower: {enforce: queue}");
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
    let out = Command::new("lua5.3")
        .arg(format!("{ROOT}/tests/lua/job_submit_test.lua"))
        .arg(format!("{ROOT}/etc/job_submit.lua"))
        .arg(&table)
        .arg(&tight)
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
