//! How much longer a node type's slowest node computes than its mean node, where a
//! program gives the nodes of one type unequal work.
//!
//! The hetero model keeps one compute time per node type, the mean of its nodes: the
//! right figure for the type's energy, which every node's compute time adds to. But a
//! run lasts as long as its slowest node. NAS DT's black-hole graph gives 5 of its 16
//! ranks nothing but a start and a finish, so its types' mean nodes compute a third less
//! than their slowest, and a time predicted from the mean was 10 % short. The lead is
//! the ratio the model multiplies a type's time by ([`TypeTimes::slowest_s`]).
//!
//! Each run with two or more nodes of the type, each of which measured its compute
//! time, gives one ratio: the largest node's over the nodes' mean, each node's time
//! first divided by what the type's clock law gives at its clock (so a node run at a
//! lower clock is not taken for a slower one). The lead is the mean of those ratios. A
//! slowest node's lead over the mean is also what noise gives nodes of equal work, and
//! then the job still waits for that node, so no lead is refused for being small; only
//! one within [`NOISE`] of 1 is dropped, so profiles of programs with equal work stay
//! as they were.

use super::outcome::Outcome;
use crate::model::hetero::TypeTimes;

/// A lead within this of 1 is taken as none: equal work.
pub const NOISE: f64 = 1e-3;

/// The lead of node type `ty` over `runs`: `times` is the type's clock law (per
/// iteration, at f_max `fmax`), `iterations` the job's. `None` where no run has two
/// nodes of the type that measured their compute time, or the lead is within
/// [`NOISE`] of 1.
pub fn of_type(
    runs: &[&Outcome],
    ty: &str,
    fmax: f64,
    times: &TypeTimes,
    iterations: f64,
) -> Option<f64> {
    let mut leads = Vec::new();
    for o in runs {
        // Each node's measured compute time over its clock law's.
        let mut r = Vec::new();
        for n in o.nodes.iter().filter(|n| n.node_type == ty) {
            let Some((c, _)) = o.split(n) else {
                continue;
            };
            let law = if n.freq_ghz > 0.0 {
                times.compute_s(fmax / n.freq_ghz) * iterations
            } else {
                0.0
            };
            // Without a law that gives this clock a time, nodes are compared as measured.
            let x = if law > 0.0 && law.is_finite() {
                c / law
            } else {
                c
            };
            if x.is_finite() && x >= 0.0 {
                r.push(x);
            }
        }
        if r.len() < 2 {
            continue;
        }
        let mean = r.iter().sum::<f64>() / r.len() as f64;
        let max = r.iter().copied().fold(0.0, f64::max);
        if mean > 0.0 {
            leads.push(max / mean);
        }
    }
    if leads.is_empty() {
        return None;
    }
    let lead = leads.iter().sum::<f64>() / leads.len() as f64;
    (lead > 1.0 + NOISE && lead.is_finite()).then_some(lead)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::outcome::NodeOutcome;
    use crate::record::RunState;

    fn node(name: &str, ty: &str, f: f64, compute_s: Option<f64>) -> NodeOutcome {
        NodeOutcome {
            name: name.into(),
            node_type: ty.into(),
            freq_ghz: f,
            energy_j: Some(1000.0),
            compute_s,
            comm_s: Some(1.0),
            calls: None,
            bytes: None,
            gpu: None,
        }
    }

    fn run(id: u64, nodes: Vec<NodeOutcome>) -> Outcome {
        Outcome {
            job_id: id,
            state: RunState::Completed,
            time_s: 100.0,
            predicted_time_s: 100.0,
            nodes,
            gpu_locked: false,
        }
    }

    fn law(t_cp_s: f64) -> TypeTimes {
        TypeTimes::timed(t_cp_s, 0.1)
    }

    #[test]
    fn the_lead_is_the_mean_over_runs_of_the_slowest_node_over_the_mean_node() {
        // Run 1 at f_max: 10, 10, 10 and 2 s: mean 8, slowest 10, 1.25. Run 2 at half
        // the clock, where the law doubles every time: 24, 24, 24 and 8 s, mean 20,
        // slowest 24, 1.2. The lead is (1.25 + 1.2) / 2 = 1.225. Type b's node and the
        // node without a compute time are left out.
        let runs = [
            run(
                1,
                vec![
                    node("a1", "a", 2.0, Some(10.0)),
                    node("a2", "a", 2.0, Some(10.0)),
                    node("a3", "a", 2.0, Some(10.0)),
                    node("a4", "a", 2.0, Some(2.0)),
                    node("b1", "b", 2.0, Some(50.0)),
                    node("a5", "a", 2.0, None),
                ],
            ),
            run(
                2,
                vec![
                    node("a1", "a", 1.0, Some(24.0)),
                    node("a2", "a", 1.0, Some(24.0)),
                    node("a3", "a", 1.0, Some(24.0)),
                    node("a4", "a", 1.0, Some(8.0)),
                ],
            ),
        ];
        let refs: Vec<&Outcome> = runs.iter().collect();
        let lead = of_type(&refs, "a", 2.0, &law(0.8), 10.0).unwrap();
        assert!((lead - 1.225).abs() < 1e-12, "{lead}");
    }

    #[test]
    fn a_node_at_a_lower_clock_is_not_taken_for_a_slower_one() {
        // a2 ran at half the clock and took twice as long: the same work, lead none.
        let runs = [run(
            1,
            vec![
                node("a1", "a", 2.0, Some(10.0)),
                node("a2", "a", 1.0, Some(20.0)),
            ],
        )];
        let refs: Vec<&Outcome> = runs.iter().collect();
        assert_eq!(of_type(&refs, "a", 2.0, &law(1.0), 10.0), None);
    }

    #[test]
    fn equal_work_one_node_or_no_compute_time_gives_no_lead() {
        let equal = run(
            1,
            vec![
                node("a1", "a", 2.0, Some(10.0)),
                node("a2", "a", 2.0, Some(10.005)),
            ],
        );
        let alone = run(2, vec![node("a1", "a", 2.0, Some(10.0))]);
        let untimed = run(
            3,
            vec![node("a1", "a", 2.0, None), node("a2", "a", 2.0, None)],
        );
        for r in [&equal, &alone, &untimed] {
            assert_eq!(of_type(&[r], "a", 2.0, &law(1.0), 10.0), None);
        }
    }
}
