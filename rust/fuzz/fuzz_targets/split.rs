//! `split_episodes(sizes, scores, min_size, max_size)` as the binding calls it: int64 sizes
//! (negative ones included), float64 scores of any length (NaN and inf included), limits as
//! u64 after the binding's sign check. Valid input must give sorted cuts inside the units.
#![no_main]

use arbitrary::Arbitrary;
use fadeway_core::split;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    sizes: Vec<i64>,
    /// Scores one shorter than sizes unless `mismatch`, which keeps them as given.
    scores: Vec<f64>,
    mismatch: bool,
    small_sizes: bool,
    min: u64,
    max: u64,
}

fuzz_target!(|input: Input| {
    let mut sizes = input.sizes;
    if input.small_sizes {
        // Sizes such as real token counts, so valid calls are common.
        for s in &mut sizes {
            *s = s.rem_euclid(1000);
        }
    }
    let mut scores = input.scores;
    if !input.mismatch {
        scores.resize(sizes.len().saturating_sub(1), 0.5);
    }
    let Ok(cuts) = split::split_i64(&sizes, &scores, input.min, input.max) else { return };
    assert!(input.min > 0 && input.min <= input.max, "bad limits accepted");
    assert!(cuts.windows(2).all(|w| w[0] < w[1]), "cuts not strictly increasing");
    assert!(cuts.iter().all(|&c| c > 0 && c < sizes.len()), "a cut outside the units");
});
