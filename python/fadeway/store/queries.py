"""The queries of a memory's own record, messages, requests and emitted blocks, shared by every
backend, and what the backends give them: a connection that runs SQL with `?` placeholders,
and the key each query is bound to (the memory id, as the backend stores it)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol, cast

import msgspec

from ..records import JobRecord, MemoryRecord, MessageRecord, RequestRecord

__all__ = [
    "IN_CHUNK",
    "JOB_COLUMNS",
    "OPENING_READ",
    "UNREAD",
    "Cursor",
    "Executor",
    "MemoryQueries",
    "job_of",
    "select_in",
]


class Cursor(Protocol):
    """What a query returns: its rows, one at a time or all. (Not how many it changed: in a
    pipelined PostgreSQL write that is not known until a later query's rows are read; a query
    that needs it says RETURNING and counts the rows.)"""

    def fetchone(self) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...


class Executor(Protocol):
    """Runs SQL written with `?` placeholders (sqlite3's connection is one)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...


_MESSAGE_COLUMNS = "seq, turn, at, role, kind, side, source, tokens, digest, calls, answers, body"
_REQUEST_COLUMNS = (
    "n, at, model, encoding, estimate, view_len, view_last, history_through, "
    "provider_tokens, ratio_kept, ratio_note, replied"
)
#: How many values one `IN (...)` lists at most (SQLite's oldest limit on variables is 999).
IN_CHUNK = 500

#: A transaction's memory record not read yet, or written since it was (`MemoryQueries.memory`).
UNREAD = object()
#: The memory record's columns, in `MemoryQueries._memory_of`'s order.
MEMORY_COLUMNS = (
    "format, created_at, instructions, decorated_through, facts_order, facts_block, blocks_tracked"
)
#: A job's columns, in `job_of`'s order.
JOB_COLUMNS = "n, kind, payload, created_at, state, attempts, error, retry_at, waits, parked"


def _prefixed(alias: str, columns: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in columns.split(","))


#: What nearly every call's transaction reads first: the memory's record (its columns, all NULL
#: when there is none), its version, its count of episode changes, its highest message seq and
#: job number, its latest request and its oldest pending job (all NULL when none). PostgreSQL
#: sends it with the statements that open a transaction (`MemoryQueries.opened`). Binds the
#: memory id five times.
OPENING_READ = (
    f"SELECT {_prefixed('m', MEMORY_COLUMNS)}, "
    "m.version, m.episode_changes, (SELECT MAX(seq) FROM messages WHERE memory_id = %s), "
    "(SELECT MAX(n) FROM jobs WHERE memory_id = %s), "
    f"{_prefixed('r', _REQUEST_COLUMNS)}, {_prefixed('j', JOB_COLUMNS)} "
    "FROM (SELECT 1) AS one LEFT JOIN memories AS m ON m.memory_id = %s "
    f"LEFT JOIN LATERAL (SELECT {_REQUEST_COLUMNS} FROM requests WHERE memory_id = %s "
    "ORDER BY n DESC LIMIT 1) AS r ON true "
    f"LEFT JOIN LATERAL (SELECT {JOB_COLUMNS} FROM jobs WHERE memory_id = %s "
    "AND state = 'pending' ORDER BY n LIMIT 1) AS j ON true"
)
_REQUEST_WIDTH = len(_REQUEST_COLUMNS.split(","))

_encode_calls = msgspec.json.encode
_decode_calls = msgspec.json.Decoder(tuple[str, ...]).decode


def job_of(row: Sequence[Any]) -> JobRecord:
    n, kind, payload, created_at, state, attempts, error, retry_at, waits, parked = row
    return JobRecord(
        n=n,
        kind=kind,
        payload=bytes(payload),
        created_at=created_at,
        state=state,
        attempts=attempts,
        error=error,
        retry_at=retry_at,
        waits=waits,
        parked=parked,
    )


def _message(row: tuple) -> MessageRecord:
    seq, turn, at, role, kind, side, source, tokens, digest, calls, answers, body = row
    return MessageRecord(
        seq=seq,
        turn=turn,
        at=at,
        role=role,
        kind=kind,
        side=side,
        source=source,
        tokens=tokens,
        digest=bytes(digest),
        calls=_decode_calls(calls) if calls else (),
        answers=answers,
        body=bytes(body),
    )


def _request(row: tuple) -> RequestRecord:
    (
        n,
        at,
        model,
        encoding,
        estimate,
        view_len,
        view_last,
        history_through,
        provider,
        kept,
        note,
        replied,
    ) = row
    return RequestRecord(
        n=n,
        at=at,
        model=model,
        encoding=encoding,
        estimate=estimate,
        view_len=view_len,
        view_last=bytes(view_last) if view_last else None,
        history_through=history_through,
        provider_tokens=provider,
        ratio_kept=None if kept is None else bool(kept),
        ratio_note=note,
        replied=bool(replied),
    )


def select_in(conn: Executor, sql: str, key: object, values: Sequence[Any]) -> list[Any]:
    """The rows `sql` selects for `values`, IN_CHUNK of them at a time: `sql` binds `key`, then
    lists the values where it says `IN (...)` (sorted values give rows in order)."""
    rows: list[Any] = []
    for i in range(0, len(values), IN_CHUNK):
        chunk = values[i : i + IN_CHUNK]
        rows += conn.execute(
            sql.replace("IN (...)", f"IN ({', '.join('?' * len(chunk))})"), (key, *chunk)
        )
    return rows


def _equal_or_null(column: str, value: object) -> tuple[str, tuple]:
    """`column` equal to `value`, NULL matching NULL: a condition and its parameters (a bound
    NULL's type is unknown to PostgreSQL, so `? IS NULL` is not portable)."""
    return (f"{column} IS NULL", ()) if value is None else (f"{column} = ?", (value,))


class MemoryQueries:
    """A memory's record, its messages and decorated requests, and the blocks it emitted.

    Mixed into each backend's transaction with the other query mixins; every query is bound to
    `_key`, the transaction's memory id as its backend stores it.
    """

    _conn: Executor
    _key: object
    memory_id: str
    #: The memory's record as this transaction last read it (a call reads it several times;
    #: each read is a round trip to PostgreSQL), until the transaction writes it.
    _memory_record: MemoryRecord | None | object = UNREAD
    #: The memory's message count as this transaction opened, until it stores messages.
    _counted: int | None = None
    #: The memory's count of episode changes as this transaction opened (or last changed it).
    _changes: int | None = None
    #: The memory's version as this transaction opened, until it changes it (None: not read).
    _versioned: int | None = None
    #: The memory's latest request as this transaction opened, until it writes requests.
    _latest: RequestRecord | None | object = UNREAD
    #: The memory's oldest pending job as this transaction opened, until it writes jobs
    #: (`LaneQueries.pending_job`).
    _oldest_job: JobRecord | None | object = UNREAD
    #: The memory's last job number as this transaction opened, then as it queued jobs (None:
    #: not read; `LaneQueries.enqueue`).
    _last_job: int | None = None

    def memory(self) -> MemoryRecord | None:
        if self._memory_record is not UNREAD:
            return cast(MemoryRecord | None, self._memory_record)
        self._memory_record = self._read_memory()
        return cast(MemoryRecord | None, self._memory_record)

    def _read_memory(self) -> MemoryRecord | None:
        row = self._conn.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE memory_id = ?", (self._key,)
        ).fetchone()
        return None if row is None else self._memory_of(row)

    def opened(self, row: Sequence[Any]) -> None:
        """Keep what the transaction read as it opened (`OPENING_READ`'s row: one round trip
        with its first statements on PostgreSQL): the memory's record, its version, its count
        of episode changes, its message count, its last job's number, its latest request and
        its oldest pending job, each until the transaction changes it."""
        record, (version, changes, top, last_job) = row[:7], row[7:11]
        request, job = tuple(row[11 : 11 + _REQUEST_WIDTH]), row[11 + _REQUEST_WIDTH :]
        self._memory_record = None if record[0] is None else self._memory_of(record)
        self._versioned = version
        self._changes = 0 if changes is None else changes
        self._counted = 0 if top is None else top + 1
        self._latest = None if request[0] is None else _request(request)
        self._oldest_job = None if job[0] is None else job_of(job)
        self._last_job = last_job or 0

    def _memory_of(self, row: Sequence[Any]) -> MemoryRecord:
        fmt, created_at, instructions, through, facts_order, facts_block, tracked = row
        return MemoryRecord(
            memory_id=self.memory_id,
            format=fmt,
            created_at=created_at,
            instructions=bytes(instructions) if instructions is not None else None,
            decorated_through=through,
            facts_order=facts_order,
            facts_block=facts_block,
            blocks_tracked=bool(tracked),
        )

    def version(self) -> int | None:
        if self._versioned is not None:
            return self._versioned
        row = self._conn.execute(
            "SELECT version FROM memories WHERE memory_id = ?", (self._key,)
        ).fetchone()
        return None if row is None else row[0]

    def bump_version(self) -> None:
        self._versioned = None
        self._conn.execute(
            "UPDATE memories SET version = version + 1 WHERE memory_id = ?", (self._key,)
        )

    def create_memory(
        self, fmt: str, created_at: float, *, blocks_tracked: bool = True
    ) -> MemoryRecord:
        self._memory_record = UNREAD
        self._versioned = None
        self._conn.execute(
            "INSERT INTO memories (memory_id, format, created_at, blocks_tracked) "
            "VALUES (?, ?, ?, ?)",
            (self._key, fmt, created_at, int(blocks_tracked)),
        )
        return MemoryRecord(
            memory_id=self.memory_id,
            format=fmt,
            created_at=created_at,
            instructions=None,
            decorated_through=0,
            blocks_tracked=blocks_tracked,
        )

    def insert_emitted(self, digests: Sequence[bytes]) -> None:
        self._conn.executemany(
            "INSERT INTO emitted (memory_id, digest) VALUES (?, ?) ON CONFLICT DO NOTHING",
            [(self._key, d) for d in digests],
        )

    def emitted_among(self, digests: Sequence[bytes]) -> set[bytes]:
        rows = select_in(
            self._conn,
            "SELECT digest FROM emitted WHERE memory_id = ? AND digest IN (...)",
            self._key,
            list(dict.fromkeys(digests)),
        )
        return {bytes(d) for (d,) in rows}

    def emitted(self) -> list[bytes]:
        return [
            bytes(d)
            for (d,) in self._conn.execute(
                "SELECT digest FROM emitted WHERE memory_id = ? ORDER BY digest", (self._key,)
            )
        ]

    def set_instructions(self, instructions: bytes | None) -> None:
        self._memory_record = UNREAD
        self._conn.execute(
            "UPDATE memories SET instructions = ? WHERE memory_id = ?",
            (instructions, self._key),
        )

    def set_decorated_through(self, count: int) -> None:
        self._memory_record = UNREAD
        self._conn.execute(
            "UPDATE memories SET decorated_through = ? WHERE memory_id = ?", (count, self._key)
        )

    def message_count(self) -> int:
        if self._counted is not None:
            return self._counted
        (top,) = self._conn.execute(
            "SELECT MAX(seq) FROM messages WHERE memory_id = ?", (self._key,)
        ).fetchone()
        return 0 if top is None else top + 1

    def messages(self, start: int = 0, stop: int | None = None) -> list[MessageRecord]:
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE memory_id = ? AND seq >= ?"
        args: tuple = (self._key, start)
        if stop is not None:
            sql += " AND seq < ?"
            args += (stop,)
        return [_message(r) for r in self._conn.execute(sql + " ORDER BY seq", args)]

    def insert_messages(self, rows: Sequence[MessageRecord]) -> None:
        self._counted = None
        self._conn.executemany(
            f"INSERT INTO messages (memory_id, {_MESSAGE_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    self._key,
                    r.seq,
                    r.turn,
                    r.at,
                    r.role,
                    r.kind,
                    r.side,
                    r.source,
                    r.tokens,
                    r.digest,
                    _encode_calls(r.calls).decode() if r.calls else None,
                    r.answers,
                    r.body,
                )
                for r in rows
            ],
        )

    def requests(self) -> list[RequestRecord]:
        return [
            _request(r)
            for r in self._conn.execute(
                f"SELECT {_REQUEST_COLUMNS} FROM requests WHERE memory_id = ? ORDER BY n",
                (self._key,),
            )
        ]

    def latest_request(self) -> RequestRecord | None:
        if self._latest is not UNREAD:
            return cast(RequestRecord | None, self._latest)
        row = self._conn.execute(
            f"SELECT {_REQUEST_COLUMNS} FROM requests WHERE memory_id = ? ORDER BY n DESC LIMIT 1",
            (self._key,),
        ).fetchone()
        return _request(row) if row else None

    def find_request(self, view_len: int, view_last: bytes | None) -> RequestRecord | None:
        last, args = _equal_or_null("view_last", view_last)
        row = self._conn.execute(
            f"SELECT {_REQUEST_COLUMNS} FROM requests WHERE memory_id = ? AND view_len = ? "
            f"AND {last} ORDER BY n DESC LIMIT 1",
            (self._key, view_len, *args),
        ).fetchone()
        return _request(row) if row else None

    def insert_request(self, row: RequestRecord) -> None:
        self._latest = UNREAD
        self._conn.execute(
            f"INSERT INTO requests (memory_id, {_REQUEST_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self._key,
                row.n,
                row.at,
                row.model,
                row.encoding,
                row.estimate,
                row.view_len,
                row.view_last,
                row.history_through,
                row.provider_tokens,
                None if row.ratio_kept is None else int(row.ratio_kept),
                row.ratio_note,
                int(row.replied),
            ),
        )

    def record_report(
        self,
        n: int,
        provider_tokens: int | None,
        kept: bool | None,
        note: str | None,
        replied: bool,
    ) -> None:
        self._latest = UNREAD
        self._conn.execute(
            "UPDATE requests SET provider_tokens = ?, ratio_kept = ?, ratio_note = ?, replied = ? "
            "WHERE memory_id = ? AND n = ?",
            (
                provider_tokens,
                None if kept is None else int(kept),
                note,
                int(replied),
                self._key,
                n,
            ),
        )

    def last_kept_ratio(self, model: str | None) -> float | None:
        same_model, args = _equal_or_null("model", model)
        row = self._conn.execute(
            "SELECT provider_tokens, estimate FROM requests WHERE memory_id = ? AND ratio_kept = 1 "
            f"AND {same_model} ORDER BY n DESC LIMIT 1",
            (self._key, *args),
        ).fetchone()
        return row[0] / row[1] if row else None
