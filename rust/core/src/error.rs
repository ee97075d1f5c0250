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
