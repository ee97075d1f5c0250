"""`fadeway worker`: a process that runs the lanes of every memory of a store, for jobs other
processes queued (issue 30, item 3), on both stores."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from conftest import open_small
from fadeway.cli.main import main
from helpers import chat_reply

pytestmark = pytest.mark.both_stores

WORDS = "the checkout migration moved to the new tax table after review".split()


def _talk(engine, memory_id: str, clock, turns: int) -> None:
    """`turns` exchanges of about 60 words each: enough closed history to queue lane jobs."""
    mem = engine.memory(memory_id)
    history: list[dict] = []
    for i in range(turns):
        text = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(60))
        history.append({"role": "user", "content": f"{memory_id} turn {i}: {text}"})
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        reply = chat_reply(f"Noted {i}: {text}")
        mem.report(request, reply)
        history.append(reply["choices"][0]["message"])
        clock.advance(60)


def _wait_drained(engine, deadline: float) -> list[str]:
    while (pending := engine.store.memories_with_pending_jobs()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return pending


def test_a_worker_process_runs_the_jobs_other_processes_queued(db, clock):
    with open_small(db, clock) as app:  # background=False: the app leaves its lanes alone
        for memory_id in ("alpha", "beta\x00../x"):
            _talk(app, memory_id, clock, 12)
        queued = set(app.store.memories_with_pending_jobs())
        assert queued == {"alpha", "beta\x00../x"}
        argv = [sys.executable, "-m", "fadeway", "worker", "--db", db, "--concurrency", "2"]
        proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            assert "fadeway worker: running the lanes of" in proc.stderr.readline()
            assert _wait_drained(app, time.monotonic() + 60) == []
            # A job queued after the worker started is found too (it looks every few seconds).
            _talk(app, "alpha", clock, 6)
            assert app.store.memories_with_pending_jobs() == ["alpha"]
            assert _wait_drained(app, time.monotonic() + 60) == []
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(30)
            proc.stderr.close()
        assert code == 0
        # Done, not dropped: the jobs ran (a cut made episodes), none failed.
        with app.store.read("alpha") as tx:
            assert tx.episodes() and not [j for j in tx.jobs() if j.state == "failed"]


def test_a_worker_on_no_store_is_refused(tmp_path, capsys):
    missing = tmp_path / "none.db"
    assert main(["worker", "--db", str(missing)]) == 2
    assert f"no store at {missing}" in capsys.readouterr().err
    assert not missing.exists()
