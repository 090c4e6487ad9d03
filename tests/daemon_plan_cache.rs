//! greenupd reuses a plan for a later job of the same shape (node types in the same
//! order, same policy, caps and limits). The reused plan must be exactly the plan a
//! fresh search makes for the later job's own nodes, and a job of another shape must
//! be searched afresh. The oracle is `plan_with` run directly, without any cache.

use greenup::plan::{NodeRequest, Plan, PlanRequest, plan_with};
use greenup::policy::PolicySet;
use greenup::profile::Profile;
use greenup::site::Site;
use greenup_daemon::decide::Decider;
use greenup_proto::protocol::OpenJob;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The example site (paper 004's four Table I types, h001-h144), with its store in a
/// fresh directory so no refined profile version from elsewhere is picked up.
fn site(store: &std::path::Path) -> Site {
    let mut site = greenup::site::load(format!("{ROOT}/etc/greenup.yaml")).unwrap();
    site.daemon.store = store.join("greenup.db");
    site
}

fn job(id: u64, nodes: &[&str], policy: &str, min: Option<usize>, cap: Option<f64>) -> OpenJob {
    OpenJob {
        restart_count: None,
        job_id: id,
        uid: 0,
        user: None,
        partition: None,
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        nodelist: None,
        min_nodes: min,
        time_limit: greenup::record::TimeLimit::Unknown,
        policy: Some(policy.into()),
        profile: Some("hetero-table1".into()),
        energy_cap_j: None,
        power_cap_w: cap.map(greenup_core::quantity::Watts),
        algorithm: None,
        account: None,
        granted_w: None,
    }
}

/// The plan a search without any cache makes for `req`.
fn fresh(site: &Site, req: &OpenJob) -> Plan {
    let profile = Profile::load(std::path::Path::new(&format!(
        "{ROOT}/etc/profiles/hetero-table1.yaml"
    )))
    .unwrap();
    let predictor = profile.predictor(site).unwrap();
    let policies = PolicySet::load(&site.policy_dirs).unwrap();
    let pr = PlanRequest {
        policy: req.policy.clone().unwrap(),
        nodes: NodeRequest::List {
            names: req.nodes.clone(),
            min: req.min_nodes,
        },
        partition: None,
        energy_cap_j: None,
        power_cap_w: req.power_cap_w,
        time_limit: greenup::record::TimeLimit::Unknown,
        algorithm: Default::default(),
        max_freq_ghz: None,
    };
    plan_with(
        site,
        predictor.as_ref(),
        policies.get(&pr.policy).unwrap(),
        &pr,
    )
    .unwrap()
}

fn decided(decider: &Decider, site: &Site, req: &OpenJob) -> Plan {
    decider.decide(site, req, None).unwrap().plan.unwrap()
}

/// Everything but how the search went.
fn assert_same_plan(got: &Plan, want: &Plan) {
    assert_eq!(got.nodes, want.nodes);
    assert_eq!(got.node_count, want.node_count);
    assert_eq!(got.predicted, want.predicted);
    assert_eq!(got.baseline, want.baseline);
    assert_eq!(got.objective, want.objective);
    assert_eq!((got.feasible, &got.reason), (want.feasible, &want.reason));
    assert_eq!(got.search.candidates, want.search.candidates);
}

// Types in order: 1, 2, 3, 4, 1, 3 for both jobs; different names.
const A: [&str; 6] = ["h001", "h037", "h073", "h109", "h002", "h074"];
const B: [&str; 6] = ["h030", "h060", "h100", "h140", "h031", "h101"];
// The same multiset of types in another order.
const C: [&str; 6] = ["h037", "h001", "h073", "h109", "h002", "h074"];

#[test]
fn a_job_of_the_same_shape_gets_the_plan_a_fresh_search_makes_for_its_own_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let site = site(dir.path());
    let decider = Decider::new(&site).unwrap();
    for (policy, min, cap) in [
        ("max-dist", None, None),
        ("min-energy", None, None),
        ("min-energy", Some(3), None),
        ("min-time", Some(2), Some(60.0)),
    ] {
        let a = job(1, &A, policy, min, cap);
        let b = job(2, &B, policy, min, cap);
        let first = decided(&decider, &site, &a);
        assert!(!first.search.reused, "{policy}: the first job is searched");
        assert_same_plan(&first, &fresh(&site, &a));

        let second = decided(&decider, &site, &b);
        assert!(second.search.reused, "{policy}: the same shape is reused");
        assert_same_plan(&second, &fresh(&site, &b));
        assert!(second.nodes.iter().all(|n| B.contains(&n.name.as_str())));
    }
}

#[test]
fn another_order_of_types_or_another_cap_is_searched_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let site = site(dir.path());
    let decider = Decider::new(&site).unwrap();
    decided(&decider, &site, &job(1, &A, "min-energy", Some(3), None));

    let c = job(2, &C, "min-energy", Some(3), None);
    let other_order = decided(&decider, &site, &c);
    assert!(!other_order.search.reused);
    assert_same_plan(&other_order, &fresh(&site, &c));

    let capped = job(3, &B, "min-energy", Some(3), Some(70.0));
    let other_cap = decided(&decider, &site, &capped);
    assert!(!other_cap.search.reused);
    assert_same_plan(&other_cap, &fresh(&site, &capped));
}

#[test]
fn a_changed_profile_file_is_searched_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let mut site = site(dir.path());
    let profiles = dir.path().join("profiles-admin");
    std::fs::create_dir(&profiles).unwrap();
    let file = profiles.join("hetero-table1.yaml");
    let text = std::fs::read_to_string(format!("{ROOT}/etc/profiles/hetero-table1.yaml")).unwrap();
    std::fs::write(&file, &text).unwrap();
    site.profile_dir = profiles;
    let decider = Decider::new(&site).unwrap();
    decided(&decider, &site, &job(1, &A, "max-dist", None, None));
    assert!(
        decided(&decider, &site, &job(2, &B, "max-dist", None, None))
            .search
            .reused
    );

    // A rewritten file (another modification time) is a new profile: its cache starts empty.
    std::fs::write(&file, format!("{text}\n")).unwrap();
    let later =
        std::fs::metadata(&file).unwrap().modified().unwrap() + std::time::Duration::from_secs(10);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let after = decided(&decider, &site, &job(3, &B, "max-dist", None, None));
    assert!(!after.search.reused);
}
