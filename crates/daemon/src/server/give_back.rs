//! Stranded power given back while jobs run (`power.give_back_after_s`). greenupd
//! follows the reports of each job that holds greenup's licenses and its nodes alone;
//! once its used nodes have drawn well below its grant for the judged stretch, each node
//! is told, in the reply to its next report, the lower limit to hold
//! ([`greenup::power::give_back::kept_w`], shared by the rule that set its first limit).
//! Only once every node's meter has read its lower limit back are the job's licenses
//! lowered in Slurm, so the queue never hands out watts a node may still draw.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use super::jobs::JobView;
use super::{Shared, lock};
use greenup::power::give_back::{kept_w, licenses_with};
use greenup::site::{PowerEnforce, Site};
use greenup_core::quantity::Watts;
use greenup_proto::live_power::PowerReport;

/// How far above its asked limit a node's read-back limit may be and still hold it (the
/// hardware keeps limits in its own units).
const HELD_SLACK_W: Watts = Watts(0.5);

/// A lowering no node has confirmed within this many report periods (plus a minute)
/// is abandoned: the nodes that did lower stay lower, the job keeps its licenses.
const CONFIRM_PERIODS: f64 = 3.0;

/// One job's stretch of reports being judged.
struct Stranding {
    /// The watts the job holds now.
    granted_w: Watts,
    /// The judged stretch began here (unix seconds).
    since: i64,
    /// Each used node's highest sample since then.
    peaks: HashMap<String, Watts>,
    lowering: Option<Lowering>,
    /// Never judged again: a node shared with another job, a GPU node, or a give-back
    /// that failed.
    off: bool,
}

/// A give-back under way: the nodes are lowering their limits.
struct Lowering {
    kept_w: Watts,
    limits: HashMap<String, Watts>,
    held: HashSet<String>,
    started: i64,
    /// The licenses were asked to shrink.
    sent: bool,
}

/// The licenses a job is to shrink to, once its nodes all hold their lower limits.
pub(super) struct Shrink {
    pub(super) job_id: u64,
    pub(super) from_w: Watts,
    pub(super) kept_w: Watts,
    pub(super) partition: Option<String>,
}

/// What one report leads to.
#[derive(Default)]
pub(super) struct Step {
    /// The lower limit the reporting node is to hold (the reply's `limit_w`).
    pub(super) limit_w: Option<Watts>,
    /// Licenses to shrink now.
    pub(super) shrink: Option<Shrink>,
}

/// Every judged job.
#[derive(Default)]
pub(super) struct GiveBacks {
    jobs: HashMap<u64, Stranding>,
}

impl GiveBacks {
    /// Follow a checked report of job `v`'s node, at greenupd's time `now`.
    pub(super) fn judge(&mut self, r: &PowerReport, v: &JobView, site: &Site, now: i64) -> Step {
        let p = &site.power;
        let (Some(after_s), PowerEnforce::Queue, Some(grant)) =
            (p.give_back_after_s, p.enforce, v.decision.grant)
        else {
            return Step::default();
        };
        let job_id = v.decision.job_id;
        if !v.uses(&r.node) {
            return Step::default();
        }
        let s = self.jobs.entry(job_id).or_insert_with(|| Stranding {
            granted_w: grant.granted_w,
            since: r
                .samples
                .first()
                .map_or(now, |s| s.at - s.interval_s.0.ceil() as i64),
            peaks: HashMap::new(),
            lowering: None,
            off: false,
        });
        // A node another job shares: its power is not this job's alone.
        if r.samples.iter().any(|x| x.jobs != [job_id]) {
            s.off = true;
        }
        if s.off {
            return Step::default();
        }
        if let Some(mut l) = s.lowering.take() {
            let step = follow(job_id, &mut l, s, r, v, p.report_period_s, now);
            if !s.off {
                s.lowering = Some(l);
            }
            return step;
        }
        for x in r.samples.iter().filter(|x| x.at > s.since) {
            let peak = s.peaks.entry(r.node.clone()).or_insert(Watts(0.0));
            *peak = peak.max(x.watts);
        }
        let latest = r.samples.last().map_or(now, |x| x.at);
        if s.peaks.len() < v.used_count() || ((latest - s.since) as f64) < after_s {
            return Step::default();
        }
        // Once a stretch, not per report: linear in the job's size.
        let names: Vec<String> = v.used().iter().map(|n| n.to_string()).collect();
        let floor_w = greenup::power::slurm::bounds(site, &names)
            .map_or(Watts(0.0), |b| b.min_w * names.len() as f64);
        let kept = kept_w(
            s.granted_w,
            s.peaks.values().copied(),
            floor_w,
            p.give_back_headroom,
        );
        let limits = kept.and_then(|k| v.limits_under(site, k).map(|l| (k, l)));
        let Some((kept_w, limits)) = limits else {
            if kept.is_some() {
                // A GPU node, or a node the site cannot weigh: not lowered while it runs.
                s.off = true;
            }
            // Judge the next stretch afresh, so the peaks stay recent.
            s.since = latest;
            s.peaks.clear();
            return Step::default();
        };
        let limits: HashMap<String, Watts> = limits.into_iter().collect();
        let limit_w = limits.get(&r.node).copied();
        tracing::info!(
            job_id,
            granted_w = s.granted_w.0,
            kept_w = kept_w.0,
            "job {job_id}: its nodes drew at most {:.0} W of its {:.0} W for {} s: lowering their limits to give {:.0} W back",
            s.peaks.values().copied().sum::<Watts>().0,
            s.granted_w.0,
            latest - s.since,
            (s.granted_w - kept_w).0
        );
        s.lowering = Some(Lowering {
            kept_w,
            limits,
            held: HashSet::new(),
            started: now,
            sent: false,
        });
        Step {
            limit_w,
            shrink: None,
        }
    }

    /// The job's licenses now count `kept_w`: judge a fresh stretch from `now`.
    pub(super) fn done(&mut self, job_id: u64, kept_w: Watts, now: i64) {
        if let Some(s) = self.jobs.get_mut(&job_id) {
            s.granted_w = kept_w;
            s.since = now;
            s.peaks.clear();
            s.lowering = None;
        }
    }

    /// The licenses could not be lowered: the job is not judged again.
    pub(super) fn failed(&mut self, job_id: u64) {
        if let Some(s) = self.jobs.get_mut(&job_id) {
            s.off = true;
        }
    }

    /// Keep only the jobs `open` says are still open.
    pub(super) fn retain(&mut self, open: impl Fn(u64) -> bool) {
        self.jobs.retain(|id, _| open(*id));
    }

    /// Forget a job that closed.
    pub(super) fn forget(&mut self, job_id: u64) {
        self.jobs.remove(&job_id);
    }
}

/// A report during a lowering: count the node's read-back limit, repeat its limit to a
/// node that has not confirmed it, and shrink the licenses once all have.
fn follow(
    job_id: u64,
    l: &mut Lowering,
    s: &mut Stranding,
    r: &PowerReport,
    v: &JobView,
    period_s: f64,
    now: i64,
) -> Step {
    let asked = l.limits.get(&r.node).copied();
    if let (Some(a), Some(held)) = (asked, r.limit_w)
        && held <= a + HELD_SLACK_W
    {
        l.held.insert(r.node.clone());
    }
    if l.sent {
        return Step::default();
    }
    if l.held.len() == l.limits.len() {
        l.sent = true;
        return Step {
            limit_w: None,
            shrink: Some(Shrink {
                job_id,
                from_w: s.granted_w,
                kept_w: l.kept_w,
                partition: v.partition.clone(),
            }),
        };
    }
    if (now - l.started) as f64 > CONFIRM_PERIODS * period_s + 60.0 {
        tracing::warn!(
            job_id,
            "job {job_id}: {} of its {} nodes did not confirm a lower power limit in {} s: it keeps its {:.0} W of licenses (the nodes that lowered stay lower until it ends)",
            l.limits.len() - l.held.len(),
            l.limits.len(),
            now - l.started,
            s.granted_w.0
        );
        s.off = true;
        return Step::default();
    }
    Step {
        limit_w: asked.filter(|_| !l.held.contains(&r.node)),
        shrink: None,
    }
}

/// How long one Slurm command may take before greenupd gives up on it.
const SLURM_LIMIT: Duration = Duration::from_secs(10);

/// Lower job `s.job_id`'s greenup licenses in Slurm to `s.kept_w`, keeping its other
/// licenses; then the ledger and the live view follow. Failures are logged, and the job
/// keeps its licenses (its nodes' lower limits stay: it is held below what it holds).
pub(super) async fn shrink(shared: Arc<Shared>, s: Shrink) {
    let bin = shared.opts.slurm_bin_dir.clone();
    let power = shared
        .ctx
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .site
        .power
        .clone();
    let (job_id, kept_w, from_w) = (s.job_id, s.kept_w, s.from_w);
    let done = tokio::task::spawn_blocking(move || {
        let id = s.job_id.to_string();
        let mut show = greenup_host::command::slurm(bin.as_deref(), "scontrol");
        show.args(["-o", "show", "job", &id]);
        let text =
            greenup_host::command::stdout_of(&mut show, SLURM_LIMIT).map_err(|e| e.to_string())?;
        let view = greenup::slurm::job::parse_scontrol(&text);
        if view.state.as_deref() != Some("RUNNING") {
            return Err(format!(
                "it is {} in Slurm",
                view.state.as_deref().unwrap_or("unknown")
            ));
        }
        let list = view.licenses.unwrap_or_default();
        let new = licenses_with(&list, &power, s.partition.as_deref(), s.kept_w.0 as u64)
            .ok_or_else(|| format!("it holds none of greenup's licenses ({list})"))?;
        let mut update = greenup_host::command::slurm(bin.as_deref(), "scontrol");
        update.args(["update", &format!("JobId={id}"), &format!("Licenses={new}")]);
        greenup_host::command::stdout_of(&mut update, SLURM_LIMIT).map_err(|e| e.to_string())?;
        Ok(new)
    })
    .await
    .unwrap_or_else(|e| Err(e.to_string()));
    match done {
        Ok(list) => {
            lock(&shared.ledger).shrink(job_id, kept_w);
            lock(&shared.live).gave_back(job_id, from_w - kept_w, kept_w);
            tracing::info!(
                job_id,
                kept_w = kept_w.0,
                given_back_w = (from_w - kept_w).0,
                "job {job_id}: {:.0} W given back to Slurm's queue; its licenses are now {list}",
                (from_w - kept_w).0
            );
        }
        Err(e) => {
            lock(&shared.live).give_back_failed(job_id);
            tracing::warn!(
                job_id,
                "job {job_id}: its unused watts could not be given back: {e}; it keeps its licenses, its nodes their lower limits"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup::record::{Decision, OpenJob};
    use greenup_proto::live_power::PowerSample;

    // n1-n2 draw 40 W static + 120 W dynamic at 3.0 GHz (160 W), 44.4 W at 1.0 GHz.
    fn site(after: &str) -> Site {
        greenup::site::parse(
            "/etc/slurm/greenup.yaml",
            &format!(
                "node_types:\n  fast:\n    frequencies: [1.0, 3.0]\n    power: {{dynamic_w: 120, static_w: 40}}\nnodes:\n  fast: \"n[1-3]\"\npower_cap: 1kW\npower: {{enforce: queue, meter_interval_s: 1, report_period_s: 2{after}}}\n"
            ),
        )
        .unwrap()
    }

    /// Job 7 on n1-n2 without a plan (every node used, at its top: 160 W each), granted 320 W.
    fn job(site: &Site) -> JobView {
        let mut d: Decision = serde_json::from_value(serde_json::json!({
            "job_id": 7, "verdict": "unchanged", "reason": "", "policy": "monitor",
            "profile": null, "profile_version": null, "power_cap_w": null, "reserved_w": 320.0,
            "plan": null, "decided_at": 1_795_000_000
        }))
        .unwrap();
        d.grant = greenup::power::grant_over(
            site,
            greenup_core::quantity::Watts(320.0),
            [("n1", None, None), ("n2", None, None)],
        );
        let req: OpenJob = serde_json::from_value(serde_json::json!({
            "job_id": 7, "uid": 1000, "nodes": ["n1", "n2"], "partition": null,
            "time_limit_s": 600.0
        }))
        .unwrap();
        JobView::new(d, &req)
    }

    fn rep(node: &str, jobs: &[u64], at: i64, watts: f64, limit_w: Option<f64>) -> PowerReport {
        PowerReport {
            node: node.into(),
            samples: vec![PowerSample {
                jobs: jobs.to_vec(),
                at,
                watts: Watts(watts),
                interval_s: greenup_core::quantity::Seconds(2.0),
                gpu_watts: None,
            }],
            limit_w: limit_w.map(Watts),
        }
    }

    #[test]
    fn a_job_drawing_little_lowers_every_node_then_shrinks_its_licenses_once() {
        let site = site(", give_back_after_s: 10, give_back_headroom: 0.2");
        let v = job(&site);
        let mut g = GiveBacks::default();
        // Ten seconds (the first sample's 2 s from 98 on) of n1 at 50 W and n2 at 40 W:
        // kept (50 + 40) x 1.2 = 108 W of 320, above the floor of 2 x 44.4 W; each
        // node's share is half (same type, same clock).
        for t in (100..108).step_by(2) {
            assert!(
                g.judge(&rep("n1", &[7], t, 50.0, None), &v, &site, t)
                    .limit_w
                    .is_none()
            );
            assert!(
                g.judge(&rep("n2", &[7], t, 40.0, None), &v, &site, t)
                    .limit_w
                    .is_none()
            );
        }
        let s = g.judge(&rep("n1", &[7], 108, 45.0, None), &v, &site, 108);
        assert_eq!((s.limit_w, s.shrink.is_none()), (Some(Watts(54.0)), true));
        // n2 learns its limit at its next report; n1 is told again until it confirms.
        assert_eq!(
            g.judge(&rep("n2", &[7], 110, 40.0, None), &v, &site, 110)
                .limit_w,
            Some(Watts(54.0))
        );
        assert_eq!(
            g.judge(&rep("n1", &[7], 112, 40.0, None), &v, &site, 112)
                .limit_w,
            Some(Watts(54.0))
        );
        // A read-back above the limit does not confirm it.
        let s = g.judge(&rep("n1", &[7], 113, 40.0, Some(60.0)), &v, &site, 113);
        assert!(s.shrink.is_none());
        let s = g.judge(&rep("n1", &[7], 114, 40.0, Some(54.0)), &v, &site, 114);
        assert_eq!((s.limit_w, s.shrink.is_none()), (None, true));
        // The last node's confirmation shrinks the licenses, once.
        let s = g.judge(&rep("n2", &[7], 114, 40.0, Some(54.0)), &v, &site, 114);
        let k = s.shrink.expect("all nodes hold their limits");
        assert_eq!(
            (k.job_id, k.from_w, k.kept_w),
            (7, Watts(320.0), Watts(108.0))
        );
        assert!(
            g.judge(&rep("n2", &[7], 116, 40.0, Some(54.0)), &v, &site, 116)
                .shrink
                .is_none()
        );
        // Then a fresh stretch is judged from the new grant: 108 W kept, nothing more to give.
        g.done(7, Watts(108.0), 116);
        for t in (118..140).step_by(2) {
            for n in ["n1", "n2"] {
                let s = g.judge(&rep(n, &[7], t, 45.0, None), &v, &site, t);
                assert!(s.limit_w.is_none() && s.shrink.is_none());
            }
        }
    }

    #[test]
    fn shared_nodes_busy_jobs_unconfirmed_limits_and_sites_that_do_not_ask_give_nothing_back() {
        let on = site(", give_back_after_s: 10");
        let v = job(&on);
        let run = |g: &mut GiveBacks, site: &Site, jobs: &[u64], watts: f64| {
            let mut told = false;
            for t in (100..=120).step_by(2) {
                for n in ["n1", "n2"] {
                    told |= g
                        .judge(&rep(n, jobs, t, watts, None), &v, site, t)
                        .limit_w
                        .is_some();
                }
            }
            told
        };
        // Off by default; on, a job near its grant keeps it.
        assert!(!run(&mut GiveBacks::default(), &site(""), &[7], 40.0));
        assert!(!run(&mut GiveBacks::default(), &on, &[7], 140.0));
        // A node another job shares: its power is not this job's alone.
        assert!(!run(&mut GiveBacks::default(), &on, &[7, 8], 40.0));
        // A node that never confirms: abandoned after 3 report periods and a minute.
        let mut g = GiveBacks::default();
        assert!(run(&mut g, &on, &[7], 40.0));
        let s = g.judge(&rep("n1", &[7], 200, 40.0, None), &v, &on, 200);
        assert!(s.limit_w.is_none() && s.shrink.is_none());
        let s = g.judge(&rep("n1", &[7], 202, 40.0, Some(54.0)), &v, &on, 202);
        assert!(s.limit_w.is_none() && s.shrink.is_none());
    }
}
