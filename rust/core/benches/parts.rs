//! The parts of a message, with recall's limits (`PART_MIN_CHARS`, `PART_MAX_CHARS`,
//! `PART_OVERLAP_CHARS` in `_constants.py`), on a typical message (about 1 kB of chat), a long
//! one (100 kB) and one 10,000-character word (windows only). The spans are checked before they
//! are timed: in order, none empty or too long, covering the text from its first to its last
//! character.

mod common;

use std::hint::black_box;

use common::{ChatText, SEED};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fadeway_core::parts::split_parts;

const MIN_CHARS: usize = 16;
const MAX_CHARS: usize = 400;
const OVERLAP: usize = 80;

fn assert_covers(text: &str, spans: &[(usize, usize)]) {
    let chars = text.chars().count();
    assert!(!spans.is_empty());
    assert_eq!(spans[0].0, 0);
    assert_eq!(spans[spans.len() - 1].1, chars);
    for (k, &(start, end)) in spans.iter().enumerate() {
        assert!(start < end && end - start <= MAX_CHARS, "span {k}: {start}..{end}");
        if let Some(&(next, _)) = spans.get(k + 1) {
            assert!(start < next && next <= end, "span {k} and the next leave a gap");
        }
    }
}

fn parts(c: &mut Criterion) {
    let mut chat = ChatText::new(SEED);
    let word = "x".repeat(10_000);
    let texts = [("message_1kB", chat.text(1_000)), ("message_100kB", chat.text(100_000))];
    let mut group = c.benchmark_group("split_parts");
    for (case, text) in texts.iter().map(|(c, t)| (*c, t.as_str())).chain([("word_10k", &*word)]) {
        let spans = split_parts(text, MIN_CHARS, MAX_CHARS, OVERLAP).expect("valid limits");
        assert_covers(text, &spans);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(case), |b| {
            b.iter(|| split_parts(black_box(text), MIN_CHARS, MAX_CHARS, OVERLAP))
        });
    }
    group.finish();
}

criterion_group!(benches, parts);
criterion_main!(benches);
