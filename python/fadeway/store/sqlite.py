"""The SQLite store: the embedded default (stdlib sqlite3).

Settings at open: WAL journal, `synchronous=FULL` (a setting), foreign keys on, a busy timeout.
Every write path runs in `BEGIN IMMEDIATE`, so concurrent writers of one file queue instead of
failing half-way; readers see a consistent snapshot. Connections are per thread.

A writer queued behind another tries BEGIN IMMEDIATE again every 50 us, doubling to 1 ms, up to
the busy timeout (`_begin_writing`), rather than through SQLite's busy handler, which sleeps 1,
2, 5, 10 ... 100 ms between tries: behind write transactions of about a millisecond it overslept
each, and two replay workers on one file waited about 13% of their time (9% now; the lock is
held, not slept on, for most of what is left). Within one process only one writer polls; the
others wait on a lock of the store's (`_one_writer`).

`":memory:"` is a store in memory (what tests want): one connection, private to the store,
shared by its threads, with each call holding it to itself. An in-memory database has no WAL,
and per-thread connections to one would need SQLite's shared cache, whose table locks fail at
once ("database table is locked") instead of waiting as a file's busy timeout does, which the
lane's background threads would meet.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .. import _constants as C
from ..errors import StoreError
from .base import SYNCHRONOUS, Store, Transaction, check_synchronous
from .queries import MemoryQueries
from .queries_episodes import EpisodeQueries
from .queries_graph import GraphQueries
from .queries_lane import LaneQueries, memories_with_jobs
from .queries_notes import NoteQueries
from .schema import migrate

__all__ = ["SQLiteStore"]


#: The path that opens a store in memory.
IN_MEMORY = ":memory:"


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


def _begin_writing(conn: sqlite3.Connection, timeout_ms: int, busy_timeout_ms: int) -> None:
    """BEGIN IMMEDIATE on `conn`, tried again while another connection writes (see the module
    docstring) for at most `timeout_ms`; then SQLite's "database is locked" error stands. The
    connection's busy timeout is off meanwhile, and set back to `busy_timeout_ms` after."""
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        deadline = time.monotonic() + timeout_ms / 1000
        pause = C.SQLITE_WRITER_POLL_FIRST
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(2 * pause, C.SQLITE_WRITER_POLL_MAX)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")


def _roll_back(conn: sqlite3.Connection) -> None:
    # SQLite has rolled back already after some errors (a full disk, an I/O error).
    if conn.in_transaction:
        conn.execute("ROLLBACK")


class _SQLiteTransaction(
    MemoryQueries, EpisodeQueries, NoteQueries, LaneQueries, GraphQueries, Transaction
):
    """One transaction on one memory: every query is bound to its memory id."""

    _conn: sqlite3.Connection

    def __init__(self, conn: sqlite3.Connection, memory_id: str) -> None:
        self._conn = conn
        self.memory_id = self._key = memory_id
        self._changes_at_begin = conn.total_changes

    def wrote(self) -> bool:
        return self._conn.total_changes != self._changes_at_begin


class SQLiteStore(Store):
    """Many memories in one SQLite file."""

    serial_writes = True  # one writer for the file

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "FULL",
        busy_timeout_ms: int = C.SQLITE_BUSY_TIMEOUT_MS,
    ) -> None:
        synchronous = check_synchronous(synchronous)
        self.path = Path(path)
        self.in_memory = os.fspath(path) == IN_MEMORY
        # In memory: the one connection, and the lock each call holds it by (re-entrant: a call
        # may run inside another on the same thread).
        self._shared: sqlite3.Connection | None = None
        self._turn = threading.RLock()
        self._writer = threading.RLock()  # see _one_writer
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
        _begin_writing(conn, self._busy_timeout_ms, self._busy_timeout_ms)
        try:
            migrate(conn, lambda step: (*step.portable, *step.sqlite), str(self.path))
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
            "synchronous": SYNCHRONOUS[conn.execute("PRAGMA synchronous").fetchone()[0]],
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
        with (
            self._using_connection() as conn,
            _store_errors(self.path, "write"),
            self._one_writer() as left_ms,
        ):
            _begin_writing(conn, left_ms, self._busy_timeout_ms)
            try:
                tx = _SQLiteTransaction(conn, memory_id)
                yield tx
                tx.settle()
                conn.execute("COMMIT")
            except BaseException:
                _roll_back(conn)
                raise

    @contextmanager
    def _one_writer(self) -> Iterator[int]:
        """This process's writers take turns before SQLite's lock: one polls it, the others wait
        here, woken as soon as it commits, rather than each polling (a lane of 16 threads behind
        a long transaction). Yields the milliseconds left of the busy timeout. Re-entrant, so a
        write inside a write on one thread fails at its BEGIN, as SQLite's own lock has it."""
        start = time.monotonic()
        if not self._writer.acquire(timeout=self._busy_timeout_ms / 1000):
            raise sqlite3.OperationalError(
                "database is locked (by a write transaction of another thread of this process)"
            )
        try:
            waited_ms = (time.monotonic() - start) * 1000
            yield max(0, int(self._busy_timeout_ms - waited_ms))
        finally:
            self._writer.release()

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

    def memories_with_pending_jobs(self, due: float | None = None) -> list[str]:
        with self._using_connection() as conn:
            return [r[0] for r in conn.execute(*memories_with_jobs(due))]

    def listen_for_jobs(
        self, wake: threading.Event, stop: threading.Event
    ) -> threading.Thread | None:
        return None  # SQLite has no notifications: workers of other processes poll

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
