"""Benchmark collection: `python -m pytest benches --benchmark-enable`.

Benchmarks live in `bench_*.py`, a name `pytest tests` never collects; this hook collects them when
pytest is pointed at this directory (a file named on the command line is collected by pytest
itself). `tests/` goes on the path for the slow twins and references in `tests/reference.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    if (
        file_path.suffix == ".py"
        and file_path.name.startswith("bench_")
        and not parent.session.isinitpath(file_path)
    ):
        return pytest.Module.from_parent(parent, path=file_path)
    return None
