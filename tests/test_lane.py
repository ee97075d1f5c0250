"""The ordered lane: one memory's jobs run strictly in order, once each, across workers and
crashes; different memories run side by side."""

from __future__ import annotations

import random
import sqlite3
import threading
import time

import msgspec
import pytest

import fadeway
from fadeway.lane import JobHandler, register_job, run_lane

APPLIED: list[tuple[str, int]] = []
APPLIED_LOCK = threading.Lock()


class Probe(JobHandler):
    """Sleeps a random moment while preparing, then records the order jobs were applied in."""

    async def prepare(self, engine, memory_id, job):
        import asyncio

        await asyncio.sleep(random.random() * 0.004)
        return msgspec.json.decode(job.payload)

    def apply(self, engine, tx, job, prepared):
        if prepared.get("fail"):
            raise AssertionError("apply must not run for a job whose prepare failed")
        with APPLIED_LOCK:
            APPLIED.append((tx.memory_id, job.n))
        return True


class Failing(JobHandler):
    async def prepare(self, engine, memory_id, job):
        raise RuntimeError("the judge is down")

    def apply(self, engine, tx, job, prepared):  # pragma: no cover - never reached
        return True


register_job("probe", Probe())
register_job("failing", Failing())


@pytest.fixture
def quiet_engine(tmp_path, clock):
    eng = fadeway.open(tmp_path / "lane.db", clock=clock, background=False,
                       lane_lease_seconds=5.0)
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
    workers = [threading.Thread(target=lambda i=i: [run_lane(quiet_engine, mid, f"w{i}")
                                                    for mid in ("a", "b", "c", "b", "a")])
               for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    quiet_engine.drain()
    for mid in ("a", "b", "c"):
        assert [n for m, n in APPLIED if m == mid] == list(range(1, 16))
    assert quiet_engine.store.memories_with_pending_jobs() == []


def test_a_held_lane_is_not_entered_until_its_lease_ends(quiet_engine):
    APPLIED.clear()
    _queue(quiet_engine, "m", "probe", 2)
    now = time.time()
    with quiet_engine.store.write("m") as tx:
        assert tx.claim_lane("dead-worker", now, now + 0.3)
    assert run_lane(quiet_engine, "m", "other") is None
    assert APPLIED == []
    time.sleep(0.35)
    assert run_lane(quiet_engine, "m", "other") == 2
    assert APPLIED == [("m", 1), ("m", 2)]


def test_a_failing_job_is_retried_then_given_up_and_the_lane_moves_on(quiet_engine, caplog):
    APPLIED.clear()
    _queue(quiet_engine, "m", "failing", 1)
    with quiet_engine.store.write("m") as tx:
        tx.enqueue("probe", b"{}", 0.0)
    quiet_engine.drain()
    jobs = {j.n: j for j in _jobs(quiet_engine, "m")}
    assert jobs[1].state == "failed" and jobs[1].attempts == 3
    assert "the judge is down" in jobs[1].error
    assert jobs[2].state == "done" and APPLIED == [("m", 2)]
    assert "given up" in caplog.text


def _jobs(engine, memory_id):
    with engine.store.read(memory_id) as tx:
        return tx.jobs()


def test_the_background_worker_runs_queued_jobs(tmp_path, clock):
    APPLIED.clear()
    with fadeway.open(tmp_path / "bg.db", clock=clock, background=True) as eng:
        _queue(eng, "m", "probe", 3)
        eng._jobs_queued()
        deadline = time.monotonic() + 10
        while eng.store.memories_with_pending_jobs() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [n for _, n in APPLIED] == [1, 2, 3]


def test_traces_messages_and_episode_bounds_cannot_be_edited_or_deleted(quiet_engine, tmp_path):
    quiet_engine.memory("m").decorate({"messages": [{"role": "user", "content": "hi"}]})
    with quiet_engine.store.write("m") as tx:
        from fadeway.model import EpisodeRecord, TraceRecord

        tx.insert_episodes([EpisodeRecord(n=1, first_seq=0, last_seq=0, first_turn=1,
                                          last_turn=1, start_at=0.0, end_at=0.0, tokens=5,
                                          cut_at=0.0)])
        tx.append_traces([TraceRecord(n=1, episode=1, fact=None, kind="encoding", score=1.0,
                                      counted=True, at=0.0)])
    conn = sqlite3.connect(tmp_path / "lane.db")
    for sql, message in [
        ("UPDATE traces SET score = 2", "traces are never edited"),
        ("DELETE FROM traces", "traces are never deleted"),
        ("UPDATE messages SET body = x'00'", "messages are never edited"),
        ("DELETE FROM messages", "messages are never deleted"),
        ("UPDATE episodes SET last_seq = 3", "episodes change only in state"),
        ("DELETE FROM episodes", "episodes are never deleted"),
    ]:
        with pytest.raises(sqlite3.IntegrityError, match=message):
            conn.execute(sql)
    conn.execute("UPDATE episodes SET state = 'leaving'")  # the one thing that may change
    conn.rollback()
    conn.close()
    from fadeway.store import Transaction

    assert not [name for name in dir(Transaction)
                if "trace" in name and name.startswith(("update", "delete", "set"))]
