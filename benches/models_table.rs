//! Building a model's table for a node set: the step before every search.
//! Paper 004's Table I types (hetero-table1.yaml) at 144, 1,000 and 10,000
//! nodes (at 10,000 also with a measured curve, without and with a learned factor on
//! every node), and the EP iso-energy profile at 1,000 nodes.
//! Run: `cargo bench --bench models_table -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;
use std::path::Path;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use greenup::model::NodeSlot;
use greenup::model::measured_power::{MeasuredClock, NodeFactor, PowerCurve, overlay};
use greenup::profile::Profile;

const SITE: &str = "
node_types:
  type1: { frequencies: {min: 1.2, max: 2.5, step: 0.1}, power: {dynamic_w: 20, static_w: 4} }
  type2: { frequencies: [1.6, 1.729, 1.862, 1.995, 2.128, 2.261, 2.394, 2.527, 2.66], power: {dynamic_w: 25, static_w: 5} }
  type3: { frequencies: {min: 1.2, max: 2.9, step: 0.1}, power: {dynamic_w: 30, static_w: 6} }
  type4: { frequencies: [1.6, 1.671, 1.804, 1.937, 2.07, 2.203, 2.336, 2.469, 2.602, 2.735, 2.868, 3.001, 3.134, 3.267, 3.4], power: {dynamic_w: 35, static_w: 7} }
nodes:
  type1: \"h[00001-10000]\"
";

fn slots(site: &greenup::site::Site, n: usize) -> Vec<NodeSlot> {
    (0..n)
        .map(|i| {
            let t = &site.node_types[&format!("type{}", i % 4 + 1)];
            NodeSlot {
                name: format!("h{:05}", i + 1),
                node_type: t.name.clone(),
                freqs_ghz: t.freqs_ghz.clone(),
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let site = greenup::site::parse("bench-site.yaml", SITE).expect("bench site parses");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/profiles");
    let hetero = Profile::load(&dir.join("hetero-table1.yaml")).expect("shipped profile loads");
    let ep = Profile::load(&dir.join("ep.yaml")).expect("shipped profile loads");
    let mut g = c.benchmark_group("table");
    for n in [144usize, 1_000, 10_000] {
        let s = slots(&site, n);
        let model = hetero.predictor(&site).expect("predictor");
        g.bench_with_input(BenchmarkId::new("hetero", n), &s, |b, s| {
            b.iter(|| black_box(model.table(s).expect("table")))
        });
    }
    // The same 10,000 nodes with a measured curve on every type, without and with a
    // learned factor on every node (the worst case: each row scaled).
    let s = slots(&site, 10_000);
    for (name, factors) in [("hetero-measured", false), ("hetero-node-factors", true)] {
        let curves = site
            .node_types
            .values()
            .map(|t| {
                let nodes = s
                    .iter()
                    .filter(|n| factors && n.node_type == t.name)
                    .enumerate()
                    .map(|(i, n)| {
                        let factor = 0.95 + 0.1 * (i % 11) as f64 / 10.0;
                        (n.name.clone(), NodeFactor { factor, runs: 3 })
                    })
                    .collect();
                let curve = PowerCurve {
                    clocks: vec![MeasuredClock {
                        freq_ghz: t.fmax(),
                        busy_w: 30.0,
                        runs: 3,
                        samples: 3,
                    }],
                    floor_below: false,
                    nodes,
                };
                (t.name.clone(), curve)
            })
            .collect();
        let mut measured = site.clone();
        measured.node_types = overlay(&site.node_types, &curves);
        let model = hetero.predictor(&measured).expect("predictor");
        g.bench_with_input(BenchmarkId::new(name, 10_000), &s, |b, s| {
            b.iter(|| black_box(model.table(s).expect("table")))
        });
    }
    let s = slots(&site, 1_000);
    let model = ep.predictor(&site).expect("predictor");
    g.bench_with_input(BenchmarkId::new("iso_energy", 1_000), &s, |b, s| {
        b.iter(|| black_box(model.table(s).expect("table")))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
