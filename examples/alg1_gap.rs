//! How often, and by how much, paper 004's Algorithm 1 falls short of the exact
//! optimum of P_norm - E_norm on random instances of the Table I node types.
//! Run: `cargo run --release --example alg1_gap [INSTANCES_PER_SIZE]`.

use greenup::optimize::paper::algorithm1;
use greenup::optimize::sweep::sweep;
use greenup::optimize::testbed::{Rng, instance};
use greenup::optimize::{Goal, Limits, Objective};

fn main() {
    let per_size: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let sizes = [4usize, 8, 16, 32, 64, 144];
    println!(
        "| nodes | instances | Alg. 1 short | share | mean gap when short | max gap | mean dist exact | mean dist Alg. 1 | mean saving exact | mean saving Alg. 1 |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut all = (0usize, 0usize, 0.0f64, 0.0f64);
    for &n in &sizes {
        let mut rng = Rng::new(0x0067_7265_656e_7570 ^ n as u64);
        let (mut short, mut gap_sum, mut gap_max) = (0usize, 0.0f64, 0.0f64);
        let (mut d_exact, mut d_paper, mut s_exact, mut s_paper) = (0.0, 0.0, 0.0, 0.0);
        for _ in 0..per_size {
            let inst = instance(n, &mut rng);
            let goal = Goal {
                objective: Objective::MaxDist,
                limits: Limits::default(),
                baseline_time_s: inst.t_old,
                baseline_energy_j: inst.e_original,
            };
            let exact = sweep(&inst.table, &goal).expect("valid table");
            let paper = algorithm1(&inst.table, &goal).expect("valid table");
            let gap = exact.assessment.value - paper.assessment.value;
            assert!(gap > -1e-9, "Algorithm 1 beat the exact sweep: {gap}");
            if gap > 1e-9 {
                short += 1;
                gap_sum += gap;
                gap_max = gap_max.max(gap);
            }
            d_exact += exact.assessment.value;
            d_paper += paper.assessment.value;
            s_exact += 1.0 - exact.energy_j / inst.e_original;
            s_paper += 1.0 - paper.energy_j / inst.e_original;
        }
        let k = per_size as f64;
        println!(
            "| {n} | {per_size} | {short} | {:.1} % | {:.4} | {:.4} | {:.4} | {:.4} | {:.1} % | {:.1} % |",
            100.0 * short as f64 / k,
            if short > 0 {
                gap_sum / short as f64
            } else {
                0.0
            },
            gap_max,
            d_exact / k,
            d_paper / k,
            100.0 * s_exact / k,
            100.0 * s_paper / k,
        );
        all.0 += per_size;
        all.1 += short;
        all.2 += gap_sum;
        all.3 = all.3.max(gap_max);
    }
    println!(
        "\nall sizes: {} instances, Algorithm 1 short on {} ({:.1} %), mean gap when short {:.4}, max gap {:.4}",
        all.0,
        all.1,
        100.0 * all.1 as f64 / all.0 as f64,
        if all.1 > 0 { all.2 / all.1 as f64 } else { 0.0 },
        all.3
    );
}
