"""Taking a note: its facts written against the episodes awaiting them (MECHANISM: "The note ask
and sealing").

A note comes from the decorated model (in the reply `report` stores, or in the history sent to
`decorate`) or from a note writer: `Memory.answer_ask`, or, for an engine opened with
`note_writer=`, the lane's note job that a decorate queues whenever episodes await a note (the
model is then not asked).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import _constants as C
from .. import blocks
from ..episodes.traces import number_runs
from ..forgetting.fade import ask_spans
from ..lane.worker import JobHandler, register_job
from ..records import EpisodeRecord, FactRecord, JobRecord, NoteRecord
from ..store import Transaction
from ..wire import Format
from ..wire.canonical import encode_json
from .tool import Note
from .writers import LeavingMessage, leaving_messages

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = ["PendingAsk", "pending_ask", "awaiting_note", "write_note", "NoteJob"]

log = logging.getLogger("fadeway.memory")


def _awaiting(tx: Transaction) -> list[EpisodeRecord]:
    acked = {e for e, _ in tx.acks()}
    return [e for e in tx.episodes() if e.state == "leaving" and e.n not in acked]


def awaiting_note(tx: Transaction) -> list[int]:
    """The episodes leaving without a note yet: those the next note is written against."""
    return [e.n for e in _awaiting(tx)]


@dataclass(frozen=True, slots=True)
class PendingAsk:
    """The note ask standing for `awaiting` episodes, as a note writer reads it."""

    awaiting: list[int]
    text: str
    messages: list[LeavingMessage]


def pending_ask(tx: Transaction) -> PendingAsk | None:
    """The note ask that stands, with the leaving turns' messages; None when nothing awaits."""
    awaiting = _awaiting(tx)
    if not awaiting:
        return None
    leaving = [m for e in awaiting for m in tx.messages(e.first_seq, e.last_seq + 1)]
    memory = tx.memory()
    assert memory is not None  # it holds episodes
    first, *more = ask_spans(awaiting)
    return PendingAsk(
        [e.n for e in awaiting],
        blocks.note_ask(*first, *more),
        leaving_messages(leaving, Format(memory.format)),
    )


def write_note(
    tx: Transaction,
    memory_id: str,
    note: Note,
    arguments: str,
    call_id: str | None,
    now: float,
    source: str,
    awaiting: list[int],
) -> None:
    """Write a note's facts against the `awaiting` episodes and acknowledge those; queue the
    lane's work on the facts (the graph, their traces, their vectors)."""
    existing = tx.notes()
    n = (existing[-1].n if existing else 0) + 1
    first_fact = tx.fact_count() + 1
    facts = [
        FactRecord(
            n=first_fact + i,
            note=n,
            text=entry.note,
            subject=entry.subject,
            object=entry.object,
            milestone=entry.milestone,
            at=now,
        )
        for i, entry in enumerate(note.facts)
    ]
    tx.insert_note(
        NoteRecord(n=n, at=now, call_id=call_id, source=source, arguments=arguments),
        facts,
        awaiting,
    )
    if facts:
        # The graph takes the facts first (merges and retirements), then they are scored
        # against the episodes remembered now and embedded for search.
        remembered = [e.n for e in tx.episodes() if e.state != "forgotten"]
        tx.enqueue("graph", encode_json({"note": n}), now)
        tx.enqueue("score", encode_json({"note": n, "remembered": number_runs(remembered)}), now)
        tx.enqueue("embed", b"{}", now)
    log.info("memory %r: note %d took %d facts for episodes %s", memory_id, n, len(facts), awaiting)


class NoteJob(JobHandler):
    """The engine's note writer answers the ask that stands (queued by a decorate that found
    episodes awaiting a note, for an engine opened with `note_writer=`)."""

    async def prepare(self, engine: Engine, memory_id: str, job: JobRecord) -> Any:
        writer = engine.note_writer
        if writer is None:
            return None  # queued by an engine that had one; this one leaves the ask standing
        with engine.store.read(memory_id) as tx:
            ask = pending_ask(tx)
        if ask is None:
            return None
        note = await writer.write(
            ask.text, ask.messages, deadline=time.monotonic() + C.LANE_JUDGE_DEADLINE
        )
        return ask.awaiting, note, f"note-writer:{writer.name}"

    def apply(self, engine: Engine, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        if prepared is None:
            return True
        awaiting, note, source = prepared
        if awaiting_note(tx) != awaiting:
            return False  # a note came meanwhile, or a fade moved on: ask again
        write_note(
            tx,
            tx.memory_id,
            note,
            encode_json(note).decode(),
            None,
            job.created_at,
            source,
            awaiting,
        )
        return True


register_job("note", NoteJob())
