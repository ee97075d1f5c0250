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
from helpers import talk

pytestmark = pytest.mark.both_stores


def _wait_drained(engine, deadline: float) -> list[str]:
    while (pending := engine.store.memories_with_pending_jobs()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return pending


def test_a_worker_process_runs_the_jobs_other_processes_queued(db, clock):
    with open_small(db, clock) as app:  # background=False: the app leaves its lanes alone
        for memory_id in ("alpha", "beta\x00../x"):
            talk(app, memory_id, clock, 12)
        queued = set(app.store.memories_with_pending_jobs())
        assert queued == {"alpha", "beta\x00../x"}
        argv = [sys.executable, "-m", "fadeway", "worker", "--db", db, "--concurrency", "2"]
        proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            assert "fadeway worker: running the lanes of" in proc.stderr.readline()
            assert _wait_drained(app, time.monotonic() + 60) == []
            # A job queued after the worker started is found too (it looks every few seconds).
            talk(app, "alpha", clock, 6)
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
