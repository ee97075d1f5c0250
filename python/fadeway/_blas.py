"""One BLAS thread for a process fadeway runs itself (`one_thread_for_process`).

fadeway's matrix products are small (a few hundred rows of 512 dimensions): a second BLAS
thread gains them little, and OpenBLAS's worker threads spin for a while after each product
they shared before they sleep. A `fadeway replay` spent a second core's worth of CPU in that
spinning (86 s of CPU for 48 s of replay; 45 s on one thread), so a second replay worker made it
slower, not faster. The command line and its replay workers keep one BLAS thread
(threadpoolctl, the scikit-learn team's library for this). A library caller's process is its own
to set (docs/design/storage.md, "Many workers").
"""

from __future__ import annotations

from threadpoolctl import threadpool_limits

__all__ = ["one_thread_for_process"]


def one_thread_for_process() -> None:
    """One BLAS thread in this process from now on. Call it from the main thread: OpenBLAS
    takes the setting from there."""
    threadpool_limits(limits=1, user_api="blas")
