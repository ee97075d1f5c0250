"""Lane throughput and job latency on PostgreSQL: one process's background worker with 16
threads running the lanes of 500 memories, whose jobs are simulated (issue 30).

A simulated job's prepare sleeps `--prepare-ms` (a model call's wait, which a thread spends
holding nothing) and its apply writes nothing but the job's own state, so what is measured is
the lane itself: claiming a memory's lane and its oldest job, renewing the lease, applying in
the transaction that marks the job done, finding the memories with pending jobs, and waking.

Two measures, one store (a fresh database on `$FADEWAY_TEST_POSTGRES`, else on a throwaway
cluster of the machine's PostgreSQL, `tests/pg.py`):

1. A burst: `--jobs` jobs per memory queued at once (one transaction a memory), then the
   worker started; the time until every job is done gives jobs/s, and each job's latency is
   from the worker's start to its apply.
2. A steady stream: one job at a time, to a memory drawn at random, at `--rate` jobs/s for
   `--seconds`, each queued in its own transaction and the worker woken as decorate and report
   wake it; each job's latency is from its commit to its apply.

    python benches/lane_postgres.py [--memories 500] [--threads 16] [--jobs 4]
                                    [--prepare-ms 20] [--rate 200] [--seconds 20] [--out]

`--out` appends the tables to benches/RESULTS-lane.md (a dated section).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import fadeway  # noqa: E402
import pg  # noqa: E402
from fadeway.engine import Engine  # noqa: E402
from fadeway.lane.jobs import Job  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS-lane.md")


class Simulated:
    """A job that waits `seconds` while prepared and records when it was applied."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.applied: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()

    async def prepare(self, memory_id, job):
        await asyncio.sleep(self.seconds)
        return None

    def apply(self, tx, job, prepared):
        with self._lock:
            self.applied[tx.memory_id, job.n] = time.perf_counter()
        return True


def _percentiles(latencies: list[float]) -> tuple[float, float, float]:
    ms = np.asarray(latencies) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95)), float(ms.max())


def _opened(db: str, memories: list[str]) -> fadeway.Engine:
    """An engine without a worker on `db`, each memory begun with one message."""
    quiet = fadeway.open(db, background=False)
    for m in memories:
        quiet.memory(m).decorate({"messages": [{"role": "user", "content": "hi"}]})
    return quiet


def _burst(db: str, args: argparse.Namespace, memories: list[str]) -> dict[str, float]:
    sim = Simulated(args.prepare_ms / 1000)
    quiet = _opened(db, memories)  # closed with the engine below, whose store it is
    for m in memories:
        with quiet.store.write(m) as tx:
            for _ in range(args.jobs):
                tx.enqueue("sim", b"{}", 0.0)
    jobs = {**quiet.lane.jobs, "sim": Job(sim, "bench")}
    total = len(memories) * args.jobs
    start = time.perf_counter()
    with Engine(quiet.services, jobs=jobs, background=True, lane_threads=args.threads):
        while len(sim.applied) < total:
            time.sleep(0.01)
        seconds = time.perf_counter() - start
    p50, p95, most = _percentiles([at - start for at in sim.applied.values()])
    return {"jobs": total, "seconds": seconds, "rate": total / seconds, "p50": p50, "p95": p95}


def _steady(db: str, args: argparse.Namespace, memories: list[str]) -> dict[str, float]:
    sim = Simulated(args.prepare_ms / 1000)
    rng = random.Random(7)
    queued: dict[tuple[str, int], float] = {}
    quiet = _opened(db, memories)  # closed with the engine below, whose store it is
    jobs = {**quiet.lane.jobs, "sim": Job(sim, "bench")}
    with Engine(quiet.services, jobs=jobs, background=True, lane_threads=args.threads):
        start = due = time.perf_counter()
        while due - start < args.seconds:
            due += 1.0 / args.rate
            time.sleep(max(0.0, due - time.perf_counter()))
            m = rng.choice(memories)
            with quiet.store.write(m) as tx:
                n = tx.enqueue("sim", b"{}", 0.0)
            queued[m, n] = time.perf_counter()
            quiet.services.lane.queued()
        offered = len(queued) / (time.perf_counter() - start)
        deadline = time.monotonic() + 120
        while len(sim.applied) < len(queued) and time.monotonic() < deadline:
            time.sleep(0.01)
    latencies = [sim.applied[key] - at for key, at in queued.items() if key in sim.applied]
    p50, p95, most = _percentiles(latencies)
    return {
        "jobs": len(queued),
        "offered": offered,
        "done": len(latencies),
        "p50": p50,
        "p95": p95,
        "max": most,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=500)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=4, help="jobs per memory in the burst")
    ap.add_argument("--prepare-ms", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=200.0, help="jobs/s of the steady stream")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--out", action="store_true", help=f"append to {RESULTS.name}")
    args = ap.parse_args()
    why = None if os.environ.get(pg.ENV_URL) else pg.why_no_cluster()
    if why:
        print(f"no PostgreSQL to measure on: {why}", file=sys.stderr)
        return 1
    memories = [f"memory-{i:04d}" for i in range(args.memories)]
    with pg.server() as server:
        with pg.fresh_database(server) as db:
            burst = _burst(db, args, memories)
        with pg.fresh_database(server) as db:
            steady = _steady(db, args, memories)
    text = "\n".join(
        [
            f"## {time.strftime('%Y-%m-%d')}: {args.memories} memories, {args.threads} threads, "
            f"prepare {args.prepare_ms:g} ms",
            "",
            f"`python benches/lane_postgres.py {' '.join(sys.argv[1:])}`; "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}, the server on the same "
            "machine (loopback).",
            "",
            "| measure | jobs | jobs/s | latency p50 | p95 |",
            "| --- | --- | --- | --- | --- |",
            f"| burst ({args.jobs} a memory, queued before the worker starts) | {burst['jobs']:,} "
            f"| {burst['rate']:.0f} | {burst['p50']:.0f} ms | {burst['p95']:.0f} ms |",
            f"| steady stream, {steady['offered']:.0f} jobs/s offered | {steady['jobs']:,} "
            f"({steady['done']:,} done) | {steady['offered']:.0f} | {steady['p50']:.1f} ms "
            f"| {steady['p95']:.1f} ms (max {steady['max']:.0f}) |",
            "",
            f"A job's ideal: {args.prepare_ms:g} ms of prepare; {args.threads} threads preparing "
            f"without pause would do {args.threads * 1000 / args.prepare_ms:.0f} jobs/s.",
            "",
        ]
    )
    print(text)
    if args.out:
        head = "" if RESULTS.exists() else "# Lane throughput and job latency on PostgreSQL\n\n"
        with RESULTS.open("a", encoding="utf-8") as f:
            f.write(head + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
