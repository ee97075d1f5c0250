//! fadeway-core: the pure algorithms of fadeway.
//!
//! No I/O and no Python types live here: every function takes plain slices and strings and
//! returns plain values or a [`CoreError`]. The `fadeway-py` crate is the thin binding layer. (The
//! one question put to the OS is how many threads the process may run, asked once by
//! `parallel::threads` for the kernels that split a large call.)
//!
//! The feature `testing` makes the naive twins and the test hooks (ISA, thread count and path
//! forcing) public, for the integration tests; nothing else enables it.

pub mod activation;
pub mod bm25;
pub mod csr;
pub mod embed;
pub mod error;
pub mod fade;
pub mod fusion;
mod parallel;
pub mod parts;
mod simd;
pub mod split;
pub mod tokens;

pub use error::CoreError;
#[cfg(any(test, feature = "testing"))]
pub use simd::Isa;
