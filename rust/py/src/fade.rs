//! Bindings for the fade's order and pick (spec: "Forgetting").

use fadeway_core::fade as core;
use fadeway_core::CoreError;
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

use crate::arrays::{array_arg, contiguous};
use crate::errors::to_py;

/// Episode indices as numpy wants them. Indices of an array are below `isize::MAX`, so they fit
/// in i64; the collect reuses the vector's allocation (same size and alignment).
fn as_int64(indices: Vec<usize>) -> Vec<i64> {
    indices.into_iter().map(|i| i as i64).collect()
}

/// The episodes' indices, least active first: by `activation` ascending, then `tie` ascending
/// (the episode number), then index; -0.0 and 0.0 are equal. Returns int64[len(activation)], or
/// only its first `limit` entries, found without ordering the rest (much faster for a short
/// prefix). Raises ValueError for a NaN activation, `tie` of another length or a negative
/// `limit`; TypeError for an array that is not 1-D, C-contiguous float64 (activation) or int64
/// (tie). Runs with the GIL released.
#[pyfunction]
#[pyo3(signature = (activation, tie, limit = None))]
fn fade_order<'py>(
    py: Python<'py>,
    activation: &Bound<'py, PyAny>,
    tie: &Bound<'py, PyAny>,
    limit: Option<i64>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let (activation, tie) =
        (array_arg::<f64>(activation, "activation")?, array_arg::<i64>(tie, "tie")?);
    let (activation, tie) = (contiguous(&activation, "activation")?, contiguous(&tie, "tie")?);
    let limit = match limit {
        None => None,
        Some(k) => Some(usize::try_from(k).map_err(|_| {
            to_py(CoreError::InvalidArgument(format!(
                "limit is {k}; it is a number of episodes and must be >= 0"
            )))
        })?),
    };
    let order = py
        .detach(|| {
            let order = match limit {
                None => core::fade_order(activation, tie),
                Some(k) => core::fade_order_first(activation, tie, k),
            };
            order.map(as_int64)
        })
        .map_err(to_py)?;
    Ok(order.into_pyarray(py))
}

/// The episodes a fade picks, in the order it takes them: the shortest prefix of `fade_order`
/// whose `sizes` (tokens each episode takes out of the projected view) bring `view` down to
/// `landing` or below; empty when `view <= landing`, every episode when even all of them do not
/// reach it. Returns int64 indices into `activation`. Raises ValueError for a NaN activation, a
/// negative size, view or landing, or arrays of different lengths; TypeError as `fade_order`
/// (sizes: int64). Runs with the GIL released.
#[pyfunction]
fn fade<'py>(
    py: Python<'py>,
    activation: &Bound<'py, PyAny>,
    tie: &Bound<'py, PyAny>,
    sizes: &Bound<'py, PyAny>,
    view: i64,
    landing: i64,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let (activation, tie) =
        (array_arg::<f64>(activation, "activation")?, array_arg::<i64>(tie, "tie")?);
    let sizes = array_arg::<i64>(sizes, "sizes")?;
    let (activation, tie) = (contiguous(&activation, "activation")?, contiguous(&tie, "tie")?);
    let sizes = contiguous(&sizes, "sizes")?;
    let picked = py
        .detach(|| core::fade(activation, tie, sizes, view, landing).map(as_int64))
        .map_err(to_py)?;
    Ok(picked.into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fade_order, m)?)?;
    m.add_function(wrap_pyfunction!(fade, m)?)?;
    Ok(())
}
