"""The ordered lane: a durable job queue per memory, in the store (ARCHITECTURE: "Storage and
scale"; MECHANISM: "When each part runs").

Only the oldest pending job of a memory runs, so a score never races the cut it depends on. A
worker holds a memory's lane by a lease in the store; a job is prepared from a snapshot (where a
judge may take its time, no lock held) and applied in one transaction that also marks it done.
A worker that dies mid-job leaves the job pending and its lease to expire: the job runs again
and is applied once. Different memories' lanes run concurrently.

A job that fails is tried again. When its judge or embedder could not be reached (`transient`),
the lane waits longer before each attempt, so an outage of the service is ridden out with the
jobs behind it kept in order; any other failure is tried a few times at once. A job out of
attempts is marked failed with its error, and the lane moves on.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import contextvars
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from .. import _constants as C
from ..errors import EndpointError, FadewayError
from ..records import JobRecord
from ..store import Transaction
from ..usage import UsageRecord, collecting

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = [
    "JobHandler",
    "register_job",
    "run_lane",
    "drain",
    "idle_wait",
    "BackgroundWorker",
    "run_sync",
    "run_ready",
]

log = logging.getLogger("fadeway.lane")
T = TypeVar("T")


class JobHandler(abc.ABC):
    """One kind of background job."""

    @abc.abstractmethod
    async def prepare(self, engine: Engine, memory_id: str, job: JobRecord) -> Any:
        """Read what the job needs and do its slow part (judge calls). Nothing is written."""

    @abc.abstractmethod
    def apply(self, engine: Engine, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        """Write the job's result inside the transaction that marks it done.

        Returns False when the snapshot it was prepared from is stale: the job is prepared again.
        """


_HANDLERS: dict[str, JobHandler] = {}


def register_job(kind: str, handler: JobHandler) -> None:
    """Make `kind` a job the lanes can run."""
    _HANDLERS[kind] = handler


def job_kinds() -> frozenset[str]:
    """The kinds of job the lanes can run."""
    return frozenset(_HANDLERS)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code, even under a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as exc:  # handed to the caller's thread below
            error.append(exc)

    # The helper thread runs in a copy of this context, so what the coroutine records (usage)
    # reaches the caller's collectors.
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(target,), name="fadeway-run-sync")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


def run_ready(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never waits (one that only awaits coroutines of a `ready` judge)
    to its end, without an event loop: starting and closing one costs 0.4 ms, more than an
    offline walk itself. Raises RuntimeError if the coroutine does wait."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a coroutine run without an event loop waited on something")


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def run_lane(
    engine: Engine, memory_id: str, owner: str | None = None, stop: threading.Event | None = None
) -> int | None:
    """Run a memory's pending jobs, oldest first, while holding its lane (until `stop` is set:
    the job in hand is finished, the next left pending).

    Returns how many jobs were applied, or None when another worker holds the lane.
    """
    owner = owner or _owner()
    lease = engine.lane_lease_seconds
    applied = 0
    while stop is None or not stop.is_set():
        now = time.time()
        with engine.store.write(memory_id) as tx:
            if not tx.claim_lane(owner, now, now + lease):
                return None if applied == 0 else applied
            job = tx.pending_job()
            if job is None or (job.retry_at is not None and job.retry_at > now):
                tx.release_lane(owner)  # done, or waiting out its service's outage
                return applied
        handler = _HANDLERS.get(job.kind)
        used: list[UsageRecord] = []
        try:
            if handler is None:
                raise LookupError(f"no handler for job kind {job.kind!r}")
            with collecting() as used, _holding(engine, memory_id, owner, lease):
                prepared = run_sync(handler.prepare(engine, memory_id, job))
        except Exception as exc:  # a failing job must not stop the worker; it is retried
            _failed_attempt(engine, memory_id, job, exc, used)
            continue
        now = time.time()
        try:
            with engine.store.write(memory_id) as tx:
                if not tx.claim_lane(owner, now, now + lease):
                    log.info(
                        "memory %r: lane taken over during job %d; result discarded",
                        memory_id,
                        job.n,
                    )
                    tx.insert_usage(used, job.created_at)  # spent all the same
                    return applied
                current = tx.pending_job()
                if current is None or current.n != job.n:
                    continue  # another worker finished it while our lease had lapsed
                tx.insert_usage(used, job.created_at)  # spent even when the result is stale
                try:
                    done = handler.apply(engine, tx, job, prepared)  # type: ignore[union-attr]
                except Exception as exc:
                    raise _ApplyFailed(exc) from exc
                if done:
                    tx.finish_job(job.n, "done")
                    applied += 1
        except _ApplyFailed as failed:  # rolled back whole; counted like a failed prepare
            _failed_attempt(engine, memory_id, job, failed.cause, used)
    with engine.store.write(memory_id) as tx:  # stopped: the next worker need not wait
        tx.release_lane(owner)
    return applied


@contextlib.contextmanager
def _holding(engine: Engine, memory_id: str, owner: str, lease: float) -> Iterator[None]:
    """Keep renewing `owner`'s lease on the lane while a job is prepared: a judge may take
    longer than one lease (its deadline is LANE_JUDGE_DEADLINE), and a lease that lapsed would
    let another worker prepare the same job again, and again."""
    done = threading.Event()

    def renew() -> None:
        while not done.wait(lease / 3):
            try:
                now = time.time()
                with engine.store.write(memory_id) as tx:
                    if not tx.claim_lane(owner, now, now + lease):
                        return
            except FadewayError:  # the store closed, or is failing: the lease just lapses
                return

    thread = threading.Thread(target=renew, name="fadeway-lease", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


class _ApplyFailed(Exception):
    """A handler's `apply` raised: the transaction rolls back, and the attempt counts."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


def transient(exc: BaseException) -> bool:
    """Whether `exc` says that a service could not be reached or was overloaded, so that the
    same call may well succeed later: a network error or a timeout, or an endpoint's answer
    of 408, 429 or 5xx (`EndpointError.retryable`). A refused call (another 4xx), an unreadable
    answer or a missing setting is not: waiting will not mend it."""
    if isinstance(exc, EndpointError):
        return exc.retryable
    # OSError: sockets' own errors, and those of clients built on them (requests' included),
    # but not a file that is missing or may not be read, which waiting will not bring.
    return isinstance(exc, (OSError, TimeoutError, httpx.TransportError)) and not isinstance(
        exc, _LOCAL_ERRORS
    )


_LOCAL_ERRORS = (
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)


def retry_wait(engine: Engine, waits: int) -> float:
    """Seconds before a job runs again after its `waits`-th attempt that could not reach its
    service: doubling from `lane_retry_seconds`, at most LANE_RETRY_MAX_SECONDS, shortened by
    up to a quarter at random so that lanes waiting on one service do not retry in step."""
    wait = min(engine.lane_retry_seconds * 2.0 ** (waits - 1), C.LANE_RETRY_MAX_SECONDS)
    return wait * (1.0 - C.LANE_RETRY_JITTER * random.random())


def _failed_attempt(
    engine: Engine, memory_id: str, job: JobRecord, exc: Exception, used: list[UsageRecord]
) -> None:
    """Count a failed attempt at `job`: one that could not reach its service waits before the
    next and may do so JOB_MAX_TRANSIENT_ATTEMPTS times; any other failure is tried again at
    once, up to JOB_MAX_ATTEMPTS of those. Then the job is given up."""
    error = f"{type(exc).__name__}: {exc}"
    waited = transient(exc)
    wait = retry_wait(engine, job.waits + 1) if waited else 0.0
    with engine.store.write(memory_id) as tx:
        tx.insert_usage(used, job.created_at)
        attempts, waits = tx.record_attempt(
            job.n, error, time.time() + wait if wait > 0 else None, waited=waited
        )
        count, limit = (
            (waits, C.JOB_MAX_TRANSIENT_ATTEMPTS)
            if waited
            else (attempts - waits, C.JOB_MAX_ATTEMPTS)
        )
        if count >= limit:
            tx.finish_job(job.n, "failed", error)
            log.error(
                "memory %r: job %d (%s) failed %d times and is given up: %s",
                memory_id,
                job.n,
                job.kind,
                attempts,
                error,
            )
        elif waited:
            log.warning(
                "memory %r: job %d (%s) could not reach its service (%d of %d times); "
                "trying again in %.0f s: %s",
                memory_id,
                job.n,
                job.kind,
                count,
                limit,
                wait,
                error,
            )
        else:
            log.warning(
                "memory %r: job %d (%s) failed (%d of %d times): %s",
                memory_id,
                job.n,
                job.kind,
                count,
                limit,
                error,
            )


def drain(engine: Engine) -> int:
    """Run every pending job of every memory to completion; returns how many were applied.

    Lanes held by another worker are waited for (until that worker finishes or its lease ends),
    and so are jobs waiting out an outage of their judge or embedder.
    """
    owner = f"{_owner()}:drain"
    total = 0
    while True:
        pending = engine.store.memories_with_pending_jobs()
        if not pending:
            return total
        progressed = False
        for memory_id in pending:
            ran = run_lane(engine, memory_id, owner)
            if ran:
                total += ran
                progressed = True
        if not progressed:
            time.sleep(idle_wait(engine, pending))


def idle_wait(engine: Engine, memory_ids: list[str]) -> float:
    """How long a drain that ran nothing of these memories' lanes sleeps: until the first job
    waiting out its service's outage may run, at least a poll (LANE_POLL_SECONDS: a lane held
    by another worker may free) and at most an idle poll (jobs may be queued meanwhile)."""
    now, ready = time.time(), C.LANE_IDLE_POLL_SECONDS
    for memory_id in memory_ids:
        with engine.store.read(memory_id) as tx:
            job = tx.pending_job()
        retry_at = job.retry_at if job is not None and job.retry_at is not None else now
        ready = min(ready, retry_at - now)
    return max(ready, C.LANE_POLL_SECONDS)


class BackgroundWorker:
    """The in-process worker: threads that run lanes whenever jobs are queued."""

    def __init__(self, engine: Engine, threads: int = C.LANE_THREADS) -> None:
        self._engine = engine
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._loop, name=f"fadeway-lane-{i}", daemon=True)
            for i in range(threads)
        ]
        for t in self._threads:
            t.start()
        self._wake.set()  # resume whatever a previous process left pending

    def notify(self) -> None:
        """Jobs were queued."""
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(C.LANE_IDLE_POLL_SECONDS)
            self._wake.clear()
            try:
                for memory_id in self._engine.store.memories_with_pending_jobs():
                    if self._stop.is_set():
                        break
                    run_lane(self._engine, memory_id, stop=self._stop)
            except Exception:  # keep the worker alive; the store is the truth, jobs stay pending
                log.exception("background lane worker error")
                time.sleep(C.LANE_POLL_SECONDS)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join()
