//! `fade_order(activation, tie, limit)` and `fade(activation, tie, sizes, view, landing)` as the
//! binding calls them: float64 activations (NaN, inf, -0.0 included), int64 ties and sizes of
//! any lengths, any limit (huge too), any view and landing.
#![no_main]

use arbitrary::Arbitrary;
use fadeway_core::fade;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Act {
    /// Any bits: NaN and infinities included.
    Any(f64),
    /// A few values, so ties are common.
    Few(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    activation: Vec<Act>,
    tie: Vec<i64>,
    sizes: Vec<i64>,
    /// Lengths kept as given (mismatched) instead of made equal.
    mismatch: bool,
    limit: Option<usize>,
    view: i64,
    landing: i64,
}

fuzz_target!(|input: Input| {
    let activation: Vec<f64> = input
        .activation
        .iter()
        .map(|a| match *a {
            Act::Any(x) => x,
            Act::Few(k) => [0.0, -0.0, 1.0, 0.5, f64::INFINITY, f64::NEG_INFINITY][k as usize % 6],
        })
        .collect();
    let n = activation.len();
    let (mut tie, mut sizes) = (input.tie, input.sizes);
    if !input.mismatch {
        tie.resize(n, 0);
        sizes.resize(n, 1);
    }
    let full = fade::fade_order(&activation, &tie);
    let nan = activation.iter().any(|a| a.is_nan());
    match &full {
        Ok(order) => {
            assert!(!nan && tie.len() == n, "bad input accepted");
            let mut seen = order.clone();
            seen.sort_unstable();
            assert!(seen.iter().copied().eq(0..n), "not a permutation");
            for w in order.windows(2) {
                let (a, b) = (w[0], w[1]);
                let key = |i: usize| (activation[i] + 0.0, tie[i], i);
                assert!(key(a).partial_cmp(&key(b)) == Some(std::cmp::Ordering::Less), "order");
            }
        }
        Err(_) => assert!(nan || tie.len() != n, "good input refused"),
    }
    if let Some(limit) = input.limit {
        let first = fade::fade_order_first(&activation, &tie, limit);
        match (&full, first) {
            (Ok(order), Ok(first)) => assert_eq!(first, order[..limit.min(n)], "prefix differs"),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("fade_order {a:?} but fade_order_first {b:?}"),
        }
    }
    if let Ok(picked) = fade::fade(&activation, &tie, &sizes, input.view, input.landing) {
        let order = full.as_ref().expect("fade accepted what fade_order refused");
        assert_eq!(picked, order[..picked.len()], "fade is not a prefix of the order");
        let taken: i128 = picked.iter().map(|&i| i128::from(sizes[i])).sum();
        let left = i128::from(input.view) - taken;
        if picked.len() < n {
            assert!(left <= i128::from(input.landing), "stopped above the landing");
        }
        if let Some(&last) = picked.last() {
            assert!(
                left + i128::from(sizes[last]) > i128::from(input.landing),
                "took one too many"
            );
        }
    }
});
