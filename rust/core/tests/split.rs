//! Property tests for boundary-rank splitting: the fast split against its naive twin, and the
//! spec's promises checked directly on the cuts.

use std::collections::HashMap;

use fadeway_core::split::{split, split_i64, split_naive};
use proptest::prelude::*;

/// A conversation: unit sizes (zeros and oversized units included), integer-valued scores from a
/// small range so ties are common and `3x + 1` and `x^3` stay exact, and min <= max.
fn conversation() -> impl Strategy<Value = (Vec<u64>, Vec<f64>, u64, u64)> {
    (0usize..60, 1u64..40, 0u64..60).prop_flat_map(|(n, min, extra)| {
        let sizes = prop::collection::vec(prop_oneof![4 => 0u64..30, 1 => 0u64..200], n);
        let scores = prop::collection::vec((0u32..12).prop_map(f64::from), n.saturating_sub(1));
        (sizes, scores, Just(min), Just(min + extra))
    })
}

fn total(sizes: &[u64], a: usize, b: usize) -> u64 {
    sizes[a..b].iter().sum()
}

/// Whether the cuts inside `(a, b)` can come from splitting `[a, b)` by the rule's sizes: a
/// stretch that fits has no cut; one that does not is cut at some boundary that leaves both
/// sides >= min whenever any boundary could, and both sides decompose the same way.
fn decomposes(
    sizes: &[u64],
    cuts: &[usize],
    (a, b): (usize, usize),
    min: u64,
    max: u64,
    memo: &mut HashMap<(usize, usize), bool>,
) -> bool {
    if let Some(&known) = memo.get(&(a, b)) {
        return known;
    }
    let inside: Vec<usize> = cuts.iter().copied().filter(|&c| a < c && c < b).collect();
    let ok = if b - a < 2 || total(sizes, a, b) <= max {
        inside.is_empty()
    } else {
        let both_big = |c: usize| total(sizes, a, c) >= min && total(sizes, c, b) >= min;
        let some_could = (a + 1..b).any(both_big);
        inside.iter().any(|&c| {
            (!some_could || both_big(c))
                && decomposes(sizes, cuts, (a, c), min, max, memo)
                && decomposes(sizes, cuts, (c, b), min, max, memo)
        })
    };
    memo.insert((a, b), ok);
    ok
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn equals_naive((sizes, scores, min, max) in conversation()) {
        let cuts = split(&sizes, &scores, min, max).expect("valid");
        prop_assert_eq!(&cuts, &split_naive(&sizes, &scores, min, max).expect("valid"));
        let signed: Vec<i64> = sizes.iter().map(|&s| s as i64).collect();
        prop_assert_eq!(&cuts, &split_i64(&signed, &scores, min, max).expect("valid"));
    }

    #[test]
    fn cuts_are_whole_units_and_episodes_fit((sizes, scores, min, max) in conversation()) {
        let n = sizes.len();
        let cuts = split(&sizes, &scores, min, max).expect("valid");
        prop_assert!(cuts.windows(2).all(|w| w[0] < w[1]), "not increasing: {:?}", cuts);
        prop_assert!(cuts.iter().all(|&c| 0 < c && c < n), "outside (0, n): {:?}", cuts);
        let mut bounds = vec![0];
        bounds.extend(&cuts);
        bounds.push(n);
        for w in bounds.windows(2) {
            if n > 0 {
                prop_assert!(
                    w[1] - w[0] == 1 || total(&sizes, w[0], w[1]) <= max,
                    "episode {:?} totals {} > {}", w, total(&sizes, w[0], w[1]), max
                );
            }
        }
    }

    #[test]
    fn every_cut_leaves_both_sides_big_enough((sizes, scores, min, max) in conversation()) {
        let cuts = split(&sizes, &scores, min, max).expect("valid");
        let mut memo = HashMap::new();
        prop_assert!(decomposes(&sizes, &cuts, (0, sizes.len()), min, max, &mut memo));
    }

    #[test]
    fn only_the_ratio_of_sizes_to_the_limits_matters((sizes, scores, min, max) in conversation()) {
        // Scaled past u32, so the wide prefix sums give the same cuts as the narrow ones.
        const SCALE: u64 = 1 << 33;
        let scaled: Vec<u64> = sizes.iter().map(|s| s * SCALE).collect();
        prop_assert_eq!(
            split(&sizes, &scores, min, max).expect("valid"),
            split(&scaled, &scores, min * SCALE, max * SCALE).expect("valid")
        );
    }

    #[test]
    fn only_the_order_of_scores_matters((sizes, scores, min, max) in conversation()) {
        let cuts = split(&sizes, &scores, min, max).expect("valid");
        let affine: Vec<f64> = scores.iter().map(|x| 3.0 * x + 1.0).collect();
        let cubed: Vec<f64> = scores.iter().map(|x| x * x * x).collect();
        prop_assert_eq!(&cuts, &split(&sizes, &affine, min, max).expect("valid"));
        prop_assert_eq!(&cuts, &split(&sizes, &cubed, min, max).expect("valid"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn equals_naive_on_long_stretches(
        sizes in prop::collection::vec(0u64..400, 100..1500),
        seed in any::<u64>(),
        min in 100u64..600,
        extra in 0u64..3000,
    ) {
        // Long inputs span many blocks of the range-maximum structure; ties are common.
        let scores: Vec<f64> = (0..sizes.len() - 1)
            .map(|j| ((seed ^ (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) % 97) as f64 - 48.5)
            .collect();
        prop_assert_eq!(
            split(&sizes, &scores, min, min + extra).expect("valid"),
            split_naive(&sizes, &scores, min, min + extra).expect("valid")
        );
    }
}
