//! Property tests for reciprocal rank fusion: the fast fusion against its naive twin, and its
//! promises checked directly: the order of the lists does not matter, a limit only cuts the
//! tail, and every id of any list is ranked.

use std::collections::BTreeSet;

use fadeway_core::fusion::{rrf, rrf_naive};
use proptest::prelude::*;

/// Ranked lists as CSR with their weights: few distinct ids (so ids repeat across and within
/// lists), weights from a small set that includes 0 and -0.0 (so scores tie), and a `k`.
type Lists = (Vec<Vec<i64>>, Vec<f64>, f64, usize);

fn lists() -> impl Strategy<Value = Lists> {
    let list = prop::collection::vec(-5i64..15, 0..12);
    let weight = prop::sample::select(vec![0.0, -0.0, 0.5, 1.0, 1.0, 2.0, 3.0]);
    let k = prop::sample::select(vec![0.5, 1.0, 2.0, 60.0]);
    (prop::collection::vec((list, weight), 0..6), k, 0usize..25).prop_map(|(lw, k, limit)| {
        let (lists, weights) = lw.into_iter().unzip();
        (lists, weights, k, limit)
    })
}

fn csr(lists: &[Vec<i64>]) -> (Vec<i64>, Vec<i64>) {
    let mut offsets = vec![0];
    let mut ids = Vec::new();
    for list in lists {
        ids.extend(list);
        offsets.push(ids.len() as i64);
    }
    (offsets, ids)
}

fn fuse(lists: &[Vec<i64>], weights: &[f64], k: f64, limit: usize) -> (Vec<i64>, Vec<f64>) {
    let (offsets, ids) = csr(lists);
    rrf(&offsets, &ids, weights, k, limit).expect("valid")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn equals_naive((lists, weights, k, limit) in lists()) {
        let (offsets, ids) = csr(&lists);
        prop_assert_eq!(
            rrf(&offsets, &ids, &weights, k, limit).expect("valid"),
            rrf_naive(&offsets, &ids, &weights, k, limit).expect("valid")
        );
    }

    #[test]
    fn the_order_of_the_lists_does_not_matter(
        (lists, weights, k, limit) in lists(),
        seed in any::<u64>(),
    ) {
        // A deterministic shuffle of the (list, weight) pairs.
        let mut pairs: Vec<(Vec<i64>, f64)> = lists.iter().cloned().zip(weights.clone()).collect();
        let mut state = seed | 1;
        for i in (1..pairs.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            pairs.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let (shuffled, shuffled_weights): (Vec<Vec<i64>>, Vec<f64>) = pairs.into_iter().unzip();
        let a = fuse(&lists, &weights, k, limit);
        let b = fuse(&shuffled, &shuffled_weights, k, limit);
        prop_assert_eq!(&a.0, &b.0);
        // Bit for bit, not within a tolerance.
        let bits = |s: &[f64]| s.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
        prop_assert_eq!(bits(&a.1), bits(&b.1));
    }

    #[test]
    fn a_limit_cuts_the_tail_of_a_full_ranking((lists, weights, k, limit) in lists()) {
        let (all_ids, all_scores) = fuse(&lists, &weights, k, usize::MAX);
        let distinct: BTreeSet<i64> = lists.iter().flatten().copied().collect();
        prop_assert_eq!(all_ids.iter().copied().collect::<BTreeSet<i64>>(), distinct.clone());
        prop_assert_eq!(all_ids.len(), distinct.len());
        prop_assert!(all_scores.windows(2).all(|w| w[0] >= w[1]), "{:?}", all_scores);
        let (ids, scores) = fuse(&lists, &weights, k, limit);
        let n = limit.min(all_ids.len());
        prop_assert_eq!(&ids[..], &all_ids[..n]);
        prop_assert_eq!(&scores[..], &all_scores[..n]);
    }
}
