//! Bindings for boundary-rank splitting of closed history into episodes.

use fadeway_core::split;
use fadeway_core::CoreError;
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

use crate::arrays::{array_arg, contiguous};
use crate::errors::to_py;

/// A size limit as the core takes it; negative limits are reported like the core's own errors.
fn limit(value: i64, name: &str) -> PyResult<u64> {
    u64::try_from(value).map_err(|_| {
        to_py(CoreError::InvalidArgument(format!(
            "{name} is {value}; it must satisfy 0 < min_size <= max_size"
        )))
    })
}

/// The cut positions that split units of token sizes `sizes` into episodes, as a sorted int64
/// array of the unit indices where a new episode starts (0 excluded): with
/// `bounds = [0, *cuts, len(sizes)]`, episode k is units `bounds[k]` to `bounds[k + 1]`.
/// `scores[j]` ranks the boundary between units j and j + 1 (higher cuts first); only their
/// order matters. Raises ValueError for a negative size, a NaN score, scores not one shorter than
/// sizes, or limits outside 0 < min_size <= max_size; TypeError for an array that is not 1-D,
/// C-contiguous int64 (sizes) or float64 (scores). Runs with the GIL released.
#[pyfunction]
fn split_episodes<'py>(
    py: Python<'py>,
    sizes: &Bound<'py, PyAny>,
    scores: &Bound<'py, PyAny>,
    min_size: i64,
    max_size: i64,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let (sizes, scores) = (array_arg::<i64>(sizes, "sizes")?, array_arg::<f64>(scores, "scores")?);
    let sizes = contiguous(&sizes, "sizes")?;
    let scores = contiguous(&scores, "scores")?;
    let (min, max) = (limit(min_size, "min_size")?, limit(max_size, "max_size")?);
    let cuts = py
        .detach(|| {
            split::split_i64(sizes, scores, min, max)
                // Cut positions are unit indices of an int64 array, so they fit in i64.
                .map(|cuts| cuts.into_iter().map(|c| c as i64).collect::<Vec<i64>>())
        })
        .map_err(to_py)?;
    Ok(cuts.into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(split_episodes, m)?)?;
    Ok(())
}
