//! Bindings for reciprocal rank fusion of ranked lists.

use fadeway_core::fusion;
use fadeway_core::CoreError;
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

use crate::arrays::{array_arg, contiguous};
use crate::errors::to_py;

/// The fused ranking as numpy arrays: ids, and their scores.
type Ranking<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<f64>>);

/// The reciprocal rank fusion of ranked lists in CSR layout: list i is
/// `ids[offsets[i]:offsets[i + 1]]`, best first, with weight `weights[i]`. An id at rank r
/// (from 1) earns `weight / (k + r)`, at its first rank only when repeated within a list; its
/// score is the sum over the lists that hold it. Returns `(ids, scores)`, int64 and float64, best
/// first, at most `limit` of them; ties go to the id with the best rank in any list, then the
/// smaller id. The result does not depend on the order of the lists, to the last bit. Raises
/// ValueError for malformed offsets, weights not one per list, a negative or non-finite weight,
/// a `k` that is not finite and positive, or a negative limit; TypeError for an array that is not
/// 1-D, C-contiguous int64 (offsets, ids) or float64 (weights). Runs with the GIL released.
#[pyfunction]
fn rrf<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    ids: &Bound<'py, PyAny>,
    weights: &Bound<'py, PyAny>,
    k: f64,
    limit: i64,
) -> PyResult<Ranking<'py>> {
    let (offsets, ids) = (array_arg::<i64>(offsets, "offsets")?, array_arg::<i64>(ids, "ids")?);
    let weights = array_arg::<f64>(weights, "weights")?;
    let (offsets, ids) = (contiguous(&offsets, "offsets")?, contiguous(&ids, "ids")?);
    let weights = contiguous(&weights, "weights")?;
    let limit = usize::try_from(limit).map_err(|_| {
        to_py(CoreError::InvalidArgument(format!("limit is {limit}; it must be >= 0")))
    })?;
    let (ids, scores) =
        py.detach(|| fusion::rrf(offsets, ids, weights, k, limit)).map_err(to_py)?;
    Ok((ids.into_pyarray(py), scores.into_pyarray(py)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rrf, m)?)?;
    Ok(())
}
