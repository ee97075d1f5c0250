//! Property tests for the fade: the radix order (whole, and its first episodes found without
//! ordering the rest) against a comparison sort, and the pick's promises (a prefix of the order
//! that reaches the landing, and no longer than it must be).

use fadeway_core::fade::{
    fade, fade_naive, fade_on, fade_order, fade_order_first, fade_order_first_on, fade_order_naive,
    fade_order_on, fade_pick, SAMPLED_KEYS,
};
use fadeway_core::Isa;
use proptest::prelude::*;

/// Activations with many ties (a few values), close calls (equal in f32, not in f64), signs and
/// extremes; ties keys from a small range so they tie too.
fn episodes() -> impl Strategy<Value = (Vec<f64>, Vec<i64>)> {
    let activation = prop_oneof![
        3 => 0.0f64..50.0,
        2 => (0u32..6).prop_map(|k| f64::from(k) * 0.5),
        1 => (0u32..4).prop_map(|k| 1.0 + f64::from(k) * 1e-12),
        1 => prop::num::f64::NORMAL
            | prop::num::f64::ZERO
            | prop::num::f64::INFINITE
            | prop::num::f64::SUBNORMAL,
    ];
    (0usize..300).prop_flat_map(move |n| {
        (prop::collection::vec(activation.clone(), n), prop::collection::vec(-3i64..3, n))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn order_equals_naive((activation, tie) in episodes()) {
        let fast = fade_order(&activation, &tie).expect("valid");
        prop_assert_eq!(&fast, &fade_order_naive(&activation, &tie).expect("valid"));
        let mut seen = fast.clone();
        seen.sort_unstable();
        prop_assert!(seen.iter().copied().eq(0..activation.len()), "not a permutation");
    }

    #[test]
    fn dispatched_order_equals_baseline((activation, tie) in episodes()) {
        let detected = fade_order_on(Isa::Detected, &activation, &tie).expect("valid");
        prop_assert_eq!(detected, fade_order_on(Isa::Baseline, &activation, &tie).expect("valid"));
    }

    #[test]
    fn fade_equals_naive(
        (activation, tie) in episodes(),
        sizes_seed in prop::collection::vec(0i64..500, 300),
        view in 0i64..20_000,
        landing in 0i64..20_000,
    ) {
        let sizes = &sizes_seed[..activation.len()];
        let picked = fade(&activation, &tie, sizes, view, landing).expect("valid");
        let naive = fade_naive(&activation, &tie, sizes, view, landing).expect("valid");
        prop_assert_eq!(&picked, &naive);

        let order = fade_order(&activation, &tie).expect("valid");
        // A prefix of the order, as long as fade_pick says.
        prop_assert_eq!(&order[..picked.len()], &picked[..]);
        prop_assert_eq!(fade_pick(&order, sizes, view, landing).expect("valid"), picked.len());
        let projected = |k: usize| view - picked[..k].iter().map(|&e| sizes[e]).sum::<i64>();
        // It reaches the landing unless every episode was picked ...
        prop_assert!(projected(picked.len()) <= landing || picked.len() == activation.len());
        // ... and one pick fewer would not have.
        if !picked.is_empty() {
            prop_assert!(projected(picked.len() - 1) > landing);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn first_equals_a_prefix_of_naive((activation, tie) in episodes(), limit in 0usize..320) {
        let naive = fade_order_naive(&activation, &tie).expect("valid");
        let first = fade_order_first(&activation, &tie, limit).expect("valid");
        prop_assert_eq!(&first[..], &naive[..limit.min(activation.len())]);
        let baseline = fade_order_first_on(Isa::Baseline, &activation, &tie, limit).expect("valid");
        prop_assert_eq!(first, baseline);
    }
}

/// A xorshift stream, so that large cases come from a small seed.
struct Stream(u64);

impl Stream {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Large enough that a prefix's bound comes from a sample of the keys.
const LARGE: usize = 40_000;

/// `n` activations of one of several shapes: spread over decades, a few values (long runs of
/// ties), rising or falling with the index (how activations age), extremes, clusters a few f32
/// steps wide amid a wide spread (runs that the sort's top bits leave tied, short and long), or
/// a trap for the sample of keys that bounds a prefix: the sampled episodes low, every other one
/// high, so that the sample's bound falls short and the exact histogram must take over.
fn large_activations(shape: u8, n: usize, s: &mut Stream) -> Vec<f64> {
    (0..n)
        .map(|i| match shape {
            0 => (12.0 * s.unit() - 6.0).exp2(),
            1 => f64::from((s.next() % 5) as u32) * 0.25,
            2 => i as f64 * 1e-3 + 0.1 * s.unit(),
            3 => (n - i) as f64 * 1e-3,
            // Keys over the whole range, infinity among them.
            4 => [f64::INFINITY, 1e-300, 1e300, s.unit()][i % 4],
            5 => match i % 3 {
                0 => (40.0 * s.unit() - 20.0).exp2(),
                // 2^-23 is one f32 step at 1.0; the 1e-13 a difference only f64 sees.
                1 => 1.0 + (s.next() % 256) as f64 * 2f64.powi(-23) + 1e-13 * s.unit(),
                _ => 1e-3 * (1.0 + (s.next() % 8) as f64 * 2f64.powi(-23)),
            },
            _ => {
                if i % (n / SAMPLED_KEYS) == 0 {
                    s.unit()
                } else {
                    2.0 + s.unit()
                }
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn large_first_and_fade_equal_naive(
        seed in 1u64..u64::MAX,
        shape in 0u8..7,
        extra in 0usize..5_000,
        share in 0.0f64..1.0,
    ) {
        let mut s = Stream(seed);
        let n = LARGE + extra;
        let activation = large_activations(shape, n, &mut s);
        let tie: Vec<i64> = (0..n as i64).map(|i| i % 7).collect();
        let naive = fade_order_naive(&activation, &tie).expect("valid");
        // Short and long prefixes, and past the share of the trap's low episodes (below 1/16).
        for limit in [1, (share * n as f64) as usize, n / 16 + 1, n / 8, n - 1] {
            let first = fade_order_first(&activation, &tie, limit).expect("valid");
            prop_assert_eq!(&first[..], &naive[..limit], "limit {}", limit);
            let baseline = fade_order_first_on(Isa::Baseline, &activation, &tie, limit);
            prop_assert_eq!(first, baseline.expect("valid"));
        }
        let sizes: Vec<i64> = (0..n).map(|_| (s.next() % 2_000) as i64).collect();
        let view: i64 = sizes.iter().sum();
        for landing in [view - 1, view - (share * view as f64) as i64, view / 2, 0] {
            let picked = fade(&activation, &tie, &sizes, view, landing).expect("valid");
            let naive = fade_naive(&activation, &tie, &sizes, view, landing).expect("valid");
            prop_assert_eq!(&picked, &naive, "landing {}", landing);
            let baseline = fade_on(Isa::Baseline, &activation, &tie, &sizes, view, landing);
            prop_assert_eq!(picked, baseline.expect("valid"));
        }
    }
}

/// The prefix of `n` episodes of every shape, on `isa`, against the naive order.
fn check_prefixes(isa: Isa, n: usize, shapes: &[u8]) {
    let mut s = Stream(0x5eed);
    for &shape in shapes {
        let activation = large_activations(shape, n, &mut s);
        let tie: Vec<i64> = (0..n as i64).map(|i| i % 5).collect();
        let naive = fade_order_naive(&activation, &tie).expect("valid");
        for limit in [1, n / 100, n / 10, n / 2] {
            let first = fade_order_first_on(isa, &activation, &tie, limit).expect("valid");
            assert_eq!(first[..], naive[..limit], "{isa:?}, shape {shape}, limit {limit}");
        }
        let sizes: Vec<i64> = (0..n).map(|_| (s.next() % 2_000) as i64).collect();
        let view: i64 = sizes.iter().sum();
        let picked = fade_on(isa, &activation, &tie, &sizes, view, view - view / 10);
        let naive = fade_naive(&activation, &tie, &sizes, view, view - view / 10).expect("valid");
        assert_eq!(picked.expect("valid"), naive, "{isa:?}, shape {shape}");
    }
}

#[test]
fn a_prefix_split_over_threads_equals_naive() {
    // Past the size from which plain loops keep a prefix's episodes on two threads; the
    // dispatched path (AVX-512's compress, where the CPU has it) runs on one here.
    for isa in [Isa::Baseline, Isa::Detected] {
        check_prefixes(isa, 300_001, &[0, 1, 2, 3, 4, 5, 6]);
    }
}

#[test]
fn a_compressed_prefix_split_over_threads_equals_naive() {
    // Past the size from which AVX-512's compress keeps them on two threads.
    check_prefixes(Isa::Detected, (1 << 20) + 3, &[0, 6]);
}
