"""The decorate call (MECHANISM: "When each part runs": "Recall for a new user message; store
what is new; take notes the model wrote; seal episodes whose facts are in; sleep or fade if
needed; assemble the request").

Recall runs first, before the write transaction (the embedder and an inline walk may take a
moment). Then one transaction stores what is new, takes notes, forgets and assembles: a decorate
is all or nothing. When a fade needs history cut and the cut was not planned yet, the
transaction rolls back, the judge plans the cut while the store's write lock is free, and the
decorate runs again with the plan. On a store that makes one write transaction at a time
(SQLite), the decorate is first planned in a read transaction, its writes kept, and made in a
short write transaction (`ingest.made_apart`; docs/design/storage.md, "Short write
transactions").

`prepare` decorates in a transaction it rolls back, keeping its writes; `commit` makes them
once the provider accepted the request, in a short transaction, when the memory is as it was
(its `version`), and otherwise decorates again with the same recall (design: docs/design/
serve.md, "What is stored, and when").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, cast

from .. import _constants as C
from .. import tokens, wire
from .._aio import run_sync
from .._services import Services
from ..episodes.cut import plan_read_cut
from ..errors import EmptyRequestError
from ..forgetting.budget import Decorating
from ..forgetting.fade import CutFirst, Planned
from ..mirror.history import History
from ..notes.tool import caller_tools
from ..recall.turns import Pending, place_recall, recall_for, store_recall
from ..records import RequestRecord
from ..store import Transaction
from ..store.deferring import Deferred, ReadsOwnWrite
from ..store.recording import Recording, Write, replay
from ..usage import UsageRecord, collecting
from ..wire import Format, ParsedRequest
from ..wire.canonical import encode_json, plain
from ..wire.limits import Limits
from .align import align, digests_of_sent
from .assemble import Assembled, Key, forget_and_assemble, shown_seqs
from .ingest import append, made_apart, new_entries, open_memory, sync, take_notes, writing
from .view import block_digest, emitted_blocks, strip_own_additions

__all__ = ["Prepared", "commit", "decorate", "discard", "prepare"]

log = logging.getLogger("fadeway.decorate")


def decorate(
    services: Services,
    mirror: History,
    memory_id: str,
    request: dict[str, Any],
    at: float | datetime | None,
) -> dict[str, Any]:
    """Store what is new in `request` and return the request to send to the provider, at
    time `at` (None: the clock's); see `Memory.decorate`."""
    start = _start(services, memory_id, request, at)
    with mirror.lock, collecting() as used:
        recalled = _recall(services, mirror, memory_id, start.parsed, start.now)
        out = _deferred(services, mirror, memory_id, start, recalled, used)
        if out is None:
            out = _attempts(services, mirror, memory_id, start, recalled, used)
    if out.queued:
        services.lane.queued()
    return out.request


def _deferred(
    services: Services,
    mirror: History,
    memory_id: str,
    start: _Start,
    recalled: tuple[list[Pending], _Sent],
    used: list[UsageRecord],
) -> Assembled | None:
    """The decorate planned in a read transaction and its writes made in a short one
    (`made_apart`); None when it cannot be: the plan read what it wrote (a fade, a note taken,
    a new memory), a cut must be planned first, the memory changed meanwhile, or the store
    serialises writes per memory only."""

    def plan() -> tuple[Assembled, list[Write], int | None]:
        done = _plan(services, mirror, memory_id, start, recalled, used)
        return done.out, done.writes, done.version

    return made_apart(services.store, mirror, memory_id, plan, also=(_CutFirst,))


def _plan(
    services: Services,
    mirror: History,
    memory_id: str,
    start: _Start,
    recalled: tuple[list[Pending], _Sent],
    used: list[UsageRecord],
) -> _Recorded:
    """A decorate made in a read transaction, its writes kept (`_decorate_once`, `defer`)."""
    parsed = replace(start.parsed, request=dict(start.parsed.request))
    try:
        _decorate_once(
            services,
            mirror,
            memory_id,
            parsed,
            (start.encoding, start.now),
            recalled,
            used,
            None,
            inline=False,
            defer=True,
        )
    except _Recorded as done:
        return done
    raise AssertionError("unreachable: a deferred decorate ends in _Recorded")


@dataclass(frozen=True, slots=True)
class _Start:
    """A request parsed and checked, when it is decorated and the encoding it is counted in."""

    parsed: ParsedRequest
    now: float
    encoding: str


@dataclass(frozen=True, slots=True)
class _Plan:
    """A decorate made and rolled back: what it started from, its recall, the model calls it
    made, its writes, the memory's version they were made on, whether it queued jobs, and the
    digests of the blocks it returned."""

    start: _Start
    recalled: tuple[list[Pending], _Sent]
    used: list[UsageRecord]
    writes: list[Write]
    version: int | None
    queued: bool
    emitted: list[bytes]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request decorated from memory `memory_id` as it stood, not stored yet (`prepare`):
    `request` is what to send to the provider; `commit` stores it, `discard` drops it."""

    memory_id: str
    request: dict[str, Any]
    _plan: _Plan = field(repr=False)


def prepare(
    services: Services,
    mirror: History,
    memory_id: str,
    request: dict[str, Any],
    at: float | datetime | None,
) -> Prepared:
    """Decorate `request` as `decorate` does, in a transaction rolled back: nothing is stored
    until `commit`; see `Memory.prepare`."""
    start = _start(services, memory_id, request, at)
    with mirror.lock, collecting() as used:
        recalled = _recall(services, mirror, memory_id, start.parsed, start.now)
        mark = mirror.mark()
        done = _recorded(services, mirror, memory_id, start, recalled, used)
        mirror.roll_back(mark)
    out, emitted = done.out, [block_digest(text) for text in done.out.blocks]
    plan = _Plan(start, recalled, list(used), done.writes, done.version, out.queued, emitted)
    return Prepared(memory_id, out.request, plan)


def _recorded(
    services: Services,
    mirror: History,
    memory_id: str,
    start: _Start,
    recalled: tuple[list[Pending], _Sent],
    used: list[UsageRecord],
) -> _Recorded:
    """The decorate with its writes kept: planned in a read transaction where the store makes
    one write transaction at a time and the plan can be (`_plan`), else in a write transaction
    rolled back."""
    if services.store.serial_writes:
        mark = mirror.mark()
        try:
            return _plan(services, mirror, memory_id, start, recalled, used)
        except (ReadsOwnWrite, _CutFirst):
            mirror.roll_back(mark)
        except BaseException:
            mirror.roll_back(mark)  # as the plan found it: nothing of it was stored
            raise
    try:
        _attempts(services, mirror, memory_id, start, recalled, used, record=True)
    except _Recorded as done:
        return done
    raise AssertionError("unreachable: a recorded decorate ends in _Recorded")


def commit(services: Services, mirror: History, prepared: Prepared) -> dict[str, Any]:
    """Store `prepared` and return the request as stored: `prepared.request` when the memory is
    as it was decorated from (its writes are made again, in one short transaction); else it is
    decorated again with the same recall and time (another caller or the lane changed the
    memory meanwhile), which may show other blocks (those sent are recorded as fadeway's own
    all the same, should the caller send them back)."""
    plan, memory_id = prepared._plan, prepared.memory_id
    with mirror.lock:
        with writing(services.store, mirror, memory_id) as tx:
            same = tx.version() == plan.version
            if same:
                replay(tx, plan.writes)
        if same:
            request, queued = prepared.request, plan.queued
        else:
            log.info("memory %r changed since its request was prepared: decorated again", memory_id)
            with collecting() as used:
                used += plan.used
                out = _attempts(
                    services,
                    mirror,
                    memory_id,
                    plan.start,
                    plan.recalled,
                    used,
                    emitted=plan.emitted,
                )
            request, queued = out.request, out.queued
    if queued:
        services.lane.queued()
    return request


def discard(services: Services, prepared: Prepared) -> None:
    """Drop `prepared` (its provider refused it): only the model calls its recall made are
    stored (in the memory's usage), as they were paid for."""
    plan = prepared._plan
    if not plan.used:
        return
    with services.store.write(prepared.memory_id) as tx:
        if tx.memory() is not None:  # a memory never stored has no usage to hold them
            tx.insert_usage(plan.used, plan.start.now)


def _start(
    services: Services, memory_id: str, request: dict[str, Any], at: float | datetime | None
) -> _Start:
    """`request` parsed and checked (nothing new is refused for a memory with no history)."""
    parsed = wire.parse_request(request, services.limits)
    _check_limits(services.limits, parsed)
    parsed.request = caller_tools(parsed.format, parsed.request)
    if not parsed.history and not parsed.instructions:
        # Nothing new is fine for a memory with history (a caller that sends only what is new,
        # asked to call the model again): the request is its view.
        with services.store.read(memory_id) as tx:
            if tx.message_count() == 0:
                key = "messages" if parsed.format is Format.CHAT_COMPLETIONS else "input"
                raise EmptyRequestError(
                    f"the request's {key} list is empty and memory {memory_id!r} holds no "
                    "history yet: there is nothing to send"
                )
    return _Start(parsed, services.now(at), tokens.encoding_for_model(parsed.model))


def _attempts(
    services: Services,
    mirror: History,
    memory_id: str,
    start: _Start,
    recalled: tuple[list[Pending], _Sent],
    used: list[UsageRecord],
    *,
    record: bool = False,
    emitted: Sequence[bytes] = (),
) -> Assembled:
    """The decorate's transaction, tried again with a planned cut while the fade needs one
    (`record`, `emitted`: see `_decorate_once`)."""
    planned: Planned | None = None
    for attempt in range(1, C.CUT_RETRIES + 1):
        mark = mirror.mark()
        parsed = replace(start.parsed, request=dict(start.parsed.request))
        try:
            # The last attempt cuts inline if the history changed under every plan.
            return _decorate_once(
                services,
                mirror,
                memory_id,
                parsed,
                (start.encoding, start.now),
                recalled,
                used,
                planned,
                inline=attempt == C.CUT_RETRIES,
                record=record,
                sent_blocks=emitted,
            )
        except _CutFirst as first:
            mirror.roll_back(mark)
            deadline = time.monotonic() + C.INLINE_CUT_DEADLINE
            plan = plan_read_cut(services.judge, services.cut_settings, first.read, deadline)
            planned = Planned(first.read, run_sync(plan))
    raise AssertionError("unreachable: the last attempt cuts inline")


def _check_limits(limits: Limits, parsed: ParsedRequest) -> None:
    """The request's list holds no more messages than max_request_messages, and its other
    fields (metadata, ...) are not over max_message_bytes. Its instructions, model and
    `wire.READ_FIELDS` (tools, response_format, ...) were measured as `wire.parse_request`
    encoded them, its history's messages are as they are encoded to be aligned."""
    key = "messages" if parsed.format is Format.CHAT_COMPLETIONS else "input"
    count = len(parsed.instructions) + len(parsed.history)
    limits.check_count(count, f"the request's {key} list")
    limits.check_fields(parsed.request, {key, "model", *wire.READ_FIELDS})


class _CutFirst(Exception):
    """Leaves `_decorate_once`'s transaction by its rollback when the fade returned
    `CutFirst`; caught in `decorate`, which plans the cut and tries again."""

    def __init__(self, read: Any) -> None:
        super().__init__("history to cut before the fade")
        self.read = read


class _Recorded(Exception):
    """Leaves a recorded `_decorate_once`'s transaction by its rollback, with what it
    assembled, its writes and the memory's version they were made on."""

    def __init__(self, out: Assembled, writes: list[Write], version: int | None) -> None:
        super().__init__("a decorate recorded")
        self.out, self.writes, self.version = out, writes, version


@dataclass(frozen=True, slots=True)
class _Sent:
    """The sent history as aligned before the write transaction: fadeway's additions
    stripped, each message's digest, and how many messages the mirror held then. The
    transaction takes them as they are when the mirror still holds as many."""

    history: list[Any]
    digests: list[bytes]
    stored: int


def _recall(
    services: Services, mirror: History, memory_id: str, parsed: ParsedRequest, now: float
) -> tuple[list[Pending], _Sent]:
    """Recall for each of the request's new user messages (said at `now`), before they join
    the history and before the write transaction (the embedder and an inline walk may take a
    moment). The new messages are those the sent history holds past what is stored, as
    alignment finds them."""
    with services.store.read(memory_id) as tx:
        sync(mirror, tx)
        mirror.episodes.sync(tx)
        memory = tx.memory()
        emitted = emitted_blocks(tx, memory, parsed.history)
    sent = _aligned(services, mirror, parsed.history, emitted)
    through = memory.decorated_through if memory is not None else 0
    view = shown_seqs(services, mirror)
    start = align(sent.history, sent.digests, mirror, through, view)
    new = sent.history[start:]
    pending = recall_for(services, memory_id, mirror, new, sent.digests[start:], now)
    return pending, sent


def _aligned(
    services: Services, mirror: History, history: list[Any], emitted: Callable[[str], bool]
) -> _Sent:
    """`history` without fadeway's additions (its blocks those `emitted` says it returned),
    with its digests, against `mirror`."""
    stripped = strip_own_additions(history, mirror.answers_note, emitted)
    digests = digests_of_sent(stripped, mirror, shown_seqs(services, mirror), services.limits)
    return _Sent(stripped, digests, len(mirror))


def _restore_instructions(parsed: ParsedRequest, stored: bytes) -> None:
    """A request that carries no instructions keeps the latest ones the memory was given."""
    saved = plain(stored)
    parsed.instructions = saved["messages"]
    if saved["instructions"] is not None:
        parsed.request["instructions"] = saved["instructions"]


def _decorate_once(
    services: Services,
    mirror: History,
    memory_id: str,
    parsed: ParsedRequest,
    measured: tuple[str, float],
    recalled: tuple[list[Pending], _Sent],
    used: list[UsageRecord],
    planned: Planned | None,
    inline: bool,
    record: bool = False,
    sent_blocks: Sequence[bytes] = (),
    defer: bool = False,
) -> Assembled:
    """One attempt at the decorate's transaction; `measured` is the request's encoding and
    the call's time, `recalled` the recalls run for its new user messages and the sent
    history they were found in. With `record`, the transaction is rolled back and left by
    `_Recorded`, the mirror as it stands (the caller rolls it back). With `defer`, likewise
    but in a read transaction whose writes are kept, not made (`Deferred`: `ReadsOwnWrite`
    when it reads what it wrote). `sent_blocks` are digests of other blocks to record as
    fadeway's own (those of a prepared request sent)."""
    (encoding, now), (pending, sent) = measured, recalled
    opened = (
        services.store.read(memory_id)
        if defer
        else writing(services.store, mirror, memory_id, keep=(_CutFirst, _Recorded))
    )
    with opened as store_tx:
        version = store_tx.version() if record or defer else None
        if defer:
            tx = cast(Transaction, Deferred(store_tx))
        else:
            tx = cast(Transaction, Recording(store_tx)) if record else store_tx
        memory = open_memory(tx, memory_id, parsed.format, now)
        sync(mirror, tx)
        emitted = emitted_blocks(tx, memory, parsed.instructions)
        parsed.instructions = strip_own_additions(parsed.instructions, mirror.answers_note, emitted)
        if sent.stored != len(mirror):  # another writer stored messages since
            emitted = emitted_blocks(tx, memory, parsed.history)
            sent = _aligned(services, mirror, parsed.history, emitted)
        parsed.history = sent.history
        has_instructions = bool(parsed.instructions) or (
            parsed.request.get("instructions") is not None
        )
        instructions = encode_json(
            {"instructions": parsed.request.get("instructions"), "messages": parsed.instructions}
        )
        episodes = mirror.episodes.sync(tx)
        last_view = shown_seqs(services, mirror)
        start = align(sent.history, sent.digests, mirror, memory.decorated_through, last_view)
        new = new_entries(
            mirror, parsed.format, sent.history, start, sent.digests, limits=services.limits
        )
        before = len(mirror)
        append(tx, mirror, new, encoding, now, source="request")
        placed = place_recall(mirror, pending, before)
        took = take_notes(tx, mirror, memory_id, before, now, "model", services.limits)
        if has_instructions and memory.instructions != instructions:
            tx.set_instructions(instructions)
        elif not has_instructions and memory.instructions is not None:
            _restore_instructions(parsed, memory.instructions)
        tx.set_decorated_through(len(mirror))
        ratio = tx.last_kept_ratio(parsed.model) or 1.0
        call = Decorating(memory_id, parsed, encoding, ratio, now, before)
        out = forget_and_assemble(
            services, tx, mirror, call, memory, episodes, placed, planned=planned, inline=inline
        )
        if isinstance(out, CutFirst):
            raise _CutFirst(out.read)
        store_recall(tx, mirror, out.recalls, now)
        # What fadeway adds to the request is its own when the caller sends it back.
        tx.insert_emitted([*sent_blocks, *(block_digest(text) for text in out.blocks)])
        _record_request(tx, mirror, parsed, encoding, now, used, out.key)
        out = out._replace(queued=out.queued or took)
        if record or defer:
            raise _Recorded(out, cast(Recording | Deferred, tx).writes, version)
    return out


def _record_request(
    tx: Transaction,
    mirror: History,
    parsed: ParsedRequest,
    encoding: str,
    now: float,
    used: list[UsageRecord],
    key: Key,
) -> None:
    """Record a decorated request (what `report` finds it by), and the model calls made for it
    (recall's, and a cut's)."""
    tx.insert_usage(used, now)
    latest = tx.latest_request()
    tx.insert_request(
        RequestRecord(
            n=(latest.n if latest else 0) + 1,
            at=now,
            model=parsed.model,
            encoding=encoding,
            estimate=key.estimate,
            view_len=key.length,
            view_last=key.last,
            history_through=len(mirror),
        )
    )
