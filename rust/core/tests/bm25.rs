//! BM25: table tests of the tokenizer and stemmer, and property tests of the index against the
//! naive twin `search_naive` (scores to 1e-9), removal against never adding, serialization, and
//! the pruned search against the exhaustive one (same ids, same scores to the bit).

use std::collections::HashSet;

use fadeway_core::bm25::{
    best_window, s_stem, search_naive, search_naive_max_df, tokenize, Analyzer, Bm25Index,
    Stopwords, MAX_DF_MIN_DOCS, MORE_STOPWORDS, STOPWORDS,
};
use fadeway_core::CoreError;
use proptest::prelude::*;

const K1: f64 = 1.2;
const B: f64 = 0.75;
const BOTH: Analyzer = Analyzer { stopwords: Stopwords::Lucene, stem: true };
const ENGLISH: Analyzer = Analyzer { stopwords: Stopwords::English, stem: true };
const PLAIN: Analyzer = Analyzer { stopwords: Stopwords::None, stem: false };

fn index(docs: &[(i64, &str)], analyzer: Analyzer) -> Bm25Index {
    let mut index = Bm25Index::new(K1, B, analyzer).expect("valid parameters");
    let (ids, texts): (Vec<i64>, Vec<&str>) = docs.iter().copied().unzip();
    index.add(&ids, &texts).expect("unique ids");
    index
}

fn assert_close(got: &[(i64, f64)], want: &[(i64, f64)]) {
    assert_eq!(got.len(), want.len(), "got {got:?} want {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.0, w.0, "got {got:?} want {want:?}");
        assert!((g.1 - w.1).abs() <= 1e-9 * w.1.abs().max(1.0), "got {got:?} want {want:?}");
    }
}

#[test]
fn tokenizer() {
    let cases: &[(&str, Analyzer, &[&str])] = &[
        ("", BOTH, &[]),
        ("Hello, World! 42x", PLAIN, &["hello", "world", "42x"]),
        ("The cats and the dogs", BOTH, &["cat", "dog"]),
        ("The cats and the dogs", PLAIN, &["the", "cats", "and", "the", "dogs"]),
        ("Straße ΟΔΟΣ café٣", PLAIN, &["straße", "οδος", "café٣"]),
        ("ponies horses caress its bus", BOTH, &["pony", "horse", "caress", "its", "bus"]),
        ("don't", PLAIN, &["don", "t"]),
    ];
    for &(text, analyzer, want) in cases {
        assert_eq!(tokenize(text, analyzer), want, "{text:?}");
    }
}

fn wanted(query: &str) -> HashSet<String> {
    tokenize(query, BOTH).into_iter().collect()
}

#[test]
fn best_window_is_the_first_run_with_the_most_matching_words() {
    // Words 0-9; "refunds" and "legal" (stemmed "refund") match at words 6 and 8.
    let text = "the team met on monday about refunds and legal terms";
    assert_eq!(best_window(text, &wanted("refund legal"), 3, BOTH), (6, 10));
    // A tie goes to the first run (words 0-1, 1-2, 3-4 and 4-5 hold one each); none matching
    // is the first run too.
    assert_eq!(best_window(text, &wanted("team monday"), 2, BOTH), (0, 10));
    assert_eq!(best_window(text, &wanted("met monday"), 3, BOTH), (2, 10));
    assert_eq!(best_window(text, &wanted("nothing here"), 4, BOTH), (0, 10));
    // At most `size` words: the whole text from word 0.
    assert_eq!(best_window("a b c", &wanted("c"), 3, BOTH), (0, 3));
    // Words split as Python's str.split() does: any run of White_Space and U+001C-U+001F.
    let spaced = "one\u{1f}two\u{a0}\u{2003}three\n\tfour  legal";
    assert_eq!(best_window(spaced, &wanted("legal"), 2, BOTH), (3, 5));
    // A word is matched by any of its tokens ("don't" reads as "don" and "t").
    assert_eq!(best_window("x y z don't", &wanted("don"), 1, PLAIN), (3, 4));
}

#[test]
fn stopwords_list_and_match_agree() {
    for w in STOPWORDS {
        assert!(tokenize(w, BOTH).is_empty(), "{w}");
        assert_eq!(tokenize(w, PLAIN), [*w]);
    }
    // Short words keep their s; a stopword is matched before stemming.
    assert_eq!(tokenize("thee an' ofs these", BOTH), ["thee", "ofs"]);
    for w in MORE_STOPWORDS {
        assert!(tokenize(w, ENGLISH).is_empty(), "{w}");
        assert_eq!(tokenize(w, BOTH), [s_stem(w)], "{w}: dropped by Lucene's set too");
    }
    assert_eq!(
        tokenize("What is Gina's favorite style of dance?", ENGLISH),
        ["gina", "favorite", "style", "dance"]
    );
}

#[test]
fn s_stemmer() {
    let cases = [
        ("flies", "fly"),
        ("aies", "aie"),
        ("eies", "eie"),
        ("agrees", "agree"),
        ("does", "doe"),
        ("boxes", "boxe"),
        ("shoes", "shoe"),
        ("toes", "toe"),
        ("cats", "cat"),
        ("status", "status"),
        ("glass", "glass"),
        ("gas", "gas"),
        ("cafés", "café"),
    ];
    for (word, want) in cases {
        assert_eq!(s_stem(word), want, "{word}");
        assert_eq!(tokenize(word, BOTH), [want], "{word}");
    }
}

#[test]
fn ranks_and_ties() {
    let docs = [(5, "apple banana"), (3, "apple banana"), (9, "cherry"), (1, "apple apple pie")];
    let idx = index(&docs, BOTH);
    let hits = idx.search("apple", 10);
    assert_close(&hits, &search_naive(&docs, "apple", 10, K1, B, BOTH));
    assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [1, 3, 5]);
    assert_eq!(idx.search("apple", 2).iter().map(|h| h.0).collect::<Vec<_>>(), [1, 3]);
    assert!(idx.search("durian", 10).is_empty());
    assert!(idx.search("apple", 0).is_empty());
    assert!(idx.search("the", 10).is_empty());
}

#[test]
fn remove_updates_statistics() {
    let docs = [(1, "a b c d e f"), (2, "red fox"), (3, "red red hen")];
    let mut idx = index(&docs, PLAIN);
    assert_eq!(idx.remove(&[1, 42, 1]), 1);
    assert_eq!(idx.len(), 2);
    assert!(!idx.contains(1));
    assert_close(&idx.search("red fox", 5), &search_naive(&docs[1..], "red fox", 5, K1, B, PLAIN));
    assert!(idx.search("a", 5).is_empty());
    // The id can be added again after removal.
    idx.add(&[1], &["red"]).expect("removed id is free");
    assert_eq!(idx.len(), 3);
}

#[test]
fn churn_compacts_without_changing_scores() {
    // Enough removals to pass the compaction threshold several times over.
    let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];
    let text = |i: i64| format!("{} {} w{i}", words[(i % 6) as usize], words[(i % 4) as usize]);
    let mut idx = Bm25Index::new(K1, B, BOTH).expect("valid");
    let mut live: Vec<(i64, String)> = Vec::new();
    for round in 0..6i64 {
        let ids: Vec<i64> = (round * 2000..round * 2000 + 2000).collect();
        let texts: Vec<String> = ids.iter().map(|&i| text(i)).collect();
        idx.add(&ids, &texts).expect("fresh ids");
        live.extend(ids.iter().map(|&i| (i, text(i))));
        let gone: Vec<i64> = live.iter().map(|d| d.0).filter(|i| i % 5 != 0).collect();
        assert_eq!(idx.remove(&gone), gone.len());
        live.retain(|d| d.0 % 5 == 0);
    }
    assert_eq!(idx.len(), live.len());
    let docs: Vec<(i64, &str)> = live.iter().map(|(i, t)| (*i, t.as_str())).collect();
    for q in ["alpha", "beta zeta", "w10 w35 gamma", "w11"] {
        assert_close(&idx.search(q, 50), &search_naive(&docs, q, 50, K1, B, BOTH));
    }
    let back = Bm25Index::from_bytes(&idx.to_bytes()).expect("round trip");
    assert_eq!(back.search("alpha w10", 20), idx.search("alpha w10", 20));
    idx.add(&[1], &["alpha"]).expect("a removed id is free again");
}

#[test]
fn large_batches_tokenize_in_parallel_and_number_terms_as_one_pass() {
    // 20k documents take the multi-threaded path; one document per add takes the single one.
    let text = |i: i64| format!("t{} t{} u{} shared", i % 997, (i * 7) % 10_007, i % 13);
    let ids: Vec<i64> = (0..20_000).collect();
    let texts: Vec<String> = ids.iter().map(|&i| text(i)).collect();
    let batch =
        index(&ids.iter().zip(&texts).map(|(&i, t)| (i, t.as_str())).collect::<Vec<_>>(), BOTH);
    let mut single = Bm25Index::new(K1, B, BOTH).expect("valid");
    for (&i, t) in ids.iter().zip(&texts) {
        single.add(&[i], &[t]).expect("fresh id");
    }
    assert_eq!(batch.to_bytes(), single.to_bytes());
    let docs: Vec<(i64, &str)> = ids.iter().zip(&texts).map(|(&i, t)| (i, t.as_str())).collect();
    for q in ["t5 u3", "shared", "t10006 t996"] {
        assert_close(&batch.search(q, 20), &search_naive(&docs, q, 20, K1, B, BOTH));
    }
}

#[test]
fn errors() {
    let msg = |r: Result<_, CoreError>| match r {
        Err(CoreError::InvalidArgument(m)) => m,
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    assert!(msg(Bm25Index::new(-1.0, B, BOTH).map(|_| ())).contains("k1 is -1"));
    assert!(msg(Bm25Index::new(f64::NAN, B, BOTH).map(|_| ())).contains("k1 is NaN"));
    assert!(msg(Bm25Index::new(K1, 1.5, BOTH).map(|_| ())).contains("b is 1.5"));
    for bad in [0.0, -0.5, 1.5, f64::NAN] {
        let r = Bm25Index::new(K1, B, BOTH).and_then(|i| i.with_max_df(bad)).map(|_| ());
        assert!(msg(r).contains("max_df is"), "{bad}");
    }
    let mut idx = index(&[(7, "x")], BOTH);
    assert!(msg(idx.add(&[8, 7], &["y", "z"])).contains("ids[1] is 7, which is already"));
    assert!(msg(idx.add(&[8, 8], &["y", "z"])).contains("ids[0] already holds"));
    assert!(msg(idx.add(&[8], &["y", "z"])).contains("same length"));
    // Failed adds changed nothing.
    assert_eq!(idx.len(), 1);
    assert!(idx.search("y", 3).is_empty());
}

#[test]
fn corrupt_bytes_are_errors() {
    let idx = index(&[(1, "alpha beta"), (2, "beta gamma gamma")], BOTH);
    let bytes = idx.to_bytes();
    assert!(Bm25Index::from_bytes(&bytes).is_ok());
    for cut in 0..bytes.len() {
        assert!(Bm25Index::from_bytes(&bytes[..cut]).is_err(), "truncated at {cut}");
    }
    for at in 0..bytes.len() {
        for bit in 0..8 {
            let mut bad = bytes.clone();
            bad[at] ^= 1 << bit;
            assert!(Bm25Index::from_bytes(&bad).is_err(), "flipped bit {bit} of byte {at}");
        }
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(Bm25Index::from_bytes(&longer).is_err());
}

/// A word in more than `max_df` of the documents is left out of the query; under
/// `MAX_DF_MIN_DOCS` documents the share is of that many, so a small index drops nothing common
/// to a few of its documents.
#[test]
fn max_df_leaves_common_words_out() {
    let n = 2 * MAX_DF_MIN_DOCS as i64;
    let texts: Vec<String> = (0..n)
        .map(|i| match i {
            0 => "gina said the trip to rome was long".to_string(),
            1 => "jon gina rome".to_string(),
            _ if i % 2 == 0 => format!("gina note {i}"),
            _ => format!("jon note {i}"),
        })
        .collect();
    let ids: Vec<i64> = (0..n).collect();
    let mut all = Bm25Index::new(K1, B, PLAIN).expect("valid");
    all.add(&ids, &texts).expect("unique");
    let mut common = Bm25Index::new(K1, B, PLAIN).expect("valid").with_max_df(0.25).expect("valid");
    common.add(&ids, &texts).expect("unique");
    // "gina" is in half the documents: left out, so only "rome" ranks, and the short document
    // naming her does not outrank the one about the trip on her name's account.
    assert_eq!(all.search("gina rome", 3).len(), 3);
    let hits: Vec<i64> = common.search("gina rome", 3).into_iter().map(|h| h.0).collect();
    assert_eq!(hits, vec![1, 0]);
    assert!(common.search("gina", 3).is_empty());
    assert_eq!(common.scores("gina", &[0, 2]), vec![0.0, 0.0]);
    // The same words in a small index: a share of MAX_DF_MIN_DOCS, so "gina" in 4 of 5 counts.
    let mut small = Bm25Index::new(K1, B, PLAIN).expect("valid").with_max_df(0.25).expect("valid");
    small.add(&ids[..5], &texts[..5]).expect("unique");
    assert_eq!(small.search("gina", 5).len(), 4);
}

#[test]
fn version_1_bytes_read_back_with_nothing_left_out() {
    let docs = [(1, "alpha beta"), (2, "beta gamma gamma")];
    let idx = index(&docs, BOTH);
    let v2 = idx.to_bytes();
    // Version 1 is version 2 without max_df (8 bytes after k1 and b), with its own checksum.
    let at = 4 + 1 + 1 + 16;
    let mut v1 = [&v2[..4], &[1u8], &v2[5..at], &v2[at + 8..v2.len() - 8]].concat();
    let mut sum: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in &v1 {
        sum = (sum ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    v1.extend_from_slice(&sum.to_le_bytes());
    let back = Bm25Index::from_bytes(&v1).expect("version 1 is read");
    assert_eq!(back.max_df(), 1.0);
    assert_eq!(back.to_bytes(), v2);
}

/// Documents over a small vocabulary (stopwords and plurals included, so both analyzer steps
/// matter), with unique ids.
fn corpus() -> impl Strategy<Value = Vec<(i64, String)>> {
    let word = prop::sample::select(vec![
        "the", "a", "cat", "cats", "dog", "dogs", "pony", "ponies", "Red", "red", "fox", "ΟΔΟΣ",
        "café", "9", "is", "bus",
    ]);
    let text = prop::collection::vec(word, 0..12).prop_map(|w| w.join(" "));
    prop::collection::btree_map(-50i64..50, text, 0..20).prop_map(|m| m.into_iter().collect())
}

fn analyzers() -> impl Strategy<Value = Analyzer> {
    (
        prop_oneof![Just(Stopwords::None), Just(Stopwords::Lucene), Just(Stopwords::English)],
        any::<bool>(),
    )
        .prop_map(|(stopwords, stem)| Analyzer { stopwords, stem })
}

fn borrowed(docs: &[(i64, String)]) -> Vec<(i64, &str)> {
    docs.iter().map(|(id, t)| (*id, t.as_str())).collect()
}

const QUERIES: &[&str] = &["cat", "the dogs", "red fox pony", "café ΟΔΟΣ 9", "bus bus is", "zebra"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn equals_naive(docs in corpus(), analyzer in analyzers(), k in 0usize..25) {
        let docs = borrowed(&docs);
        let idx = index(&docs, analyzer);
        for q in QUERIES {
            assert_close(&idx.search(q, k), &search_naive(&docs, q, k, K1, B, analyzer));
        }
    }

    #[test]
    fn equals_naive_with_max_df(
        docs in corpus(), analyzer in analyzers(), k in 0usize..25,
        max_df in prop::sample::select(vec![0.02, 0.05, 0.1, 0.3, 1.0]),
    ) {
        let docs = borrowed(&docs);
        let mut idx = Bm25Index::new(K1, B, analyzer).expect("valid").with_max_df(max_df).expect("valid");
        let (ids, texts): (Vec<i64>, Vec<&str>) = docs.iter().copied().unzip();
        idx.add(&ids, &texts).expect("unique ids");
        for q in QUERIES {
            let want = search_naive_max_df(&docs, q, k, (K1, B, max_df), analyzer);
            assert_close(&idx.search(q, k), &want);
        }
        let back = Bm25Index::from_bytes(&idx.to_bytes()).expect("round trip");
        prop_assert_eq!(back.max_df(), max_df);
    }

    #[test]
    fn add_then_remove_equals_never_added(
        kept in corpus(), extra in corpus(), analyzer in analyzers(),
    ) {
        // Extra ids are shifted clear of the kept ones; they are added in between kept batches.
        let extra: Vec<(i64, String)> = extra.into_iter().map(|(id, t)| (id + 1000, t)).collect();
        let (first, second) = kept.split_at(kept.len() / 2);
        let mut idx = Bm25Index::new(K1, B, analyzer).expect("valid");
        for batch in [first, &extra[..], second] {
            let ids: Vec<i64> = batch.iter().map(|d| d.0).collect();
            let texts: Vec<&str> = batch.iter().map(|d| d.1.as_str()).collect();
            idx.add(&ids, &texts).expect("unique");
        }
        let extra_ids: Vec<i64> = extra.iter().map(|d| d.0).collect();
        prop_assert_eq!(idx.remove(&extra_ids), extra.len());
        let fresh = index(&borrowed(&kept), analyzer);
        prop_assert_eq!(idx.len(), fresh.len());
        for q in QUERIES {
            assert_close(&idx.search(q, 30), &fresh.search(q, 30));
        }
    }

    #[test]
    fn serialization_round_trip(docs in corpus(), gone in prop::collection::vec(-50i64..50, 0..10),
                                analyzer in analyzers()) {
        let mut idx = index(&borrowed(&docs), analyzer);
        idx.remove(&gone);
        let back = Bm25Index::from_bytes(&idx.to_bytes()).expect("round trip");
        prop_assert_eq!(back.len(), idx.len());
        prop_assert_eq!(back.analyzer(), analyzer);
        prop_assert_eq!(back.to_bytes(), idx.to_bytes());
        for q in QUERIES {
            prop_assert_eq!(back.search(q, 30), idx.search(q, 30));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = Bm25Index::from_bytes(&data);
    }
}

/// A skewed vocabulary: word `w{i}` drawn with probability ~ 1 / (i + 1), so a few words are in
/// most documents (small bounds, pruned) and most are rare; `gone` is never indexed.
fn zipf_text(seed: u64, words: usize) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..words)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Log-uniform over 1..=400: rank r with probability ~ 1 / r.
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            format!("w{}", (400f64.powf(u) as u64) - 1)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Asserts that the pruned and the counted searches return exactly what the exhaustive one does,
/// bit for bit.
fn assert_pruned_exact(idx: &Bm25Index, q: &str, k: usize) {
    let want = idx.search_exhaustive(q, k);
    let got = idx.search_pruned(q, k);
    let bits = |h: &[(i64, f64)]| h.iter().map(|&(id, s)| (id, s.to_bits())).collect::<Vec<_>>();
    assert_eq!(bits(&got), bits(&want), "query {q:?} k {k}");
    assert_eq!(bits(&idx.search_counted(q, k)), bits(&want), "counted: query {q:?} k {k}");
    assert_eq!(bits(&idx.search(q, k)), bits(&want), "query {q:?} k {k}");
}

#[test]
fn pruned_equals_exhaustive_across_windows_and_churn() {
    // Over 2048 slots (several windows of the pruned search), with removals that leave bounds
    // loose, a compaction that tightens them, and later adds that raise them again.
    let mut idx = Bm25Index::new(K1, B, PLAIN).expect("valid");
    let ids: Vec<i64> = (0..9000).map(|i| (i * 7919) % 10_007).collect();
    let texts: Vec<String> = (0..9000).map(|i| zipf_text(i, 3 + (i % 29) as usize)).collect();
    idx.add(&ids, &texts).expect("unique ids");
    let queries: Vec<String> = (0..40u64)
        .map(|j| {
            zipf_text(100_000 + j, 1 + (j % 25) as usize) + if j % 5 == 0 { " gone" } else { "" }
        })
        .collect();
    let check = |idx: &Bm25Index| {
        for (j, q) in queries.iter().enumerate() {
            for k in [0, 1, 2, 10, 20 + j, 700, idx.len(), idx.len() + 3] {
                assert_pruned_exact(idx, q, k);
            }
        }
    };
    check(&idx);
    let gone: Vec<i64> = ids.iter().copied().filter(|i| i % 3 == 0).collect();
    idx.remove(&gone);
    check(&idx);
    let gone: Vec<i64> = ids.iter().copied().filter(|i| i % 3 == 1).collect();
    idx.remove(&gone); // tombstones now outnumber the living: compaction
    check(&idx);
    let more: Vec<i64> = (20_000..21_000).collect();
    let texts: Vec<String> =
        (0..1000).map(|i| zipf_text(50_000 + i, 1 + (i % 7) as usize)).collect();
    idx.add(&more, &texts).expect("fresh ids");
    check(&idx);
}

/// One batch: documents as `(seed, words)` for `zipf_text`, then places of live ids to remove.
type Batch = (Vec<(u64, usize)>, Vec<usize>);

/// Batches of documents over the skewed vocabulary, each added and then partly removed.
fn churn() -> impl Strategy<Value = Vec<Batch>> {
    let batch = (
        prop::collection::vec((any::<u64>(), 0usize..30), 0..150),
        prop::collection::vec(0usize..200, 0..40),
    );
    prop::collection::vec(batch, 1..4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn pruned_equals_exhaustive(
        batches in churn(),
        queries in prop::collection::vec((any::<u64>(), 0usize..30), 1..6),
        k1 in 0.0f64..3.0, b in 0.0f64..=1.0, k_extra in 0usize..30,
        max_df in prop::sample::select(vec![0.01, 0.1, 1.0]),
    ) {
        let mut idx = Bm25Index::new(k1, b, PLAIN).expect("valid").with_max_df(max_df).expect("valid");
        let mut next = 0i64;
        let mut live: Vec<i64> = Vec::new();
        for (docs, gone) in batches {
            let ids: Vec<i64> = (next..next + docs.len() as i64).collect();
            next += docs.len() as i64;
            let texts: Vec<String> = docs.iter().map(|&(seed, n)| zipf_text(seed, n)).collect();
            idx.add(&ids, &texts).expect("fresh ids");
            live.extend(&ids);
            let gone: Vec<i64> =
                gone.iter().filter_map(|&g| live.get(g % live.len().max(1)).copied()).collect();
            idx.remove(&gone);
            live.retain(|i| !gone.contains(i));
        }
        for (seed, n) in queries {
            // Repeated words come from the skew; "w999" and "gone" are in no document.
            let q = format!("{} w999 {}", zipf_text(seed, n), if n % 2 == 0 { "gone" } else { "" });
            for k in [0, 1, 3, k_extra, idx.len(), idx.len() + k_extra + 1] {
                assert_pruned_exact(&idx, &q, k);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// `scores` gives each id the score the exhaustive search gives it, to the bit, and 0 to
    /// an id that search does not return (removed, unknown, or matching no token).
    #[test]
    fn scores_are_the_search_scores(
        batches in churn(),
        queries in prop::collection::vec((any::<u64>(), 0usize..30), 1..6),
        k1 in 0.0f64..3.0, b in 0.0f64..=1.0,
    ) {
        let mut idx = Bm25Index::new(k1, b, PLAIN).expect("valid");
        let mut next = 0i64;
        for (docs, gone) in batches {
            let ids: Vec<i64> = (next..next + docs.len() as i64).collect();
            next += docs.len() as i64;
            let texts: Vec<String> = docs.iter().map(|&(seed, n)| zipf_text(seed, n)).collect();
            idx.add(&ids, &texts).expect("fresh ids");
            let gone: Vec<i64> = gone.iter().map(|&g| g as i64).collect();
            idx.remove(&gone);
        }
        let asked: Vec<i64> = (-1..next + 1).rev().collect(); // unknown ids at both ends
        for (seed, n) in queries {
            let q = format!("{} w999", zipf_text(seed, n));
            let found: std::collections::HashMap<i64, f64> =
                idx.search_exhaustive(&q, usize::MAX).into_iter().collect();
            let scores = idx.scores(&q, &asked);
            prop_assert_eq!(scores.len(), asked.len());
            for (id, score) in asked.iter().zip(scores) {
                let want = found.get(id).copied().unwrap_or(0.0);
                prop_assert_eq!(score.to_bits(), want.to_bits(), "id {}", id);
            }
        }
    }
}
