//! The one error type of the core. The bindings map each variant to a Python exception in one
//! place (`rust/py/src/errors.rs`); the core never panics on input.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// A name (encoding, option) that the core does not know; carries what was given and what is allowed.
    UnknownName { what: &'static str, given: String, allowed: &'static [&'static str] },
    /// An argument that is out of its allowed range or shape.
    InvalidArgument(String),
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::UnknownName { what, given, allowed } => {
                write!(f, "unknown {what} {given:?}; expected one of {}", allowed.join(", "))
            }
            CoreError::InvalidArgument(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for CoreError {}

/// `n` zeros, or an error naming `what` when they cannot be allocated: a count that comes from
/// the caller (Python can pass any int64) must not panic ("capacity overflow") or abort the
/// process (allocation failure) where it asks for more than there is.
pub(crate) fn zeros<T: Copy + Default>(n: usize, what: &str) -> Result<Vec<T>, CoreError> {
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| {
        CoreError::InvalidArgument(format!(
            "{what} of {n} values of {} bytes does not fit in memory",
            std::mem::size_of::<T>()
        ))
    })?;
    out.resize(n, T::default());
    Ok(out)
}
