"""The queries of a memory's ordered lane: its jobs and the lease on it, mixed into each backend's
transaction. Every query is bound to the transaction's memory id (`_key`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import cast

from ..records import JobRecord
from .queries import JOB_COLUMNS, UNREAD, Executor, job_of

__all__ = ["LaneQueries", "memories_with_jobs"]

log = logging.getLogger("fadeway.lane")


def memories_with_jobs(due: float | None) -> tuple[str, tuple]:
    """The query and arguments of `Store.memories_with_pending_jobs`: memories with pending
    jobs, and with parked jobs due."""
    if due is None:
        return "SELECT DISTINCT memory_id FROM jobs WHERE state = 'pending' ORDER BY memory_id", ()
    # A union, not an OR: each side reads its own partial index (jobs_pending, jobs_parked),
    # where an OR read every job ever queued, done ones included.
    return (
        "SELECT memory_id FROM jobs WHERE state = 'pending' UNION SELECT memory_id FROM jobs "
        "WHERE state = 'failed' AND (retry_at IS NULL OR retry_at <= ?) ORDER BY memory_id",
        (due,),
    )


class LaneQueries:
    """Jobs, oldest first, and the lease a worker holds the lane by."""

    _conn: Executor
    _key: object
    memory_id: str
    _oldest_job: JobRecord | None | object  # `MemoryQueries._oldest_job`
    _last_job: int | None  # `MemoryQueries._last_job`

    def enqueue(self, kind: str, payload: bytes, created_at: float) -> int:
        # Writers of one memory take turns, so none races the number. Known from the opening
        # read, it is given, and the INSERT goes with the next query (no round trip of its own
        # on PostgreSQL); else it is taken past the last job in the statement that inserts it.
        self._oldest_job = UNREAD
        if self._last_job is not None:
            n = self._last_job + 1
            self._conn.execute(
                "INSERT INTO jobs (memory_id, n, kind, payload, created_at) VALUES (?, ?, ?, ?, ?)",
                (self._key, n, kind, payload, created_at),
            )
        else:
            (n,) = self._conn.execute(
                "INSERT INTO jobs (memory_id, n, kind, payload, created_at) "
                "SELECT ?, COALESCE(MAX(n), 0) + 1, ?, ?, ? FROM jobs WHERE memory_id = ? "
                "RETURNING n",
                (self._key, kind, payload, created_at, self._key),
            ).fetchone()
        self._last_job = n = int(n)
        return n

    def last_job(self) -> int:
        if self._last_job is not None:
            return self._last_job
        (top,) = self._conn.execute(
            "SELECT MAX(n) FROM jobs WHERE memory_id = ?", (self._key,)
        ).fetchone()
        return int(top or 0)

    def pending_job(self, kind: str | None = None) -> JobRecord | None:
        if kind is None and self._oldest_job is not UNREAD:
            return cast(JobRecord | None, self._oldest_job)  # as the transaction opened
        sql = f"SELECT {JOB_COLUMNS} FROM jobs WHERE memory_id = ? AND state = 'pending'"
        args: tuple = (self._key,)
        if kind is not None:
            sql += " AND kind = ?"
            args += (kind,)
        row = self._conn.execute(sql + " ORDER BY n LIMIT 1", args).fetchone()
        return job_of(row) if row else None

    def finish_job(self, n: int, state: str, error: str | None = None) -> None:
        self._oldest_job = UNREAD
        self._conn.execute(
            "UPDATE jobs SET state = ?, error = ? WHERE memory_id = ? AND n = ?",
            (state, error, self._key, n),
        )

    def record_attempt(
        self, n: int, error: str | None, retry_at: float | None = None, *, waited: bool = False
    ) -> tuple[int, int]:
        self._oldest_job = UNREAD
        self._conn.execute(
            "UPDATE jobs SET attempts = attempts + 1, waits = waits + ?, error = ?, retry_at = ? "
            "WHERE memory_id = ? AND n = ?",
            (int(waited), error, retry_at, self._key, n),
        )
        attempts, waits = self._conn.execute(
            "SELECT attempts, waits FROM jobs WHERE memory_id = ? AND n = ?", (self._key, n)
        ).fetchone()
        return attempts, waits

    def park_job(
        self, n: int, error: str, retry_at: float | None, *, attempts: int | None = None
    ) -> None:
        self._oldest_job = UNREAD
        self._conn.execute(
            "UPDATE jobs SET state = 'failed', error = ?, retry_at = ?, parked = parked + 1, "
            "attempts = COALESCE(?, attempts) WHERE memory_id = ? AND n = ?",
            (error, retry_at, attempts, self._key, n),
        )

    def revive_jobs(
        self, now: float | None = None, *, kind: str | None = None, outages: int = 0
    ) -> int:
        left = max(0, outages - 1)  # an answered service's job: one more unreachable attempt
        if kind is not None:
            which = " AND kind = ? AND waits >= ?"
            args: tuple = (left, left, self._key, kind, outages)
        elif now is not None:
            which, args = " AND (retry_at IS NULL OR retry_at <= ?)", (0, 0, self._key, now)
        else:
            which, args = "", (0, 0, self._key)
        # Counted by the rows it returns: a statement's rowcount is not in yet while a
        # PostgreSQL write transaction is pipelined.
        revived = self._conn.execute(
            "UPDATE jobs SET state = 'pending', attempts = ?, waits = ?, retry_at = NULL "
            "WHERE memory_id = ? AND state = 'failed'" + which + " RETURNING n",
            args,
        )
        count = len(list(revived))
        if count:
            self._oldest_job = UNREAD
        return count

    def jobs(self, state: str | None = None) -> list[JobRecord]:
        sql = f"SELECT {JOB_COLUMNS} FROM jobs WHERE memory_id = ?"
        args: tuple = (self._key,)
        if state is not None:
            sql += " AND state = ?"
            args += (state,)
        return [job_of(r) for r in self._conn.execute(sql + " ORDER BY n", args)]

    def claim_lane(
        self, owner: str, now: float, until: float, *, gone: Callable[[str], bool] | None = None
    ) -> bool:
        # A free lane, or one this owner holds, is taken in one statement (a round trip on
        # PostgreSQL); only a lane held by another is read, to see whether its holder is gone.
        if self._conn.execute(
            "UPDATE lanes SET owner = ?, lease_until = ? WHERE memory_id = ? AND (owner IS NULL "
            "OR owner = ? OR lease_until IS NULL OR lease_until <= ?) RETURNING owner",
            (owner, until, self._key, owner, now),
        ).fetchone():
            return True
        row = self._conn.execute(
            "SELECT owner, lease_until FROM lanes WHERE memory_id = ?", (self._key,)
        ).fetchone()
        if row is None:
            self._conn.execute(
                "INSERT INTO lanes (memory_id, owner, lease_until) VALUES (?, ?, ?)",
                (self._key, owner, until),
            )
            return True
        holder, lease_until = row
        if holder not in (None, owner) and lease_until is not None and lease_until > now:
            if gone is None or not gone(holder):
                return False
            log.info("memory %r: lane lease of %s taken: it no longer runs", self.memory_id, holder)
        self._conn.execute(
            "UPDATE lanes SET owner = ?, lease_until = ? WHERE memory_id = ?",
            (owner, until, self._key),
        )
        return True

    def release_lane(self, owner: str) -> None:
        self._conn.execute(
            "UPDATE lanes SET owner = NULL, lease_until = NULL WHERE memory_id = ? AND owner = ?",
            (self._key, owner),
        )
