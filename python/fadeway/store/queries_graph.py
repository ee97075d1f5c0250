"""The queries of the knowledge graph, passages and vectors (schema 4) and of recall
(schema 5), mixed into each backend's transaction. Every query is bound to the transaction's
memory id (`_key`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from ..records import (
    AliasRecord,
    BlockText,
    EdgeRecord,
    EntityRecord,
    EpisodeRecord,
    FactRecord,
    GraphRows,
    JobKind,
    Marks,
    PassageRecord,
    RecallBlock,
    RecallRecord,
    RetirementRecord,
    WalkRecord,
)
from ..usage import UsageRecord
from .queries import UNREAD, Executor, select_in
from .queries_episodes import EPISODES_PAST, episode_of
from .queries_notes import ACKS_PAST, FACTS_PAST, fact_of

__all__ = ["GraphQueries"]

_PASSAGE_COLUMNS = "n, episode, seq, part, turn, at, role, text"


def _passage(row: tuple) -> PassageRecord:
    n, episode, seq, part, turn, at, role, text = row
    return PassageRecord(
        n=n, episode=episode, seq=seq, part=part, turn=turn, at=at, role=role, text=text
    )


_ENTITIES_PAST = "SELECT n, name, at FROM entities WHERE memory_id = ? AND n > ? ORDER BY n"
_EDGES_PAST = (
    "SELECT fact, subject, object, merged_into, at FROM edges "
    "WHERE memory_id = ? AND fact > ? ORDER BY fact"
)
_RETIREMENTS = "SELECT fact, by_fact, at FROM retirements WHERE memory_id = ? ORDER BY fact"


def _entities(rows: Iterable[tuple]) -> list[EntityRecord]:
    return [EntityRecord(n=n, name=name, at=at) for n, name, at in rows]


def _edges(rows: Iterable[tuple]) -> list[EdgeRecord]:
    return [
        EdgeRecord(fact=fact, subject=subject, object=obj, merged_into=merged, at=at)
        for fact, subject, obj, merged, at in rows
    ]


def _retirements(rows: Iterable[tuple]) -> list[RetirementRecord]:
    return [RetirementRecord(fact=fact, by=by, at=at) for fact, by, at in rows]


def _facts(rows: Iterable[tuple]) -> list[FactRecord]:
    return [fact_of(row) for row in rows]


def _episodes(rows: Iterable[tuple]) -> list[EpisodeRecord]:
    return [episode_of(row) for row in rows]


def _acks(rows: Iterable[tuple]) -> list[tuple[int, int]]:
    return [(episode, note) for episode, note in rows]


_MARK_NAMES = (
    "facts",
    "entities",
    "edges",
    "retirements",
    "episodes",
    "acks",
    "passages",
    "fact_vectors",
    "passage_vectors",
)
# Each an index lookup on the table's primary key (the vectors' leads with kind and embedder).
_MARKS = "SELECT " + ", ".join(
    [
        "(SELECT MAX(n) FROM facts WHERE memory_id = ?)",
        "(SELECT MAX(n) FROM entities WHERE memory_id = ?)",
        "(SELECT MAX(fact) FROM edges WHERE memory_id = ?)",
        "(SELECT COUNT(*) FROM retirements WHERE memory_id = ?)",
        "(SELECT MAX(n) FROM episodes WHERE memory_id = ?)",
        "(SELECT MAX(note) FROM acks WHERE memory_id = ?)",
        "(SELECT MAX(n) FROM passages WHERE memory_id = ?)",
        *(
            f"(SELECT MAX(n) FROM vectors WHERE memory_id = ? AND kind = '{kind}' AND embedder = ?)"
            for kind in ("fact", "passage")
        ),
        # The oldest pending graph job: read with the marks, not on its own (a round trip on
        # PostgreSQL for every sync).
        "(SELECT payload FROM jobs WHERE memory_id = ? AND state = 'pending' "
        f"AND kind = '{JobKind.GRAPH}' ORDER BY n LIMIT 1)",
    ]
)


class GraphQueries:
    _conn: Executor
    _key: object
    _memory_record: object  # see MemoryQueries.memory
    memory_id: str

    def entities(self, after: int = 0) -> list[EntityRecord]:
        return _entities(self._conn.execute(_ENTITIES_PAST, (self._key, after)))

    def aliases(self) -> list[AliasRecord]:
        return [
            AliasRecord(norm=norm, entity=entity, name=name, at=at)
            for norm, entity, name, at in self._conn.execute(
                "SELECT norm, entity, name, at FROM aliases WHERE memory_id = ? "
                "ORDER BY entity, at, name",
                (self._key,),
            )
        ]

    def edges(self, after: int = 0) -> list[EdgeRecord]:
        return _edges(self._conn.execute(_EDGES_PAST, (self._key, after)))

    def retirements(self) -> list[RetirementRecord]:
        return _retirements(self._conn.execute(_RETIREMENTS, (self._key,)))

    def graph_rows(self, past: Mapping[str, int]) -> GraphRows:
        # Every query is sent before any is read: in a PostgreSQL transaction (pipelined) the
        # first read waits for them all, one round trip where a sync made up to six.
        k = self._key
        reads = {
            "facts": (f"{FACTS_PAST} ORDER BY n", _facts),
            "entities": (_ENTITIES_PAST, _entities),
            "edges": (_EDGES_PAST, _edges),
            "retirements": (_RETIREMENTS, _retirements),
            "episodes": (EPISODES_PAST, _episodes),
            "acks": (ACKS_PAST, _acks),
        }
        unknown = set(past) - set(reads)
        if unknown:
            raise ValueError(f"graph_rows: no table {', '.join(sorted(unknown))}")
        sent = {
            table: self._conn.execute(sql, (k,) if table == "retirements" else (k, past[table]))
            for table, (sql, _) in reads.items()
            if table in past
        }
        read: dict[str, Any] = {table: reads[table][1](cursor) for table, cursor in sent.items()}
        return GraphRows(**read)

    def insert_graph(
        self,
        entities: Sequence[EntityRecord],
        aliases: Sequence[AliasRecord],
        edges: Sequence[EdgeRecord],
        retirements: Sequence[RetirementRecord],
    ) -> None:
        m = self._key
        self._conn.executemany(
            "INSERT INTO entities (memory_id, n, name, at) VALUES (?, ?, ?, ?)",
            [(m, e.n, e.name, e.at) for e in entities],
        )
        self._conn.executemany(
            "INSERT INTO aliases (memory_id, norm, entity, name, at) VALUES (?, ?, ?, ?, ?)",
            [(m, a.norm, a.entity, a.name, a.at) for a in aliases],
        )
        self._conn.executemany(
            "INSERT INTO edges (memory_id, fact, subject, object, merged_into, at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(m, e.fact, e.subject, e.object, e.merged_into, e.at) for e in edges],
        )
        self._conn.executemany(
            "INSERT INTO retirements (memory_id, fact, by_fact, at) VALUES (?, ?, ?, ?)",
            [(m, r.fact, r.by, r.at) for r in retirements],
        )

    def passages(self, after: int = 0) -> list[PassageRecord]:
        """Passages numbered above `after`, in order."""
        return [
            _passage(row)
            for row in self._conn.execute(
                f"SELECT {_PASSAGE_COLUMNS} FROM passages WHERE memory_id = ? AND n > ? ORDER BY n",
                (self._key, after),
            )
        ]

    def passages_at(self, ns: Sequence[int]) -> list[PassageRecord]:
        """The passages numbered `ns` (those that exist), in order."""
        sql = (
            f"SELECT {_PASSAGE_COLUMNS} FROM passages WHERE memory_id = ? AND n IN (...) ORDER BY n"
        )
        return [_passage(row) for row in select_in(self._conn, sql, self._key, sorted(set(ns)))]

    def passages_between(self, start: float, end: float, most: int) -> list[int]:
        return [
            n
            for (n,) in self._conn.execute(
                "SELECT n FROM passages WHERE memory_id = ? AND at >= ? AND at < ? "
                "ORDER BY at, n LIMIT ?",
                (self._key, start, end, most),
            )
        ]

    def passage_times(self) -> tuple[float, float] | None:
        first, last = self._conn.execute(
            "SELECT MIN(at), MAX(at) FROM passages WHERE memory_id = ?", (self._key,)
        ).fetchone()
        return None if first is None else (first, last)

    def passage_count(self) -> int:
        (top,) = self._conn.execute(
            "SELECT MAX(n) FROM passages WHERE memory_id = ?", (self._key,)
        ).fetchone()
        return top or 0

    def passaged_episodes(self) -> set[int]:
        return {
            e
            for (e,) in self._conn.execute(
                "SELECT DISTINCT episode FROM passages WHERE memory_id = ?", (self._key,)
            )
        }

    def insert_passages(self, rows: Sequence[PassageRecord]) -> None:
        self._conn.executemany(
            f"INSERT INTO passages (memory_id, {_PASSAGE_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (self._key, p.n, p.episode, p.seq, p.part, p.turn, p.at, p.role, p.text)
                for p in rows
            ],
        )

    def vectors(self, kind: str, embedder: str, after: int = 0) -> list[tuple[int, bytes]]:
        """(n, float32 bytes) of the `kind` vectors by `embedder` numbered above `after`."""
        return [
            (n, bytes(v))
            for n, v in self._conn.execute(
                "SELECT n, vector FROM vectors WHERE memory_id = ? AND kind = ? AND embedder = ? "
                "AND n > ? ORDER BY n",
                (self._key, kind, embedder, after),
            )
        ]

    def marks(self, embedder: str) -> Marks:
        args = (self._key,) * 7 + (self._key, embedder) * 2 + (self._key,)
        *row, job = self._conn.execute(_MARKS, args).fetchone()
        return Marks(
            **{name: value or 0 for name, value in zip(_MARK_NAMES, row, strict=True)},
            graph_job=None if job is None else bytes(job),
        )

    def vector_ns(self, kind: str, embedder: str) -> set[int]:
        return {
            n
            for (n,) in self._conn.execute(
                "SELECT n FROM vectors WHERE memory_id = ? AND kind = ? AND embedder = ?",
                (self._key, kind, embedder),
            )
        }

    def insert_vectors(self, kind: str, embedder: str, rows: Sequence[tuple[int, bytes]]) -> None:
        self._conn.executemany(
            "INSERT INTO vectors (memory_id, kind, embedder, n, vector) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [(self._key, kind, embedder, n, v) for n, v in rows],
        )

    def set_facts_block(self, text: str | None) -> None:
        self._memory_record = UNREAD
        self._conn.execute(
            "UPDATE memories SET facts_block = ? WHERE memory_id = ?", (text, self._key)
        )

    # -- recall -----------------------------------------------------------------------------

    def recalls(self, since_turn: int = 0) -> list[RecallRecord]:
        return [
            RecallRecord(
                turn=turn,
                seq=seq,
                at=at,
                text=text,
                tokens=tokens,
                facts=_ints(facts),
                passages=_ints(passages),
            )
            for turn, seq, at, text, tokens, facts, passages in self._conn.execute(
                "SELECT turn, seq, at, text, tokens, facts, passages FROM recalls "
                "WHERE memory_id = ? AND turn >= ? ORDER BY turn",
                (self._key, since_turn),
            )
        ]

    def recall_blocks(self, since_turn: int = 0) -> list[RecallBlock]:
        return [
            RecallBlock(
                turn=turn,
                seq=seq,
                text=text,
                tokens=tokens,
                final=None
                if final_at is None
                else BlockText(turn=turn, at=final_at, text=final_text, tokens=final_tokens),
            )
            for turn, seq, text, tokens, final_at, final_text, final_tokens in self._conn.execute(
                "SELECT r.turn, r.seq, CASE WHEN f.at IS NULL THEN r.text END, r.tokens, "
                "f.at, f.text, f.tokens FROM recalls r LEFT JOIN recall_finals f "
                "ON f.memory_id = r.memory_id AND f.turn = r.turn "
                "WHERE r.memory_id = ? AND r.turn >= ? ORDER BY r.turn",
                (self._key, since_turn),
            )
        ]

    def insert_recall(self, row: RecallRecord) -> None:
        self._conn.execute(
            "INSERT INTO recalls (memory_id, turn, seq, at, text, tokens, facts, passages) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self._key,
                row.turn,
                row.seq,
                row.at,
                row.text,
                row.tokens,
                _encode(row.facts).decode(),
                _encode(row.passages).decode(),
            ),
        )

    def block_texts(self, table: str, since_turn: int = 0) -> list[BlockText]:
        if table not in ("distills", "recall_finals"):
            raise ValueError(f"no block text table {table!r}")
        return [
            BlockText(turn=turn, at=at, text=text, tokens=tokens)
            for turn, at, text, tokens in self._conn.execute(
                f"SELECT turn, at, text, tokens FROM {table} WHERE memory_id = ? "
                "AND turn >= ? ORDER BY turn",
                (self._key, since_turn),
            )
        ]

    def insert_block_text(self, table: str, row: BlockText) -> None:
        if table not in ("distills", "recall_finals"):
            raise ValueError(f"no block text table {table!r}")
        self._conn.execute(
            f"INSERT INTO {table} (memory_id, turn, at, text, tokens) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (self._key, row.turn, row.at, row.text, row.tokens),
        )

    def walks(self, since_turn: int = 0) -> list[WalkRecord]:
        return [
            WalkRecord(turn=turn, at=at, levels=_pairs(levels))
            for turn, at, levels in self._conn.execute(
                "SELECT turn, at, levels FROM walks WHERE memory_id = ? AND turn >= ? "
                "ORDER BY turn",
                (self._key, since_turn),
            )
        ]

    def insert_walk(self, row: WalkRecord) -> None:
        self._conn.execute(
            "INSERT INTO walks (memory_id, turn, at, levels) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (self._key, row.turn, row.at, _encode(row.levels).decode()),
        )

    # -- usage ------------------------------------------------------------------------------

    def usage(self) -> list[UsageRecord]:
        return [
            UsageRecord(
                kind=kind,
                model=model,
                tokens_in=tin,
                tokens_out=tout,
                seconds=seconds,
                at=at,
                tokens_cached=cached,
            )
            for at, kind, model, tin, tout, seconds, cached in self._conn.execute(
                "SELECT at, kind, model, tokens_in, tokens_out, seconds, tokens_cached FROM usage "
                "WHERE memory_id = ? ORDER BY n",
                (self._key,),
            )
        ]

    def insert_usage(self, rows: Sequence[UsageRecord], at: float) -> None:
        if not rows:
            return
        (top,) = self._conn.execute(
            "SELECT MAX(n) FROM usage WHERE memory_id = ?", (self._key,)
        ).fetchone()
        first = (top or 0) + 1
        self._conn.executemany(
            "INSERT INTO usage (memory_id, n, at, kind, model, tokens_in, tokens_out, seconds, "
            "tokens_cached) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    self._key,
                    first + i,
                    at,
                    u.kind,
                    u.model,
                    u.tokens_in,
                    u.tokens_out,
                    u.seconds,
                    u.tokens_cached,
                )
                for i, u in enumerate(rows)
            ],
        )


_encode = msgspec.json.encode
_ints = msgspec.json.Decoder(list[int]).decode
_pairs = msgspec.json.Decoder(list[tuple[int, int]]).decode
