//! Bindings for hashing embeddings.

use fadeway_core::embed;
use numpy::{PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;

use crate::errors::to_py;

/// The hashing embeddings of `texts` as a float32 array of shape `(len(texts), dim)`; each row has
/// L2 norm 1, or is zero when its text has no alphanumeric character. Computed with the GIL
/// released.
#[pyfunction]
fn hash_embed<'py>(
    py: Python<'py>,
    texts: Vec<PyBackedStr>,
    dim: usize,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    // `PyBackedStr` borrows each str's cached UTF-8 instead of copying it into a `String`.
    let rows = texts.len();
    let values = py.detach(|| embed::embed(&texts, dim)).map_err(to_py)?;
    // The flat vector moves into numpy without a copy; the reshape is a view of it.
    PyArray1::from_vec(py, values).reshape([rows, dim])
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(hash_embed, m)?)?;
    Ok(())
}
