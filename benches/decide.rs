//! Decision speed: the exact sweep and Algorithm 1 on paper 004's Table I node
//! types at 144, 1,000 and 10,000 nodes, and brute force on 6 nodes.
//! Run: `cargo bench --bench decide -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use greenup::optimize::brute::brute;
use greenup::optimize::paper::algorithm1;
use greenup::optimize::sweep::sweep;
use greenup::optimize::testbed::{Instance, Rng, instance};
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
    for n in [144usize, 1_000, 10_000] {
        let inst = instance(n, &mut Rng::new(n as u64));
        let g = goal(&inst);
        group.bench_with_input(BenchmarkId::new("exact", n), &inst, |b, i| {
            b.iter(|| sweep(black_box(&i.table), &g).unwrap())
        });
        group.bench_with_input(BenchmarkId::new("paper", n), &inst, |b, i| {
            b.iter(|| algorithm1(black_box(&i.table), &g).unwrap())
        });
    }
    let small = instance(6, &mut Rng::new(6));
    let g = goal(&small);
    group.bench_with_input(BenchmarkId::new("brute", 6), &small, |b, i| {
        b.iter(|| brute(black_box(&i.table), &g).unwrap())
    });
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
