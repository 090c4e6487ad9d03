//! Clock samples: which monitor jobs greenupd runs at a clock whose watts no run has
//! measured yet, and at which clock.
//!
//! greenupd learns each node type's busy watts at a clock only from runs at that clock
//! (`greenup::profile::node_power`), so a clock no policy ever picks keeps the site
//! model's guess for good, and every plan that weighs it weighs a guess. The site's
//! `power.sample_clocks` lets a share of monitor jobs measure such clocks.
//!
//! The cost is bounded, and the site sets the bound: `fraction` of monitor jobs, each
//! lengthened at most `max_slowdown` as its profile predicts, never past its time limit,
//! and never over a power or energy cap it is under. A job without a profile is never
//! sampled: nothing predicts its time, so neither the slowdown bound nor its time limit
//! could be checked, and a sample must be known to fit. A sampled job applies a plan
//! (its nodes report the clock they ran at), is not monitor, and so is neither a
//! measured baseline nor a run at f_max to anything that learns from runs.

use std::collections::BTreeMap;

use greenup::model::measured_power::PowerSource;
use greenup::model::{Config, NodeSetting, NodeType, Prediction};
use greenup::optimize::Limits;
use greenup::profile::node_power::MIN_RUNS;
use greenup::site::SampleClocks;

use crate::baseline::{cap_forbids, job_share};

/// Whether the site's rule picks `job_id` as a clock sample: its [`job_share`] lies in
/// the top `fraction` of [0, 1). Baseline samples take the bottom slice, so while the two
/// fractions add up to at most 1 no job id is picked by both.
pub fn picked(s: &SampleClocks, job_id: u64) -> bool {
    job_share(job_id) >= 1.0 - s.fraction
}

/// The clocks of `nt` below its f_max that fewer than `MIN_RUNS` runs have measured:
/// the ones whose busy watts are still the site model's guess (or a line drawn from
/// measured clocks). f_max is left out: monitor runs measure it anyway.
pub fn unmeasured(nt: &NodeType) -> Vec<f64> {
    let fmax = nt.fmax();
    nt.freqs_ghz
        .iter()
        .copied()
        .filter(|&f| f < fmax && !matches!(nt.power_source(f), PowerSource::Measured { .. }))
        .collect()
}

/// The clock a job samples and what it is predicted to cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The node type whose nodes run at the sampled clock.
    pub node_type: String,
    /// The sampled clock, GHz.
    pub freq_ghz: f64,
    /// Whether the job holds other node types too (left at f_max).
    pub mixed: bool,
    /// Every node of the job: those of `node_type` at `freq_ghz`, the rest at f_max.
    pub config: Config,
    /// The prediction of `config`.
    pub predicted: Prediction,
    /// The prediction with every node at f_max.
    pub baseline: Prediction,
    /// `predicted` time over `baseline` time, less 1.
    pub slowdown: f64,
}

/// The clock sample for a job on `nodes` (each node's name and type), or `None` when no
/// unmeasured clock fits. A candidate runs every node of one type at one of that type's
/// [`unmeasured`] clocks (at most `ceiling` GHz, an energy budget's warning level) and
/// the other types at f_max; it fits when `predict` says it lengthens the job at most
/// `s.max_slowdown` over every node at f_max, ends within `limits.time_limit_s`, and
/// keeps `limits`' power and energy caps. Of those that fit, the lowest clock as a share
/// of its type's f_max is taken (then the type's name): between two measured clocks
/// greenup draws a line, beyond them it scales the site's model (below them with a floor,
/// `greenup::model::measured_power`), so the lowest clock a job can afford turns the
/// most guessing into measurement. A `predict` that fails or
/// returns a figure that is not finite rules a candidate out.
pub fn choose(
    nodes: &[(&str, &NodeType)],
    s: &SampleClocks,
    limits: &Limits,
    ceiling: Option<f64>,
    predict: impl Fn(&Config) -> Option<Prediction>,
) -> Option<Sample> {
    let config_at = |ty: Option<(&str, f64)>| Config {
        nodes: nodes
            .iter()
            .map(|(name, nt)| NodeSetting {
                name: name.to_string(),
                node_type: nt.name.clone(),
                freq_ghz: match ty {
                    Some((t, f)) if t == nt.name => f,
                    _ => nt.fmax(),
                },
                gpu_mhz: None,
            })
            .collect(),
    };
    let finite = |p: &Prediction| {
        [p.time_s, p.energy_j, p.avg_power_w]
            .iter()
            .all(|x| x.is_finite() && *x >= 0.0)
            && p.time_s > 0.0
    };
    let baseline = predict(&config_at(None)).filter(finite)?;
    let types: BTreeMap<&str, &NodeType> = nodes
        .iter()
        .map(|(_, nt)| (nt.name.as_str(), *nt))
        .collect();
    let mut candidates: Vec<(f64, &str, f64)> = types
        .iter()
        .flat_map(|(name, nt)| {
            unmeasured(nt)
                .into_iter()
                .filter(|f| ceiling.is_none_or(|c| *f <= c))
                .map(move |f| (f / nt.fmax(), *name, f))
        })
        .collect();
    candidates.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
    candidates.into_iter().find_map(|(_, ty, f)| {
        let config = config_at(Some((ty, f)));
        let predicted = predict(&config).filter(finite)?;
        let slowdown = predicted.time_s / baseline.time_s - 1.0;
        let within_time = limits.time_limit_s.is_none_or(|l| predicted.time_s <= l);
        let fits = slowdown <= s.max_slowdown
            && within_time
            && cap_forbids(
                predicted.avg_power_w,
                predicted.energy_j,
                limits.power_cap_w,
                limits.energy_cap_j,
            )
            .is_none();
        fits.then(|| Sample {
            node_type: ty.to_string(),
            freq_ghz: f,
            mixed: types.len() > 1,
            config,
            predicted,
            baseline: baseline.clone(),
            slowdown,
        })
    })
}

/// The reason recorded for a clock sample.
pub fn reason(s: &SampleClocks, sample: &Sample) -> String {
    let nodes = if sample.mixed {
        format!(
            "every {} node at {} GHz, the other types at f_max,",
            sample.node_type, sample.freq_ghz
        )
    } else {
        format!("every node at {} GHz,", sample.freq_ghz)
    };
    format!(
        "clock sample: {nodes} a clock whose watts fewer than {MIN_RUNS} runs have measured \
         (the site's power.sample_clocks.fraction {}); predicted slowdown {:.1}%, within \
         power.sample_clocks.max_slowdown {}; not a measured baseline",
        s.fraction,
        sample.slowdown * 100.0,
        s.max_slowdown
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenup::model::PowerModel;
    use greenup::model::measured_power::{MeasuredClock, PowerCurve};

    fn node_type(name: &str, freqs: &[f64], measured: &[f64]) -> NodeType {
        let nt = NodeType {
            name: name.into(),
            freqs_ghz: freqs.to_vec(),
            power: PowerModel::AtMax {
                dynamic_w: 200.0,
                static_w: 100.0,
                gamma: 3.0,
            },
        };
        let clocks: Vec<MeasuredClock> = measured
            .iter()
            .map(|&f| MeasuredClock {
                freq_ghz: f,
                busy_w: 150.0 + 50.0 * f,
                runs: MIN_RUNS,
                samples: MIN_RUNS,
            })
            .collect();
        if clocks.is_empty() {
            nt
        } else {
            nt.with_measured(Some(PowerCurve {
                clocks,
                floor_below: false,
                nodes: BTreeMap::new(),
            }))
        }
    }

    fn prediction(time_s: f64, energy_j: f64) -> Prediction {
        Prediction {
            time_s,
            energy_j,
            avg_power_w: energy_j / time_s,
            per_node: Vec::new(),
        }
    }

    /// A compute-bound job: 1000 s at f_max, each node's time following f_max / f (the
    /// slowest node paces the run); 300 J/s per node whatever the clock.
    fn compute_bound(c: &Config, fmax: &BTreeMap<String, f64>) -> Option<Prediction> {
        let t = c
            .nodes
            .iter()
            .map(|n| 1000.0 * fmax[&n.node_type] / n.freq_ghz)
            .fold(0.0, f64::max);
        Some(prediction(t, 300.0 * t * c.nodes.len() as f64))
    }

    fn settings(max_slowdown: f64) -> SampleClocks {
        SampleClocks {
            fraction: 0.02,
            max_slowdown,
        }
    }

    #[test]
    fn clock_samples_take_the_top_slice_of_the_hash_space() {
        // Shares from daemon_baseline's independent splitmix64: job 42 0.7416, job 2
        // 0.5912, job 1 0.5666, job 3 0.1135.
        let s = |fraction| SampleClocks {
            fraction,
            max_slowdown: 0.1,
        };
        assert!(picked(&s(0.5), 42) && picked(&s(0.5), 2) && picked(&s(0.5), 1));
        assert!(!picked(&s(0.5), 3));
        // Job 1 (0.5666) from 1 - 0.44 = 0.56 on, not from 0.57; job 3 (0.1135) from 0.11.
        assert!(picked(&s(0.44), 1) && !picked(&s(0.43), 1));
        assert!(picked(&s(0.89), 3) && !picked(&s(0.88), 3));
        // 1 - 0.26 = 0.74: job 42 (0.7416) is in, job 2 (0.5912) is not.
        assert!(picked(&s(0.26), 42) && !picked(&s(0.26), 2));
        assert!(!(1..=10_000).any(|id| picked(&s(0.0), id)));
        assert!((1..=10_000).all(|id| picked(&s(1.0), id)));
        // No id is both a baseline sample (share below 0.05) and a clock sample (share at
        // or above 0.95).
        let baseline = greenup::site::BaselineSettings {
            fraction: 0.05,
            min_runs: 0,
            on_miss: greenup::site::OnMiss::Report,
        };
        let clocks = s(0.05);
        let both = (1..=100_000u64)
            .filter(|&id| crate::baseline::picked(&baseline, id, 0) && picked(&clocks, id))
            .count();
        assert_eq!(both, 0);
    }

    #[test]
    fn unmeasured_clocks_are_those_below_fmax_without_a_measured_curve_point() {
        let nt = node_type("std", &[1.2, 1.6, 2.0, 2.4], &[1.6, 2.4]);
        assert_eq!(unmeasured(&nt), [1.2, 2.0]);
        let bare = node_type("std", &[1.2, 1.6, 2.0, 2.4], &[]);
        assert_eq!(unmeasured(&bare), [1.2, 1.6, 2.0]);
        let one = node_type("one", &[2.4], &[]);
        assert!(unmeasured(&one).is_empty());
    }

    #[test]
    fn a_compute_bound_job_samples_the_lowest_unmeasured_clock_at_or_above_fmax_over_1_plus_the_bound()
     {
        // Oracle: a compute-bound job's slowdown at f is f_max / f - 1, so a clock fits
        // when f >= f_max / (1 + max_slowdown); the pick is the lowest unmeasured such
        // clock. Checked over many frequency lists, measured sets and bounds, drawn by
        // a small LCG.
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as f64 / (1u64 << 31) as f64
        };
        let limits = Limits::default();
        for _ in 0..500 {
            let n = 2 + (next() * 6.0) as usize;
            let mut freqs: Vec<f64> = (0..n)
                .map(|_| (10.0 + (next() * 25.0).floor()) / 10.0)
                .collect();
            freqs.sort_by(f64::total_cmp);
            freqs.dedup();
            let measured: Vec<f64> = freqs.iter().copied().filter(|_| next() < 0.3).collect();
            let nt = node_type("std", &freqs, &measured);
            let bound = (next() * 60.0).floor() / 100.0;
            let fmax = *freqs.last().unwrap();
            let want = freqs
                .iter()
                .copied()
                .filter(|f| *f < fmax && !measured.contains(f))
                .find(|f| *f >= fmax / (1.0 + bound));
            let fmaxes = BTreeMap::from([("std".to_string(), fmax)]);
            let got = choose(
                &[("n1", &nt), ("n2", &nt)],
                &settings(bound),
                &limits,
                None,
                |c| compute_bound(c, &fmaxes),
            );
            let got_f = got.as_ref().map(|s| s.freq_ghz);
            // At the boundary itself rounding may go either way; the draws avoid it
            // only by chance, so compare away from it.
            let at_edge = freqs
                .iter()
                .any(|f| (f * (1.0 + bound) - fmax).abs() < 1e-9);
            if !at_edge {
                assert_eq!(got_f, want, "{freqs:?} measured {measured:?} bound {bound}");
            }
            if let Some(s) = got {
                // Every node at the sampled clock; the slowdown is the closed form.
                assert!(s.config.nodes.iter().all(|n| n.freq_ghz == s.freq_ghz));
                assert!((s.slowdown - (fmax / s.freq_ghz - 1.0)).abs() < 1e-9);
                assert!(s.slowdown <= bound + 1e-12);
            }
        }
    }

    #[test]
    fn a_sample_keeps_the_time_limit_and_every_cap_and_the_budgets_ceiling() {
        let nt = node_type("std", &[1.2, 1.6, 2.0, 2.4], &[]);
        let fmaxes = BTreeMap::from([("std".to_string(), 2.4)]);
        let nodes = [("n1", &nt)];
        let pick = |limits: Limits, ceiling: Option<f64>| {
            choose(&nodes, &settings(1.0), &limits, ceiling, |c| {
                compute_bound(c, &fmaxes)
            })
            .map(|s| s.freq_ghz)
        };
        // A bound of 100% lets 1.2 GHz through (2.4 / 1.2 - 1 = 1): 2000 s, 600 kJ.
        assert_eq!(pick(Limits::default(), None), Some(1.2));
        // 1.6 GHz takes 1500 s: a limit of 1600 s rules out 1.2 GHz (2000 s).
        let timed = Limits {
            time_limit_s: Some(1600.0),
            ..Limits::default()
        };
        assert_eq!(pick(timed, None), Some(1.6));
        // Energy is 300 J/s x time: 1.6 GHz uses 450 kJ, 2.0 GHz 360 kJ.
        let capped = Limits {
            energy_cap_j: Some(400_000.0),
            ..Limits::default()
        };
        assert_eq!(pick(capped, None), Some(2.0));
        // 300 W on average at every clock: a cap of 299 W rules every clock out.
        let powered = Limits {
            power_cap_w: Some(299.0),
            ..Limits::default()
        };
        assert_eq!(pick(powered, None), None);
        // An energy budget's ceiling of 1.7 GHz: 2.0 GHz is above it.
        assert_eq!(pick(capped, Some(1.7)), None);
        assert_eq!(pick(Limits::default(), Some(1.7)), Some(1.2));
        // A prediction that fails or is not a number samples nothing.
        assert_eq!(
            choose(&nodes, &settings(1.0), &Limits::default(), None, |_| None),
            None
        );
        let nan = choose(&nodes, &settings(1.0), &Limits::default(), None, |c| {
            let p = compute_bound(c, &fmaxes)?;
            (c.nodes[0].freq_ghz == 2.4)
                .then_some(p)
                .or(Some(prediction(f64::NAN, 1.0)))
        });
        assert_eq!(nan, None);
    }

    #[test]
    fn a_mixed_job_moves_one_type_and_says_so() {
        // fast: f_max 3.0, 1.5 measured; slow: f_max 2.0. The slowest node paces the
        // run: fast at 2.4 GHz takes 1000 x 3.0 / 2.4 = 1250 s (25%), slow at 1.8 GHz
        // 1000 x 2.0 / 1.8 = 1111 s (11.1%). Shares of f_max: fast 1.5 is measured,
        // fast 2.4 is 0.8, slow 1.8 is 0.9, slow 1.0 is 0.5 (100%, over the bound).
        let fast = node_type("fast", &[1.5, 2.4, 3.0], &[1.5]);
        let slow = node_type("slow", &[1.0, 1.8, 2.0], &[]);
        let fmaxes = BTreeMap::from([("fast".to_string(), 3.0), ("slow".to_string(), 2.0)]);
        let nodes = [("f1", &fast), ("s1", &slow), ("s2", &slow)];
        let s = choose(&nodes, &settings(0.3), &Limits::default(), None, |c| {
            compute_bound(c, &fmaxes)
        })
        .unwrap();
        assert_eq!((s.node_type.as_str(), s.freq_ghz), ("fast", 2.4));
        let clocks: Vec<f64> = s.config.nodes.iter().map(|n| n.freq_ghz).collect();
        assert_eq!(clocks, [2.4, 2.0, 2.0]);
        assert!((s.slowdown - 0.25).abs() < 1e-12);
        let why = reason(&settings(0.3), &s);
        assert_eq!(
            why,
            "clock sample: every fast node at 2.4 GHz, the other types at f_max, a clock whose watts fewer than 3 runs have measured (the site's power.sample_clocks.fraction 0.02); predicted slowdown 25.0%, within power.sample_clocks.max_slowdown 0.3; not a measured baseline"
        );
        // A bound of 20%: fast at 2.4 (25%) no longer fits; slow at 1.8 (11.1%) does.
        let s = choose(&nodes, &settings(0.2), &Limits::default(), None, |c| {
            compute_bound(c, &fmaxes)
        })
        .unwrap();
        assert_eq!((s.node_type.as_str(), s.freq_ghz), ("slow", 1.8));
    }
}
