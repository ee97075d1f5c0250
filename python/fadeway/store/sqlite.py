"""The SQLite store: the embedded default (stdlib sqlite3).

Settings at open: WAL journal, `synchronous=FULL` (a setting), foreign keys on, a busy timeout.
Every write path runs in `BEGIN IMMEDIATE`, so concurrent writers of one file queue instead of
failing half-way; readers see a consistent snapshot. Connections are per thread.

`":memory:"` is a store in memory (what tests want): one connection, private to the store,
shared by its threads, with each call holding it to itself. An in-memory database has no WAL,
and per-thread connections to one would need SQLite's shared cache, whose table locks fail at
once ("database table is locked") instead of waiting as a file's busy timeout does, which the
lane's background threads would meet.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import msgspec

from .. import _constants as C
from ..errors import SchemaVersionError, StoreError
from ..records import MemoryRecord, MessageRecord, RequestRecord
from .base import Store, Transaction
from .schema import MIGRATIONS, SCHEMA_VERSION
from .sqlite_episodes import EpisodeQueries
from .sqlite_graph import GraphQueries
from .sqlite_lane import LaneQueries
from .sqlite_notes import NoteQueries

__all__ = ["SQLiteStore"]

log = logging.getLogger("fadeway.store")

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
#: The path that opens a store in memory.
IN_MEMORY = ":memory:"
_MESSAGE_COLUMNS = "seq, turn, at, role, kind, side, source, tokens, digest, calls, answers, body"
_REQUEST_COLUMNS = (
    "n, at, model, encoding, estimate, view_len, view_last, history_through, "
    "provider_tokens, ratio_kept, ratio_note, replied"
)
#: How many values one `IN (...)` lists at most (SQLite's oldest limit on variables is 999).
_IN_CHUNK = 500
_encode_calls = msgspec.json.encode
_decode_calls = msgspec.json.Decoder(tuple[str, ...]).decode


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


@contextmanager
def _store_errors(path: Path | str, doing: str) -> Iterator[None]:
    """SQLite's own errors (a full disk, an I/O error, a lock held past the busy timeout) as
    `StoreError`, the transaction rolled back: nothing of it was written."""
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(
            f"SQLite store {str(path)!r}: the {doing} failed and was rolled back: {exc}"
        ) from exc


def _roll_back(conn: sqlite3.Connection) -> None:
    # SQLite has rolled back already after some errors (a full disk, an I/O error).
    if conn.in_transaction:
        conn.execute("ROLLBACK")


class _SQLiteTransaction(EpisodeQueries, NoteQueries, LaneQueries, GraphQueries, Transaction):
    """One transaction on one memory: every query is bound to its memory id."""

    def __init__(self, conn: sqlite3.Connection, memory_id: str) -> None:
        self._conn = conn
        self.memory_id = memory_id
        self._changes_at_begin = conn.total_changes

    def wrote(self) -> bool:
        return self._conn.total_changes != self._changes_at_begin

    def memory(self) -> MemoryRecord | None:
        row = self._conn.execute(
            "SELECT format, created_at, instructions, decorated_through, facts_order, facts_block, "
            "blocks_tracked FROM memories WHERE memory_id = ?",
            (self.memory_id,),
        ).fetchone()
        if row is None:
            return None
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

    def create_memory(
        self, fmt: str, created_at: float, *, blocks_tracked: bool = True
    ) -> MemoryRecord:
        self._conn.execute(
            "INSERT INTO memories (memory_id, format, created_at, blocks_tracked) "
            "VALUES (?, ?, ?, ?)",
            (self.memory_id, fmt, created_at, int(blocks_tracked)),
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
            "INSERT OR IGNORE INTO emitted (memory_id, digest) VALUES (?, ?)",
            [(self.memory_id, d) for d in digests],
        )

    def emitted_among(self, digests: Sequence[bytes]) -> set[bytes]:
        found: set[bytes] = set()
        wanted = list(dict.fromkeys(digests))
        for i in range(0, len(wanted), _IN_CHUNK):
            chunk = wanted[i : i + _IN_CHUNK]
            found.update(
                bytes(d)
                for (d,) in self._conn.execute(
                    "SELECT digest FROM emitted WHERE memory_id = ? AND digest IN "
                    f"({', '.join('?' * len(chunk))})",
                    (self.memory_id, *chunk),
                )
            )
        return found

    def emitted(self) -> list[bytes]:
        return [
            bytes(d)
            for (d,) in self._conn.execute(
                "SELECT digest FROM emitted WHERE memory_id = ? ORDER BY digest", (self.memory_id,)
            )
        ]

    def set_instructions(self, instructions: bytes | None) -> None:
        self._conn.execute(
            "UPDATE memories SET instructions = ? WHERE memory_id = ?",
            (instructions, self.memory_id),
        )

    def set_decorated_through(self, count: int) -> None:
        self._conn.execute(
            "UPDATE memories SET decorated_through = ? WHERE memory_id = ?", (count, self.memory_id)
        )

    def message_count(self) -> int:
        (top,) = self._conn.execute(
            "SELECT MAX(seq) FROM messages WHERE memory_id = ?", (self.memory_id,)
        ).fetchone()
        return 0 if top is None else top + 1

    def messages(self, start: int = 0, stop: int | None = None) -> list[MessageRecord]:
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE memory_id = ? AND seq >= ?"
        args: tuple = (self.memory_id, start)
        if stop is not None:
            sql += " AND seq < ?"
            args += (stop,)
        return [_message(r) for r in self._conn.execute(sql + " ORDER BY seq", args)]

    def insert_messages(self, rows: Sequence[MessageRecord]) -> None:
        self._conn.executemany(
            f"INSERT INTO messages (memory_id, {_MESSAGE_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    self.memory_id,
                    r.seq,
                    r.turn,
                    r.at,
                    r.role,
                    r.kind,
                    r.side,
                    r.source,
                    r.tokens,
                    r.digest,
                    _encode_calls(r.calls) if r.calls else None,
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
                (self.memory_id,),
            )
        ]

    def latest_request(self) -> RequestRecord | None:
        row = self._conn.execute(
            f"SELECT {_REQUEST_COLUMNS} FROM requests WHERE memory_id = ? ORDER BY n DESC LIMIT 1",
            (self.memory_id,),
        ).fetchone()
        return _request(row) if row else None

    def find_request(self, view_len: int, view_last: bytes | None) -> RequestRecord | None:
        row = self._conn.execute(
            f"SELECT {_REQUEST_COLUMNS} FROM requests WHERE memory_id = ? AND view_len = ? "
            "AND (view_last = ? OR (view_last IS NULL AND ? IS NULL)) ORDER BY n DESC LIMIT 1",
            (self.memory_id, view_len, view_last, view_last),
        ).fetchone()
        return _request(row) if row else None

    def insert_request(self, row: RequestRecord) -> None:
        self._conn.execute(
            f"INSERT INTO requests (memory_id, {_REQUEST_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.memory_id,
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
        self._conn.execute(
            "UPDATE requests SET provider_tokens = ?, ratio_kept = ?, ratio_note = ?, replied = ? "
            "WHERE memory_id = ? AND n = ?",
            (
                provider_tokens,
                None if kept is None else int(kept),
                note,
                int(replied),
                self.memory_id,
                n,
            ),
        )

    def last_kept_ratio(self, model: str | None) -> float | None:
        row = self._conn.execute(
            "SELECT provider_tokens, estimate FROM requests WHERE memory_id = ? AND ratio_kept = 1 "
            "AND (model = ? OR (model IS NULL AND ? IS NULL)) ORDER BY n DESC LIMIT 1",
            (self.memory_id, model, model),
        ).fetchone()
        return row[0] / row[1] if row else None

    # -- episodes and traces --------------------------------------------------------------

    # -- notes and facts ------------------------------------------------------------------

    # -- the ordered lane -----------------------------------------------------------------


class SQLiteStore(Store):
    """Many memories in one SQLite file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "FULL",
        busy_timeout_ms: int = C.SQLITE_BUSY_TIMEOUT_MS,
    ) -> None:
        synchronous = synchronous.upper()
        if synchronous not in _SYNCHRONOUS:
            raise ValueError(
                f"synchronous must be one of {', '.join(_SYNCHRONOUS)}, not {synchronous!r}"
            )
        self.path = Path(path)
        self.in_memory = os.fspath(path) == IN_MEMORY
        # In memory: the one connection, and the lock each call holds it by (re-entrant: a call
        # may run inside another on the same thread).
        self._shared: sqlite3.Connection | None = None
        self._turn = threading.RLock()
        self._synchronous = synchronous
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._all: dict[sqlite3.Connection, threading.Thread] = {}  # each with its thread
        self._lock = threading.Lock()
        # Connections in a call now, with how many calls (each thread has its own; a call may
        # run inside another): a close waits for them, since closing a connection another
        # thread is using crashes.
        self._using: Counter[sqlite3.Connection] = Counter()
        self._idle = threading.Condition(self._lock)
        self._closed = False
        self._migrate(self._connection())

    def _connection(self) -> sqlite3.Connection:
        if self._shared is not None:
            return self._shared
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = self._connect()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open SQLite store {str(self.path)!r}: {exc}") from exc
            if self.in_memory:  # never an orphan: the database lives as long as it does
                self._shared = conn
                with self._lock:
                    self._all[conn] = threading.current_thread()
                return conn
            self._local.conn = conn
            with self._lock:
                self._close_orphans()
                self._all[conn] = threading.current_thread()
        return conn

    def _connect(self) -> sqlite3.Connection:
        """A new connection with the store's settings (no WAL in memory, which has none)."""
        conn = sqlite3.connect(
            IN_MEMORY if self.in_memory else self.path,
            isolation_level=None,
            check_same_thread=False,
            timeout=self._busy_timeout_ms / 1000,
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        if not self.in_memory:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StoreError(f"{self.path}: cannot use WAL journal mode (got {mode!r})")
            conn.execute(f"PRAGMA mmap_size = {int(C.SQLITE_MMAP_BYTES)}")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _refuse_closed(self) -> None:
        if self._closed:
            raise StoreError(f"SQLite store {str(self.path)!r} is closed")

    def _close_orphans(self) -> None:
        """Close the connections of threads that have ended (a lease renewer, a pool's retired
        worker): without this each would hold its file descriptors until the store closed."""
        for conn, thread in list(self._all.items()):
            if not thread.is_alive() and conn not in self._using and conn is not self._shared:
                conn.close()
                del self._all[conn]

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS fadeway_schema (version INTEGER NOT NULL)")
            row = conn.execute("SELECT version FROM fadeway_schema").fetchone()
            version = row[0] if row else 0
            if version > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self.path} has schema version {version}; this fadeway understands up to "
                    f"{SCHEMA_VERSION}: upgrade fadeway"
                )
            for step in MIGRATIONS[version:]:
                for statement in (*step.portable, *step.sqlite):
                    conn.execute(statement)
            if row is None:
                conn.execute("INSERT INTO fadeway_schema (version) VALUES (?)", (SCHEMA_VERSION,))
            elif version != SCHEMA_VERSION:
                conn.execute("UPDATE fadeway_schema SET version = ?", (SCHEMA_VERSION,))
                log.info("migrated %s from schema %d to %d", self.path, version, SCHEMA_VERSION)
            conn.execute("COMMIT")
        except BaseException:
            _roll_back(conn)
            raise

    def settings(self) -> dict[str, object]:
        """The connection settings in force (journal mode, synchronous, foreign keys, timeout,
        memory-mapped bytes)."""
        conn = self._connection()
        return {
            "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
            "synchronous": _SYNCHRONOUS[conn.execute("PRAGMA synchronous").fetchone()[0]],
            "foreign_keys": bool(conn.execute("PRAGMA foreign_keys").fetchone()[0]),
            "busy_timeout_ms": conn.execute("PRAGMA busy_timeout").fetchone()[0],
            "mmap_bytes": conn.execute("PRAGMA mmap_size").fetchone()[0],
            "schema_version": conn.execute("SELECT version FROM fadeway_schema").fetchone()[0],
        }

    @contextmanager
    def _using_connection(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, for one call; refused once the store is closed. In memory,
        the one connection, held by this call alone until it ends."""
        if not self.in_memory:
            with self._connection_for_call() as conn:
                yield conn
            return
        with self._turn, self._connection_for_call() as conn:
            yield conn

    @contextmanager
    def _connection_for_call(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._refuse_closed()
        conn = self._connection()
        with self._lock:  # checked again with the connection held: a close may have come between
            self._close_after_close(conn)  # opened after the close had closed the rest
            self._refuse_closed()
            self._using[conn] += 1
        try:
            yield conn
        finally:
            with self._lock:
                self._using[conn] -= 1
                if not self._using[conn]:
                    del self._using[conn]
                self._close_after_close(conn)  # the close could not wait for it
                self._idle.notify_all()

    def _close_after_close(self, conn: sqlite3.Connection) -> None:
        """Close `conn` if the store is closed and no call is in it (the lock held)."""
        if self._closed and conn not in self._using and conn in self._all:
            del self._all[conn]
            conn.close()

    @contextmanager
    def write(self, memory_id: str) -> Iterator[Transaction]:
        with self._using_connection() as conn, _store_errors(self.path, "write"):
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield _SQLiteTransaction(conn, memory_id)
                conn.execute("COMMIT")
            except BaseException:
                _roll_back(conn)
                raise

    @contextmanager
    def read(self, memory_id: str) -> Iterator[Transaction]:
        with self._using_connection() as conn, _store_errors(self.path, "read"):
            conn.execute("BEGIN")
            try:
                yield _SQLiteTransaction(conn, memory_id)
            finally:
                _roll_back(conn)

    def memory_ids(self) -> Iterator[str]:
        with self._using_connection() as conn:
            ids = [r[0] for r in conn.execute("SELECT memory_id FROM memories ORDER BY memory_id")]
        yield from ids

    def memories_with_pending_jobs(self) -> list[str]:
        with self._using_connection() as conn:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT memory_id FROM jobs WHERE state = 'pending' ORDER BY memory_id"
                )
            ]

    def close(self, wait: float = C.STORE_CLOSE_WAIT_SECONDS) -> None:
        """Close the store: calls already in a transaction finish it (waited for up to `wait`
        seconds; a connection still in use then is closed when its call ends), later ones
        raise StoreError."""
        with self._lock:
            self._closed = True
            self._idle.wait_for(lambda: not self._using, timeout=wait)
            for conn in [c for c in self._all if c not in self._using]:
                conn.close()
                del self._all[conn]
        self._local = threading.local()
