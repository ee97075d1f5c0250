"""The stored history of one memory mirrored in memory: its messages, turns, calls and note
calls, kept in step with the store by reading only what is new (MECHANISM: "Episodes")."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..notes.tool import find_note_calls, note_call_ids
from ..records import MessageRecord
from ..wire import Format, Side
from ..wire.canonical import plain
from ..wire.pending import PendingCalls
from .episode_table import EpisodeTable
from .facts import MemoryCache
from .trace_log import TraceLog

__all__ = ["History", "note_arguments"]


@dataclass
class History:
    """The stored history of one memory, mirrored in memory and kept in step with the store.

    Messages are append-only, so the mirror only ever grows; `sync` reads just the new tail.
    """

    digests: list[bytes] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    sides: list[str] = field(default_factory=list)
    ats: list[float] = field(default_factory=list)
    body_bytes: int = 0  # the bodies' total size, which an engine's mirrors share a budget of
    #: The messages that make note calls: seq → the ids of its note calls. Some providers number
    #: calls from 0 again every turn, so an id alone does not tell which call it is.
    note_calls: dict[int, tuple[str, ...]] = field(default_factory=dict)
    turn: int = 0  # the turn of the last stored message
    turn_start: int = 0  # seq of the first message of that turn: the turn in progress
    makers: dict[str, int] = field(default_factory=dict)  # call id → seq of its latest call
    row_calls: list[tuple[str, ...]] = field(default_factory=list)  # the calls each message makes
    row_answers: list[str | None] = field(default_factory=list)  # the call each output answers
    row_kinds: list[str] = field(default_factory=list)  # "message", or the Responses item type
    user_seqs: list[int] = field(default_factory=list)  # the user messages, in order
    #: The calls of the turn in progress that wait for their outputs, kept as messages come.
    pending: PendingCalls = field(default_factory=PendingCalls, repr=False, compare=False)
    #: The memory's trace log as columns, synced by whoever reads it (the fade, the facts order).
    trace_log: TraceLog = field(default_factory=TraceLog, repr=False, compare=False)
    #: The memory's episodes as records and columns, synced by whoever reads them.
    episodes: EpisodeTable = field(default_factory=EpisodeTable, repr=False, compare=False)
    #: The memory's facts, graph and acknowledgements, synced by decorate.
    cache: MemoryCache = field(default_factory=MemoryCache, repr=False, compare=False)
    #: Why requests of this memory stood over the ceiling, each logged once (not rolled back:
    #: a log line is not undone).
    over_ceiling: set[str] = field(default_factory=set, repr=False, compare=False)
    #: Held by whoever reads or extends this mirror (one decorate or report at a time).
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.digests)

    def clear(self) -> None:
        for part in (
            self.digests,
            self.sources,
            self.bodies,
            self.tokens,
            self.turns,
            self.sides,
            self.ats,
            self.note_calls,
            self.makers,
            self.row_calls,
            self.row_answers,
            self.row_kinds,
            self.user_seqs,
        ):
            part.clear()
        self.pending = PendingCalls()
        self.turn = self.turn_start = self.body_bytes = 0

    def truncate(self, count: int) -> None:
        """Drop the messages from seq `count` on, as if they had never been extended."""
        if count >= len(self):
            return
        self.body_bytes -= sum(map(len, self.bodies[count:]))
        for part in (
            self.digests,
            self.sources,
            self.bodies,
            self.tokens,
            self.turns,
            self.sides,
            self.ats,
            self.row_calls,
            self.row_answers,
            self.row_kinds,
        ):
            del part[count:]
        for seq in [s for s in self.note_calls if s >= count]:
            del self.note_calls[seq]
        if any(seq >= count for seq in self.makers.values()):
            self.makers = {c: s for s, calls in enumerate(self.row_calls) for c in calls}
        del self.user_seqs[bisect.bisect_left(self.user_seqs, count) :]
        self.turn = self.turns[-1] if count else 0
        start = count
        while start and self.turns[start - 1] == self.turn:
            start -= 1
        self.turn_start = start
        self.pending = PendingCalls()
        for seq in range(start, count):
            self._pend(seq)

    def mark(self) -> tuple[int, int, int, tuple[int | None, ...]]:
        """Where the mirrors stand, to `roll_back` to after a write that rolled back."""
        return len(self), self.trace_log.last, self.episodes.changes, self.cache.position()

    def roll_back(self, mark: tuple[int, int, int, tuple[int | None, ...]]) -> None:
        """Bring the mirrors back to `mark`: the messages appended since are dropped, and a
        mirror of the trace log, the episodes or the facts that read past it is read again
        whole."""
        count, last, changes, position = mark
        self.truncate(count)
        if self.trace_log.last != last:
            self.trace_log.clear()
        if self.episodes.changes != changes:
            self.episodes.clear()
        if self.cache.position() != position:
            self.cache = MemoryCache()

    def reset(self) -> None:
        """Forget everything mirrored (after a write transaction that failed, whose rows the
        mirrors may hold): the next sync reads the store again."""
        self.clear()
        self.trace_log.clear()
        self.episodes.clear()
        self.cache = MemoryCache()

    def extend(self, rows: Iterable[MessageRecord]) -> None:
        for r in rows:
            self.digests.append(r.digest)
            self.sources.append(r.source)
            self.bodies.append(r.body)
            self.body_bytes += len(r.body)
            self.tokens.append(r.tokens)
            self.turns.append(r.turn)
            self.sides.append(r.side)
            self.ats.append(r.at)
            self.makers.update(dict.fromkeys(r.calls, r.seq))
            self.row_calls.append(r.calls)
            self.row_answers.append(r.answers)
            self.row_kinds.append(r.kind)
            if r.side == Side.USER:
                self.user_seqs.append(r.seq)
            if ids := note_call_ids(r.calls, r.body):
                self.note_calls[r.seq] = ids
            if r.turn != self.turn:
                self.turn, self.turn_start = r.turn, r.seq
            self._pend(r.seq)

    def _pend(self, seq: int) -> None:
        """Bring `pending` up to date with stored message `seq`."""
        answered = self.row_answers[seq]
        if self.sides[seq] == Side.USER:
            self.pending = PendingCalls()
        elif answered is not None:
            self.pending.answer(answered)
        elif self.row_calls[seq]:
            self.pending.made(
                self.row_kinds[seq],
                self.row_calls[seq],
                f"made in stored message {seq}",
                self.note_calls.get(seq, ()),
            )

    def answers_note(self, call_id: str) -> bool:
        """Whether an output for `call_id` answers a note call: the latest stored call so named."""
        return call_id in self.note_calls.get(self.makers.get(call_id, -1), ())

    def sync(self, stored_count: int, fetch: Any) -> None:
        """Bring the mirror up to `stored_count` messages; `fetch(start)` returns the rows."""
        if stored_count < len(self):  # the store was replaced under us: start over
            self.clear()
        if stored_count > len(self):
            self.extend(fetch(len(self)))


def note_arguments(
    history: History, seqs: Collection[int] | None = None
) -> dict[tuple[int, str], str]:
    """Arguments of the note calls in the stored history (those in the messages `seqs` when
    given: a long memory holds many, and most left the view long ago), by message and call id,
    in the order made."""
    out: dict[tuple[int, str], str] = {}
    held = history.note_calls.keys()
    for seq in sorted(held if seqs is None else held & set(seqs)):
        body = plain(history.bodies[seq])
        fmt = Format.RESPONSES if body.get("type") == "function_call" else Format.CHAT_COMPLETIONS
        out.update(((seq, call_id), args) for call_id, args in find_note_calls(fmt, [body]))
    return out
