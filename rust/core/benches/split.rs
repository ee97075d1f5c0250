//! Boundary-rank splitting on the workload of `benches/bench_split.py`: 10^5 and 10^6 units of
//! log-normal sizes around 150 tokens, random scores, episodes of 400 to 4,000 tokens. The cuts
//! are checked before they are timed: sorted, inside the conversation, and every episode fits
//! (or is a single unit). (The naive twin is quadratic in a stretch, too slow at these sizes.)

mod common;

use std::hint::black_box;

use common::{conversation, SEED};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fadeway_core::split::split_i64;

const UNITS: [usize; 2] = [100_000, 1_000_000];
const MIN_SIZE: u64 = 400;
const MAX_SIZE: u64 = 4_000;

/// Asserts that `cuts` split `sizes` into episodes that fit `MAX_SIZE` or are one unit.
fn assert_fits(sizes: &[i64], cuts: &[usize]) {
    let bounds: Vec<usize> =
        std::iter::once(0).chain(cuts.iter().copied()).chain([sizes.len()]).collect();
    for w in bounds.windows(2) {
        assert!(w[0] < w[1], "cuts {w:?} out of order");
        let total: i64 = sizes[w[0]..w[1]].iter().sum();
        assert!(w[1] - w[0] == 1 || total as u64 <= MAX_SIZE, "episode {w:?} holds {total}");
    }
}

fn split(c: &mut Criterion) {
    let mut group = c.benchmark_group("split");
    for n in UNITS {
        let (sizes, scores) = conversation(n, SEED);
        let cuts = split_i64(&sizes, &scores, MIN_SIZE, MAX_SIZE).expect("valid conversation");
        assert!(!cuts.is_empty());
        assert_fits(&sizes, &cuts);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| split_i64(black_box(&sizes), black_box(&scores), MIN_SIZE, MAX_SIZE))
        });
    }
    group.finish();
}

criterion_group!(benches, split);
criterion_main!(benches);
