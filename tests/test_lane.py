"""The ordered lane: one memory's jobs run strictly in order, once each, across workers and
crashes; different memories run side by side."""

from __future__ import annotations

import random
import sqlite3
import threading
import time

import httpx
import msgspec
import pytest

import fadeway
from fadeway.engine import Engine
from fadeway.errors import EndpointError, EndpointResponseError, EndpointTimeout, JudgeTimeout
from fadeway.lane.jobs import Job
from fadeway.lane.worker import Lane, _Leases, transient
from fadeway.records import EpisodeRecord, TraceRecord

pytestmark = pytest.mark.both_stores  # a test of the lane on its store runs on both

APPLIED: list[tuple[str, int]] = []
APPLIED_LOCK = threading.Lock()


class Probe:
    """Sleeps a random moment while preparing, then records the order jobs were applied in."""

    async def prepare(self, memory_id, job):
        import asyncio

        await asyncio.sleep(random.random() * 0.004)
        return msgspec.json.decode(job.payload)

    def apply(self, tx, job, prepared):
        if prepared.get("fail"):
            raise AssertionError("apply must not run for a job whose prepare failed")
        with APPLIED_LOCK:
            APPLIED.append((tx.memory_id, job.n))
        return True


class Failing:
    async def prepare(self, memory_id, job):
        raise RuntimeError("the judge is down")

    def apply(self, tx, job, prepared):  # pragma: no cover - never reached
        return True


class Outage:
    """Cannot reach its service while `DOWN` holds a count of failures still to give."""

    DOWN = [0]
    error: type[Exception] = ConnectionError

    async def prepare(self, memory_id, job):
        if self.DOWN[0] > 0:
            self.DOWN[0] -= 1
            raise self.error("connection refused")
        return None

    def apply(self, tx, job, prepared):
        with APPLIED_LOCK:
            APPLIED.append((tx.memory_id, job.n))
        return True


class BadApply:
    """Writes, then raises in `apply` the first `FAILS[0]` times."""

    FAILS = [0]

    async def prepare(self, memory_id, job):
        return None

    def apply(self, tx, job, prepared):
        tx.append_traces(
            [
                TraceRecord(
                    n=1, episode=1, fact=None, kind="encoding", score=1.0, counted=True, at=0.0
                )
            ]
        )
        if self.FAILS[0] > 0:
            self.FAILS[0] -= 1
            raise KeyError("fact")
        with APPLIED_LOCK:
            APPLIED.append((tx.memory_id, job.n))
        return True


class Flaky:
    """Raises the errors of `ERRORS` in turn, then succeeds."""

    ERRORS: list[Exception] = []

    async def prepare(self, memory_id, job):
        if self.ERRORS:
            raise self.ERRORS.pop(0)
        return None

    def apply(self, tx, job, prepared):
        return True


#: The test's own kinds of job, run beside fadeway's.
TEST_JOBS = {
    "probe": Probe(),
    "flaky": Flaky(),
    "bad-apply": BadApply(),
    "failing": Failing(),
    "outage": Outage(),
}


def _jobs_of(engine):
    return {**engine.lane.jobs, **{k: Job(h, "test_lane") for k, h in TEST_JOBS.items()}}


def lane_of(engine):
    """The engine's lanes, with the test's kinds of job beside fadeway's."""
    return Lane(engine.store, engine.services.lane, _jobs_of(engine))


@pytest.fixture
def quiet_engine(db, clock):
    eng = fadeway.open(db, clock=clock, background=False, lane_lease_seconds=5.0)
    yield eng
    eng.close()


def _queue(engine, memory_id, kind, count, payload=b"{}"):
    engine.memory(memory_id).decorate({"messages": [{"role": "user", "content": "hi"}]})
    with engine.store.write(memory_id) as tx:
        return [tx.enqueue(kind, payload, 0.0) for _ in range(count)]


def test_jobs_run_in_order_once_each_with_several_workers(quiet_engine):
    APPLIED.clear()
    for mid in ("a", "b", "c"):
        _queue(quiet_engine, mid, "probe", 15)
    workers = [
        threading.Thread(
            target=lambda i=i: [
                lane_of(quiet_engine).run(mid, f"w{i}") for mid in ("a", "b", "c", "b", "a")
            ]
        )
        for i in range(4)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    lane_of(quiet_engine).drain()
    for mid in ("a", "b", "c"):
        assert [n for m, n in APPLIED if m == mid] == list(range(1, 16))
    assert quiet_engine.store.memories_with_pending_jobs() == []


def test_a_job_is_applied_in_the_transaction_that_claims_the_next(quiet_engine, monkeypatch):
    """A run of n jobs writes n + 1 transactions (a claim, then each job applied with the
    next claimed), not a claim and an apply for each: fewer turns at SQLite's one writer, and
    fewer round trips to PostgreSQL."""
    APPLIED.clear()
    _queue(quiet_engine, "m", "probe", 5)
    store, writes = quiet_engine.store, []
    real = type(store).write

    def counted(self, memory_id):
        writes.append(memory_id)
        return real(self, memory_id)

    monkeypatch.setattr(type(store), "write", counted)
    assert lane_of(quiet_engine).run("m", "w") == 5
    assert writes == ["m"] * 6
    assert APPLIED == [("m", n) for n in range(1, 6)]
    with store.write("m") as tx:  # the lane was released: another worker takes it at once
        assert tx.pending_job() is None
        assert tx.claim_lane("other", time.time(), time.time() + 1)


def test_running_a_lane_through_reads_the_queue_once_when_its_run_empties_it(
    quiet_engine, monkeypatch
):
    """`run_through` (replay's lane, `Engine.run_lane`) reads the queue before it runs; a run
    that leaves no job pending ends it, with no second read to find the queue empty."""
    APPLIED.clear()
    _queue(quiet_engine, "m", "probe", 3)
    store, reads = quiet_engine.store, []
    real = type(store).read

    def counted(self, memory_id):
        reads.append(memory_id)
        return real(self, memory_id)

    monkeypatch.setattr(type(store), "read", counted)
    lane_of(quiet_engine).run_through("m")
    assert APPLIED == [("m", n) for n in range(1, 4)]
    assert reads == ["m"]  # the queue, once: its run left it empty


def test_a_held_lane_is_not_entered_until_its_lease_ends(quiet_engine):
    APPLIED.clear()
    _queue(quiet_engine, "m", "probe", 2)
    now = time.time()
    with quiet_engine.store.write("m") as tx:
        assert tx.claim_lane("dead-worker", now, now + 0.3)
    assert lane_of(quiet_engine).run("m", "other") is None
    assert APPLIED == []
    time.sleep(0.35)
    assert lane_of(quiet_engine).run("m", "other") == 2
    assert APPLIED == [("m", 1), ("m", 2)]


def test_a_lease_held_while_a_job_is_prepared_is_renewed_then_let_go(tmp_path):
    """One thread renews the leases of every lane whose job is being prepared, and stops when
    none is: once `holding` has ended, no renewal takes back a lane released after it."""
    with fadeway.open(tmp_path / "l.db", background=False, lane_lease_seconds=0.3) as engine:
        leases = _Leases(engine.store, 0.3)

        def claim(memory_id: str, owner: str) -> bool:
            now = time.time()
            with engine.store.write(memory_id) as tx:
                return tx.claim_lane(owner, now, now + 0.3)

        def keeper() -> threading.Thread | None:
            return leases._thread[1] if leases._thread is not None else None

        for m in ("a", "b"):
            engine.memory(m).decorate({"messages": [{"role": "user", "content": "hi"}]})
            assert claim(m, "w")
        with leases.holding("a", "w"), leases.holding("b", "w"):
            thread = keeper()
            assert thread is not None and thread.is_alive()
            time.sleep(0.5)  # past the lease: renewed, so still held
            assert not claim("a", "other") and not claim("b", "other")
        for m in ("a", "b"):
            with engine.store.write(m) as tx:
                tx.release_lane("w")
        time.sleep(0.25)  # past a renewal's time: none came after the block
        assert claim("a", "other") and claim("b", "other")
        thread.join(1.0)  # a third of a lease with nothing held: the thread ends
        assert not thread.is_alive() and keeper() is None


def test_a_failing_job_is_retried_then_parked_and_the_lane_moves_on(quiet_engine, caplog):
    APPLIED.clear()
    _queue(quiet_engine, "m", "failing", 1)
    with quiet_engine.store.write("m") as tx:
        tx.enqueue("probe", b"{}", 0.0)
    before = time.time()
    lane_of(quiet_engine).drain()
    jobs = {j.n: j for j in _jobs(quiet_engine, "m")}
    assert jobs[1].state == "failed" and jobs[1].attempts == 3 and jobs[1].parked == 1
    assert "the judge is down" in jobs[1].error
    assert jobs[1].retry_at >= before + 600  # LANE_PARKED_SECONDS: kept, to be tried again
    assert jobs[2].state == "done" and APPLIED == [("m", 2)]
    assert "is parked" in caplog.text
    # A later lane run before its wait has passed leaves it parked; one after runs it again.
    _queue(quiet_engine, "m", "probe", 1)
    lane_of(quiet_engine).drain()
    assert _jobs(quiet_engine, "m")[0].attempts == 3 and APPLIED == [("m", 2), ("m", 3)]
    with quiet_engine.store.write("m") as tx:
        tx.park_job(1, "RuntimeError: the judge is down", time.time() - 1)
        tx.enqueue("probe", b"{}", 0.0)
    lane_of(quiet_engine).drain()
    job = _jobs(quiet_engine, "m")[0]
    assert (job.state, job.attempts, job.parked) == ("failed", 3, 3)  # tried afresh, parked again
    assert job.retry_at >= time.time() + 4 * 600 - 60  # the wait doubled twice


def test_jobs_an_older_fadeway_gave_up_are_parked_and_run_again(tmp_path, clock):
    APPLIED.clear()
    path = tmp_path / "eight.db"
    with fadeway.open(path, clock=clock, background=False) as eng:
        _queue(eng, "m", "probe", 2)
    conn = sqlite3.connect(path, isolation_level=None)  # what a store of schema 8 holds
    conn.execute("DROP TABLE emitted")  # and schema 10's record of blocks
    conn.execute("ALTER TABLE memories DROP COLUMN blocks_tracked")
    conn.execute("DROP INDEX jobs_parked")
    conn.execute("ALTER TABLE jobs DROP COLUMN parked")
    conn.execute("UPDATE jobs SET state = 'failed', attempts = 3, error = 'gone' WHERE n = 1")
    conn.execute("DROP INDEX passages_by_time")  # and schema 11's
    conn.execute("ALTER TABLE memories DROP COLUMN version")  # and schema 12's
    conn.execute("ALTER TABLE usage DROP COLUMN tokens_cached")  # and schema 13's
    conn.execute("UPDATE fadeway_schema SET version = 8")
    conn.close()
    with fadeway.open(path, clock=clock, background=False) as eng:
        job = _jobs(eng, "m")[0]
        assert (job.state, job.parked, job.retry_at, job.error) == ("failed", 1, None, "gone")
        assert lane_of(eng).drain() == 2  # the pending job's run queues the parked one again
        assert [j.state for j in _jobs(eng, "m")] == ["done", "done"]
    assert APPLIED == [("m", 1), ("m", 2)]


def test_a_job_that_cannot_reach_its_service_waits_longer_each_time_and_keeps_the_order(
    db, clock, caplog
):
    APPLIED.clear()
    Outage.DOWN[0] = 3
    with fadeway.open(db, clock=clock, background=False, lane_retry_seconds=0.2) as eng:
        _queue(eng, "m", "outage", 1)
        with eng.store.write("m") as tx:
            tx.enqueue("probe", b"{}", 0.0)
        waits = []
        for attempt in (1, 2, 3):
            before = time.time()
            assert lane_of(eng).run("m") == 0  # fails, then waits: the job behind it waits too
            after = time.time()
            job = _jobs(eng, "m")[0]
            assert job.state == "pending" and job.attempts == attempt
            assert "ConnectionError: connection refused" in job.error
            waits.append((job.retry_at - before, job.retry_at - after))
            assert lane_of(eng).run("m") == 0 and _jobs(eng, "m")[0].attempts == attempt
            assert APPLIED == []
            time.sleep(job.retry_at - time.time() + 0.01)
        assert lane_of(eng).run("m") == 2  # the service is back
        assert APPLIED == [("m", 1), ("m", 2)]
    # 0.2, 0.4, 0.8 seconds, each shortened by up to a quarter at random, from the failure:
    # a moment between just before the attempt began and just after it ended (a loaded
    # machine may take a while over the attempt itself)
    for (most, least), planned in zip(waits, (0.2, 0.4, 0.8), strict=True):
        assert 0.75 * planned <= most and least <= planned
    assert "could not reach its service (1 of 16 times); trying again in" in caplog.text


def test_failures_of_the_two_kinds_are_counted_apart(db, clock):
    """Attempts that could not reach the service do not use up the three tries that a failure
    of another kind gets, nor those the sixteen waits."""
    APPLIED.clear()
    with fadeway.open(db, clock=clock, background=False, lane_retry_seconds=0.0) as eng:
        Flaky.ERRORS[:] = [ConnectionError("refused")] * 3 + [RuntimeError("unreadable")] * 2
        _queue(eng, "m", "flaky", 1)
        assert lane_of(eng).run("m") == 1
        job = _jobs(eng, "m")[0]
        assert (job.state, job.attempts, job.waits) == ("done", 5, 3)
        Flaky.ERRORS[:] = [ConnectionError("refused"), RuntimeError("unreadable")] * 3
        _queue(eng, "m", "flaky", 1)
        lane_of(eng).run("m")
        job = _jobs(eng, "m")[-1]
        assert (job.state, job.attempts, job.waits) == ("failed", 6, 3)  # at the third other
        assert job.error == "RuntimeError: unreadable"


def test_an_outage_longer_than_every_wait_gives_the_job_up(db, clock, monkeypatch):
    from fadeway import _constants as C

    monkeypatch.setattr(C, "JOB_MAX_TRANSIENT_ATTEMPTS", 4)
    APPLIED.clear()
    Outage.DOWN[0] = 100
    with fadeway.open(db, clock=clock, background=False, lane_retry_seconds=0.0) as eng:
        _queue(eng, "m", "outage", 1)
        with eng.store.write("m") as tx:
            tx.enqueue("probe", b"{}", 0.0)
        lane_of(eng).drain()
        jobs = _jobs(eng, "m")
    assert jobs[0].state == "failed" and jobs[0].attempts == 4 and Outage.DOWN[0] == 96
    assert jobs[1].state == "done" and APPLIED == [("m", 2)]


def test_drain_waits_out_an_outage_and_a_reopened_store_keeps_the_wait(db, clock):
    APPLIED.clear()
    Outage.DOWN[0] = 1
    path = db
    with fadeway.open(path, clock=clock, background=False, lane_retry_seconds=30.0) as eng:
        _queue(eng, "m", "outage", 1)
        assert lane_of(eng).run("m") == 0
        retry_at = _jobs(eng, "m")[0].retry_at
        assert retry_at > time.time() + 22  # 30 s, less up to a quarter
    with fadeway.open(path, clock=clock, background=False, lane_retry_seconds=30.0) as eng:
        assert lane_of(eng).run("m") == 0 and APPLIED == []  # another process honours the wait
        with eng.store.write("m") as tx:  # as if the wait were nearly over
            tx.record_attempt(1, "ConnectionError: connection refused", time.time() + 0.3)
        assert lane_of(eng).drain() == 1
        assert time.time() >= _jobs(eng, "m")[0].retry_at
        assert APPLIED == [("m", 1)] and _jobs(eng, "m")[0].attempts == 2


@pytest.mark.parametrize("fails", [2, 5])
def test_a_job_whose_apply_raises_is_rolled_back_and_counts_an_attempt(quiet_engine, fails):
    APPLIED.clear()
    BadApply.FAILS[0] = fails
    _queue(quiet_engine, "m", "bad-apply", 1)
    with quiet_engine.store.write("m") as tx:
        tx.insert_episodes(
            [
                EpisodeRecord(
                    n=1,
                    first_seq=0,
                    last_seq=0,
                    first_turn=1,
                    last_turn=1,
                    start_at=0.0,
                    end_at=0.0,
                    tokens=5,
                    cut_at=0.0,
                )
            ]
        )
        tx.enqueue("probe", b"{}", 0.0)
    assert lane_of(quiet_engine).drain() == (2 if fails < 3 else 1)
    jobs = _jobs(quiet_engine, "m")
    with quiet_engine.store.read("m") as tx:
        traces = tx.traces()
    if fails < 3:  # the third attempt applied, once
        assert jobs[0].state == "done" and jobs[0].attempts == fails and len(traces) == 1
        assert APPLIED == [("m", 1), ("m", 2)]
    else:  # given up; none of the failed attempts' writes stayed
        assert jobs[0].state == "failed" and jobs[0].attempts == 3 and traces == []
        assert "KeyError: 'fact'" in jobs[0].error and APPLIED == [("m", 2)]


def test_jobs_queued_before_retries_could_wait_still_run(tmp_path, clock):
    APPLIED.clear()
    path = tmp_path / "seven.db"
    with fadeway.open(path, clock=clock, background=False) as eng:
        _queue(eng, "m", "probe", 2)
    conn = sqlite3.connect(path, isolation_level=None)  # what a store of schema 7 holds
    conn.execute("DROP TABLE emitted")  # and schema 10's record of blocks
    conn.execute("ALTER TABLE memories DROP COLUMN blocks_tracked")
    conn.execute("DROP INDEX jobs_parked")
    conn.execute("ALTER TABLE jobs DROP COLUMN parked")
    conn.execute("ALTER TABLE jobs DROP COLUMN retry_at")
    conn.execute("ALTER TABLE jobs DROP COLUMN waits")
    conn.execute("DROP INDEX passages_by_time")  # and schema 11's
    conn.execute("ALTER TABLE memories DROP COLUMN version")  # and schema 12's
    conn.execute("ALTER TABLE usage DROP COLUMN tokens_cached")  # and schema 13's
    conn.execute("UPDATE fadeway_schema SET version = 7")
    conn.close()
    with fadeway.open(path, clock=clock, background=False) as eng:
        assert [j.retry_at for j in _jobs(eng, "m")] == [None, None]
        assert lane_of(eng).drain() == 2
    assert APPLIED == [("m", 1), ("m", 2)]


def test_a_replay_sleeps_through_a_wait_instead_of_polling_the_lane(db, clock, monkeypatch):
    """Each look at a lane is a write transaction: waiting out an outage looks again when the
    job may run, not every poll."""

    APPLIED.clear()
    Outage.DOWN[0] = 1
    looks = []
    with fadeway.open(db, clock=clock, background=False, lane_retry_seconds=0.4) as eng:
        _queue(eng, "m", "outage", 1)
        lane = lane_of(eng)
        run = lane.run
        monkeypatch.setattr(lane, "run", lambda *a: looks.append(a) or run(*a))
        lane.run_through("m")
        assert APPLIED == [("m", 1)]
    assert len(looks) <= 3  # the failure, at most one early look, the run


@pytest.mark.parametrize(
    ("error", "waits"),
    [
        (ConnectionError("refused"), True),
        (TimeoutError("slow"), True),
        (OSError(101, "Network is unreachable"), True),
        (
            EndpointError("failed on all 4 attempts; the last: connection refused", retryable=True),
            True,
        ),
        (
            EndpointError(
                "failed on all 4 attempts; the last: HTTP 503", status=503, retryable=True
            ),
            True,
        ),
        (EndpointTimeout("deadline", status=500), True),
        (EndpointError("FADEWAY_JUDGE_BASE_URL is not set"), False),
        (FileNotFoundError("model.bin"), False),
        (PermissionError("key file"), False),
        (JudgeTimeout("no answer by the deadline"), True),
        (httpx.ConnectError("refused"), True),
        (httpx.ReadTimeout("slow"), True),
        (EndpointError("refused with HTTP 401: bad key", status=401), False),
        (EndpointResponseError("malformed JSON", status=200), False),
        (RuntimeError("a bug"), False),
        (KeyError("fact"), False),
        (ValueError("bad payload"), False),
    ],
)
def test_only_a_service_out_of_reach_is_waited_for(error, waits):
    assert transient(error) is waits


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"lane_retry_seconds": -1.0}, "lane_retry_seconds must be zero or more"),
        ({"lane_retry_seconds": float("nan")}, "lane_retry_seconds must be zero or more"),
        ({"lane_lease_seconds": 0.0}, "lane_lease_seconds must be positive"),
        ({"ceiling": 0}, "ceiling must be a positive number"),
    ],
)
def test_a_bad_lane_setting_is_refused_before_the_store_is_created(tmp_path, setting, message):
    with pytest.raises(ValueError, match=message):
        fadeway.open(tmp_path / "n.db", **setting)
    assert list(tmp_path.iterdir()) == []


def _raw(db):
    """A connection of its own to the store at `db`, each statement its own transaction, and
    the error its append-only triggers raise."""
    if "://" not in db:
        return sqlite3.connect(db, isolation_level=None), sqlite3.IntegrityError
    import psycopg

    conn = psycopg.connect(db, autocommit=True)
    conn.execute("SET fadeway.every_memory = on")  # past row-level security, to every row
    return conn, psycopg.errors.RestrictViolation


def _jobs(engine, memory_id):
    with engine.store.read(memory_id) as tx:
        return tx.jobs()


def test_the_background_worker_runs_queued_jobs(db, clock):
    APPLIED.clear()
    quiet = fadeway.open(db, clock=clock, background=False)
    with Engine(quiet.services, jobs=_jobs_of(quiet), background=True) as eng:
        _queue(eng, "m", "probe", 3)
        eng.services.lane.queued()
        deadline = time.monotonic() + 10
        while eng.store.memories_with_pending_jobs() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [n for _, n in APPLIED] == [1, 2, 3]


def test_traces_messages_and_episode_bounds_cannot_be_edited_or_deleted(quiet_engine, db):
    quiet_engine.memory("m").decorate({"messages": [{"role": "user", "content": "hi"}]})
    with quiet_engine.store.write("m") as tx:
        from fadeway.records import EpisodeRecord, TraceRecord

        tx.insert_episodes(
            [
                EpisodeRecord(
                    n=1,
                    first_seq=0,
                    last_seq=0,
                    first_turn=1,
                    last_turn=1,
                    start_at=0.0,
                    end_at=0.0,
                    tokens=5,
                    cut_at=0.0,
                )
            ]
        )
        tx.append_traces(
            [
                TraceRecord(
                    n=1, episode=1, fact=None, kind="encoding", score=1.0, counted=True, at=0.0
                )
            ]
        )
    conn, refused = _raw(db)
    for sql, message in [
        ("UPDATE traces SET score = 2", "traces are never edited"),
        ("DELETE FROM traces", "traces are never deleted"),
        ("UPDATE messages SET tokens = tokens + 1", "messages are never edited"),
        ("DELETE FROM messages", "messages are never deleted"),
        ("UPDATE episodes SET last_seq = 3", "episodes change only in state"),
        ("DELETE FROM episodes", "episodes are never deleted"),
        *([("TRUNCATE traces CASCADE", "traces are never deleted")] if "://" in db else []),
    ]:
        with pytest.raises(refused, match=message):
            conn.execute(sql)
    conn.execute("BEGIN")
    conn.execute("UPDATE episodes SET state = 'leaving'")  # the one thing that may change
    conn.execute("ROLLBACK")
    conn.close()
    from fadeway.store import Transaction

    assert not [
        name
        for name in dir(Transaction)
        if "trace" in name and name.startswith(("update", "delete", "set"))
    ]


def test_the_job_table_runs_every_kind_of_job_and_says_which_may_be_skipped(quiet_engine):
    from fadeway.lane.jobs import Skippable
    from fadeway.records import JobKind

    jobs = quiet_engine.lane.jobs
    assert set(jobs) == set(JobKind)  # every kind fadeway queues has a handler
    for kind, job in jobs.items():
        assert job.queued_by, kind
        assert job.retry.failures >= 1 and job.retry.outages >= 1
        # A skippable job's handler says when it is stale; no other handler pretends to.
        assert isinstance(job.handler, Skippable) == job.skippable == hasattr(job.handler, "stale")
    assert {k for k, j in jobs.items() if j.skippable} == {JobKind.WALK, JobKind.DISTILL}


def test_a_lease_is_gone_only_when_its_process_of_this_host_no_longer_runs():
    """`gone` takes a dead worker's lease on this host at once, and nothing else: not another
    host's, not a live process's, not this process's, not an older fadeway's name."""
    import os
    import socket
    import subprocess
    import sys

    from fadeway.lane.worker import _NAMESPACE, _owner, gone

    if not _NAMESPACE:
        pytest.skip("no /proc/self/ns/pid here: a lease is never taken before it expires")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    assert gone(f"{host}:{_NAMESPACE}:{dead.pid}:1")
    assert gone(f"{host}:{_NAMESPACE}:{dead.pid}:1:drain")
    assert not gone(_owner())  # this process
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as alive:
        try:
            assert not gone(f"{host}:{_NAMESPACE}:{alive.pid}:1")
        finally:
            alive.kill()
    assert not gone(f"another-{host}:{_NAMESPACE}:{dead.pid}:1")  # another host's
    assert not gone(f"{host}:1:{dead.pid}:1")  # another PID namespace's (a container)
    assert not gone(f"{host}:{dead.pid}:1")  # an older fadeway's host:pid:thread
    assert not gone("")
    assert os.getpid() != dead.pid


def test_a_workers_threads_pass_by_a_lane_another_of_its_threads_runs(db, clock):
    """Woken while one of its threads has a memory's job in hand, the worker's other threads
    leave that lane alone, asking the store nothing (a claim is a write transaction)."""
    import asyncio

    from fadeway.lane.worker import BackgroundWorker

    started, release = threading.Event(), threading.Event()

    class Blocking:
        async def prepare(self, memory_id, job):
            started.set()
            await asyncio.to_thread(release.wait, 10)

        def apply(self, tx, job, prepared):
            return True

    quiet = fadeway.open(db, clock=clock, background=False)
    _queue(quiet, "m", "blocking", 1)
    lane = Lane(
        quiet.store, quiet.services.lane, {**_jobs_of(quiet), "blocking": Job(Blocking(), "t")}
    )
    runs: list[str] = []
    run = lane.run
    lane.run = lambda memory_id, *args, **kw: runs.append(memory_id) or run(memory_id, *args, **kw)
    worker = BackgroundWorker(lane, threads=4)
    try:
        assert started.wait(10)
        for _ in range(5):
            quiet.services.lane.queued()  # wakes every thread
            time.sleep(0.05)
        assert runs == ["m"]
    finally:
        release.set()
        worker.close()
        quiet.close()


def test_a_job_queued_as_a_lane_is_let_go_is_run_by_the_thread_letting_it_go(db, clock):
    """A thread woken while another of the worker's threads finishes a lane passes it by; the
    finishing thread then runs the lane again, so the job queued meanwhile does not wait for the
    worker's next poll."""
    from fadeway.lane.worker import BackgroundWorker

    APPLIED.clear()
    quiet = fadeway.open(db, clock=clock, background=False)
    _queue(quiet, "m", "probe", 1)
    lane = lane_of(quiet)
    run, calls = lane.run, []

    def run_then_queue(memory_id, *args, **kw):
        done = run(memory_id, *args, **kw)
        calls.append(memory_id)
        if len(calls) == 1:  # the lane is let go: a job comes, and the other threads wake
            with quiet.store.write(memory_id) as tx:
                tx.enqueue("probe", b"{}", 0.0)
            quiet.services.lane.queued()
            time.sleep(0.3)
        return done

    lane.run = run_then_queue
    worker = BackgroundWorker(lane, threads=3)
    try:
        deadline = time.monotonic() + 3  # well within the worker's 5 s poll
        while len(APPLIED) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [n for _, n in APPLIED] == [1, 2]
    finally:
        worker.close()
        quiet.close()
