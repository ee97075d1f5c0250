//! `fadeway._core`: the thin PyO3 layer over `fadeway-core`.
//!
//! Inputs are extracted with the GIL held, the core runs detached from the interpreter, and the
//! result is wrapped back. Errors are mapped in `errors.rs`, nowhere else.

use pyo3::prelude::*;

mod activation;
mod arrays;
mod bm25;
mod embed;
mod errors;
mod fade;
mod fusion;
mod parts;
mod split;
mod tokens;

#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    activation::register(m)?;
    bm25::register(m)?;
    embed::register(m)?;
    fade::register(m)?;
    fusion::register(m)?;
    parts::register(m)?;
    split::register(m)?;
    tokens::register(m)?;
    Ok(())
}
