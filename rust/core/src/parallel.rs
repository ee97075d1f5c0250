//! How many threads a kernel may split one call over.

use std::sync::OnceLock;

/// The threads this process may run at once (1 when unknown), read once: on Linux the answer
/// comes from the affinity mask and the cgroup quota, which are files.
pub(crate) fn threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
