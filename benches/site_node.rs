//! What a compute node's prolog, step or epilog pays to learn the site's node settings:
//! the test cluster's site config parsed and checked in full, against reading the
//! node's JSON copy of its settings (`greenup_host::cache::load_cached`, copy current).
//! Run: `cargo bench --bench site_node -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = dir.path().join("greenup.yaml");
    let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cluster/greenup.yaml");
    std::fs::copy(&site, &config).expect("test cluster site config copied");
    let cache = dir.path().join("cache");
    let mut g = c.benchmark_group("site_node");
    g.bench_function("yaml_full_load", |b| {
        b.iter(|| black_box(greenup::site::load(&config).expect("site config loads")))
    });
    // The first call writes the copy; every call measured here reads it.
    greenup_host::cache::load_cached(&config, &cache, greenup::site::node::load)
        .expect("node settings load");
    g.bench_function("node_copy_read", |b| {
        b.iter(|| {
            black_box(
                greenup_host::cache::load_cached(&config, &cache, greenup::site::node::load)
                    .expect("copy reads"),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
