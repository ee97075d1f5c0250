//! Borrowing numpy array arguments: the exact dtype, 1-D and C-contiguous, or a TypeError that
//! names the argument. Nothing is converted or copied silently.

use numpy::{Element, PyReadonlyArray1, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// Borrows `value` as a 1-D numpy array of exactly `T`'s dtype, or raises a TypeError that
/// names the argument and says what was given. Nothing is converted or copied.
pub fn array_arg<'py, T: Element>(
    value: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<PyReadonlyArray1<'py, T>> {
    value.extract::<PyReadonlyArray1<'py, T>>().map_err(|_| {
        let py = value.py();
        let given = match value.cast::<PyUntypedArray>() {
            Ok(array) => format!("a {}-D array of dtype {}", array.ndim(), array.dtype()),
            Err(_) => format!("{}", value.get_type()),
        };
        PyTypeError::new_err(format!(
            "{name} must be a 1-D numpy array of dtype {}, got {given}",
            numpy::dtype::<T>(py)
        ))
    })
}

/// A contiguous view of a 1-D array argument, or a TypeError naming the argument.
pub fn contiguous<'a, T: Element>(
    array: &'a PyReadonlyArray1<'_, T>,
    name: &str,
) -> PyResult<&'a [T]> {
    array.as_slice().map_err(|_| {
        PyTypeError::new_err(format!(
            "{name} must be a C-contiguous 1-D array; pass np.ascontiguousarray({name})"
        ))
    })
}
