"""Decorate plans outside SQLite's one writer (docs/design/storage.md, "Short write
transactions"): it reads and assembles in a read transaction, keeping its writes
(`store.deferring.Deferred`), and makes them in a short write transaction while the memory is as
it planned from; a plan that reads what it wrote, or a memory changed meanwhile, is decorated
again in the write transaction. Either way the memory stores the same."""

from __future__ import annotations

import threading

import msgspec
import pytest

import fadeway
from fadeway import dumps
from fadeway.decorate import call
from fadeway.judge import ScriptedJudge
from fadeway.records import BlockText
from fadeway.store import SQLiteStore, open_store
from fadeway.store.deferring import Deferred, ReadsOwnWrite
from fadeway.store.recording import replay
from helpers import NOTE_ASKING, chat_reply, converse_with_notes, message_record
from test_recall import LEAVE, OTHER, OWNER


def _open(path, clock, **settings):
    return fadeway.open(
        path, clock=clock, background=False, judge=ScriptedJudge(), **NOTE_ASKING, **settings
    )


def _talk(mem, history, text):
    history.append({"role": "user", "content": text})
    request = mem.decorate({"model": "gpt-4.1", "messages": history})
    reply = chat_reply(f"About {text}")
    mem.report(request, reply)
    history.append(reply["choices"][0]["message"])
    return request


def _written_by_another_thread(store, memory_id, write) -> bool:
    """Whether `write(tx)`, in a write transaction on `memory_id` from another thread, commits
    within 5 s (it waits there for whatever holds the store's writer)."""
    done = threading.Event()

    def run():
        with store.write(memory_id) as tx:
            write(tx)
        done.set()

    writer = threading.Thread(target=run)
    writer.start()
    writer.join(timeout=5)
    return done.is_set()


def _while_assembling(monkeypatch, during):
    """Run `during()` once, while the next decorate forgets and assembles; returns the calls
    made to forget_and_assemble."""
    real, calls = call.forget_and_assemble, []

    def assembling(*args, **kwargs):
        calls.append(args[1])  # the transaction
        if len(calls) == 1:
            during()
        return real(*args, **kwargs)

    monkeypatch.setattr(call, "forget_and_assemble", assembling)
    return calls


def test_a_decorate_holds_the_writer_only_for_its_writes(tmp_path, clock, monkeypatch):
    """Another memory's write goes through while a decorate assembles: its plan holds no
    write lock (before, the other writer waited for the decorate's whole transaction)."""
    with _open(tmp_path / "s.db", clock) as eng:
        mem, history = eng.memory("m"), []
        for t in range(3):
            _talk(mem, history, f"Turn {t}: the refund line review")
        wrote = []

        def other_memory_writes():
            wrote.append(_written_by_another_thread(eng.store, "other", create))

        def create(tx):
            tx.create_memory("chat_completions", clock())

        calls = _while_assembling(monkeypatch, other_memory_writes)
        request = _talk(mem, history, "Turn 3: and the legal review?")
        assert wrote == [True]
        assert len(calls) == 1 and isinstance(calls[0], Deferred)  # planned once, not again
        assert request["messages"][-1]["content"] == "Turn 3: and the legal review?"
        assert len(mem.messages()) == len(history)
        assert "other" in [m.memory_id for m in eng.memories()]


def test_a_report_holds_the_writer_only_for_its_writes(tmp_path, clock, monkeypatch):
    """As decorate's: another memory's write goes through while a report queues its jobs,
    and the reply and its jobs are stored once, numbered as the lane numbers them."""
    from fadeway.decorate import report

    with _open(tmp_path / "s.db", clock) as eng:
        mem = eng.memory("m")
        history = converse_with_notes(eng, mem, clock, [[OWNER, *OTHER]])  # facts to walk
        eng.drain()
        wrote, real, planned = [], report.queue_after_reply, []

        def queueing(tx, *args):
            planned.append(isinstance(tx, Deferred))
            wrote.append(_written_by_another_thread(eng.store, "other", create))
            return real(tx, *args)

        def create(other):
            other.create_memory("chat_completions", clock())

        monkeypatch.setattr(report, "queue_after_reply", queueing)
        with eng.store.read("m") as tx:
            jobs_before = tx.last_job()
        _talk(mem, history, "Turn 3: and the legal review?")
        assert wrote == [True] and planned == [True]
        assert len(mem.messages()) == len(history)
        with eng.store.read("m") as tx:
            queued = tx.jobs()
        # The walk (and distill) of this reply queued after the jobs before, numbered on.
        new_jobs = [(j.n, j.kind) for j in queued if j.n > jobs_before]
        assert new_jobs and new_jobs[0] == (jobs_before + 1, "walk")
        first = jobs_before + 1
        assert [n for n, _ in new_jobs] == list(range(first, first + len(new_jobs)))


def test_a_memory_changed_while_its_decorate_was_planned_is_decorated_again(
    tmp_path, clock, monkeypatch
):
    with _open(tmp_path / "s.db", clock) as eng:
        mem, history = eng.memory("m"), []
        for t in range(3):
            _talk(mem, history, f"Turn {t}: the refund line review")

        def lane_writes():  # as a lane job would, from another thread, between plan and commit
            assert _written_by_another_thread(eng.store, "m", emit)

        def emit(tx):
            tx.insert_emitted([b"\x01" * 32])

        calls = _while_assembling(monkeypatch, lane_writes)
        _talk(mem, history, "Turn 3: and the legal review?")
        # Planned, found changed, made again in the write transaction: stored once.
        assert len(calls) == 2 and isinstance(calls[0], Deferred)
        assert not isinstance(calls[1], Deferred)
        bodies = [msgspec.json.decode(m.body) for m in mem.messages()]
        assert [b.get("content") for b in bodies if b["role"] == "user"] == [
            m["content"] for m in history if m["role"] == "user"
        ]


def test_planned_or_not_a_conversation_stores_the_same(tmp_path, monkeypatch):
    """A conversation that takes notes, seals and fades (whose decorates read what they wrote
    and are made in the write transaction) and talks on: the same export planned outside the
    writer as made inside it, both paths taken."""
    from conftest import Clock

    real, outcomes = call._deferred, []

    def deferred(*args, **kwargs):
        out = real(*args, **kwargs)
        outcomes.append(out is not None)
        return out

    monkeypatch.setattr(call, "_deferred", deferred)

    def converse(path):
        clock = Clock()
        with _open(path, clock) as eng:
            mem = eng.memory("m")
            history = converse_with_notes(eng, mem, clock, [[OWNER, *OTHER], [LEAVE]])
            for t in range(6):
                clock.advance(60)
                _talk(mem, history, f"Later {t}: who owns the checkout migration now?")
                eng.drain()
            return dumps(mem.export())

    planned = converse(tmp_path / "planned.db")
    assert outcomes.count(True) > 10 and outcomes.count(False) >= 3
    monkeypatch.setattr(SQLiteStore, "serial_writes", False)
    outcomes.clear()
    made_inside = converse(tmp_path / "inside.db")
    assert not any(outcomes)
    assert planned == made_inside


def test_deferred_keeps_its_writes_and_refuses_to_read_them(tmp_path):
    store = open_store(tmp_path / "d.db")
    with store.write("m") as tx:
        tx.create_memory("chat_completions", 0.0)
        tx.enqueue("embed", b"{}", 0.0)
        tx.enqueue("embed", b"{}", 0.0)
    row = message_record(
        0, at=1.0, tokens=3, digest=b"\x00" * 32, body=b'{"role":"user","content":"hi"}'
    )
    with store.read("m") as tx:
        deferred = Deferred(tx)
        rows = [row]
        deferred.insert_messages(rows)
        rows.clear()  # the caller's list may change: what was kept may not
        assert deferred.wrote() and tx.message_count() == 0  # kept, not made
        assert deferred.pending_job().n == 1  # another table: read as it stands
        with pytest.raises(ReadsOwnWrite, match="message_count after a kept write"):
            deferred.message_count()
        with pytest.raises(ReadsOwnWrite, match="create_memory cannot be kept"):
            deferred.create_memory("chat_completions", 0.0)
        # Jobs are kept numbered as the lane will number them; the lane is then not readable.
        assert [deferred.enqueue(k, b"{}", 1.0) for k in ("walk", "distill")] == [3, 4]
        with pytest.raises(ReadsOwnWrite, match="pending_job after a kept write"):
            deferred.pending_job()
        writes = deferred.writes
    with store.write("m") as tx:
        replay(tx, writes)
    with store.read("m") as tx:
        assert [m.body for m in tx.messages()] == [row.body]
        assert [(j.n, j.kind) for j in tx.jobs()][-2:] == [(3, "walk"), (4, "distill")]
    with store.read("m") as tx:
        deferred = Deferred(tx)
        assert deferred.episodes() == []  # before any write, every read is the snapshot's
        deferred.insert_block_text("recall_finals", BlockText(turn=1, at=1.0, text=None, tokens=0))
        with pytest.raises(ReadsOwnWrite, match="recall_blocks after a kept write"):
            deferred.recall_blocks(0)
        # A read it does not know the tables of cannot be answered after any write.
        with pytest.raises(ReadsOwnWrite, match="episodes after a kept write"):
            deferred.episodes()
    store.close()


def test_a_plan_that_fails_stores_nothing_and_the_next_decorate_stores_it_once(
    tmp_path, clock, monkeypatch
):
    with _open(tmp_path / "s.db", clock) as eng:
        mem, history = eng.memory("m"), []
        for t in range(3):
            _talk(mem, history, f"Turn {t}: the refund line review")
        stored = len(mem.messages())
        real = call.store_recall

        def fails_once(*args, **kwargs):
            monkeypatch.setattr(call, "store_recall", real)
            raise RuntimeError("the plan broke")

        monkeypatch.setattr(call, "store_recall", fails_once)
        history.append({"role": "user", "content": "Turn 3: and the legal review?"})
        with pytest.raises(RuntimeError, match="the plan broke"):
            mem.decorate({"model": "gpt-4.1", "messages": history})
        assert len(mem.messages()) == stored  # nothing of the plan was stored
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        assert request["messages"][-1]["content"] == "Turn 3: and the legal review?"
        assert len(mem.messages()) == stored + 1
        mem.report(request, chat_reply("Legal has not answered yet."))
        assert len(mem.messages()) == stored + 2
