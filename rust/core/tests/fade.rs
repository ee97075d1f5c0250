//! Property tests for the fade: the radix order against a comparison sort, and the pick's
//! promises (a prefix of the order that reaches the landing, and no longer than it must be).

use fadeway_core::fade::{
    fade, fade_naive, fade_order, fade_order_naive, fade_order_on, fade_pick,
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
