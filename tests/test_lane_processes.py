"""Lanes run by many processes (issue 30, item 3), on both stores: four worker processes drain
the lanes of six memories, and one is killed (SIGKILL) in the middle of a job. Per memory, every
job is applied once and in queue order, the killed job is done by another worker, and no two of
a memory's jobs were ever being prepared at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import msgspec
import pytest

import fadeway

pytestmark = pytest.mark.both_stores

CHILD = Path(__file__).with_name("lane_child.py")
MEMORIES = [f"m{i}" for i in range(6)]
JOBS = 8
#: The job killed in hand: its memory and its place in that memory's queue.
SLOW = ("m0", 3)
WORKERS = 4


def _queue(db: str) -> dict[str, list[int]]:
    """Queue JOBS probe jobs on each memory: their numbers, by memory."""
    queued = {}
    with fadeway.open(db, background=False) as app:
        for m in MEMORIES:
            app.memory(m).decorate({"messages": [{"role": "user", "content": "hi"}]})
            with app.store.write(m) as tx:
                queued[m] = [
                    tx.enqueue("probe", msgspec.json.encode({"slow": (m, k) == SLOW}), 0.0)
                    for k in range(1, JOBS + 1)
                ]
    return queued


def _events(log: Path) -> list[tuple[str, int, str, int, float]]:
    """The log's lines: (start or end, pid, memory, job, time)."""
    if not log.exists():
        return []
    out = []
    for line in log.read_text(encoding="utf-8").splitlines():
        what, pid, memory, n, at = line.split()
        out.append((what, int(pid), memory, int(n), float(at)))
    return out


def _started_slow(log: Path, job: int, deadline: float) -> int:
    """The pid of the worker that started preparing SLOW's job."""
    while time.monotonic() < deadline:
        for what, pid, memory, n, _ in _events(log):
            if what == "start" and memory == SLOW[0] and n == job:
                return pid
        time.sleep(0.02)
    raise AssertionError("no worker started the slow job")


def test_worker_processes_run_each_lane_in_order_one_job_at_a_time_across_a_kill(db, tmp_path):
    queued = _queue(db)
    slow_job = queued[SLOW[0]][SLOW[1] - 1]
    log = tmp_path / "lane.log"
    workers = [subprocess.Popen([sys.executable, str(CHILD), db, str(log)]) for _ in range(WORKERS)]
    try:
        victim = _started_slow(log, slow_job, time.monotonic() + 60)
        killed_at = time.time()
        os.kill(victim, signal.SIGKILL)
        codes = {w.pid: w.wait(120) for w in workers}
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    assert codes.pop(victim) == -signal.SIGKILL
    assert set(codes.values()) == {0}

    with fadeway.open(db, background=False) as app:
        for m in MEMORIES:
            with app.store.read(m) as tx:
                jobs = sorted(tx.jobs(), key=lambda j: j.n)
            assert [j.n for j in jobs if j.state != "done"] == []
            applied = [msgspec.json.decode(j.payload)["job"] for j in jobs if j.kind == "applied"]
            assert applied == queued[m], m  # each once, in queue order

    spans: dict[str, list[tuple[float, float, int, int]]] = defaultdict(list)
    open_: dict[tuple[int, str, int], float] = {}
    for what, pid, memory, n, at in _events(log):
        if what == "start":
            open_[pid, memory, n] = at
        else:
            spans[memory].append((open_.pop((pid, memory, n)), at, n, pid))
    # Only the killed worker left a job unfinished: the slow one, ended by the kill.
    assert list(open_) == [(victim, SLOW[0], slow_job)]
    spans[SLOW[0]].append((open_[victim, SLOW[0], slow_job], killed_at, slow_job, victim))
    for m in MEMORIES:
        ordered = sorted(spans[m])
        assert [n for _, _, n, _ in ordered] == sorted(n for _, _, n, _ in ordered), m
        for (_, end, n, _), (start, _, later, _) in zip(ordered, ordered[1:], strict=False):
            assert start >= end, f"{m}: job {later} started while job {n} was in hand"
    redone = [pid for _, _, n, pid in sorted(spans[SLOW[0]]) if n == slow_job]
    assert len(redone) == 2 and redone[0] == victim != redone[1]
