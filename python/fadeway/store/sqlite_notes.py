"""The SQLite queries of notes, their facts and acknowledgements, and the facts block's order,
mixed into the SQLite transaction. Every query is bound to the transaction's memory id."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..records import FactRecord, NoteRecord

__all__ = ["NoteQueries"]


class NoteQueries:
    """Notes with their facts, the episodes each acknowledged, and the facts block's order."""

    _conn: sqlite3.Connection
    memory_id: str

    def notes(self) -> list[NoteRecord]:
        return [
            NoteRecord(n=n, at=at, call_id=call_id, source=source, arguments=arguments)
            for n, at, call_id, source, arguments in self._conn.execute(
                "SELECT n, at, call_id, source, arguments FROM notes WHERE memory_id = ? "
                "ORDER BY n",
                (self.memory_id,),
            )
        ]

    def insert_note(
        self, note: NoteRecord, facts: Sequence[FactRecord], acknowledged: Sequence[int]
    ) -> None:
        self._conn.execute(
            "INSERT INTO notes (memory_id, n, at, call_id, source, arguments) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (self.memory_id, note.n, note.at, note.call_id, note.source, note.arguments),
        )
        self._conn.executemany(
            "INSERT INTO facts (memory_id, n, note, text, subject, object, milestone, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (self.memory_id, f.n, f.note, f.text, f.subject, f.object, int(f.milestone), f.at)
                for f in facts
            ],
        )
        self._conn.executemany(
            "INSERT INTO acks (memory_id, episode, note) VALUES (?, ?, ?)",
            [(self.memory_id, e, note.n) for e in acknowledged],
        )

    def facts(self, after: int = 0, *, note: int | None = None) -> list[FactRecord]:
        where, args = (
            ("", (self.memory_id, after))
            if note is None
            else (" AND note = ?", (self.memory_id, after, note))
        )
        return [
            FactRecord(
                n=n,
                note=note_,
                text=text,
                subject=subject,
                object=obj,
                milestone=bool(milestone),
                at=at,
            )
            for n, note_, text, subject, obj, milestone, at in self._conn.execute(
                "SELECT n, note, text, subject, object, milestone, at FROM facts "
                f"WHERE memory_id = ? AND n > ?{where} ORDER BY n",
                args,
            )
        ]

    def facts_at(self, ns: Sequence[int]) -> list[FactRecord]:
        out: list[FactRecord] = []
        wanted = sorted(set(ns))
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            out += [
                FactRecord(
                    n=n,
                    note=note,
                    text=text,
                    subject=subject,
                    object=obj,
                    milestone=bool(milestone),
                    at=at,
                )
                for n, note, text, subject, obj, milestone, at in self._conn.execute(
                    "SELECT n, note, text, subject, object, milestone, at FROM facts "
                    f"WHERE memory_id = ? AND n IN ({', '.join('?' * len(chunk))}) ORDER BY n",
                    (self.memory_id, *chunk),
                )
            ]
        return out

    def fact_count(self) -> int:
        (top,) = self._conn.execute(
            "SELECT MAX(n) FROM facts WHERE memory_id = ?", (self.memory_id,)
        ).fetchone()
        return top or 0

    def acks(self, after_note: int = 0) -> list[tuple[int, int]]:
        return [
            (e, n)
            for e, n in self._conn.execute(
                "SELECT episode, note FROM acks WHERE memory_id = ? AND note > ? "
                "ORDER BY note, episode",
                (self.memory_id, after_note),
            )
        ]

    def set_facts_order(self, order: str | None) -> None:
        self._conn.execute(
            "UPDATE memories SET facts_order = ? WHERE memory_id = ?", (order, self.memory_id)
        )
