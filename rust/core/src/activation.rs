//! Activation and significance of episodes (spec: "Activation", "Significance").
//!
//! "Activation is how available an episode is now: every counted trace, faded by the square root
//! of its age in wall-clock minutes, summed":
//!
//! ```text
//! activation(episode, now) = Σ score(trace) / √ max(1, minutes(now − trace.at))
//! ```
//!
//! A trace counts in full for its first minute (and when it lies in the future: age 0, weight 1),
//! then by one over the square root of the minutes since. Significance is the same sum, never
//! faded. Times are Unix seconds; only counted traces are passed in (the caller filters).
//!
//! Traces arrive in one of two layouts: grouped by episode as CSR (`offsets`, with episode `g`'s
//! traces at `offsets[g]..offsets[g + 1]`) or in log order with an episode id per trace.
//!
//! Design log. Workload: 20 traces per episode on average (1 to 39), ages log-uniform from a
//! minute to a year, scores uniform in (0, 1]; a scratch Rust harness, best of 10-100 calls, on a
//! shared 2-core AMD EPYC (Zen 4, about 3.65 GHz) where runs vary by 10-30%. The build targets
//! baseline x86-64 (SSE2, two f64 lanes, no FMA, no AVX) and `unsafe` is forbidden; everything in
//! this first part is what the compiler's auto-vectoriser makes of plain loops for SSE2. The last
//! part is the same code under runtime dispatch. Figures are ns per trace at 10^5 traces (10^6 in
//! brackets). Whole calls through Python, against numpy, are in `benches/RESULTS-activation.md`.
//!
//! The weight, `1 / sqrt(max(1, minutes))`, is the cost; the terms alone, without the sums:
//!
//! - The literal loop, `score / max(1, age / 60).sqrt()`: 3.7. Scalar `sqrtsd` + `divsd`.
//! - Vectorised, `sqrtpd` + `divpd`: 1.84. Both sit on the one divide/sqrt unit, which is the
//!   limit; `1 / sqrt` then a multiply by the score changes nothing, the divide remains.
//! - `1/sqrt` from the f64 bit trick (magic constant, 3.4% error) and four Newton steps: 1.79.
//!   The multiplies are cheap, but each step is a chain of four dependent operations, and the
//!   chains fill the FP scheduler before the two multiply pipes are busy.
//! - f32 `sqrtps` + `divps` for an estimate, one f64 Newton step (error 2e-14): 1.24. The f32
//!   divide/sqrt unit is still the limit (0.7 for the sqrt alone).
//! - Kept: an f32 estimate from the bit trick and three f32 Newton steps (four lanes a register,
//!   error about 2e-7, only multiplies), then one f64 Newton step (error below 1e-13; see
//!   `weights_match_the_exact_formula`). Three passes over a block of `BLOCK` traces that stays in
//!   L1 (ages 0.34, estimates 0.48, terms 0.31), so that each loop is simple enough to vectorise
//!   and its chains short: 1.10. One fused loop over the same work: 2.07 (the compiler then uses
//!   two lanes for the f32 part, or none); the same work on explicit 4-element arrays: 1.77.
//!   An extra Halley-order f64 step (error at the last bit) costs 0.2 more and buys nothing the
//!   tests can see. Checking ages in the first pass adds 0.07, the exact 1 for the first minute
//!   0.06 as an f32 select (0.13 as an f64 one).
//! - Every step is IEEE arithmetic (no `rsqrtps`, whose approximation differs between Intel and
//!   AMD, and no FMA contraction), so the same inputs give the same bits on every machine: two
//!   episodes with equal traces tie, and a fade replays identically.
//!
//! The per-episode sums cost more than their adds, because episode lengths vary: a loop per
//! episode exits at a different count each time, and a missed prediction also serialises the
//! chain of adds behind it.
//!
//! - Two accumulators and a remainder loop: 1.68 (2.34). With every episode exactly 20 traces,
//!   1.62 (1.62): the difference is mispredicted loop exits. At 10^5 the predictor learns the
//!   benchmark's repeated sequence of lengths, which is why it looks cheap there.
//! - Kept: one loop of four lanes whose last chunk is masked instead of finished by a second
//!   loop (`masked_sum`; the scratch has zero padding so a chunk may read past the end): one exit
//!   to miss per episode instead of two. 1.73 (2.04).
//! - Eight lanes instead of four (three chunks for a typical episode, not five), measured later
//!   through Python with runtime dispatch: 10^5 on one thread 1.04-1.09 -> 1.00-1.01, but 10^6
//!   on two 0.76-0.79 -> 0.84-0.85 (more of each episode's last chunk is masked). Not kept.
//! - Segmented running sums in eight independent lanes, no data-dependent branch at all, and a
//!   fix-up per episode for the lanes it crosses: 2.14 (2.21). Predictable but more work.
//! - Log order adds a scatter into the activations, `act[group[i]] += term`: 2.1 (3.4-4.3). On
//!   its own the scatter is 0.8-1.0; together with the three input streams it stalls on memory.
//!
//! Runtime dispatch (`crate::simd`, through pulp): the same passes and sums compiled for AVX-512
//! and AVX2 + FMA besides the baseline, the best one picked per call; the same bits on every path
//! (tested bit for bit against the baseline). Figures at 10^5, 10^6 and 10^7 traces:
//!
//! - Kept, the code above dispatched: grouped 1.80, 2.08, 2.22 -> 1.02, 1.40, 2.05; log order
//!   2.15, 4.36, 5.19 -> 1.22, 3.3, 4.5. Zen 4 runs 512-bit operations as two 256-bit halves, so
//!   AVX-512 buys little over AVX2 here beyond masks.
//! - Where the rest goes. The terms alone, without sums: 0.72, 0.76, 1.40. Reading the two input
//!   streams alone is 0.63 at 10^7, so computing and streaming do not overlap. With every episode
//!   20 traces long the whole kernel is 1.02, 1.02, 1.54: the episodes' mispredicted loop exits
//!   cost 0.4-0.6 once the predictor cannot learn the lengths (10^6 and up).
//! - Prefetching the next blocks (`prefetcht0` through pulp's safe SSE token, one per line, half
//!   a block to eight blocks ahead): 1.7-3.1 at 10^7, worse at every distance. Blocks of 1024 or
//!   2048 traces: no better (0.74-0.82, 1.30-2.00 for the terms); of 256, 10^5 on one thread
//!   1.03 -> 1.11 (10^6 on two, 0.83 -> 0.78).
//! - Every episode of a block running the same number of masked chunks, the longest's, so that
//!   the loop exit is predicted (a masked lane adds +0.0, which keeps the bits): 1.52, 2.14, 2.42.
//!   The wasted chunks cost more than the mispredictions they save.
//! - One codegen unit instead of the workspace's 16 (thin LTO either way): 10^5 on one thread
//!   1.03-1.06 -> 1.11 in the scratch harness.
//! - What the compiler made of `masked_sum` until then: four scalar adds a chunk, and a branch
//!   per lane for the mask (the source guarded each lane's load by `j + k < hi`, and the load
//!   was not hoisted out of the guard). Loading the whole chunk first and then selecting each
//!   lane gives a compare into a mask register and masked loads, no branch inside the chunk, the
//!   same adds in the same order, so the same bits (checked against the previous build at
//!   10^0-10^6 traces): 10^5 on one thread 1.04 -> 0.95, the old and new builds alternated in
//!   one process. That loop also explains why 10^5 measured 0.97-0.99 in earlier sessions and
//!   1.03-1.07 after the log-order pipeline's u32 slots (0ae28a6): both builds hold the same
//!   instructions for it (perf annotate), but that commit moved the loop's head from a 64-byte
//!   boundary to a 32-byte one. Through Python, at 10^5, 10^6 and 10^7: 1.05, 0.82, 0.89 ->
//!   0.96, 0.75, 0.86.
//! - Not tried with runtime dispatch: segmented sums (eight lanes above were tried). Any other
//!   order of adds changes the last bits of every activation against the previous version.
//!
//! Threads (`grouped_split`): from 2^17 traces the blocks are cut into one contiguous run per
//! thread, each run summed as one thread would, and an episode that straddles two runs gets the
//! later run's partial sums added after the earlier run's, block by block: the same chain of adds,
//! so the same bits. Two threads at 10^6 and 10^7: 1.43 -> 0.79, 1.59 -> 0.96. A persistent pool
//! (rayon) wakes its sleeping workers in ~40 µs here, no faster than starting a thread, and a fade
//! decision is rare enough that the pool would always be asleep.
//! But on this VM the second thread often starts late (its vCPU asleep, or lent to another
//! guest), and with one run a thread the first then waits for it: at 10^6, over 100 calls,
//! best 0.77, median 0.85, slowest tenth 1.4-2.0. Now the runs are eight a thread, taken as the
//! threads come free, the first thread from the front and the others from the back, so that
//! each still streams through memory in long runs: best 0.80-0.82, median 0.86-0.88, slowest
//! tenth 0.96-1.2. Taken in turn from the front instead: 10^7 about 10% slower (each thread
//! hops between distant runs); runs shrinking as work is left (guided): the same. With the
//! threads' code inlined into `grouped_split`, the extension's one-thread kernel ran 5-8% slower
//! at 10^5 (1.06-1.10 against 1.00-1.02: the same code placed differently; loops aligned to 64
//! bytes recovered most of it); kept out of line (`grouped_parallel`), 0.98-0.99. Two threads
//! from 2^15 traces instead of 2^17, to bring 10^5 under 1 ns: 0.93, 0.99 and 1.12 in three
//! runs through Python (one thread: 1.04-1.05), no better on the median, and log order, which
//! shares the threshold, went from 1.24 to 1.5-3.5 there. Not kept. Log order cannot be split so:
//! its episodes' traces are spread over the whole log, so a split would change the order of adds.
//!
//! Log order on two threads (`log_order_pipelined`), from 2^18 traces: the second thread computes
//! the terms, batch by batch, while the first adds them up in log order as they come, the same
//! chain of adds, so the same bits. At 10^6 and 10^7: 2.7 -> 1.3, 4.6 -> 2.3, in the runs where
//! the VM gives both threads a core; in others (about one in three here) 3.0 and 3.9. Batches of 64
//! blocks (256 KiB of terms, in L2): 16 blocks spend the time waking a parked thread (4.9), 256
//! measured 2.5 and 4.0. What the first thread does is the adds at random into the activations:
//! software prefetch of the slot 16 adds ahead made them slower (1.6, 2.9), and splitting each
//! batch by the high bits of the episode (stable, so the same bits) so that the adds stay in
//! cache costs more in the split than it saves (3.2-3.4 at 10^7 for 4 to 128 buckets).
//! Two threads each owning half of the episodes (half of 4 MB of activations stays in each
//! core's L2), each computing every other batch and sorting its terms into the two halves: the
//! adds alone take 1.4 a trace, but the sort 1.9 (its buffers move between the cores), 2.1-2.8
//! in all. Keeping the three batch buffers between calls, to spare their page faults: no
//! change at 10^6 within the noise (the reused lines must move to the other core instead).
//! What bounds the adding thread at 10^7 is not where the activations live but the streams
//! beside them. Random `act[g] += t` alone, over 10^7 adds with `g` and `t` read from memory:
//! 1.81 ns into 128 KiB of activations (in L2), 1.92 into 1 MiB, 2.33 into 4 MiB (10^7 traces'
//! worth), 6.5 into 16 MiB. The same adds with `g` and `t` in cache (10^5 of them, repeated):
//! 0.92, 1.08, 1.22. So keeping the adds within a cache-sized range of episodes would save at
//! most the 0.2-0.4 between 128 KiB and 4 MiB, less than any split of the batch costs.
//! Kept, from 2^21 traces (`LogOrderPath::PipelinedNarrow`): the second thread also reads the
//! episode ids, checks them and hands them over as `u32` slots beside the terms, so that the
//! adding thread reads nothing from memory. At 10^7, 2.45-2.75 -> 1.75-1.9 (best of ten runs
//! each, alternated). At 10^6, where the inputs (24 MB) still sit in the last-level cache, it
//! is slower, 1.36-1.5 -> 1.64-1.8: the ids then cost the adding thread less from the cache
//! than from the other core. The crossover lies between 1 and 2 million traces. Writing the
//! terms straight into the batch instead of copying each block's: no change.
//!
//! The same kernels on a 2-core Intel Xeon VM with AVX512_SPR (Sapphire Rapids class), through a
//! scratch harness, best of many calls: grouped on one thread 1.10-1.14 (10^5), 1.52-1.56
//! (10^6), 3.1 (10^7, where one thread streams two f64 columns at 15 GB/s: 1.06 ns a trace to
//! read them); on two 0.95-1.04, 0.91-0.97, 1.60-1.64. Log order on one thread 1.21-1.27,
//! 1.69-1.80, 6.5-6.7; pipelined 3.2 (10^5), 1.31-1.35 (10^6), 5.2-5.3 (10^7); narrow 3.5 at
//! 10^7. There the pipeline lost to one thread up to about 3 x 10^5 traces (2 x 10^5: 1.33-1.49
//! against 1.71-1.81; 3 x 10^5: 1.69-1.74 against 1.60-1.81), so log order now goes to two
//! threads from 2^18 rather than 2^17 (a memory of 10,000 episodes with 20 traces each is 2 x
//! 10^5 traces); grouped keeps 2^17, where two threads won on both machines.
//!
//! Validation is folded into the passes rather than done first: a separate pass over the times
//! would cost as much memory traffic as the kernel at 10^7. Ages are checked in the first pass
//! (one compare per trace); scores are not checked per trace at all: a NaN or infinite score makes
//! its episode's sum non-finite, and only then is the input searched for the culprit.

use std::collections::VecDeque;
use std::sync::mpsc::sync_channel;

use crate::csr::check_offsets;
use crate::parallel;
use crate::simd::{run, Isa};
use crate::CoreError;

/// Seconds in a minute: ages are measured in wall-clock minutes.
pub const SECONDS_PER_MINUTE: f64 = 60.0;

/// The largest `|now - at|` accepted, in seconds: 2^53 s (about 285 million years), the range in
/// which f64 seconds are exact. It also keeps every intermediate of the kernel in f32 range.
pub const MAX_AGE_SECONDS: f64 = 9_007_199_254_740_992.0;

/// Half of one minute per second: the kernel works with half the minutes (`h = minutes / 2`),
/// which is what a Newton step for `1/sqrt` takes. Halving is exact, so `age * HALF_PER_SECOND`
/// is exactly half of `age * (1 / 60)`.
const HALF_MINUTES_PER_SECOND: f64 = 0.5 / SECONDS_PER_MINUTE;

/// Traces per block of the kernel's passes: the block's scratch (12 bytes a trace) stays in L1.
const BLOCK: usize = 512;

/// The weight of one trace of age `age_seconds`, by the formula read literally (f64 `sqrt`).
/// The kernels agree with it to 1e-13 relative.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn trace_weight(age_seconds: f64) -> f64 {
    1.0 / (age_seconds / SECONDS_PER_MINUTE).max(1.0).sqrt()
}

/// The activation of each episode at `now`: Σ score / √max(1, minutes(now − at)) over its traces.
/// Episode `g`'s traces are `at[offsets[g]..offsets[g + 1]]` (and the same range of `score`);
/// `offsets` has one entry more than there are episodes, starts at 0, never decreases and ends at
/// the number of traces.
///
/// Errors: `at` and `score` of different lengths, malformed offsets, a `now` that is not finite,
/// a time that is not finite or lies more than [`MAX_AGE_SECONDS`] from `now`, a score that is
/// not finite, or an episode whose sum overflows.
pub fn activation_grouped(
    offsets: &[i64],
    at: &[f64],
    score: &[f64],
    now: f64,
) -> Result<Vec<f64>, CoreError> {
    validate_activation(Traces::Grouped(offsets), at, score, now)?;
    grouped_validated(Isa::Detected, grouped_threads(at.len()), offsets, at, score, now)
}

/// [`activation_grouped`] compiled for `isa`: the tests check that every path gives the same bits.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn activation_grouped_on(
    isa: Isa,
    offsets: &[i64],
    at: &[f64],
    score: &[f64],
    now: f64,
) -> Result<Vec<f64>, CoreError> {
    validate_activation(Traces::Grouped(offsets), at, score, now)?;
    grouped_validated(isa, grouped_threads(at.len()), offsets, at, score, now)
}

/// [`activation_grouped_on`] over `threads` threads at most (one per `PARALLEL_MIN_BLOCKS`
/// blocks): the tests check that every count gives the same bits.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn activation_grouped_threads(
    isa: Isa,
    threads: usize,
    offsets: &[i64],
    at: &[f64],
    score: &[f64],
    now: f64,
) -> Result<Vec<f64>, CoreError> {
    validate_activation(Traces::Grouped(offsets), at, score, now)?;
    grouped_validated(isa, threads, offsets, at, score, now)
}

/// The threads the grouped kernel may split `traces` traces over.
fn grouped_threads(traces: usize) -> usize {
    if traces >= PARALLEL_MIN_TRACES {
        parallel::threads()
    } else {
        1
    }
}

/// The grouped kernel on input that passed [`validate_activation`]; times and scores are checked
/// as it runs.
fn grouped_validated(
    isa: Isa,
    threads: usize,
    offsets: &[i64],
    at: &[f64],
    score: &[f64],
    now: f64,
) -> Result<Vec<f64>, CoreError> {
    let mut activation = vec![0.0; offsets.len() - 1];
    grouped_split(isa, threads, offsets, at, score, now, &mut activation)
        .map_err(|start| bad_time(now, &at[start..], start))?;
    check_sums(&activation, score, "activation")?;
    Ok(activation)
}

/// Traces from which the grouped kernel splits its blocks over threads. Starting and joining a
/// thread costs about 50 µs on the 2-core VM, what ~45k traces cost: two threads break even at
/// 10^5 traces and win from there (2 x 10^5: 0.80 ns a trace against 1.32).
const PARALLEL_MIN_TRACES: usize = 1 << 17;
/// Blocks each run gets at least.
const PARALLEL_MIN_BLOCKS: usize = 32;
/// Runs per thread: the threads take runs as they come free, so a thread that starts late (a
/// sleeping vCPU can take a millisecond to wake) leaves its share to the others.
const RUNS_PER_THREAD: usize = 8;

/// The grouped kernel, its blocks cut into contiguous runs that `threads` threads take in turn,
/// with the same bits as one run. Every episode's sum is the same chain of adds, one partial
/// sum per block it overlaps, in block order. A run starts at a block boundary, usually inside
/// an episode: its partial sums for that episode are kept apart (`carry`) and added, in order,
/// to what the runs before it summed, once all are done. Which thread sums a run changes
/// nothing of that, so the bits do not depend on timing.
fn grouped_split(
    isa: Isa,
    threads: usize,
    offsets: &[i64],
    at: &[f64],
    score: &[f64],
    now: f64,
    activation: &mut [f64],
) -> Result<(), usize> {
    let blocks = at.len().div_ceil(BLOCK);
    let threads = threads.min(blocks / PARALLEL_MIN_BLOCKS).max(1);
    if threads == 1 {
        let traces = 0..at.len();
        return run(
            isa,
            Grouped { offsets, at, score, now, traces, first: 0, carry: None, activation },
        );
    }
    grouped_parallel(isa, threads, blocks, offsets, at, score, now, activation)
}

/// [`grouped_split`] on two threads or more. Kept out of line: inlined, it moved the one-thread
/// kernel's code enough to cost 5-8% at 10^5 traces.
#[inline(never)]
#[cold]
#[allow(clippy::too_many_arguments)]
fn grouped_parallel(
    isa: Isa,
    threads: usize,
    blocks: usize,
    offsets: &[i64],
    at: &[f64],
    score: &[f64],
    now: f64,
    activation: &mut [f64],
) -> Result<(), usize> {
    let runs = (threads * RUNS_PER_THREAD).min(blocks / PARALLEL_MIN_BLOCKS);
    let starts: Vec<usize> = (0..runs).map(|i| i * blocks / runs * BLOCK).collect();
    // The episode each run starts inside: the first whose traces reach past the run's start
    // (the first run starts at the first episode, empty or not, as one run does).
    let firsts: Vec<usize> = starts
        .iter()
        .map(|&s| if s == 0 { 0 } else { offsets[1..].partition_point(|&o| o as usize <= s) })
        .collect();
    let mut carries: Vec<Vec<f64>> = vec![Vec::new(); runs];
    let mut kernels = Vec::with_capacity(runs);
    let mut rest = &mut *activation;
    let mut owned_from = 0;
    for (i, carry) in carries.iter_mut().enumerate() {
        // Run i owns the episodes after the one it starts inside, up to the one the next run
        // starts inside (or the last); run 0 owns the one it starts inside as well.
        let owned_to = if i + 1 < runs { firsts[i + 1] + 1 } else { offsets.len() - 1 };
        let (owned, tail) = rest.split_at_mut(owned_to - owned_from);
        rest = tail;
        owned_from = owned_to;
        let traces = starts[i]..starts.get(i + 1).copied().unwrap_or(at.len());
        kernels.push(Grouped {
            offsets,
            at,
            score,
            now,
            traces,
            first: firsts[i],
            carry: (i > 0).then_some(carry),
            activation: owned,
        });
    }
    // The first thread takes runs from the front, the others from the back, until they meet:
    // each streams through memory much as with one run a thread, and none waits for a late one.
    let queue = std::sync::Mutex::new(kernels.into_iter().enumerate().collect::<VecDeque<_>>());
    let take = |from_front: bool| {
        let mut done = Vec::new();
        loop {
            // The lock is released before the run. A kernel does not panic, so the lock is never
            // poisoned; if one did, its panic is the caller's, as on one thread.
            let mut runs = queue.lock().unwrap_or_else(|e| e.into_inner());
            let next = if from_front { runs.pop_front() } else { runs.pop_back() };
            drop(runs);
            let Some((i, kernel)) = next else { return done };
            done.push((i, run(isa, kernel)));
        }
    };
    let mut results = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(move || take(false))).collect();
        let mut results = take(true);
        for h in helpers {
            results.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        results
    });
    // The first run with a bad time holds the first bad time.
    results.sort_unstable_by_key(|&(i, _)| i);
    results.into_iter().try_for_each(|(_, r)| r)?;
    for (i, carry) in carries.iter().enumerate().skip(1) {
        for &partial in carry {
            activation[firsts[i]] += partial;
        }
    }
    Ok(())
}

/// The grouped kernel on validated input, over the blocks of `traces` (which starts at a block
/// boundary). Episode `first` is the one `traces` starts inside; given a `carry`, its partial
/// sums go there, in block order, and `activation` holds the episodes after it; without one,
/// `activation` starts at episode `first`. Its error is the first trace of the block holding an
/// age out of range.
struct Grouped<'a> {
    offsets: &'a [i64],
    at: &'a [f64],
    score: &'a [f64],
    now: f64,
    traces: std::ops::Range<usize>,
    first: usize,
    carry: Option<&'a mut Vec<f64>>,
    activation: &'a mut [f64],
}

impl pulp::WithSimd for Grouped<'_> {
    type Output = Result<(), usize>;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> Self::Output {
        let Grouped { offsets, at, score, now, traces, first, mut carry, activation } = self;
        let groups = offsets.len() - 1;
        let own = first + usize::from(carry.is_some());
        let (at, score) = (&at[traces.clone()], &score[traces.clone()]);
        let mut scratch = Scratch::new();
        let mut g = first;
        for (k, (at, score)) in at.chunks(BLOCK).zip(score.chunks(BLOCK)).enumerate() {
            let start = traces.start + k * BLOCK;
            let end = start + at.len();
            let terms = scratch.terms(now, at, score).ok_or(start)?;
            // The episodes that overlap this block; offsets are validated, so the casts are exact.
            while g < groups {
                let (a, b) = (offsets[g] as usize, offsets[g + 1] as usize);
                let (lo, hi) = (a.max(start) - start, b.min(end).max(start) - start);
                let partial = masked_sum(terms, lo, hi);
                match carry.as_deref_mut() {
                    Some(carry) if g < own => carry.push(partial),
                    _ => activation[g - own] += partial,
                }
                if b > end {
                    break;
                }
                g += 1;
            }
        }
        Ok(())
    }
}

/// The significance of each episode: the plain sum of its traces' scores, never faded. The
/// layout and the offset and score errors are those of [`activation_grouped`].
pub fn significance_grouped(offsets: &[i64], score: &[f64]) -> Result<Vec<f64>, CoreError> {
    validate_significance(offsets, score)?;
    let significance: Vec<f64> = offsets
        .windows(2)
        .map(|w| {
            let (lo, hi) = (w[0] as usize, w[1] as usize);
            // Masked chunks wherever the scores extend far enough past the episode: all but the
            // last few episodes, so the branch is predicted.
            if hi + SUM_LANES <= score.len() {
                masked_sum(score, lo, hi)
            } else {
                sum(&score[lo..hi])
            }
        })
        .collect();
    check_sums(&significance, score, "significance")?;
    Ok(significance)
}

/// [`activation_grouped`] for traces in log order (the order they were appended): trace `i`
/// belongs to episode `group[i]`, which must lie in `0..groups`. Episodes without traces get 0.
pub fn activation_log_order(
    group: &[i64],
    at: &[f64],
    score: &[f64],
    now: f64,
    groups: usize,
) -> Result<Vec<f64>, CoreError> {
    validate_activation(Traces::LogOrder(group), at, score, now)?;
    log_order_validated(Isa::Detected, log_order_path_for(at.len()), group, at, score, now, groups)
}

/// [`activation_log_order`] compiled for `isa`.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn activation_log_order_on(
    isa: Isa,
    group: &[i64],
    at: &[f64],
    score: &[f64],
    now: f64,
    groups: usize,
) -> Result<Vec<f64>, CoreError> {
    validate_activation(Traces::LogOrder(group), at, score, now)?;
    log_order_validated(isa, log_order_path_for(at.len()), group, at, score, now, groups)
}

/// [`activation_log_order_on`] on the given path: the tests check that every path gives the
/// same bits and the same errors.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn activation_log_order_path(
    isa: Isa,
    path: LogOrderPath,
    group: &[i64],
    at: &[f64],
    score: &[f64],
    now: f64,
    groups: usize,
) -> Result<Vec<f64>, CoreError> {
    validate_activation(Traces::LogOrder(group), at, score, now)?;
    log_order_validated(isa, path, group, at, score, now, groups)
}

#[cfg(any(test, feature = "testing"))]
pub use log_order_path::LogOrderPath;
#[cfg(not(any(test, feature = "testing")))]
use log_order_path::LogOrderPath;

/// A module of its own so that the enum is public only to the tests, which pick a path.
mod log_order_path {
    /// How the log-order kernel runs (see the design log); every path gives the same bits.
    #[doc(hidden)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum LogOrderPath {
        /// Terms and adds on one thread, block by block.
        OneThread,
        /// Terms on a second thread, adds on this one, which reads the episode ids itself.
        Pipelined,
        /// As `Pipelined`, but the second thread also reads the episode ids and hands them over
        /// checked and narrowed to `u32` with the terms (with more than 2^32 episodes:
        /// `Pipelined`).
        PipelinedNarrow,
    }
}

/// The path log order takes for `traces` traces on this machine.
fn log_order_path_for(traces: usize) -> LogOrderPath {
    if traces < LOG_ORDER_PARALLEL_MIN_TRACES || parallel::threads() < 2 {
        LogOrderPath::OneThread
    } else if traces >= NARROW_MIN_TRACES {
        LogOrderPath::PipelinedNarrow
    } else {
        LogOrderPath::Pipelined
    }
}

/// The log-order kernel on input that passed [`validate_activation`]; times, group ids and
/// scores are checked as it runs.
fn log_order_validated(
    isa: Isa,
    path: LogOrderPath,
    group: &[i64],
    at: &[f64],
    score: &[f64],
    now: f64,
    groups: usize,
) -> Result<Vec<f64>, CoreError> {
    let mut activation = crate::error::zeros(groups, "an activation per group (n_groups)")?;
    let result = match path {
        LogOrderPath::OneThread => {
            run(isa, LogOrder { group, at, score, now, activation: &mut activation })
        }
        LogOrderPath::Pipelined | LogOrderPath::PipelinedNarrow => {
            let narrow =
                path == LogOrderPath::PipelinedNarrow && groups as u64 <= NARROW_MAX_GROUPS;
            log_order_pipelined(isa, narrow, group, at, score, now, &mut activation)
        }
    };
    match result {
        Ok(()) => {}
        Err(LogOrderError::Time(start)) => return Err(bad_time(now, &at[start..], start)),
        Err(LogOrderError::Group(i)) => {
            return Err(CoreError::InvalidArgument(format!(
                "group[{i}] is {} but n_groups is {groups}; group ids must be in 0..n_groups",
                group[i]
            )))
        }
    }
    check_sums(&activation, score, "activation")?;
    Ok(activation)
}

/// Traces from which log order runs on two threads (see the design log): the pipeline's
/// crossover lies near 2^17 on Zen 4 and near 3 x 10^5 on Sapphire Rapids.
const LOG_ORDER_PARALLEL_MIN_TRACES: usize = 1 << 18;

/// The log-order kernel on inputs of equal lengths.
struct LogOrder<'a> {
    group: &'a [i64],
    at: &'a [f64],
    score: &'a [f64],
    now: f64,
    activation: &'a mut [f64],
}

/// Where the log-order kernel stopped: the first trace of a block holding an age out of range,
/// or a trace whose group id is out of range.
enum LogOrderError {
    Time(usize),
    Group(usize),
}

impl pulp::WithSimd for LogOrder<'_> {
    type Output = Result<(), LogOrderError>;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> Self::Output {
        let LogOrder { group, at, score, now, activation } = self;
        let mut scratch = Scratch::new();
        for (k, ((group, at), score)) in
            group.chunks(BLOCK).zip(at.chunks(BLOCK)).zip(score.chunks(BLOCK)).enumerate()
        {
            let start = k * BLOCK;
            let terms = scratch.terms(now, at, score).ok_or(LogOrderError::Time(start))?;
            add_terms(group, terms, activation, start)?;
        }
        Ok(())
    }
}

/// Adds `terms[j]` to `activation[group[j]]` in order, for the traces from number `start` on
/// (the shorter of the two sets the count). Its error is the first trace whose
/// group is out of range.
#[inline(always)]
fn add_terms(
    group: &[i64],
    terms: &[f64],
    activation: &mut [f64],
    start: usize,
) -> Result<(), LogOrderError> {
    for (j, (&g, &term)) in group.iter().zip(terms).enumerate() {
        match usize::try_from(g).ok().and_then(|g| activation.get_mut(g)) {
            Some(slot) => *slot += term,
            None => return Err(LogOrderError::Group(start + j)),
        }
    }
    Ok(())
}

/// Traces per batch the log-order pipeline hands from one thread to the other: a whole number
/// of blocks, whose terms (256 KiB; 384 KiB with the narrow pipeline's slots) stay in L2.
const PIPELINE_BATCH: usize = 64 * BLOCK;

/// Batches of terms the pipeline's second thread may be ahead.
const PIPELINE_DEPTH: usize = 2;

/// From how many traces the pipeline hands the episode ids over with the terms: once the
/// inputs (24 bytes a trace) outgrow the last-level cache, the adding thread is faster reading
/// them from the other core than streaming them from memory beside its adds.
const NARROW_MIN_TRACES: usize = 1 << 21;

/// The most episodes the narrow pipeline takes: its slots are `u32`.
const NARROW_MAX_GROUPS: u64 = 1 << 32;

/// The log-order kernel on two threads: the second computes the terms batch by batch, this one
/// adds them up in log order as they come, the same chain of adds as on one thread. `narrow`:
/// the second thread also reads the episode ids and hands them over checked, as `u32` slots, so
/// that this thread reads only the batches (see [`NARROW_MIN_TRACES`]); at most
/// [`NARROW_MAX_GROUPS`] episodes.
fn log_order_pipelined(
    isa: Isa,
    narrow: bool,
    group: &[i64],
    at: &[f64],
    score: &[f64],
    now: f64,
    activation: &mut [f64],
) -> Result<(), LogOrderError> {
    let groups = activation.len();
    let (full_tx, full_rx) = sync_channel::<Batch>(PIPELINE_DEPTH);
    let (empty_tx, empty_rx) = sync_channel::<Batch>(PIPELINE_DEPTH + 1);
    for _ in 0..=PIPELINE_DEPTH {
        // The channel holds all of them, so the send cannot fail.
        let _ = empty_tx.send(Batch::new(narrow));
    }
    // Both ends this thread keeps are moved into the scope's closure, so that an early return
    // drops them and the other thread, waiting on either, stops.
    std::thread::scope(move |scope| {
        scope.spawn(move || {
            let inputs = group
                .chunks(PIPELINE_BATCH)
                .zip(at.chunks(PIPELINE_BATCH))
                .zip(score.chunks(PIPELINE_BATCH));
            for ((group, at), score) in inputs {
                let Ok(mut batch) = empty_rx.recv() else { return };
                let group = if narrow { group } else { &[] };
                run(isa, Fill { group, at, score, now, groups, batch: &mut batch });
                let failed = batch.failed.is_some();
                if full_tx.send(batch).is_err() || failed {
                    return;
                }
            }
        });
        for (k, group) in group.chunks(PIPELINE_BATCH).enumerate() {
            let start = k * PIPELINE_BATCH;
            // The other thread sends every batch, or stops after one that failed.
            let Ok(batch) = full_rx.recv() else { unreachable!("batch {k} never came") };
            // The wide pipeline checks the ids here as it adds; `terms` ends at a failed block,
            // so a bad id before it is reported first, as on one thread. (The narrow one's
            // `Fill` checked them, in the same order.)
            if !narrow {
                add_terms(group, &batch.terms, activation, start)?;
            }
            match batch.failed {
                Some(LogOrderError::Time(i)) => return Err(LogOrderError::Time(start + i)),
                Some(LogOrderError::Group(i)) => return Err(LogOrderError::Group(start + i)),
                None => {}
            }
            for (&slot, &term) in batch.slots.iter().zip(&batch.terms) {
                // In range: `Fill` checked every slot against `groups`.
                activation[slot as usize] += term;
            }
            let _ = empty_tx.send(batch);
        }
        Ok(())
    })
}

/// One batch of the log-order pipeline: the terms of its traces, their episodes' slots (narrow
/// pipeline only), and where the batch failed if it did (counted from its first trace).
struct Batch {
    terms: Vec<f64>,
    slots: Vec<u32>,
    failed: Option<LogOrderError>,
}

impl Batch {
    fn new(narrow: bool) -> Self {
        Batch {
            terms: Vec::with_capacity(PIPELINE_BATCH),
            slots: Vec::with_capacity(if narrow { PIPELINE_BATCH } else { 0 }),
            failed: None,
        }
    }
}

/// Fills a [`Batch`] from one batch of traces, block by block, failing as one thread would: at
/// the first block holding an age out of range, or before it at the first group out of range
/// (a block's terms are computed before its adds, so a bad group in the failed block is not
/// reached). Slots are made for as many traces as `group` holds (none: no slots).
struct Fill<'a> {
    group: &'a [i64],
    at: &'a [f64],
    score: &'a [f64],
    now: f64,
    groups: usize,
    batch: &'a mut Batch,
}

impl pulp::WithSimd for Fill<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        let Fill { group, at, score, now, groups, batch } = self;
        let Batch { terms, slots, failed } = batch;
        terms.clear();
        *failed = None;
        let mut scratch = Scratch::new();
        for (k, (at, score)) in at.chunks(BLOCK).zip(score.chunks(BLOCK)).enumerate() {
            let Some(block) = scratch.terms(now, at, score) else {
                *failed = Some(LogOrderError::Time(k * BLOCK));
                break;
            };
            terms.extend_from_slice(&block[..at.len()]);
        }
        let group = &group[..group.len().min(terms.len())];
        slots.clear();
        slots.resize(group.len(), 0);
        let mut bad = false;
        for (slot, &g) in slots.iter_mut().zip(group) {
            // A negative id wraps to a huge one, so one unsigned compare checks both ends.
            bad |= g as u64 >= groups as u64;
            *slot = g as u32;
        }
        if bad {
            let i = group.iter().position(|&g| g as u64 >= groups as u64);
            *failed = i.map(LogOrderError::Group);
        }
    }
}

/// One block's working memory: half the minutes of each trace's age (then its term), and the f32
/// estimate of `1/sqrt(minutes)`. `half` has `SUM_LANES` slots more than a block, always 0, so
/// that [`masked_sum`] may read a whole chunk past a block's last trace.
struct Scratch {
    half: [f64; BLOCK + SUM_LANES],
    estimate: [f32; BLOCK],
}

impl Scratch {
    #[inline(always)]
    fn new() -> Self {
        Scratch { half: [0.0; BLOCK + SUM_LANES], estimate: [0.0; BLOCK] }
    }

    /// `score[i] * weight(now - at[i])` for one block of at most `BLOCK` traces, in the first
    /// `at.len()` entries of the returned slice (which is longer; see the struct), or None when
    /// some age is not a finite number of seconds within `MAX_AGE_SECONDS`. Three passes, each a
    /// plain loop that vectorises (see the design log).
    #[inline(always)]
    fn terms(&mut self, now: f64, at: &[f64], score: &[f64]) -> Option<&[f64]> {
        let n = at.len();
        let (half, estimate) = (&mut self.half[..n], &mut self.estimate[..n]);
        let mut out_of_range = false;
        for ((h, e), &at) in half.iter_mut().zip(estimate.iter_mut()).zip(at) {
            let age = now - at;
            out_of_range |= !age_in_range(age);
            let x = age * HALF_MINUTES_PER_SECOND;
            // max(1, minutes) / 2, as a compare and select: one `maxpd`.
            let x = if x < 0.5 { 0.5 } else { x };
            *h = x;
            *e = (x + x) as f32;
        }
        if out_of_range {
            return None;
        }
        for e in estimate.iter_mut() {
            // The first minute (and the future) gets exactly 1, which the Newton step below keeps
            // exact, rather than 1 to within 1e-14. A select on four f32 lanes is the cheapest
            // place for it.
            *e = if *e == 1.0 { 1.0 } else { inv_sqrt_estimate(*e) };
        }
        for ((h, &e), &s) in half.iter_mut().zip(estimate.iter()).zip(score) {
            // One Newton step in f64 for y = 1/sqrt(2h): y (3/2 - h y^2).
            let y = f64::from(e);
            *h = s * (y * (1.5 - *h * y * y));
        }
        // The slots past `n` are never written: they hold 0 from `new`.
        Some(&self.half[..])
    }
}

/// Whether an age in seconds is a number within `MAX_AGE_SECONDS` either way (false for NaN).
#[inline(always)]
fn age_in_range(age: f64) -> bool {
    age.abs() <= MAX_AGE_SECONDS
}

/// `1/sqrt(m)` for `m >= 1` to about 2e-7 relative: the bit-pattern estimate (3.4% error) and
/// three Newton steps, all in f32 so that four lanes share a register.
#[inline(always)]
fn inv_sqrt_estimate(m: f32) -> f32 {
    const MAGIC: u32 = 0x5f37_5a86;
    let h = 0.5 * m;
    let mut y = f32::from_bits(MAGIC.wrapping_sub(m.to_bits() >> 1));
    y *= 1.5 - h * y * y;
    y *= 1.5 - h * y * y;
    y *= 1.5 - h * y * y;
    y
}

/// Lanes of [`masked_sum`].
const SUM_LANES: usize = 4;

/// `terms[lo..hi]` summed in chunks of `SUM_LANES`, the last chunk masked rather than finished by
/// a second loop: one loop exit per episode for the branch predictor to miss, not two, and four
/// short chains of adds. Each chunk is loaded whole and its lanes past `hi` selected away, which
/// compiles to a compare and masked loads rather than a branch per lane (see the design log).
/// `terms` must extend `SUM_LANES - 1` entries past `hi`.
#[inline(always)]
fn masked_sum(terms: &[f64], lo: usize, hi: usize) -> f64 {
    let mut lanes = [0.0; SUM_LANES];
    let mut j = lo;
    while j < hi {
        let chunk: [f64; SUM_LANES] = terms[j..j + SUM_LANES].try_into().expect("SUM_LANES long");
        let left = (hi - j) as u64;
        let kept: [f64; SUM_LANES] =
            std::array::from_fn(|k| if (k as u64) < left { chunk[k] } else { 0.0 });
        for k in 0..SUM_LANES {
            lanes[k] += kept[k];
        }
        j += SUM_LANES;
    }
    (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])
}

/// The plain sum of a slice with `SUM_LANES` accumulators, for significance.
fn sum(x: &[f64]) -> f64 {
    let mut lanes = [0.0; SUM_LANES];
    let mut chunks = x.chunks_exact(SUM_LANES);
    for c in &mut chunks {
        for (lane, &v) in lanes.iter_mut().zip(c) {
            *lane += v;
        }
    }
    let mut total = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for &r in chunks.remainder() {
        total += r;
    }
    total
}

/// How the traces are assigned to episodes, for [`validate_activation`].
#[derive(Clone, Copy)]
enum Traces<'a> {
    /// CSR offsets: episode `g`'s traces are `offsets[g]..offsets[g + 1]`.
    Grouped(&'a [i64]),
    /// An episode id per trace, in log order.
    LogOrder(&'a [i64]),
}

/// The checks every activation kernel makes before it starts: a finite `now`, one time and one
/// score per trace (and one episode id, in log order), and well-formed offsets. Times, episode
/// ids and scores are checked by the kernels as they run: a pass of its own over them would cost
/// as much memory traffic as the kernel (see the design log).
fn validate_activation(
    traces: Traces<'_>,
    at: &[f64],
    score: &[f64],
    now: f64,
) -> Result<(), CoreError> {
    if !now.is_finite() {
        return Err(CoreError::InvalidArgument(format!(
            "now is {now}; it must be a finite Unix time in seconds"
        )));
    }
    let same_length = |a: &str, a_len: usize, b: &str, b_len: usize| {
        if a_len == b_len {
            Ok(())
        } else {
            Err(CoreError::InvalidArgument(format!(
                "{a} has {a_len} entries but {b} has {b_len}; there must be one per trace"
            )))
        }
    };
    if let Traces::LogOrder(group) = traces {
        same_length("group", group.len(), "at", at.len())?;
    }
    same_length("at", at.len(), "score", score.len())?;
    if let Traces::Grouped(offsets) = traces {
        check_offsets(offsets, at.len(), "groups", "traces")?;
    }
    Ok(())
}

/// The checks [`significance_grouped`] makes before it starts: well-formed offsets over the
/// scores. Scores are checked through their sums, as in activation.
fn validate_significance(offsets: &[i64], score: &[f64]) -> Result<(), CoreError> {
    check_offsets(offsets, score.len(), "groups", "traces")
}

/// The error for the first trace of a block (starting at trace `start`) whose time is out of range.
fn bad_time(now: f64, at: &[f64], start: usize) -> CoreError {
    let j = at.iter().position(|&a| !age_in_range(now - a)).unwrap_or(0);
    CoreError::InvalidArgument(format!(
        "at[{}] is {}; trace times must be finite Unix seconds within {MAX_AGE_SECONDS} s of now \
         ({now})",
        start + j,
        at.get(j).copied().unwrap_or(f64::NAN),
    ))
}

/// A non-finite sum comes from a non-finite score or from overflow; find which and say so.
fn check_sums(sums: &[f64], score: &[f64], what: &str) -> Result<(), CoreError> {
    let Some(g) = sums.iter().position(|s| !s.is_finite()) else {
        return Ok(());
    };
    if let Some(i) = score.iter().position(|s| !s.is_finite()) {
        return Err(CoreError::InvalidArgument(format!(
            "score[{i}] is {}; trace scores must be finite numbers",
            score[i]
        )));
    }
    Err(CoreError::InvalidArgument(format!(
        "the {what} of group {g} is {}: its scores add up beyond the range of f64",
        sums[g]
    )))
}

/// The slow, obvious twin of [`activation_grouped`], for tests: [`trace_weight`] and a plain sum
/// per episode, after the same validation.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn activation_grouped_naive(
    offsets: &[i64],
    at: &[f64],
    score: &[f64],
    now: f64,
) -> Result<Vec<f64>, CoreError> {
    validate_activation(Traces::Grouped(offsets), at, score, now)?;
    if let Some(i) = at.iter().position(|&a| !age_in_range(now - a)) {
        return Err(bad_time(now, &at[i..], i));
    }
    let activation: Vec<f64> = offsets
        .windows(2)
        .map(|w| {
            let range = w[0] as usize..w[1] as usize;
            at[range.clone()]
                .iter()
                .zip(&score[range])
                .map(|(&a, &s)| s * trace_weight(now - a))
                .sum()
        })
        .collect();
    check_sums(&activation, score, "activation")?;
    Ok(activation)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_767_225_600.0;

    /// Found writing the fuzz target `activation` (issue 33), which cannot itself ask for more
    /// than libFuzzer's malloc limit: an n_groups Python can pass whose output cannot be
    /// allocated panicked ("capacity overflow") or aborted the process.
    #[test]
    fn log_order_unallocatable_n_groups_is_an_error() {
        for groups in [usize::MAX, usize::MAX / 8 + 1, 1 << 50] {
            let got = activation_log_order(&[], &[], &[], NOW, groups);
            assert!(matches!(got, Err(CoreError::InvalidArgument(_))), "{groups}: {got:?}");
        }
        assert_eq!(activation_log_order(&[], &[], &[], NOW, 3), Ok(vec![0.0; 3]));
    }

    fn one(age_seconds: f64) -> f64 {
        let got = activation_grouped(&[0, 1], &[NOW - age_seconds], &[1.0], NOW).expect("valid");
        got[0]
    }

    #[test]
    fn the_spec_table() {
        // (age in seconds, the weight as the spec's table shows it, its decimals)
        let table: &[(f64, f64, i32)] = &[
            (0.0, 1.0, 0),
            (60.0, 1.00, 2),
            (240.0, 0.50, 2),
            (3600.0, 0.13, 2),
            (86_400.0, 0.026, 3),
        ];
        for &(age, shown, decimals) in table {
            let w = one(age);
            let scale = 10f64.powi(decimals);
            assert_eq!((w * scale).round() / scale, shown, "age {age}: weight {w}");
        }
        // And the exact values: 1/sqrt(60) and 1/sqrt(1440).
        for (age, exact) in [
            (0.0, 1.0),
            (60.0, 1.0),
            (240.0, 0.5),
            (3600.0, 60f64.sqrt().recip()),
            (86_400.0, 1440f64.sqrt().recip()),
        ] {
            assert!(
                (one(age) - exact).abs() <= 1e-13 * exact,
                "age {age}: {} vs {exact}",
                one(age)
            );
        }
    }

    #[test]
    fn the_first_minute_and_the_future_count_in_full() {
        for age in [0.0, 1.0, 30.0, 59.999, -1.0, -3600.0, -1e9] {
            assert_eq!(one(age), 1.0, "age {age}");
        }
    }

    #[test]
    fn weights_match_the_exact_formula() {
        // Ages from a minute to 2^53 s, log-spaced and dense, plus every f32 mantissa pattern of
        // two adjacent binades (the estimate's error depends only on those and the exponent
        // parity).
        let mut ages: Vec<f64> = (0..200_000).map(|i| 60.0 * (i as f64 * 1.7e-4).exp2()).collect();
        ages.retain(|&a| a <= MAX_AGE_SECONDS);
        ages.extend((0..1u32 << 16).map(|m| 60.0 * (1.0 + f64::from(m) / 65536.0) * 1024.0));
        ages.extend((0..1u32 << 16).map(|m| 60.0 * (1.0 + f64::from(m) / 65536.0) * 2048.0));
        let at: Vec<f64> = ages.iter().map(|a| NOW - a).collect();
        let offsets: Vec<i64> = (0..=at.len() as i64).collect();
        let got = activation_grouped(&offsets, &at, &vec![1.0; at.len()], NOW).expect("valid");
        for ((&w, &a), &t) in got.iter().zip(&ages).zip(&at) {
            let exact = trace_weight(NOW - t);
            assert!((w - exact).abs() <= 1e-13 * exact, "age {a}: {w} vs {exact}");
        }
    }

    #[test]
    fn table() {
        // (offsets, at as ages in seconds, scores, expected activation)
        type Case = (&'static [i64], &'static [f64], &'static [f64], &'static [f64]);
        let cases: &[Case] = &[
            (&[0], &[], &[], &[]),
            (&[0, 0], &[], &[], &[0.0]),
            (&[0, 0, 0], &[], &[], &[0.0, 0.0]),
            (&[0, 2], &[0.0, 240.0], &[1.0, 2.0], &[2.0]),
            (&[0, 1, 1, 3], &[240.0, 0.0, 60.0], &[1.0, 0.5, 0.25], &[0.5, 0.0, 0.75]),
            (&[0, 2], &[240.0, 240.0], &[1.0, -1.0], &[0.0]),
        ];
        let close = |got: Vec<f64>, want: &[f64]| {
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() <= 1e-13, "{got:?} vs {want:?}");
            }
        };
        for &(offsets, ages, scores, want) in cases {
            let at: Vec<f64> = ages.iter().map(|a| NOW - a).collect();
            close(activation_grouped(offsets, &at, scores, NOW).expect("valid"), want);
            close(activation_grouped_naive(offsets, &at, scores, NOW).expect("valid"), want);
            let group: Vec<i64> = offsets
                .windows(2)
                .enumerate()
                .flat_map(|(g, w)| std::iter::repeat_n(g as i64, (w[1] - w[0]) as usize))
                .collect();
            let groups = offsets.len() - 1;
            close(activation_log_order(&group, &at, scores, NOW, groups).expect("valid"), want);
        }
    }

    #[test]
    fn episodes_straddle_blocks() {
        // One long episode, then short ones, across several blocks; weights of exactly 1 sum
        // exactly, so the result is exact.
        let n = 3 * BLOCK + 17;
        let at = vec![NOW - 30.0; n];
        let score = vec![1.0; n];
        let offsets = [0, (BLOCK + 5) as i64, (BLOCK + 5) as i64, (2 * BLOCK) as i64, n as i64];
        let got = activation_grouped(&offsets, &at, &score, NOW).expect("valid");
        let want: Vec<f64> = offsets.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn significance_is_the_plain_sum() {
        assert_eq!(
            significance_grouped(&[0, 2, 2, 3], &[1.0, 0.5, 0.25]),
            Ok(vec![1.5, 0.0, 0.25])
        );
        assert_eq!(significance_grouped(&[0], &[]), Ok(vec![]));
    }

    #[test]
    fn errors() {
        let bad = |r: Result<Vec<f64>, CoreError>| match r {
            Err(CoreError::InvalidArgument(msg)) => msg,
            other => panic!("expected InvalidArgument, got {other:?}"),
        };
        let at = [NOW, NOW];
        let s = [1.0, 1.0];
        assert!(bad(activation_grouped(&[], &[], &[], NOW)).contains("offsets is empty"));
        assert!(bad(activation_grouped(&[1, 2], &at, &s, NOW)).contains("offsets[0] is 1"));
        assert!(bad(activation_grouped(&[0, 2, 1, 2], &at, &s, NOW))
            .contains("offsets[2] is 1 but offsets[1] is 2"));
        assert!(bad(activation_grouped(&[0, 1], &at, &s, NOW))
            .contains("offsets ends at 1 but there are 2"));
        assert!(bad(activation_grouped(&[0, 2], &at, &[1.0], NOW))
            .contains("at has 2 entries but score has 1"));
        assert!(bad(activation_grouped(&[0, 2], &at, &s, f64::NAN)).contains("now is NaN"));
        assert!(bad(activation_grouped(&[0, 2], &at, &s, f64::INFINITY)).contains("now is inf"));
        assert!(
            bad(activation_grouped(&[0, 2], &[NOW, f64::NAN], &s, NOW)).contains("at[1] is NaN")
        );
        assert!(bad(activation_grouped(&[0, 2], &[f64::NEG_INFINITY, NOW], &s, NOW))
            .contains("at[0] is -inf"));
        assert!(bad(activation_grouped(&[0, 2], &[NOW, -1e16], &s, NOW))
            .contains("at[1] is -10000000000000000"));
        let mut far = vec![NOW; 2 * BLOCK];
        far[BLOCK + 3] = f64::NAN;
        let offsets = [0, far.len() as i64];
        assert!(bad(activation_grouped(&offsets, &far, &vec![1.0; far.len()], NOW))
            .contains(&format!("at[{}] is NaN", BLOCK + 3)));
        assert!(bad(activation_grouped(&[0, 2], &at, &[1.0, f64::NAN], NOW))
            .contains("score[1] is NaN"));
        assert!(bad(activation_grouped(&[0, 1, 2], &at, &[f64::INFINITY, 1.0], NOW))
            .contains("score[0] is inf"));
        assert!(bad(activation_grouped(&[0, 2], &at, &[f64::MAX, f64::MAX], NOW))
            .contains("beyond the range"));
        assert!(bad(significance_grouped(&[0, 2], &[1.0, f64::NEG_INFINITY]))
            .contains("score[1] is -inf"));
        assert!(bad(significance_grouped(&[0, 3], &[1.0, 1.0])).contains("offsets ends at 3"));
        assert!(bad(activation_log_order(&[0, 2], &at, &s, NOW, 2))
            .contains("group[1] is 2 but n_groups is 2"));
        assert!(bad(activation_log_order(&[-1, 0], &at, &s, NOW, 2)).contains("group[0] is -1"));
        assert!(bad(activation_log_order(&[0], &at, &s, NOW, 2))
            .contains("group has 1 entries but at has 2"));
        assert!(bad(activation_log_order(&[0, 0], &at, &[1.0], NOW, 1))
            .contains("at has 2 entries but score has 1"));
    }
}
