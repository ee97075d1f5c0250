//! Bindings for the parts of a message (spec "Recall").

use fadeway_core::parts;
use fadeway_core::CoreError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;

use crate::errors::to_py;

/// A character count as the core takes it; negative counts are reported like the core's errors.
fn count(value: i64, name: &str) -> PyResult<usize> {
    usize::try_from(value).map_err(|_| {
        to_py(CoreError::InvalidArgument(format!(
            "{name} is {value}; it must be >= 0 (a number of characters)"
        )))
    })
}

/// The parts of a message as `[(start, end), ...]` character offsets into `text` (str indices),
/// in order: sentences and lines, those under `min_chars` visible characters joined to a
/// neighbour, those over `max_chars` cut into windows overlapping by at most `overlap`. The spans
/// cover every character and none is longer than `max_chars`; an empty or all-whitespace text
/// has none. Raises ValueError unless 0 <= min_chars <= max_chars, 0 < max_chars and
/// 0 <= overlap < max_chars. Runs with the GIL released.
#[pyfunction]
fn split_parts(
    py: Python<'_>,
    text: PyBackedStr,
    min_chars: i64,
    max_chars: i64,
    overlap: i64,
) -> PyResult<Vec<(usize, usize)>> {
    let (min, max) = (count(min_chars, "min_chars")?, count(max_chars, "max_chars")?);
    let overlap = count(overlap, "overlap")?;
    py.detach(|| parts::split_parts(&text, min, max, overlap)).map_err(to_py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(split_parts, m)?)?;
    Ok(())
}
