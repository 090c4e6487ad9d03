//! Refining a shipped profile into a new stored version, pinning and rolling back,
//! without ever touching the admin's file.

use std::path::Path;

use greenup::profile::refine::{NodeOutcome, Outcome, Outlier, refine_profile};
use greenup::profile::versions::{InUse, Versions};
use greenup::profile::{Param, Profile};
use greenup::record::RunState;

fn outcome(job_id: u64, state: RunState, scale: f64) -> Outcome {
    // Table I type1 and type3 at maximum frequency; the application runs 20 % slower
    // than its profile says (0.5 s and 0.3333 s per iteration, 1000 iterations).
    let node = |name: &str, ty: &str, f: f64, e: f64| NodeOutcome {
        gpu: None,
        comm_s: None,
        name: name.into(),
        node_type: ty.into(),
        freq_ghz: f,
        energy_j: Some(e * scale),
        compute_s: None,
        calls: None,
        bytes: None,
    };
    Outcome {
        gpu_locked: false,
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
        outcome(1, RunState::Completed, 1.0),
        outcome(2, RunState::Cancelled, 1.0),
        outcome(3, RunState::Completed, 1.02),
    ];
    let r = refine_profile(&profile, &site, &outcomes).unwrap();
    assert_eq!(r.model, "hetero");
    assert_eq!(r.samples, 2);
    assert_eq!(
        r.left_out,
        vec![(2, Outlier::NotCompleted(RunState::Cancelled))]
    );
    assert_eq!(num(&r.file.version.value), 2.0);
    // Wall time 20 % over the prediction at maximum frequency: every type's times scale by 1.2.
    let t1 = &r.file.hetero.as_ref().unwrap().node_types["type1"];
    assert!(
        (num(&t1.t_cp_s.value) - 0.6).abs() < 1e-9,
        "{}",
        t1.t_cp_s.value
    );
    assert!((num(&t1.t_cm_s.value) - 0.06).abs() < 1e-9);

    let dir = tempfile::tempdir().unwrap();
    let versions = Versions::new(dir.path());
    assert_eq!(versions.in_use("hetero-table1").unwrap(), InUse::Admin);
    let fit = r.fit();
    assert_eq!(store(&versions, r.file.clone(), fit.clone()), 2);
    assert_eq!(store(&versions, r.file.clone(), fit.clone()), 3);
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

    // A pin is what to write; nothing changes until it is written.
    let pin = versions.pin("hetero-table1", 2, 1).unwrap();
    assert!(matches!(
        versions.in_use("hetero-table1").unwrap(),
        InUse::Refined { version: 3, .. }
    ));
    greenup_core::fs::write_files(&[pin]).unwrap();
    assert!(matches!(
        versions.in_use("hetero-table1").unwrap(),
        InUse::Refined { version: 2, .. }
    ));
    // Rolling back to the admin's own version.
    greenup_core::fs::write_files(&[versions.pin("hetero-table1", 1, 1).unwrap()]).unwrap();
    assert_eq!(versions.in_use("hetero-table1").unwrap(), InUse::Admin);
    let bad = versions.pin("hetero-table1", 9, 1).unwrap_err();
    assert_eq!(
        bad.to_string(),
        "option VERSION: version: invalid value '9': expected one of 1, 2, 3"
    );
    assert!(versions.pin("../etc", 1, 1).is_err());
    greenup_core::fs::remove_if_present(&versions.pin_path("hetero-table1").unwrap()).unwrap();
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

mod after_close {
    use super::num;
    use greenup::plan::{Algorithm, Estimate, Plan, PlannedNode, SearchInfo};
    use greenup::profile::refine::{NextVersion, RefineError, next_version, outcome_from_record};
    use greenup::profile::versions::{InUse, Versions};
    use greenup::site::Site;
    use greenup_core::quantity::{Ghz, Joules, Seconds};
    use greenup_proto::protocol::{Decision, JobRecord, JobState, NodeOutcome, OpenJob, Verdict};

    /// Refine after a close and store the new version, as greenupd does.
    fn refine_and_store(
        site: &Site,
        app: &str,
        records: &[JobRecord],
    ) -> Result<Option<NextVersion>, RefineError> {
        let next = next_version(site, app, records)?;
        if let Some(v) = &next {
            greenup_core::fs::write_files(&v.writes).unwrap();
        }
        Ok(next)
    }

    /// A closed hetero-table1 job on h001 (type1) and h073 (type3) at maximum frequency
    /// that took `factor` times its predicted 550 s; h073's energy comes from `h073_source`.
    fn record(job_id: u64, factor: f64, h073_source: &str) -> JobRecord {
        let node = |n: &str, t: &str, f: f64| PlannedNode {
            gpu_mhz: None,
            name: n.into(),
            node_type: t.into(),
            freq_ghz: greenup_core::quantity::Ghz(f),
        };
        let est = Estimate {
            time_s: greenup_core::quantity::Seconds(550.0),
            energy_j: greenup_core::quantity::Joules(26_000.0),
            avg_power_w: greenup_core::quantity::Watts(26_000.0 / 550.0),
        };
        let out = |n: &str, f: f64, e: f64, src: &str| NodeOutcome {
            restart_count: None,
            comm: None,
            job_id,
            node: n.into(),
            freq_ghz: Some(Ghz(f)),
            energy_j: Some(Joules(e)),
            elapsed_s: Some(Seconds(550.0 * factor)),
            source: Some(greenup::record::Source::parse(src)),
            restored: true,
            note: None,
            gpu: None,
            power: None,
        };
        JobRecord {
            job_id,
            uid: 1000,
            user: Some("alice".into()),
            partition: None,
            state: JobState::Closed,
            end: Some(greenup::record::JobEnd::Completed),
            opened_at: 0,
            closed_at: Some(600),
            earlier_runs: Vec::new(),
            earlier_run_count: 0,
            slurm_energy_j: None,
            request: OpenJob {
                restart_count: None,
                job_id,
                uid: 1000,
                user: None,
                partition: None,
                nodes: vec!["h001".into(), "h073".into()],
                nodelist: None,
                min_nodes: None,
                time_limit: greenup::record::TimeLimit::Unknown,
                policy: Some("max-dist".into()),
                profile: Some("hetero-table1".into()),
                energy_cap_j: None,
                power_cap_w: None,
                algorithm: None,
                account: None,
                granted_w: None,
            },
            decision: Decision {
                comm_dvfs: None,
                job_id,
                verdict: Verdict::Planned,
                reason: String::new(),
                policy: "max-dist".into(),
                monitor: false,
                profile: Some("hetero-table1".into()),
                profile_version: Some("1".into()),
                power_cap_w: None,
                reserved_w: greenup_core::quantity::Watts(50.0),
                plan: Some(Plan {
                    policy: "max-dist".into(),
                    feasible: true,
                    reason: String::new(),
                    node_count: 2,
                    nodes: vec![node("h001", "type1", 2.5), node("h073", "type3", 2.9)],
                    predicted: est,
                    baseline: est,
                    objective: 0.0,
                    search: SearchInfo {
                        algorithm: Algorithm::Exact,
                        candidates: 1,
                        elapsed_us: 1,
                        reused: false,
                    },
                    gpus: None,
                }),
                decided_at: 0,
                baseline_sample: false,
                clock_sample: false,
                refusal: None,
                budgets: Vec::new(),
                grant: None,
                guard: None,
                watts: Vec::new(),
            },
            outcomes: vec![
                out("h001", 2.5, 14_000.0, "rapl"),
                out("h073", 2.9, 14_500.0, h073_source),
            ],
        }
    }

    #[test]
    fn what_the_mpi_runtime_measured_sets_each_types_times() {
        let dir = tempfile::tempdir().unwrap();
        let mut site = greenup::site::load("etc/greenup.yaml").unwrap();
        site.daemon.store = dir.path().join("greenup.db");
        site.profile_dir = std::path::PathBuf::from("etc/profiles");
        let mut rec = record(4, 1.2, "rapl");
        let comm = |compute_s: f64, comm_s: f64| greenup::comm::NodeComm {
            ranks: 1,
            compute_s: greenup::comm::Seconds(compute_s),
            comm_s: greenup::comm::Seconds(comm_s),
            calls: 7,
            bytes: 4096,
            ..Default::default()
        };
        // Both at maximum frequency (S = 1) over the profile's 1000 iterations.
        rec.outcomes[0].comm = Some(comm(600.0, 50.0));
        rec.outcomes[1].comm = Some(comm(250.0, 400.0));
        let o = outcome_from_record(&rec, &site).unwrap();
        assert_eq!(
            (o.nodes[0].compute_s, o.nodes[0].comm_s),
            (Some(600.0), Some(50.0))
        );
        assert_eq!((o.nodes[1].calls, o.nodes[1].bytes), (Some(7), Some(4096)));
        let stored = refine_and_store(&site, "hetero-table1", &[rec])
            .unwrap()
            .unwrap();
        let versions = Versions::for_store(&site.daemon.store);
        let v = greenup::profile::Profile::load(
            &versions.path("hetero-table1", stored.version).unwrap(),
        )
        .unwrap();
        let types = &v.file.hetero.as_ref().unwrap().node_types;
        // T_cp = compute / iterations per type, not one wall-time factor for both (which
        // would give 0.6 and 0.4 for the compute times); T_cm is the run's communication
        // as paper 004 counts it, the least MPI time of any node (50 s / 1000), for both:
        // type3's other 350 s in MPI were its wait for type1.
        for (ty, cp, cm) in [("type1", 0.6, 0.05), ("type3", 0.25, 0.05)] {
            assert!((num(&types[ty].t_cp_s.value) - cp).abs() < 1e-9, "{ty}");
            assert!((num(&types[ty].t_cm_s.value) - cm).abs() < 1e-9, "{ty}");
        }
    }

    #[test]
    fn refine_after_close_stores_the_next_version() {
        let dir = tempfile::tempdir().unwrap();
        let mut site = greenup::site::load("etc/greenup.yaml").unwrap();
        site.daemon.store = dir.path().join("greenup.db");
        site.profile_dir = std::path::PathBuf::from("etc/profiles");

        // A model estimate is no measurement: the outcome is an outlier, nothing is stored.
        let unmeasured = record(1, 1.2, "model");
        let o = outcome_from_record(&unmeasured, &site).unwrap();
        assert_eq!(o.nodes[1].energy_j, None);
        assert_eq!(
            refine_and_store(&site, "hetero-table1", std::slice::from_ref(&unmeasured)).unwrap(),
            None
        );

        let stored = refine_and_store(
            &site,
            "hetero-table1",
            &[unmeasured, record(2, 1.2, "rapl")],
        )
        .unwrap()
        .unwrap();
        assert_eq!(stored.version, 2);
        assert_eq!(stored.model, "hetero");
        assert_eq!(stored.fit.samples, 1);
        let versions = Versions::for_store(&site.daemon.store);
        assert!(matches!(
            versions.in_use("hetero-table1").unwrap(),
            InUse::Refined { version: 2, .. }
        ));
        // The next refinement starts from version 2, which already predicts 660 s: times stay.
        let again = refine_and_store(&site, "hetero-table1", &[record(2, 1.2, "rapl")])
            .unwrap()
            .unwrap();
        assert_eq!(again.version, 3);
        let v3 =
            greenup::profile::Profile::load(&versions.path("hetero-table1", 3).unwrap()).unwrap();
        let t = &v3.file.hetero.as_ref().unwrap().node_types["type1"];
        assert!(
            (num(&t.t_cp_s.value) - 0.6).abs() < 1e-9,
            "{}",
            t.t_cp_s.value
        );
    }
}

/// An iso_energy profile `name` with no computation overheads (W_co = W_mo = 0): 4e11
/// instructions and 1e9 memory accesses at t_c = 2.5e-9 / f, written into a new directory.
fn iso_without_overheads(name: &str) -> (tempfile::TempDir, Profile) {
    let text = format!(
        "name: {name}\nversion: 1\niso_energy:\n  n: 1\n  machine:\n    t_c: \"2.5e-9 / f\"\n    t_m: 1e-7\n    t_msg: 2e-5\n    t_byte: 1e-9\n    p_idle: 100\n    dp_c: 20\n    dp_m: 5\n  application:\n    alpha: 0.9\n    w_c: 4e11\n    w_m: 1e9\n    w_co: 0\n    w_mo: 0\n    m: \"3 * p\"\n    b: \"1e6 * (p - 1)\"\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.yaml"));
    std::fs::write(&path, text).unwrap();
    let profile = Profile::load(&path).unwrap();
    (dir, profile)
}

/// A completed run on `p` type1 nodes at 2.5 GHz that took `time_s`, as predicted; the
/// MPI runtime measured each node's seconds outside and inside MPI (`per_node`) and its
/// calls and bytes (`counted`).
fn measured_run(
    job_id: u64,
    p: usize,
    time_s: f64,
    (compute_s, comm_s): (f64, f64),
    (calls, bytes): (u64, u64),
) -> Outcome {
    Outcome {
        gpu_locked: false,
        job_id,
        state: RunState::Completed,
        time_s,
        predicted_time_s: time_s,
        nodes: (0..p)
            .map(|i| NodeOutcome {
                gpu: None,
                name: format!("n{i}"),
                node_type: "type1".into(),
                freq_ghz: 2.5,
                energy_j: Some(1.0),
                compute_s: Some(compute_s),
                comm_s: Some(comm_s),
                calls: Some(calls),
                bytes: Some(bytes),
            })
            .collect(),
    }
}

/// An iso_energy profile whose overhead terms are wrong, refined from runs the MPI runtime
/// measured on 2, 3 and 4 nodes: the stored version holds the refitted laws as expressions,
/// loads as a profile, and its fit record says what was refitted.
#[test]
fn iso_energy_overheads_are_written_as_expressions_and_the_fit_says_so() {
    let (dir, profile) = iso_without_overheads("iso-wrong");
    let site = greenup::site::load("etc/greenup.yaml").unwrap();
    // Truth: W_co = 1e10 (p - 1), M = 100 p (p - 1), B = 1e11 (p - 1), alpha 0.95, at 2.5 GHz.
    let run = |job_id: u64, p: usize| {
        let pf = p as f64;
        let compute = (4e11 + 1e10 * (pf - 1.0)) * 1e-9 + 1e9 * 1e-7;
        let (m, b) = (100.0 * pf * (pf - 1.0), 1e11 * (pf - 1.0));
        let t = 0.95 * (compute + m * 2e-5 + b * 1e-9) / pf;
        let per_node = (compute / pf, t - compute / pf);
        measured_run(job_id, p, t, per_node, ((m / pf) as u64, (b / pf) as u64))
    };
    let r = refine_profile(&profile, &site, &[run(1, 2), run(2, 3), run(3, 4)]).unwrap();
    let note = r.note.clone().unwrap();
    assert!(
        note.starts_with("overheads from 3 runtime-measured runs on p = 2, 3, 4: w_co p - 1"),
        "{note}"
    );
    assert!(note.contains("w_mo kept"), "{note}");
    let app = &r.file.iso_energy.as_ref().unwrap().application;
    let text_of = |p: &Param| match p {
        Param::Text(t) => t.clone(),
        other => panic!("expected an expression, found {other}"),
    };
    assert_eq!(text_of(&app.w_co.value), "1.000000e10 * (p - 1)");
    assert_eq!(text_of(&app.m.value), "1.000000e2 * (p * (p - 1))");
    assert_eq!(text_of(&app.b.value), "1.000000e11 * (p - 1)");
    assert!((num(&app.alpha.value) - 0.95).abs() < 1e-9);
    let versions = Versions::new(dir.path().join("versions"));
    let fit = r.fit();
    let v = store(&versions, r.file, fit.clone());
    assert_eq!(versions.fit("iso-wrong", v), Some(fit));
    let stored = Profile::load(&versions.path("iso-wrong", v).unwrap()).unwrap();
    let m = &stored.iso_energy().unwrap().app.m;
    assert!((m.eval(&[1.0, 8.0]).unwrap() - 5600.0).abs() < 1e-6);
}

/// The number a refined profile value holds; refinement writes numbers only.
fn num(p: &Param) -> f64 {
    match p {
        Param::Number(x) => *x,
        other => panic!("expected a number, found {other}"),
    }
}

/// A host faster than the profile says: every run's time outside MPI falls short of the
/// profile's sequential work, so the overhead it measures is negative. Extra work cannot
/// be negative: W_co is refitted to 0 (alpha takes up the shortfall), the refined model
/// predicts positive time and energy at every node count, and it refines again. A
/// negative W_co once made the next refinement fail on every run (Ep < 0 at p = 4).
#[test]
fn a_host_faster_than_the_profile_never_refits_negative_overheads() {
    let (dir, profile) = iso_without_overheads("iso-fast");
    let site = greenup::site::load("etc/greenup.yaml").unwrap();
    // The sequential work is 4e11 x 1e-9 + 1e9 x 1e-7 = 500 s at 2.5 GHz; the host does it
    // in 40 % of that, less on more nodes: the measured overhead is negative and grows so.
    let run = |job_id: u64, p: usize| {
        let pf = p as f64;
        let compute = 500.0 * (0.4 - 0.05 * pf);
        let t = compute / pf + 1.0;
        measured_run(job_id, p, t, (compute / pf, 1.0), (3, 1_000_000))
    };
    let runs = [run(1, 2), run(2, 3), run(3, 4)];
    let r = refine_profile(&profile, &site, &runs).unwrap();
    let note = r.note.clone().unwrap();
    assert!(note.starts_with("overheads from 3"), "{note}");
    // The refined version refines again from the same runs.
    let versions = Versions::new(dir.path().join("versions"));
    let fit = r.fit();
    let v = store(&versions, r.file, fit);
    let stored = Profile::load(&versions.path("iso-fast", v).unwrap()).unwrap();
    let iso = stored.iso_energy().unwrap();
    for p in 1..=64usize {
        let w_co = iso.app.w_co.eval(&[1.0, p as f64]).unwrap();
        assert!(w_co >= 0.0, "w_co at p = {p} is {w_co}: {note}");
        let t = iso.wall_time_s(1.0, p, 2.5).unwrap();
        assert!(t > 0.0, "time at p = {p} is {t}: {note}");
    }
    refine_profile(&stored, &site, &runs).expect("the refined profile refines again");
}

/// Store a refined file as the next version, as greenupd does; returns its number.
fn store(
    versions: &Versions,
    file: greenup::profile::ProfileFile,
    fit: greenup::profile::versions::Fit,
) -> u64 {
    let new = versions.next(file, &fit).unwrap();
    greenup_core::fs::write_files(&new.writes).unwrap();
    new.version
}
