//! `Bm25Index` as the binding drives it: `new(k1, b, stopwords, stem)` with any floats, then a
//! sequence of `add(ids, texts)` (lengths may differ, ids may repeat), `remove(ids)`,
//! `search(query, k)` with any k, `tokenize`, and `to_bytes` → `from_bytes`, whose index must
//! answer every search exactly as the original does.
#![no_main]

use arbitrary::Arbitrary;
use fadeway_core::bm25::{tokenize, Analyzer, Bm25Index, Stopwords};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Op {
    Add {
        ids: Vec<i64>,
        texts: Vec<String>,
        fit: bool,
    },
    /// Adds `n` generated documents at once (enough to reach compaction after removals).
    AddMany {
        first: i16,
        n: u16,
        words: u8,
    },
    Remove {
        ids: Vec<i64>,
    },
    RemoveRange {
        first: i16,
        n: u16,
    },
    Search {
        query: String,
        k: usize,
    },
    RoundTrip,
}

#[derive(Arbitrary, Debug)]
struct Input {
    k1: f64,
    b: f64,
    plain_params: bool,
    stopwords: u8,
    stem: bool,
    ops: Vec<Op>,
}

const WORDS: &[&str] = &["apple", "apples", "the", "what", "run", "runs", "x", "42", "été", "日本"];

fn check_same(a: &Bm25Index, b: &Bm25Index, queries: &[String]) {
    assert_eq!(a.len(), b.len(), "length differs after a round trip");
    for q in queries {
        for k in [0, 1, 3, usize::MAX] {
            assert_eq!(a.search(q, k), b.search(q, k), "search {q:?} differs after a round trip");
        }
    }
}

fuzz_target!(|input: Input| {
    let stopwords =
        [Stopwords::None, Stopwords::Lucene, Stopwords::English][input.stopwords as usize % 3];
    let analyzer = Analyzer { stopwords, stem: input.stem };
    let (k1, b) = if input.plain_params { (1.2, 0.75) } else { (input.k1, input.b) };
    let Ok(mut index) = Bm25Index::new(k1, b, analyzer) else {
        assert!(!(k1.is_finite() && k1 >= 0.0 && (0.0..=1.0).contains(&b)), "params refused");
        return;
    };
    let mut queries: Vec<String> = vec!["apple run".into(), "42 été".into()];
    for op in input.ops.into_iter().take(32) {
        match op {
            Op::Add { mut ids, mut texts, fit } => {
                if fit {
                    texts.resize(ids.len(), String::new());
                }
                let before = index.len();
                let fresh = ids.iter().all(|id| !index.contains(*id));
                let mut unique = ids.clone();
                unique.sort_unstable();
                unique.dedup();
                let ok = index.add(&ids, &texts).is_ok();
                let should = texts.len() == ids.len() && fresh && unique.len() == ids.len();
                assert_eq!(ok, should, "add accepted or refused wrongly");
                assert_eq!(index.len(), before + if ok { ids.len() } else { 0 });
                if let Some(t) = texts.pop() {
                    queries.push(t);
                }
                ids.clear();
            }
            Op::AddMany { first, n, words } => {
                let n = usize::from(n % 3000);
                let ids: Vec<i64> = (0..n as i64).map(|j| i64::from(first) * 4096 + j).collect();
                let texts: Vec<String> = (0..n)
                    .map(|j| {
                        let w = usize::from(words % 8) + 1;
                        (0..w)
                            .map(|i| WORDS[(j * 7 + i * 3) % WORDS.len()])
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect();
                let _ = index.add(&ids, &texts);
            }
            Op::Remove { ids } => {
                let before = index.len();
                let removed = index.remove(&ids);
                assert_eq!(index.len(), before - removed);
                assert!(ids.iter().all(|id| !index.contains(*id)));
            }
            Op::RemoveRange { first, n } => {
                let ids: Vec<i64> =
                    (0..i64::from(n % 3000)).map(|j| i64::from(first) * 4096 + j).collect();
                index.remove(&ids);
            }
            Op::Search { query, k } => {
                let hits = index.search(&query, k);
                assert!(hits.len() <= k.min(index.len()));
                assert!(hits.iter().all(|&(id, s)| index.contains(id) && s.is_finite()));
                assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1), "not best first");
                let _ = tokenize(&query, analyzer);
                queries.push(query);
            }
            Op::RoundTrip => {
                let bytes = index.to_bytes();
                let back = Bm25Index::from_bytes(&bytes).expect("to_bytes output refused");
                check_same(&index, &back, &queries);
                assert_eq!(back.to_bytes(), bytes, "a second round trip differs");
                index = back;
            }
        }
    }
    let back = Bm25Index::from_bytes(&index.to_bytes()).expect("to_bytes output refused");
    check_same(&index, &back, &queries);
});
