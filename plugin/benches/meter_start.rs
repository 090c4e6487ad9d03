//! What arranging `greenup meter` costs a job prolog: `command::start_later` forks, the
//! first child forks again and exits, and the prolog reaps it. The grandchild's delay
//! and exec are not waited for; here its condition file is absent, so it exits without
//! starting anything, as for a job over within a second.
//! Run: `cargo bench -p spank_greenup --bench meter_start -- --warm-up-time 1 --measurement-time 5`.

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let absent = dir.path().join("no-job-record");
    c.bench_function("meter_start_later", |b| {
        b.iter(|| {
            spank_greenup::command::start_later(
                Path::new("/bin/true"),
                &[OsStr::new("meter")],
                Duration::ZERO,
                &absent,
            )
            .expect("fork")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
