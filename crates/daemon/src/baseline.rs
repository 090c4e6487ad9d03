//! Measured baselines in production: which jobs greenupd runs with every node at its
//! highest frequency (recorded as monitor) so savings are measured, and which
//! application/policy pairs it has stopped applying because their measured slowdown
//! missed the policy's `max_slowdown`.
//!
//! The choice is the site's alone: it depends on the job id (which Slurm assigns) and
//! the application's history, never on anything the user writes, and a sample is only
//! taken when running at f_max fits every cap the job is under.

use greenup::comm::{GuardOff, GuardTerms};
use greenup::optimize::Limits;
use greenup::plan::Plan;
use greenup::site::{BaselineSettings, OnMiss, Site};
use greenup_proto::protocol::{OpenJob, Verdict};

/// What greenupd knows about an application's history when it decides for a new job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppState {
    /// Measured baseline (monitor) runs of the application so far.
    pub baselines: u32,
    /// Why the job's policy is held for this application, if an admin has not cleared it.
    pub hold: Option<String>,
    /// The frequency ceiling in GHz an energy budget's warning level sets for the job.
    pub max_freq_ghz: Option<f64>,
}

/// A stable hash of a job id into [0, 1): the same job is always sampled or never,
/// whichever greenupd decides it, and ids Slurm hands out in order spread evenly.
pub fn job_share(job_id: u64) -> f64 {
    // splitmix64's finaliser: every input bit moves every output bit.
    let mut z = job_id.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether the site's rule picks `job_id` as a baseline sample, given `seen` measured
/// baselines of its application: every job until there are `min_runs`, then the
/// jobs whose [`job_share`] is below `fraction`.
pub fn picked(b: &BaselineSettings, job_id: u64, seen: u32) -> bool {
    seen < b.min_runs || job_share(job_id) < b.fraction
}

/// Why a picked job may not be sampled (or a held policy not dropped): running every node at f_max
/// (`fmax_w` watts, `fmax_energy_j` joules as predicted) would exceed the power cap the
/// job is planned under (the user's or the budget left, whichever is lower) or its
/// energy cap. `None` when it fits.
pub fn cap_forbids(
    fmax_w: f64,
    fmax_energy_j: f64,
    power_cap_w: Option<f64>,
    energy_cap_j: Option<f64>,
) -> Option<String> {
    // A NaN figure never fits: a sample must be known to fit.
    let fits = |x: f64, cap: f64| x.partial_cmp(&cap).is_some_and(|o| o.is_le());
    if let Some(cap) = power_cap_w
        && !fits(fmax_w, cap)
    {
        return Some(format!(
            "every node at f_max draws {fmax_w:.0} W, over the {cap:.0} W cap"
        ));
    }
    if let Some(cap) = energy_cap_j
        && !fits(fmax_energy_j, cap)
    {
        return Some(format!(
            "every node at f_max is predicted to use {fmax_energy_j:.0} J, over the {cap:.0} J cap"
        ));
    }
    None
}

/// The reason recorded for a baseline sample.
pub fn sample_reason(b: &BaselineSettings, seen: u32) -> String {
    if seen < b.min_runs {
        format!(
            "baseline sample: every node at f_max, recorded as monitor ({seen} of the site's baseline.min_runs {} measured so far)",
            b.min_runs
        )
    } else {
        format!(
            "baseline sample: every node at f_max, recorded as monitor (the site's baseline.fraction {})",
            b.fraction
        )
    }
}

/// The reason recorded for a job whose policy is held for its application.
pub fn hold_reason(policy: &str, app: &str, why: &str) -> String {
    format!(
        "policy {policy} is held for {app} ({why}); the job runs as under monitor until an admin clears it (greenup policy clear {app} {policy})"
    )
}

/// The reason `req` runs as under monitor because the site holds its policy for its
/// application (`baseline.on_miss: monitor`); `None` when it does not, or when every
/// node at f_max would not fit the power cap in `limits` (what the job is planned
/// under, [`greenup::plan::limits`]): a hold never lifts a cap, so such a job keeps its
/// policy.
pub fn held(
    site: &Site,
    req: &OpenJob,
    policy: &str,
    app: &AppState,
    limits: &Limits,
) -> Option<String> {
    let b = site.baseline.as_ref()?;
    let why = app.hold.as_deref()?;
    let name = req.profile.as_deref()?;
    if b.on_miss != OnMiss::Monitor {
        return None;
    }
    let fmax_w = greenup::power::max_power_w(site, &req.nodes).0;
    if let Some(over) = cap_forbids(fmax_w, 0.0, limits.power_cap_w, None) {
        tracing::info!(
            job_id = req.job_id,
            policy,
            "{over}; the held policy still applies"
        );
        return None;
    }
    Some(hold_reason(policy, name, why))
}

/// The reason `req` runs as a baseline sample instead of `plan`, or `None` when the
/// site does not pick it or every node at f_max would not fit the caps in `limits` (the
/// ones `plan` was made under). (A cap that forbids the sample is not worth a reason of
/// its own: the job runs its plan.)
pub fn sampled(
    site: &Site,
    req: &OpenJob,
    limits: &Limits,
    plan: &Plan,
    app: &AppState,
) -> Option<String> {
    let b = site.baseline.as_ref()?;
    req.profile.as_ref()?;
    if !picked(b, req.job_id, app.baselines) {
        return None;
    }
    let fmax_w = greenup::power::max_power_w(site, &req.nodes).0;
    if let Some(why) = cap_forbids(
        fmax_w,
        plan.baseline.energy_j.0,
        limits.power_cap_w,
        limits.energy_cap_j,
    ) {
        tracing::debug!(job_id = req.job_id, "not a baseline sample: {why}");
        return None;
    }
    Some(sample_reason(b, app.baselines))
}

/// Whether `policy` missed its `max_slowdown` (a fraction) for the application whose
/// stored runs are `runs`: the reason to hold it, for the site's
/// `baseline.on_miss: monitor`; `None` when it did not (or cannot be judged yet).
pub fn missed(
    site: &Site,
    runs: &[greenup_proto::protocol::JobRecord],
    policy: &str,
    max_slowdown: Option<f64>,
) -> Option<String> {
    use greenup::report::measured;
    use greenup::report::record::{Context, from_record};
    let target = max_slowdown?;
    let ctx = Context {
        site: Some(site),
        ..Context::default()
    };
    let reports: Vec<_> = runs.iter().map(|r| from_record(r, &ctx)).collect();
    measured::by_policy(&reports, |p| (p == policy).then_some(target))
        .iter()
        .filter(|m| m.policy == policy)
        .find_map(|m| m.miss_line())
}

/// Which baseline runs the in-job guard's rate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateBasis {
    /// Runs on exactly the job's node types.
    SameTypes,
    /// No run on exactly the job's node types: every baseline node's.
    OtherTypes,
}

/// The in-job guard's baseline rate for a job on the node types `job_types`, from
/// `nodes` (newest run first, `Store::baseline_nodes`): the median over the nodes of the
/// runs on exactly the job's types; with none, over every node, and says so. A run paces
/// at its slowest type, so a run that held other types (a slower one, or a faster one
/// alone) synchronises at another rate. With the profile version the newest run used
/// was decided under. `type_of` names a node's type; a node the site no longer lists
/// makes its run match no job.
pub fn baseline_rate<'t>(
    nodes: &[crate::store::BaselineNode],
    job_types: &std::collections::BTreeSet<&'t str>,
    type_of: impl Fn(&str) -> Option<&'t str>,
) -> Option<(f64, Option<String>, RateBasis)> {
    use std::collections::BTreeSet;
    let same: Vec<&crate::store::BaselineNode> = nodes
        .chunk_by(|a, b| a.job_id == b.job_id)
        .filter(|run| {
            let types: Option<BTreeSet<&str>> = run.iter().map(|n| type_of(&n.node)).collect();
            types.as_ref() == Some(job_types)
        })
        .flatten()
        .collect();
    let (chosen, basis) = if same.is_empty() {
        (nodes.iter().collect::<Vec<_>>(), RateBasis::OtherTypes)
    } else {
        (same, RateBasis::SameTypes)
    };
    let version = chosen.first()?.version.clone();
    let mut rates: Vec<f64> = chosen.iter().map(|n| n.rate).collect();
    rates.sort_by(f64::total_cmp);
    let n = rates.len();
    let median = if n % 2 == 1 {
        rates[n / 2]
    } else {
        (rates[n / 2 - 1] + rates[n / 2]) / 2.0
    };
    Some((median, version, basis))
}

/// The in-job guard's terms for a job whose policy promises `max_slowdown` (a fraction),
/// decided `verdict` under profile version `plan_version`, given the application's
/// measured `baseline` (its rate and the profile version it ran under, from
/// `Store::baseline_rate`). `None` when there is nothing to guard: no promise, or a
/// verdict that runs the job at its nodes' own clocks. `plan_version` is the version of
/// the file the plan's profile was written as (refinements set aside): a baseline under
/// an earlier version is older than the profile, and the program it measured may not be
/// this one.
pub fn guard_terms(
    max_slowdown: Option<f64>,
    verdict: Verdict,
    plan_version: Option<&str>,
    baseline: Option<(f64, Option<String>)>,
) -> Option<GuardTerms> {
    let max_slowdown = max_slowdown?;
    if !verdict.applies_plan() {
        return None;
    }
    let mut t = GuardTerms {
        max_slowdown,
        baseline_rate: None,
        off: Some(GuardOff::NoBaseline),
    };
    // Versions are numbers where greenup wrote them: a baseline under the written file
    // or any later refinement of it is current; one under an earlier file is not.
    let older = |b: &str, p: &str| match (b.parse::<u64>(), p.parse::<u64>()) {
        (Ok(b), Ok(p)) => b < p,
        _ => b != p,
    };
    if let Some((rate, version)) = baseline {
        if let (Some(b), Some(p)) = (version.as_deref(), plan_version)
            && older(b, p)
        {
            t.off = Some(GuardOff::StaleBaseline);
        } else {
            t.baseline_rate = Some(rate);
            t.off = None;
        }
    }
    Some(t)
}

/// What the decision's reason adds for `terms`: whether the job's steps are guarded.
/// The runtime sees only MPI steps it is preloaded into; every other step relies on
/// the decision alone, which the reason says.
pub fn guard_reason(terms: &GuardTerms, basis: Option<RateBasis>) -> String {
    match (terms.off, basis) {
        (None, Some(RateBasis::OtherTypes)) => "in-job guard for MPI steps, its baseline rate from runs on other node types (none ran on the job's own); other steps have no in-job guard and rely on the decision alone".into(),
        (None, _) => "in-job guard for MPI steps; other steps have no in-job guard and rely on the decision alone".into(),
        (Some(off), _) => format!("no in-job guard: {}", off.why()),
    }
}

#[cfg(test)]
mod guard_tests {
    use super::*;

    #[test]
    fn a_promise_with_a_current_baseline_is_guarded_and_the_rest_say_why_not() {
        let b = Some((120.0, Some("3".to_string())));
        let t = guard_terms(Some(0.1), Verdict::Planned, Some("3"), b.clone()).unwrap();
        assert_eq!((t.baseline_rate, t.off), (Some(120.0), None));
        assert!(
            guard_reason(&t, Some(RateBasis::SameTypes)).starts_with("in-job guard for MPI steps")
        );
        // No promise, or the job runs unchanged: nothing to guard.
        assert_eq!(
            guard_terms(None, Verdict::Planned, Some("3"), b.clone()),
            None
        );
        assert_eq!(
            guard_terms(Some(0.1), Verdict::Unchanged, Some("3"), b.clone()),
            None
        );
        // No baseline.
        let none = guard_terms(Some(0.1), Verdict::Planned, Some("3"), None).unwrap();
        assert_eq!(guard_reason(&none, None), "no in-job guard: no baseline");
        // A baseline from an earlier profile version.
        let stale = guard_terms(Some(0.1), Verdict::BudgetLimited, Some("4"), b).unwrap();
        assert_eq!(stale.off, Some(GuardOff::StaleBaseline));
        assert_eq!(stale.baseline_rate, None);
        // A baseline under a refinement of the written file (version 5 of file 4) is
        // current: refinement fits the same program again.
        let refined = guard_terms(
            Some(0.1),
            Verdict::Planned,
            Some("4"),
            Some((7.0, Some("5".into()))),
        );
        assert_eq!(refined.unwrap().baseline_rate, Some(7.0));
        // A baseline that names no version is taken.
        let unversioned = guard_terms(Some(0.1), Verdict::Planned, Some("4"), Some((5.0, None)));
        assert_eq!(unversioned.unwrap().baseline_rate, Some(5.0));
    }

    fn node(job_id: u64, node: &str, rate: f64) -> crate::store::BaselineNode {
        crate::store::BaselineNode {
            job_id,
            node: node.into(),
            rate,
            version: Some(job_id.to_string()),
        }
    }

    fn type_of(n: &str) -> Option<&'static str> {
        match n.as_bytes().first() {
            Some(b'f') => Some("fast"),
            Some(b'e') => Some("eco"),
            _ => None,
        }
    }

    #[test]
    fn the_guards_rate_comes_from_runs_on_the_jobs_own_node_types() {
        // Newest first: two eco runs around one fast run. Over every node the median
        // would be the eco pace, (5.0 + 5.2) / 2; a job on fast nodes paces at 10.
        let nodes = [
            node(9, "e1", 5.0),
            node(9, "e2", 5.2),
            node(8, "f1", 9.8),
            node(8, "f2", 10.2),
            node(7, "e1", 4.8),
            node(7, "e2", 5.4),
        ];
        let fast = ["fast"].into_iter().collect();
        assert_eq!(
            baseline_rate(&nodes, &fast, type_of),
            Some((10.0, Some("8".into()), RateBasis::SameTypes))
        );
        let eco = ["eco"].into_iter().collect();
        assert_eq!(
            baseline_rate(&nodes, &eco, type_of),
            Some(((5.0 + 5.2) / 2.0, Some("9".into()), RateBasis::SameTypes))
        );
        // No run held both types: every node's median, and the reason says so.
        let both = ["eco", "fast"].into_iter().collect();
        let (rate, version, basis) = baseline_rate(&nodes, &both, type_of).unwrap();
        assert_eq!((rate, basis), ((5.2 + 5.4) / 2.0, RateBasis::OtherTypes));
        assert_eq!(version.as_deref(), Some("9"));
        let t = guard_terms(
            Some(0.1),
            Verdict::Planned,
            Some("9"),
            Some((rate, version)),
        );
        assert!(guard_reason(&t.unwrap(), Some(basis)).contains("from runs on other node types"));
        // A mixed run is the mixed job's; a run on a node the site no longer lists
        // matches no job.
        let more = [
            node(11, "x9", 1.0),
            node(10, "f1", 6.0),
            node(10, "e1", 6.2),
        ];
        let all: Vec<_> = more.iter().chain(&nodes).cloned().collect();
        assert_eq!(
            baseline_rate(&all, &both, type_of),
            Some((6.1, Some("10".into()), RateBasis::SameTypes))
        );
        assert_eq!(baseline_rate(&[], &fast, type_of), None);
    }
}
