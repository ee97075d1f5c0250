//! `activation`, `significance` and `activation_log_order` as the binding calls them: CSR
//! offsets (well-formed or any int64s), times and scores of any float64 (NaN, inf, far from
//! `now`), lengths that may differ, any `now`, and `n_groups` up to huge values (the binding
//! passes any non-negative int64).
#![no_main]

use arbitrary::Arbitrary;
use fadeway_core::activation;
use libfuzzer_sys::fuzz_target;

#[path = "../common/offsets.rs"]
mod offsets;
use offsets::Offsets;

#[derive(Arbitrary, Debug)]
enum Float {
    Any(f64),
    /// Plausible values near `now`, so valid calls are common.
    Near(i16),
}

#[derive(Arbitrary, Debug)]
struct Input {
    offsets: Offsets,
    at: Vec<Float>,
    score: Vec<Float>,
    /// Lengths of `at` and `score` kept as given instead of fitted to the offsets.
    mismatch: bool,
    now: Float,
    group: Vec<i64>,
    small_groups: bool,
    n_groups: u64,
}

fn value(f: &Float, base: f64) -> f64 {
    match *f {
        Float::Any(x) => x,
        Float::Near(d) => base + f64::from(d),
    }
}

/// Groups above this many are not allocated here (libFuzzer's malloc limit); the core's unit
/// tests check that an unallocatable number is an error.
const MAX_GROUPS: u64 = 1 << 22;

fuzz_target!(|input: Input| {
    let now = value(&input.now, 1.7e9);
    let offsets = input.offsets.values(0);
    let mut at: Vec<f64> = input.at.iter().map(|f| value(f, now)).collect();
    let mut score: Vec<f64> = input.score.iter().map(|f| value(f, 0.0)).collect();
    if !input.mismatch {
        let n = offsets.last().map_or(0, |&n| n.clamp(0, 1 << 16) as usize);
        at.resize(n, now);
        score.resize(n, 1.0);
    }
    let act = activation::activation_grouped(&offsets, &at, &score, now);
    let sig = activation::significance_grouped(&offsets, &score);
    if let Ok(act) = &act {
        assert_eq!(act.len(), offsets.len() - 1);
        assert!(act.iter().all(|a| a.is_finite()), "a non-finite activation");
        let sig = sig.as_ref().expect("significance refused what activation took");
        assert_eq!(sig.len(), act.len());
    }
    if let Ok(sig) = &sig {
        assert!(sig.iter().all(|s| s.is_finite()), "a non-finite significance");
    }

    let mut group = input.group;
    let groups = if input.small_groups { input.n_groups % 64 } else { input.n_groups };
    if !input.mismatch {
        group.resize(at.len(), 0);
        if input.small_groups && groups > 0 {
            for g in &mut group {
                *g = g.rem_euclid(groups as i64);
            }
        }
    }
    if groups > MAX_GROUPS {
        return;
    }
    if let Ok(log) = activation::activation_log_order(&group, &at, &score, now, groups as usize) {
        assert_eq!(log.len() as u64, groups);
        assert!(log.iter().all(|a| a.is_finite()), "a non-finite activation");
    }
});
