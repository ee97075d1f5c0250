//! BM25 on the workloads of `benches/bench_bm25.py`: indexing 100k passages of 40-80 Zipf-drawn
//! words, four queries against them (top 10), and recall's case: 200 queries of 5-30 words, top
//! 20, over 10k and 100k passages of 8-40 words. Searches are checked against the naive twin
//! before they are timed, the index against a second build of the same passages.

mod common;

use std::hint::black_box;

use common::{bm25_vocabulary, zipf_texts, Rng};
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use fadeway_core::bm25::{search_naive, Analyzer, Bm25Index, Stopwords};

const K1: f64 = 1.2;
const B: f64 = 0.75;
const ANALYZER: Analyzer = Analyzer { stopwords: Stopwords::Lucene, stem: true };
const PASSAGES: usize = 100_000;
const QUERIES: [&str; 4] = ["w17 w3000s the w250", "w5 w6 w7", "w19999 w12345s", "w42"];
const RECALL_QUERIES: usize = 200;
const RECALL_K: usize = 20;

/// `n` passages of `lo..=hi` words, with ids `7 j + 3` as the Python bench gives them.
fn corpus(seed: u64, n: usize, lo: u64, hi: u64) -> (Vec<i64>, Vec<String>) {
    let texts = zipf_texts(&mut Rng::new(seed), &bm25_vocabulary(), n, lo, hi);
    ((0..n as i64).map(|j| j * 7 + 3).collect(), texts)
}

fn build(ids: &[i64], texts: &[String]) -> Bm25Index {
    let mut index = Bm25Index::new(K1, B, ANALYZER).expect("valid parameters");
    index.add(ids, texts).expect("new, unique ids");
    index
}

/// Asserts the index's hits equal the naive twin's: the same ids, scores to rounding.
fn assert_naive(index: &Bm25Index, docs: &[(i64, &str)], query: &str, k: usize) {
    let got = index.search(query, k);
    let want = search_naive(docs, query, k, K1, B, ANALYZER);
    assert!(!want.is_empty(), "{query:?} finds nothing");
    assert_eq!(got.len(), want.len(), "{query:?}");
    for ((gi, gs), (wi, ws)) in got.iter().zip(&want) {
        assert_eq!(gi, wi, "{query:?}");
        assert!((gs - ws).abs() <= 1e-9 * ws.abs(), "{query:?}: {gs} vs {ws}");
    }
}

fn add_and_search(c: &mut Criterion) {
    let (ids, texts) = corpus(5, PASSAGES, 40, 80);
    let index = build(&ids, &texts);
    assert_eq!(index.len(), PASSAGES);
    assert_eq!(build(&ids, &texts).to_bytes(), index.to_bytes());

    let mut group = c.benchmark_group("bm25_add");
    group.sample_size(10);
    group.throughput(Throughput::Elements(PASSAGES as u64));
    group.bench_function(BenchmarkId::from_parameter(PASSAGES), |b| {
        b.iter_batched(
            || Bm25Index::new(K1, B, ANALYZER).expect("valid parameters"),
            |mut fresh| {
                fresh.add(black_box(&ids), black_box(&texts)).expect("new, unique ids");
                fresh
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();

    let docs: Vec<(i64, &str)> =
        ids.iter().copied().zip(texts.iter().map(String::as_str)).collect();
    let mut group = c.benchmark_group("bm25_search");
    for query in QUERIES {
        assert_naive(&index, &docs, query, 10);
        group.bench_function(BenchmarkId::new("100k", query), |b| {
            b.iter(|| index.search(black_box(query), 10))
        });
    }
    group.finish();
}

fn recall(c: &mut Criterion) {
    let mut group = c.benchmark_group("bm25_recall_200_queries");
    // 200 queries take up to a few hundred milliseconds; 20 samples keep a run short.
    group.sample_size(20);
    for n in [10_000, 100_000] {
        let (ids, texts) = corpus(11, n, 8, 40);
        let queries = zipf_texts(&mut Rng::new(12), &bm25_vocabulary(), RECALL_QUERIES, 5, 30);
        let index = build(&ids, &texts);
        let docs: Vec<(i64, &str)> =
            ids.iter().copied().zip(texts.iter().map(String::as_str)).collect();
        for query in &queries[..2] {
            assert_naive(&index, &docs, query, RECALL_K);
        }
        let run = || queries.iter().map(|q| index.search(q, RECALL_K).len()).sum::<usize>();
        // A query of stopwords only finds nothing, so not every query fills its 20.
        let hits = run();
        assert!(hits * 100 > 95 * RECALL_K * RECALL_QUERIES, "{hits} hits");
        group.throughput(Throughput::Elements(RECALL_QUERIES as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| b.iter(|| black_box(run())));
    }
    group.finish();
}

criterion_group!(benches, add_and_search, recall);
criterion_main!(benches);
