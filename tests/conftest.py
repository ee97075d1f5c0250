"""Shared fixtures: an engine on a temporary SQLite file with a clock the test controls.

A test marked `both_stores` runs twice, on SQLite and on PostgreSQL (its `db` fixture: a
temporary file, or a fresh database on the server `tests/pg.py` provides); the PostgreSQL run
is marked `postgres` and skips, saying why, when no server can be had.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import fadeway
import pg

#: The stores a `both_stores` test runs on.
STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "db" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_stores"):
        metafunc.parametrize("db", STORES, indirect=True)


#: psycopg_pool's threads draw connection-lifetime jitter from the global `random` when they
#: open a connection, and Hypothesis takes any change of that state while it draws an example
#: for a strategy of ours using `random`. Our strategies do not (SQLite runs keep the check).
_POOL_RANDOM = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies"
    ":hypothesis.errors.HypothesisDeprecationWarning"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("postgres"):
            item.add_marker(_POOL_RANDOM)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for this session (`FADEWAY_TEST_POSTGRES`, else a
    throwaway cluster), or a skip saying why there is none."""
    with pg.server_or_skip() as url:
        yield url


@pytest.fixture
def db(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """Where the test's store lives: a file, or a fresh PostgreSQL database (dropped after)."""
    if getattr(request, "param", "sqlite") == "sqlite":
        yield str(tmp_path / "memories.db")
        return
    with pg.fresh_database(request.getfixturevalue("pg_server")) as url:
        yield url


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
def engine(db, clock) -> Iterator[fadeway.Engine]:
    eng = fadeway.open(db, clock=clock)
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
def small(db, clock) -> Iterator[fadeway.Engine]:
    """`open_small` on the test's store (`db`)."""
    eng = open_small(db, clock)
    yield eng
    eng.close()
