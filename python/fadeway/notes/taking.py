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
from typing import Any

from .. import _constants as C
from ..episodes.traces import number_runs
from ..errors import NoteWriterError
from ..records import FactRecord, JobKind, JobRecord, NoteRecord
from ..store import Store, Transaction
from ..wire.canonical import encode_json
from ..wire.limits import Limits
from .ask import awaiting_note, pending_ask
from .tool import Note
from .writers import NoteWriter, ask_writer

__all__ = ["write_note", "within_limits", "NoteJob"]

log = logging.getLogger("fadeway.memory")


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
    # The acknowledged turns leave the view at the next decorate: cut into passages now, so
    # that decorate's recall finds them as it seals them (else they would be neither in view
    # nor searchable in that request).
    tx.enqueue(JobKind.PASSAGES, b'{"leaving":true}', now)
    if facts:
        # The graph takes the facts first (merges and retirements), then they are scored
        # against the episodes remembered now and embedded for search.
        remembered = [e.n for e in tx.episodes() if e.state != "forgotten"]
        tx.enqueue(JobKind.GRAPH, encode_json({"note": n}), now)
        payload = {"note": n, "remembered": number_runs(remembered)}
        tx.enqueue(JobKind.SCORE, encode_json(payload), now)
        tx.enqueue(JobKind.EMBED, b"{}", now)
    log.info("memory %r: note %d took %d facts for episodes %s", memory_id, n, len(facts), awaiting)


def within_limits(note: Note, limits: Limits, writer: str) -> str:
    """The arguments of a note writer's `note`, which holds no more than the engine's note
    limits allow; else a `NoteWriterError` naming the limit (the ask stays pending)."""
    arguments = encode_json(note).decode()
    over = limits.note_over(arguments, len(note.notes))
    if over is not None:
        raise NoteWriterError(f"note writer {writer!r} gave a note that holds {over}")
    return arguments


class NoteJob:
    """The lane job in which the engine's note writer answers the ask that stands
    (`JobKind.NOTE`)."""

    def __init__(self, store: Store, writer: NoteWriter | None, limits: Limits) -> None:
        self.store, self.writer, self.limits = store, writer, limits

    async def prepare(self, memory_id: str, job: JobRecord) -> Any:
        writer = self.writer
        if writer is None:
            return None  # queued by an engine that had one; this one leaves the ask standing
        with self.store.read(memory_id) as tx:
            ask = pending_ask(tx)
        if ask is None:
            return None
        deadline = time.monotonic() + C.LANE_JUDGE_DEADLINE
        note = await ask_writer(writer, ask.text, ask.messages, ask.context, deadline)
        arguments = within_limits(note, self.limits, writer.name)
        return ask.awaiting, note, arguments, f"note-writer:{writer.name}"

    def apply(self, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        if prepared is None:
            return True
        awaiting, note, arguments, source = prepared
        if awaiting_note(tx) != awaiting:
            return False  # a note came meanwhile, or a fade moved on: ask again
        write_note(tx, tx.memory_id, note, arguments, None, job.created_at, source, awaiting)
        return True
