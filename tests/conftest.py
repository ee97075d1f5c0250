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


#: The ceiling of the `small` engine: a few turns of 40 words and a reply fill it.
SMALL_CEILING = 3_000


def open_small(path, clock, **settings) -> fadeway.Engine:
    """An engine that forgets within a few dozen turns: a 3,000-token ceiling, episodes of
    100-400 tokens cut after 600, a scripted judge, no background threads (`drain()`);
    `settings` add to or override these."""
    from fadeway.judge import ScriptedJudge

    return fadeway.open(
        path,
        **{
            "clock": clock,
            "background": False,
            "ceiling": SMALL_CEILING,
            "judge": ScriptedJudge(),
            "episode_min_tokens": 100,
            "episode_max_tokens": 400,
            "cut_after_tokens": 600,
            **settings,
        },
    )


@pytest.fixture
def small(tmp_path, clock) -> Iterator[fadeway.Engine]:
    """`open_small` on a temporary file."""
    eng = open_small(tmp_path / "small.db", clock)
    yield eng
    eng.close()
