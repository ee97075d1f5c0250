//! Reciprocal rank fusion of ranked lists (issue 5, item 4: recall's fusion of its rankings).
//!
//! The rule, exactly ([`rrf`]): each list holds ids, best first. An id at rank `r` of a list with
//! weight `w` earns `w / (k + r)`, ranks counting from 1; an id repeated within one list counts
//! at its first rank only. An id's score is the sum of what it earns over the lists that hold it. Ids
//! come back by score, highest first; ties go to the id with the best (smallest) rank in any
//! list, then to the smaller id. At most `limit` ids are returned.
//!
//! Deterministic on ties and on the order of the lists: the terms of each id are added smallest
//! first, so the lists' order cannot change a score even in its last bit, and the tie-break is a
//! total order on distinct ids. The Python twin (`tests/reference.py: rrf_reference`) adds in the
//! same order, so the two agree exactly rather than within a tolerance.
//!
//! Design log. Fusion runs over a few lists of tens to hundreds of ids per recall, so clarity and
//! determinism were put first. The (id, list, rank) triples are sorted once, which groups each
//! id's terms, finds its first rank in every list and fixes the summation order in one pass,
//! with no hashing (whose iteration order would need sorting afterwards anyway). Only the best
//! `limit` results are fully sorted (`select_nth_unstable_by` first), since recall asks for a
//! handful out of everything the lists hold.

use std::cmp::Ordering;

use crate::csr::check_offsets;
use crate::CoreError;

/// The fused ranking of the ranked lists in CSR layout: list `i` is `ids[offsets[i]..offsets[i +
/// 1]]`, best first, with weight `weights[i]`. Returns the ids, best first, and their scores
/// (`sum of weight / (k + rank)`, ranks from 1), at most `limit` of each. See the module
/// documentation for the exact rule and tie-break.
///
/// Errors: malformed offsets (empty, not starting at 0, decreasing, or not ending at
/// `ids.len()`), `weights` not one per list, a weight that is negative or not finite, or a `k`
/// that is not finite and positive.
pub fn rrf(
    offsets: &[i64],
    ids: &[i64],
    weights: &[f64],
    k: f64,
    limit: usize,
) -> Result<(Vec<i64>, Vec<f64>), CoreError> {
    validate_rrf(offsets, ids.len(), weights, k)?;
    let mut entries: Vec<Entry> = Vec::with_capacity(ids.len());
    for (list, bounds) in offsets.windows(2).enumerate() {
        // Offsets are validated: non-negative, non-decreasing and at most ids.len().
        let (a, b) = (bounds[0] as usize, bounds[1] as usize);
        entries.extend(ids[a..b].iter().enumerate().map(|(j, &id)| Entry {
            id,
            list,
            rank: j + 1,
        }));
    }
    entries.sort_unstable_by_key(|e| (e.id, e.list, e.rank));

    let mut fused: Vec<Fused> = Vec::new();
    let mut terms: Vec<f64> = Vec::new();
    for group in entries.chunk_by(|a, b| a.id == b.id) {
        terms.clear();
        let mut previous_list = None;
        for e in group {
            // Sorted by (list, rank) within the id, so the first entry of a list is its first rank.
            if previous_list != Some(e.list) {
                terms.push(weights[e.list] / (k + e.rank as f64));
                previous_list = Some(e.list);
            }
        }
        terms.sort_unstable_by(f64::total_cmp);
        // Starting from +0.0 also turns the -0.0 a weight of -0.0 earns into +0.0.
        let score = terms.iter().fold(0.0, |sum, &t| sum + t);
        let best_rank = group.iter().map(|e| e.rank).min().unwrap_or(usize::MAX);
        fused.push(Fused { score, best_rank, id: group[0].id });
    }

    if limit < fused.len() {
        fused.select_nth_unstable_by(limit, Fused::order);
        fused.truncate(limit);
    }
    fused.sort_unstable_by(Fused::order);
    Ok(fused.into_iter().map(|f| (f.id, f.score)).unzip())
}

/// One id at one rank of one list.
#[derive(Clone, Copy)]
struct Entry {
    id: i64,
    list: usize,
    rank: usize,
}

/// An id's fused score and its best rank in any list.
struct Fused {
    score: f64,
    best_rank: usize,
    id: i64,
}

impl Fused {
    /// Best first: higher score, then smaller best rank, then smaller id. Scores are sums of
    /// non-negative terms from +0.0, never NaN, so `total_cmp` is the numeric order here.
    fn order(a: &Fused, b: &Fused) -> Ordering {
        b.score.total_cmp(&a.score).then(a.best_rank.cmp(&b.best_rank)).then(a.id.cmp(&b.id))
    }
}

/// The checks of [`rrf`]: well-formed offsets over the ids, one finite weight >= 0 per list, and
/// a finite `k` > 0.
fn validate_rrf(offsets: &[i64], n_ids: usize, weights: &[f64], k: f64) -> Result<(), CoreError> {
    check_offsets(offsets, n_ids, "lists", "ids")?;
    let lists = offsets.len() - 1;
    if weights.len() != lists {
        return Err(CoreError::InvalidArgument(format!(
            "weights has {} entries but offsets describes {lists} lists; there must be one weight \
             per list",
            weights.len()
        )));
    }
    if let Some(j) = weights.iter().position(|w| !(w.is_finite() && *w >= 0.0)) {
        return Err(CoreError::InvalidArgument(format!(
            "weights[{j}] is {}; weights must be finite and >= 0",
            weights[j]
        )));
    }
    if !(k.is_finite() && k > 0.0) {
        return Err(CoreError::InvalidArgument(format!(
            "k is {k}; the rank constant must be finite and > 0 (60 is usual)"
        )));
    }
    Ok(())
}

/// The slow, obvious twin of [`rrf`], for tests: a map from id to its terms, the whole ranking
/// sorted, then cut to `limit`. Adds each id's terms smallest first, as [`rrf`] does.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn rrf_naive(
    offsets: &[i64],
    ids: &[i64],
    weights: &[f64],
    k: f64,
    limit: usize,
) -> Result<(Vec<i64>, Vec<f64>), CoreError> {
    use std::collections::{BTreeMap, HashSet};
    validate_rrf(offsets, ids.len(), weights, k)?;
    // id -> (terms, best rank)
    let mut seen: BTreeMap<i64, (Vec<f64>, usize)> = BTreeMap::new();
    for (list, &weight) in weights.iter().enumerate() {
        let ranked = &ids[offsets[list] as usize..offsets[list + 1] as usize];
        let mut in_this_list = HashSet::new();
        for (j, &id) in ranked.iter().enumerate() {
            let rank = j + 1;
            if !in_this_list.insert(id) {
                continue;
            }
            let slot = seen.entry(id).or_insert((Vec::new(), rank));
            slot.0.push(weight / (k + rank as f64));
            slot.1 = slot.1.min(rank);
        }
    }
    let mut ranking: Vec<(f64, usize, i64)> = seen
        .into_iter()
        .map(|(id, (mut terms, best))| {
            terms.sort_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
            let mut score = 0.0;
            for t in terms {
                score += t;
            }
            (score, best, id)
        })
        .collect();
    ranking.sort_by(|a, b| {
        b.0.partial_cmp(&a.0).unwrap_or(Ordering::Equal).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2))
    });
    ranking.truncate(limit);
    Ok(ranking.into_iter().map(|(score, _, id)| (id, score)).unzip())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(offsets: &[i64], ids: &[i64], weights: &[f64], k: f64, limit: usize) -> Vec<i64> {
        let fast = rrf(offsets, ids, weights, k, limit).expect("valid input");
        let naive = rrf_naive(offsets, ids, weights, k, limit).expect("valid input");
        assert_eq!(fast, naive, "offsets {offsets:?} ids {ids:?} weights {weights:?}");
        fast.0
    }

    #[test]
    fn hand_computed_scores() {
        // Lists [7, 3, 5] and [3, 9], weights 1 and 2, k = 1:
        // 3: 1/3 + 2/2 = 4/3; 7: 1/2; 9: 2/3; 5: 1/4.
        let (ids, scores) = rrf(&[0, 3, 5], &[7, 3, 5, 3, 9], &[1.0, 2.0], 1.0, 10).expect("valid");
        assert_eq!(ids, [3, 9, 7, 5]);
        assert_eq!(scores, [1.0 / 3.0 + 1.0, 2.0 / 3.0, 0.5, 0.25]);
        // k = 60, equal weights: the usual constant.
        let (ids, scores) = rrf(&[0, 2, 4], &[1, 2, 2, 1], &[1.0, 1.0], 60.0, 10).expect("valid");
        assert_eq!(ids, [1, 2]); // equal scores; both have best rank 1, so the smaller id wins
        assert_eq!(scores, [1.0 / 62.0 + 1.0 / 61.0, 1.0 / 61.0 + 1.0 / 62.0]);
    }

    #[test]
    fn table() {
        // (offsets, ids, weights, k, limit, expected ids)
        type Case = (&'static [i64], &'static [i64], &'static [f64], f64, usize, &'static [i64]);
        let cases: &[Case] = &[
            // no lists, and empty lists
            (&[0], &[], &[], 60.0, 5, &[]),
            (&[0, 0, 0], &[], &[1.0, 1.0], 60.0, 5, &[]),
            // one list keeps its order
            (&[0, 4], &[4, -2, 9, 0], &[1.0], 60.0, 10, &[4, -2, 9, 0]),
            // limit cuts the tail; limit 0 returns nothing
            (&[0, 4], &[4, -2, 9, 0], &[1.0], 60.0, 2, &[4, -2]),
            (&[0, 4], &[4, -2, 9, 0], &[1.0], 60.0, 0, &[]),
            // k = 1, lists [8, 1, 6] and [2, 4, 6]: 2, 8 and 6 all score 1/2 (6 as 1/4 + 1/4);
            // 2 and 8 have best rank 1, so the smaller id first, then 6 (best rank 3); 1 and 4
            // both score 1/3 at rank 2, so the smaller id first.
            (&[0, 3, 6], &[8, 1, 6, 2, 4, 6], &[1.0, 1.0], 1.0, 10, &[2, 8, 6, 1, 4]),
            // tie on score and best rank: the smaller id
            (&[0, 1, 2], &[5, 3], &[1.0, 1.0], 60.0, 10, &[3, 5]),
            // a repeat within a list counts at its first rank only: 1 -> 1/2, 2 -> 1/5 + 1/2
            (&[0, 4, 5], &[1, 1, 1, 2, 2], &[1.0, 1.0], 1.0, 10, &[2, 1]),
            // zero weight: its ids still appear, ranked by rank then id among the zeros
            (&[0, 1, 3], &[1, 4, 3], &[1.0, 0.0], 60.0, 10, &[1, 4, 3]),
            // a heavier list wins
            (&[0, 1, 2], &[1, 2], &[1.0, 3.0], 60.0, 10, &[2, 1]),
        ];
        for &(offsets, ids, weights, k, limit, want) in cases {
            assert_eq!(both(offsets, ids, weights, k, limit), want, "ids {ids:?}");
        }
    }

    #[test]
    fn negative_zero_weight_scores_plus_zero() {
        let (_, scores) = rrf(&[0, 1], &[3], &[-0.0], 60.0, 1).expect("valid");
        assert!(scores[0] == 0.0 && scores[0].is_sign_positive());
    }

    #[test]
    fn errors() {
        let bad = |r: Result<(Vec<i64>, Vec<f64>), CoreError>| match r {
            Err(CoreError::InvalidArgument(msg)) => msg,
            other => panic!("expected InvalidArgument, got {other:?}"),
        };
        assert!(bad(rrf(&[], &[], &[], 60.0, 1)).contains("offsets is empty"));
        assert!(bad(rrf(&[1, 1], &[1], &[1.0], 60.0, 1)).contains("offsets[0] is 1"));
        assert!(bad(rrf(&[0, 2, 1], &[1, 2], &[1.0, 1.0], 60.0, 1)).contains("offsets[2] is 1"));
        assert!(bad(rrf(&[0, 1], &[1, 2], &[1.0], 60.0, 1)).contains("ends at 1 but there are 2"));
        assert!(bad(rrf(&[0, -1], &[], &[1.0], 60.0, 1)).contains("non-decreasing"));
        assert!(bad(rrf(&[0, 1], &[1], &[], 60.0, 1)).contains("one weight per list"));
        assert!(bad(rrf(&[0, 1], &[1], &[-1.0], 60.0, 1)).contains("weights[0] is -1"));
        assert!(bad(rrf(&[0, 1], &[1], &[f64::NAN], 60.0, 1)).contains("weights[0] is NaN"));
        assert!(bad(rrf(&[0, 1], &[1], &[f64::INFINITY], 60.0, 1)).contains("finite"));
        assert!(bad(rrf(&[0, 1], &[1], &[1.0], 0.0, 1)).contains("k is 0"));
        assert!(bad(rrf(&[0, 1], &[1], &[1.0], -1.0, 1)).contains("k is -1"));
        assert!(bad(rrf(&[0, 1], &[1], &[1.0], f64::NAN, 1)).contains("k is NaN"));
        assert!(bad(rrf(&[0, 1], &[1], &[1.0], f64::INFINITY, 1)).contains("k is inf"));
    }
}
