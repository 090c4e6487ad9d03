//! Measured power, live, in greenupd: each node's latest report, each cap's measured and
//! granted watts kept as running sums (so a report costs the same at any cluster size,
//! and nothing is written to the store), a timeline of the last hours per cap, and a
//! warning when a cap's measured power stays above the watts granted under it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use super::give_back::GiveBacks;
use super::jobs::{JobView, Outcome};
use super::{Ctx, Shared, lock};
use crate::decide::bad_field;
use crate::store::sqlite::now;
use greenup_core::quantity::{Seconds, Watts};
use greenup_proto::live_power::{
    CapPower, CapTimeline, HOURS_KEPT, MAX_SAMPLE_JOBS, MAX_SAMPLES, PowerPoint, PowerReport,
    PowerView, counts_for_s, stranded_w,
};
use greenup_proto::protocol::{BudgetLine, ErrorCode, ErrorReply, JobState, Reply};

/// A sample may end at most this far ahead of greenupd's clock (the nodes' clocks drift).
const MAX_AHEAD_S: i64 = 60;
/// A sample older than this no longer says anything about the present.
const MAX_AGE_S: i64 = 600;
/// The longest interval one sample may cover.
const MAX_INTERVAL_S: f64 = 3600.0;
/// A node draws at most this multiple of its type's top power; more is a broken meter.
const MAX_OVER_TYPE: f64 = 10.0;
/// The most a node of a type the site does not know may report.
const UNTYPED_MAX_W: f64 = 100_000.0;
/// The most refusals logged a minute; the rest are counted into the next line.
const REFUSALS_LOGGED: u32 = 20;
/// The most timeline points one reply carries, over all caps.
const REPLY_POINTS: usize = 6000;
/// Jobs never opened whose first report greenupd remembers having logged.
const MAX_UNOPENED: usize = 10_000;

/// A node's latest report.
struct NodeNow {
    watts: f64,
    /// Of `watts`, the job's GPUs'.
    gpu_watts: f64,
    at: i64,
    /// After this, the report no longer counts.
    stale_at: i64,
    /// The capped partition it counts under, beside the site.
    cap: Option<usize>,
    /// The jobs it named.
    jobs: Vec<u64>,
    /// Whether its own job (the first it named) was never opened in greenupd.
    unopened: bool,
}

/// One timeline point: the cap's state at the last report or tick in its span.
#[derive(Clone, Copy)]
struct Point {
    span: i64,
    t: i64,
    measured_w: f64,
    granted_w: f64,
    cap_w: Option<f64>,
}

/// One cap's running state.
struct Cap {
    scope: String,
    cap_w: Option<f64>,
    granted_w: f64,
    measured_w: f64,
    measured_gpu_w: f64,
    nodes: u64,
    over_since: Option<i64>,
    warned: bool,
    episodes: u64,
    /// Watts given back from running jobs since greenupd started.
    given_back_w: f64,
    points: VecDeque<Point>,
}

impl Cap {
    fn new(scope: &str, cap_w: Option<f64>) -> Cap {
        Cap {
            scope: scope.to_string(),
            cap_w,
            granted_w: 0.0,
            measured_w: 0.0,
            measured_gpu_w: 0.0,
            nodes: 0,
            over_since: None,
            warned: false,
            episodes: 0,
            given_back_w: 0.0,
            points: VecDeque::new(),
        }
    }

    /// Follow the over-grant episode at time `t`: one warning once it has lasted `window_s`.
    fn judge(&mut self, t: i64, window_s: f64) {
        let over = self.nodes > 0 && self.measured_w > self.granted_w * (1.0 + 1e-9) + 1e-6;
        if !over {
            if self.warned {
                tracing::info!(
                    cap = %self.scope,
                    measured_w = self.measured_w,
                    granted_w = self.granted_w,
                    "power cap '{}': measured power is back within the watts granted",
                    self.scope
                );
            }
            self.over_since = None;
            self.warned = false;
            return;
        }
        let since = *self.over_since.get_or_insert(t);
        if !self.warned && (t - since) as f64 >= window_s {
            self.warned = true;
            self.episodes += 1;
            tracing::warn!(
                cap = %self.scope,
                measured_w = self.measured_w,
                granted_w = self.granted_w,
                "power cap '{}': measured {:.0} W has stayed above the {:.0} W granted for {} s (power.over_grant_window_s: {window_s}): jobs draw more than they were granted",
                self.scope,
                self.measured_w,
                self.granted_w,
                t - since
            );
        }
    }

    /// Put the cap's state at `now` into the timeline's current span.
    fn mark(&mut self, now: i64, step_s: f64, keep: usize) {
        let span = (now as f64 / step_s).floor() as i64;
        let p = Point {
            span,
            t: now,
            measured_w: self.measured_w,
            granted_w: self.granted_w,
            cap_w: self.cap_w,
        };
        match self.points.back_mut() {
            Some(last) if last.span == span => *last = p,
            Some(last) if last.span > span => {}
            _ => self.points.push_back(p),
        }
        let oldest = now - (HOURS_KEPT * 3600.0) as i64;
        while self.points.len() > keep || self.points.front().is_some_and(|p| p.t < oldest) {
            self.points.pop_front();
        }
    }

    fn now(&self) -> CapPower {
        CapPower {
            scope: self.scope.clone(),
            cap_w: self.cap_w.map(Watts),
            granted_w: Watts(self.granted_w),
            measured_w: Watts(self.measured_w),
            measured_gpu_w: Watts(self.measured_gpu_w),
            stranded_w: stranded_w(Watts(self.granted_w), Watts(self.measured_w)),
            nodes: self.nodes,
            over_grant_since: self.over_since,
            over_grant_episodes: self.episodes,
            given_back_w: Watts(self.given_back_w),
            unopened_nodes: 0,
        }
    }

    /// The timeline since `from`, at most `most` points (neighbours averaged to fit).
    fn timeline(&self, from: i64, most: usize, step_s: f64) -> CapTimeline {
        let kept: Vec<&Point> = self.points.iter().filter(|p| p.t >= from).collect();
        let per = kept.len().div_ceil(most.max(1)).max(1);
        let points = kept
            .chunks(per)
            .map(|c| {
                let n = c.len() as f64;
                let last = c[c.len() - 1];
                PowerPoint {
                    t: last.t,
                    measured_w: Watts(c.iter().map(|p| p.measured_w).sum::<f64>() / n),
                    granted_w: Watts(c.iter().map(|p| p.granted_w).sum::<f64>() / n),
                    cap_w: last.cap_w.map(Watts),
                    stranded_w: c
                        .iter()
                        .map(|p| stranded_w(Watts(p.granted_w), Watts(p.measured_w)))
                        .sum::<Watts>()
                        / n,
                }
            })
            .collect();
        CapTimeline {
            scope: self.scope.clone(),
            step_s: Seconds(step_s * per as f64),
            points,
        }
    }
}

/// Refusals logged this minute, and those left out.
#[derive(Default)]
struct Refusals {
    minute: i64,
    logged: u32,
    left_out: u64,
}

/// Every node's latest report and every cap's running sums and timeline.
pub(super) struct Live {
    step_s: f64,
    window_s: f64,
    /// The site first, then each capped partition.
    caps: Vec<Cap>,
    by_partition: HashMap<String, usize>,
    nodes: HashMap<String, NodeNow>,
    /// Open jobs whose nodes report, by id.
    jobs: HashMap<u64, Arc<JobView>>,
    /// The ledger's change count the granted watts were read at.
    ledger_seen: Option<u64>,
    refusals: Refusals,
    /// Jobs whose unused watts may be given back.
    give_back: GiveBacks,
    /// Jobs greenupd never opened whose nodes report, each logged once while they do.
    unopened: HashSet<u64>,
}

impl Live {
    /// An empty state for `site`'s caps and meter interval.
    pub(super) fn new(site: &greenup::site::Site) -> Live {
        let mut l = Live {
            step_s: 0.0,
            window_s: 0.0,
            caps: Vec::new(),
            by_partition: HashMap::new(),
            nodes: HashMap::new(),
            jobs: HashMap::new(),
            ledger_seen: None,
            refusals: Refusals::default(),
            give_back: GiveBacks::default(),
            unopened: HashSet::new(),
        };
        l.configure(site);
        l
    }

    /// Take a (re)loaded site's caps and intervals. Caps and timelines stay when the
    /// caps' names and the meter interval do; otherwise the state starts afresh.
    pub(super) fn configure(&mut self, site: &greenup::site::Site) {
        let step = site.power.meter_interval_s.clamp(1.0, 300.0);
        self.window_s = site.power.over_grant_window_s;
        let mut wanted: Vec<(String, Option<f64>)> = vec![("site".into(), site.power_cap_w)];
        wanted.extend(
            site.partitions
                .iter()
                .filter(|(_, p)| p.power_cap_w.is_some())
                .map(|(n, p)| (n.clone(), p.power_cap_w)),
        );
        let same = step == self.step_s
            && wanted.len() == self.caps.len()
            && wanted
                .iter()
                .zip(&self.caps)
                .all(|((n, _), c)| *n == c.scope);
        if same {
            for ((_, w), c) in wanted.iter().zip(&mut self.caps) {
                c.cap_w = *w;
            }
            return;
        }
        self.step_s = step;
        self.caps = wanted.iter().map(|(n, w)| Cap::new(n, *w)).collect();
        self.by_partition = wanted
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, (n, _))| (n.clone(), i))
            .collect();
        self.nodes.clear();
        self.ledger_seen = None;
    }

    /// The most points a cap's timeline keeps.
    fn keep(&self) -> usize {
        (HOURS_KEPT * 3600.0 / self.step_s).ceil() as usize + 2
    }

    /// Whether job `job_id`, never opened, is new here (to be logged once). At most
    /// [`MAX_UNOPENED`] are remembered; past that no more are logged, so a greenupd back
    /// after a long outage does not log a line per report.
    fn first_unopened(&mut self, job_id: u64) -> bool {
        self.unopened.len() < MAX_UNOPENED && self.unopened.insert(job_id)
    }

    /// A job's view, if a report of one of its nodes brought it here.
    fn job(&self, job_id: u64) -> Option<Arc<JobView>> {
        self.jobs.get(&job_id).cloned()
    }

    /// Forget a job that closed: its nodes no longer count, and their reports for it
    /// are refused from now on. Linear in the reporting nodes, once per job.
    pub(super) fn forget_job(&mut self, job_id: u64) {
        self.give_back.forget(job_id);
        if self.jobs.remove(&job_id).is_none() {
            return;
        }
        let gone: Vec<((f64, f64), Option<usize>)> = self
            .nodes
            .values()
            .filter(|n| n.jobs.contains(&job_id))
            .map(|n| ((n.watts, n.gpu_watts), n.cap))
            .collect();
        if gone.is_empty() {
            return;
        }
        self.nodes.retain(|_, n| !n.jobs.contains(&job_id));
        for (w, cap) in gone {
            self.subtract(0, w);
            if let Some(c) = cap {
                self.subtract(c, w);
            }
        }
    }

    /// Whether the granted watts were read at the ledger's change count `changes`.
    fn granted_current(&self, changes: u64) -> bool {
        self.ledger_seen == Some(changes)
    }

    /// Take each cap's granted watts from the ledger's lines, read at change count `changes`.
    fn set_granted(&mut self, lines: &[BudgetLine], changes: u64) {
        for c in &mut self.caps {
            c.granted_w = lines
                .iter()
                .find(|l| l.scope == c.scope)
                .map_or(0.0, |l| l.reserved_w.0);
        }
        self.ledger_seen = Some(changes);
    }

    /// Count a checked report from a node of jobs in `partition`, at greenupd's time
    /// `now`; returns how many samples were newer than the node's last. Costs the same
    /// however many nodes report.
    fn take(&mut self, r: &PowerReport, partition: Option<&str>, unopened: bool, now: i64) -> u64 {
        let cap = partition.and_then(|p| self.by_partition.get(p).copied());
        let step = self.step_s;
        let mut counted = 0;
        for s in &r.samples {
            let stale_at = s.at + counts_for_s(s.interval_s.0.max(step)).ceil() as i64;
            let Watts(watts) = s.watts;
            let gpu_w = s.gpu_watts.map_or(0.0, |g| g.0);
            let old = match self.nodes.get_mut(&r.node) {
                Some(n) if n.at >= s.at => continue,
                Some(n) => {
                    let old = ((n.watts, n.gpu_watts), n.cap);
                    (n.watts, n.gpu_watts, n.at, n.stale_at, n.cap, n.unopened) =
                        (watts, gpu_w, s.at, stale_at, cap, unopened);
                    n.jobs.clone_from(&s.jobs);
                    Some(old)
                }
                None => {
                    self.nodes.insert(
                        r.node.clone(),
                        NodeNow {
                            watts,
                            gpu_watts: gpu_w,
                            at: s.at,
                            stale_at,
                            cap,
                            jobs: s.jobs.clone(),
                            unopened,
                        },
                    );
                    None
                }
            };
            if let Some((w, c)) = old {
                self.subtract(0, w);
                if let Some(c) = c {
                    self.subtract(c, w);
                }
            }
            for c in std::iter::once(0).chain(cap) {
                self.caps[c].measured_w += watts;
                self.caps[c].measured_gpu_w += gpu_w;
                self.caps[c].nodes += 1;
                self.caps[c].judge(s.at, self.window_s);
            }
            counted += 1;
        }
        let keep = self.keep();
        for c in std::iter::once(0).chain(cap) {
            self.caps[c].mark(now, step, keep);
        }
        counted
    }

    /// Take one node's `(watts, gpu_watts)` out of cap `cap`'s sums.
    fn subtract(&mut self, cap: usize, (watts, gpu_watts): (f64, f64)) {
        let c = &mut self.caps[cap];
        c.nodes = c.nodes.saturating_sub(1);
        (c.measured_w, c.measured_gpu_w) = if c.nodes == 0 {
            (0.0, 0.0)
        } else {
            (c.measured_w - watts, c.measured_gpu_w - gpu_watts)
        };
    }

    /// Job `job_id`'s licenses were lowered by `given_w` to `kept_w`.
    pub(super) fn gave_back(&mut self, job_id: u64, given_w: Watts, kept_w: Watts) {
        self.give_back.done(job_id, kept_w, now());
        let partition = self.jobs.get(&job_id).and_then(|v| v.partition.clone());
        let cap = partition.and_then(|p| self.by_partition.get(&p).copied());
        for c in std::iter::once(0).chain(cap) {
            self.caps[c].given_back_w += given_w.0;
        }
    }

    /// Job `job_id`'s licenses could not be lowered.
    pub(super) fn give_back_failed(&mut self, job_id: u64) {
        self.give_back.failed(job_id);
    }

    /// Once per meter interval: drop the reports that no longer count, sum the caps
    /// afresh (no rounding drift builds up), forget jobs no node reports for, end the
    /// episodes of caps no node reports under, and put each cap into its timeline.
    /// Linear in the nodes, once an interval. Episodes run on the samples' own times,
    /// so only reports start them.
    fn tick(&mut self, now: i64) {
        self.nodes.retain(|_, n| n.stale_at >= now);
        for c in &mut self.caps {
            c.measured_w = 0.0;
            c.measured_gpu_w = 0.0;
            c.nodes = 0;
        }
        let mut jobs = HashSet::new();
        for n in self.nodes.values() {
            for c in std::iter::once(0).chain(n.cap) {
                self.caps[c].measured_w += n.watts;
                self.caps[c].measured_gpu_w += n.gpu_watts;
                self.caps[c].nodes += 1;
            }
            jobs.extend(n.jobs.iter().copied());
        }
        self.jobs.retain(|id, _| jobs.contains(id));
        self.give_back.retain(|id| jobs.contains(&id));
        self.unopened.retain(|id| jobs.contains(id));
        let (step, keep, window) = (self.step_s, self.keep(), self.window_s);
        for c in &mut self.caps {
            if c.nodes == 0 {
                c.judge(now, window);
            }
            c.mark(now, step, keep);
        }
    }

    /// The caps now and their timelines over the last `hours`.
    fn view(&self, hours: f64, now: i64) -> PowerView {
        let from = now - (hours * 3600.0) as i64;
        let most = (REPLY_POINTS / self.caps.len().max(1)).max(10);
        // Counted here, not in the running sums: a view is asked for rarely, a report
        // arrives from every node every interval.
        let mut unopened = vec![0; self.caps.len()];
        for n in self.nodes.values().filter(|n| n.unopened) {
            for c in std::iter::once(0).chain(n.cap) {
                unopened[c] += 1;
            }
        }
        PowerView {
            at: now,
            interval_s: Seconds(self.step_s),
            over_grant_window_s: Seconds(self.window_s),
            caps: self
                .caps
                .iter()
                .zip(unopened)
                .map(|(c, u)| CapPower {
                    unopened_nodes: u,
                    ..c.now()
                })
                .collect(),
            timelines: self
                .caps
                .iter()
                .map(|c| c.timeline(from, most, self.step_s))
                .collect(),
        }
    }

    /// Log a refused report in one line, at most [`REFUSALS_LOGGED`] a minute.
    fn refused(&mut self, node: &str, e: &ErrorReply, now: i64) {
        let r = &mut self.refusals;
        if now / 60 != r.minute {
            r.minute = now / 60;
            r.logged = 0;
        }
        if r.logged >= REFUSALS_LOGGED {
            r.left_out += 1;
            return;
        }
        r.logged += 1;
        let more = std::mem::take(&mut r.left_out);
        tracing::warn!(
            // Debug-quoted: a refused name is the sender's text, not greenupd's.
            node = ?node.chars().take(64).collect::<String>(),
            refused_since_last_line = more,
            "power report refused, nothing of it counted: {}",
            e.message
        );
    }
}

/// Check a report against the site, at greenupd's time `now`: the node's name, the
/// number of samples and jobs, and that every value could be true.
fn check(site: &greenup::site::Site, r: &PowerReport, now: i64) -> Result<(), ErrorReply> {
    if !greenup::names::is_node(&r.node) {
        return Err(bad_field("node", &r.node, greenup::names::NODE_RULE));
    }
    if r.samples.is_empty() || r.samples.len() > MAX_SAMPLES {
        return Err(bad_field(
            "samples",
            format!("{} samples", r.samples.len()),
            &format!("1 to {MAX_SAMPLES} samples"),
        ));
    }
    // A GPU node's top power counts its GPUs, whose power its meter reports too.
    let top_w = site.node_type_of(&r.node).map_or(UNTYPED_MAX_W, |_| {
        MAX_OVER_TYPE
            * greenup::power::node_weight_w(site, &r.node, None, None).map_or(0.0, |w| w.0)
    });
    let mut jobs = HashSet::new();
    for s in &r.samples {
        // The figures as the node sent them, bare: a refusal quotes them as written.
        let (Watts(watts), Seconds(interval_s)) = (s.watts, s.interval_s);
        if s.jobs.is_empty() || s.jobs.len() > MAX_SAMPLE_JOBS {
            return Err(bad_field(
                "samples.jobs",
                format!("{} jobs", s.jobs.len()),
                &format!("1 to {MAX_SAMPLE_JOBS} job ids"),
            ));
        }
        for &j in &s.jobs {
            if !(1..=greenup::record::MAX_JOB_ID).contains(&j) {
                return Err(bad_field(
                    "samples.jobs",
                    j,
                    &format!("a job id from 1 to {}", greenup::record::MAX_JOB_ID),
                ));
            }
            jobs.insert(j);
        }
        if !(watts.is_finite() && (0.0..=top_w).contains(&watts)) {
            return Err(bad_field(
                "samples.watts",
                watts,
                &format!(
                    "a finite number of watts from 0 to {top_w:.0} ({MAX_OVER_TYPE} x node {}'s top power)",
                    r.node
                ),
            ));
        }
        if let Some(Watts(g)) = s.gpu_watts
            && !(g.is_finite() && (0.0..=watts).contains(&g))
        {
            return Err(bad_field(
                "samples.gpu_watts",
                g,
                &format!(
                    "the GPUs' part of the sample's {watts} W, a finite number of watts from 0 to it"
                ),
            ));
        }
        if !(interval_s.is_finite() && interval_s > 0.0 && interval_s <= MAX_INTERVAL_S) {
            return Err(bad_field(
                "samples.interval_s",
                interval_s,
                &format!("seconds above 0, at most {MAX_INTERVAL_S}"),
            ));
        }
        if s.at > now + MAX_AHEAD_S || s.at < now - MAX_AGE_S {
            return Err(bad_field(
                "samples.at",
                s.at,
                &format!(
                    "unix seconds from {} to {} (greenupd's clock is {now}: no more than {MAX_AGE_S} s old or {MAX_AHEAD_S} s ahead)",
                    now - MAX_AGE_S,
                    now + MAX_AHEAD_S
                ),
            ));
        }
    }
    if let Some(Watts(w)) = r.limit_w
        && !(w.is_finite() && w > 0.0 && w <= top_w)
    {
        return Err(bad_field(
            "limit_w",
            w,
            &format!(
                "the node's long-term limit read back, a finite number of watts above 0, at most {top_w:.0}"
            ),
        ));
    }
    if jobs.len() > MAX_SAMPLE_JOBS {
        return Err(bad_field(
            "samples.jobs",
            format!("{} distinct jobs", jobs.len()),
            &format!("at most {MAX_SAMPLE_JOBS} jobs in one report"),
        ));
    }
    Ok(())
}

/// The open job `job_id` as its nodes' reports are checked: from those kept here, the
/// decisions in memory, or the store (once per job, not per report).
async fn job_view(shared: &Arc<Shared>, job_id: u64) -> Result<Arc<JobView>, ErrorReply> {
    if let Some(v) = lock(&shared.live).job(job_id) {
        return Ok(v);
    }
    let recent = lock(&shared.recent).by_job.get(&job_id).cloned();
    let v = match recent {
        Some(v) => v,
        None => {
            let rec = super::known(shared.store.read(move |s| s.job(job_id)).await, job_id)?;
            if rec.state != JobState::Open {
                return Err(ErrorReply::new(
                    ErrorCode::Conflict,
                    format!("job {job_id} is not open: its nodes no longer report for it"),
                ));
            }
            Arc::new(JobView::new(rec.decision, &rec.request))
        }
    };
    lock(&shared.live).jobs.insert(job_id, v.clone());
    Ok(v)
}

/// The capped partition node `node` counts under when no open job says (the first, in
/// the site config's order, that holds it and has a cap).
fn node_partition(site: &greenup::site::Site, node: &str) -> Option<String> {
    site.partitions
        .iter()
        .find(|(_, p)| p.power_cap_w.is_some() && p.nodes.iter().any(|n| n == node))
        .map(|(name, _)| name.clone())
}

/// Bring each cap's granted watts up to the ledger, when the ledger has changed.
fn follow_ledger(shared: &Shared) {
    let changes = lock(&shared.ledger).changes();
    if lock(&shared.live).granted_current(changes) {
        return;
    }
    let (lines, changes) = {
        let l = lock(&shared.ledger);
        (l.lines(), l.changes())
    };
    lock(&shared.live).set_granted(&lines, changes);
}

/// power_report: count a node's report, or refuse all of it (and log why).
pub(super) async fn report(shared: &Arc<Shared>, ctx: &Ctx, r: PowerReport) -> Outcome {
    let at = now();
    let taken = take(shared, ctx, &r, at).await;
    if let Err(e) = &taken {
        lock(&shared.live).refused(&r.node, e, at);
    }
    taken
}

async fn take(shared: &Arc<Shared>, ctx: &Ctx, r: &PowerReport, at: i64) -> Outcome {
    check(&ctx.site, r, at)?;
    let mut ids: Vec<u64> = r.samples.iter().flat_map(|s| s.jobs.clone()).collect();
    ids.sort_unstable();
    ids.dedup();
    // The latest sample's first job (the meter's own) says which partition counts it.
    let first = r.samples.last().and_then(|s| s.jobs.first().copied());
    let mut partition = None;
    let mut own = None;
    let mut own_unopened = false;
    for id in ids {
        // A job greenupd never heard of started while it was down (the plugin failed
        // open): its nodes still draw power under the caps, so it is counted, under the
        // node's own capped partition, and said once in the log. A closed job's reports
        // are still refused: its nodes no longer run it.
        let v = match job_view(shared, id).await {
            Ok(v) => v,
            Err(e) if e.code == ErrorCode::NotFound => {
                if Some(id) == first {
                    own_unopened = true;
                    partition = node_partition(&ctx.site, &r.node);
                }
                if lock(&shared.live).first_unopened(id) {
                    tracing::warn!(
                        job_id = id,
                        node = %r.node,
                        "job {id} reports power but greenupd never opened it (down at its start?): its watts count under the caps, unplanned and ungranted"
                    );
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        if !v.has_node(&r.node) {
            return Err(ErrorReply::new(
                ErrorCode::Forbidden,
                format!(
                    "node '{}' is not one of job {id}'s nodes ({}): its power is not counted",
                    r.node,
                    v.nodes_text()
                ),
            ));
        }
        if Some(id) == first {
            partition = v.partition.clone();
            own = Some(v);
        }
    }
    follow_ledger(shared);
    let (samples, step) = {
        let mut l = lock(&shared.live);
        let samples = l.take(r, partition.as_deref(), own_unopened, at);
        let step = own.map(|v| l.give_back.judge(r, &v, &ctx.site, at));
        (samples, step.unwrap_or_default())
    };
    if let Some(s) = step.shrink {
        tokio::spawn(super::give_back::shrink(shared.clone(), s));
    }
    Ok(Reply::PowerTaken {
        samples,
        limit_w: step.limit_w,
    })
}

/// power_status: the caps now and over the last `hours` (all kept when absent).
pub(super) fn view(shared: &Shared, hours: Option<f64>) -> Result<PowerView, ErrorReply> {
    let hours = match hours {
        None => HOURS_KEPT,
        Some(h) if h.is_finite() && h > 0.0 => h.min(HOURS_KEPT),
        Some(h) => {
            return Err(bad_field(
                "hours",
                h,
                &format!("hours above 0 (at most {HOURS_KEPT} are kept)"),
            ));
        }
    };
    follow_ledger(shared);
    Ok(lock(&shared.live).view(hours, now()))
}

/// Once per meter interval, the caps' sums renewed and their timelines extended.
pub(super) async fn tick_loop(shared: Arc<Shared>) {
    loop {
        let step = lock(&shared.live).step_s;
        tokio::time::sleep(Duration::from_secs_f64(step)).await;
        follow_ledger(&shared);
        lock(&shared.live).tick(now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup_proto::live_power::PowerSample;

    fn live(window_s: f64) -> Live {
        let mut site: greenup::site::Site = greenup::site::load(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../etc/greenup.yaml"
        ))
        .unwrap();
        site.power.meter_interval_s = 5.0;
        site.power.over_grant_window_s = window_s;
        site.power_cap_w = Some(10_000.0);
        Live::new(&site)
    }

    fn rep(node: &str, at: i64, watts: f64) -> PowerReport {
        PowerReport {
            limit_w: None,
            node: node.into(),
            samples: vec![PowerSample {
                jobs: vec![1],
                at,
                watts: Watts(watts),
                interval_s: Seconds(5.0),
                gpu_watts: None,
            }],
        }
    }

    #[test]
    fn the_gpus_part_is_summed_beside_the_watts_and_leaves_with_its_node() {
        let mut l = live(60.0);
        let with_gpu = |node: &str, at: i64, watts: f64, gpu: f64| {
            let mut r = rep(node, at, watts);
            r.samples[0].gpu_watts = Some(Watts(gpu));
            r
        };
        l.take(&with_gpu("a", 100, 900.0, 700.0), None, false, 100);
        l.take(&rep("b", 100, 300.0), None, false, 100);
        assert_eq!(
            (l.caps[0].measured_w, l.caps[0].measured_gpu_w),
            (1200.0, 700.0)
        );
        // a's newer report replaces its GPUs' part too.
        l.take(&with_gpu("a", 105, 500.0, 350.0), None, false, 105);
        assert_eq!(
            (l.caps[0].measured_w, l.caps[0].measured_gpu_w),
            (800.0, 350.0)
        );
        // The interval's fresh sum agrees; once a's report no longer counts (125 s at a
        // 5 s interval), its GPUs leave with it.
        l.tick(106);
        assert_eq!(
            (l.caps[0].measured_w, l.caps[0].measured_gpu_w),
            (800.0, 350.0)
        );
        l.take(&rep("b", 110, 300.0), None, false, 110);
        l.tick(231);
        assert_eq!(
            (l.caps[0].now().measured_w, l.caps[0].now().measured_gpu_w),
            (Watts(300.0), Watts(0.0))
        );
    }

    #[test]
    fn a_nodes_new_report_replaces_its_last_in_the_sums() {
        let mut l = live(60.0);
        l.take(&rep("a", 100, 300.0), None, false, 100);
        l.take(&rep("b", 100, 200.0), None, false, 100);
        l.take(&rep("a", 105, 250.0), None, false, 105);
        // An older report changes nothing.
        assert_eq!(l.take(&rep("a", 103, 999.0), None, false, 105), 0);
        assert_eq!((l.caps[0].measured_w, l.caps[0].nodes), (450.0, 2));
        // b's report counts until 100 + 125 s; a's until 230.
        l.tick(226);
        assert_eq!((l.caps[0].measured_w, l.caps[0].nodes), (250.0, 1));
        l.tick(231);
        assert_eq!((l.caps[0].measured_w, l.caps[0].nodes), (0.0, 0));
    }

    #[test]
    fn the_timeline_keeps_six_hours_at_one_point_per_interval() {
        let mut l = live(60.0);
        for i in 0..10_000 {
            l.tick(1_000_000 + 5 * i);
        }
        assert_eq!(l.caps[0].points.len(), 6 * 3600 / 5 + 1);
        let v = l.view(1.0, 1_000_000 + 5 * 9_999);
        assert_eq!(v.timelines[0].points.len(), 721);
    }

    #[test]
    fn over_grant_warns_once_per_episode_after_the_window() {
        let mut l = live(10.0);
        l.caps[0].granted_w = 100.0;
        l.take(&rep("a", 100, 150.0), None, false, 100);
        l.take(&rep("a", 105, 150.0), None, false, 105);
        assert_eq!((l.caps[0].over_since, l.caps[0].episodes), (Some(100), 0));
        l.take(&rep("a", 110, 150.0), None, false, 110);
        l.take(&rep("a", 115, 150.0), None, false, 115);
        assert_eq!(l.caps[0].episodes, 1);
        l.take(&rep("a", 120, 50.0), None, false, 120);
        assert_eq!(l.caps[0].over_since, None);
        l.take(&rep("a", 125, 150.0), None, false, 125);
        l.take(&rep("a", 135, 150.0), None, false, 135);
        assert_eq!(l.caps[0].episodes, 2);
    }
}
