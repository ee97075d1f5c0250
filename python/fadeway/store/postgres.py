"""The PostgreSQL store: many memories in one database on a server (psycopg 3 and its pool, the
`postgres` extra, imported only when such a store opens).

It runs the same queries as the SQLite store (the `queries*` mixins, written with `?`
placeholders and translated here) over the same schema and migrations (`schema.py`, in
PostgreSQL's type names). What differs sits here:

- a write is one transaction (READ COMMITTED) that first takes the memory's advisory lock
  (`pg_advisory_xact_lock` on a 64-bit hash of its id, bound as a parameter), so writers of one
  memory queue, whatever process or machine they run in, and writers of different memories
  never wait on each other; each statement sees what the lock's last holder committed;
- a read is a REPEATABLE READ, READ ONLY transaction: one consistent snapshot;
- each transaction names its memory in a setting (`fadeway.memory_id`) that row-level security
  checks every row against: a second guard behind the queries' own `memory_id = ?`;
- memory ids are stored as their UTF-8 bytes (BYTEA): an id may hold NUL, which PostgreSQL
  text cannot;
- psycopg's errors are `StoreError`s naming the server by its URL without the password;
- a transaction that queues jobs notifies `LANE_JOBS_CHANNEL` (delivered at its commit, nothing
  when it rolls back, no payload), and a background worker's listener (`listen_for_jobs`: a
  connection of its own, outside the pool) wakes it at once instead of at its next poll.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .. import _constants as C
from ..errors import StoreError
from .base import Store, Transaction, check_synchronous
from .queries import OPENING_READ, MemoryQueries
from .queries_episodes import EpisodeQueries
from .queries_graph import GraphQueries
from .queries_lane import LaneQueries, memories_with_jobs
from .queries_notes import NoteQueries
from .schema import for_postgres, migrate

if TYPE_CHECKING:
    import psycopg

__all__ = ["LISTENER_NAME", "POSTGRES_SCHEMES", "PostgresStore", "shown_url", "to_pyformat"]

log = logging.getLogger("fadeway.store")

#: The URL schemes that name a PostgreSQL server.
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
#: The advisory lock a migration holds, so that two processes opening one database migrate it
#: one after the other (a memory's lock is a hash of its id: a collision costs a wait, no more).
_MIGRATION_LOCK = 0x6661646577617900  # b"fadeway\0"
_CHANGING = ("INSERT", "UPDATE", "DELETE")  # each six letters
#: What a transaction says for row-level security (schema.py): the one memory it is bound to
#: (its id's UTF-8 bytes in hex: a setting cannot hold NUL), or that it spans every memory.
_ONE_MEMORY = "SELECT set_config('fadeway.memory_id', %s, true)"
_EVERY_MEMORY = "SELECT set_config('fadeway.every_memory', 'on', true)"
#: Sent by a transaction that queued jobs: PostgreSQL delivers it to the listeners at commit
#: (once, however often the transaction sent it), and drops it on rollback. No payload: ids are
#: untrusted, and other memories' workers have no business learning them.
_NOTIFY_JOBS = f"NOTIFY {C.LANE_JOBS_CHANNEL}"
#: The `application_name` of a worker's listening connection (as `pg_stat_activity` shows it).
LISTENER_NAME = "fadeway-listener"


def _driver() -> tuple[ModuleType, ModuleType]:
    """psycopg and psycopg_pool, or a StoreError saying how to install them."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise StoreError(
            f"a PostgreSQL store needs psycopg 3 and psycopg_pool ({exc}): "
            "pip install 'fadeway[postgres]'"
        ) from None
    return psycopg, psycopg_pool


def shown_url(url: str) -> str:
    """`url` fit to show: a PostgreSQL URL's password (in the user part or the query) replaced
    by `***`; anything else (a file path) as it is."""
    if not url.startswith(POSTGRES_SCHEMES):
        return url
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        if ":" in user:
            netloc = f"{user.split(':', 1)[0]}:***@{host}"
    query = urlencode(
        [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query, True)], safe="*"
    )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


@functools.lru_cache(maxsize=1024)
def to_pyformat(sql: str) -> str:
    """`sql` written with `?` placeholders as psycopg takes it: each `?` outside quotes becomes
    `%s`, and every `%` (inside quotes too: psycopg reads them all) becomes `%%`."""
    out: list[str] = []
    quote = ""
    for char in sql:
        if char == "%":
            out.append("%%")
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "?":
            out.append("%s")
            continue
        out.append(char)
    if quote:
        raise ValueError(f"unterminated {quote} in SQL: {sql[:80]!r}")
    return "".join(out)


def memory_key(memory_id: str) -> bytes:
    """A memory id as the PostgreSQL store keeps it: its UTF-8 bytes."""
    return memory_id.encode("utf-8")


def lock_key(memory_id: str) -> int:
    """The memory's advisory lock: a signed 64-bit hash of its id."""
    digest = hashlib.blake2b(memory_key(memory_id), digest_size=8, person=b"fadeway.lock")
    return int.from_bytes(digest.digest(), "big", signed=True)


class _Executor:
    """A psycopg connection as the query mixins use it (`?` placeholders), telling whether its
    statements changed any row.

    In a transaction the connection is in pipeline mode (`PostgresStore._pipelined`): a
    statement is sent with the next one whose rows are fetched, or with the commit, so its
    result may not be in yet when `changed` is asked; it then syncs, unless a statement whose
    result is in already changed a row."""

    def __init__(self, conn: psycopg.Connection, pipeline: psycopg.Pipeline | None = None) -> None:
        self._conn = conn
        self._pipeline = pipeline
        self._changed = False
        self._pending: list[psycopg.Cursor] = []  # changing statements not looked at yet

    def ended(self) -> None:
        """The transaction ended (committed, or failed): `changed` syncs no more."""
        self._pipeline = None

    def changed(self) -> bool:
        """Whether a statement changed a row."""
        if self._changed or not self._pending:
            return self._changed
        answered = [c.statusmessage is not None for c in self._pending]
        if any(c.rowcount > 0 for c, a in zip(self._pending, answered, strict=True) if a):
            self._changed = True
        elif self._pipeline is not None and not all(answered):
            self._pipeline.sync()
            self._changed = any(c.rowcount > 0 for c in self._pending)
        else:
            # A result still missing once the transaction ended (it failed) may have changed
            # rows: whoever asks then resets what it mirrors.
            self._changed = not all(answered)
        self._pending.clear()
        return self._changed

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.Cursor:
        cur = self._conn.execute(to_pyformat(sql), parameters)
        self._track(sql, cur)
        return cur

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> psycopg.Cursor:
        cur = self._conn.cursor()
        rows = list(parameters)
        if rows:
            cur.executemany(to_pyformat(sql), rows)
            self._track(sql, cur)
        return cur

    def _track(self, sql: str, cur: psycopg.Cursor) -> None:
        if sql.lstrip()[:6].upper() in _CHANGING:
            self._pending.append(cur)


class _PostgresTransaction(
    MemoryQueries, EpisodeQueries, NoteQueries, LaneQueries, GraphQueries, Transaction
):
    """One transaction on one memory: every query is bound to its memory id (as bytes)."""

    _conn: _Executor

    def __init__(self, conn: _Executor, memory_id: str) -> None:
        self._conn = conn
        self.memory_id = memory_id
        self._key = memory_key(memory_id)
        self._notified = False

    def wrote(self) -> bool:
        return self._conn.changed()

    def ended(self) -> None:
        """The transaction ended: what it changed is what its statements answered."""
        self._conn.ended()

    def enqueue(self, kind: str, payload: bytes, created_at: float) -> int:
        n = super().enqueue(kind, payload, created_at)
        self._notify_jobs()
        return n

    def revive_jobs(
        self, now: float | None = None, *, kind: str | None = None, outages: int = 0
    ) -> int:
        revived = super().revive_jobs(now, kind=kind, outages=outages)
        if revived:
            self._notify_jobs()
        return revived

    def _notify_jobs(self) -> None:
        """Wake the listening workers when this transaction commits (once per transaction)."""
        if not self._notified:
            self._conn.execute(_NOTIFY_JOBS)
            self._notified = True


class PostgresStore(Store):
    """Many memories in one PostgreSQL database."""

    def __init__(
        self,
        url: str,
        *,
        synchronous: str = "FULL",
        pool_size: int = C.POSTGRES_POOL_SIZE,
        wait_seconds: float = C.POSTGRES_WAIT_SECONDS,
    ) -> None:
        synchronous = check_synchronous(synchronous)
        self._psycopg, pool = _driver()
        self._url = url
        self.shown = shown_url(url)
        # NORMAL or OFF (a batch replay's): commits return before their WAL reaches the disk;
        # a server crash may lose the last ones, never half of one.
        self._async_commit = synchronous in ("OFF", "NORMAL")
        self._lock = threading.Lock()
        self._closed = False
        self._pipelines = self._psycopg.Pipeline.is_supported()
        # When each pooled connection last came back from a call (`_check`).
        self._back: weakref.WeakKeyDictionary[psycopg.Connection, float] = (
            weakref.WeakKeyDictionary()
        )
        self._lost_at = 0.0  # when a call last lost its connection (`_check`)
        connect = {"autocommit": True, "connect_timeout": C.POSTGRES_CONNECT_TIMEOUT_SECONDS}
        try:
            with self._psycopg.connect(url, **connect) as conn:
                self._migrate(conn)
        except self._psycopg.OperationalError as exc:
            raise StoreError(self._unreachable(exc)) from exc
        except self._psycopg.Error as exc:
            raise StoreError(f"PostgreSQL store {self.shown}: cannot open it: {exc}") from exc
        self._pool = pool.ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs=connect,
            check=self._check,
            reset=self._returned,
            timeout=wait_seconds,
            name="fadeway",
            open=True,
        )

    def _returned(self, conn: psycopg.Connection) -> None:
        """The pool took `conn` back from a call, in a good state."""
        self._back[conn] = time.monotonic()

    def _check(self, conn: psycopg.Connection) -> None:
        """Check `conn` before the pool lends it, unless it came back from a call less than
        POSTGRES_CHECK_IDLE_SECONDS ago. A server restarted within that window fails one call
        with a StoreError (its transaction rolled back; the caller can retry); then every
        connection back before that failure is checked before its next call."""
        back = self._back.get(conn)
        if (
            back is None
            or back <= self._lost_at  # back before a call lost its connection: a restart?
            or time.monotonic() - back >= C.POSTGRES_CHECK_IDLE_SECONDS
        ):
            self._pool.check_connection(conn)

    def _unreachable(self, exc: Exception) -> str:
        first = " ".join(str(exc).strip().split("\n", 1)[0].split())  # libpq's hint follows
        return (
            f"cannot reach the PostgreSQL store {self.shown}: {_hidden(first, self._url)}; "
            "check that the server runs and listens at that host and port, and that the user, "
            "password and database are right"
        )

    def _migrate(self, conn: psycopg.Connection) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute(_EVERY_MEMORY)
            migrate(
                _Executor(conn),
                lambda step: (*map(for_postgres, step.portable), *step.postgres),
                self.shown,
            )

    def settings(self) -> dict[str, object]:
        """The server's version and the schema version."""
        with self._connection("read") as conn:
            [(server,)] = conn.execute("SHOW server_version").fetchall()
            [(version,)] = conn.execute("SELECT version FROM fadeway_schema").fetchall()
        return {"server_version": server, "schema_version": version}

    @contextmanager
    def _connection(self, doing: str) -> Iterator[psycopg.Connection]:
        """A connection of the pool for one call, psycopg's errors raised as `StoreError`."""
        with self._lock:
            if self._closed:
                raise StoreError(f"PostgreSQL store {self.shown} is closed")
        try:
            with self._pool.connection() as conn:
                yield conn
        except self._psycopg.Error as exc:
            if isinstance(exc, self._psycopg.OperationalError):
                self._lost_at = time.monotonic()
            if self._closed:
                raise StoreError(f"PostgreSQL store {self.shown} is closed") from exc
            raise StoreError(
                f"PostgreSQL store {self.shown}: the {doing} failed and was rolled back: "
                f"{_hidden(str(exc), self._url)}"
            ) from exc

    @contextmanager
    def write(self, memory_id: str) -> Iterator[Transaction]:
        with self._connection("write") as conn:
            try:
                with self._pipelined(conn) as pipeline:
                    conn.execute("BEGIN")
                    conn.execute(
                        "SELECT pg_advisory_xact_lock(%s), "
                        "set_config('fadeway.memory_id', %s, true), "
                        # NULL: the server's own setting, which may wait for a replica
                        "set_config('synchronous_commit', "
                        "COALESCE(%s, current_setting('synchronous_commit')), true)",
                        (
                            lock_key(memory_id),
                            memory_key(memory_id).hex(),
                            "off" if self._async_commit else None,
                        ),
                    )
                    opening = self._opening_read(conn, memory_id)
                    tx = self._opened(conn, memory_id, opening, pipeline)
                    try:
                        yield tx
                        tx.settle()
                        conn.execute("COMMIT")
                    finally:
                        tx.ended()
            except BaseException:
                self._roll_back(conn)
                raise

    @contextmanager
    def read(self, memory_id: str) -> Iterator[Transaction]:
        with self._connection("read") as conn:
            done = False  # the caller's block ended
            try:
                with self._pipelined(conn) as pipeline:
                    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    conn.execute(_ONE_MEMORY, (memory_key(memory_id).hex(),))
                    opening = self._opening_read(conn, memory_id)
                    tx = self._opened(conn, memory_id, opening, pipeline)
                    try:
                        yield tx
                    finally:
                        tx.ended()
                    done = True
                    conn.execute("ROLLBACK")  # with the pipeline's closing sync
            except BaseException as exc:
                self._roll_back(conn)
                # A read whose caller has what it read does not fail for a lost connection at
                # its end: the server rolled it back, and the pool drops the connection.
                if not (done and isinstance(exc, self._psycopg.Error)):
                    raise

    def _opening_read(self, conn: psycopg.Connection, memory_id: str) -> psycopg.Cursor | None:
        """`OPENING_READ`, sent with the statements that open a transaction when they go in
        one round trip: what most transactions read first (the memory's record, version,
        episode changes, message count, last job number, latest request and oldest pending
        job), for no round trip of its own (in a pipeline, the query costs the server a few
        lookups, not a trip)."""
        if not self._pipelines:
            return None
        key = memory_key(memory_id)
        return conn.execute(OPENING_READ, (key,) * 5)

    @staticmethod
    def _opened(
        conn: psycopg.Connection,
        memory_id: str,
        opening: psycopg.Cursor | None,
        pipeline: psycopg.Pipeline | None = None,
    ) -> _PostgresTransaction:
        tx = _PostgresTransaction(_Executor(conn, pipeline), memory_id)
        if opening is not None and (row := opening.fetchone()) is not None:
            tx.opened(row)  # one row always: the memory left-joined to a row of its own
        return tx

    @contextmanager
    def _pipelined(self, conn: psycopg.Connection) -> Iterator[psycopg.Pipeline | None]:
        """A transaction in libpq's pipeline mode from its BEGIN to its end: the statements
        that open it go in one round trip with its first read, a statement whose rows are not
        read (most writes) goes with the next query whose rows are, or with the COMMIT, and
        queries sent before any is read (`graph_rows`) share one. On a server a round trip
        each was most of a replay's time. Without pipeline support (libpq before 14), one at a
        time."""
        if not self._pipelines:
            yield None
            return
        with conn.pipeline() as pipeline:
            yield pipeline

    def _roll_back(self, conn: psycopg.Connection) -> None:
        # A lost connection cannot roll back: the server already has, and the pool drops it.
        try:
            conn.execute("ROLLBACK")
        except self._psycopg.Error:
            pass

    def _ids(self, sql: str, args: tuple = ()) -> list[str]:
        """Memory ids a query across every memory finds (a snapshot that says it spans them)."""
        with self._connection("read") as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                conn.execute(_EVERY_MEMORY)
                return [bytes(key).decode("utf-8") for (key,) in conn.execute(sql, args)]
            finally:
                self._roll_back(conn)

    def memory_ids(self) -> Iterator[str]:
        yield from self._ids("SELECT memory_id FROM memories ORDER BY memory_id")

    def memories_with_pending_jobs(self, due: float | None = None) -> list[str]:
        sql, args = memories_with_jobs(due)
        return self._ids(to_pyformat(sql), args)

    def listen_for_jobs(
        self, wake: threading.Event, stop: threading.Event
    ) -> threading.Thread | None:
        thread = threading.Thread(
            target=self._listen, args=(wake, stop), name="fadeway-listen", daemon=True
        )
        thread.start()
        return thread

    def _listen(self, wake: threading.Event, stop: threading.Event) -> None:
        """`LISTEN` on a connection of its own (autocommit, outside the pool, named
        LISTENER_NAME), setting `wake` on each notification, until `stop` is set or the store
        closes, looking every LANE_LISTEN_WAIT_SECONDS. A failed connection (a server restart)
        is logged and opened again after a wait that doubles while it keeps failing; `wake` is
        set on each (re)connection for what was queued while no one listened."""
        retry, failed = C.LANE_LISTEN_RETRY_SECONDS, False

        def stopped() -> bool:
            return stop.is_set() or self._closed

        while not stopped():
            try:
                with self._psycopg.connect(
                    self._url,
                    autocommit=True,
                    connect_timeout=C.POSTGRES_CONNECT_TIMEOUT_SECONDS,
                    application_name=LISTENER_NAME,
                ) as conn:
                    conn.execute(f"LISTEN {C.LANE_JOBS_CHANNEL}")
                    if failed:
                        log.info("PostgreSQL store %s: listening for queued jobs again", self.shown)
                    retry, failed = C.LANE_LISTEN_RETRY_SECONDS, False
                    wake.set()
                    while not stopped():
                        for _ in conn.notifies(timeout=C.LANE_LISTEN_WAIT_SECONDS):
                            wake.set()
                            if stopped():
                                break
            except Exception as exc:  # keep listening; meanwhile the poll finds the jobs
                if stopped():
                    return
                log.warning(
                    "PostgreSQL store %s: listening for queued jobs failed (%s: %s); "
                    "connecting again in %.3g s, polling meanwhile",
                    self.shown,
                    type(exc).__name__,
                    _hidden(" ".join(str(exc).split()), self._url),
                    retry,
                )
                failed = True
                stop.wait(retry)
                retry = min(retry * 2, C.LANE_LISTEN_RETRY_MAX_SECONDS)

    def close(self, wait: float = C.STORE_CLOSE_WAIT_SECONDS) -> None:
        """Close the store: calls already in a transaction finish it (their connections close
        as they return, the pool waiting up to `wait` seconds), later ones raise StoreError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.close(timeout=wait)


def _hidden(text: str, url: str) -> str:
    """`text` with the password of `url` (if any) replaced by `***`."""
    password = urlsplit(url).password
    return text.replace(password, "***") if password else text
