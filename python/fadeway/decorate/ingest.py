"""Storing what is new (MECHANISM: "Episodes"; ARCHITECTURE: "What bad input gets"): the new
messages of a request or a reply are checked whole before anything is written, stored as sent,
numbered with their turns, and the note calls among them taken ("The note ask and sealing").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from .. import tokens, wire
from ..episodes.units import next_turns, opens_unit
from ..errors import FormatMismatchError, InvalidMessageError, UnmatchedToolOutputError
from ..mirror.history import History, note_arguments
from ..notes import tool as notes
from ..notes.ask import awaiting_note
from ..notes.taking import write_note
from ..records import MemoryRecord, MessageRecord
from ..store import Store, Transaction
from ..store.deferring import ReadsOwnWrite
from ..store.recording import Write, replay
from ..wire import Entry, Format, Side
from ..wire.canonical import body_of, plain
from ..wire.limits import Limits
from ..wire.pending import PendingCalls

__all__ = [
    "append",
    "check_format",
    "made_apart",
    "new_entries",
    "open_memory",
    "take_notes",
    "writing",
]

log = logging.getLogger("fadeway.decorate")

T = TypeVar("T")


@contextmanager
def writing(
    store: Store,
    mirror: History,
    memory_id: str,
    keep: tuple[type[BaseException], ...] = (),
) -> Iterator[Transaction]:
    """A write transaction on a memory, under its mirror's lock (the caller holds it). If it
    fails after writing, the mirror is reset: it may hold what was rolled back. After a `keep`
    the mirror is left as it stands: the caller rolls it back itself."""
    tx = None
    try:
        with store.write(memory_id) as tx:
            yield tx
    except BaseException as exc:
        if tx is not None and tx.wrote() and not isinstance(exc, keep):
            mirror.reset()
        raise


def made_apart(
    store: Store,
    mirror: History,
    memory_id: str,
    plan: Callable[[], tuple[T, list[Write], int | None]],
    *,
    also: tuple[type[BaseException], ...] = (),
) -> T | None:
    """On a store that makes one write transaction at a time (`Store.serial_writes`: SQLite),
    what `plan()` made on a `store.deferring.Deferred` of a read transaction (its result, its
    kept writes, the memory's version it read), once those writes are made in a short write
    transaction while the version is unchanged: the writer is held for the writes alone. None,
    the mirror as it stood, when the plan read what it wrote (`ReadsOwnWrite`, or one of
    `also`), when the memory changed meanwhile, or on another store: the caller then does the
    work in a write transaction (docs/design/storage.md, "Short write transactions")."""
    if not store.serial_writes:
        return None
    fall_back: tuple[type[BaseException], ...] = (ReadsOwnWrite, *also)
    mark = mirror.mark()
    try:
        out, writes, version = plan()
        with writing(store, mirror, memory_id) as tx:
            if tx.version() == version:
                replay(tx, writes)
                return out
        log.debug("memory %r changed while a call was planned: made again", memory_id)
    except fall_back:
        pass
    except BaseException:
        mirror.roll_back(mark)  # as the plan found it: nothing of it was stored
        raise
    mirror.roll_back(mark)
    return None


def sync(mirror: History, tx: Transaction) -> None:
    """Bring the mirror up to the store."""
    mirror.sync(tx.message_count(), tx.messages)


def open_memory(tx: Transaction, memory_id: str, fmt: Format, now: float) -> MemoryRecord:
    """The memory's record, made by its first decorate; the request's format must be its."""
    memory = tx.memory()
    if memory is None:
        return tx.create_memory(fmt.value, now)
    check_format(memory_id, memory.format, fmt)
    return memory


def check_format(memory_id: str, stored: str, fmt: Format) -> None:
    if stored != fmt.value:
        raise FormatMismatchError(
            f"memory {memory_id!r} holds a {stored} conversation; this request is {fmt.value}"
        )


def _call_list(waiting: dict[str, str]) -> str:
    ids = ", ".join(repr(c) for c in list(waiting)[:5])
    more = f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
    return f"call{'s' if len(waiting) > 1 else ''} {ids}{more} ({next(iter(waiting.values()))})"


def _check_pairing(
    fmt: Format, e: Entry, where: str, pending: PendingCalls, own: Sequence[str]
) -> None:
    """A call's output comes after it, once, before the next user message (in Chat
    Completions, before any other message), as providers require. `pending` holds the calls of
    the turn in progress not answered yet, and is brought up to date with `e`; `own` are the
    ids of `e`'s note calls, which fadeway answers."""
    if e.answers is not None:
        if not pending.answer(e.answers):
            raise UnmatchedToolOutputError(
                f"{where} answers call {e.answers!r}, which is not waiting for an output: it "
                "already has one, or belongs to an earlier turn (a call is answered once, "
                "right after the reply that made it)"
            )
        return
    if pending and (e.side is Side.USER or fmt is Format.CHAT_COMPLETIONS):
        raise InvalidMessageError(
            f"{where} comes before the output of {_call_list(pending.waiting())}: the outputs "
            "of a reply's calls come right after it (the provider refuses anything between); "
            "send them first, or an output saying the call was not run"
        )
    if e.calls:
        pending.made(e.kind, e.calls, f"made in {where}", own)


def _check_step(e: Entry, where: str, step: set[str]) -> None:
    """Ids within one reply (a run of assistant items, `step` the ids it made so far) differ:
    the outputs of two calls of one id could not be told apart."""
    again = next(
        (
            c
            for j, c in enumerate(e.calls)
            if c in step or (e.kind == "message" and c in e.calls[:j])
        ),
        None,
    )
    if again is not None:
        raise InvalidMessageError(
            f"{where} makes call {again!r}, an id its reply already gave another call: the "
            "outputs of the two could not be told apart (ids may repeat across replies, not "
            "within one)"
        )


def new_entries(
    mirror: History,
    fmt: Format,
    sent: Sequence[Any],
    start: int,
    digests: Sequence[bytes] | None = None,
    label: str = "message",
    *,
    limits: Limits,
) -> list[Entry]:
    """Validate the new messages `sent[start:]`, each within the engine's `limits`; nothing is
    written if one is bad. A request may end before the outputs of its last calls (a replay
    sends them one by one); what comes after them is checked when it comes."""
    made: dict[str, bool] = {}  # calls made by the new messages: whether each is a note's
    pending = mirror.pending.copy()  # the turn in progress's calls, unanswered

    def known_call(call_id: str) -> bool:
        return call_id in made or call_id in mirror.makers

    def answers_note(call_id: str) -> bool:
        return made[call_id] if call_id in made else mirror.answers_note(call_id)

    out = []
    step: set[str] = set()  # ids the reply in progress (a run of assistant items) made
    for i in range(start, len(sent)):
        where = f"{label} {i}"
        body = body_of(sent[i], where, size=limits.check_body)
        e = wire.entry(
            fmt, sent[i], where, known_call, body=body, digest=digests[i] if digests else None
        )
        if e.side is not Side.ASSISTANT:
            step = set()
        elif e.calls:
            _check_step(e, where, step)
            step.update(e.calls)
        if e.answers is not None and answers_note(e.answers):
            # A loop that skipped `report` answered every call of the reply it sends back, the
            # note's too: that output is fadeway's to give, not stored.
            continue
        own = notes.note_call_ids(e.calls, e.body)
        _check_pairing(fmt, e, where, pending, own)
        made.update((c, c in own) for c in e.calls)
        out.append(_sized_as_shown(fmt, e, where, limits) if own else e)
    return out


def _sized_as_shown(fmt: Format, e: Entry, where: str, limits: Limits) -> Entry:
    """`e` counted as the view shows it: a note call over max_note_bytes is shown as a short
    stub (`notes.note_stub`), so its size in every later request is the stub's."""
    if len(e.body) <= limits.max_note_bytes:  # its note's arguments are shorter still
        return e
    message = plain(e.body)
    shown = notes.map_note_arguments(message, partial(notes.note_stub, limits=limits))
    if shown is message:
        return e
    counted = wire.entry(fmt, shown, where, lambda _: True, digest=e.digest)
    return replace(e, texts=counted.texts, fixed_tokens=counted.fixed_tokens)


def append(
    tx: Transaction, mirror: History, new: list[Entry], encoding: str, at: float, source: str
) -> None:
    """Store `new` entries after the mirror's last message, with their turns and sizes."""
    if not new:
        return
    sizes = tokens.entry_tokens(encoding, new)
    turns = next_turns(mirror.turn, (e.side for e in new))
    first = len(mirror)
    rows = [
        MessageRecord(
            seq=first + i,
            turn=turns[i],
            at=at,
            role=e.role,
            kind=e.kind,
            side=e.side.value,
            source=source,
            tokens=sizes[i],
            digest=e.digest,
            calls=e.calls,
            answers=e.answers,
            body=e.body,
        )
        for i, e in enumerate(new)
    ]
    tx.insert_messages(rows)
    mirror.extend(rows)


def take_notes(
    tx: Transaction,
    mirror: History,
    memory_id: str,
    since: int,
    now: float,
    source: str,
    limits: Limits,
) -> bool:
    """Take the note calls in the messages stored from `since` on, those within `limits`;
    whether one was taken."""
    seqs = [seq for seq in mirror.note_calls if seq >= since]
    if not seqs:
        return False
    took = False
    answered: dict[int, list[int]] = {}  # by message: the episodes its notes answer
    # In the order made. Each is new, as stored now: an id may repeat (some providers number
    # every turn's calls from 0 again), so an earlier note of the same id is another note.
    for (seq, call_id), arguments in note_arguments(mirror, seqs).items():
        note = notes.read_note(arguments, limits)
        if note is None:
            continue  # logged by the reader; the episodes stay leaving and the ask stands
        # Note calls of one reply answer the same ask: their facts are those episodes'. A
        # reply is the run of assistant items its call sits in (Responses gives each call an
        # item of its own).
        start = seq
        while start > 0 and not opens_unit(mirror.sides[start], mirror.sides[start - 1]):
            start -= 1
        awaiting = answered.get(start)
        if awaiting is None:
            awaiting = answered[start] = awaiting_note(tx)
        write_note(tx, memory_id, note, arguments, call_id, now, source, awaiting)
        took = True
    return took
