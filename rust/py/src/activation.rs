//! Bindings for activation and significance (spec: "Activation", "Significance").

use fadeway_core::activation as core;
use fadeway_core::CoreError;
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

use crate::arrays::{array_arg, contiguous};
use crate::errors::to_py;

/// The activation of each episode at `now` (Unix seconds): the sum over its counted traces of
/// `score / sqrt(max(1, minutes since at))`, a trace in the future counting as age 0. Episode g's
/// traces are `at[offsets[g]:offsets[g + 1]]` and the same slice of `score`; `offsets` starts at
/// 0, never decreases and ends at `len(at)`. Returns float64[len(offsets) - 1], within 1e-13 of
/// the formula evaluated with f64 sqrt. Raises ValueError for malformed offsets, lengths that
/// differ, a non-finite `now`, score or time, a time more than 2**53 s from `now`, or a sum that
/// overflows; TypeError for an array that is not 1-D, C-contiguous int64 (offsets) or float64
/// (at, score). Runs with the GIL released.
#[pyfunction]
fn activation<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    at: &Bound<'py, PyAny>,
    score: &Bound<'py, PyAny>,
    now: f64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let offsets = array_arg::<i64>(offsets, "offsets")?;
    let (at, score) = (array_arg::<f64>(at, "at")?, array_arg::<f64>(score, "score")?);
    let offsets = contiguous(&offsets, "offsets")?;
    let (at, score) = (contiguous(&at, "at")?, contiguous(&score, "score")?);
    let activation =
        py.detach(|| core::activation_grouped(offsets, at, score, now)).map_err(to_py)?;
    Ok(activation.into_pyarray(py))
}

/// The significance of each episode: the plain, never faded sum of its traces' scores, in the
/// same CSR layout as `activation`. Returns float64[len(offsets) - 1]. Raises ValueError for
/// malformed offsets or a non-finite score or sum; TypeError as `activation`. Runs with the GIL
/// released.
#[pyfunction]
fn significance<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    score: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let (offsets, score) =
        (array_arg::<i64>(offsets, "offsets")?, array_arg::<f64>(score, "score")?);
    let (offsets, score) = (contiguous(&offsets, "offsets")?, contiguous(&score, "score")?);
    let significance = py.detach(|| core::significance_grouped(offsets, score)).map_err(to_py)?;
    Ok(significance.into_pyarray(py))
}

/// `activation` for traces in log order (as appended): trace i belongs to episode `group[i]`,
/// which must be in `range(n_groups)`. Returns float64[n_groups]; episodes without traces get 0.
/// Raises ValueError for a group id out of range or a negative `n_groups`, and as `activation`
/// otherwise. Runs with the GIL released.
#[pyfunction]
fn activation_log_order<'py>(
    py: Python<'py>,
    group: &Bound<'py, PyAny>,
    at: &Bound<'py, PyAny>,
    score: &Bound<'py, PyAny>,
    now: f64,
    n_groups: i64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let group = array_arg::<i64>(group, "group")?;
    let (at, score) = (array_arg::<f64>(at, "at")?, array_arg::<f64>(score, "score")?);
    let group = contiguous(&group, "group")?;
    let (at, score) = (contiguous(&at, "at")?, contiguous(&score, "score")?);
    let groups = usize::try_from(n_groups).map_err(|_| {
        to_py(CoreError::InvalidArgument(format!(
            "n_groups is {n_groups}; it is a number of episodes and must be >= 0"
        )))
    })?;
    let activation =
        py.detach(|| core::activation_log_order(group, at, score, now, groups)).map_err(to_py)?;
    Ok(activation.into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(activation, m)?)?;
    m.add_function(wrap_pyfunction!(significance, m)?)?;
    m.add_function(wrap_pyfunction!(activation_log_order, m)?)?;
    Ok(())
}
