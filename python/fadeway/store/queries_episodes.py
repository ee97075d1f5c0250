"""The queries of episodes and their append-only trace log, mixed into each backend's
transaction. Every query is bound to the transaction's memory id (`_key`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from ..records import EpisodeRecord, TraceRecord
from .queries import Executor

__all__ = ["EPISODES_PAST", "EpisodeQueries", "episode_of"]

_EPISODE_COLUMNS = (
    "n, first_seq, last_seq, first_turn, last_turn, start_at, end_at, tokens, cut_at, state"
)


_TRACE_COLUMNS = "n, episode, fact, kind, score, counted, at"


#: A memory's episodes past a number (`EpisodeQueries.episodes`, `GraphQueries.graph_rows`).
EPISODES_PAST = f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE memory_id = ? AND n > ? ORDER BY n"


def episode_of(row: tuple) -> EpisodeRecord:
    n, first, last, first_turn, last_turn, start_at, end_at, tokens, cut_at, state = row
    return EpisodeRecord(
        n=n,
        first_seq=first,
        last_seq=last,
        first_turn=first_turn,
        last_turn=last_turn,
        start_at=start_at,
        end_at=end_at,
        tokens=tokens,
        cut_at=cut_at,
        state=state,
    )


def _trace(row: tuple) -> TraceRecord:
    n, episode, fact, kind, score, counted, at = row
    return TraceRecord(
        n=n, episode=episode, fact=fact, kind=kind, score=score, counted=bool(counted), at=at
    )


class EpisodeQueries:
    """Episodes and their states, counted changes, and the append-only trace log."""

    _conn: Executor
    _key: object
    memory_id: str
    _changes: int | None  # `MemoryQueries._changes`

    def episodes(self, after: int = 0) -> list[EpisodeRecord]:
        return [episode_of(r) for r in self._conn.execute(EPISODES_PAST, (self._key, after))]

    def episode_changes(self) -> int:
        if self._changes is not None:
            return self._changes
        row = self._conn.execute(
            "SELECT episode_changes FROM memories WHERE memory_id = ?", (self._key,)
        ).fetchone()
        return row[0] if row else 0

    def episodes_changed(self, after: int) -> list[EpisodeRecord]:
        return [
            episode_of(r)
            for r in self._conn.execute(
                f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE memory_id = ? AND changed > ? "
                "ORDER BY n",
                (self._key, after),
            )
        ]

    def last_episode(self) -> EpisodeRecord | None:
        row = self._conn.execute(
            f"SELECT {_EPISODE_COLUMNS} FROM episodes WHERE memory_id = ? ORDER BY n DESC LIMIT 1",
            (self._key,),
        ).fetchone()
        return episode_of(row) if row else None

    def _count_episode_change(self) -> int:
        (count,) = self._conn.execute(
            "UPDATE memories SET episode_changes = episode_changes + 1 WHERE memory_id = ? "
            "RETURNING episode_changes",
            (self._key,),
        ).fetchone()
        self._changes = count
        return int(count)

    def insert_episodes(self, rows: Sequence[EpisodeRecord]) -> None:
        if not rows:
            return
        change = self._count_episode_change()
        self._conn.executemany(
            f"INSERT INTO episodes (memory_id, {_EPISODE_COLUMNS}, changed) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    self._key,
                    e.n,
                    e.first_seq,
                    e.last_seq,
                    e.first_turn,
                    e.last_turn,
                    e.start_at,
                    e.end_at,
                    e.tokens,
                    e.cut_at,
                    e.state,
                    change,
                )
                for e in rows
            ],
        )

    def traces(self, after: int = 0) -> list[TraceRecord]:
        return [
            _trace(r)
            for r in self._conn.execute(
                f"SELECT {_TRACE_COLUMNS} FROM traces WHERE memory_id = ? AND n > ? ORDER BY n",
                (self._key, after),
            )
        ]

    def append_traces(self, rows: Sequence[TraceRecord]) -> None:
        self._conn.executemany(
            f"INSERT INTO traces (memory_id, {_TRACE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (self._key, t.n, t.episode, t.fact, t.kind, t.score, int(t.counted), t.at)
                for t in rows
            ],
        )

    def trace_count(self) -> int:
        (top,) = self._conn.execute(
            "SELECT MAX(n) FROM traces WHERE memory_id = ?", (self._key,)
        ).fetchone()
        return top or 0

    def trace_columns(self, after: int = 0) -> np.ndarray:
        # Four numbers a row, streamed into one array: no record, no list of rows (at 200,000
        # traces, 130 ms where `traces` and its columns took 330).
        rows = self._conn.execute(
            "SELECT episode, COALESCE(fact, 0), at, CASE WHEN counted = 1 THEN score ELSE 0.0 END "
            "FROM traces WHERE memory_id = ? AND n > ? ORDER BY n",
            (self._key, after),
        )
        return np.fromiter(itertools.chain.from_iterable(rows), dtype=np.float64).reshape(-1, 4)

    def note_traced(self, note: int) -> bool:
        (found,) = self._conn.execute(
            "SELECT EXISTS (SELECT 1 FROM traces WHERE memory_id = ? AND fact IN "
            "(SELECT n FROM facts WHERE memory_id = ? AND note = ?))",
            (self._key, self._key, note),
        ).fetchone()
        return bool(found)

    def set_episode_states(self, states: dict[int, str]) -> None:
        if not states:
            return
        change = self._count_episode_change()
        self._conn.executemany(
            "UPDATE episodes SET state = ?, changed = ? WHERE memory_id = ? AND n = ?",
            [(state, change, self._key, n) for n, state in states.items()],
        )
