//! Boundary-rank splitting of closed history into episodes (spec: "Episodes").
//!
//! "Closed history is cut into episodes ... The pieces it is cut from are whole units ... Those
//! scores are used only as an order: a stretch longer than an episode may be is split at its
//! best-ranked boundary that leaves both sides big enough, and again, until every episode fits.
//! Sizes decide how many cuts; the judgment decides where."
//!
//! The rule, exactly ([`split`]): a stretch `[a, b)` of units whose total size is at most `max`,
//! or that is a single unit, is one episode. Any other stretch is cut at the boundary `c` in
//! `(a, b)` with the highest score among those that leave `sum(a..c) >= min` and
//! `sum(c..b) >= min`; ties go to the smallest `c`, so only the order of the scores matters. When
//! no boundary leaves both sides big enough, the cut goes where the smaller side is largest
//! (ties: highest score, then smallest `c`). Both sides are then split the same way.
//!
//! One observation makes both cases a single query: with `L(c) = sum(a..c)` rising and
//! `R(c) = sum(c..b)` falling in `c`, the boundaries with `L >= t` and `R >= t` form an interval,
//! found by searching the prefix sums. If `best` is the largest `min(L, R)` any boundary reaches,
//! the fallback's candidates are exactly the interval for `t = best`. So the cut is always the
//! best-ranked boundary of one interval, found by a range-maximum query.
//!
//! Design log. Workload: log-normal unit sizes around 150 tokens, uniform random scores, min 400,
//! max 4000 (about one cut per 10.6 units); a scratch Rust harness, best of 40-200 calls, on a
//! shared 2-core machine where runs vary by 10-30%. Whole-call numbers through Python are in
//! `benches/RESULTS-split.md`. Figures are ns per unit at 100k units unless marked 1M.
//!
//! - A plain iterative segment tree of boundary indices over all n - 1 boundaries: 20 (1M: 26).
//!   Its build alone was 6: every node compares two random scores, a branch the CPU mispredicts
//!   half the time. The splits took another 13.
//! - Blocks of `BLOCK` boundaries, the segment tree only over each block's best boundary, and the
//!   partial blocks at the ends of a query scanned (a max in four independent lanes, which the
//!   compiler vectorises, then the first index equal to it): 8.2-8.9 for blocks of 32 to 128,
//!   10.1 for 16. A one-pass argmax keeping an index per lane measured 5-10% slower.
//! - Kept: the blocks, plus for every boundary the offset of the best boundary from its block's
//!   start up to it and from it to its block's end (one byte each, built with conditional moves),
//!   so a query that spans blocks is two lookups and a tree query over whole blocks; only a query
//!   inside one block scans (at most `BLOCK` scores): 7.3-7.9 (1M: 10.5-10.9). Blocks of 32,
//!   64 and 128 are within noise of each other; 64 is kept.
//! - Tree nodes carry their score next to their index (`Ranked`), so comparing nodes reads the
//!   small tree instead of two random places in `scores`: 1M 10.9 -> 9.0 (the profile had a
//!   fifth of the time on those loads); no change at 100k, where everything is in cache.
//! - Prefix sums in `u32` when the total fits (a million 150-token units total ~2e8), else `u64`:
//!   half the bytes for the searches and the fits checks to miss on: 100k 7.9 -> 7.05, 1M
//!   9.0-10.5 -> 8.1-9.3. What remains at 1M is mostly the data-dependent branches of the
//!   "does this half fit?" test and cache misses at cut positions.
//! - Validation tests scores for NaN in chunks of `NAN_CHECK_CHUNK` with no early exit inside a
//!   chunk, which vectorises: 0.34 -> 0.11 ms at 1M, a whole-call 1M of 7.6-7.9 and 100k of 6.9.
//! - A sparse table was not built: O(n log n) entries is 80 MB at a million units, and here a
//!   fresh page costs about a microsecond to fault in, so its memory alone would cost more than
//!   the whole call. The same effect moves whole-call numbers by up to 30% with the allocator's
//!   choice between fresh and reused pages; the structures are kept small for that reason.
//! - The driver keeps only the right halves still to split on an explicit stack (no recursion, so
//!   depth is not limited by the thread's stack) and never pushes a half that already fits: 2%.
//! - The interval ends sit a few units inside the stretch (min is a few units' worth), so they
//!   are found by galloping from each end, O(log distance), rather than by binary search over the
//!   whole stretch.
//! - Scores are compared as `f64` (NaN is rejected up front), so -0.0 and 0.0 tie, as they do in
//!   the Python twin.

use crate::CoreError;

/// Boundaries per block of the range-maximum structure. One byte holds an offset inside a block,
/// so it must stay at most 256; 64 measured best (see the design log).
const BLOCK: usize = 64;

/// Scores tested for NaN per step of the validation (see `validate_split`).
const NAN_CHECK_CHUNK: usize = 256;

/// The sorted cut positions that split `sizes` into episodes: each is the index of the unit a new
/// episode starts at (0 is never included). `scores[j]` ranks the boundary between units `j` and
/// `j + 1`; higher is a better place to cut. See the module documentation for the exact rule.
///
/// Errors: `scores` not one shorter than `sizes` (or not empty when `sizes` is), a NaN score,
/// `min == 0` or `min > max`, a total size beyond `u64`, or more than `u32::MAX` boundaries.
pub fn split(sizes: &[u64], scores: &[f64], min: u64, max: u64) -> Result<Vec<usize>, CoreError> {
    split_sized(sizes, |_, s| Ok(s), scores, min, max)
}

/// [`split`] for sizes that arrive as signed integers (numpy's int64): a negative size is an
/// error naming its index, and no unsigned copy of the sizes is made.
pub fn split_i64(
    sizes: &[i64],
    scores: &[f64],
    min: u64,
    max: u64,
) -> Result<Vec<usize>, CoreError> {
    let size = |j: usize, s: i64| {
        u64::try_from(s).map_err(|_| {
            CoreError::InvalidArgument(format!(
                "sizes[{j}] is {s}; unit sizes are token counts and must be >= 0"
            ))
        })
    };
    split_sized(sizes, size, scores, min, max)
}

/// Validates, then splits on prefix sums as narrow as the total allows: `u32` when it fits (the
/// usual case; half the memory traffic), `u64` otherwise.
fn split_sized<S: Copy>(
    sizes: &[S],
    size: impl Fn(usize, S) -> Result<u64, CoreError>,
    scores: &[f64],
    min: u64,
    max: u64,
) -> Result<Vec<usize>, CoreError> {
    validate_split(sizes.len(), scores, min, max)?;
    if let Some(prefix) = prefix_sums::<S, u32>(sizes, &size)? {
        return split_prefix(&prefix, scores, min, max);
    }
    // `prefix_sums` reports a total beyond u64 as an error, so None cannot come back here.
    let prefix = prefix_sums::<S, u64>(sizes, &size)?.ok_or_else(|| {
        CoreError::InvalidArgument("the unit sizes add up to more than u64 can hold".into())
    })?;
    split_prefix(&prefix, scores, min, max)
}

/// The checks of [`split`] and [`split_i64`] on `n` units: one score per boundary, no NaN score,
/// and `0 < min <= max`. Each size is checked (and the total for overflow) as the prefix sums are
/// taken, in the same pass.
fn validate_split(n: usize, scores: &[f64], min: u64, max: u64) -> Result<(), CoreError> {
    let expected = n.saturating_sub(1);
    if scores.len() != expected {
        return Err(CoreError::InvalidArgument(format!(
            "scores has {} entries but {n} units have {expected} boundaries; scores must be one \
             shorter than sizes (empty for zero units)",
            scores.len()
        )));
    }
    // Whole chunks are tested without an early exit, which the compiler vectorises; a plain
    // `position` tests one score per iteration.
    let nan_chunk = scores
        .chunks(NAN_CHECK_CHUNK)
        .position(|c| c.iter().fold(false, |nan, s| nan | s.is_nan()));
    if let Some(j) = nan_chunk.map(|k| {
        let start = k * NAN_CHECK_CHUNK;
        start + scores[start..].iter().position(|s| s.is_nan()).unwrap_or(0)
    }) {
        return Err(CoreError::InvalidArgument(format!(
            "scores[{j}] is NaN; boundary scores must be comparable numbers"
        )));
    }
    if min == 0 || min > max {
        return Err(CoreError::InvalidArgument(format!(
            "min_size {min} and max_size {max} must satisfy 0 < min_size <= max_size"
        )));
    }
    Ok(())
}

/// `prefix[i]` = total size of units `0..i`; `n + 1` entries, or None when the total does not
/// fit in `P`. `size` checks and converts one size given its index.
fn prefix_sums<S: Copy, P: TryFrom<u64>>(
    sizes: &[S],
    size: impl Fn(usize, S) -> Result<u64, CoreError>,
) -> Result<Option<Vec<P>>, CoreError> {
    let mut prefix = Vec::with_capacity(sizes.len() + 1);
    let mut total = 0u64;
    let Ok(zero) = P::try_from(0) else { return Ok(None) };
    prefix.push(zero);
    for (j, &s) in sizes.iter().enumerate() {
        total = total.checked_add(size(j, s)?).ok_or_else(|| {
            CoreError::InvalidArgument(format!(
                "the unit sizes add up to more than {}; sizes are token counts",
                u64::MAX
            ))
        })?;
        let Ok(p) = P::try_from(total) else { return Ok(None) };
        prefix.push(p);
    }
    Ok(Some(prefix))
}

fn split_prefix<P: Prefix>(
    prefix: &[P],
    scores: &[f64],
    min: u64,
    max: u64,
) -> Result<Vec<usize>, CoreError> {
    let n = prefix.len() - 1;
    let fits = |a: usize, b: usize| b - a < 2 || at(prefix, b) - at(prefix, a) <= max;
    if fits(0, n) {
        return Ok(Vec::new());
    }
    let ranks = BoundaryRanks::new(scores)?;
    // Typical episodes hold a few dozen units; this avoids most regrowth.
    let mut cuts = Vec::with_capacity(n / 16);
    // Right halves still to split. A right half's own cut is emitted when it is resumed, after
    // every cut of its left half, so the cuts come out sorted.
    let mut waiting: Vec<(usize, usize)> = Vec::new();
    let (mut a, mut b) = (0, n);
    loop {
        let c = best_cut(prefix, &ranks, a, b, min);
        if !fits(a, c) {
            waiting.push((c, b));
            b = c;
            continue;
        }
        cuts.push(c);
        if !fits(c, b) {
            a = c;
            continue;
        }
        loop {
            let Some((wa, wb)) = waiting.pop() else {
                return Ok(cuts);
            };
            cuts.push(wa);
            if !fits(wa, wb) {
                (a, b) = (wa, wb);
                break;
            }
        }
    }
}

/// A prefix-sum entry: `u32` or `u64`, read as `u64`.
trait Prefix: Copy + Into<u64> {}
impl Prefix for u32 {}
impl Prefix for u64 {}

#[inline]
fn at<P: Prefix>(prefix: &[P], i: usize) -> u64 {
    prefix[i].into()
}

/// The cut for a stretch `[a, b)` of at least two units that does not fit.
fn best_cut<P: Prefix>(
    prefix: &[P],
    ranks: &BoundaryRanks<'_>,
    a: usize,
    b: usize,
    min: u64,
) -> usize {
    let (lo, hi) = interval(prefix, a, b, min).unwrap_or_else(|| {
        let best = best_smaller_side(prefix, a, b);
        // Some boundary reaches `best`, so this interval is never empty; the fallback keeps the
        // core panic-free regardless.
        interval(prefix, a, b, best).unwrap_or((a + 1, b - 1))
    });
    // Boundary j sits before unit j + 1.
    ranks.best(lo - 1, hi - 1) + 1
}

/// The boundaries `c` in `(a, b)` with `sum(a..c) >= t` and `sum(c..b) >= t`, as an inclusive
/// interval, or None when there are none.
fn interval<P: Prefix>(prefix: &[P], a: usize, b: usize, t: u64) -> Option<(usize, usize)> {
    let (pa, pb) = (at(prefix, a), at(prefix, b));
    let lo = gallop_up(prefix, a + 1, b, |p| p - pa >= t);
    let hi = gallop_down(prefix, a, b - 1, |p| pb - p >= t);
    (lo <= hi).then_some((lo, hi))
}

/// The largest `min(sum(a..c), sum(c..b))` over boundaries `c` in `(a, b)`. The left side rises
/// and the right falls, so the optimum is at the first c where left >= right or just before it.
fn best_smaller_side<P: Prefix>(prefix: &[P], a: usize, b: usize) -> u64 {
    let (pa, pb) = (at(prefix, a), at(prefix, b));
    let m = a + 1 + prefix[a + 1..b].partition_point(|&p| p.into() - pa < pb - p.into());
    let smaller = |c: usize| (at(prefix, c) - pa).min(pb - at(prefix, c));
    let mut best = 0;
    if m < b {
        best = smaller(m);
    }
    if m > a + 1 {
        best = best.max(smaller(m - 1));
    }
    best
}

/// The first index `i` in `[from, to)` where `pred(prefix[i])` holds, for a predicate that is
/// false then true; `to` when it never holds. Gallops up from `from`, then binary-searches.
fn gallop_up<P: Prefix>(prefix: &[P], from: usize, to: usize, pred: impl Fn(u64) -> bool) -> usize {
    let mut step = 1;
    let mut lo = from;
    while lo < to {
        let probe = (lo + step - 1).min(to - 1);
        if pred(at(prefix, probe)) {
            return lo + prefix[lo..probe].partition_point(|&p| !pred(p.into()));
        }
        lo = probe + 1;
        step *= 2;
    }
    to
}

/// The last index `i` in `(above, from]` where `pred(prefix[i])` holds, for a predicate that is
/// true then false; `above` when it never holds. Gallops down from `from`.
fn gallop_down<P: Prefix>(
    prefix: &[P],
    above: usize,
    from: usize,
    pred: impl Fn(u64) -> bool,
) -> usize {
    let mut step = 1;
    let mut hi = from;
    while hi > above {
        let probe = hi.saturating_sub(step - 1).max(above + 1);
        if pred(at(prefix, probe)) {
            return probe + prefix[probe + 1..=hi].partition_point(|&p| pred(p.into()));
        }
        hi = probe - 1;
        step *= 2;
    }
    above
}

/// A boundary and its score, ordered by rank: higher score first, ties to the earlier boundary.
/// The tree holds the score next to the index so that comparing two nodes reads the tree's own
/// (small, cached) memory rather than two random places in `scores`.
#[derive(Clone, Copy)]
struct Ranked {
    score: f64,
    index: u32,
}

impl Ranked {
    fn at(scores: &[f64], index: usize) -> Ranked {
        Ranked { score: scores[index], index: index as u32 }
    }

    #[inline]
    fn above(self, other: Ranked) -> bool {
        self.score > other.score || (self.score == other.score && self.index < other.index)
    }
}

/// Lanes of the vectorised maximum: independent running maxima the compiler keeps in registers.
const MAX_LANES: usize = 4;

/// The highest score of a non-empty slice, without a data-dependent branch.
#[inline]
fn max_score(s: &[f64]) -> f64 {
    let mut lanes = [f64::NEG_INFINITY; MAX_LANES];
    let mut chunks = s.chunks_exact(MAX_LANES);
    for c in &mut chunks {
        for (lane, &x) in lanes.iter_mut().zip(c) {
            *lane = if x > *lane { x } else { *lane };
        }
    }
    let mut m = lanes[0];
    for &x in lanes[1..].iter().chain(chunks.remainder()) {
        m = if x > m { x } else { m };
    }
    m
}

/// The first index of the highest score in `lo..=hi`.
#[inline]
fn scan_best(scores: &[f64], lo: usize, hi: usize) -> usize {
    let part = &scores[lo..=hi];
    let m = max_score(part);
    lo + part.iter().position(|&x| x == m).unwrap_or(0)
}

/// Range maximum over boundaries by `(score, -index)`. Boundaries are grouped in blocks of
/// [`BLOCK`]; an iterative bottom-up segment tree holds each block's best boundary (leaves at
/// `blocks..2 blocks`; the order is total, so combining is commutative and any number of blocks
/// works without padding). Inside a block, `from_block_start[j]` is the offset of the best
/// boundary from the block's start to `j`, and `to_block_end[j]` from `j` to the block's end.
struct BoundaryRanks<'s> {
    scores: &'s [f64],
    blocks: usize,
    tree: Vec<Ranked>,
    from_block_start: Vec<u8>,
    to_block_end: Vec<u8>,
}

impl<'s> BoundaryRanks<'s> {
    fn new(scores: &'s [f64]) -> Result<Self, CoreError> {
        let len = scores.len();
        if u32::try_from(len).is_err() {
            return Err(CoreError::InvalidArgument(format!(
                "{len} boundaries is more than the {} a conversation may have",
                u32::MAX
            )));
        }
        let blocks = len.div_ceil(BLOCK);
        let mut tree = vec![Ranked { score: 0.0, index: 0 }; 2 * blocks];
        let mut from_block_start = vec![0u8; len];
        let mut to_block_end = vec![0u8; len];
        for (k, ((block, starts), ends)) in scores
            .chunks(BLOCK)
            .zip(from_block_start.chunks_mut(BLOCK))
            .zip(to_block_end.chunks_mut(BLOCK))
            .enumerate()
        {
            // Conditional moves, not branches: random scores would mispredict half of them.
            let (mut bv, mut bi) = (block[0], 0);
            for (j, (&x, slot)) in block.iter().zip(starts.iter_mut()).enumerate() {
                let better = x > bv;
                bv = if better { x } else { bv };
                bi = if better { j } else { bi };
                *slot = bi as u8;
            }
            tree[blocks + k] = Ranked::at(scores, k * BLOCK + bi);
            let last = block.len() - 1;
            let (mut bv, mut bi) = (block[last], last);
            for (j, (&x, slot)) in block.iter().zip(ends.iter_mut()).enumerate().rev() {
                // `>=`: walking backwards, an equal score is earlier and wins the tie.
                let better = x >= bv;
                bv = if better { x } else { bv };
                bi = if better { j } else { bi };
                *slot = bi as u8;
            }
        }
        for i in (1..blocks).rev() {
            let (l, r) = (tree[2 * i], tree[2 * i + 1]);
            tree[i] = if r.above(l) { r } else { l };
        }
        Ok(BoundaryRanks { scores, blocks, tree, from_block_start, to_block_end })
    }

    /// The best-ranked boundary in `lo..=hi` (requires `lo <= hi < len`).
    fn best(&self, lo: usize, hi: usize) -> usize {
        let s = self.scores;
        let (first, last) = (lo / BLOCK, hi / BLOCK);
        if first == last {
            return scan_best(s, lo, hi);
        }
        let mut best = Ranked::at(s, first * BLOCK + usize::from(self.to_block_end[lo]));
        if last > first + 1 {
            let middle = self.best_of_blocks(first + 1, last - 1);
            if middle.above(best) {
                best = middle;
            }
        }
        let right = Ranked::at(s, last * BLOCK + usize::from(self.from_block_start[hi]));
        if right.above(best) {
            best = right;
        }
        best.index as usize
    }

    /// The best-ranked boundary of whole blocks `lo..=hi`.
    fn best_of_blocks(&self, lo: usize, hi: usize) -> Ranked {
        let (mut l, mut r) = (lo + self.blocks, hi + self.blocks + 1);
        let mut best = self.tree[l];
        while l < r {
            if l & 1 == 1 {
                if self.tree[l].above(best) {
                    best = self.tree[l];
                }
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                if self.tree[r].above(best) {
                    best = self.tree[r];
                }
            }
            l /= 2;
            r /= 2;
        }
        best
    }
}

/// The slow, obvious twin of [`split`], for tests: recursion, and every boundary of every
/// stretch summed and compared by hand. Not for production use (quadratic).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn split_naive(
    sizes: &[u64],
    scores: &[f64],
    min: u64,
    max: u64,
) -> Result<Vec<usize>, CoreError> {
    validate_split(sizes.len(), scores, min, max)?;
    let total = |a: usize, b: usize| -> u128 { sizes[a..b].iter().map(|&s| u128::from(s)).sum() };
    if total(0, sizes.len()) > u128::from(u64::MAX) {
        return Err(CoreError::InvalidArgument("total size overflows".into()));
    }
    fn go(
        a: usize,
        b: usize,
        scores: &[f64],
        min: u128,
        max: u128,
        total: &dyn Fn(usize, usize) -> u128,
        cuts: &mut Vec<usize>,
    ) {
        if b - a < 2 || total(a, b) <= max {
            return;
        }
        // (c, smaller side) for every boundary of the stretch.
        let all: Vec<(usize, u128)> =
            (a + 1..b).map(|c| (c, total(a, c).min(total(c, b)))).collect();
        let allowed: Vec<usize> = if all.iter().any(|&(_, s)| s >= min) {
            all.iter().filter(|&&(_, s)| s >= min).map(|&(c, _)| c).collect()
        } else {
            let most = all.iter().map(|&(_, s)| s).max().unwrap_or(0);
            all.iter().filter(|&&(_, s)| s == most).map(|&(c, _)| c).collect()
        };
        let mut cut = allowed[0];
        for &c in &allowed[1..] {
            if scores[c - 1] > scores[cut - 1] {
                cut = c;
            }
        }
        go(a, cut, scores, min, max, total, cuts);
        cuts.push(cut);
        go(cut, b, scores, min, max, total, cuts);
    }
    let mut cuts = Vec::new();
    go(0, sizes.len(), scores, u128::from(min), u128::from(max), &total, &mut cuts);
    Ok(cuts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(sizes: &[u64], scores: &[f64], min: u64, max: u64) -> Vec<usize> {
        let fast = split(sizes, scores, min, max).expect("valid input");
        let naive = split_naive(sizes, scores, min, max).expect("valid input");
        assert_eq!(fast, naive, "sizes {sizes:?} scores {scores:?} min {min} max {max}");
        fast
    }

    #[test]
    fn table() {
        // (sizes, scores, min, max, expected cuts)
        type Case = (&'static [u64], &'static [f64], u64, u64, &'static [usize]);
        let cases: &[Case] = &[
            // empty conversation
            (&[], &[], 1, 10, &[]),
            // one unit, even an oversized one
            (&[5], &[], 1, 10, &[]),
            (&[50], &[], 1, 10, &[]),
            // everything fits in one episode
            (&[3, 3, 3], &[0.0, 9.0], 1, 10, &[]),
            // exactly max fits
            (&[5, 5], &[0.0], 1, 10, &[]),
            // cut at the best-ranked boundary
            (&[4, 4, 4, 4], &[0.1, 0.9, 0.5], 1, 10, &[2]),
            (&[4, 4, 4, 4], &[0.9, 0.1, 0.5], 1, 10, &[1, 3]),
            // an oversized unit ends up alone
            (&[2, 30, 2], &[0.0, 0.0], 1, 10, &[1, 2]),
            // ties go to the earliest boundary
            (&[4, 4, 4, 4], &[0.5, 0.5, 0.5], 1, 10, &[1, 2]),
            // min rules out the best boundary at the edge
            (&[4, 4, 4, 4], &[0.9, 0.1, 0.5], 5, 10, &[2]),
            // fallback: no boundary leaves both sides >= min; the smaller side is largest at 2
            (&[4, 4, 4, 4], &[0.9, 0.1, 0.8], 9, 10, &[2]),
            // fallback tie on the smaller side: highest score wins
            (&[4, 0, 4], &[0.1, 0.2], 6, 6, &[2]),
            // fallback tie on both: earliest boundary
            (&[4, 0, 4], &[0.2, 0.2], 6, 6, &[1]),
            // zero-size units: every smaller side is 0, so the fallback cuts by score alone
            (&[0, 0, 11, 0], &[0.3, 0.2, 0.1], 1, 10, &[1, 2, 3]),
            (&[1, 0, 11, 1], &[0.3, 0.2, 0.1], 1, 10, &[1, 2, 3]),
            // infinite scores are ordinary numbers
            (&[6, 6, 6], &[f64::NEG_INFINITY, f64::INFINITY], 1, 10, &[1, 2]),
            // totals beyond u32 take the u64 prefix sums
            (
                &[3_000_000_000, 3_000_000_000, 3_000_000_000],
                &[0.0, 1.0],
                1,
                4_000_000_000,
                &[1, 2],
            ),
            (&[3_000_000_000, 1, 3_000_000_000], &[0.0, 1.0], 1, 6_000_000_000, &[2]),
            // -0.0 and 0.0 are the same score
            (&[6, 6, 6], &[0.0, -0.0], 1, 12, &[1]),
        ];
        for &(sizes, scores, min, max, want) in cases {
            assert_eq!(both(sizes, scores, min, max), want, "sizes {sizes:?} scores {scores:?}");
        }
    }

    #[test]
    fn long_stretches_use_the_blocks_and_the_tree() {
        // Queries inside one block, across two, and across many; scores with many ties.
        for (len, min, max) in [(200, 30, 300), (1000, 10, 2000), (3000, 500, 9000), (3000, 1, 10)]
        {
            let sizes: Vec<u64> = (0..len).map(|j| (j * 7 % 13) as u64).collect();
            let scores: Vec<f64> = (0..len - 1).map(|j| ((j * 37) % 101) as f64).collect();
            let cuts = both(&sizes, &scores, min, max);
            assert!(cuts.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn ranks_match_a_scan_on_every_range() {
        let scores: Vec<f64> = (0..300).map(|j| ((j * 53) % 17) as f64).collect();
        let ranks = BoundaryRanks::new(&scores).expect("small");
        for lo in 0..scores.len() {
            for hi in lo..scores.len() {
                let mut want = lo;
                for j in lo..=hi {
                    if scores[j] > scores[want] {
                        want = j;
                    }
                }
                assert_eq!(ranks.best(lo, hi), want, "range {lo}..={hi}");
            }
        }
    }

    #[test]
    fn signed_sizes() {
        let sizes = [4i64, 4, 4, 4];
        assert_eq!(split_i64(&sizes, &[0.9, 0.1, 0.5], 1, 10), Ok(vec![1, 3]));
        match split_i64(&[3, -2, 5], &[0.0, 0.0], 1, 10) {
            Err(CoreError::InvalidArgument(msg)) => {
                assert!(msg.contains("sizes[1] is -2"), "{msg}")
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn errors() {
        let bad = |r: Result<Vec<usize>, CoreError>| match r {
            Err(CoreError::InvalidArgument(msg)) => msg,
            other => panic!("expected InvalidArgument, got {other:?}"),
        };
        assert!(bad(split(&[1, 2], &[], 1, 10)).contains("one shorter"));
        assert!(bad(split(&[], &[0.5], 1, 10)).contains("one shorter"));
        assert!(bad(split(&[1, 2, 3], &[0.0, f64::NAN], 1, 10)).contains("scores[1] is NaN"));
        let mut long = vec![0.0; 999];
        long[700] = f64::NAN;
        long[900] = f64::NAN;
        assert!(bad(split(&[1; 1000], &long, 1, 10)).contains("scores[700] is NaN"));
        assert!(bad(split(&[1], &[], 0, 10)).contains("0 < min_size"));
        assert!(bad(split(&[1], &[], 11, 10)).contains("min_size <= max_size"));
        assert!(bad(split(&[u64::MAX, 1], &[0.0], 1, 10)).contains("add up to more"));
    }
}
