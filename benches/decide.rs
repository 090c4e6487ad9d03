//! Decision speed: the exact sweep and Algorithm 1 on paper 004's Table I node
//! types at 144, 1,000 and 10,000 nodes, and brute force on 6 nodes.
//! `distinct`: every node has its own times (+-10 % noise), the worst case for the
//! sweep; `typed`: nodes of a type are identical, as a per-type profile predicts.
//! Each is measured twice: wall time (`decide/...`) and the benchmark thread's
//! CPU time (`decide-cpu/...`), which other jobs on a shared machine disturb less.
//! `steps-typed`: the typed instance with `profile::learn::MAX_STEP_CLASSES` (16) classes of synchronised steps, searched by
//! the exact step search (`optimize::steps`).
//! `waiting-*`: the same instances with nodes that poll while they wait, drawing 0.78
//! of their clock's dynamic watts (the sweep's lower envelopes, and the step search
//! that prices every vector at its wall time).
//! Run: `cargo bench --bench decide -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use greenup::model::StepTable;
use greenup::model::steps::Steps;
use greenup::optimize::brute::brute;
use greenup::optimize::paper::algorithm1;
use greenup::optimize::steps::exact as step_exact;
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

/// CPU time of the calling thread, in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
struct ThreadCpu;

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Measurement for ThreadCpu {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, started: u64) -> u64 {
        thread_cpu_ns().saturating_sub(started)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuFormatter
    }
}

struct CpuFormatter;

impl ValueFormatter for CpuFormatter {
    fn scale_values(&self, ns: f64, values: &mut [f64]) -> &'static str {
        let (div, unit) = match ns {
            x if x < 1e3 => (1.0, "ns cpu"),
            x if x < 1e6 => (1e3, "µs cpu"),
            x if x < 1e9 => (1e6, "ms cpu"),
            _ => (1e9, "s cpu"),
        };
        values.iter_mut().for_each(|v| *v /= div);
        unit
    }
    fn scale_throughputs(&self, _: f64, _: &Throughput, values: &mut [f64]) -> &'static str {
        values.iter_mut().for_each(|v| *v = 1e9 / *v);
        "runs/s cpu"
    }
    fn scale_for_machines(&self, _: &mut [f64]) -> &'static str {
        "ns"
    }
}

/// The typed instance of `n` nodes with `MAX_STEP_CLASSES` step classes compressed from 400 random
/// steps (each type's slowest node leads some), and the goal against its own baseline.
fn with_steps(n: usize) -> (Instance, Goal) {
    let mut inst = instance_with(n, &mut Rng::new(n as u64), false);
    let mut rng = Rng::new(36);
    let types: Vec<String> = (1..=4).map(|t| format!("type{t}")).collect();
    let per_step: Vec<std::collections::BTreeMap<String, f64>> = (0..400)
        .map(|_| {
            types
                .iter()
                .map(|t| (t.clone(), rng.uniform(0.1, 1.0)))
                .collect()
        })
        .collect();
    let steps = Steps::from_step_times(&per_step, greenup::profile::learn::MAX_STEP_CLASSES)
        .expect("random steps make a model");
    let group_of = inst
        .table
        .nodes
        .iter()
        .map(|r| types.iter().position(|t| *t == r.node_type).unwrap_or(0))
        .collect();
    let weights = steps
        .classes
        .iter()
        .map(|c| {
            types
                .iter()
                .map(|t| c.share.get(t).copied().unwrap_or(0.0))
                .collect()
        })
        .collect();
    inst.table.steps = Some(StepTable {
        groups: types,
        group_of,
        weights,
    });
    let (t, e) = inst.table.totals(&inst.table.max_pick());
    inst.t_old = t;
    inst.e_original = e;
    let g = goal(&inst);
    (inst, g)
}

/// `inst` with every choice drawing `share` of its busy dynamic watts while it waits.
fn waiting(mut inst: Instance, share: f64) -> Instance {
    for node in &mut inst.table.nodes {
        for c in &mut node.choices {
            c.wait_w = share * c.dynamic_j / c.compute_s;
        }
    }
    inst
}

fn decide(c: &mut Criterion) {
    decide_group(c, "decide");
    let mut slow = c.benchmark_group("decide-brute");
    slow.sample_size(10);
    let small = instance_with(6, &mut Rng::new(6), true);
    let g = goal(&small);
    slow.bench_with_input(BenchmarkId::new("brute", 6), &small, |b, i| {
        b.iter(|| brute(black_box(&i.table), &g).unwrap())
    });
    slow.finish();
}

fn decide_cpu(c: &mut Criterion<ThreadCpu>) {
    decide_group(c, "decide-cpu");
}

fn decide_group<M: Measurement>(c: &mut Criterion<M>, name: &str) {
    let mut group = c.benchmark_group(name);
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
            let inst = waiting(inst, 0.78);
            group.bench_with_input(
                BenchmarkId::new(format!("exact-waiting-{label}"), n),
                &inst,
                |b, i| b.iter(|| sweep(black_box(&i.table), &g).unwrap()),
            );
        }
    }
    let (inst, g) = with_steps(144);
    group.bench_with_input(BenchmarkId::new("steps-typed", 144), &inst, |b, i| {
        b.iter(|| step_exact(black_box(&i.table), &g).unwrap())
    });
    let inst = waiting(inst, 0.78);
    group.bench_with_input(
        BenchmarkId::new("steps-waiting-typed", 144),
        &inst,
        |b, i| b.iter(|| step_exact(black_box(&i.table), &g).unwrap()),
    );
    group.finish();
}

criterion_group!(benches, decide);
criterion_group! {
    name = cpu;
    config = Criterion::default().with_measurement(ThreadCpu);
    targets = decide_cpu
}
criterion_main!(benches, cpu);
