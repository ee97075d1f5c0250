//! The fade: which episodes leave the view, in what order (spec: "Forgetting").
//!
//! "A fade takes episodes in order of activation, least active first, until the projected view
//! reaches the landing ... One order serves both, and the room decides how many."
//!
//! [`fade_order`] is that order: episodes by activation ascending, ties by a caller's key (the
//! episode number), then by position, so the order is total and the same on every run.
//! [`fade_pick`] is how many of the order the room asks for: the fewest whose sizes bring the
//! projected view down to the landing, or all of them when even that does not. [`fade`] is both.
//! [`fade_order_first`] is the order's first episodes alone: a fade stops at the landing, so it
//! rarely needs more than a short prefix, and the rest need not be ordered at all.
//!
//! Design log. Workload: activations spread over a few decades (log-normal, sigma 2, and a
//! 1/sqrt-of-age decay), ties by episode number in index order; a scratch Rust harness, best of
//! 10-50 calls, on a shared 2-core machine where runs vary by 10-30%. Figures are ns per episode
//! at 10^5 (10^6 in brackets). numpy's `argsort` is 50 (74) here, `lexsort` with the tie key 95
//! (124); whole calls through Python are in `benches/RESULTS-activation.md`.
//!
//! - `sort_unstable` on `(key, tie, index)`: 27 (35). A comparison sort pays a mispredicted
//!   branch for about every other comparison, log2(n) times per element.
//! - LSD radix sort on the 64-bit key (8 passes of 8 bits, then ties): 15 (19). Each pass is
//!   cheap, but there are eight.
//! - One MSD pass into about n buckets by the top bits of the key range, then insertion sort
//!   inside buckets: 11 (19). The scatter into n buckets is a cache miss per element, and on this
//!   machine a miss is dear.
//! - Kept: an LSD radix sort of 64-bit words that pack the activation rounded to f32 (as a
//!   32-bit order-preserving key, minus the smallest, so only the bits that vary are sorted) above
//!   the index. Rounding is monotone, so the words come out in activation order except inside
//!   runs of equal f32 keys, which a final pass finds and orders by the full `(activation, tie,
//!   index)`. Activations a few decades apart need 28-30 bits: three passes of at most
//!   `MAX_DIGIT_BITS`, each a sequential read and a scatter into 2^10 streams that stay in cache.
//!   Runs of equal f32 keys are rare for real activations (one in 10^7 apart); when ties are many
//!   (equal activations), the stable passes leave them in index order, which is already right when
//!   `tie` rises with the index (the usual case), so the check is all they cost. 11-bit digits
//!   measured 8.2 (10.3), 8-bit 9.7 (12.2), 16-bit 7.1 (11.5); counting all histograms in one
//!   loop without an inner loop over passes took 12.3 to 11.0 (15.8 to 14.1).
//! - What remains is a third page faults: the words and the scratch they are scattered into are
//!   fresh memory on every call (glibc returns large blocks to the system when they are freed), and
//!   a first touch of a page costs about a microsecond here. Through Python, whose allocations
//!   differ, the same call measured 5.9 (9.9). An MSD pass into the scratch followed by LSD passes
//!   inside each (cache-sized) bucket would halve the passes over fresh memory; not tried yet.
//! - Kept: the two buffers of words live in a thread-local scratch between calls, so that only
//!   the returned order is fresh memory, and the passes run in pulp's dispatched code (AVX-512 or
//!   AVX2 where the CPU has them; the order is the same, tested). In a process whose allocator
//!   hands out fresh pages (the harness run alone): 10.4 (17.2) -> 5.8 (10). Dispatch alone
//!   changes little: histograms and scatters do not vectorise.
//! - What remains at 10^6 is memory traffic, about 100 MB a call (build, count, three scatters,
//!   runs, extraction over 8-byte words that no longer fit in L2), and the faults on the output.
//!   Two ns per episode needs a different shape: one MSD pass into cache-sized buckets, then the
//!   remaining digits inside each bucket in L2, and the output written by numpy's allocator (which
//!   asks for huge pages); not tried yet.
//!
//! The prefix (`fade_order_first`, and `fade`, which stops once the sizes reach the landing).
//! Same workload, prefixes of a hundredth, a tenth and a half, ns per episode of the whole input
//! at 10^5 (10^6); the whole order measured 5.7 (7.9) in the same runs.
//!
//! - An exact histogram of the keys (2^11 buckets over their range, in L1) picks the buckets the
//!   prefix needs, one pass keeps their episodes' words, and only those are sorted: 1.7, 2.2, 4.2
//!   (1.7, 2.2, 4.9). The passes: min and max 0.14, keys 0.29, histogram 0.34, keeping 0.8-0.9,
//!   then 4.4 per kept word for the sort. Keeping was 2.0 with a branch per key at a tenth and 6.2
//!   at a half; written branch-free (every word goes to the next free slot, which advances only
//!   for a kept one) it is 0.75 whatever the share. Skipping whole chunks of 16 keys that hold
//!   none takes a hundredth from 1.7 to 1.3. Keeping chunk by chunk through a bit mask and its
//!   trailing zeros: 0.65 at 10^5, 1.1 at 10^6 (the loop's exits mispredict once the predictor
//!   cannot learn them).
//! - Kept: the bound from an evenly spaced sample of 2048 keys (its own histogram, 5 µs), set
//!   four standard deviations of the sample's share past the prefix, and one pass over the
//!   activations that computes the keys a chunk at a time and keeps the words below the bound:
//!   0.8, 1.8, 4.3 (0.7, 1.8, 5.1). The margin keeps about a quarter more than a tenth needs. A
//!   sample can be fooled (an input whose sampled episodes are all low); the sorted candidates
//!   then fall short of the prefix, and the exact histogram runs instead. Below `SAMPLED_MIN`
//!   episodes the exact histogram runs at once.
//! - Kept: from `SPLIT_MIN` episodes that pass runs in two halves on two threads, the second
//!   half's words appended to the first's (index order holds): at 10^6, 0.67 -> 0.53 for a
//!   hundredth, 1.78 -> 1.39 for a tenth.
//! - `fade` reads the sizes of the kept episodes in activation order, a random access each:
//!   at a tenth of the tokens 2.1 (2.1).
//! - Through Python (`benches/RESULTS-activation.md`) a tenth measured 1.8 (1.6) and a hundredth
//!   0.8 (0.6), against 16 (18) and 10 (10) for numpy's argpartition and argsort of the part.
//! - Where a tenth's 1.78 went at 10^5: the sample and the keeping pass 1.0, the sort of its
//!   12,800 candidates 0.56 (three passes over 26 bits of key), the runs 0.08.
//! - Kept: where the CPU has AVX-512, the keeping pass packs eight words in a register, moves the
//!   kept ones to its front (`vpcompressq`, through pulp's safe intrinsics) and stores all eight
//!   at the next free slot: the same words, one store per eight episodes. A tenth 1.78 -> 1.19
//!   (1.87 -> 1.11), a hundredth 0.74 -> 0.55 (0.52 -> 0.49). The pass then takes about 0.35 an
//!   episode, so two threads pay for themselves only from `SPLIT_MIN_COMPRESS` episodes; at 10^6
//!   one thread also spares the VM's bimodal second core (1.04-1.56 on two).
//! - Kept: up to `FEW_WORDS` candidates are sorted on their key's top 22 bits (two passes), and
//!   the runs that leaves tied are ordered by the full key as runs of equal f32 keys were: a
//!   tenth 1.19 -> 1.07, a half 3.6 -> 3.2, the whole order at 10^5 5.7 -> 5.2. At 10^6 words
//!   the whole order went 7.9 -> 17.9 (a run per few words, each a random read of the
//!   activations), hence the bound.

use std::cell::RefCell;
use std::cmp::Ordering;

use crate::parallel;
use crate::simd::{run, Isa};
use crate::CoreError;

/// The widest radix digit: 2^11 counters of 4 bytes per pass stay in L1.
const MAX_DIGIT_BITS: u32 = 11;

/// Runs of equal f32 keys up to this long are ordered by insertion, longer ones by a sort.
const INSERTION_RUN: usize = 32;

/// The episodes' indices, least active first: by activation ascending, then `tie` ascending, then
/// index. -0.0 and 0.0 are the same activation. Errors: `tie` of a different length, or a NaN
/// activation.
pub fn fade_order(activation: &[f64], tie: &[i64]) -> Result<Vec<usize>, CoreError> {
    validate_fade_order(activation, tie)?;
    Ok(order_validated(Isa::Detected, activation, tie))
}

/// [`fade_order`] compiled for `isa`: the tests check that every path gives the same order.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn fade_order_on(isa: Isa, activation: &[f64], tie: &[i64]) -> Result<Vec<usize>, CoreError> {
    validate_fade_order(activation, tie)?;
    Ok(order_validated(isa, activation, tie))
}

/// The whole order on input that passed [`validate_fade_order`].
fn order_validated(isa: Isa, activation: &[f64], tie: &[i64]) -> Vec<usize> {
    let n = activation.len();
    if n < 2 {
        return (0..n).collect();
    }
    if u32::try_from(n).is_err() {
        // The packed words hold a 32-bit index; beyond that, the comparison sort.
        return order_by_comparison(activation, tie);
    }
    run(isa, RadixOrder { isa, activation, tie, until: Until::All })
}

/// The first `limit` episodes of [`fade_order`] (all of them when `limit` reaches their number),
/// found without ordering the rest: a bound on the keys that the `limit` least active lie below
/// (from a sample, checked, or an exact histogram) keeps the episodes to sort, and only those are
/// sorted. Errors as [`fade_order`].
pub fn fade_order_first(
    activation: &[f64],
    tie: &[i64],
    limit: usize,
) -> Result<Vec<usize>, CoreError> {
    validate_fade_order(activation, tie)?;
    Ok(order_first_validated(Isa::Detected, activation, tie, limit))
}

/// [`fade_order_first`] compiled for `isa`: the tests check that every path gives the same order.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn fade_order_first_on(
    isa: Isa,
    activation: &[f64],
    tie: &[i64],
    limit: usize,
) -> Result<Vec<usize>, CoreError> {
    validate_fade_order(activation, tie)?;
    Ok(order_first_validated(isa, activation, tie, limit))
}

/// The order's first `limit` episodes on input that passed [`validate_fade_order`].
fn order_first_validated(isa: Isa, activation: &[f64], tie: &[i64], limit: usize) -> Vec<usize> {
    let n = activation.len();
    if limit >= n || u32::try_from(n).is_err() {
        let mut order = order_validated(isa, activation, tie);
        order.truncate(limit);
        return order;
    }
    if limit == 0 {
        return Vec::new();
    }
    run(isa, RadixOrder { isa, activation, tie, until: Until::Count(limit) })
}

/// Where a [`RadixOrder`] may stop: never, after a number of episodes, or once their sizes reach
/// `over` tokens (the pick's `view - landing`).
#[derive(Clone, Copy)]
enum Until<'a> {
    All,
    Count(usize),
    Tokens { sizes: &'a [i64], over: u64 },
}

/// The radix order on validated input of at least two and fewer than 2^32 episodes, up to
/// where `until` stops.
struct RadixOrder<'a> {
    isa: Isa,
    activation: &'a [f64],
    tie: &'a [i64],
    until: Until<'a>,
}

impl pulp::WithSimd for RadixOrder<'_> {
    type Output = Vec<usize>;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> Self::Output {
        let RadixOrder { isa, activation, tie, until } = self;
        SCRATCH.with_borrow_mut(|(words, other, keys)| {
            // A sampled bound that falls short of the stop is followed by the exact one.
            let mut sampled = activation.len() >= SAMPLED_MIN;
            loop {
                let top = match until {
                    Until::All => all_words(activation, words),
                    _ if sampled => match sampled_bound(activation, until) {
                        Some(bound) => gather_below(isa, activation, bound, words, other),
                        None => all_words(activation, words),
                    },
                    _ => exact_words(isa, activation, until, keys, words, other),
                };
                let unsorted = radix_sort_high(words, other, 32 - top.leading_zeros());
                order_runs(words, activation, tie, unsorted);
                let index = |&w: &u64| (w & u64::from(u32::MAX)) as usize;
                let reached = match until {
                    Until::All => Some(words.len()),
                    Until::Count(k) => (words.len() >= k).then_some(k),
                    Until::Tokens { sizes, over } => {
                        let mut left = over;
                        words.iter().position(|w| {
                            let size = sizes[index(w)] as u64;
                            let reached = size >= left;
                            left -= size.min(left);
                            reached
                        })
                    }
                    .map(|k| k + 1),
                };
                // Every episode was a candidate: the order is whole, the stop need not be reached.
                let take = match reached {
                    Some(take) => take,
                    None if words.len() == activation.len() => words.len(),
                    None => {
                        sampled = false;
                        continue;
                    }
                };
                let order = words[..take].iter().map(index).collect();
                if words.capacity().max(keys.capacity()) > MAX_KEPT_WORDS {
                    (*words, *other, *keys) = (Vec::new(), Vec::new(), Vec::new());
                }
                return order;
            }
        })
    }
}

/// Every episode's word: (f32 key - smallest key) << 32 | index. Sorting the words sorts by
/// rounded activation and keeps equal ones in index order. Returns the largest key minus the
/// smallest.
#[inline(always)]
fn all_words(activation: &[f64], words: &mut Vec<u64>) -> u32 {
    let (lo, hi) = min_max(activation);
    let (lo, hi) = (f32_key(lo), f32_key(hi));
    words.clear();
    words.extend(
        activation.iter().zip(0u64..).map(|(&a, i)| (u64::from(f32_key(a) - lo) << 32) | i),
    );
    hi - lo
}

/// The words of the episodes a prefix needs, by an exact histogram of every key (see
/// [`select_count`]), kept by [`gather_below`]. Returns what that does.
#[inline(always)]
fn exact_words(
    isa: Isa,
    activation: &[f64],
    until: Until,
    keys: &mut Vec<u32>,
    words: &mut Vec<u64>,
    other: &mut Vec<u64>,
) -> u32 {
    let (lo, hi) = min_max(activation);
    let (lo, hi) = (f32_key(lo), f32_key(hi));
    let range = u64::from(hi - lo);
    let shift = (64 - range.leading_zeros()).saturating_sub(SELECT_BITS);
    keys.clear();
    keys.extend(activation.iter().map(|&a| f32_key(a) - lo));
    let bound = match until {
        Until::Count(k) => select_count(keys, shift, k),
        Until::Tokens { sizes, over } => select_tokens(keys, sizes, shift, over),
        Until::All => range + 1,
    };
    // The histogram's bound is on keys minus the smallest; the pass keeps whole keys.
    gather_below(isa, activation, u64::from(lo).saturating_add(bound), words, other)
}

/// Episodes from which a prefix's bound comes from a sample of `SAMPLE` keys, not from a
/// histogram of them all.
const SAMPLED_MIN: usize = 16 * SAMPLE;

/// Keys in the sample, one every `n / SAMPLE` episodes.
const SAMPLE: usize = 2048;

/// [`SAMPLE`], for the tests' traps (inputs whose sampled episodes mislead the bound).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub const SAMPLED_KEYS: usize = SAMPLE;

/// A bound on the keys that a prefix's episodes most likely lie below (four standard deviations
/// of the sample's share past the stop), from an evenly spaced sample; `None` when that is every
/// key. A bound that proves short is caught when the candidates are sorted.
#[inline(always)]
fn sampled_bound(activation: &[f64], until: Until) -> Option<u64> {
    let stride = activation.len() / SAMPLE;
    let mut sample = [0u32; SAMPLE];
    for (key, &a) in sample.iter_mut().zip(activation.iter().step_by(stride)) {
        *key = f32_key(a);
    }
    let (lo, hi) = sample.iter().fold((u32::MAX, 0), |(lo, hi), &k| (lo.min(k), hi.max(k)));
    let range = u64::from(hi - lo);
    let shift = (64 - range.leading_zeros()).saturating_sub(SELECT_BITS);
    let mut counts = [0u32; 1 << SELECT_BITS];
    let mut tokens = [0u64; 1 << SELECT_BITS];
    for (j, &key) in sample.iter().enumerate() {
        let b = bucket(key - lo, shift);
        counts[b] += 1;
        if let Until::Tokens { sizes, .. } = until {
            tokens[b] = tokens[b].saturating_add(sizes[j * stride] as u64);
        }
    }
    // The sample stands for the episodes at SAMPLE / n of their number and their tokens.
    let n = activation.len() as u128;
    let share = |part: u128, of: u128| part * n >= of * SAMPLE as u128;
    let (mut count, mut sum, mut need) = (0, 0u64, None);
    for (b, (&c, &t)) in (1u64..).zip(counts.iter().zip(&tokens)) {
        count += c as usize;
        sum = sum.saturating_add(t);
        if need.is_none()
            && match until {
                Until::All => true,
                Until::Count(k) => share(count as u128, k as u128),
                Until::Tokens { over, .. } => share(u128::from(sum), u128::from(over)),
            }
        {
            let p = count as f64 / SAMPLE as f64;
            need = Some(count + (4.0 * (SAMPLE as f64 * p * (1.0 - p)).sqrt()) as usize + 2);
        }
        if need.is_some_and(|need| count >= need) {
            return Some(u64::from(lo) + (b << shift));
        }
    }
    None
}

/// The words (as [`all_words`]) of the episodes whose key lies below `bound`, in index order,
/// in one pass over the activations, split in two halves over two threads from
/// `SPLIT_MIN` episodes (`other` holds the second half's words). Returns the largest kept key
/// minus the smallest key.
fn gather_below(
    isa: Isa,
    activation: &[f64],
    bound: u64,
    words: &mut Vec<u64>,
    other: &mut Vec<u64>,
) -> u32 {
    // Every key is below u32::MAX (the largest is +inf's), which pads a last chunk: a bound
    // past it keeps every key and never the padding.
    let bound = bound.min(u64::from(u32::MAX));
    let split_min = if compresses(isa) { SPLIT_MIN_COMPRESS } else { SPLIT_MIN };
    let lo = if activation.len() < split_min || parallel::threads() < 2 {
        keep(isa, Keep { activation, first: 0, bound, words })
    } else {
        let mid = activation.len() / 2 / GATHER_CHUNK * GATHER_CHUNK;
        let (head, tail) = activation.split_at(mid);
        let (lo_head, lo_tail) = std::thread::scope(|scope| {
            let tail = scope
                .spawn(|| keep(isa, Keep { activation: tail, first: mid, bound, words: other }));
            let lo_head = keep(isa, Keep { activation: head, first: 0, bound, words });
            (lo_head, tail.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        });
        words.extend_from_slice(other);
        lo_head.min(lo_tail)
    };
    // The smallest key is below the bound whenever anything is kept.
    let lo = u64::from(lo) << 32;
    let mut top = 0;
    for w in words.iter_mut() {
        *w -= lo;
        top = top.max(*w >> 32);
    }
    top as u32
}

/// Episodes from which [`gather_below`] splits its pass over two threads: where the pass takes
/// a quarter of a millisecond or more on one, five times what starting and joining a thread
/// costs here. Plain loops keep about 1 ns an episode.
const SPLIT_MIN: usize = 1 << 18;
/// The same for AVX-512's compress, which keeps about 0.35 ns an episode.
const SPLIT_MIN_COMPRESS: usize = 1 << 20;

/// One pass of [`gather_below`] over `activation`, whose first episode is number `first`: the
/// words kept, from the start of `words` (left as long as the number kept), and the smallest
/// key seen.
struct Keep<'a> {
    activation: &'a [f64],
    first: usize,
    bound: u64,
    words: &'a mut Vec<u64>,
}

impl pulp::WithSimd for Keep<'_> {
    type Output = u32;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> Self::Output {
        let Keep { activation, first, bound, words } = self;
        let (mut j, mut lo) = (0, u32::MAX);
        let chunks = activation.chunks_exact(GATHER_CHUNK);
        let last = chunks.remainder();
        for (c, chunk) in
            chunks.map(Some).chain([(!last.is_empty()).then_some(last)]).flatten().enumerate()
        {
            let mut keys = [u32::MAX; GATHER_CHUNK];
            if let Ok(chunk) = <&[f64; GATHER_CHUNK]>::try_from(chunk) {
                // A whole chunk in a loop of fixed length, which vectorises.
                for (key, &a) in keys.iter_mut().zip(chunk) {
                    *key = f32_key(a);
                }
            } else {
                for (key, &a) in keys.iter_mut().zip(chunk) {
                    *key = f32_key(a);
                }
            }
            let least = keys.iter().fold(u32::MAX, |m, &k| m.min(k));
            lo = lo.min(least);
            // A chunk with no key to keep (most of them, for a short prefix) is skipped whole.
            if u64::from(least) >= bound {
                continue;
            }
            if words.len() < j + GATHER_CHUNK {
                words.resize((2 * words.len()).max(j + GATHER_CHUNK), 0);
            }
            let slots = &mut words[j..j + GATHER_CHUNK];
            write_kept(&keys, first + c * GATHER_CHUNK, bound, slots, &mut j);
        }
        words.truncate(j);
        lo
    }
}

/// Runs a [`Keep`] pass: with AVX-512's compress where the CPU has it, else as plain loops
/// compiled for `isa`. Both keep the same words.
fn keep(isa: Isa, pass: Keep<'_>) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = compress_simd(isa) {
        return pulp::Simd::vectorize(simd, KeepCompress { simd, pass });
    }
    run(isa, pass)
}

/// Whether [`keep`] uses AVX-512's compress for `isa` on this CPU.
fn compresses(isa: Isa) -> bool {
    #[cfg(target_arch = "x86_64")]
    return compress_simd(isa).is_some();
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// AVX-512, when `isa` lets the CPU's best code run and the CPU has it.
#[cfg(target_arch = "x86_64")]
fn compress_simd(isa: Isa) -> Option<pulp::x86::V4> {
    if isa == Isa::Detected {
        pulp::x86::V4::try_new()
    } else {
        None
    }
}

/// [`Keep`] eight keys at a time: the eight words are packed in one register, the kept ones
/// moved to its front (`vpcompressq`), and the whole register stored at the next free slot,
/// which advances by the number kept; no branch on the data, one store per eight episodes.
#[cfg(target_arch = "x86_64")]
struct KeepCompress<'a> {
    simd: pulp::x86::V4,
    pass: Keep<'a>,
}

#[cfg(target_arch = "x86_64")]
impl pulp::WithSimd for KeepCompress<'_> {
    type Output = u32;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> Self::Output {
        use core::arch::x86_64::{__m256i, __m512i};
        const LANES: usize = 8;
        let KeepCompress { simd, pass: Keep { activation, first, bound, words } } = self;
        let (avx, f) = (simd.avx2, simd.avx512f);
        // Every key is below u32::MAX, so a bound of u32::MAX keeps them all, as in `Keep`.
        let below: __m256i = pulp::cast([bound as u32; LANES]);
        let sign: __m256i = pulp::cast([1u32 << 31; LANES]);
        let zero = f._mm512_setzero_pd();
        let step = f._mm512_set1_epi64(LANES as i64);
        let mut index = f._mm512_add_epi64(
            f._mm512_set1_epi64(first as i64),
            f._mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7),
        );
        let mut least: __m256i = pulp::cast([u32::MAX; LANES]);
        let mut j = 0;
        let (chunks, rest) = pulp::as_arrays::<LANES, f64>(activation);
        for chunk in chunks {
            // `f32_key`, eight at a time: round to f32, flip the sign bit of positives and
            // every bit of negatives.
            let a = f._mm512_add_pd(pulp::cast(*chunk), zero);
            let bits: __m256i = pulp::cast(f._mm512_cvtpd_ps(a));
            let negative = avx._mm256_srai_epi32::<31>(bits);
            let keys = avx._mm256_xor_si256(bits, avx._mm256_or_si256(negative, sign));
            least = avx._mm256_min_epu32(least, keys);
            let kept = f._mm256_cmplt_epu32_mask(keys, below);
            let packed: __m512i =
                f._mm512_or_si512(f._mm512_slli_epi64::<32>(f._mm512_cvtepu32_epi64(keys)), index);
            index = f._mm512_add_epi64(index, step);
            if words.len() < j + LANES {
                words.resize((2 * words.len()).max(j + LANES), 0);
            }
            let slots: &mut [u64; LANES] =
                (&mut words[j..j + LANES]).try_into().expect("eight slots");
            *slots = pulp::cast(f._mm512_maskz_compress_epi64(kept, packed));
            j += kept.count_ones() as usize;
        }
        let least: [u32; LANES] = pulp::cast(least);
        let mut lo = least.iter().fold(u32::MAX, |m, &k| m.min(k));
        words.truncate(j);
        let first = first + chunks.len() * LANES;
        for (&a, i) in rest.iter().zip(first as u64..) {
            let key = f32_key(a);
            lo = lo.min(key);
            if u64::from(key) < bound {
                words.push((u64::from(key) << 32) | i);
            }
        }
        lo
    }
}

/// Writes the words of a chunk's `keys` (the first at index `first`) from the start of `slots`
/// on, each to the next free slot whether or not it is kept, so the loop has no branch on the
/// data (a kept fraction near one half would mispredict every other key); adds the number
/// kept to `j`.
#[inline(always)]
fn write_kept(
    keys: &[u32; GATHER_CHUNK],
    first: usize,
    bound: u64,
    slots: &mut [u64],
    j: &mut usize,
) {
    let mut kept = 0;
    for (&key, i) in keys.iter().zip(first as u64..) {
        // `kept` is at most the key's place in the chunk here: the mask only spares a check.
        slots[kept & (GATHER_CHUNK - 1)] = (u64::from(key) << 32) | i;
        kept += usize::from(u64::from(key) < bound);
    }
    *j += kept;
}

/// Bits of the key histogram that picks a prefix's candidates: 2^11 buckets over the range of
/// keys, whose counters stay in L1.
const SELECT_BITS: u32 = 11;

/// The bucket of `key` (minus the smallest) in the select histogram.
#[inline(always)]
fn bucket(key: u32, shift: u32) -> usize {
    // The mask is a no-op (the range has at most SELECT_BITS bits above `shift`) that lets the
    // compiler drop the bounds check.
    ((key >> shift) as usize) & ((1 << SELECT_BITS) - 1)
}

/// The bound below which the `k` least active keys lie (with the rest of their bucket).
#[inline(always)]
fn select_count(keys: &[u32], shift: u32, k: usize) -> u64 {
    let mut counts = [0u32; 1 << SELECT_BITS];
    for &key in keys {
        counts[bucket(key, shift)] += 1;
    }
    let mut total = 0;
    for (b, &c) in (1u64..).zip(counts.iter()) {
        total += c as usize;
        if total >= k {
            return b << shift;
        }
    }
    u64::MAX
}

/// The bound below which the least active keys whose sizes reach `over` lie (with the rest of
/// their bucket); every key when the sizes never reach `over`.
#[inline(always)]
fn select_tokens(keys: &[u32], sizes: &[i64], shift: u32, over: u64) -> u64 {
    let mut tokens = [0u64; 1 << SELECT_BITS];
    for (&key, &s) in keys.iter().zip(sizes) {
        let b = bucket(key, shift);
        // Sizes are checked >= 0; a sum that saturates has reached any `over`.
        tokens[b] = tokens[b].saturating_add(s as u64);
    }
    let mut sum = 0u64;
    for (b, &t) in (1u64..).zip(tokens.iter()) {
        sum = sum.saturating_add(t);
        if sum >= over {
            return b << shift;
        }
    }
    u64::MAX
}

/// Keys [`gather_below`] tests at once before it looks at them one by one.
const GATHER_CHUNK: usize = 16;

thread_local! {
    /// The radix sort's two buffers of words, kept between calls on a thread: fresh memory costs
    /// a page fault per 4 KiB on first touch, which was a third to a half of a call (see the
    /// design log). Dropped after a call that needed more than `MAX_KEPT_WORDS`.
    static SCRATCH: RefCell<(Vec<u64>, Vec<u64>, Vec<u32>)> =
        const { RefCell::new((Vec::new(), Vec::new(), Vec::new())) };
}

/// The most words a thread keeps in each scratch buffer between calls: 2^21 (16 MiB each), two
/// million episodes, far more than a memory holds.
const MAX_KEPT_WORDS: usize = 1 << 21;

/// How many episodes of `order` a fade picks: the fewest whose `sizes` (tokens each takes out of
/// the projected view, indexed by episode) bring `view` down to `landing` or below; 0 when the
/// view is already there, `order.len()` when even all of them do not reach it.
///
/// Errors: a negative size, view or landing, or an episode in `order` with no size.
pub fn fade_pick(
    order: &[usize],
    sizes: &[i64],
    view: i64,
    landing: i64,
) -> Result<usize, CoreError> {
    validate_fade_pick(order, sizes, view, landing)?;
    Ok(pick(order, sizes, view, landing))
}

/// The episodes a fade picks, in the order it takes them: [`fade_order`] then [`fade_pick`].
/// `sizes` must have one entry per episode. When the view is already at the landing, nothing is
/// picked and nothing is sorted; otherwise only the episodes whose keys fall in the histogram
/// buckets the pick can reach are sorted (see [`fade_order_first`]).
pub fn fade(
    activation: &[f64],
    tie: &[i64],
    sizes: &[i64],
    view: i64,
    landing: i64,
) -> Result<Vec<usize>, CoreError> {
    validate_fade(activation, tie, sizes, view, landing)?;
    Ok(fade_validated(Isa::Detected, activation, tie, sizes, view, landing))
}

/// [`fade`] compiled for `isa`: the tests check that every path picks the same.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn fade_on(
    isa: Isa,
    activation: &[f64],
    tie: &[i64],
    sizes: &[i64],
    view: i64,
    landing: i64,
) -> Result<Vec<usize>, CoreError> {
    validate_fade(activation, tie, sizes, view, landing)?;
    Ok(fade_validated(isa, activation, tie, sizes, view, landing))
}

/// The fade on input that passed [`validate_fade`].
fn fade_validated(
    isa: Isa,
    activation: &[f64],
    tie: &[i64],
    sizes: &[i64],
    view: i64,
    landing: i64,
) -> Vec<usize> {
    if view <= landing {
        return Vec::new();
    }
    let n = activation.len();
    if n < 2 || u32::try_from(n).is_err() {
        let mut order = order_validated(isa, activation, tie);
        let picked = pick(&order, sizes, view, landing);
        order.truncate(picked);
        return order;
    }
    // Both are >= 0 and view > landing, so the difference is positive and fits.
    let over = (view - landing) as u64;
    run(isa, RadixOrder { isa, activation, tie, until: Until::Tokens { sizes, over } })
}

/// The pick itself, on validated input (sizes >= 0, every episode in range).
fn pick(order: &[usize], sizes: &[i64], view: i64, landing: i64) -> usize {
    // i128: a view minus any number of i64 sizes cannot overflow it.
    let mut over = i128::from(view) - i128::from(landing);
    if over <= 0 {
        return 0;
    }
    for (k, &e) in order.iter().enumerate() {
        over -= i128::from(sizes[e]);
        if over <= 0 {
            return k + 1;
        }
    }
    order.len()
}

/// `name` must hold one entry per episode (per activation).
fn check_same_length(name: &str, len: usize, episodes: usize) -> Result<(), CoreError> {
    if len == episodes {
        Ok(())
    } else {
        Err(CoreError::InvalidArgument(format!(
            "{name} has {len} entries but activation has {episodes}; there must be one per episode"
        )))
    }
}

/// The checks of [`fade_order`] and [`fade_order_first`]: one tie key per episode and no NaN
/// activation.
fn validate_fade_order(activation: &[f64], tie: &[i64]) -> Result<(), CoreError> {
    check_same_length("tie", tie.len(), activation.len())?;
    if let Some(i) = first_nan(activation) {
        return Err(CoreError::InvalidArgument(format!(
            "activation[{i}] is NaN; activations must be comparable numbers"
        )));
    }
    Ok(())
}

/// The checks of [`fade`]: those of [`fade_order`], then one size per episode and token counts
/// that are not negative.
fn validate_fade(
    activation: &[f64],
    tie: &[i64],
    sizes: &[i64],
    view: i64,
    landing: i64,
) -> Result<(), CoreError> {
    validate_fade_order(activation, tie)?;
    check_same_length("sizes", sizes.len(), activation.len())?;
    check_tokens(sizes, view, landing)
}

/// The checks of [`fade_pick`]: token counts that are not negative, and an order that indexes
/// `sizes`.
fn validate_fade_pick(
    order: &[usize],
    sizes: &[i64],
    view: i64,
    landing: i64,
) -> Result<(), CoreError> {
    check_tokens(sizes, view, landing)?;
    if let Some(k) = order.iter().position(|&e| e >= sizes.len()) {
        return Err(CoreError::InvalidArgument(format!(
            "order[{k}] is {} but sizes has {} entries; the order must index sizes",
            order[k],
            sizes.len()
        )));
    }
    Ok(())
}

/// Sizes, view and landing are token counts: none may be negative.
fn check_tokens(sizes: &[i64], view: i64, landing: i64) -> Result<(), CoreError> {
    for (name, value) in [("view", view), ("landing", landing)] {
        if value < 0 {
            return Err(CoreError::InvalidArgument(format!(
                "{name} is {value}; it is a number of tokens and must be >= 0"
            )));
        }
    }
    // A vectorised any() first; the position only on the error path.
    if sizes.iter().fold(false, |neg, &s| neg | (s < 0)) {
        let j = sizes.iter().position(|&s| s < 0).unwrap_or(0);
        return Err(CoreError::InvalidArgument(format!(
            "sizes[{j}] is {}; the tokens an episode takes out of the view must be >= 0",
            sizes[j]
        )));
    }
    Ok(())
}

/// The index of the first NaN, testing whole chunks without an early exit (which vectorises).
fn first_nan(x: &[f64]) -> Option<usize> {
    const CHUNK: usize = 256;
    let k = x.chunks(CHUNK).position(|c| c.iter().fold(false, |nan, a| nan | a.is_nan()))?;
    let start = k * CHUNK;
    x[start..].iter().position(|a| a.is_nan()).map(|j| start + j)
}

/// Lanes of [`min_max`]: independent running extremes the compiler keeps in registers.
const MIN_MAX_LANES: usize = 4;

/// The smallest and largest of a non-empty slice without NaN.
#[inline(always)]
fn min_max(x: &[f64]) -> (f64, f64) {
    let mut lo = [x[0]; MIN_MAX_LANES];
    let mut hi = [x[0]; MIN_MAX_LANES];
    let mut chunks = x.chunks_exact(MIN_MAX_LANES);
    for c in &mut chunks {
        for k in 0..MIN_MAX_LANES {
            lo[k] = if c[k] < lo[k] { c[k] } else { lo[k] };
            hi[k] = if c[k] > hi[k] { c[k] } else { hi[k] };
        }
    }
    let mut low = lo[0];
    let mut high = hi[0];
    for &v in lo[1..].iter().chain(chunks.remainder()) {
        low = if v < low { v } else { low };
    }
    for &v in hi[1..].iter().chain(chunks.remainder()) {
        high = if v > high { v } else { high };
    }
    (low, high)
}

/// An order-preserving 32-bit key for `a` rounded to f32 (round to nearest is monotone, so
/// `a <= b` implies `key(a) <= key(b)`): the sign bit flipped for positives, all bits for
/// negatives. `a + 0.0` turns -0.0 into 0.0.
#[inline(always)]
fn f32_key(a: f64) -> u32 {
    let bits = ((a + 0.0) as f32).to_bits();
    let negative = 0u32.wrapping_sub(bits >> 31);
    bits ^ (negative | (1 << 31))
}

/// The same for the full f64, for the final comparison inside runs of equal f32 keys.
#[inline]
fn f64_key(a: f64) -> u64 {
    let bits = (a + 0.0).to_bits();
    let negative = 0u64.wrapping_sub(bits >> 63);
    bits ^ (negative | (1 << 63))
}

/// Most passes [`radix_sort_high`] makes: 32 bits in digits of at most `MAX_DIGIT_BITS`.
const MAX_PASSES: usize = 32usize.div_ceil(MAX_DIGIT_BITS as usize);

/// Sorts `words` stably by their high 32 bits, of which only the low `bits` may be non-zero:
/// LSD passes of at most `MAX_DIGIT_BITS`, all histograms counted in one read (a fixed number of
/// them, so the counting loop has no inner loop), and a pass skipped when its digit is the same
/// for every word. Few words (a prefix's candidates) are sorted by the top two passes' bits
/// only: a third pass costs more than ordering the rare runs those bits leave tied. Returns the
/// number of low key bits left unsorted, for [`order_runs`].
#[inline(always)]
fn radix_sort_high(words: &mut Vec<u64>, other: &mut Vec<u64>, bits: u32) -> u32 {
    let n = words.len();
    let unsorted = if n <= FEW_WORDS { bits.saturating_sub(2 * MAX_DIGIT_BITS) } else { 0 };
    let bits = bits - unsorted;
    if bits == 0 {
        return unsorted;
    }
    let passes = bits.div_ceil(MAX_DIGIT_BITS) as usize;
    let width = bits.div_ceil(passes as u32) as usize;
    let mask = (1u64 << width) - 1;
    let mut counts = [[0u32; 1 << MAX_DIGIT_BITS]; MAX_PASSES];
    for &w in words.iter() {
        let key = w >> (32 + unsorted);
        // Passes beyond `passes` count digit 0 for every word and are skipped below.
        for (p, count) in counts.iter_mut().enumerate() {
            count[((key >> (width * p)) & mask) as usize] += 1;
        }
    }
    // Every slot is written before it is read; only slots this buffer never had are zeroed.
    other.truncate(n);
    other.resize(n, 0);
    for (p, next) in counts.iter_mut().enumerate().take(passes) {
        let next = &mut next[..1 << width];
        if next.iter().any(|&c| c as usize == n) {
            continue;
        }
        let mut total = 0;
        for c in next.iter_mut() {
            (*c, total) = (total, total + *c);
        }
        let shift = 32 + unsorted as usize + width * p;
        for &w in words.iter() {
            let d = ((w >> shift) & mask) as usize;
            // `next[d]` counts the words before this one's place, so it is below n.
            other[next[d] as usize] = w;
            next[d] += 1;
        }
        std::mem::swap(words, other);
    }
    unsorted
}

/// Words up to which [`radix_sort_high`] sorts two passes' bits at most: 2^17 words over 2^22
/// digits leave about one word in thirty tied with another (uniform keys); at 10^6 words the
/// runs cost twice the pass they save.
const FEW_WORDS: usize = 1 << 17;

/// Orders every run of words with equal high halves (but for their `unsorted` low bits) by the
/// full `(activation, tie, index)`. Runs are rare, so the scan is one predictable compare per
/// word.
fn order_runs(words: &mut [u64], activation: &[f64], tie: &[i64], unsorted: u32) {
    let full = |w: u64| {
        let i = (w & u64::from(u32::MAX)) as usize;
        (f64_key(activation[i]), tie[i], i)
    };
    let shift = 32 + unsorted;
    let mut i = 1;
    while i < words.len() {
        let high = words[i] >> shift;
        if high != words[i - 1] >> shift {
            i += 1;
            continue;
        }
        let start = i - 1;
        let mut end = i + 1;
        while end < words.len() && words[end] >> shift == high {
            end += 1;
        }
        let run = &mut words[start..end];
        if !run.windows(2).all(|p| full(p[0]) <= full(p[1])) {
            if run.len() <= INSERTION_RUN {
                for i in 1..run.len() {
                    let w = run[i];
                    let mut j = i;
                    while j > 0 && full(w) < full(run[j - 1]) {
                        run[j] = run[j - 1];
                        j -= 1;
                    }
                    run[j] = w;
                }
            } else {
                run.sort_unstable_by_key(|&w| full(w));
            }
        }
        i = end;
    }
}

/// The order by a comparison sort: the slow, obvious twin of [`fade_order`] (after validation),
/// also its path beyond 2^32 episodes.
fn order_by_comparison(activation: &[f64], tie: &[i64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..activation.len()).collect();
    // Stable, so equal (activation, tie) keep index order. NaN was rejected.
    order.sort_by(|&a, &b| {
        activation[a]
            .partial_cmp(&activation[b])
            .unwrap_or(Ordering::Equal)
            .then(tie[a].cmp(&tie[b]))
    });
    order
}

/// The slow, obvious twin of [`fade_order`], for tests.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn fade_order_naive(activation: &[f64], tie: &[i64]) -> Result<Vec<usize>, CoreError> {
    validate_fade_order(activation, tie)?;
    Ok(order_by_comparison(activation, tie))
}

/// The slow, obvious twin of [`fade`], for tests: the naive order, then episodes taken one by one
/// while the projected view is above the landing.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn fade_naive(
    activation: &[f64],
    tie: &[i64],
    sizes: &[i64],
    view: i64,
    landing: i64,
) -> Result<Vec<usize>, CoreError> {
    validate_fade(activation, tie, sizes, view, landing)?;
    let mut projected = i128::from(view);
    let mut picked = Vec::new();
    for e in order_by_comparison(activation, tie) {
        if projected <= i128::from(landing) {
            break;
        }
        projected -= i128::from(sizes[e]);
        picked.push(e);
    }
    Ok(picked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(activation: &[f64], tie: &[i64]) -> Vec<usize> {
        let fast = fade_order(activation, tie).expect("valid");
        assert_eq!(
            fast,
            fade_order_naive(activation, tie).expect("valid"),
            "{activation:?} {tie:?}"
        );
        fast
    }

    #[test]
    fn order_table() {
        // (activation, tie, expected order)
        type Case = (&'static [f64], &'static [i64], &'static [usize]);
        let cases: &[Case] = &[
            (&[], &[], &[]),
            (&[0.5], &[7], &[0]),
            (&[0.3, 0.1, 0.2], &[0, 1, 2], &[1, 2, 0]),
            // ties by `tie`, then by index
            (&[0.5, 0.5, 0.5], &[2, 0, 1], &[1, 2, 0]),
            (&[0.5, 0.5, 0.1], &[3, 3, 9], &[2, 0, 1]),
            // -0.0 and 0.0 are the same activation
            (&[0.0, -0.0, 0.0], &[2, 1, 0], &[2, 1, 0]),
            // negative and infinite activations are ordinary numbers
            (&[1.0, -2.0, f64::INFINITY, f64::NEG_INFINITY], &[0, 0, 0, 0], &[3, 1, 0, 2]),
            // equal after rounding to f32, different in f64: the final pass orders them
            (&[1.0 + 1e-12, 1.0, 1.0 + 2e-12], &[0, 1, 2], &[1, 0, 2]),
            // beyond f32's range and below its smallest subnormal
            (&[1e300, 1e-300, 2e300, 0.0, 3e-300], &[0, 1, 2, 3, 4], &[3, 1, 4, 0, 2]),
        ];
        for &(activation, tie, want) in cases {
            assert_eq!(order(activation, tie), want, "{activation:?}");
        }
    }

    #[test]
    fn long_runs_of_ties() {
        // 40 distinct activations over 5000 episodes, ties in reverse and in index order.
        let activation: Vec<f64> = (0..5000).map(|i| f64::from(i % 40) * 0.25).collect();
        let reverse: Vec<i64> = (0..5000).rev().collect();
        let rising: Vec<i64> = (0..5000).collect();
        order(&activation, &reverse);
        order(&activation, &rising);
        order(&activation, &vec![0; 5000]);
        // Everything equal: no radix pass at all.
        order(&vec![2.5; 100], &(0..100).rev().collect::<Vec<_>>());
    }

    #[test]
    fn wide_and_narrow_ranges() {
        // One pass (a narrow range), three passes (decades), and keys differing in the top bit.
        for spread in [1e-6, 1.0, 1e6] {
            let activation: Vec<f64> = (0..3000u32)
                .map(|i| 1.0 + spread * f64::from((i * 7919) % 3001) / 3001.0)
                .collect();
            order(&activation, &vec![0; 3000]);
        }
        let signs: Vec<f64> = (0..3000).map(|i| f64::from(i - 1500) * 1e3).collect();
        order(&signs, &vec![0; 3000]);
    }

    #[test]
    fn pick_table() {
        // (sizes by episode, view, landing, picks of the order 0, 1, 2, ...)
        let cases: &[(&[i64], i64, i64, usize)] = &[
            (&[10, 20, 30], 100, 100, 0),
            (&[10, 20, 30], 90, 100, 0),
            (&[10, 20, 30], 100, 90, 1),
            (&[10, 20, 30], 100, 89, 2),
            (&[10, 20, 30], 100, 70, 2),
            (&[10, 20, 30], 100, 40, 3),
            (&[10, 20, 30], 100, 39, 3),
            (&[0, 0, 5], 10, 5, 3),
            (&[], 10, 5, 0),
            (&[i64::MAX, i64::MAX], i64::MAX, 0, 1),
        ];
        for &(sizes, view, landing, want) in cases {
            let order: Vec<usize> = (0..sizes.len()).collect();
            assert_eq!(
                fade_pick(&order, sizes, view, landing),
                Ok(want),
                "{sizes:?} {view} {landing}"
            );
        }
    }

    #[test]
    fn fade_picks_the_least_active_first() {
        let activation = [0.9, 0.1, 0.5, 0.1];
        let tie = [0, 3, 2, 1];
        let sizes = [100, 10, 50, 20];
        // order: 3 (0.1, tie 1), 1 (0.1, tie 3), 2, 0
        assert_eq!(fade(&activation, &tie, &sizes, 180, 160), Ok(vec![3]));
        assert_eq!(fade(&activation, &tie, &sizes, 180, 155), Ok(vec![3, 1]));
        assert_eq!(fade(&activation, &tie, &sizes, 180, 120), Ok(vec![3, 1, 2]));
        assert_eq!(fade(&activation, &tie, &sizes, 180, 180), Ok(vec![]));
        assert_eq!(fade(&activation, &tie, &sizes, 180, 0), Ok(vec![3, 1, 2, 0]));
        assert_eq!(fade_naive(&activation, &tie, &sizes, 180, 120), Ok(vec![3, 1, 2]));
    }

    #[test]
    fn errors() {
        let bad = |r: Result<Vec<usize>, CoreError>| match r {
            Err(CoreError::InvalidArgument(msg)) => msg,
            other => panic!("expected InvalidArgument, got {other:?}"),
        };
        assert!(
            bad(fade_order(&[0.1, 0.2], &[0])).contains("tie has 1 entries but activation has 2")
        );
        assert!(bad(fade_order(&[0.1, f64::NAN], &[0, 1])).contains("activation[1] is NaN"));
        let mut long = vec![0.5; 1000];
        long[600] = f64::NAN;
        assert!(bad(fade_order(&long, &[0; 1000])).contains("activation[600] is NaN"));
        assert!(bad(fade(&[0.1], &[0], &[], 10, 5))
            .contains("sizes has 0 entries but activation has 1"));
        assert!(bad(fade(&[0.1], &[0], &[-4], 10, 5)).contains("sizes[0] is -4"));
        assert!(bad(fade(&[0.1], &[0], &[4], -1, 5)).contains("view is -1"));
        assert!(bad(fade(&[0.1], &[0], &[4], 10, -5)).contains("landing is -5"));
        assert!(bad(fade(&[f64::NAN], &[0], &[4], 1, 5)).contains("activation[0] is NaN"));
        match fade_pick(&[0, 3], &[1, 2, 3], 10, 5) {
            Err(CoreError::InvalidArgument(msg)) => {
                assert!(msg.contains("order[1] is 3 but sizes has 3 entries"), "{msg}")
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
}
