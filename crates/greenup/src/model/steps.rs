//! Synchronised steps: a model of iterations made of many short steps that each end
//! in a synchronisation, where different node types lead different steps.
//!
//! Paper 004's hetero model predicts one iteration's compute as the slowest type's
//! whole compute, `max_τ t_τ(f_τ)`. A program such as HPL synchronises at every panel,
//! and a different node type may lead each panel: then slowing a type that waits on
//! average still lengthens the steps it leads. The step model splits the iteration
//! into classes of steps; a type's share in a class is that class's compute of the
//! type as a fraction of the type's whole compute per iteration at f_max. One
//! iteration's compute is then
//!
//! `sum over classes k of max over types τ present (share[k][τ] * t_τ(f_τ))`
//!
//! with `t_τ` the hetero model's clock rule ([`super::hetero::TypeTimes::compute_s`]).
//! A single class with share 1 for every type is exactly paper 004's max model.
//!
//! Why steps can be merged into classes. `max_τ (a * x_τ)` equals `a * max_τ x_τ` for
//! `a >= 0` (max is positively homogeneous), so two steps whose share vectors point
//! the same way give the same sum whether kept apart or added into one class: merging
//! by direction is exact. Merging steps of nearby directions is the price of a small
//! model; [`Steps::compressed`] bounds its error.

use std::collections::BTreeMap;

/// Which step classes a job's iteration has and how each node type takes part in them.
#[derive(Debug, Clone, PartialEq)]
pub struct Steps {
    /// The classes, each a set of steps whose leaders behave alike.
    pub classes: Vec<StepClass>,
}

/// Steps of one direction: how many were merged and each node type's share of its compute.
#[derive(Debug, Clone, PartialEq)]
pub struct StepClass {
    /// Raw steps merged into this class.
    pub steps: u64,
    /// Per node type, this class's compute as a fraction of the type's whole per-iteration compute at f_max.
    pub share: BTreeMap<String, f64>,
}

/// A compression of measured steps and how coarsely directions were merged.
#[derive(Debug, Clone, PartialEq)]
pub struct Compressed {
    /// The step classes.
    pub steps: Steps,
    /// Width of the direction grid steps were merged on: 0 when only identical
    /// directions were merged (exact), else the `q` of the error bound.
    pub quantum: f64,
}

/// Why measured steps cannot make a step model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepsError {
    /// No step was given.
    #[error("no steps were measured; a step model needs at least one step with compute time")]
    NoSteps,
    /// Compression was asked for no class at all.
    #[error("max_classes is 0; a step model needs at least one class")]
    NoClasses,
    /// A step time is negative, infinite or not a number.
    #[error(
        "step {step}, node type '{node_type}': compute time {value} s is not a finite number >= 0"
    )]
    BadTime {
        /// The step's index, from 0.
        step: usize,
        /// The node type.
        node_type: String,
        /// The value given.
        value: f64,
    },
    /// Every step had zero compute time on every type.
    #[error("every step has zero compute time on every node type")]
    NoCompute,
    /// A share names a node type the model does not know.
    #[error(
        "step class {class}: node type '{node_type}' is not one of the model's types ({known})"
    )]
    UnknownType {
        /// The class's index, from 0.
        class: usize,
        /// The type named.
        node_type: String,
        /// The types that would be valid, comma-separated.
        known: String,
    },
    /// A share is negative, infinite or not a number.
    #[error(
        "step class {class}, node type '{node_type}': share {value} is not a finite number >= 0"
    )]
    BadShare {
        /// The class's index, from 0.
        class: usize,
        /// The type.
        node_type: String,
        /// The value given.
        value: f64,
    },
}

/// The most dyadic refinements the compression tries: past 2^-52 a grid cannot tell
/// f64 directions in [0, 1] apart any better.
const FINEST: u32 = 52;

impl Steps {
    /// Paper 004's max model as a step model: one class in which every type has share 1.
    pub fn max_model<'a>(types: impl IntoIterator<Item = &'a str>) -> Steps {
        Steps {
            classes: vec![StepClass {
                steps: 1,
                share: types.into_iter().map(|t| (t.to_string(), 1.0)).collect(),
            }],
        }
    }

    /// Predicted compute seconds of one iteration, given each type's compute seconds
    /// `t` at its clock; types absent from `t` are not in the job and lead no step.
    pub fn compute_s(&self, t: &BTreeMap<String, f64>) -> f64 {
        self.classes
            .iter()
            .map(|c| {
                c.share
                    .iter()
                    .filter_map(|(ty, s)| t.get(ty).map(|x| s * x))
                    .fold(0.0, f64::max)
            })
            .sum()
    }

    /// The seconds per iteration outside the steps, given the max model's `comm_s` and
    /// each present type's compute seconds `at_fmax` at its maximum clock.
    ///
    /// Paper 004's `T_cm` is the least time any type spent blocked, and it holds the
    /// waits the step model explains instead: the slowest type also waits in the steps
    /// other types lead. At f_max the steps take `compute_s(at_fmax)`, longer than the
    /// slowest type's `max_τ t_τ` by exactly those waits, so they come off the
    /// communication time. Both models then predict the same time at f_max, where the
    /// profile measured it, and part only where the clocks change.
    pub fn comm_s(&self, comm_s: f64, at_fmax: &BTreeMap<String, f64>) -> f64 {
        let slowest = at_fmax.values().copied().fold(0.0, f64::max);
        (comm_s - (self.compute_s(at_fmax) - slowest)).max(0.0)
    }

    /// Check the model against the node types it may be used with.
    pub fn check<'a>(
        &self,
        known: impl IntoIterator<Item = &'a str> + Clone,
    ) -> Result<(), StepsError> {
        for (k, c) in self.classes.iter().enumerate() {
            for (ty, &s) in &c.share {
                if !known.clone().into_iter().any(|t| t == ty) {
                    return Err(StepsError::UnknownType {
                        class: k,
                        node_type: ty.clone(),
                        known: known.clone().into_iter().collect::<Vec<_>>().join(", "),
                    });
                }
                if !(s.is_finite() && s >= 0.0) {
                    return Err(StepsError::BadShare {
                        class: k,
                        node_type: ty.clone(),
                        value: s,
                    });
                }
            }
        }
        Ok(())
    }

    /// A step model from measured steps: `per_step[j][τ]` is the compute seconds of
    /// type τ's slowest node in step j at f_max (a type absent from a step computes
    /// nothing in it), compressed into at most `max_classes` classes. See
    /// [`Steps::compressed`] for how, and for the error bound.
    pub fn from_step_times(
        per_step: &[BTreeMap<String, f64>],
        max_classes: usize,
    ) -> Result<Steps, StepsError> {
        Ok(Steps::compressed(per_step, max_classes)?.steps)
    }

    /// A step model from measured steps, with the grid its directions were merged on.
    ///
    /// Each type's step times are divided by the type's total, giving step j the share
    /// vector `v_j`. Its direction is `u_j = v_j / max_τ v_jτ`, in `[0, 1]` per type.
    /// Steps of identical direction merge exactly (the class's share is the sum of its
    /// steps' vectors). When that leaves more than `max_classes` classes, directions are
    /// merged on the finest dyadic grid `q = 2^-k` (cells `[m q, (m + 1) q)` per type)
    /// that leaves at most `max_classes`, or all into one class (`q = 1`).
    ///
    /// Error bound: with `t_τ >= 0` the types' compute at any clocks and `M = max_τ t_τ`,
    ///
    /// `0 <= exact - compressed <= q * (sum over steps j of max_τ v_jτ) * M <= q * types * M`
    ///
    /// where `exact` is the sum over the raw steps. The lower side holds because a max of
    /// sums is at most the sum of maxes. For the upper side, all directions in a cell are
    /// within `q / 2` of its centre `u` in every coordinate, so each member's
    /// `max_τ u_jτ t_τ` is at most `max_τ u_τ t_τ + q M / 2`, while the class's
    /// `max_τ sum_j |v_j| u_jτ t_τ` is at least `sum_j |v_j| (max_τ u_τ t_τ - q M / 2)`.
    /// Every type's shares sum to 1, so `sum_j max_τ v_jτ` is at most the number of types.
    /// Steps with no compute on any type add nothing and are left out.
    pub fn compressed(
        per_step: &[BTreeMap<String, f64>],
        max_classes: usize,
    ) -> Result<Compressed, StepsError> {
        if max_classes == 0 {
            return Err(StepsError::NoClasses);
        }
        if per_step.is_empty() {
            return Err(StepsError::NoSteps);
        }
        let mut total: BTreeMap<&str, f64> = BTreeMap::new();
        for (j, step) in per_step.iter().enumerate() {
            for (ty, &x) in step {
                if !(x.is_finite() && x >= 0.0) {
                    return Err(StepsError::BadTime {
                        step: j,
                        node_type: ty.clone(),
                        value: x,
                    });
                }
                *total.entry(ty.as_str()).or_insert(0.0) += x;
            }
        }
        let types: Vec<&str> = total.keys().copied().collect();
        // Share vectors, one coordinate per type in `types` order; a type that never
        // computes has no shares (it leads nothing).
        let vectors: Vec<Vec<f64>> = per_step
            .iter()
            .map(|step| {
                types
                    .iter()
                    .map(|ty| match (step.get(*ty), total[ty]) {
                        (Some(&x), sum) if sum > 0.0 => x / sum,
                        _ => 0.0,
                    })
                    .collect::<Vec<f64>>()
            })
            .filter(|v| v.iter().any(|&x| x > 0.0))
            .collect();
        if vectors.is_empty() {
            return Err(StepsError::NoCompute);
        }
        let directions: Vec<Vec<f64>> = vectors
            .iter()
            .map(|v| {
                let top = v.iter().copied().fold(0.0, f64::max);
                v.iter().map(|x| x / top).collect()
            })
            .collect();

        let exact = group(&directions, |u| u.iter().map(|x| x.to_bits()).collect());
        let (cells, quantum) = if exact.len() <= max_classes {
            (exact, 0.0)
        } else {
            // Dyadic grids nest, so the class count only grows with k: keep the finest
            // grid that fits (k = 0 is the single class).
            let mut chosen = (vec![(0..directions.len()).collect()], 1.0);
            for k in 1..=FINEST {
                let scale = f64::from(2u32).powi(k as i32);
                let g = group(&directions, |u| {
                    // The top cell is closed, so a coordinate of 1 stays with its neighbours.
                    u.iter()
                        .map(|x| ((x * scale).floor().min(scale - 1.0)) as u64)
                        .collect()
                });
                if g.len() > max_classes {
                    break;
                }
                chosen = (g, 1.0 / scale);
            }
            chosen
        };
        let classes = cells
            .into_iter()
            .map(|members| StepClass {
                steps: members.len() as u64,
                share: types
                    .iter()
                    .enumerate()
                    .filter(|(_, ty)| total[**ty] > 0.0)
                    .map(|(i, ty)| {
                        (
                            ty.to_string(),
                            members.iter().map(|&j| vectors[j][i]).sum::<f64>(),
                        )
                    })
                    .collect(),
            })
            .collect();
        Ok(Compressed {
            steps: Steps { classes },
            quantum,
        })
    }
}

/// Indices of `items` grouped by `key`, groups in order of their first member.
fn group(items: &[Vec<f64>], key: impl Fn(&[f64]) -> Vec<u64>) -> Vec<Vec<usize>> {
    let mut at: BTreeMap<Vec<u64>, usize> = BTreeMap::new();
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (j, u) in items.iter().enumerate() {
        let k = *at.entry(key(u)).or_insert_with(|| {
            out.push(Vec::new());
            out.len() - 1
        });
        out[k].push(j);
    }
    out
}

/// Which time model a decision uses for a hetero profile with steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeModel {
    /// Paper 004's max model: the slowest type's whole compute.
    Max,
    /// The step model: each step class led by its own slowest type.
    Steps,
}

impl TimeModel {
    /// The word written in profiles: `max` or `steps`.
    pub fn name(self) -> &'static str {
        match self {
            TimeModel::Max => "max",
            TimeModel::Steps => "steps",
        }
    }

    /// The model a profile word names.
    pub fn parse(word: &str) -> Option<TimeModel> {
        match word {
            "max" => Some(TimeModel::Max),
            "steps" => Some(TimeModel::Steps),
            _ => None,
        }
    }
}

/// Which time model predicted the measured runs better, and by how much.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelChoice {
    /// The model the decision uses.
    pub winner: TimeModel,
    /// Root-mean-square relative time error of the max model over the runs (0.01 = 1%).
    pub max_model_error: f64,
    /// Root-mean-square relative time error of the step model over the runs.
    pub step_model_error: f64,
    /// Measured runs compared.
    pub runs: u32,
    /// The compute window length, seconds, the step model's classes were learned at,
    /// when refinement chose it among several (`step_windows` in a profile).
    pub window_s: Option<f64>,
}

/// Fewest measured runs for the errors to choose the model; below it [`choose`] falls
/// back to the rule of the safer slowdown.
pub const MIN_RUNS: usize = 2;

/// Choose a time model from measured runs: `(max model's predicted time, step model's
/// predicted time, measured time)` per run, and whether the step model predicts at
/// least the max model's slowdown wherever a decision may go (`steps_safer`).
///
/// With at least [`MIN_RUNS`] runs the model of smaller RMS relative time error wins;
/// a tie keeps the max model, paper 004's. With fewer, no error can be trusted, and a
/// decision bounded by `max_slowdown` is safe only with the model that predicts the
/// larger slowdown: the step model is used only when `steps_safer` says it never
/// predicts less slowdown than the max model; otherwise the max model stays.
pub fn choose(runs: &[(f64, f64, f64)], steps_safer: bool) -> ModelChoice {
    let err = |pick: fn(&(f64, f64, f64)) -> f64| {
        let e: Vec<f64> = runs
            .iter()
            .filter(|r| r.2 > 0.0 && r.2.is_finite() && pick(r).is_finite())
            .map(|r| pick(r) / r.2 - 1.0)
            .collect();
        if e.is_empty() {
            0.0
        } else {
            (e.iter().map(|x| x * x).sum::<f64>() / e.len() as f64).sqrt()
        }
    };
    let counted = runs
        .iter()
        .filter(|r| r.2 > 0.0 && r.2.is_finite() && r.0.is_finite() && r.1.is_finite())
        .count();
    let max_model_error = err(|r| r.0);
    let step_model_error = err(|r| r.1);
    let winner = if counted >= MIN_RUNS {
        if step_model_error < max_model_error {
            TimeModel::Steps
        } else {
            TimeModel::Max
        }
    } else if steps_safer {
        TimeModel::Steps
    } else {
        TimeModel::Max
    };
    ModelChoice {
        winner,
        max_model_error,
        step_model_error,
        runs: counted as u32,
        window_s: None,
    }
}

impl ModelChoice {
    /// One line for a decision's reason: which model predicted time and why.
    pub fn note(&self) -> String {
        let which = match (self.winner, self.window_s) {
            (TimeModel::Max, _) => {
                "the max model (paper 004: the slowest type's whole compute)".to_string()
            }
            (TimeModel::Steps, None) => {
                "the step model (each step class led by its slowest type)".to_string()
            }
            (TimeModel::Steps, Some(w)) => format!(
                "the step model (each step class led by its slowest type; classes from {w} s windows)"
            ),
        };
        if (self.runs as usize) < MIN_RUNS {
            let why = match self.winner {
                TimeModel::Steps => "it predicts at least the max model's slowdown",
                TimeModel::Max => "the step model does not predict at least its slowdown",
            };
            format!(
                "time predicted by {which}: {} measured run(s), too few to compare errors, and {why}",
                self.runs
            )
        } else {
            format!(
                "time predicted by {which}: RMS time error {:.1}% against {:.1}% for the {} over {} measured runs",
                100.0
                    * match self.winner {
                        TimeModel::Steps => self.step_model_error,
                        TimeModel::Max => self.max_model_error,
                    },
                100.0
                    * match self.winner {
                        TimeModel::Steps => self.max_model_error,
                        TimeModel::Max => self.step_model_error,
                    },
                match self.winner {
                    TimeModel::Steps => "max model",
                    TimeModel::Max => "step model",
                },
                self.runs
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::testbed::Rng;

    fn map(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    /// The sum over raw steps, written from the definition: each step is led by the
    /// type whose share of the step, times its compute, is largest.
    fn uncompressed(per_step: &[BTreeMap<String, f64>], t: &BTreeMap<String, f64>) -> f64 {
        let mut total: BTreeMap<&str, f64> = BTreeMap::new();
        for s in per_step {
            for (k, v) in s {
                *total.entry(k).or_default() += v;
            }
        }
        per_step
            .iter()
            .map(|s| {
                s.iter()
                    .map(|(k, v)| {
                        if total[k.as_str()] > 0.0 {
                            v / total[k.as_str()] * t[k]
                        } else {
                            0.0
                        }
                    })
                    .fold(0.0, f64::max)
            })
            .sum()
    }

    #[test]
    fn one_class_of_share_one_is_the_max_model() {
        let m = Steps::max_model(["a", "b", "c"]);
        let t = map(&[("a", 3.0), ("b", 7.5), ("c", 1.0)]);
        assert_eq!(m.compute_s(&t), 7.5);
        // A type not in the job leads nothing.
        assert_eq!(m.compute_s(&map(&[("a", 3.0)])), 3.0);
    }

    #[test]
    fn two_types_leading_alternate_steps() {
        // a leads step 0 (3 s against 1 s), b step 1 (4 s against 1 s): totals a 4, b 5.
        let per = [
            map(&[("a", 3.0), ("b", 1.0)]),
            map(&[("a", 1.0), ("b", 4.0)]),
        ];
        let s = Steps::from_step_times(&per, 8).unwrap();
        assert_eq!(s.classes.len(), 2);
        assert_eq!(s.classes[0].share, map(&[("a", 0.75), ("b", 0.2)]));
        // At f_max: 3 + 4 = 7 s, more than the max model's 5 s (the waiting at each sync).
        assert!((s.compute_s(&map(&[("a", 4.0), ("b", 5.0)])) - 7.0).abs() < 1e-12);
        // Slowing a, which waits on the whole (4 s against 5 s), to 6 s: 4.5 + 4 = 8.5 s,
        // 1.5 s more, where the max model's iteration grows by 1 s (from b's 5 to a's 6).
        assert!((s.compute_s(&map(&[("a", 6.0), ("b", 5.0)])) - 8.5).abs() < 1e-12);
        // Steps of one direction merge exactly: the same steps repeated make one class each.
        let per2 = [
            per[0].clone(),
            per[1].clone(),
            per[0].clone(),
            per[1].clone(),
        ];
        let s2 = Steps::from_step_times(&per2, 2).unwrap();
        assert_eq!(
            s2.classes.iter().map(|c| c.steps).collect::<Vec<_>>(),
            [2, 2]
        );
        let t = map(&[("a", 2.5), ("b", 9.0)]);
        assert!((s2.compute_s(&t) - uncompressed(&per2, &t)).abs() < 1e-12);
        // One class: the max of summed shares, which is the max model.
        let one = Steps::from_step_times(&per, 1).unwrap();
        assert_eq!(one.classes.len(), 1);
        assert!((one.compute_s(&t) - 9.0).abs() < 1e-12);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert_eq!(Steps::from_step_times(&[], 3), Err(StepsError::NoSteps));
        let ok = [map(&[("a", 1.0)])];
        assert_eq!(Steps::from_step_times(&ok, 0), Err(StepsError::NoClasses));
        for bad in [f64::NAN, -1.0, f64::INFINITY] {
            let e = Steps::from_step_times(&[map(&[("a", 1.0)]), map(&[("b", bad)])], 3);
            assert!(
                matches!(e, Err(StepsError::BadTime { step: 1, .. })),
                "{e:?}"
            );
        }
        assert_eq!(
            Steps::from_step_times(&[map(&[("a", 0.0)])], 3),
            Err(StepsError::NoCompute)
        );
        let s = Steps {
            classes: vec![StepClass {
                steps: 1,
                share: map(&[("a", 0.5), ("z", 0.5)]),
            }],
        };
        assert_eq!(
            s.check(["a", "b"]).unwrap_err().to_string(),
            "step class 0: node type 'z' is not one of the model's types (a, b)"
        );
        let s = Steps {
            classes: vec![StepClass {
                steps: 1,
                share: map(&[("a", f64::NAN)]),
            }],
        };
        assert!(matches!(s.check(["a"]), Err(StepsError::BadShare { .. })));
    }

    #[test]
    fn compression_error_stays_within_its_bound_on_random_steps() {
        let mut rng = Rng::new(36);
        let names = ["a", "b", "c", "d"];
        // Cases merged on a grid, so the bound is exercised and not only exactness.
        let mut gridded = 0;
        for case in 0..300 {
            let types = 1 + case % 4;
            let steps = 1 + (rng.uniform(0.0, 60.0) as usize);
            let per: Vec<BTreeMap<String, f64>> = (0..steps)
                .map(|_| {
                    names[..types]
                        .iter()
                        .map(|n| {
                            // Some zeros, so types skip steps.
                            let x = rng.uniform(-0.5, 3.0).max(0.0);
                            (n.to_string(), x)
                        })
                        .collect()
                })
                .collect();
            let max_classes = 1 + (rng.uniform(0.0, 10.0) as usize);
            let c = match Steps::compressed(&per, max_classes) {
                Ok(c) => c,
                Err(StepsError::NoCompute) => continue,
                Err(e) => panic!("{e}"),
            };
            assert!(c.steps.classes.len() <= max_classes);
            if c.quantum > 0.0 {
                gridded += 1;
            }
            let kept: u64 = c.steps.classes.iter().map(|k| k.steps).sum();
            assert!(kept as usize <= steps);
            // sum_j max_τ v_jτ, from the definition.
            let mut total: BTreeMap<&str, f64> = BTreeMap::new();
            for s in &per {
                for (k, v) in s {
                    *total.entry(k).or_default() += v;
                }
            }
            let lead: f64 = per
                .iter()
                .map(|s| {
                    s.iter()
                        .map(|(k, v)| {
                            if total[k.as_str()] > 0.0 {
                                v / total[k.as_str()]
                            } else {
                                0.0
                            }
                        })
                        .fold(0.0, f64::max)
                })
                .sum();
            assert!(lead <= types as f64 + 1e-9);
            for _ in 0..5 {
                let t: BTreeMap<String, f64> = names[..types]
                    .iter()
                    .map(|n| (n.to_string(), rng.uniform(0.1, 10.0)))
                    .collect();
                let m = t.values().copied().fold(0.0, f64::max);
                let exact = uncompressed(&per, &t);
                let got = c.steps.compute_s(&t);
                let slack = 1e-9 * exact.max(1.0);
                assert!(got <= exact + slack, "case {case}: {got} > {exact}");
                assert!(
                    exact - got <= c.quantum * lead * m + slack,
                    "case {case}: error {} over bound {} (q {})",
                    exact - got,
                    c.quantum * lead * m,
                    c.quantum
                );
                if c.quantum == 0.0 {
                    assert!((exact - got).abs() <= slack);
                }
            }
        }
        assert!(gridded > 100, "{gridded}");
    }

    #[test]
    fn the_choice_follows_the_measured_error_and_falls_back_to_the_safer_slowdown() {
        // Measured 100 s and 200 s; max model 90 and 180 (10% low), steps 102 and 196.
        let runs = [(90.0, 102.0, 100.0), (180.0, 196.0, 200.0)];
        let c = choose(&runs, false);
        assert_eq!(c.winner, TimeModel::Steps);
        assert!((c.max_model_error - 0.1).abs() < 1e-12);
        // sqrt((0.02^2 + 0.02^2) / 2) = 0.02.
        assert!((c.step_model_error - 0.02).abs() < 1e-12);
        assert_eq!(c.runs, 2);
        assert!(c.note().contains("step model"), "{}", c.note());
        // The other way round, and a tie, keep the max model.
        let flipped: Vec<_> = runs.iter().map(|r| (r.1, r.0, r.2)).collect();
        assert_eq!(choose(&flipped, true).winner, TimeModel::Max);
        assert_eq!(
            choose(&[(1.0, 1.0, 1.0), (2.0, 2.0, 2.0)], true).winner,
            TimeModel::Max
        );
        // One run: its errors are not trusted, the safer slowdown decides.
        let one = [(90.0, 100.0, 100.0)];
        assert_eq!(choose(&one, false).winner, TimeModel::Max);
        assert_eq!(choose(&one, true).winner, TimeModel::Steps);
        assert_eq!(choose(&[], true).runs, 0);
        assert!(choose(&one, false).note().contains("too few"));
    }
}
