//! Learning a node type's busy watts at each clock from what its nodes measured (RAPL
//! and the like) in finished runs, to lay over the site config's power model
//! ([`crate::model::measured_power`]), and each node's factor where nodes of one type
//! draw measurably differently ([`crate::model::node_scale`]). Pure functions:
//! greenupd reads the runs and logs what this leaves out.
//!
//! How one node's run becomes a sample: the node's energy `E` over the run's wall time
//! `T`, with `c` of it computing, gives `busy_w = (E - idle_w * (T - c)) / c`, `idle_w`
//! being the site's `static_w` (greenupd stores no measured idle power). The waiting
//! share is charged at idle, but MPI ranks that wait by polling draw nearly busy power,
//! which this formula books as busy power of the computing share: the bias is at most
//! `(poll_w - idle_w) * (T - c) / c`. Only runs whose node computed at least
//! [`MIN_COMPUTE_SHARE`] of the wall time are used, which bounds that bias at 11% of the
//! polling excess. A least-squares fit of `E` on `(T, c)` per clock would learn idle
//! watts too, but needs runs whose compute shares differ widely; the runs of one
//! application at one clock mostly share one, which leaves the fit ill-conditioned.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::model::NodeType;
use crate::model::measured_power::{MeasuredClock, NodeFactor, PowerCurve, overlay};
use crate::profile::outcome::{Outcome, outcome_from_record};
use crate::record::{JobRecord, RunState};
use crate::site::Site;

/// Closed jobs, newest first, the curves are learned from (greenupd and `greenup site
/// power` read the same). The cost grows with their node outcomes: refinement reads 50
/// whole jobs in milliseconds, so a thousand small jobs take some tens of milliseconds
/// (an estimate from that, not measured); at a few dozen jobs a day per clock they
/// still span weeks.
pub const LEARN_FROM: usize = 1000;

/// The least share of a run's wall time a node must have computed for its run to
/// teach its busy watts (see the module's note on polling waits).
pub const MIN_COMPUTE_SHARE: f64 = 0.9;

/// Distinct runs a clock needs before its measured watts replace the site's: one run
/// on many nodes shares one input and one hour, and three runs let one odd run neither
/// set the curve alone nor hide from the deviation check, which needs a middle value.
pub const MIN_RUNS: usize = 3;

/// How far a node's factor must lie from 1 before it plans with it: RAPL readings of
/// identical runs on one node differ by about this much, and a node within it plans as
/// its type (which also spares greenupd rebuilding its plans for noise).
pub const NODE_SHARE: f64 = 0.02;

/// How far a node's busy watts may lie from its type's median at that clock, in
/// robust deviations (1.4826 x the median absolute deviation) before it is left out.
pub const FAR_OFF_DEVIATIONS: f64 = 3.0;

/// The least robust deviation, as a share of the median: identical readings would
/// otherwise make any difference at all "far off".
const MIN_DEVIATION_SHARE: f64 = 0.02;

/// How much a type's busy watts may fall as its clock rises before the curve counts as
/// not monotonic: RAPL readings of identical runs differ by a few percent.
pub const MONOTONIC_NOISE_SHARE: f64 = 0.05;

/// How close a reported clock must be to one the type offers to count as it: nodes
/// report the clock they ran at, which drifts a little from the one set.
const CLOCK_MATCH_SHARE: f64 = 0.025;

/// Why a node's run, or a type's whole curve, was left out of the learning.
#[derive(Debug, Clone, PartialEq)]
pub enum LeftOutWhy {
    /// The node's energy is zero, negative or not a number, or works out below its idle
    /// power: its counter wrapped or stopped.
    Counter {
        /// The energy it reported, joules.
        energy_j: f64,
        /// The run's wall time, seconds.
        time_s: f64,
        /// The site's idle watts of its type.
        idle_w: f64,
    },
    /// The node's busy watts lie far from its type's median at that clock.
    FarOff {
        /// Its busy watts.
        busy_w: f64,
        /// The type's median at that clock.
        median_w: f64,
        /// One robust deviation, watts.
        deviation_w: f64,
    },
    /// The type's busy watts fall as its clock rises, beyond noise: its whole measured
    /// curve is left out.
    NotMonotonic {
        /// The lower clock, GHz, and its busy watts.
        low: (f64, f64),
        /// The higher clock, GHz, and its busy watts.
        high: (f64, f64),
    },
}

/// One thing the learning left out, to be logged as one line.
#[derive(Debug, Clone, PartialEq)]
pub struct LeftOut {
    /// The node type.
    pub node_type: String,
    /// The node and the job, for a node's run; None for a whole curve.
    pub node: Option<(String, u64)>,
    /// The clock, GHz, for a node's run.
    pub freq_ghz: Option<f64>,
    /// Why.
    pub why: LeftOutWhy,
}

impl fmt::Display for LeftOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((node, job)) = &self.node {
            write!(f, "node {node} (type {}) job {job}", self.node_type)?;
        } else {
            write!(f, "node type {}", self.node_type)?;
        }
        if let Some(g) = self.freq_ghz {
            write!(f, " at {g} GHz")?;
        }
        match &self.why {
            LeftOutWhy::Counter {
                energy_j,
                time_s,
                idle_w,
            } => write!(
                f,
                ": energy {energy_j} J over {time_s} s is under the idle {idle_w} W \
                 (counter wrapped or stopped); left out"
            ),
            LeftOutWhy::FarOff {
                busy_w,
                median_w,
                deviation_w,
            } => write!(
                f,
                ": busy {busy_w:.1} W is over {FAR_OFF_DEVIATIONS} deviations of \
                 {deviation_w:.1} W from the type's median {median_w:.1} W; left out"
            ),
            LeftOutWhy::NotMonotonic { low, high } => write!(
                f,
                ": busy watts fall from {:.1} W at {} GHz to {:.1} W at {} GHz; \
                 its measured curve is not used",
                low.1, low.0, high.1, high.0
            ),
        }
    }
}

/// What [`learn`] found: each node type's curve (only types with a measured clock) and
/// what it left out.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Learned {
    /// Measured curves by node type.
    pub curves: BTreeMap<String, PowerCurve>,
    /// Runs and curves left out, each with its figures.
    pub left_out: Vec<LeftOut>,
}

/// One node's busy watts in one run.
struct Sample {
    node: String,
    job_id: u64,
    busy_w: f64,
}

/// Learn each node type's busy watts per clock from finished runs, with `types` the
/// site's node types (their site model gives the idle watts and the clocks offered).
/// Runs that did not complete or locked GPU clocks, nodes without a measured energy or
/// compute time, and nodes that computed under [`MIN_COMPUTE_SHARE`] of the run teach
/// nothing and are not reported; broken counters, far-off nodes and non-monotonic
/// curves are left out and reported.
pub fn learn(outcomes: &[Outcome], types: &BTreeMap<String, NodeType>) -> Learned {
    let mut left_out = Vec::new();
    // type -> clock index -> samples
    let mut by_clock: BTreeMap<&str, BTreeMap<usize, Vec<Sample>>> = BTreeMap::new();
    for o in outcomes {
        if o.state != RunState::Completed || o.gpu_locked {
            continue;
        }
        let t = o.time_s;
        if !(t.is_finite() && t > 0.0) {
            continue;
        }
        for n in &o.nodes {
            // A node whose GPUs worked adds their watts to its energy.
            if n.gpu.is_some() {
                continue;
            }
            let Some(nt) = types.get(&n.node_type) else {
                continue;
            };
            let Some(k) = clock_index(nt, n.freq_ghz) else {
                continue;
            };
            let (Some(e), Some(c)) = (n.energy_j, n.compute_s) else {
                continue;
            };
            if !(c.is_finite() && c > 0.0 && c <= t * 1.000_001) || c < MIN_COMPUTE_SHARE * t {
                continue;
            }
            let f = nt.freqs_ghz[k];
            let Ok(idle_w) = nt.site_static_w(f) else {
                continue;
            };
            let busy_w = (e - idle_w * (t - c)) / c;
            // Below idle over the run means the counter lost energy.
            if !(e.is_finite() && e > 0.0 && busy_w.is_finite() && busy_w >= idle_w) {
                left_out.push(LeftOut {
                    node_type: n.node_type.clone(),
                    node: Some((n.name.clone(), o.job_id)),
                    freq_ghz: Some(f),
                    why: LeftOutWhy::Counter {
                        energy_j: e,
                        time_s: t,
                        idle_w,
                    },
                });
                continue;
            }
            by_clock
                .entry(nt.name.as_str())
                .or_default()
                .entry(k)
                .or_default()
                .push(Sample {
                    node: n.name.clone(),
                    job_id: o.job_id,
                    busy_w,
                });
        }
    }
    let mut curves = BTreeMap::new();
    for (ty, clocks) in by_clock {
        let Some(nt) = types.get(ty) else { continue };
        // The clocks enough runs measured, each with its kept samples.
        let mut measured: Vec<(f64, Vec<Sample>)> = Vec::new();
        for (k, samples) in clocks {
            let f = nt.freqs_ghz[k];
            let kept = drop_far_off(ty, f, samples, &mut left_out);
            if kept.iter().map(|s| s.job_id).collect::<BTreeSet<_>>().len() >= MIN_RUNS {
                measured.push((f, kept));
            }
        }
        let (means, factors) = fit_nodes(&measured);
        let mut curve = PowerCurve {
            nodes: factors
                .into_iter()
                .filter(|(_, n)| (n.factor - 1.0).abs() >= NODE_SHARE)
                .collect(),
            ..PowerCurve::default()
        };
        for ((f, kept), busy_w) in measured.iter().zip(means) {
            curve.clocks.push(MeasuredClock {
                freq_ghz: *f,
                busy_w,
                runs: kept.iter().map(|s| s.job_id).collect::<BTreeSet<_>>().len(),
                samples: kept.len(),
            });
        }
        if let Some(w) = curve
            .clocks
            .windows(2)
            .find(|w| w[1].busy_w < w[0].busy_w * (1.0 - MONOTONIC_NOISE_SHARE))
        {
            left_out.push(LeftOut {
                node_type: ty.to_string(),
                node: None,
                freq_ghz: None,
                why: LeftOutWhy::NotMonotonic {
                    low: (w[0].freq_ghz, w[0].busy_w),
                    high: (w[1].freq_ghz, w[1].busy_w),
                },
            });
            continue;
        }
        if !curve.clocks.is_empty() {
            curves.insert(ty.to_string(), curve);
        }
    }
    Learned { curves, left_out }
}

/// [`learn`] from stored jobs, on `site`'s node types without any curve laid over them
/// (their site models give the idle watts). Where the site samples clocks, each curve
/// holds a floor below its lowest measured clock ([`PowerCurve::floor_below`]).
pub fn learn_from_records(records: &[JobRecord], site: &Site) -> Learned {
    let outcomes: Vec<Outcome> = records
        .iter()
        .filter_map(|r| outcome_from_record(r, site))
        .collect();
    let mut learned = learn(&outcomes, &overlay(&site.node_types, &BTreeMap::new()));
    for curve in learned.curves.values_mut() {
        curve.floor_below = site.power.sample_clocks.is_some();
    }
    learned
}

/// The index of the type's clock `f` stands for, if it is near one.
fn clock_index(nt: &NodeType, f: f64) -> Option<usize> {
    if !(f.is_finite() && f > 0.0) {
        return None;
    }
    let (k, g) = nt
        .freqs_ghz
        .iter()
        .enumerate()
        .min_by(|a, b| (a.1 - f).abs().total_cmp(&(b.1 - f).abs()))?;
    ((g - f).abs() <= CLOCK_MATCH_SHARE * g).then_some(k)
}

/// Rounds of [`fit_nodes`] at most; it settles in ten or so.
const FIT_ROUNDS: usize = 50;

/// Each measured clock's busy watts and each node's factor, fitted together: busy watts
/// of a node at a clock are the clock's watts times the node's factor. Alternately the
/// clocks' means with each sample divided by its node's factor, then each node's factor
/// against those means, scaled so that the factors average 1 (the curve stands for the
/// type's average measured node), until the means settle. Fitted together because a
/// scheduler does not spread nodes evenly over clocks: the plain mean at a clock that
/// mostly hot nodes ran would be too high, and every node's factor against it too low.
/// Nodes with fewer than [`MIN_RUNS`] runs count at factor 1 and get none.
fn fit_nodes(measured: &[(f64, Vec<Sample>)]) -> (Vec<f64>, BTreeMap<String, NodeFactor>) {
    let mut factors = BTreeMap::new();
    let mut means = clock_means(measured, &factors);
    for _ in 0..FIT_ROUNDS {
        let mut next = node_factors(measured, &means);
        let avg = next.values().map(|n| n.factor).sum::<f64>() / next.len().max(1) as f64;
        if avg.is_finite() && avg > 0.0 {
            for n in next.values_mut() {
                n.factor /= avg;
            }
        }
        let next_means = clock_means(measured, &next);
        let settled = means
            .iter()
            .zip(&next_means)
            .all(|(a, b)| (a - b).abs() <= 1e-9 * a.abs());
        factors = next;
        means = next_means;
        if settled {
            break;
        }
    }
    (means, factors)
}

/// Each measured clock's mean busy watts, each sample divided by its node's factor in
/// `factors` (1 where it has none).
fn clock_means(
    measured: &[(f64, Vec<Sample>)],
    factors: &BTreeMap<String, NodeFactor>,
) -> Vec<f64> {
    measured
        .iter()
        .map(|(_, kept)| {
            let k = |s: &Sample| factors.get(&s.node).map_or(1.0, |n| n.factor);
            kept.iter().map(|s| s.busy_w / k(s)).sum::<f64>() / kept.len() as f64
        })
        .collect()
}

/// Each node's factor against the clocks' `means`: the median of its samples' ratios
/// to the mean at their clock, for each node that [`MIN_RUNS`] distinct runs measured.
/// The median, so that one odd run does not move a node.
fn node_factors(measured: &[(f64, Vec<Sample>)], means: &[f64]) -> BTreeMap<String, NodeFactor> {
    let mut by_node: BTreeMap<&str, (Vec<f64>, BTreeSet<u64>)> = BTreeMap::new();
    for ((_, kept), mean) in measured.iter().zip(means) {
        if !(mean.is_finite() && *mean > 0.0) {
            continue;
        }
        for s in kept {
            let e = by_node.entry(s.node.as_str()).or_default();
            e.0.push(s.busy_w / mean);
            e.1.insert(s.job_id);
        }
    }
    by_node
        .into_iter()
        .filter(|(_, (_, runs))| runs.len() >= MIN_RUNS)
        .map(|(node, (ratios, runs))| {
            (
                node.to_string(),
                NodeFactor {
                    factor: median(ratios),
                    runs: runs.len(),
                },
            )
        })
        .filter(|(_, n)| n.factor.is_finite() && n.factor > 0.0)
        .collect()
}

/// The samples within [`FAR_OFF_DEVIATIONS`] robust deviations of their median; the
/// rest go to `left_out`. Fewer than three samples have no middle to judge by.
fn drop_far_off(
    ty: &str,
    f: f64,
    samples: Vec<Sample>,
    left_out: &mut Vec<LeftOut>,
) -> Vec<Sample> {
    if samples.len() < 3 {
        return samples;
    }
    let median_w = median(samples.iter().map(|s| s.busy_w).collect());
    let mad = median(
        samples
            .iter()
            .map(|s| (s.busy_w - median_w).abs())
            .collect(),
    );
    let deviation_w = (1.4826 * mad).max(MIN_DEVIATION_SHARE * median_w);
    let (kept, far): (Vec<_>, Vec<_>) = samples
        .into_iter()
        .partition(|s| (s.busy_w - median_w).abs() <= FAR_OFF_DEVIATIONS * deviation_w);
    left_out.extend(far.into_iter().map(|s| LeftOut {
        node_type: ty.to_string(),
        node: Some((s.node, s.job_id)),
        freq_ghz: Some(f),
        why: LeftOutWhy::FarOff {
            busy_w: s.busy_w,
            median_w,
            deviation_w,
        },
    }));
    kept
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    greenup_core::stats::median_of_sorted(&v).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::hetero::{Hetero, TypeTimes};
    use crate::model::measured_power::{PowerSource, table};
    use crate::model::{Config, NodeSetting, PowerModel, Predictor};
    use crate::profile::outcome::NodeOutcome;

    /// The EPYC 7502 of tests/physics/cpus.yaml as a site would write it with the cube
    /// law: 77 W idle, 260 W busy at 2.5 GHz, so 183 W dynamic at f_max.
    fn epyc() -> BTreeMap<String, NodeType> {
        let t = NodeType {
            name: "epyc".into(),
            freqs_ghz: vec![1.2, 1.5, 2.2, 2.5],
            power: PowerModel::AtMax {
                dynamic_w: 183.0,
                static_w: 77.0,
                gamma: 3.0,
            },
        };
        BTreeMap::from([("epyc".to_string(), t)])
    }

    /// A completed run of `time_s` seconds on one node per `(node, GHz, joules, compute s)`.
    fn run(job_id: u64, time_s: f64, nodes: &[(&str, f64, f64, f64)]) -> Outcome {
        Outcome {
            job_id,
            state: RunState::Completed,
            time_s,
            predicted_time_s: time_s,
            gpu_locked: false,
            nodes: nodes
                .iter()
                .map(|&(name, f, e, c)| NodeOutcome {
                    name: name.into(),
                    node_type: "epyc".into(),
                    freq_ghz: f,
                    energy_j: Some(e),
                    compute_s: Some(c),
                    comm_s: Some(time_s - c),
                    calls: None,
                    bytes: None,
                    gpu: None,
                })
                .collect(),
        }
    }

    /// Three one-node runs of 100 s at `f` drawing `busy_w` while computing 95 s and
    /// the 77 W idle the other 5 s: E = 95 busy + 385 J.
    fn three_runs(first_job: u64, f: f64, busy_w: f64) -> Vec<Outcome> {
        (0..3)
            .map(|i| {
                run(
                    first_job + i,
                    100.0,
                    &[("n1", f, 95.0 * busy_w + 385.0, 95.0)],
                )
            })
            .collect()
    }

    /// The hetero model of a program computing 100 s at f_max on `types`' epyc.
    fn hundred_seconds(types: BTreeMap<String, NodeType>) -> Hetero {
        Hetero {
            iterations: 1.0,
            types: BTreeMap::from([("epyc".to_string(), TypeTimes::timed(100.0, 0.0))]),
            site_types: types,
            steps: None,
            time_choice: None,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn two_measured_clocks_are_recovered_and_the_one_between_is_interpolated() {
        let types = epyc();
        let mut runs = three_runs(1, 1.5, 173.0);
        runs.extend(three_runs(10, 2.5, 260.0));
        let l = learn(&runs, &types);
        assert!(l.left_out.is_empty(), "{:?}", l.left_out);
        let c = &l.curves["epyc"];
        assert_eq!(c.clocks.len(), 2);
        assert!(close(c.clocks[0].busy_w, 173.0) && close(c.clocks[1].busy_w, 260.0));

        let t = types["epyc"].with_measured(Some(c.clone()));
        // Measured: busy less the site's 77 W idle.
        assert!(close(t.dynamic_w(1.5).unwrap(), 96.0));
        assert!(close(t.dynamic_w(2.5).unwrap(), 183.0));
        assert_eq!(t.power_source(2.5), PowerSource::Measured { runs: 3 });
        assert_eq!(t.power_source(2.5).to_string(), "measured, 3 runs");
        // 2.2 GHz lies 0.7 of the way from 1.5 to 2.5: 173 + 0.7 * 87 = 233.9 W busy.
        assert!(close(t.dynamic_w(2.2).unwrap(), 233.9 - 77.0));
        assert_eq!(t.power_source(2.2), PowerSource::Interpolated);
        // 1.2 GHz is below every measured clock: the site's cube law, scaled to meet
        // the measured 173 W at 1.5 GHz (no floor: `learn` alone sets none).
        let site = |f: f64| 77.0 + 183.0 * (f / 2.5f64).powi(3);
        let hand = site(1.2) * 173.0 / site(1.5);
        assert!(close(t.dynamic_w(1.2).unwrap(), hand - 77.0));
        assert_eq!(
            t.power_source(1.2).to_string(),
            "scaled from the nearest measured clock"
        );
        // Idle watts stay the site's.
        assert_eq!(t.static_w(2.2).unwrap(), 77.0);

        let shown = table(&BTreeMap::from([("epyc".to_string(), t)]));
        assert!(
            shown.contains("epyc                2.20      77.0     233.9  interpolated"),
            "{shown}"
        );
        assert!(
            shown.contains("epyc                2.50      77.0     260.0  measured, 3 runs"),
            "{shown}"
        );
    }

    #[test]
    fn a_clock_under_the_run_minimum_keeps_the_site_value() {
        let types = epyc();
        let mut runs = three_runs(1, 1.5, 173.0);
        // Two runs at 2.2 GHz are one short of MIN_RUNS.
        runs.truncate(3);
        runs.extend(three_runs(10, 2.2, 221.0).into_iter().take(2));
        let l = learn(&runs, &types);
        let c = &l.curves["epyc"];
        assert_eq!(c.clocks.len(), 1);
        assert_eq!(c.clocks[0].freq_ghz, 1.5);
        // With one measured clock, 2.2 lies above it: site, scaled.
        let t = types["epyc"].with_measured(Some(c.clone()));
        assert_eq!(t.power_source(2.2), PowerSource::SiteScaled);
        // With no run at all the site model is untouched: 183 * (2.2/2.5)^3.
        let none = learn(&runs[3..], &types);
        assert!(none.curves.is_empty());
        let t = types["epyc"].with_measured(none.curves.get("epyc").cloned());
        assert!(close(t.dynamic_w(2.2).unwrap(), 183.0 * 0.681472));
        assert_eq!(t.power_source(2.2), PowerSource::Site);
        assert_eq!(t, types["epyc"]);
    }

    #[test]
    fn a_wrapped_or_stopped_counter_is_left_out_with_its_figures() {
        let types = epyc();
        let mut runs = three_runs(1, 2.5, 260.0);
        // A wrapped counter (negative) and a stopped one: 5000 J over 100 s is 50 W,
        // under the 77 W idle.
        runs.push(run(7, 100.0, &[("n7", 2.5, -5.0, 95.0)]));
        runs.push(run(8, 100.0, &[("n8", 2.5, 5000.0, 95.0)]));
        let l = learn(&runs, &types);
        assert!(close(l.curves["epyc"].clocks[0].busy_w, 260.0));
        assert_eq!(l.curves["epyc"].clocks[0].samples, 3);
        assert_eq!(l.left_out.len(), 2);
        assert_eq!(
            l.left_out[0].why,
            LeftOutWhy::Counter {
                energy_j: -5.0,
                time_s: 100.0,
                idle_w: 77.0
            }
        );
        assert_eq!(
            l.left_out[1].to_string(),
            "node n8 (type epyc) job 8 at 2.5 GHz: energy 5000 J over 100 s is under the \
             idle 77 W (counter wrapped or stopped); left out"
        );
    }

    #[test]
    fn a_curve_falling_with_the_clock_is_left_out_whole() {
        let types = epyc();
        let mut runs = three_runs(1, 2.2, 221.0);
        runs.extend(three_runs(10, 2.5, 190.0));
        let l = learn(&runs, &types);
        assert!(l.curves.is_empty());
        assert_eq!(
            l.left_out,
            vec![LeftOut {
                node_type: "epyc".into(),
                node: None,
                freq_ghz: None,
                why: LeftOutWhy::NotMonotonic {
                    low: (2.2, 221.0),
                    high: (2.5, 190.0)
                },
            }]
        );
        // Within the 5% noise, 221 W then 215 W is kept.
        let mut runs = three_runs(1, 2.2, 221.0);
        runs.extend(three_runs(10, 2.5, 215.0));
        assert_eq!(learn(&runs, &types).curves["epyc"].clocks.len(), 2);
    }

    #[test]
    fn a_node_far_from_its_types_median_is_left_out() {
        let types = epyc();
        // Busy 260, 262, 258 and 400 W: median 261, absolute deviations 1, 1, 3, 139,
        // MAD 2, so 1.4826 * 2 = 2.97 W, under the floor 2% of 261 = 5.22 W. 400 W is
        // 139 W off, past 3 x 5.22; 258 W is 3 W off and stays.
        let runs: Vec<Outcome> = [260.0, 262.0, 258.0, 400.0]
            .iter()
            .zip(1u64..)
            .map(|(&w, j)| {
                run(
                    j,
                    100.0,
                    &[(&*format!("n{j}"), 2.5, 95.0 * w + 385.0, 95.0)],
                )
            })
            .collect();
        let l = learn(&runs, &types);
        let c = l.curves["epyc"].clocks[0];
        assert_eq!((c.runs, c.samples), (3, 3));
        assert!(close(c.busy_w, 260.0));
        assert_eq!(l.left_out.len(), 1);
        let LeftOutWhy::FarOff {
            busy_w,
            median_w,
            deviation_w,
        } = l.left_out[0].why
        else {
            panic!("{:?}", l.left_out);
        };
        assert!(close(busy_w, 400.0) && close(median_w, 261.0) && close(deviation_w, 5.22));
        assert_eq!(l.left_out[0].node, Some(("n4".to_string(), 4)));
    }

    /// Three runs at 2.5 GHz on nodes a, b, c and d, and three at 1.5 GHz on a and b
    /// alone, every node computing the whole 100 s: node n draws its factor times the
    /// average node's 260 W (2.5 GHz) or 173 W (1.5 GHz), the factors being a 0.85,
    /// b 1, c 1, d 1.15 (average 1).
    fn uneven_nodes() -> Vec<Outcome> {
        let k = |n: &str| match n {
            "a" => 0.85,
            "d" => 1.15,
            _ => 1.0,
        };
        let on = |job: u64, f: f64, w: f64, nodes: &[&str]| {
            let nodes: Vec<(&str, f64, f64, f64)> = nodes
                .iter()
                .map(|&n| (n, f, 100.0 * w * k(n), 100.0))
                .collect();
            run(job, 100.0, &nodes)
        };
        let mut runs: Vec<Outcome> = (1..=3)
            .map(|j| on(j, 2.5, 260.0, &["a", "b", "c", "d"]))
            .collect();
        runs.extend((4..=6).map(|j| on(j, 1.5, 173.0, &["a", "b"])));
        runs
    }

    #[test]
    fn nodes_of_one_type_that_differ_get_their_own_factor_and_do_not_bend_the_curve() {
        let l = learn(&uneven_nodes(), &epyc());
        let c = &l.curves["epyc"];
        // The plain mean at 1.5 GHz, where only a and b ran, would be (0.85 + 1) / 2 x
        // 173 = 160.0 W; fitted with the nodes' factors it is the average node's 173 W.
        assert_eq!(c.clocks.len(), 2);
        let close6 = |a: f64, b: f64| (a - b).abs() < 1e-6 * b;
        assert!(close6(c.clocks[0].busy_w, 173.0), "{:?}", c.clocks);
        assert!(close6(c.clocks[1].busy_w, 260.0), "{:?}", c.clocks);
        // b and c draw as their type (within NODE_SHARE): no factor. a ran six times,
        // d three.
        let nodes: Vec<(&str, usize)> = c.nodes.iter().map(|(n, f)| (n.as_str(), f.runs)).collect();
        assert_eq!(nodes, [("a", 6), ("d", 3)]);
        assert!(close6(c.nodes["a"].factor, 0.85) && close6(c.nodes["d"].factor, 1.15));
        assert!(l.left_out.is_empty(), "{:?}", l.left_out);
        // An admin sees each node's factor under the types' watts.
        let types = overlay(&epyc(), &l.curves);
        let text = table(&types);
        let rows: Vec<Vec<&str>> = text
            .lines()
            .skip_while(|l| !l.contains("factor"))
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            [["a", "epyc", "0.850", "6"], ["d", "epyc", "1.150", "3"]],
            "{text}"
        );
    }

    #[test]
    fn a_nodes_factor_scales_its_share_of_every_prediction() {
        let types = overlay(&epyc(), &learn(&uneven_nodes(), &epyc()).curves);
        let hetero = hundred_seconds(types.clone());
        let model = crate::model::node_scale::wrap(Box::new(hetero), &types);
        let config = Config {
            nodes: ["a", "b", "d"]
                .iter()
                .map(|n| NodeSetting {
                    name: n.to_string(),
                    node_type: "epyc".into(),
                    freq_ghz: 2.5,
                    gpu_mhz: None,
                })
                .collect(),
        };
        let p = model.predict(&config).unwrap();
        // 100 s at f_max: the average node draws 260 W, so 26,000 J; a 0.85 of it,
        // b its type's, d 1.15 of it. The time is the model's, unchanged.
        let e: Vec<f64> = p.per_node.iter().map(|n| n.energy_j).collect();
        let close6 = |a: f64, b: f64| (a - b).abs() < 1e-6 * b;
        assert!(close6(p.time_s, 100.0), "{}", p.time_s);
        assert!(
            close6(e[0], 22_100.0) && close6(e[1], 26_000.0) && close6(e[2], 29_900.0),
            "{e:?}"
        );
        assert!(close6(p.energy_j, 78_000.0), "{}", p.energy_j);
        // Without factors the model is returned as it was.
        assert!(crate::model::node_scale::factors(&epyc()).is_empty());
    }

    #[test]
    fn nodes_that_mostly_waited_teach_nothing() {
        let types = epyc();
        // 80 s of 100 computing is under the 0.9 share: not a sample, not reported.
        let runs: Vec<Outcome> = (1..=3)
            .map(|j| run(j, 100.0, &[("n1", 2.5, 80.0 * 260.0 + 20.0 * 77.0, 80.0)]))
            .collect();
        let l = learn(&runs, &types);
        assert!(l.curves.is_empty() && l.left_out.is_empty());
    }

    #[test]
    fn the_overlay_changes_a_hetero_prediction_by_the_hand_computed_energy() {
        let site = epyc();
        let mut runs = three_runs(1, 1.5, 173.0);
        runs.extend(three_runs(10, 2.5, 260.0));
        let curve = learn(&runs, &site).curves["epyc"].clone();
        let measured =
            BTreeMap::from([("epyc".to_string(), site["epyc"].with_measured(Some(curve)))]);
        let model = hundred_seconds;
        let config = Config {
            nodes: vec![NodeSetting {
                name: "n1".into(),
                node_type: "epyc".into(),
                freq_ghz: 2.2,
                gpu_mhz: None,
            }],
        };
        let before = model(site).predict(&config).unwrap();
        let after = model(measured).predict(&config).unwrap();
        // Computing 100 s x 2.5/2.2 at 2.2 GHz; the dynamic watts go from the cube
        // law's 183 x 0.88^3 = 124.709376 W to the interpolated 233.9 - 77 = 156.9 W.
        let compute_s = 100.0 * 2.5 / 2.2;
        assert!(close(after.time_s, before.time_s));
        assert!(close(
            after.energy_j - before.energy_j,
            (156.9 - 124.709376) * compute_s
        ));
    }
}
