//! Refining a shipped profile into a new stored version, pinning and rolling back,
//! without ever touching the admin's file.

use std::path::Path;

use greenup::profile::Profile;
use greenup::profile::refine::{NodeOutcome, Outcome, Outlier, refine_profile};
use greenup::profile::versions::{Fit, InUse, Versions};
use greenup::report::JobState;

fn outcome(job_id: u64, state: JobState, scale: f64) -> Outcome {
    // Table I type1 and type3 at maximum frequency; the application runs 20 % slower
    // than its profile says (0.5 s and 0.3333 s per iteration, 1000 iterations).
    let node = |name: &str, ty: &str, f: f64, e: f64| NodeOutcome {
        name: name.into(),
        node_type: ty.into(),
        freq_ghz: f,
        energy_j: Some(e * scale),
        compute_s: None,
    };
    Outcome {
        job_id,
        state,
        time_s: 1.2 * (500.0 + 50.0),
        predicted_time_s: 550.0,
        nodes: vec![
            node("h001", "type1", 2.5, 14_000.0),
            node("h073", "type3", 2.9, 14_500.0),
        ],
    }
}

#[test]
fn refine_store_pin_and_roll_back() {
    let site = greenup::site::load("etc/greenup.yaml").unwrap();
    let admin = Path::new("etc/profiles/hetero-table1.yaml");
    let before = std::fs::read_to_string(admin).unwrap();
    let profile = Profile::load(admin).unwrap();
    let outcomes = [
        outcome(1, JobState::Completed, 1.0),
        outcome(2, JobState::Cancelled, 1.0),
        outcome(3, JobState::Completed, 1.02),
    ];
    let r = refine_profile(&profile, &site, &outcomes).unwrap();
    assert_eq!(r.model, "hetero");
    assert_eq!(r.samples, 2);
    assert_eq!(
        r.left_out,
        vec![(2, Outlier::NotCompleted(JobState::Cancelled))]
    );
    assert_eq!(r.file.version.value, 2);
    // Wall time 20 % over the prediction at maximum frequency: every type's times scale by 1.2.
    let t1 = &r.file.hetero.as_ref().unwrap().node_types["type1"];
    assert!((t1.t_cp_s.value - 0.6).abs() < 1e-9, "{}", t1.t_cp_s.value);
    assert!((t1.t_cm_s.value - 0.06).abs() < 1e-9);

    let dir = tempfile::tempdir().unwrap();
    let versions = Versions::new(dir.path());
    assert_eq!(versions.in_use("hetero-table1").unwrap(), InUse::Admin);
    let fit = Fit { samples: r.samples, residual: r.residual };
    assert_eq!(versions.save(r.file.clone(), fit).unwrap(), 2);
    assert_eq!(versions.save(r.file.clone(), fit).unwrap(), 3);
    assert_eq!(versions.fit("hetero-table1", 3), Some(fit));
    assert_eq!(versions.fit("hetero-table1", 1), None);
    assert_eq!(versions.list("hetero-table1").unwrap(), vec![2, 3]);
    // The stored version loads as a profile.
    let v3 = Profile::load(&versions.path("hetero-table1", 3).unwrap()).unwrap();
    assert_eq!(v3.version(), 3);
    assert!(matches!(
        versions.in_use("hetero-table1").unwrap(),
        InUse::Refined { version: 3, .. }
    ));

    versions.pin("hetero-table1", 2, 1).unwrap();
    assert!(matches!(
        versions.in_use("hetero-table1").unwrap(),
        InUse::Refined { version: 2, .. }
    ));
    // Rolling back to the admin's own version.
    versions.pin("hetero-table1", 1, 1).unwrap();
    assert_eq!(versions.in_use("hetero-table1").unwrap(), InUse::Admin);
    let bad = versions.pin("hetero-table1", 9, 1).unwrap_err();
    assert_eq!(
        bad.to_string(),
        "option VERSION: version: invalid value '9': expected one of 1, 2, 3"
    );
    assert!(versions.pin("../etc", 1, 1).is_err());
    versions.unpin("hetero-table1").unwrap();
    assert!(matches!(
        versions.in_use("hetero-table1").unwrap(),
        InUse::Refined { version: 3, .. }
    ));

    assert_eq!(
        std::fs::read_to_string(admin).unwrap(),
        before,
        "the admin's file is never written"
    );
}
