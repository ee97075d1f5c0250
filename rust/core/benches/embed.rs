//! Hashing embeddings on the workload of the design log in `embed.rs`: 10,000 chat utterances
//! (about 60 bytes each) at dim 256 and 1024. The rows are checked before they are timed: each
//! of unit length (or zero), and each the embedding of its text alone.

mod common;

use std::hint::black_box;

use common::{ChatText, SEED};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fadeway_core::embed::embed;

const UTTERANCES: usize = 10_000;

fn hash_embed(c: &mut Criterion) {
    let mut chat = ChatText::new(SEED);
    let texts: Vec<String> = (0..UTTERANCES).map(|_| chat.sentence()).collect();
    let mut group = c.benchmark_group("hash_embed");
    // A call takes tens of milliseconds; 20 samples keep a run under a few seconds.
    group.sample_size(20);
    group.throughput(Throughput::Elements(UTTERANCES as u64));
    for dim in [256, 1024] {
        let rows = embed(&texts, dim).expect("dim is positive");
        for (j, row) in rows.chunks_exact(dim).enumerate() {
            let norm = row.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
            assert!((norm - 1.0).abs() < 1e-5 || norm == 0.0, "row {j} has norm {norm}");
        }
        for j in [0, UTTERANCES / 2, UTTERANCES - 1] {
            let alone = embed(&texts[j..=j], dim).expect("dim is positive");
            assert_eq!(alone, rows[j * dim..(j + 1) * dim], "row {j}");
        }
        group.bench_function(BenchmarkId::from_parameter(dim), |b| {
            b.iter(|| embed(black_box(&texts), dim))
        });
    }
    group.finish();
}

criterion_group!(benches, hash_embed);
criterion_main!(benches);
