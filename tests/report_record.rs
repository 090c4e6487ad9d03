//! Reports built from what greenupd stores: statuses, sources and warnings
//! follow the node outcomes, and nothing unmeasured becomes a number.

use std::collections::BTreeMap;

use greenup::model::Predictor;
use greenup::model::hetero::{Hetero, TypeTimes};
use greenup::plan::{Algorithm, Estimate, Plan, PlannedNode, SearchInfo};
use greenup::report::accounting::SlurmEnergy;
use greenup::report::record::{Context, from_record};
use greenup::report::{self, Applied, Source, Warning};
use greenup::site::{NodeType, PowerModel};
use greenup_core::quantity::{Ghz, Joules, Seconds, Watts};
use greenup_proto::protocol::{Decision, JobRecord, JobState, NodeOutcome, OpenJob, Verdict};

fn outcome(node: &str, f: f64, e: Option<f64>, source: &str, note: Option<&str>) -> NodeOutcome {
    NodeOutcome {
        restart_count: None,
        comm: None,
        job_id: 7,
        node: node.into(),
        freq_ghz: Some(Ghz(f)),
        energy_j: e.map(Joules),
        elapsed_s: Some(Seconds(100.0)),
        source: Some(greenup::record::Source::parse(source)),
        restored: true,
        note: note.map(str::to_string),
        gpu: None,
        power: None,
    }
}

/// The nodes' type: 1.5 to 2.5 GHz, 20 W dynamic and 4 W static at 2.5 GHz.
fn type1() -> NodeType {
    NodeType {
        name: "type1".into(),
        freqs_ghz: vec![1.5, 2.0, 2.5],
        power: PowerModel::AtMax {
            dynamic_w: 20.0,
            static_w: 4.0,
            gamma: 3.0,
        },
    }
}

fn record(verdict: Verdict, outcomes: Vec<NodeOutcome>) -> JobRecord {
    let est = |t: f64, e: f64| Estimate {
        time_s: greenup_core::quantity::Seconds(t),
        energy_j: greenup_core::quantity::Joules(e),
        avg_power_w: greenup_core::quantity::Watts(e / t),
    };
    let node = |n: &str, f: f64| PlannedNode {
        gpu_mhz: None,
        name: n.into(),
        node_type: "type1".into(),
        freq_ghz: greenup_core::quantity::Ghz(f),
    };
    let plan = Plan {
        policy: "min-energy".into(),
        feasible: true,
        reason: String::new(),
        node_count: 3,
        nodes: vec![node("n1", 2.0), node("n2", 2.0), node("n3", 2.0)],
        predicted: est(100.0, 9_000.0),
        baseline: est(80.0, 10_000.0),
        objective: 9_000.0,
        search: SearchInfo {
            algorithm: Algorithm::Exact,
            candidates: 10,
            elapsed_us: 5,
            reused: false,
        },
        gpus: None,
    };
    let request = OpenJob {
        restart_count: None,
        job_id: 7,
        uid: 1000,
        user: Some("alice".into()),
        partition: Some("batch".into()),
        nodes: vec!["n1".into(), "n2".into(), "n3".into(), "n4".into()],
        nodelist: None,
        min_nodes: None,
        time_limit: greenup::record::TimeLimit::Seconds(3600.0),
        policy: Some("min-energy".into()),
        profile: Some("lammps".into()),
        energy_cap_j: Some(greenup_core::quantity::Joules(20_000.0)),
        power_cap_w: None,
        algorithm: None,
        account: None,
        granted_w: None,
    };
    JobRecord {
        job_id: 7,
        uid: 1000,
        user: Some("alice".into()),
        partition: Some("batch".into()),
        state: JobState::Closed,
        end: Some(greenup::record::JobEnd::Completed),
        opened_at: 1_000,
        closed_at: Some(1_100),
        earlier_runs: Vec::new(),
        earlier_run_count: 0,
        slurm_energy_j: None,
        request,
        decision: Decision {
            comm_dvfs: None,
            job_id: 7,
            verdict,
            reason: "site budget left 300 W".into(),
            policy: "min-energy".into(),
            monitor: false,
            profile: Some("lammps".into()),
            profile_version: Some("2".into()),
            power_cap_w: Some(greenup_core::quantity::Watts(300.0)),
            reserved_w: greenup_core::quantity::Watts(90.0),
            plan: Some(plan),
            decided_at: 1_000,
            baseline_sample: false,
            clock_sample: false,
            refusal: None,
            budgets: Vec::new(),
            grant: None,
            guard: None,
            watts: Vec::new(),
        },
        outcomes,
    }
}

#[test]
fn statuses_sources_and_warnings() {
    let rec = record(
        Verdict::BudgetLimited,
        vec![
            outcome("n1", 2.0, Some(3_000.0), "rapl", None),
            outcome("n2", 2.6, Some(3_500.0), "rapl", None),
            // A model estimate is not a measurement.
            outcome(
                "n3",
                2.0,
                Some(3_100.0),
                "model",
                Some("shared node, per-core DVFS disabled"),
            ),
        ],
    );
    let r = from_record(&rec, &Context::default());
    assert_eq!(r.state, report::RunState::Completed);
    assert_eq!(r.allocated_nodes, 4);
    assert_eq!(r.nodes.len(), 3);
    assert_eq!(r.nodes[0].applied, Applied::Applied);
    assert_eq!(
        r.nodes[1].applied,
        Applied::Failed("ran at 2.60 GHz".into())
    );
    assert_eq!(r.nodes[2].applied, Applied::SharedNode);
    assert_eq!(r.nodes[2].source, Source::Unmeasured);
    assert_eq!(r.nodes[2].measured_energy_j, None);
    assert_eq!(r.measured.energy_j, None, "one node unmeasured: no total");
    assert_eq!(r.measured.time_s, Some(100.0));
    assert_eq!(r.caps.power_w, Some(300.0));
    assert_eq!(r.profile_version, 2);
    assert!(
        r.warnings
            .contains(&Warning::BudgetLimited("site budget left 300 W".into()))
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| matches!(w, Warning::NotApplied(s) if s.contains("n2") && s.contains("n3")))
    );
    assert!(
        r.warnings
            .iter()
            .any(|w| matches!(w, Warning::Unmeasured(s) if s.starts_with("n3")))
    );
    assert_eq!(r.slurm_energy, SlurmEnergy::NotAsked);
    let page = report::text::job_report(&r);
    assert!(page.contains("ConsumedEnergy not available"));
}

#[test]
fn all_measured_with_a_predictor() {
    let rec = record(
        Verdict::Planned,
        vec![
            outcome("n1", 2.0, Some(3_000.0), "rapl", None),
            outcome("n2", 2.0, Some(3_000.0), "rapl", None),
            outcome("n3", 2.0, Some(3_300.0), "slurm", None),
        ],
    );
    let site_types = BTreeMap::from([("type1".to_string(), type1())]);
    let model = Hetero {
        iterations: 10.0,
        types: BTreeMap::from([(
            "type1".into(),
            TypeTimes {
                p_dyn_w: Some(20.0),
                p_static_w: Some(4.0),
                ..TypeTimes::timed(8.0, 2.0)
            },
        )]),
        site_types,
        steps: None,
        time_choice: None,
    };
    let ctx = Context {
        predictor: Some(&model as &dyn Predictor),
        ..Context::default()
    };
    let r = from_record(&rec, &ctx);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.model, "hetero");
    assert_eq!(r.measured.energy_j, Some(9_300.0));
    assert_eq!(r.nodes[2].source, Source::Slurm);
    // Per node at 2.0 of 2.5 GHz: S = 1.25, compute 8 * 1.25 * 10 = 100 s, dynamic
    // 20 * 1.25^-3 * 100 = 1024 J, wall 100 + 2 * 10 = 120 s, static 4 * 120 = 480 J.
    let p = r.nodes[0].predicted_energy_j.unwrap();
    assert!((p - 1_504.0).abs() < 1e-6, "{p}");
    // The measured energy error uses the stored plan's prediction (9 kJ), not the model's.
    assert!((r.energy_error_pct().unwrap() - (9_000.0 - 9_300.0) / 9_300.0 * 100.0).abs() < 1e-9);
}

#[test]
fn unchanged_jobs_are_fallbacks_with_no_invented_prediction() {
    let mut rec = record(
        Verdict::Unchanged,
        vec![outcome("n1", 2.5, Some(3_000.0), "rapl", None)],
    );
    rec.decision.reason = "greenupd could not load profile lammps".into();
    let r = from_record(&rec, &Context::default());
    assert_eq!(r.nodes.len(), 4, "every allocated node, as it ran");
    assert!(r.nodes.iter().all(|n| n.applied == Applied::Fallback));
    assert!(r.predicted.energy_j.0.is_nan());
    assert!(r.warnings.iter().any(|w| matches!(w, Warning::Fallback(_))));
    let page = report::text::job_report(&r);
    assert!(!page.contains("NaN"), "{page}");
}

#[test]
fn a_clock_sample_reads_as_one_and_not_as_a_baseline() {
    let mut rec = record(
        Verdict::Planned,
        vec![outcome("n1", 2.0, Some(3_000.0), "rapl", None)],
    );
    rec.decision.policy = "monitor".into();
    rec.decision.clock_sample = true;
    let r = from_record(&rec, &Context::default());
    assert!(
        r.clock_sample && !r.baseline_run && !r.baseline_sample,
        "{r:?}"
    );
    let page = report::text::job_report(&r);
    let line = page
        .lines()
        .find(|l| l.starts_with("Measured"))
        .unwrap_or_default();
    assert!(
        line.contains("this run is a clock sample") && line.contains("not a baseline"),
        "{page}"
    );
    // The same job's record without the mark reads as an ordinary run.
    rec.decision.clock_sample = false;
    let page = report::text::job_report(&from_record(&rec, &Context::default()));
    assert!(!page.contains("clock sample"), "{page}");
}

#[test]
fn comm_saved_is_estimated_from_the_site_power_model_and_the_node_cpus() {
    let comm = |cpus: Option<u32>| greenup::comm::NodeComm {
        ranks: 2,
        compute_s: Seconds(80.0),
        comm_s: Seconds(20.0),
        low_s: Seconds(10.0),
        cpus,
        ..Default::default()
    };
    let with = |o: NodeOutcome, cpus| NodeOutcome {
        restart_count: None,
        comm: Some(comm(cpus)),
        ..o
    };
    let mut rec = record(
        Verdict::Planned,
        vec![
            with(outcome("n1", 2.0, Some(3_000.0), "rapl", None), Some(4)),
            // An older node's epilog did not count its CPUs: no estimate.
            with(outcome("n2", 2.0, Some(3_000.0), "rapl", None), None),
        ],
    );
    let mut site = greenup::site::load("etc/greenup.yaml").unwrap();
    site.node_types.insert("type1".into(), type1());
    let ctx = Context {
        site: Some(&site),
        ..Context::default()
    };
    // By hand, low gear unset: the type's lowest, 1.5 GHz. P_dyn(2.0) = 20 × 0.8³ = 10.24 W,
    // P_dyn(1.5) = 20 × 0.6³ = 4.32 W; 2 ranks × 10 s × 5.92 W / 4 CPUs = 29.6 J.
    let r = from_record(&rec, &ctx);
    let saved = r.nodes[0].mpi.unwrap().saved_j.unwrap();
    assert!((saved - 29.6).abs() < 1e-9, "{saved}");
    assert_eq!(r.nodes[1].mpi.unwrap().saved_j, None);
    let page = report::text::job_report(&r);
    let row = |n: &str| {
        page.lines()
            .find(|l| l.split_whitespace().any(|w| w == n))
            .unwrap()
            .to_string()
    };
    assert!(row("n1").contains("~29.6 J"), "{page}");
    assert!(
        row("n2").trim_end_matches(['|', '│', ' ']).ends_with('-'),
        "{page}"
    );
    // The policy's low gear, 1.0 GHz: P_dyn = 20 × 0.4³ = 1.28 W; 20 × 8.96 / 4 = 44.8 J.
    rec.decision.comm_dvfs = Some(greenup::comm::CommDvfs {
        low_ghz: Some(Ghz(1.0)),
        ..Default::default()
    });
    let saved = from_record(&rec, &ctx).nodes[0]
        .mpi
        .unwrap()
        .saved_j
        .unwrap();
    assert!((saved - 44.8).abs() < 1e-9, "{saved}");
    // Without the site there is no power model: no estimate.
    assert_eq!(
        from_record(&rec, &Context::default()).nodes[0]
            .mpi
            .unwrap()
            .saved_j,
        None
    );
}

#[test]
fn the_report_says_which_nodes_held_their_power_limit() {
    let with = |node: &str, asked_w: f64, held_w: Option<f64>, note: Option<&str>| {
        let mut o = outcome(node, 2.0, Some(3_000.0), "rapl", None);
        o.power = Some(greenup::record::NodePower {
            asked_w: Watts(asked_w),
            held_w: held_w.map(Watts),
            note: note.map(str::to_string),
        });
        o
    };
    let rec = record(
        Verdict::Planned,
        vec![
            with("n1", 120.0, Some(120.0), None),
            with(
                "n2",
                120.0,
                None,
                Some("constraint_0_power_limit_uw: write failed"),
            ),
            // A decision from before power limits: nothing asked, nothing said.
            outcome("n3", 2.0, Some(3_000.0), "rapl", None),
        ],
    );
    let r = from_record(&rec, &Context::default());
    assert_eq!(
        r.nodes[0].power.as_ref().unwrap().held_w,
        Some(Watts(120.0))
    );
    assert_eq!(r.nodes[2].power, None);
    let page = report::text::job_report(&r);
    assert!(
        page.contains(
            "Power       RAPL limit held on 1 of 2 nodes: n1 120.0 W; not held on n2 asked 120.0 W: constraint_0_power_limit_uw: write failed\n"
        ),
        "{page}"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["nodes"][1]["power"]["asked_w"], 120.0);
    assert!(json["nodes"][1]["power"].get("held_w").is_none());
    // Without any limit asked, the page has no power line.
    let plain = record(
        Verdict::Planned,
        vec![outcome("n1", 2.0, Some(3_000.0), "rapl", None)],
    );
    let page = report::text::job_report(&from_record(&plain, &Context::default()));
    assert!(!page.contains("RAPL limit"), "{page}");
}

#[test]
fn the_caps_say_a_job_had_no_time_limit_and_claim_nothing_of_one_nobody_knew() {
    use greenup::record::TimeLimit;
    let caps_line = |limit| {
        let mut rec = record(Verdict::Planned, Vec::new());
        rec.request.time_limit = limit;
        let r = from_record(&rec, &Context::default());
        let text = greenup::report::text::job_report(&r);
        let line = text
            .lines()
            .find(|l| l.contains("caps: "))
            .unwrap_or_else(|| panic!("no caps line in:\n{text}"))
            .to_string();
        let json = serde_json::to_value(&r).unwrap();
        (line, json["caps"]["time_limit_s"].clone())
    };
    let (line, json) = caps_line(TimeLimit::Seconds(3600.0));
    assert!(
        line.ends_with("caps: energy 20.00 kJ, power 300.0 W, time limit 01:00:00"),
        "{line}"
    );
    assert_eq!(json, serde_json::json!(3600.0));
    let (line, json) = caps_line(TimeLimit::Unlimited);
    assert!(line.ends_with("power 300.0 W, no time limit"), "{line}");
    assert_eq!(json, serde_json::json!(31_536_000.0));
    let (line, json) = caps_line(TimeLimit::Unknown);
    assert!(
        line.ends_with("caps: energy 20.00 kJ, power 300.0 W"),
        "{line}"
    );
    assert_eq!(json, serde_json::Value::Null);
}

#[test]
fn a_gpu_plans_report_compares_the_models_part_with_rapl_and_keeps_the_gpus_beside() {
    // The plan counted 3 x 400 W of GPUs over its 100 s (and 4 x 400 W over the
    // baseline's 80 s): 120 kJ and 128 kJ within its estimates.
    let mut rec = record(
        Verdict::Planned,
        vec![
            outcome("n1", 2.0, Some(3_000.0), "rapl", None),
            outcome("n2", 2.0, Some(3_000.0), "rapl", None),
            outcome("n3", 2.0, Some(3_000.0), "rapl", None),
        ],
    );
    let plan = rec.decision.plan.as_mut().unwrap();
    plan.predicted.energy_j.0 += 120_000.0;
    plan.predicted.avg_power_w.0 += 1_200.0;
    plan.baseline.energy_j.0 += 128_000.0;
    plan.baseline.avg_power_w.0 += 1_600.0;
    plan.gpus = Some(greenup::plan::PlannedGpus {
        planned_w: greenup_core::quantity::Watts(1_200.0),
        baseline_w: greenup_core::quantity::Watts(1_600.0),
    });
    let r = from_record(&rec, &Context::default());
    assert_eq!(r.predicted.energy_j.0, 9_000.0);
    assert_eq!(r.predicted.avg_power_w.0, 90.0);
    assert_eq!(r.baseline.energy_j.0, 10_000.0);
    // RAPL measured 9 kJ: the models' 9 kJ, exactly.
    assert_eq!(r.energy_error_pct(), Some(0.0));
}

#[test]
fn the_guard_says_one_line_from_the_nodes_or_else_from_the_decision() {
    use greenup::comm::{GuardOff, GuardTerms, NodeComm, NodeGuard};
    let guarded = |g: Option<NodeGuard>| NodeOutcome {
        restart_count: None,
        comm: Some(NodeComm {
            ranks: 2,
            compute_s: Seconds(80.0),
            comm_s: Seconds(20.0),
            guard: g.map(Box::new),
            ..Default::default()
        }),
        ..outcome("n1", 2.0, Some(3_000.0), "rapl", None)
    };
    let terms = GuardTerms {
        max_slowdown: 0.1,
        baseline_rate: Some(100.0),
        off: None,
    };
    // No promise: no line.
    let rec = record(Verdict::Planned, vec![guarded(None)]);
    assert_eq!(from_record(&rec, &Context::default()).guard, None);
    // Two nodes raised, from 2.0 to 3.0 GHz, the first at 12.5 s; the longest 40 s.
    let raised = |at: f64, for_s: f64| NodeGuard {
        armed: 2,
        acted: 1,
        first_s: Some(Seconds(at)),
        from_khz: Some(2_000_000),
        to_khz: Some(3_000_000),
        raised_s: Seconds(for_s),
        off: None,
    };
    let mut rec = record(
        Verdict::Planned,
        vec![
            guarded(Some(raised(20.0, 40.0))),
            NodeOutcome {
                restart_count: None,
                node: "n2".into(),
                ..guarded(Some(raised(12.5, 30.0)))
            },
        ],
    );
    rec.decision.guard = Some(terms);
    let r = from_record(&rec, &Context::default());
    assert_eq!(
        r.guard.as_deref(),
        Some(
            "guard raised 2 nodes' clocks at 12.5 s (from 2.00 to 3.00 GHz) for 40.0 s; its energy cost is not separated from the job's"
        )
    );
    assert!(report::text::job_report(&r).contains("Guard       guard raised 2 nodes'"));
    // Watched and never acted.
    let quiet = NodeGuard {
        armed: 2,
        ..NodeGuard::default()
    };
    let mut rec = record(Verdict::Planned, vec![guarded(Some(quiet))]);
    rec.decision.guard = Some(terms);
    assert_eq!(
        from_record(&rec, &Context::default()).guard.as_deref(),
        Some("promise held by the model: the guard watched and never acted")
    );
    // No baseline: the decision's terms say so, nothing ran on the nodes.
    let mut rec = record(Verdict::Planned, vec![guarded(None)]);
    rec.decision.guard = Some(GuardTerms {
        baseline_rate: None,
        off: Some(GuardOff::NoBaseline),
        ..terms
    });
    assert_eq!(
        from_record(&rec, &Context::default()).guard.as_deref(),
        Some("guard off: no baseline")
    );
    // Armed, and the runtime measured the steps, but none was given the guard's terms.
    rec.decision.guard = Some(terms);
    assert!(
        from_record(&rec, &Context::default())
            .guard
            .unwrap()
            .starts_with("no in-job guard ran: the MPI steps ran greenup's runtime without")
    );
    // Armed, but no step preloaded the runtime (not MPI): the decision alone.
    let mut rec = record(
        Verdict::Planned,
        vec![outcome("n1", 2.0, Some(3_000.0), "rapl", None)],
    );
    rec.decision.guard = Some(terms);
    assert!(
        from_record(&rec, &Context::default())
            .guard
            .unwrap()
            .starts_with("no in-job guard ran: no MPI step")
    );
}

#[test]
fn the_report_names_the_watts_the_decision_planned_with_and_their_source() {
    use greenup::record::{PowerSource, TypeWatts};
    let outcomes = vec![
        outcome("n1", 2.0, Some(3_000.0), "rapl", None),
        outcome("n2", 2.0, Some(3_000.0), "rapl", None),
        outcome("n3", 2.0, Some(3_000.0), "rapl", None),
    ];
    // A decision stored before it recorded its watts says nothing of them.
    let plain = record(Verdict::Planned, outcomes.clone());
    let r = from_record(&plain, &Context::default());
    assert!(r.watts.is_empty());
    assert!(!report::text::job_report(&r).contains("Watts"));
    assert!(!report::table::job_json(&r).unwrap().contains("\"watts\""));

    let mut rec = record(Verdict::Planned, outcomes);
    rec.decision.watts = vec![
        TypeWatts {
            node_type: "epyc".into(),
            freq_ghz: Ghz(2.2),
            busy_w: Watts(233.9),
            idle_w: Watts(77.0),
            source: PowerSource::Measured { runs: 3 },
            node_factors: BTreeMap::from([("n3".to_string(), 1.057)]),
        },
        TypeWatts {
            node_type: "xeon".into(),
            freq_ghz: Ghz(2.0),
            busy_w: Watts(192.0),
            idle_w: Watts(48.0),
            source: PowerSource::Site,
            node_factors: BTreeMap::new(),
        },
    ];
    let r = from_record(&rec, &Context::default());
    let page = report::text::job_report(&r);
    assert!(
        page.contains(
            "Decision    3 of 4 allocated nodes\n\
             Watts       epyc at 2.20 GHz: 233.9 W busy, 77.0 W idle (measured, 3 runs; n3 x1.057); \
             xeon at 2.00 GHz: 192.0 W busy, 48.0 W idle (site)\n"
        ),
        "{page}"
    );
    // The JSON form carries the same values, each source by its kind.
    let json: serde_json::Value =
        serde_json::from_str(&report::table::job_json(&r).unwrap()).unwrap();
    assert_eq!(
        json["watts"],
        serde_json::json!([
            {"type": "epyc", "freq_ghz": 2.2, "busy_w": 233.9, "idle_w": 77.0,
             "source": {"kind": "measured", "runs": 3}, "node_factors": {"n3": 1.057}},
            {"type": "xeon", "freq_ghz": 2.0, "busy_w": 192.0, "idle_w": 48.0,
             "source": {"kind": "site"}}
        ])
    );
}

#[test]
fn a_requeued_jobs_report_shows_each_earlier_run_and_the_energy_of_all_runs() {
    use greenup::record::JobEnd;
    use greenup::report::RunState;
    use greenup::report::text::{fmt_energy, job_report};
    let measured = |e: f64| {
        ["n1", "n2", "n3"]
            .iter()
            .map(|n| outcome(n, 2.0, Some(e), "rapl", None))
            .collect::<Vec<_>>()
    };
    let mut first = record(Verdict::Planned, measured(1_000.0));
    first.end = Some(JobEnd::Failed);
    first.closed_at = Some(1_050);
    first.request.restart_count = Some(0);
    let mut rec = record(Verdict::Planned, measured(2_000.0));
    rec.request.restart_count = Some(1);
    rec.earlier_runs = vec![first.clone()];

    let r = from_record(&rec, &Context::default());
    assert_eq!(r.earlier_runs.len(), 1);
    let e = &r.earlier_runs[0];
    assert_eq!((e.run, e.restart_count), (1, Some(0)));
    assert_eq!(e.nodes, "n[1-4]");
    assert_eq!(
        (e.policy.as_str(), e.clocks_ghz.as_slice()),
        ("min-energy", &[2.0][..])
    );
    assert_eq!(
        (e.state, e.reclaimed, e.end_unix),
        (RunState::Failed, false, Some(1_050))
    );
    assert_eq!(e.measured.energy_j, Some(3_000.0));
    assert_eq!(e.measured.time_s, Some(100.0));
    let all = r.all_runs.expect("a requeued job has a total of its runs");
    assert_eq!(
        (all.runs, all.energy_j, all.time_s),
        (2, Some(9_000.0), Some(200.0))
    );
    // The current run's own figures stay its own.
    assert_eq!(r.measured.energy_j, Some(6_000.0));

    let text = job_report(&r);
    assert!(
        text.lines().next().unwrap().ends_with("  run 2 (requeued)"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("  run 1 (restart 0)"))
        .unwrap_or_else(|| panic!("no line of the first run in:\n{text}"));
    for part in [
        "n[1-4]",
        "min-energy at 2.00 GHz",
        "FAILED",
        &fmt_energy(3_000.0),
    ] {
        assert!(line.contains(part), "{part} missing from '{line}'");
    }
    assert!(
        text.contains(&format!(
            "All runs    2 runs: energy {}",
            fmt_energy(9_000.0)
        )),
        "{text}"
    );
    // JSON carries them too.
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["all_runs"]["energy_j"], 9_000.0);
    assert_eq!(json["earlier_runs"][0]["restart_count"], 0);

    // A run reclaimed with nodes that never reported: the job's total is unknown, not
    // a partial sum.
    let mut lost = record(Verdict::Planned, measured(1_000.0)[..1].to_vec());
    lost.state = JobState::Reclaimed;
    rec.earlier_runs.push(lost);
    let r = from_record(&rec, &Context::default());
    assert!(r.earlier_runs[1].reclaimed);
    assert_eq!(r.earlier_runs[1].measured.energy_j, None);
    assert_eq!(r.all_runs.unwrap().energy_j, None);
    let text = job_report(&r);
    assert!(
        text.contains("  run 2  n[1-4]  min-energy at 2.00 GHz  RECLAIMED  energy unmeasured"),
        "{text}"
    );
    assert!(
        text.contains("All runs    3 runs: energy unmeasured"),
        "{text}"
    );

    // A job Slurm ran once reports as before: no word of runs.
    let once = from_record(
        &record(Verdict::Planned, measured(2_000.0)),
        &Context::default(),
    );
    assert!(once.earlier_runs.is_empty() && once.all_runs.is_none());
    let text = job_report(&once);
    for word in ["requeued", "Earlier runs", "All runs"] {
        assert!(!text.contains(word), "{word} in:\n{text}");
    }
    let json = serde_json::to_value(&once).unwrap();
    assert!(json.get("earlier_runs").is_none() && json.get("all_runs").is_none());
}
