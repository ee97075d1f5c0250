"""Shutting down with work in flight, the way a web service does: calls in other threads end
cleanly, a closed engine refuses further calls, the background worker stops after the job in
hand, and a lane job slower than one lease is still prepared once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

import fadeway
from fadeway.engine import Engine
from fadeway.errors import StoreError
from fadeway.lane.jobs import Job
from fadeway.lane.worker import Lane

# A subprocess: closing a connection another thread is using crashes the interpreter, which
# would take the whole test run with it.
_CLOSE_UNDER_LOAD = textwrap.dedent("""
    import sys, threading, time
    import fadeway
    from fadeway.errors import FadewayError

    engine = fadeway.open(sys.argv[1], background=True)
    stop, ended = threading.Event(), []

    def client(i):
        mem = engine.memory(f"m{i}")
        try:
            for n in range(10_000):
                if stop.is_set():
                    break
                req = mem.decorate({"messages": [{"role": "user", "content": f"hello {n}"}]})
                mem.report(req, {"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": f"hi {n}"}}]})
            ended.append("stopped")
        except FadewayError as exc:
            ended.append(type(exc).__name__)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    engine.close()
    stop.set()
    for t in threads:
        t.join()
    print(sorted(ended))
""")


def test_closing_while_other_threads_are_mid_call_ends_their_calls_cleanly(tmp_path):
    db = tmp_path / "load.db"
    run = subprocess.run(
        [sys.executable, "-c", _CLOSE_UNDER_LOAD, str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == str(["StoreError"] * 4)  # "the store is closed", each
    with fadeway.open(db, background=False) as engine:  # consistent, and goes on
        for memory_id in engine.memory_ids():
            mem = engine.memory(memory_id)
            roles = [m.role for m in mem.messages()]
            assert roles[::2] == ["user"] * len(roles[::2])
            assert roles[1::2] == ["assistant"] * len(roles[1::2])
            history = [fadeway.wire.canonical.plain(m.body) for m in mem.messages()]
            mem.decorate({"messages": [*history, {"role": "user", "content": "still there?"}]})
            assert mem.messages()[-1].role == "user"


def test_a_closed_engine_refuses_calls(tmp_path):
    engine = fadeway.open(tmp_path / "c.db", background=False)
    mem = engine.memory("m")
    mem.decorate({"messages": [{"role": "user", "content": "hi"}]})
    engine.close()
    for call in (
        lambda: mem.decorate({"messages": [{"role": "user", "content": "again"}]}),
        mem.messages,
        engine.memory_ids,
        engine.drain,
    ):
        with pytest.raises(StoreError, match="is closed"):
            call()
    engine.close()  # twice is fine


PREPARED: list[tuple[str, int]] = []


class Slow:
    """Prepares for longer than a lease."""

    async def prepare(self, memory_id, job):
        import asyncio

        PREPARED.append((memory_id, job.n))
        await asyncio.sleep(float(job.payload))
        return None

    def apply(self, tx, job, prepared):
        return True


def _jobs_of(engine):
    """The engine's kinds of job, with the test's own beside them."""
    return {**engine.lane.jobs, "slow": Job(Slow(), "test_close")}


def _queue(engine, memory_id, count, seconds):
    engine.memory(memory_id).decorate({"messages": [{"role": "user", "content": "hi"}]})
    with engine.store.write(memory_id) as tx:
        for _ in range(count):
            tx.enqueue("slow", str(seconds).encode(), 0.0)


@pytest.mark.parametrize("lanes", [1, 2])
def test_a_job_slower_than_a_lease_is_prepared_once_while_others_wait(tmp_path, lanes):
    """The worker renews its lease while it prepares (one thread renews every lane held: with
    two, both jobs at once); another worker, trying the lane again and again meanwhile, never
    takes it over to prepare the same job again (and again: the lane never moved)."""
    PREPARED.clear()
    memories = [f"m{i}" for i in range(lanes)]
    with fadeway.open(tmp_path / "l.db", background=False, lane_lease_seconds=0.3) as engine:
        for memory_id in memories:
            _queue(engine, memory_id, 1, 1.0)
        lane = Lane(engine.store, engine.services.lane, _jobs_of(engine))
        results: list = []
        holding = [
            threading.Thread(target=lambda m=m: results.append(lane.run(m, f"holder {m}")))
            for m in memories
        ]

        def take_over(memory_id: str) -> None:
            while holding[0].is_alive():
                if (ran := lane.run(memory_id, f"other {memory_id}")) is not None:
                    results.append(ran)
                time.sleep(0.02)

        others = [threading.Thread(target=take_over, args=(m,)) for m in memories]
        for t in holding:
            t.start()
        time.sleep(0.05)
        for t in others:
            t.start()
        for t in [*holding, *others]:
            t.join()
        assert len(PREPARED) == len(set(PREPARED)) == lanes  # each job prepared once
        assert sorted(results) == [0] * (len(results) - lanes) + [1] * lanes
        for memory_id in memories:
            with engine.store.read(memory_id) as tx:
                assert [j.state for j in tx.jobs()] == ["done"]


def test_closing_stops_the_worker_after_the_job_in_hand(tmp_path):
    PREPARED.clear()
    quiet = fadeway.open(tmp_path / "b.db", background=False)
    engine = Engine(quiet.services, jobs=_jobs_of(quiet), background=True)
    _queue(engine, "m", 40, 0.05)
    engine.services.lane.queued()
    time.sleep(0.2)
    started = time.monotonic()
    engine.close()
    assert time.monotonic() - started < 1.0  # not the two seconds the lane still holds
    assert 0 < len(PREPARED) < 40
    with fadeway.open(tmp_path / "b.db", background=False) as reopened:
        again = Engine(reopened.services, jobs=_jobs_of(reopened), background=False)
        with again.store.read("m") as tx:
            states = [j.state for j in tx.jobs()]
        assert states.count("pending") == 40 - states.count("done") > 0
        assert again.drain() == states.count("pending")  # the rest runs next time


def test_connections_of_ended_threads_are_closed(tmp_path):
    """Each thread gets its own connection; one that ended (a lease renewer, a retired pool
    worker) must not keep its file descriptors open until the store closes."""
    from fadeway.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "t.db")
    for _ in range(50):
        thread = threading.Thread(target=lambda: list(store.memory_ids()))
        thread.start()
        thread.join()
    assert len(store._all) <= 2  # this thread's, and the last ended thread's until the next
    store.close()


def test_a_close_waits_for_a_call_made_inside_another_on_the_same_thread(tmp_path):
    """The outer call's connection stays open until the outer call ends, though the inner one
    (on the same thread, the same connection) ended first."""
    from fadeway.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "n.db")
    inner_done, closed = threading.Event(), threading.Event()

    def close() -> None:
        inner_done.wait()
        store.close(wait=0.2)  # the outer call is still in: the connection is left open
        closed.set()

    closer = threading.Thread(target=close)
    closer.start()
    with store.read("m") as tx:
        list(store.memory_ids())  # a call inside the read, on its connection
        inner_done.set()
        closed.wait()
        assert tx.jobs() == []  # still usable: not closed under the outer call
    closer.join()
    with pytest.raises(StoreError, match="is closed"):
        list(store.memory_ids())
