//! Ragged data in CSR form (offsets into one flat array), as it crosses from Python.

use crate::CoreError;

/// Checks CSR `offsets` over `len` flat entries: at least one offset, starting at 0,
/// non-decreasing, ending at `len`. After this every offset is a valid index bound.
/// `groups` names what the offsets delimit ("groups", "lists") and `entries` what they hold
/// ("traces", "ids"), for the error text.
pub fn check_offsets(
    offsets: &[i64],
    len: usize,
    groups: &str,
    entries: &str,
) -> Result<(), CoreError> {
    let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) else {
        return Err(CoreError::InvalidArgument(format!(
            "offsets is empty; it must hold n_{groups} + 1 entries, starting at 0"
        )));
    };
    if first != 0 {
        return Err(CoreError::InvalidArgument(format!(
            "offsets[0] is {first}; offsets must start at 0"
        )));
    }
    if let Some(j) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(CoreError::InvalidArgument(format!(
            "offsets[{}] is {} but offsets[{j}] is {}; offsets must be non-decreasing",
            j + 1,
            offsets[j + 1],
            offsets[j]
        )));
    }
    if usize::try_from(last).ok() != Some(len) {
        return Err(CoreError::InvalidArgument(format!(
            "offsets ends at {last} but there are {len} {entries}; the last offset must equal \
             the number of {entries}"
        )));
    }
    Ok(())
}
