"""Migrations from every schema version (issue 33, the reliability suite): a store as each
earlier version left it opens with this fadeway, is migrated in place, keeps every message, and
goes on working.

A store "as version k left it" is built here, not kept as a file: the schema of migrations 1..k,
holding what a store written today holds in the tables and columns that existed at version k
(the rest did not exist then). Opening it runs migrations k+1.. as a user's upgrade would.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

import fadeway
from conftest import Clock, open_small
from fadeway.store.schema import MIGRATIONS, SCHEMA_VERSION
from helpers import converse_with_notes

NOTES = [[(f"Fact {i} about the launch.", "launch", f"item {i}", False)] for i in range(3)]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, bytes]:
    """A store written by this fadeway (notes taken, episodes sealed), and its export."""
    path = tmp_path_factory.mktemp("today") / "today.db"
    clock = Clock()
    eng = open_small(path, clock)
    converse_with_notes(eng, eng.memory("m"), clock, NOTES)
    doc = fadeway.dumps(eng.memory("m").export())
    eng.close()
    return path, doc


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def _as_of(version: int, today: Path, path: Path) -> None:
    """Write at `path` a store of schema `version` holding what `today` holds in that
    version's tables and columns."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE fadeway_schema (version INTEGER NOT NULL)")
    for step in MIGRATIONS[:version]:
        for statement in (*step.portable, *step.sqlite):
            conn.execute(statement)
    conn.execute("INSERT INTO fadeway_schema (version) VALUES (?)", (version,))
    conn.execute("ATTACH DATABASE ? AS today", (str(today),))
    tables = [
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'fadeway_schema' "
            "AND name NOT LIKE 'sqlite_%'"
        )
    ]
    for table in tables:
        columns = ", ".join(_columns(conn, table))
        conn.execute(f"INSERT INTO main.{table} ({columns}) SELECT {columns} FROM today.{table}")
    conn.commit()
    conn.execute("DETACH DATABASE today")
    conn.close()


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_a_store_of_every_earlier_version_is_migrated_and_goes_on(
    tmp_path, written, clock, version
):
    today, doc = written
    path = tmp_path / f"v{version}.db"
    _as_of(version, today, path)
    with fadeway.open(path, clock=clock) as eng:
        assert eng.store.settings()["schema_version"] == SCHEMA_VERSION
        mem = eng.memory("m")
        history = [bytes(m.message) for m in fadeway.loads(doc).messages]
        assert [m.body for m in mem.messages()] == history
        clock.advance(3_600)
        sent = [*map(json.loads, history), {"role": "user", "content": "Next."}]
        out = mem.decorate({"model": "gpt-4.1", "messages": sent})
        assert out["messages"][-1]["content"] == "Next."
        assert len(mem.messages()) == len(history) + 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
