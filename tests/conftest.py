"""Shared fixtures: an engine on a temporary SQLite file with a clock the test controls."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import fadeway


class Clock:
    """A clock the test moves by hand (Unix seconds)."""

    def __init__(self, now: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(tmp_path, clock) -> Iterator[fadeway.Engine]:
    eng = fadeway.open(tmp_path / "memories.db", clock=clock)
    yield eng
    eng.close()
