"""The one table of lane jobs: every kind of background work, its handler, what queues it, how
it is retried, and whether a lane that fell behind may skip it (MECHANISM: "When each part
runs": "Score new facts against episodes; index sealed episodes for search; distill the turn's
recall block; prepare recall for the next message; cut long history into episodes").

A job is queued in the store by `tx.enqueue(JobKind.X, payload, now)`, inside the transaction
that makes it due, and run by `lane.worker.Lane`: prepared from a snapshot (where a judge may
take its time, no lock held), then applied in one transaction that also marks it done.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .. import _constants as C
from .._services import Services
from ..episodes.cut import CutJob
from ..forgetting.scoring import ScoreJob
from ..graph.update import GraphJob
from ..index.embedding import EmbedJob
from ..index.passages import PassagesJob
from ..notes.taking import NoteJob
from ..recall.distill import DistillJob
from ..recall.walk import WalkJob
from ..records import JobKind, JobRecord
from ..store import Transaction

__all__ = ["Job", "JobHandler", "JobKind", "Retry", "Skippable", "table"]


@runtime_checkable
class JobHandler(Protocol):
    """What runs one kind of job. Its constructor takes what it uses (the store, a judge...)."""

    async def prepare(self, memory_id: str, job: JobRecord) -> Any:
        """Read what the job needs and do its slow part (judge calls). Nothing is written."""

    def apply(self, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        """Write the job's result inside the transaction that marks it done. Returns False when
        the snapshot it was prepared from is stale: the job is prepared again."""


@runtime_checkable
class Skippable(JobHandler, Protocol):
    """A handler whose job a lane that fell behind skips: what it would prepare is never read
    once the memory has moved on."""

    def stale(self, tx: Transaction, job: JobRecord) -> bool:
        """Whether the memory has moved past the point where the job's result is read."""


@dataclass(frozen=True, slots=True)
class Retry:
    """How a failing job is tried again. An attempt that could not reach the job's judge or
    embedder (`lane.worker.transient`) waits before the next, doubling from the engine's
    `lane_retry_seconds` up to LANE_RETRY_MAX_SECONDS, at most `outages` times, so an outage is
    ridden out with the jobs behind it kept in order; any other failure is tried again at once,
    at most `failures` times. Then the job is parked (marked failed with its error, kept) and the
    lane moves on; it is tried again once its wait has passed (`Lane.park_wait`), and, when it
    was parked because its service could not be reached, as soon as a job of its kind in its
    memory's lane completes after calling a model (the service answers again:
    `Lane.revive_answered`)."""

    failures: int = field(default_factory=lambda: C.JOB_MAX_ATTEMPTS)
    outages: int = field(default_factory=lambda: C.JOB_MAX_TRANSIENT_ATTEMPTS)


@dataclass(frozen=True, slots=True)
class Job:
    """One kind of job, as the lane runs it."""

    handler: JobHandler
    queued_by: str  # where it is queued, for the reader
    retry: Retry = field(default_factory=Retry)
    #: Whether a lane that fell behind skips it (its handler is `Skippable`).
    skippable: bool = False


def table(services: Services) -> Mapping[str, Job]:
    """Every kind of job, with a handler bound to `services`."""
    s = services
    return {
        JobKind.CUT: Job(
            CutJob(s.store, s.judge, s.cut_settings),
            "a report, once CUT_AFTER_TOKENS of closed history are uncut (decorate.report)",
        ),
        JobKind.GRAPH: Job(
            GraphJob(s.store, s.judge, s.embedder),
            "a note taken, before its score (notes.taking.write_note)",
        ),
        JobKind.SCORE: Job(
            ScoreJob(s.store, s.indexes, s.judge), "a note taken (notes.taking.write_note)"
        ),
        JobKind.EMBED: Job(
            EmbedJob(s.store, s.embedder),
            "a note taken, passages written, an import, a reindex (notes.taking.write_note, "
            "index.passages.PassagesJob, export.restore, Memory.reindex)",
        ),
        JobKind.PASSAGES: Job(
            PassagesJob(),
            "a decorate that sealed episodes or sent a note writer's leaving, a note taken "
            "(decorate.assemble, notes.taking.write_note)",
        ),
        JobKind.NOTE: Job(
            NoteJob(s.store, s.note_writer, s.limits),
            "a decorate that found episodes awaiting a note, for an engine with a note writer "
            "(decorate.assemble)",
        ),
        JobKind.WALK: Job(
            WalkJob(s.store, s.indexes, s.embedder, s.judge),
            "a reply that ends its turn (recall.turns.queue_after_reply)",
            skippable=True,
        ),
        JobKind.DISTILL: Job(
            DistillJob(s.store, s.judge),
            "a reply that ends a turn that had a recall block (recall.turns.queue_after_reply)",
            skippable=True,
        ),
    }
