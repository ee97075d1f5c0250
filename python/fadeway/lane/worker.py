"""The ordered lane: a durable job queue per memory, in the store (ARCHITECTURE: "Storage and
scale"; MECHANISM: "When each part runs").

Only the oldest pending job of a memory runs, so a score never races the cut it depends on. A
worker holds a memory's lane by a lease in the store; a job is prepared from a snapshot (where a
judge may take its time, no lock held) and applied in one transaction that also marks it done.
A worker that dies mid-job leaves the job pending and its lease to expire: the job runs again
and is applied once. A lease whose holder is a process of this host (and of this PID namespace,
so a container sharing the hostname is not mistaken for it) that no longer runs is taken at once
(`gone`): a restart after a crash does not wait out its own dead lease. Different memories' lanes
run concurrently.

A job out of attempts is parked (state "failed", kept with its error) and the lane moves on. It
is queued again, in its place, once its wait has passed (`park_wait`: by a later run of its
memory's lane, or by a background worker's poll however quiet the memory is); one parked because
its service could not be reached, also as soon as a job of its kind that called a model
completes in the lane (the service answers again: `revive_answered`), with one attempt before
it is parked again (a job that times out by itself, say, costs a call for each that answers,
not an outage's sixteen); and every one at once by `Memory.retry_jobs` (`fadeway lane retry`).
Nothing is given up.

What each kind of job does, and how it is retried, is the job table (`lane.jobs`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, cast

import httpx

from .. import _constants as C
from .._aio import run_sync
from .._services import LaneQueue
from ..errors import EndpointError, FadewayError
from ..records import JobRecord
from ..store import Store, Transaction
from ..usage import UsageRecord, collecting
from .jobs import Job, Skippable

__all__ = ["BackgroundWorker", "Lane", "transient"]

log = logging.getLogger("fadeway.lane")


class _Claim(NamedTuple):
    """A lane claimed or not, its job that may run now (None: nothing may run), and whether
    that is because none is pending at all (not one waiting out its service's outage)."""

    held: bool
    job: JobRecord | None
    empty: bool = False


def _pid_namespace() -> str:
    """This process's PID namespace (its inode), or "" where there is no /proc to say."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


_NAMESPACE = _pid_namespace()


def _owner() -> str:
    """A lease holder's name: host, PID namespace, process and thread."""
    return f"{socket.gethostname()}:{_NAMESPACE}:{os.getpid()}:{threading.get_ident()}"


def gone(holder: str) -> bool:
    """Whether the lease `holder` names a process that no longer runs: one of this host and
    PID namespace (both known), other than this one, that signal 0 cannot reach. Anything else
    (another host, an older fadeway's name, a process alive or not ours to signal) is not."""
    host, namespace, pid, *_ = [*holder.split(":"), "", "", ""]
    if host != socket.gethostname() or not _NAMESPACE or namespace != _NAMESPACE:
        return False
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


class _Leases:
    """Keeps renewing the leases of the lanes whose jobs are being prepared (`holding`): a judge
    may take longer than one lease (its deadline is LANE_JUDGE_DEADLINE), and a lease that
    lapsed would let another worker prepare the same job again, and again. Each is renewed a
    third of a lease after it was taken, then every third, by one thread for all of them,
    started when a lane is first held and ending a third of a lease after none is. (A thread
    started and joined for each job cost a replay of ten LoCoMo conversations on two workers
    about 6% of each process's time, waiting for the thread to start and to end.)"""

    def __init__(self, store: Store, lease: float) -> None:
        self._store, self._lease, self._every = store, lease, lease / 3
        self._due: dict[tuple[str, str], float] = {}  # (memory, owner) -> next renewal
        self._renewing: tuple[str, str] | None = None
        self._changed = threading.Condition()
        self._thread: tuple[int, threading.Thread] | None = None  # its process, itself

    @contextlib.contextmanager
    def holding(self, memory_id: str, owner: str) -> Iterator[None]:
        """Renew `owner`'s lease on the memory's lane until the block ends; once it has, no
        renewal is under way or to come (a renewal after the lane's release would hold it)."""
        key = (memory_id, owner)
        with self._changed:
            self._due[key] = time.monotonic() + self._every
            if self._thread is None or self._thread[0] != os.getpid():
                thread = threading.Thread(target=self._keep, name="fadeway-lease", daemon=True)
                self._thread = (os.getpid(), thread)
                thread.start()
            # No wake: the thread's next wake-up is no later than this lane's first renewal.
        try:
            yield
        finally:
            with self._changed:
                self._due.pop(key, None)
                while self._renewing == key:
                    self._changed.wait()

    def _keep(self) -> None:
        with self._changed:
            while True:
                if not self._due:
                    self._changed.wait(self._every)
                    if not self._due:
                        self._thread = None
                        return
                    continue
                key, due = min(self._due.items(), key=lambda item: item[1])
                now = time.monotonic()
                if due > now:
                    self._changed.wait(due - now)
                    continue
                self._due[key], self._renewing = now + self._every, key
                self._changed.release()  # the other lanes' jobs start and end meanwhile
                try:
                    renewed = self._renew(*key)
                finally:
                    self._changed.acquire()
                    self._renewing = None
                    self._changed.notify_all()
                if not renewed:  # taken over, or the store failing: the lease lapses
                    self._due.pop(key, None)

    def _renew(self, memory_id: str, owner: str) -> bool:
        try:
            now = time.time()
            with self._store.write(memory_id) as tx:
                tx.bookkeeping = True
                return tx.claim_lane(owner, now, now + self._lease)
        except FadewayError:
            return False


class Lane:
    """The lanes of one store's memories, each run with the job table `jobs` (by kind)."""

    def __init__(self, store: Store, queue: LaneQueue, jobs: Mapping[str, Job]) -> None:
        self.store, self.queue, self.jobs = store, queue, jobs
        self._leases = _Leases(store, queue.lease_seconds)

    def run(
        self, memory_id: str, owner: str | None = None, stop: threading.Event | None = None
    ) -> int | None:
        """Run a memory's pending jobs, oldest first, while holding its lane (until `stop` is
        set: the job in hand is finished, the next left pending).

        Returns how many jobs were applied, or None when another worker holds the lane.
        """
        return self._run(memory_id, owner or _owner(), stop)[0]

    def _run(
        self, memory_id: str, owner: str, stop: threading.Event | None
    ) -> tuple[int | None, bool]:
        """`run`, and whether it ended with no job of the memory pending."""
        applied, revive = 0, True
        claimed: _Claim | None = None  # the next job, claimed as the last one was applied
        while stop is None or not stop.is_set():
            held, job, empty = claimed or self._claim(memory_id, owner, revive=revive)
            claimed, revive = None, False  # revived once a run: a job parked again waits
            if not held:
                return (None if applied == 0 else applied), False
            if job is None:
                return applied, empty
            used: list[UsageRecord] = []
            try:
                with collecting() as used, self._leases.holding(memory_id, owner):
                    prepared = run_sync(self._job(job).handler.prepare(memory_id, job))
            except Exception as exc:  # a failing job must not stop the worker; it is retried
                self._failed_attempt(memory_id, job, exc, used)
                continue
            done, claimed = self._apply(memory_id, owner, job, prepared, used)
            if done is None:
                return applied, False
            applied += done
        with self.store.write(memory_id) as tx:  # stopped: the next worker need not wait
            tx.bookkeeping = True
            tx.release_lane(owner)
        return applied, False

    def _job(self, job: JobRecord) -> Job:
        found = self.jobs.get(job.kind)
        if found is None:
            raise LookupError(f"no handler for job kind {job.kind!r}")
        return found

    def _claim(self, memory_id: str, owner: str, *, revive: bool = False) -> _Claim:
        """Take the lane for `owner` (False: another worker holds it) and its oldest job that
        may run now (`_next`). With `revive`, parked jobs whose wait has passed are queued
        again first, in their places."""
        now = time.time()
        with self.store.write(memory_id) as tx:
            tx.bookkeeping = True  # unless a job's state changes (decorate reads them)
            if not tx.claim_lane(owner, now, now + self.queue.lease_seconds, gone=gone):
                return _Claim(False, None)
            if revive and (revived := tx.revive_jobs(now)):
                tx.bookkeeping = False
                log.info("memory %r: %d parked jobs queued again", memory_id, revived)
            return self._next(tx, memory_id, owner, now)

    def _next(self, tx: Transaction, memory_id: str, owner: str, now: float) -> _Claim:
        """In `tx`, which holds the lane for `owner`: its oldest job that may run now, after
        skipping what a lane behind may skip, or None (nothing may run: the lane is released)."""
        while (job := tx.pending_job()) is not None:
            if job.retry_at is not None and job.retry_at > now:
                break  # waiting out its service's outage
            kind = self.jobs.get(job.kind)
            if kind is None or not kind.skippable:
                return _Claim(True, job)
            if not cast(Skippable, kind.handler).stale(tx, job):
                return _Claim(True, job)
            tx.finish_job(job.n, "done")
            tx.bookkeeping = False
            log.debug("memory %r: job %d (%s) skipped: never read", memory_id, job.n, job.kind)
        tx.release_lane(owner)  # done, or waiting out its service's outage
        return _Claim(True, None, empty=job is None)

    def _apply(
        self, memory_id: str, owner: str, job: JobRecord, prepared: Any, used: list[UsageRecord]
    ) -> tuple[int | None, _Claim | None]:
        """Apply a prepared job in the transaction that marks it done and claims the next
        (`_next`: one transaction a job, not two): how many jobs were applied (0 when another
        worker finished it, or its snapshot was stale; None when the lane was taken over
        meanwhile), and the next job claimed (None: claim it anew)."""
        now = time.time()
        try:
            with self.store.write(memory_id) as tx:
                tx.bookkeeping = True  # until the job's result is applied
                if not tx.claim_lane(owner, now, now + self.queue.lease_seconds):
                    log.info(
                        "memory %r: lane taken over during job %d; result discarded",
                        memory_id,
                        job.n,
                    )
                    tx.insert_usage(used, job.created_at)  # spent all the same
                    return None, None
                current = tx.pending_job()
                if current is None or current.n != job.n:
                    # another worker finished it while our lease had lapsed
                    return 0, self._next(tx, memory_id, owner, now)
                tx.insert_usage(used, job.created_at)  # spent even when the result is stale
                tx.bookkeeping = False
                try:
                    done = self._job(job).handler.apply(tx, job, prepared)
                except Exception as exc:
                    raise _ApplyFailed(exc) from exc
                if done:
                    tx.finish_job(job.n, "done")
                    if used:  # its service answered (a job that called none proves nothing)
                        self.revive_answered(tx, memory_id, job)
                return int(done), self._next(tx, memory_id, owner, now)
        except _ApplyFailed as failed:  # rolled back whole; counted like a failed prepare
            self._failed_attempt(memory_id, job, failed.cause, used)
            return 0, None

    def revive_answered(self, tx: Transaction, memory_id: str, done: JobRecord) -> int:
        """In `tx`, which marked `done` done: queue again, in their places, the memory's jobs
        of `done`'s kind parked because their service could not be reached (it answers again).
        Returns how many."""
        revived = tx.revive_jobs(kind=done.kind, outages=self._job(done).retry.outages)
        if revived:
            log.info(
                "memory %r: %d parked jobs queued again: their service answered job %d (%s)",
                *(memory_id, revived, done.n, done.kind),
            )
        return revived

    def retry_wait(self, waits: int) -> float:
        """Seconds before a job runs again after its `waits`-th attempt that could not reach
        its service: doubling from `lane_retry_seconds`, at most LANE_RETRY_MAX_SECONDS,
        shortened by up to a quarter at random so that lanes waiting on one service do not
        retry in step."""
        wait = min(self.queue.retry_seconds * 2.0 ** (waits - 1), C.LANE_RETRY_MAX_SECONDS)
        return wait * (1.0 - C.LANE_RETRY_JITTER * random.random())

    def park_wait(self, parked: int) -> float:
        """Seconds before a job parked for the `parked`-th time is tried again (by a later lane
        run of its memory): LANE_PARKED_SECONDS doubling, at most LANE_PARKED_MAX_SECONDS."""
        return min(C.LANE_PARKED_SECONDS * 2.0 ** (parked - 1), C.LANE_PARKED_MAX_SECONDS)

    def _failed_attempt(
        self, memory_id: str, job: JobRecord, exc: Exception, used: list[UsageRecord]
    ) -> None:
        """Count a failed attempt at `job` by its kind's `Retry`; park the job past it."""
        error = f"{type(exc).__name__}: {exc}"
        waited = transient(exc)
        kind = self.jobs.get(job.kind)
        retry = kind.retry if kind is not None else None
        wait = self.retry_wait(job.waits + 1) if waited else 0.0
        with self.store.write(memory_id) as tx:
            tx.insert_usage(used, job.created_at)
            retry_at = time.time() + wait if wait > 0 else None
            attempts, waits = tx.record_attempt(job.n, error, retry_at, waited=waited)
            if waited:
                count, limit = waits, retry.outages if retry else C.JOB_MAX_TRANSIENT_ATTEMPTS
            else:
                count, limit = attempts - waits, retry.failures if retry else C.JOB_MAX_ATTEMPTS
            tx.bookkeeping = count < limit  # a parked job is one decorate may supersede
            if count >= limit:
                park = self.park_wait(job.parked + 1)
                tx.park_job(job.n, error, time.time() + park)
        where = f"memory {memory_id!r}: job {job.n} ({job.kind})"
        if count >= limit:
            log.error(
                "%s failed %d times and is parked; a lane run after %.0f s tries it again "
                "(or `fadeway lane retry`): %s",
                *(where, attempts, park, error),
            )
        elif waited:
            log.warning(
                "%s could not reach its service (%d of %d times); trying again in %.0f s: %s",
                *(where, count, limit, wait, error),
            )
        else:
            log.warning("%s failed (%d of %d times): %s", where, count, limit, error)

    def drain(self) -> int:
        """Run every pending job of every memory to completion; returns how many were applied.

        Lanes held by another worker are waited for (until that worker finishes or its lease
        ends), and so are jobs waiting out an outage of their judge or embedder.
        """
        owner = f"{_owner()}:drain"
        total = 0
        while True:
            pending = self.store.memories_with_pending_jobs()
            if not pending:
                return total
            progressed = False
            for memory_id in pending:
                ran = self.run(memory_id, owner)
                if ran:
                    total += ran
                    progressed = True
            if not progressed:
                time.sleep(self.idle_wait(pending))

    def run_through(self, memory_id: str) -> None:
        """Run the memory's pending jobs to completion here (waiting out a lease a killed
        worker left, which the lease bounds, and a job waiting out its service's outage)."""
        while True:
            with self.store.read(memory_id) as tx:
                if tx.pending_job() is None:
                    return
            applied, empty = self._run(memory_id, _owner(), None)
            if empty:
                return  # what it ran emptied the queue: no need to read it again
            if not applied:
                time.sleep(self.idle_wait([memory_id]))

    def idle_wait(self, memory_ids: list[str]) -> float:
        """How long a drain that ran nothing of these memories' lanes sleeps: until the first
        job waiting out its service's outage may run, at least a poll (LANE_POLL_SECONDS: a lane
        held by another worker may free) and at most an idle poll (jobs may be queued
        meanwhile)."""
        now, ready = time.time(), C.LANE_IDLE_POLL_SECONDS
        for memory_id in memory_ids:
            with self.store.read(memory_id) as tx:
                job = tx.pending_job()
            retry_at = job.retry_at if job is not None and job.retry_at is not None else now
            ready = min(ready, retry_at - now)
        return max(ready, C.LANE_POLL_SECONDS)


class _ApplyFailed(Exception):
    """A handler's `apply` raised: the transaction rolls back, and the attempt counts. (Raised
    and caught within `Lane._apply`, to leave the transaction by its rollback.)"""

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


class BackgroundWorker:
    """The in-process worker: threads that run lanes whenever jobs are queued (the lane
    queue's `wake` is set) and, every LANE_IDLE_POLL_SECONDS, for jobs other processes
    queued and parked jobs whose wait has passed. On a store with notifications (PostgreSQL) a
    listener sets `wake` as soon as another process commits jobs, and the poll is only the
    safety net."""

    def __init__(self, lane: Lane, threads: int = C.LANE_THREADS) -> None:
        self._lane = lane
        self._wake = lane.queue.wake
        self._stop = threading.Event()
        # The memories this worker's threads are running: another of its threads passes them
        # by without asking the store (a claim is a write transaction, and on a busy store
        # every thread asked for every lane the others held), noting it in `_missed`, and the
        # running thread looks at the lane again before it lets go (a job may have come after
        # its last look).
        self._running: set[str] = set()
        self._missed: set[str] = set()
        self._running_lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._loop, name=f"fadeway-lane-{i}", daemon=True)
            for i in range(threads)
        ]
        for t in self._threads:
            t.start()
        self._listener = lane.store.listen_for_jobs(self._wake, self._stop)
        self._wake.set()  # resume whatever a previous process left pending

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(C.LANE_IDLE_POLL_SECONDS)
            self._wake.clear()
            try:
                for memory_id in self._lane.store.memories_with_pending_jobs(due=time.time()):
                    if self._stop.is_set():
                        break
                    self._run(memory_id)
            except Exception:  # keep the worker alive; the store is the truth, jobs stay pending
                log.exception("background lane worker error")
                time.sleep(C.LANE_POLL_SECONDS)

    def _run(self, memory_id: str) -> None:
        """Run the memory's lane unless another thread of this worker is running it; that
        thread then runs it once more before it lets go."""
        with self._running_lock:
            if memory_id in self._running:
                self._missed.add(memory_id)
                return
            self._running.add(memory_id)
        try:
            while True:
                self._lane.run(memory_id, stop=self._stop)
                with self._running_lock:
                    if memory_id not in self._missed or self._stop.is_set():
                        self._running.discard(memory_id)
                        self._missed.discard(memory_id)
                        return
                    self._missed.discard(memory_id)
        except BaseException:  # not a `finally`: once let go above, the lane may be another's
            with self._running_lock:
                self._running.discard(memory_id)
                self._missed.discard(memory_id)
            raise

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join()
        if self._listener is not None:
            # It looks at `stop` every LANE_LISTEN_WAIT_SECONDS; one still connecting to a
            # server that does not answer is left to end by itself (a daemon thread).
            self._listener.join(C.LANE_LISTEN_WAIT_SECONDS * 4)
