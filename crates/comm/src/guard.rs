//! The in-job guard (docs/runtime.md, "The in-job guard"): what the plugin hands the
//! runtime when the job's policy promises a `max_slowdown` and greenup holds a measured
//! baseline, the rule the runtime applies, and what each rank and node record of it.
//!
//! The rule is here, in the shared vocabulary, so that the runtime, the tests and the
//! documentation use one set of numbers.

use serde::{Deserialize, Serialize};

use crate::Seconds;

/// Seconds a rank's progress window lasts at least before it is judged. One second holds
/// many synchronising calls of any iterative program (a timestep is milliseconds to
/// seconds), so the window's rate is not one call's noise, and it is short enough for
/// the guard to act early in a run of minutes.
pub const WINDOW_S: f64 = 1.0;

/// Seconds since MPI_Init before the guard judges at all: two windows, so that start-up
/// (reading input, building communicators) is not the only thing the rate since start
/// has seen.
pub const MIN_ELAPSED_S: f64 = 2.0;

/// The guard acts once the projected run is longer than the baseline by more than this
/// share of `max_slowdown` (a half: at 10 %, from 5 % on). Acting only when the projection
/// already breaks the bound would be too late: time lost is lost, and raising the clock
/// recovers only what is still to run. A half leaves the other half of the slack for
/// the rest of the run to absorb what was lost, and is well above the few percent a
/// window's rate wanders on a steady program.
pub const ACT_AT: f64 = 0.5;

/// A rank leads, and is raised, when at least this share of its window was spent
/// outside MPI (computing). A rank that spends over 30 % of its time in MPI is mostly
/// waiting for others; a faster clock would only lengthen its waits, and its energy
/// would buy no time. The ranks on the critical path wait least.
pub const LEAD_SHARE: f64 = 0.7;

/// The highest frequency the guard accepts, in kHz (10 GHz): anything above is a unit
/// mistake, not a CPU.
const MAX_KHZ: u64 = 10_000_000;

/// What the guard watches and the clocks it may use (`GREENUP_GUARD`, one line of JSON).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guard {
    /// The policy's promise: the most the job may be slower than its baseline, a
    /// fraction (0.1 is 10 %).
    pub max_slowdown: f64,
    /// The measured baseline's synchronising calls per second, per rank (its ranks'
    /// synchronising calls over their wall seconds, at f_max).
    pub baseline_rate: f64,
    /// The node's highest CPU frequency, in kHz as cpufreq writes it: what the guard
    /// raises to.
    pub fmax_khz: u64,
    /// The frequency the plan set, in kHz: the guard never writes below it.
    pub plan_khz: u64,
}

impl Guard {
    /// Why these settings cannot be used, if they cannot.
    pub fn invalid(&self) -> Option<String> {
        if !(self.max_slowdown.is_finite() && self.max_slowdown > 0.0 && self.max_slowdown <= 10.0)
        {
            return Some(format!(
                "max_slowdown {} is not a fraction above 0 and at most 10",
                self.max_slowdown
            ));
        }
        if !(self.baseline_rate.is_finite() && self.baseline_rate > 0.0) {
            return Some(format!(
                "baseline_rate {} is not a positive rate",
                self.baseline_rate
            ));
        }
        for (name, khz) in [("fmax_khz", self.fmax_khz), ("plan_khz", self.plan_khz)] {
            if khz == 0 || khz > MAX_KHZ {
                return Some(format!("{name} {khz} is not a CPU frequency in kHz"));
            }
        }
        if self.plan_khz > self.fmax_khz {
            return Some(format!(
                "plan_khz {} is above fmax_khz {}",
                self.plan_khz, self.fmax_khz
            ));
        }
        None
    }

    /// The run projected from `calls` synchronising calls in `secs` seconds, as a
    /// multiple of the baseline's length (1.0: as fast as the baseline). The same program
    /// makes the same calls, so its length scales as the inverse of its rate. `None`
    /// without a call or a time to judge from.
    pub fn projected(&self, calls: u64, secs: f64) -> Option<f64> {
        (calls > 0 && secs.is_finite() && secs > 0.0)
            .then(|| self.baseline_rate * secs / calls as f64)
    }

    /// The projection above which the guard acts: `1 + ACT_AT × max_slowdown`.
    pub fn act_above(&self) -> f64 {
        1.0 + ACT_AT * self.max_slowdown
    }

    /// Whether a rank is on course to break the promise: judged from [`MIN_ELAPSED_S`]
    /// on, both its rate since start (`total`: calls, seconds) and its last window's
    /// (`window`) project a run longer than [`Guard::act_above`]. The window must agree
    /// so that a slow start the program has since left behind does not raise the clock.
    pub fn on_course_to_break(&self, total: (u64, f64), window: (u64, f64)) -> bool {
        let over = |(calls, secs): (u64, f64)| {
            self.projected(calls, secs)
                .is_some_and(|p| p > self.act_above())
        };
        total.1 >= MIN_ELAPSED_S && over(total) && over(window)
    }

    /// Whether the guard can do anything: the plan runs below f_max.
    pub fn can_raise(&self) -> bool {
        self.plan_khz < self.fmax_khz
    }
}

/// What greenupd tells a node of the guard when the job's policy promises a
/// `max_slowdown`: the promise, and the measured baseline's rate or why there is none.
/// The node adds its own clocks ([`GuardTerms::guard`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GuardTerms {
    /// The policy's `max_slowdown`, a fraction.
    pub max_slowdown: f64,
    /// The measured baseline's synchronising calls per second per rank; absent when
    /// greenup holds no usable baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_rate: Option<f64>,
    /// Why the guard is off, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<GuardOff>,
}

impl GuardTerms {
    /// The runtime's settings on a node whose CPUs top out at `fmax_khz` and run the
    /// plan's `plan_khz`, or why the guard is off there.
    pub fn guard(&self, fmax_khz: Option<u64>, plan_khz: Option<u64>) -> Result<Guard, GuardOff> {
        if let Some(off) = self.off {
            return Err(off);
        }
        let rate = self.baseline_rate.ok_or(GuardOff::NoBaseline)?;
        let fmax_khz = fmax_khz.ok_or(GuardOff::NoControl)?;
        // No plan applied: the node runs as it is, at its own top clock.
        let plan_khz = plan_khz.ok_or(GuardOff::AtFmax)?.min(fmax_khz);
        let g = Guard {
            max_slowdown: self.max_slowdown,
            baseline_rate: rate,
            fmax_khz,
            plan_khz,
        };
        if g.invalid().is_some() {
            return Err(GuardOff::Invalid);
        }
        if !g.can_raise() {
            return Err(GuardOff::AtFmax);
        }
        Ok(g)
    }
}

/// Whether a rank that spent `mpi_s` of a `window_s` window inside MPI leads: its share
/// outside MPI is at least [`LEAD_SHARE`].
pub fn leads(window_s: f64, mpi_s: f64) -> bool {
    window_s > 0.0 && (window_s - mpi_s.clamp(0.0, window_s)) / window_s >= LEAD_SHARE
}

/// Why the guard did not watch, or could not act, on a rank or a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardOff {
    /// `GREENUP_GUARD` did not parse or held values that cannot be used.
    Invalid,
    /// greenup holds no measured baseline of the application.
    NoBaseline,
    /// The baseline was measured before the profile the plan used.
    StaleBaseline,
    /// The plan already runs at f_max: nothing to raise to.
    AtFmax,
    /// The rank's CPUs have no cpufreq control the job may write.
    NoControl,
    /// The rank never made a synchronising call: no progress to measure.
    NoSync,
    /// A reason a newer runtime wrote.
    #[serde(other)]
    Other,
}

impl GuardOff {
    /// The word in the rank file.
    pub fn as_str(self) -> &'static str {
        match self {
            GuardOff::Invalid => "invalid",
            GuardOff::NoBaseline => "no_baseline",
            GuardOff::StaleBaseline => "stale_baseline",
            GuardOff::AtFmax => "at_fmax",
            GuardOff::NoControl => "no_control",
            GuardOff::NoSync => "no_sync",
            GuardOff::Other => "other",
        }
    }

    /// The reason as the report prints it after "guard off: ".
    pub fn why(self) -> &'static str {
        match self {
            GuardOff::Invalid => "GREENUP_GUARD did not parse",
            GuardOff::NoBaseline => "no baseline",
            GuardOff::StaleBaseline => "the baseline is older than the profile",
            GuardOff::AtFmax => "the plan already runs at f_max",
            GuardOff::NoControl => "no cpufreq control of the job's own",
            GuardOff::NoSync => "the ranks never synchronised",
            GuardOff::Other => "a reason this version does not know",
        }
    }
}

/// What the guard did on one rank (in its `rank-R.json`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GuardRecord {
    /// Whether the guard watched this rank (its settings were valid and it could act).
    pub armed: bool,
    /// Why it did not watch, or could not judge; absent when it could.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<GuardOff>,
    /// Seconds from MPI_Init to the raise, when the guard raised the clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acted_s: Option<Seconds>,
    /// The control's value before the raise, in kHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_khz: Option<u64>,
    /// The value the guard wrote, in kHz (f_max).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_khz: Option<u64>,
    /// Seconds the rank's core spent raised.
    #[serde(default)]
    pub raised_s: Seconds,
}

impl GuardRecord {
    /// Whether the record's times fit in `limit_s` and its clocks are frequencies.
    pub fn sane(&self, limit_s: f64) -> bool {
        let time = |v: f64| v.is_finite() && (0.0..=limit_s).contains(&v);
        let khz = |k: Option<u64>| k.is_none_or(|k| k <= MAX_KHZ);
        time(self.raised_s.0)
            && self.acted_s.is_none_or(|Seconds(t)| time(t))
            && khz(self.from_khz)
            && khz(self.to_khz)
    }
}

/// What the guard did on one node: its ranks' records added up, or why it was off.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NodeGuard {
    /// Ranks the guard watched.
    pub armed: u32,
    /// Ranks whose clock it raised.
    pub acted: u32,
    /// Seconds from start to the first raise on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_s: Option<Seconds>,
    /// The first raise's clock before, in kHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_khz: Option<u64>,
    /// The first raise's clock after, in kHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_khz: Option<u64>,
    /// The longest any rank of the node spent raised, in seconds.
    #[serde(default)]
    pub raised_s: Seconds,
    /// Why the guard was off (or could not judge) here, in words; absent when it watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<String>,
}

impl NodeGuard {
    /// A node where the guard was off for `why` (the epilog's, when the plugin never set it).
    pub fn off(why: GuardOff) -> NodeGuard {
        NodeGuard {
            off: Some(why.why().to_string()),
            ..NodeGuard::default()
        }
    }

    /// The node's ranks added up; `None` when no rank was asked to guard.
    pub fn of(ranks: &[super::RankStats]) -> Option<NodeGuard> {
        let mut node: Option<NodeGuard> = None;
        let mut first_off: Option<(u32, GuardOff)> = None;
        for (rank, g) in ranks.iter().filter_map(|r| Some((r.rank, r.guard?))) {
            let n = node.get_or_insert_with(NodeGuard::default);
            n.armed += u32::from(g.armed);
            if let Some(at) = g.acted_s {
                n.acted += 1;
                if n.first_s.is_none_or(|f| at < f) {
                    n.first_s = Some(at);
                    n.from_khz = g.from_khz;
                    n.to_khz = g.to_khz;
                }
            }
            n.raised_s = n.raised_s.max(g.raised_s);
            if let Some(off) = g.off
                && first_off.is_none_or(|(r, _)| rank < r)
            {
                first_off = Some((rank, off));
            }
        }
        let mut node = node?;
        // A reason is the node's only where no rank was watched; ranks that never
        // synchronised while others were watched say nothing about the node.
        if node.armed == 0 || node.acted == 0 {
            node.off = first_off.map(|(_, o)| o.why().to_string());
        }
        Some(node)
    }
}

/// The job report's line for the guard, from each node's summary (`None` for a node
/// without one); `None` when no node was asked to guard. Energy is not split: the
/// raised cores' joules are inside the node's measured energy, so the line says so.
pub fn job_line<'a>(nodes: impl IntoIterator<Item = Option<&'a NodeGuard>>) -> Option<String> {
    let nodes: Vec<&NodeGuard> = nodes.into_iter().flatten().collect();
    if nodes.is_empty() {
        return None;
    }
    let acted: Vec<&&NodeGuard> = nodes.iter().filter(|n| n.acted > 0).collect();
    if let Some(first) = acted.iter().min_by(|a, b| {
        let at = |n: &NodeGuard| n.first_s.map_or(0.0, |s| s.0);
        at(a).total_cmp(&at(b))
    }) {
        let ghz = |k: Option<u64>| k.map_or("?".to_string(), |k| format!("{:.2}", k as f64 / 1e6));
        let raised = acted.iter().map(|n| n.raised_s.0).fold(0.0, f64::max);
        return Some(format!(
            "guard raised {} {} clocks at {:.1} s (from {} to {} GHz) for {:.1} s; its energy cost is not separated from the job's",
            acted.len(),
            if acted.len() == 1 { "node's" } else { "nodes'" },
            first.first_s.map_or(0.0, |s| s.0),
            ghz(first.from_khz),
            ghz(first.to_khz),
            raised
        ));
    }
    if nodes.iter().any(|n| n.armed > 0) {
        return Some("promise held by the model: the guard watched and never acted".into());
    }
    let why = nodes
        .iter()
        .find_map(|n| n.off.as_deref())
        .unwrap_or("no rank watched");
    Some(format!("guard off: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guard {
        Guard {
            max_slowdown: 0.1,
            baseline_rate: 100.0,
            fmax_khz: 3_000_000,
            plan_khz: 2_000_000,
        }
    }

    #[test]
    fn the_projection_is_the_baseline_rate_over_the_rank_rate() {
        let g = guard();
        // 100 calls/s at baseline; 900 calls in 10 s is 90 calls/s: 100/90 = 1.111.
        assert!((g.projected(900, 10.0).unwrap() - 100.0 / 90.0).abs() < 1e-12);
        // As fast as the baseline: 1.0.
        assert_eq!(g.projected(1000, 10.0), Some(1.0));
        assert_eq!(g.projected(0, 10.0), None);
        assert_eq!(g.projected(10, 0.0), None);
        // Half of 10 %: act above 1.05.
        assert!((g.act_above() - 1.05).abs() < 1e-12);
    }

    #[test]
    fn on_course_needs_both_the_run_and_the_window_past_the_margin_and_two_seconds() {
        let g = guard();
        // 94 calls/s projects 1.0638 > 1.05; 96 calls/s projects 1.0417 < 1.05.
        let slow = (940, 10.0);
        let fine = (960, 10.0);
        assert!(g.on_course_to_break(slow, (94, 1.0)));
        assert!(
            !g.on_course_to_break(fine, (94, 1.0)),
            "the run so far is fine"
        );
        assert!(
            !g.on_course_to_break(slow, (96, 1.0)),
            "the last window is fine"
        );
        // 1.5 s in: too early whatever the rate.
        assert!(!g.on_course_to_break((10, 1.5), (10, 1.0)));
        // At exactly 2 s, 150 calls project 100 × 2 / 150 = 1.333.
        assert!(g.on_course_to_break((150, 2.0), (75, 1.0)));
        // Never synchronised: nothing to project, never on course.
        assert!(!g.on_course_to_break((0, 100.0), (0, 1.0)));
    }

    #[test]
    fn a_rank_leads_when_it_computes_seventy_percent_of_its_window() {
        assert!(leads(1.0, 0.3));
        assert!(leads(2.0, 0.2));
        assert!(!leads(1.0, 0.31));
        assert!(!leads(1.0, 1.0));
        assert!(!leads(0.0, 0.0));
        // MPI time above the window (threads overlapping) is the whole window.
        assert!(!leads(1.0, 5.0));
    }

    #[test]
    fn settings_that_cannot_be_used_are_refused() {
        assert_eq!(guard().invalid(), None);
        let bad = [
            Guard {
                max_slowdown: 0.0,
                ..guard()
            },
            Guard {
                max_slowdown: f64::NAN,
                ..guard()
            },
            Guard {
                baseline_rate: -1.0,
                ..guard()
            },
            Guard {
                baseline_rate: f64::INFINITY,
                ..guard()
            },
            Guard {
                fmax_khz: 0,
                ..guard()
            },
            Guard {
                fmax_khz: 3_000_000_000,
                ..guard()
            },
            Guard {
                plan_khz: 3_100_000,
                ..guard()
            },
        ];
        for g in bad {
            assert!(g.invalid().is_some(), "{g:?}");
        }
        assert!(
            serde_json::from_str::<Guard>(r#"{"max_slowdown":0.1,"baseline_rate":1}"#).is_err()
        );
        assert!(
            serde_json::from_str::<Guard>(
                r#"{"max_slowdown":0.1,"baseline_rate":1,"fmax_khz":3,"plan_khz":2,"x":1}"#
            )
            .is_err()
        );
        let at_fmax = Guard {
            plan_khz: 3_000_000,
            ..guard()
        };
        assert_eq!(at_fmax.invalid(), None);
        assert!(!at_fmax.can_raise());
    }

    fn rank(rank: u32, g: Option<GuardRecord>) -> super::super::RankStats {
        super::super::RankStats {
            rank,
            wall_s: crate::Seconds(10.0),
            mpi_s: crate::Seconds(1.0),
            bytes: 0,
            calls: 0,
            sync_calls: 0,
            low_s: crate::Seconds(0.0),
            transitions: 0,
            saved_j: None,
            complete: true,
            errors: 0,
            guard: g,
            steps: None,
        }
    }

    fn armed() -> GuardRecord {
        GuardRecord {
            armed: true,
            off: None,
            acted_s: None,
            from_khz: None,
            to_khz: None,
            raised_s: Seconds(0.0),
        }
    }

    #[test]
    fn a_node_adds_up_its_ranks_and_the_report_says_one_line() {
        let raised = |at: f64, for_s: f64| GuardRecord {
            acted_s: Some(Seconds(at)),
            from_khz: Some(2_000_000),
            to_khz: Some(3_000_000),
            raised_s: Seconds(for_s),
            ..armed()
        };
        let node = NodeGuard::of(&[
            rank(0, Some(raised(4.0, 6.0))),
            rank(1, Some(raised(3.0, 7.0))),
            rank(2, Some(armed())),
        ])
        .unwrap();
        assert_eq!((node.armed, node.acted), (3, 2));
        assert_eq!(node.first_s, Some(Seconds(3.0)));
        assert_eq!(node.raised_s, Seconds(7.0));
        assert_eq!(node.off, None);
        assert_eq!(
            job_line([Some(&node), None]).unwrap(),
            "guard raised 1 node's clocks at 3.0 s (from 2.00 to 3.00 GHz) for 7.0 s; its energy cost is not separated from the job's"
        );
        let quiet = NodeGuard::of(&[rank(0, Some(armed()))]).unwrap();
        assert_eq!(
            job_line([Some(&quiet)]).unwrap(),
            "promise held by the model: the guard watched and never acted"
        );
        let never = NodeGuard::of(&[rank(
            0,
            Some(GuardRecord {
                off: Some(GuardOff::NoSync),
                ..armed()
            }),
        )])
        .unwrap();
        assert_eq!(never.off.as_deref(), Some("the ranks never synchronised"));
        let off = NodeGuard::off(GuardOff::NoBaseline);
        assert_eq!(job_line([Some(&off)]).unwrap(), "guard off: no baseline");
        assert_eq!(job_line([None]), None);
        assert_eq!(NodeGuard::of(&[rank(0, None)]), None);
    }

    #[test]
    fn a_nodes_terms_become_settings_or_a_reason() {
        let t = GuardTerms {
            max_slowdown: 0.1,
            baseline_rate: Some(100.0),
            off: None,
        };
        assert_eq!(t.guard(Some(3_000_000), Some(2_000_000)), Ok(guard()));
        assert_eq!(
            t.guard(Some(3_000_000), Some(3_000_000)),
            Err(GuardOff::AtFmax)
        );
        assert_eq!(t.guard(Some(3_000_000), None), Err(GuardOff::AtFmax));
        assert_eq!(t.guard(None, Some(2_000_000)), Err(GuardOff::NoControl));
        let none = GuardTerms {
            baseline_rate: None,
            ..t
        };
        assert_eq!(
            none.guard(Some(3_000_000), Some(2_000_000)),
            Err(GuardOff::NoBaseline)
        );
        let stale = GuardTerms {
            off: Some(GuardOff::StaleBaseline),
            ..t
        };
        assert_eq!(
            stale.guard(Some(3_000_000), Some(2_000_000)),
            Err(GuardOff::StaleBaseline)
        );
    }

    #[test]
    fn an_unknown_reason_reads_as_other() {
        let r: GuardRecord = serde_json::from_str(r#"{"armed":false,"off":"martian"}"#).unwrap();
        assert_eq!(r.off, Some(GuardOff::Other));
    }
}
