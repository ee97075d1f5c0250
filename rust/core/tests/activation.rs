//! Property tests for activation and significance: the kernels against their naive twin (f64
//! `sqrt`, a plain sum per episode), the two layouts against each other, and the spec's promises
//! checked directly.

use fadeway_core::activation::{
    activation_grouped, activation_grouped_naive, activation_grouped_on,
    activation_grouped_threads, activation_log_order, activation_log_order_on,
    activation_log_order_path, significance_grouped, trace_weight, LogOrderPath,
};
use fadeway_core::Isa;
use proptest::prelude::*;

const NOW: f64 = 1_767_225_600.0;

/// Episodes of traces as CSR: offsets, times (ages from the future to ten years, a good share
/// within the first minute and at exact minutes) and scores (mostly in (0, 1], some negative).
fn traces() -> impl Strategy<Value = (Vec<i64>, Vec<f64>, Vec<f64>)> {
    let age = prop_oneof![
        3 => -1e6f64..3e8,
        1 => -120.0f64..120.0,
        1 => (0u32..100_000).prop_map(|m| 60.0 * f64::from(m)),
        1 => Just(0.0),
    ];
    let score = prop_oneof![4 => 0.0f64..=1.0, 1 => -5.0f64..5.0];
    prop::collection::vec(prop::collection::vec((age, score), 0..40), 0..60).prop_map(|groups| {
        let mut offsets = vec![0i64];
        let (mut at, mut score) = (Vec::new(), Vec::new());
        for g in &groups {
            for &(age, s) in g {
                at.push(NOW - age);
                score.push(s);
            }
            offsets.push(at.len() as i64);
        }
        (offsets, at, score)
    })
}

/// Within `tol` of `want`, relative to the sum of the terms' magnitudes (a sum with cancellation
/// can only be as exact as its largest terms).
fn close(got: &[f64], want: &[f64], scale: &[f64], tol: f64) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.len(), want.len());
    for ((g, w), s) in got.iter().zip(want).zip(scale) {
        prop_assert!(
            (g - w).abs() <= tol * s.max(f64::MIN_POSITIVE),
            "{} vs {} (scale {})",
            g,
            w,
            s
        );
    }
    Ok(())
}

fn magnitudes(offsets: &[i64], at: &[f64], score: &[f64]) -> Vec<f64> {
    offsets
        .windows(2)
        .map(|w| {
            (w[0] as usize..w[1] as usize)
                .map(|i| (score[i] * trace_weight(NOW - at[i])).abs())
                .sum()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn equals_naive((offsets, at, score) in traces()) {
        let fast = activation_grouped(&offsets, &at, &score, NOW).expect("valid");
        let naive = activation_grouped_naive(&offsets, &at, &score, NOW).expect("valid");
        close(&fast, &naive, &magnitudes(&offsets, &at, &score), 1e-12)?;
    }

    #[test]
    fn dispatched_equals_baseline_bit_for_bit((offsets, at, score) in traces(), seed in any::<u64>()) {
        // Whatever instruction set this CPU dispatches to gives the bits of the SSE2 baseline.
        let bits = |x: Vec<f64>| x.into_iter().map(f64::to_bits).collect::<Vec<_>>();
        let detected = activation_grouped_on(Isa::Detected, &offsets, &at, &score, NOW);
        let baseline = activation_grouped_on(Isa::Baseline, &offsets, &at, &score, NOW);
        prop_assert_eq!(bits(detected.expect("valid")), bits(baseline.expect("valid")));
        let groups = offsets.len() - 1;
        let group: Vec<i64> = (0..at.len() as u64)
            .map(|i| ((i.wrapping_mul(seed | 1) >> 7) % groups.max(1) as u64) as i64)
            .collect();
        if groups > 0 {
            let detected = activation_log_order_on(Isa::Detected, &group, &at, &score, NOW, groups);
            let baseline = activation_log_order_on(Isa::Baseline, &group, &at, &score, NOW, groups);
            prop_assert_eq!(bits(detected.expect("valid")), bits(baseline.expect("valid")));
        }
    }

    #[test]
    fn log_order_equals_grouped((offsets, at, score) in traces(), seed in any::<u64>()) {
        // The same traces shuffled, each with its episode's id.
        let mut rows: Vec<(i64, f64, f64)> = offsets
            .windows(2)
            .enumerate()
            .flat_map(|(g, w)| (w[0] as usize..w[1] as usize).map(move |i| (g as i64, i)))
            .map(|(g, i)| (g, at[i], score[i]))
            .collect();
        let mut state = seed | 1;
        for i in (1..rows.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            rows.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let group: Vec<i64> = rows.iter().map(|r| r.0).collect();
        let at_log: Vec<f64> = rows.iter().map(|r| r.1).collect();
        let score_log: Vec<f64> = rows.iter().map(|r| r.2).collect();
        let groups = offsets.len() - 1;
        let log = activation_log_order(&group, &at_log, &score_log, NOW, groups).expect("valid");
        let grouped = activation_grouped(&offsets, &at, &score, NOW).expect("valid");
        close(&log, &grouped, &magnitudes(&offsets, &at, &score), 1e-12)?;
    }

    #[test]
    fn significance_is_the_unfaded_sum((offsets, _at, score) in traces()) {
        let got = significance_grouped(&offsets, &score).expect("valid");
        let scale: Vec<f64> = offsets
            .windows(2)
            .map(|w| score[w[0] as usize..w[1] as usize].iter().map(|s| s.abs()).sum())
            .collect();
        let want: Vec<f64> =
            offsets.windows(2).map(|w| score[w[0] as usize..w[1] as usize].iter().sum()).collect();
        close(&got, &want, &scale, 1e-12)?;
    }

    #[test]
    fn a_trace_never_weighs_more_than_its_score(age in -1e9f64..1e12) {
        let w = activation_grouped(&[0, 1], &[NOW - age], &[1.0], NOW).expect("valid")[0];
        prop_assert!(w > 0.0 && w <= 1.0, "age {} weight {}", age, w);
        if age <= 60.0 {
            prop_assert_eq!(w, 1.0);
        }
    }

    #[test]
    fn older_is_never_heavier(a in 0f64..1e10, b in 0f64..1e10) {
        let (young, old) = if a <= b { (a, b) } else { (b, a) };
        let w = activation_grouped(&[0, 1, 2], &[NOW - young, NOW - old], &[1.0, 1.0], NOW)
            .expect("valid");
        // To the kernel's accuracy: two ages within 1e-13 of each other may swap.
        prop_assert!(w[0] >= w[1] * (1.0 - 1e-13), "{} s: {}, {} s: {}", young, w[0], old, w[1]);
    }
}

/// The bit-for-bit check on a large input: many blocks, episodes straddling them, ages from the
/// future to a century, and the benchmark's mix.
#[test]
fn dispatched_equals_baseline_on_a_large_log() {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
    let n = 200_003;
    let lengths: Vec<usize> = (0..10_000).map(|_| (next() % 60) as usize).collect();
    let (offsets, at, score) = large_log(n, &lengths, next());
    let bits = |x: Vec<f64>| x.into_iter().map(f64::to_bits).collect::<Vec<_>>();
    let detected = activation_grouped_on(Isa::Detected, &offsets, &at, &score, NOW);
    let baseline = activation_grouped_threads(Isa::Baseline, 1, &offsets, &at, &score, NOW);
    assert_eq!(bits(detected.expect("valid")), bits(baseline.expect("valid")));
    let groups = offsets.len() - 1;
    let group: Vec<i64> = (0..n).map(|_| (next() % groups as u64) as i64).collect();
    let detected = activation_log_order_on(Isa::Detected, &group, &at, &score, NOW, groups);
    let baseline = activation_log_order_on(Isa::Baseline, &group, &at, &score, NOW, groups);
    assert_eq!(bits(detected.expect("valid")), bits(baseline.expect("valid")));
}

/// A xorshift64 stream from `seed`: large inputs, reproducibly, without a dependency.
fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// A large log from episode lengths drawn from `lengths` (cycled) until `n` traces: times from
/// the future to a century, scores mostly in (0, 1.5).
fn large_log(n: usize, lengths: &[usize], seed: u64) -> (Vec<i64>, Vec<f64>, Vec<f64>) {
    let mut next = xorshift(seed);
    let unit = |x: u64| (x >> 11) as f64 / (1u64 << 53) as f64;
    let mut offsets = vec![0i64];
    let stuck = lengths.iter().all(|&len| len == 0); // then one more episode takes every trace
    for &len in lengths.iter().cycle() {
        let last = *offsets.last().expect("non-empty") as usize;
        if last >= n {
            break;
        }
        offsets.push((last + if stuck { n } else { len }).min(n) as i64);
    }
    let at: Vec<f64> = (0..n).map(|_| NOW + 600.0 - 3.2e9f64.powf(unit(next()))).collect();
    let score: Vec<f64> = (0..n).map(|_| 2.0 * unit(next()) - 0.5).collect();
    (offsets, at, score)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Split over threads, every episode gets the same bits as on one: episodes that cross the
    /// threads' boundaries, span several threads' blocks, are empty at a boundary, or end on
    /// one.
    #[test]
    fn threads_equal_one_thread_bit_for_bit(
        lengths in prop::collection::vec(prop_oneof![
            4 => 0usize..60,
            1 => Just(0usize),
            1 => Just(512usize),
            1 => 1_000usize..80_000,
        ], 1..40),
        n in 60_000usize..200_000,
        seed in any::<u64>(),
    ) {
        let (offsets, at, score) = large_log(n, &lengths, seed);
        let one = activation_grouped_threads(Isa::Baseline, 1, &offsets, &at, &score, NOW)
            .expect("valid");
        for threads in [2, 3, 7] {
            for isa in [Isa::Baseline, Isa::Detected] {
                let split = activation_grouped_threads(isa, threads, &offsets, &at, &score, NOW)
                    .expect("valid");
                let differs = split.iter().zip(&one).position(|(a, b)| a.to_bits() != b.to_bits());
                prop_assert!(differs.is_none(), "{} threads: episode {:?} of {}, {:?} against {:?}",
                             threads, differs, one.len(), differs.map(|g| split[g]),
                             differs.map(|g| one[g]));
            }
        }
    }
}

#[test]
fn threads_report_the_first_bad_time() {
    let (offsets, mut at, score) = large_log(150_000, &[7, 40, 3, 0, 900], 5);
    at[120_000] = f64::NAN; // in the last thread's blocks
    for threads in [1, 2, 3] {
        let err = activation_grouped_threads(Isa::Detected, threads, &offsets, &at, &score, NOW)
            .expect_err("a NaN time");
        assert!(err.to_string().contains("at[120000] is NaN"), "{threads} threads: {err}");
    }
    at[20_000] = f64::INFINITY; // and one in the first thread's
    for threads in [1, 2, 3] {
        let err = activation_grouped_threads(Isa::Detected, threads, &offsets, &at, &score, NOW)
            .expect_err("an infinite time");
        assert!(err.to_string().contains("at[20000] is inf"), "{threads} threads: {err}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// In log order, terms computed on a second thread (with the episode ids or without) and
    /// added up on the first give the same bits as one thread, over every batch boundary and a
    /// last batch of any length.
    #[test]
    fn log_order_pipeline_equals_one_thread_bit_for_bit(
        n in 1usize..150_000,
        groups in 1usize..5_000,
        seed in any::<u64>(),
    ) {
        let (_, at, score) = large_log(n, &[n], seed);
        let mut next = xorshift(seed ^ 0x5555);
        let group: Vec<i64> = (0..n).map(|_| (next() % groups as u64) as i64).collect();
        let log = |path| {
            activation_log_order_path(Isa::Detected, path, &group, &at, &score, NOW, groups)
                .expect("valid")
        };
        let one = log(LogOrderPath::OneThread);
        for path in [LogOrderPath::Pipelined, LogOrderPath::PipelinedNarrow] {
            let two = log(path);
            let differs = two.iter().zip(&one).position(|(a, b)| a.to_bits() != b.to_bits());
            prop_assert!(differs.is_none(), "{:?}: episode {:?}", path, differs);
        }
    }
}

#[test]
fn log_order_pipeline_reports_errors_as_one_thread() {
    let n = 140_000;
    let (_, at, score) = large_log(n, &[n], 9);
    let groups = 100;
    let group: Vec<i64> = (0..n as i64).map(|i| i % groups).collect();
    let errors = |group: &[i64], at: &[f64]| {
        [LogOrderPath::OneThread, LogOrderPath::Pipelined, LogOrderPath::PipelinedNarrow].map(
            |path| {
                activation_log_order_path(
                    Isa::Detected,
                    path,
                    group,
                    at,
                    &score,
                    NOW,
                    groups as usize,
                )
                .expect_err("bad input")
                .to_string()
            },
        )
    };
    // A bad time in a late batch; a bad group before it (in another batch, in the batch's
    // previous block), reported first; one in the bad time's own block comes after it, since a
    // block's terms are computed before they are added.
    let mut bad_at = at.clone();
    bad_at[100_000] = f64::NAN;
    let [one, two, narrow] = errors(&group, &bad_at);
    assert!(one.contains("at[100000] is NaN"), "{one}");
    assert_eq!([&one, &one], [&two, &narrow]);
    for (g, id, want) in [
        (70_000, groups, "group[70000] is 100"),
        (40_000, -1, "group[40000] is -1"),
        (99_700, groups, "group[99700] is 100"),
        (99_990, groups, "at[100000] is NaN"),
    ] {
        let mut bad_group = group.clone();
        bad_group[g] = id;
        let [one, two, narrow] = errors(&bad_group, &bad_at);
        assert!(one.contains(want), "{one}");
        assert_eq!([&one, &one], [&two, &narrow]);
    }
    // A bad group after the bad time's block is never reached.
    let mut bad_group = group.clone();
    bad_group[130_000] = -1;
    let [one, two, narrow] = errors(&bad_group, &bad_at);
    assert!(one.contains("at[100000] is NaN"), "{one}");
    assert_eq!([&one, &one], [&two, &narrow]);
}
