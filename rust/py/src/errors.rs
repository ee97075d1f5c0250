//! The one mapping from core errors to Python exceptions: each `CoreError` variant becomes its
//! class in `fadeway.errors` (both subclass `CoreError`, a `ValueError`), with the core's message.

use fadeway_core::CoreError;
use pyo3::PyErr;

// The classes are defined in Python, so that Python code can raise and catch them too; they are
// imported once, the first time one is raised.
pyo3::import_exception!(fadeway.errors, CoreInputError);
pyo3::import_exception!(fadeway.errors, UnknownNameError);

pub fn to_py(err: CoreError) -> PyErr {
    match err {
        CoreError::UnknownName { .. } => UnknownNameError::new_err(err.to_string()),
        CoreError::InvalidArgument(msg) => CoreInputError::new_err(msg),
    }
}
