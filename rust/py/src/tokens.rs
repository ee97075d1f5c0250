//! Bindings for token estimation.

use fadeway_core::tokens::{self, Encoding};
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::PyBytes;

use crate::errors::to_py;

/// Texts shorter than this are counted with the GIL held: releasing and re-taking it costs more
/// than counting them (a 130-byte passage counts in well under a microsecond).
const DETACH_MIN_BYTES: usize = 4096;

fn encoding(name: &str) -> PyResult<Encoding> {
    Encoding::from_name(name).map_err(to_py)
}

/// The number of tokens `text` encodes to under `encoding` ("o200k_base" or "cl100k_base").
#[pyfunction]
fn count_tokens(py: Python<'_>, encoding_name: &str, text: &str) -> PyResult<usize> {
    let enc = encoding(encoding_name)?;
    if text.len() < DETACH_MIN_BYTES {
        Ok(tokens::count(enc, text))
    } else {
        Ok(py.detach(|| tokens::count(enc, text)))
    }
}

/// Token counts of many texts as an int64 array, counted on this thread with the GIL released.
///
/// The texts are borrowed, not copied: `PyBackedStr` keeps each `str` alive and points at its
/// UTF-8 buffer, which stays valid while the GIL is released (copying into `Vec<String>` cost
/// ~3% per 130-byte passage, and a second copy of the batch).
#[pyfunction]
fn count_tokens_many<'py>(
    py: Python<'py>,
    encoding_name: &str,
    texts: Vec<PyBackedStr>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let enc = encoding(encoding_name)?;
    let counts: Vec<i64> =
        py.detach(|| tokens::count_many(enc, &texts).into_iter().map(|n| n as i64).collect());
    Ok(counts.into_pyarray(py))
}

/// The token ids of `text`.
#[pyfunction]
fn encode_tokens(py: Python<'_>, encoding_name: &str, text: &str) -> PyResult<Vec<u32>> {
    let enc = encoding(encoding_name)?;
    Ok(py.detach(|| tokens::encode(enc, text)))
}

/// The bytes of every token of `encoding`, indexed by token id (its mergeable ranks).
#[pyfunction]
fn token_bytes<'py>(py: Python<'py>, encoding_name: &str) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let enc = encoding(encoding_name)?;
    let all = py.detach(|| tokens::token_bytes(enc));
    Ok(all.iter().map(|b| PyBytes::new(py, b)).collect())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(count_tokens_many, m)?)?;
    m.add_function(wrap_pyfunction!(encode_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(token_bytes, m)?)?;
    Ok(())
}
