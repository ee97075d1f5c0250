"""A lane worker process for tests/test_lane_processes.py: `python lane_child.py DB LOG`.

Drains the lanes of every memory of the store at DB with the test's job kinds beside fadeway's,
until none has a pending job. A `probe` job logs its prepare's start and end to LOG (a line
each, appended and flushed: "start|end PID MEMORY N TIME"), sleeping between them (long when its
payload says `slow`, so the test can kill it mid-job); its apply queues an `applied` job naming
it, in the transaction that marks it done, so the store holds the order jobs were applied in.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import msgspec

import fadeway
from fadeway.lane.jobs import Job
from fadeway.lane.worker import Lane

#: A probe's prepare, in seconds (a slow one's: the test kills it meanwhile).
PREPARE_SECONDS = 0.02
SLOW_SECONDS = 3.0


class Probe:
    def __init__(self, log: str) -> None:
        self.log = log

    def _line(self, what: str, memory_id: str, n: int) -> None:
        with open(self.log, "a", encoding="utf-8") as f:
            f.write(f"{what} {os.getpid()} {memory_id} {n} {time.time():.6f}\n")
            f.flush()

    async def prepare(self, memory_id, job):
        payload = msgspec.json.decode(job.payload)
        self._line("start", memory_id, job.n)
        await asyncio.sleep(SLOW_SECONDS if payload.get("slow") else PREPARE_SECONDS)
        self._line("end", memory_id, job.n)
        return None

    def apply(self, tx, job, prepared):
        tx.enqueue("applied", msgspec.json.encode({"job": job.n}), job.created_at)
        return True


class Applied:
    """The record a probe's apply queued: nothing to do."""

    async def prepare(self, memory_id, job):
        return None

    def apply(self, tx, job, prepared):
        return True


def main(db: str, log: str) -> int:
    with fadeway.open(db, background=False, lane_lease_seconds=2.0) as engine:
        jobs = {
            **engine.lane.jobs,
            "probe": Job(Probe(log), "test"),
            "applied": Job(Applied(), "test"),
        }
        lane = Lane(engine.store, engine.services.lane, jobs)
        while engine.store.memories_with_pending_jobs():
            lane.drain()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
