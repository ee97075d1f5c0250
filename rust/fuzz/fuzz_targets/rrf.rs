//! `rrf(offsets, ids, weights, k, limit)` as the binding calls it: CSR offsets (well-formed or
//! any int64s), any ids, weights of any length and value (NaN, inf, negative), any `k`, and any
//! non-negative limit (huge too).
#![no_main]

use arbitrary::Arbitrary;
use fadeway_core::fusion;
use libfuzzer_sys::fuzz_target;

#[path = "../common/offsets.rs"]
mod offsets;
use offsets::Offsets;

#[derive(Arbitrary, Debug)]
struct Input {
    offsets: Offsets,
    ids: Vec<i64>,
    /// Ids from a small range, so lists share ids.
    few_ids: bool,
    weights: Vec<f64>,
    mismatch: bool,
    k: f64,
    plain_k: bool,
    limit: usize,
}

fuzz_target!(|input: Input| {
    let offsets = input.offsets.values(16);
    let mut ids = input.ids;
    let mut weights = input.weights;
    if !input.mismatch {
        ids.resize(offsets.last().map_or(0, |&n| n.clamp(0, 1 << 12) as usize), 7);
        weights.resize(offsets.len().saturating_sub(1), 1.0);
        for w in &mut weights {
            if !w.is_finite() || *w < 0.0 {
                *w = 1.0;
            }
        }
    }
    if input.few_ids {
        for id in &mut ids {
            *id %= 8;
        }
    }
    let k = if input.plain_k { 60.0 } else { input.k };
    let Ok((out_ids, scores)) = fusion::rrf(&offsets, &ids, &weights, k, input.limit) else {
        return;
    };
    assert_eq!(out_ids.len(), scores.len());
    assert!(out_ids.len() <= input.limit);
    let mut unique = out_ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), out_ids.len(), "an id twice");
    assert!(scores.iter().all(|s| !s.is_nan() && *s >= 0.0), "a bad score");
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "not best first");
});
