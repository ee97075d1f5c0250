"""Nothing dropped silently: a lane job out of attempts is parked (kept with its error and
attempts), shown by inspect, the export and usage, kept across a restart, and run again once
its wait has passed (by a later lane run, or a background worker's poll of a quiet memory), as
soon as its service answers a later job (when it was parked for an outage), or at once by
`fadeway lane retry`."""

from __future__ import annotations

import json
import time

import msgspec
import pytest

import fadeway
from fadeway import _constants as C
from fadeway import usage
from fadeway.cli.inspection import inspect_memory
from fadeway.cli.main import main
from fadeway.judge import ScriptedJudge
from helpers import converse_with_notes

NOTE = [("LEG-412 is open", "LEG-412", "open", False)]


class Down(ScriptedJudge):
    """A judge whose `about` cannot be reached while `down` is set (a refused connection)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True

    async def about(self, facts, episodes, **kwargs):
        if self.down:
            raise ConnectionError("connection refused")
        return await super().about(facts, episodes, **kwargs)


class Flaky(ScriptedJudge):
    """A judge whose first `failing` calls of `about` fail with `error`, then answer (each
    answer recorded as a model call, as an endpoint's is)."""

    def __init__(self, failing: int, error: Exception) -> None:
        super().__init__()
        self.failing, self.error = failing, error

    async def about(self, facts, episodes, **kwargs):
        if self.failing > 0:
            self.failing -= 1
            raise self.error
        usage.record("judge:about", "flaky", 1, 1, 0.0)
        return await super().about(facts, episodes, **kwargs)


def open_engine(path, clock, judge, *, background: bool = False) -> fadeway.Engine:
    return fadeway.open(
        path,
        clock=clock,
        background=background,
        ceiling=2_000,
        judge=judge,
        lane_retry_seconds=0.0,  # an outage's waits, in this test: none
        episode_min_tokens=100,
        episode_max_tokens=400,
        cut_after_tokens=600,
    )


def fact_traces(mem: fadeway.Memory) -> int:
    return sum(1 for e in mem.episodes() for t in e.traces if t.kind == "fact")


def one_more_turn(engine: fadeway.Engine, mem: fadeway.Memory, clock, history: list) -> None:
    """A turn and its reply (which queues lane work), then the lane run."""
    from helpers import chat_reply

    clock.advance(60)
    history.append({"role": "user", "content": "And then?"})
    request = mem.decorate({"model": "gpt-4.1", "messages": history})
    reply = chat_reply("then this")
    mem.report(request, reply)
    history.append(reply["choices"][0]["message"])
    engine.drain()


def parked_score(mem: fadeway.Memory):
    (job,) = [j for j in mem.parked_jobs() if j.kind == "score"]
    return job


def test_a_job_that_fails_until_its_service_is_back_is_retried_and_completes(
    tmp_path, clock, monkeypatch
):
    monkeypatch.setattr(C, "LANE_PARKED_SECONDS", 0.3)
    judge = Down()
    with open_engine(tmp_path / "m.db", clock, judge) as engine:
        mem = engine.memory("m")
        history = converse_with_notes(engine, mem, clock, [NOTE])
        job = parked_score(mem)  # 16 attempts could not reach the judge: parked, not lost
        assert (job.state, job.attempts, job.parked) == ("failed", C.JOB_MAX_TRANSIENT_ATTEMPTS, 1)
        assert "ConnectionError: connection refused" in job.error and fact_traces(mem) == 0
        # A lane run within the wait leaves it parked; one after it, with the judge still
        # down, parks it again, for twice as long.
        one_more_turn(engine, mem, clock, history)
        assert parked_score(mem).parked == 1
        time.sleep(max(0.0, parked_score(mem).retry_at - time.time()) + 0.05)
        one_more_turn(engine, mem, clock, history)
        again = parked_score(mem)
        assert again.parked == 2 and again.retry_at - time.time() > 0.3
        # The judge answers again: the next lane run after the wait completes the job.
        judge.down = False
        time.sleep(max(0.0, again.retry_at - time.time()) + 0.05)
        one_more_turn(engine, mem, clock, history)
        assert mem.parked_jobs() == []
        with engine.store.read("m") as tx:
            (done,) = [j for j in tx.jobs() if j.n == job.n]
        assert done.state == "done" and done.error is None
        assert fact_traces(mem) > 0  # the note's traces, written late but written


@pytest.mark.both_stores
@pytest.mark.parametrize("outage", [True, False])
def test_a_job_parked_for_an_outage_runs_once_its_service_answers_a_later_job(db, clock, outage):
    """The first note's score cannot reach the judge (or, without an outage, the judge refuses
    it) until it is parked; the second note's score then completes. That answer brings the job
    parked for an outage back at once, in its place, though its wait (ten minutes) has not
    passed; a job the judge refused stays parked until its wait has passed."""
    error = ConnectionError("connection refused") if outage else ValueError("unreadable answer")
    failing = C.JOB_MAX_TRANSIENT_ATTEMPTS if outage else C.JOB_MAX_ATTEMPTS
    second = [("LEG-413 is closed", "LEG-413", "closed", False)]
    with open_engine(db, clock, Flaky(failing, error)) as engine:
        mem = engine.memory("m")
        converse_with_notes(engine, mem, clock, [NOTE, second])
        with engine.store.read("m") as tx:
            scores = [j for j in tx.jobs() if j.kind == "score"]
        assert len(scores) == 2 and scores[1].state == "done"
        first = scores[0]
        assert first.retry_at is None or first.retry_at - time.time() > 60  # its wait stands
        if outage:
            assert (first.state, first.error, first.parked) == ("done", None, 1)
            assert mem.parked_jobs() == []
        else:
            assert (first.state, first.parked) == ("failed", 1)
            assert "unreadable answer" in first.error and mem.parked_jobs() == [first]


@pytest.mark.both_stores
def test_a_background_worker_retries_a_quiet_memorys_parked_job_once_its_wait_passed(
    db, clock, monkeypatch
):
    """Nothing more is said to the memory after its job was parked; a background worker's
    poll finds the job once its wait has passed and runs it, the judge answering by then."""
    monkeypatch.setattr(C, "LANE_PARKED_SECONDS", 0.5)
    monkeypatch.setattr(C, "LANE_IDLE_POLL_SECONDS", 0.1)
    with open_engine(db, clock, Down()) as engine:
        converse_with_notes(engine, engine.memory("m"), clock, [NOTE])
        n = parked_score(engine.memory("m")).n
    with open_engine(db, clock, ScriptedJudge(), background=True) as engine:
        mem = engine.memory("m")

        def state() -> str:
            with engine.store.read("m") as tx:
                return next(j.state for j in tx.jobs() if j.n == n)

        deadline = time.monotonic() + 20
        while state() != "done" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert state() == "done" and mem.parked_jobs() == [] and fact_traces(mem) > 0


def test_a_parked_job_survives_a_restart_and_shows_in_inspect_export_usage(tmp_path, clock, capsys):
    path = tmp_path / "m.db"
    with open_engine(path, clock, Down()) as engine:
        converse_with_notes(engine, engine.memory("m"), clock, [NOTE])
        n = parked_score(engine.memory("m")).n
    with open_engine(path, clock, ScriptedJudge()) as engine:  # a new process
        mem = engine.memory("m")
        job = parked_score(mem)
        assert job.n == n and job.attempts == C.JOB_MAX_TRANSIENT_ATTEMPTS
        view = inspect_memory(engine.store, "m", time.time())["lane"]
        (shown,) = [j for j in view["parked"] if j["kind"] == "score"]
        assert shown["n"] == n and shown["attempts"] == job.attempts
        assert "connection refused" in shown["error"]
        doc = mem.export()
        (exported,) = [j for j in doc.jobs if j.kind == "score"]
        assert (exported.state, exported.attempts) == ("failed", job.attempts)
        assert "connection refused" in exported.error
        # Through export and import: parked there as here, and exported alike.
        copy = engine.import_memory(msgspec.structs.replace(doc, memory_id="copy"))
        assert [(j.kind, j.attempts, j.error) for j in copy.parked_jobs()] == [
            (j.kind, j.attempts, j.error) for j in mem.parked_jobs()
        ]
        assert msgspec.structs.replace(copy.export(), memory_id="m") == doc
        # An export from before jobs were parked (no state): its jobs import as pending.
        old = json.loads(fadeway.dumps(doc))
        old["memory_id"] = "old"
        for j in old["jobs"]:
            del j["state"], j["attempts"], j["error"]
        engine.import_memory(old)
        with engine.store.read("old") as tx:
            assert {j.state for j in tx.jobs() if j.kind != "embed"} == {"pending"}
        assert fact_traces(mem) == 0  # still to do
    assert main(["inspect", "m", "--db", str(path)]) == 0
    out = capsys.readouterr().out
    assert "parked after failing" in out and f"job {n} (score" in out
    assert "ConnectionError: connection refused" in out
    assert main(["usage", "m", "--db", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["parked_jobs"] >= 1
    assert main(["usage", "m", "--db", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 lane job failed and is parked" in out or "lane jobs failed and are parked" in out


def test_lane_retry_queues_parked_jobs_again_and_the_lane_completes_them(tmp_path, clock, capsys):
    path = tmp_path / "m.db"
    with open_engine(path, clock, Down()) as engine:
        converse_with_notes(engine, engine.memory("m"), clock, [NOTE])
        parked = len(engine.memory("m").parked_jobs())
        n = parked_score(engine.memory("m")).n
    assert parked >= 1
    assert main(["lane", "retry", "m", "--db", str(path)]) == 0
    jobs = "1 parked job" if parked == 1 else f"{parked} parked jobs"
    assert f"{jobs} of memory 'm' queued again" in capsys.readouterr().out
    with open_engine(path, clock, ScriptedJudge()) as engine:
        mem = engine.memory("m")
        with engine.store.read("m") as tx:
            job = next(j for j in tx.jobs() if j.n == n)
        assert (job.state, job.attempts, job.retry_at) == ("pending", 0, None)
        assert engine.drain() >= parked
        assert mem.parked_jobs() == [] and fact_traces(mem) > 0
    assert main(["lane", "retry", "m", "--db", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"memory_id": "m", "queued": 0}


@pytest.mark.parametrize("argv", [["lane", "retry", "nobody"], ["lane"]])
def test_lane_retry_of_no_memory_is_bad_input(tmp_path, clock, argv, capsys):
    path = tmp_path / "m.db"
    with open_engine(path, clock, ScriptedJudge()) as engine:
        engine.memory("m").decorate({"messages": [{"role": "user", "content": "hi"}]})
    if argv == ["lane"]:
        with pytest.raises(SystemExit) as exit_:  # argparse: an action is required
            main([*argv, "--db", str(path)])
        assert exit_.value.code == 2
        return
    assert main([*argv, "--db", str(path)]) == 2
    assert "no memory 'nobody'" in capsys.readouterr().err


def test_the_workers_poll_reads_the_pending_and_parked_jobs_indexes_only(tmp_path, clock):
    """Done jobs are kept for good; the poll a background worker makes every few seconds must
    not read them all to find the memories with pending or parked jobs due (a parked job with
    no wait is due, as a lane run would revive it)."""
    import sqlite3

    from fadeway.store.queries_lane import memories_with_jobs

    path = tmp_path / "m.db"
    with open_engine(path, clock, ScriptedJudge()) as engine:
        converse_with_notes(engine, engine.memory("m"), clock, [NOTE])
        store = engine.store
        assert store.memories_with_pending_jobs(due=time.time()) == []
        with store.write("m") as tx:  # parked with no wait (as before waits were kept): due
            tx.park_job(tx.jobs()[0].n, "ConnectionError: refused", None)
        assert store.memories_with_pending_jobs() == []
        assert store.memories_with_pending_jobs(due=time.time()) == ["m"]
    conn = sqlite3.connect(path)
    try:
        for due in (None, time.time()):
            sql, args = memories_with_jobs(due)
            plan = [row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, args)]
            reads = [step for step in plan if step.startswith(("SCAN", "SEARCH"))]
            wanted = ["jobs_pending", "jobs_parked"] if due is not None else ["jobs_pending"]
            assert reads == [f"SCAN jobs USING INDEX {index}" for index in wanted], plan
    finally:
        conn.close()
