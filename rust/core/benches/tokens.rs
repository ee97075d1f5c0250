//! Token counting on the workload of `benches/bench_tokens.py`: 3 MB of generated chat text in
//! one call, the same text as 130-byte passages (one call each, and all in one `count_many`), and
//! one passage again and again, for both encodings. Counts are checked against the encoder's
//! token ids before they are timed.

mod common;

use std::hint::black_box;

use common::{passages, ChatText, SEED};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fadeway_core::tokens::{count, count_many, encode, Encoding};

const TEXT_BYTES: usize = 3_000_000;
const PASSAGE_BYTES: usize = 130;
const ENCODINGS: [Encoding; 2] = [Encoding::O200kBase, Encoding::Cl100kBase];

fn tokens(c: &mut Criterion) {
    let text = ChatText::new(SEED).text(TEXT_BYTES);
    let parts = passages(&text, PASSAGE_BYTES);
    let one = parts[parts.len() / 2];
    for encoding in ENCODINGS {
        let name = encoding.name();
        let want: Vec<usize> = parts.iter().map(|p| encode(encoding, p).len()).collect();
        assert_eq!(count(encoding, &text), encode(encoding, &text).len());
        assert_eq!(parts.iter().map(|p| count(encoding, p)).collect::<Vec<_>>(), want);
        assert_eq!(count_many(encoding, &parts), want);

        let mut group = c.benchmark_group("count_tokens");
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(BenchmarkId::new("3MB_text", name), |b| {
            b.iter(|| count(encoding, black_box(&text)))
        });
        group.bench_function(BenchmarkId::new("passages_each", name), |b| {
            b.iter(|| parts.iter().map(|p| count(encoding, black_box(p))).sum::<usize>())
        });
        group.bench_function(BenchmarkId::new("passages_many", name), |b| {
            b.iter(|| count_many(encoding, black_box(&parts)))
        });
        group.throughput(Throughput::Bytes(one.len() as u64));
        group.bench_function(BenchmarkId::new("one_passage", name), |b| {
            b.iter(|| count(encoding, black_box(one)))
        });
        group.finish();
    }
}

criterion_group!(benches, tokens);
criterion_main!(benches);
