"""The note ask: which episodes await a note, and the ask that stands for them (MECHANISM:
"The note ask and sealing")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .. import blocks
from ..records import EpisodeRecord
from ..store import Transaction
from ..wire import Format
from .context import note_context
from .writers import LeavingMessage, NoteContext, leaving_messages

__all__ = ["PendingAsk", "ask_spans", "awaiting_note", "pending_ask"]


def ask_spans(episodes: Sequence[EpisodeRecord]) -> list[tuple[int, int]]:
    """The turns the note ask names for `episodes` (those awaiting a note): their turn ranges in
    order, joined where they touch, so that a live episode between two leaving ones is not
    said to be leaving."""
    spans: list[tuple[int, int]] = []
    for e in sorted(episodes, key=lambda e: e.first_seq):
        if spans and e.first_turn <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(spans[-1][1], e.last_turn))
        else:
            spans.append((e.first_turn, e.last_turn))
    return spans


def _awaiting(tx: Transaction) -> list[EpisodeRecord]:
    acked = {e for e, _ in tx.acks()}
    return [e for e in tx.episodes() if e.state == "leaving" and e.n not in acked]


def awaiting_note(tx: Transaction) -> list[int]:
    """The episodes leaving without a note yet: those the next note is written against."""
    return [e.n for e in _awaiting(tx)]


@dataclass(frozen=True, slots=True)
class PendingAsk:
    """The note ask standing for `awaiting` episodes, as a note writer reads it: its text, the
    leaving turns' messages and the context beside them."""

    awaiting: list[int]
    text: str
    messages: list[LeavingMessage]
    context: NoteContext


def pending_ask(tx: Transaction) -> PendingAsk | None:
    """The note ask that stands, with the leaving turns' messages and the context a note writer
    reads beside them; None when nothing awaits."""
    awaiting = _awaiting(tx)
    if not awaiting:
        return None
    leaving = [m for e in awaiting for m in tx.messages(e.first_seq, e.last_seq + 1)]
    memory = tx.memory()
    assert memory is not None  # it holds episodes
    first, *more = ask_spans(awaiting)
    messages = leaving_messages(leaving, Format(memory.format))
    return PendingAsk(
        [e.n for e in awaiting],
        blocks.note_ask(*first, *more),
        messages,
        note_context(tx, messages),
    )
