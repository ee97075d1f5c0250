"""The queries of notes, their facts and acknowledgements, and the facts block's order, mixed
into each backend's transaction. Every query is bound to the transaction's memory id (`_key`)."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import FactRecord, NoteRecord
from .queries import UNREAD, Executor, select_in

__all__ = ["ACKS_PAST", "FACTS_PAST", "NoteQueries", "fact_of"]

_FACT_COLUMNS = "n, note, text, subject, object, milestone, at"
#: A memory's facts past a number (`NoteQueries.facts`, `GraphQueries.graph_rows`).
FACTS_PAST = f"SELECT {_FACT_COLUMNS} FROM facts WHERE memory_id = ? AND n > ?"
#: A memory's acknowledgements past a note.
ACKS_PAST = "SELECT episode, note FROM acks WHERE memory_id = ? AND note > ? ORDER BY note, episode"


def fact_of(row: tuple) -> FactRecord:
    n, note, text, subject, obj, milestone, at = row
    return FactRecord(
        n=n, note=note, text=text, subject=subject, object=obj, milestone=bool(milestone), at=at
    )


class NoteQueries:
    """Notes with their facts, the episodes each acknowledged, and the facts block's order."""

    _conn: Executor
    _key: object
    _memory_record: object  # see MemoryQueries.memory
    memory_id: str

    def notes(self) -> list[NoteRecord]:
        return [
            NoteRecord(n=n, at=at, call_id=call_id, source=source, arguments=arguments)
            for n, at, call_id, source, arguments in self._conn.execute(
                "SELECT n, at, call_id, source, arguments FROM notes WHERE memory_id = ? "
                "ORDER BY n",
                (self._key,),
            )
        ]

    def insert_note(
        self, note: NoteRecord, facts: Sequence[FactRecord], acknowledged: Sequence[int]
    ) -> None:
        self._conn.execute(
            "INSERT INTO notes (memory_id, n, at, call_id, source, arguments) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (self._key, note.n, note.at, note.call_id, note.source, note.arguments),
        )
        self._conn.executemany(
            "INSERT INTO facts (memory_id, n, note, text, subject, object, milestone, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (self._key, f.n, f.note, f.text, f.subject, f.object, int(f.milestone), f.at)
                for f in facts
            ],
        )
        self._conn.executemany(
            "INSERT INTO acks (memory_id, episode, note) VALUES (?, ?, ?)",
            [(self._key, e, note.n) for e in acknowledged],
        )

    def facts(self, after: int = 0, *, note: int | None = None) -> list[FactRecord]:
        where, args = (
            ("", (self._key, after))
            if note is None
            else (" AND note = ?", (self._key, after, note))
        )
        return [fact_of(row) for row in self._conn.execute(f"{FACTS_PAST}{where} ORDER BY n", args)]

    def facts_at(self, ns: Sequence[int]) -> list[FactRecord]:
        sql = f"SELECT {_FACT_COLUMNS} FROM facts WHERE memory_id = ? AND n IN (...) ORDER BY n"
        return [fact_of(row) for row in select_in(self._conn, sql, self._key, sorted(set(ns)))]

    def fact_count(self) -> int:
        (top,) = self._conn.execute(
            "SELECT MAX(n) FROM facts WHERE memory_id = ?", (self._key,)
        ).fetchone()
        return top or 0

    def acks(self, after_note: int = 0) -> list[tuple[int, int]]:
        return [(e, n) for e, n in self._conn.execute(ACKS_PAST, (self._key, after_note))]

    def set_facts_order(self, order: str | None) -> None:
        self._memory_record = UNREAD
        self._conn.execute(
            "UPDATE memories SET facts_order = ? WHERE memory_id = ?", (order, self._key)
        )
