//! The one mapping from core errors to Python exceptions.

use fadeway_core::CoreError;
use pyo3::exceptions::PyValueError;
use pyo3::PyErr;

pub fn to_py(err: CoreError) -> PyErr {
    match err {
        CoreError::UnknownName { .. } | CoreError::InvalidArgument(_) => {
            PyValueError::new_err(err.to_string())
        }
    }
}
