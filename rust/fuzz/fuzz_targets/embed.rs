//! `hash_embed(texts, dim)` as the binding calls it: any list of UTF-8 texts (empty too) and any
//! dim, 0 and huge included. A dim whose output fits in memory must give rows of norm 1 or 0;
//! a dim whose output cannot be allocated must be an error, never a panic or an abort.
#![no_main]

use arbitrary::Arbitrary;
use fadeway_core::embed;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Dim {
    /// Small dims, the ones worth computing.
    Small(u16),
    /// Any usize: too large to allocate unless the texts are few and the dim small.
    Any(usize),
}

#[derive(Arbitrary, Debug)]
struct Input {
    texts: Vec<String>,
    dim: Dim,
}

/// Outputs above this many floats are not computed here (libFuzzer's malloc limit); the kernel
/// must refuse the ones that cannot be addressed or allocated (see the core's unit tests).
const MAX_FLOATS: usize = 1 << 20;

fuzz_target!(|input: Input| {
    let dim = match input.dim {
        Dim::Small(d) => usize::from(d),
        Dim::Any(d) => d,
    };
    let n = input.texts.len();
    match n.checked_mul(dim) {
        Some(total) if total <= MAX_FLOATS => {}
        // Unaddressable: must be an error.
        None => {
            assert!(embed::embed(&input.texts, dim).is_err());
            return;
        }
        Some(_) => return,
    }
    let out = match embed::embed(&input.texts, dim) {
        Ok(out) => out,
        Err(_) => {
            assert_eq!(dim, 0, "only dim 0 is refused at this size");
            return;
        }
    };
    assert_eq!(out.len(), n * dim);
    for row in out.chunks(dim.max(1)) {
        assert!(row.iter().all(|x| x.is_finite()), "a non-finite value");
        let norm: f64 = row.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
        assert!(norm == 0.0 || (norm - 1.0).abs() < 1e-4, "row norm {norm}");
    }
});
