//! greenupd closes the loop: after a job closes it refines the application's
//! profile from the stored outcomes, and the next decision uses the new version.

mod daemon_support;

use daemon_support::*;
use greenup::profile::versions::Versions;
use greenup_proto::protocol::{Decision, OpenJob};

fn wrong(job_id: u64) -> OpenJob {
    OpenJob {
        restart_count: None,
        profile: Some("wrong".into()),
        policy: Some("min-energy".into()),
        ..open_req(job_id, 0, 2)
    }
}

/// A daemon on two `std` nodes whose admin profile directory holds only [`WRONG_PROFILE`].
fn with_wrong_profile() -> daemon_support::Daemon {
    start(2, |dir, s, _| s.profile_dir = wrong_profile_dir(dir))
}

/// Report what the nodes "measured": the decided time, and `factor` times the energy
/// the decision predicted, shared evenly (the nodes are identical and run alike).
fn finish(d: &daemon_support::Daemon, dec: &Decision, factor: f64) {
    let predicted = dec.plan.as_ref().expect("a plan").predicted.energy_j.0;
    assert!(finish_planned(d, dec, factor * predicted, Some("rapl")));
}

#[test]
fn closed_jobs_refine_the_profile_and_the_next_decision_uses_the_new_version() {
    let d = with_wrong_profile();
    let versions = Versions::for_store(&d.store);

    let first = d.tcp_client().open_job(wrong(1)).unwrap();
    assert_eq!(first.profile_version.as_deref(), Some("1"));
    let pred1 = first.plan.as_ref().unwrap().predicted.energy_j.0;
    // The nodes draw twice what the admin's profile says, at the time it predicted.
    finish(&d, &first, 2.0);
    wait_for(|| versions.list("wrong").unwrap() == vec![2]);

    let second = d.tcp_client().open_job(wrong(2)).unwrap();
    assert_eq!(second.profile_version.as_deref(), Some("2"));
    let pred2 = second.plan.as_ref().unwrap().predicted.energy_j.0;
    let measured = 2.0 * pred1;
    assert!(
        (pred2 - measured).abs() < (pred1 - measured).abs(),
        "prediction {pred2} J did not move toward the measured {measured} J from {pred1} J"
    );
    // One frequency and one wall time cannot separate static from dynamic power, so both
    // scale by measured / predicted = 2: the same plan now predicts exactly the measurement.
    assert!(
        (pred2 - measured).abs() <= 1e-9 * measured,
        "{pred2} vs {measured}"
    );

    // A run that measures what v2 predicted leaves the fitted power where it is.
    finish(&d, &second, 1.0);
    wait_for(|| versions.list("wrong").unwrap() == vec![2, 3]);
    let third = d.tcp_client().open_job(wrong(3)).unwrap();
    assert_eq!(third.profile_version.as_deref(), Some("3"));
    let pred3 = third.plan.as_ref().unwrap().predicted.energy_j.0;
    assert!((pred3 - measured).abs() <= 1e-9 * measured, "{pred3}");

    // The admin's file is never rewritten.
    let admin = std::fs::read_to_string(d.dir.path().join("admin/wrong.yaml")).unwrap();
    assert_eq!(admin, WRONG_PROFILE);
}

#[test]
fn an_admin_pin_wins_over_the_newest_version() {
    let d = with_wrong_profile();
    let versions = Versions::for_store(&d.store);
    let first = d.tcp_client().open_job(wrong(1)).unwrap();
    finish(&d, &first, 2.0);
    wait_for(|| versions.list("wrong").unwrap() == vec![2]);
    greenup_core::fs::write_files(&[versions.pin("wrong", 1, 1).unwrap()]).unwrap();
    let again = d.tcp_client().open_job(wrong(2)).unwrap();
    assert_eq!(again.profile_version.as_deref(), Some("1"));
    assert_eq!(
        again.plan.as_ref().unwrap().predicted.energy_j.0,
        first.plan.as_ref().unwrap().predicted.energy_j.0
    );
}

#[test]
fn a_burst_of_closes_is_learned_from_in_full() {
    const JOBS: u64 = 12;
    let d = with_wrong_profile();
    let versions = Versions::for_store(&d.store);
    let decisions: Vec<Decision> = (1..=JOBS)
        .map(|id| d.tcp_client().open_job(wrong(id)).unwrap())
        .collect();
    // Every job closes at once, from its own connection.
    std::thread::scope(|s| {
        for dec in &decisions {
            let d = &d;
            s.spawn(move || finish(d, dec, 2.0));
        }
    });
    // Refinements of one application coalesce, but the last one learns from every job.
    wait_for(|| {
        let newest = versions.list("wrong").unwrap().last().copied();
        newest
            .and_then(|v| versions.fit("wrong", v))
            .map(|f| f.samples)
            == Some(JOBS as u32)
    });
    let listed = versions.list("wrong").unwrap();
    assert!(
        (1..=JOBS as usize).contains(&listed.len()),
        "{} versions from {JOBS} closes",
        listed.len()
    );
}
