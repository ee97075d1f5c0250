//! Runtime CPU dispatch for the kernels, through `pulp` (the crate behind faer), so this crate
//! stays free of `unsafe`.
//!
//! The extension is built for baseline x86-64 (SSE2) so that it runs everywhere. A kernel written
//! as a [`pulp::WithSimd`] whose body (and every helper it calls) is `#[inline(always)]` is
//! compiled once per instruction set pulp knows, and [`run`] picks the best one the CPU has:
//! AVX-512 (x86-64-v4), AVX2 + FMA (v3), or the baseline; NEON on aarch64; the baseline
//! elsewhere. The kernels are plain Rust loops that the compiler vectorises for each.
//!
//! Same bits on every path: Rust never contracts `a * b + c` into an FMA and never reorders float
//! arithmetic, so wider vectors only run the same IEEE operations in more lanes. The tests
//! compare each dispatched kernel with its `Isa::Baseline` run bit for bit.

/// Which code a kernel runs.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// The best instruction set this CPU supports, detected at run time (cached by std).
    Detected,
    /// The build's baseline (SSE2 on x86-64), whatever the CPU: the reference for the tests, so
    /// not compiled into the extension.
    #[cfg(any(test, feature = "testing"))]
    Baseline,
}

/// Runs `op` compiled for `isa`.
#[inline]
pub(crate) fn run<Op: pulp::WithSimd>(isa: Isa, op: Op) -> Op::Output {
    match isa {
        Isa::Detected => pulp::Arch::new().dispatch(op),
        #[cfg(any(test, feature = "testing"))]
        Isa::Baseline => op.with_simd(pulp::Scalar::new()),
    }
}
