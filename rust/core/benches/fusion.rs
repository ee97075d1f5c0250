//! Reciprocal rank fusion: recall's case (four ranked lists of 100 ids over a pool of 400, top
//! 20) and a large one (eight lists of 12,500 ids over 50,000, top 100). Each fused ranking is
//! checked against the naive twin, to the bit, before it is timed.

mod common;

use std::hint::black_box;

use common::{Rng, SEED};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fadeway_core::fusion::{rrf, rrf_naive};

/// Recall's rank constant (`RRF_K` in `_constants.py`).
const K: f64 = 60.0;

/// `lists` ranked lists of `len` ids each, drawn from `0..pool`, as CSR, with their weights.
fn ranked_lists(lists: usize, len: usize, pool: u64) -> (Vec<i64>, Vec<i64>, Vec<f64>) {
    let mut rng = Rng::new(SEED);
    let offsets = (0..=lists).map(|i| (i * len) as i64).collect();
    let ids = (0..lists * len).map(|_| rng.range(0, pool) as i64).collect();
    let weights = (0..lists).map(|_| 0.5 + rng.uniform()).collect();
    (offsets, ids, weights)
}

fn fusion(c: &mut Criterion) {
    let mut group = c.benchmark_group("rrf");
    for (case, lists, len, pool, limit) in
        [("recall", 4, 100, 400, 20), ("large", 8, 12_500, 50_000, 100)]
    {
        let (offsets, ids, weights) = ranked_lists(lists, len, pool);
        let want = rrf_naive(&offsets, &ids, &weights, K, limit).expect("valid lists");
        assert_eq!(want.0.len(), limit);
        assert_eq!(rrf(&offsets, &ids, &weights, K, limit).expect("valid lists"), want);
        group.throughput(Throughput::Elements(ids.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(case), |b| {
            b.iter(|| rrf(black_box(&offsets), black_box(&ids), &weights, K, limit))
        });
    }
    group.finish();
}

criterion_group!(benches, fusion);
criterion_main!(benches);
