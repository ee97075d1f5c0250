"""A process fadeway runs itself keeps one BLAS thread (`fadeway._blas`): OpenBLAS's idle
threads spin after each product they shared, and took a second replay worker's core."""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import fadeway
from fadeway.cli.main import main


def _blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


def test_the_command_line_keeps_one_blas_thread(tmp_path, capsys):
    if not _blas_threads():
        pytest.skip("numpy here links no BLAS that threadpoolctl can set")
    db = tmp_path / "m.db"
    fadeway.open(db).close()
    with threadpool_limits(limits=2, user_api="blas"):
        assert _blas_threads() == {2}
        assert main(["memories", "--db", str(db)]) == 0
        assert _blas_threads() == {1}
