//! Decision speed: the exact sweep and Algorithm 1 on paper 004's Table I node
//! types at 144, 1,000 and 10,000 nodes, and brute force on 6 nodes.
//! `distinct`: every node has its own times (+-10 % noise), the worst case for the
//! sweep; `typed`: nodes of a type are identical, as a per-type profile predicts.
//! Run: `cargo bench --bench decide -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use greenup::optimize::brute::brute;
use greenup::optimize::paper::algorithm1;
use greenup::optimize::sweep::sweep;
use greenup::optimize::testbed::{Instance, Rng, instance_with};
use greenup::optimize::{Goal, Limits, Objective};

fn goal(i: &Instance) -> Goal {
    Goal {
        objective: Objective::MaxDist,
        limits: Limits::default(),
        baseline_time_s: i.t_old,
        baseline_energy_j: i.e_original,
    }
}

fn decide(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide");
    for (label, noise) in [("distinct", true), ("typed", false)] {
        for n in [144usize, 1_000, 10_000] {
            let inst = instance_with(n, &mut Rng::new(n as u64), noise);
            let g = goal(&inst);
            group.bench_with_input(
                BenchmarkId::new(format!("exact-{label}"), n),
                &inst,
                |b, i| b.iter(|| sweep(black_box(&i.table), &g).unwrap()),
            );
            group.bench_with_input(
                BenchmarkId::new(format!("paper-{label}"), n),
                &inst,
                |b, i| b.iter(|| algorithm1(black_box(&i.table), &g).unwrap()),
            );
        }
    }
    group.finish();

    let mut slow = c.benchmark_group("decide-brute");
    slow.sample_size(10);
    let small = instance_with(6, &mut Rng::new(6), true);
    let g = goal(&small);
    slow.bench_with_input(BenchmarkId::new("brute", 6), &small, |b, i| {
        b.iter(|| brute(black_box(&i.table), &g).unwrap())
    });
    slow.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
