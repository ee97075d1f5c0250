"""The report call, and a note writer's answer to the ask (MECHANISM: "When each part runs":
"Store the reply and take any note in it; measure our size estimate against the provider's
count; queue the work that can wait"; ARCHITECTURE: "What `report` returns"). On SQLite a report
is planned in a read transaction and written in a short one, as decorate is (`made_apart`).
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any, cast

from .. import _constants as C
from .. import tokens, wire
from .._aio import run_sync
from .._services import Services
from ..episodes.cut import uncut_range
from ..errors import InvalidRequestError
from ..mirror.history import History
from ..notes import tool as notes
from ..notes.ask import awaiting_note, pending_ask
from ..notes.taking import within_limits, write_note
from ..notes.writers import NoteWriter, ask_writer
from ..recall.turns import queue_after_reply
from ..records import JobKind, ReportResult, RequestRecord
from ..store import Transaction
from ..store.deferring import Deferred
from ..store.recording import Write
from ..usage import collecting
from ..wire import ParsedRequest, Reply
from ..wire.canonical import digest_of, encode_json
from .ingest import append, check_format, made_apart, new_entries, sync, take_notes, writing
from .view import emitted_blocks, strip_own_additions

__all__ = ["answer_ask", "report"]

log = logging.getLogger("fadeway")


def report(
    services: Services,
    mirror: History,
    memory_id: str,
    request: dict[str, Any],
    response: Any,
    at: float | datetime | None,
) -> ReportResult:
    """Store the provider's reply to a decorated `request` (see `Memory.report`)."""
    parsed = wire.parse_request(request)
    services.limits.check_count(wire.reply_items_sent(response), "the reply")  # before reading
    services.limits.check_reply(response)
    reply = wire.parse_response(parsed.format, response)
    services.limits.check_count(len(reply.items), "the reply")
    now = services.now(at)
    with mirror.lock:
        done = made_apart(
            services.store,
            mirror,
            memory_id,
            lambda: _planned(services, mirror, memory_id, parsed, reply, now),
        )
        if done is None:  # a reply with a note (its facts are read back), or not SQLite
            with writing(services.store, mirror, memory_id) as tx:
                done = _stored(services, tx, mirror, memory_id, parsed, reply, now)
    result, queued = done
    if queued:
        services.lane.queued()
    return result


def _planned(
    services: Services,
    mirror: History,
    memory_id: str,
    parsed: ParsedRequest,
    reply: Reply,
    now: float,
) -> tuple[tuple[ReportResult, bool], list[Write], int | None]:
    """The report made on a `Deferred` of a read transaction (`made_apart`): what `_stored`
    returns, the writes it kept, the memory's version it read."""
    with services.store.read(memory_id) as store_tx:
        version = store_tx.version()
        planned = Deferred(store_tx)
        done = _stored(services, cast(Transaction, planned), mirror, memory_id, parsed, reply, now)
    return done, planned.writes, version


def _stored(
    services: Services,
    tx: Transaction,
    mirror: History,
    memory_id: str,
    parsed: ParsedRequest,
    reply: Reply,
    now: float,
) -> tuple[ReportResult, bool]:
    """Store `reply` in `tx`: what `report` returns, and whether jobs were queued."""
    memory = tx.memory()
    if memory is None:
        raise InvalidRequestError(
            f"memory {memory_id!r} has no decorated request to report on; call decorate first"
        )
    check_format(memory_id, memory.format, parsed.format)
    sync(mirror, tx)
    emitted = emitted_blocks(tx, memory, parsed.history)
    sent = strip_own_additions(parsed.history, mirror.answers_note, emitted)
    last_digest = digest_of(sent[-1], "the request's last message") if sent else None
    match = tx.find_request(len(sent), last_digest)
    if (why := _not_stored(tx, memory_id, match, reply)) is not None:
        result = ReportResult(
            tool_calls=notes.without_note_calls(parsed.format, reply.tool_calls),
            stored=False,
            not_stored=why,
        )
        return result, False
    new = new_entries(
        mirror, parsed.format, reply.items, 0, label="reply item", limits=services.limits
    )
    encoding = match.encoding if match else tokens.encoding_for_model(parsed.model)
    before = len(mirror)
    append(tx, mirror, new, encoding, now, source="reply")
    took = take_notes(tx, mirror, memory_id, before, now, "model", services.limits)
    calls = notes.find_note_calls(parsed.format, reply.items)
    remaining = notes.without_note_calls(parsed.format, reply.tool_calls)
    result = ReportResult(
        tool_calls=remaining,
        note_taken=took,
        call_again=bool(calls) and not remaining and not reply.text,
    )
    if match is None:
        log.info(
            "memory %r: the reported request is not one decorate returned; its token "
            "count is not kept",
            memory_id,
        )
    else:
        kept, note = _judge_ratio(memory_id, match, reply.prompt_tokens)
        tx.record_report(match.n, reply.prompt_tokens, kept, note, True)
    queued = _queue_cut(services, tx, mirror, now) or took
    if not result.tool_calls and not result.call_again:
        queued = queue_after_reply(tx, mirror, now) or queued
    return result, queued


def _not_stored(
    tx: Transaction, memory_id: str, match: RequestRecord | None, reply: Reply
) -> str | None:
    """Why the reply to the decorated request `match` is not stored (None: it is): that
    request was reported already, or a later one was decorated since (its count is noted)."""
    latest = tx.latest_request()
    if match is not None and match.replied:
        log.info(
            "memory %r: request %d was already reported; reply not stored again",
            memory_id,
            match.n,
        )
        return "already reported: this request's reply is stored once"
    if match is not None and latest is not None and match.n != latest.n:
        log.warning(
            "memory %r: report for request %d arrived after request %d was decorated; its "
            "reply is not stored and its token count not kept",
            memory_id,
            match.n,
            latest.n,
        )
        note = f"out of order: request {latest.n} was decorated since"
        tx.record_report(match.n, reply.prompt_tokens, False, note, False)
        return (
            f"out of order: a later request of the memory was decorated since this one "
            f"(request {match.n}, latest {latest.n})"
        )
    return None


def _queue_cut(services: Services, tx: Transaction, mirror: History, now: float) -> bool:
    """After a reply: queue a cut once enough uncut closed history has built up."""
    closed_end = mirror.turn_start
    start, end = uncut_range(tx, closed_end)
    uncut = sum(mirror.tokens[start:end])
    if uncut < services.cut_settings.after_tokens or tx.pending_job(JobKind.CUT) is not None:
        return False
    tx.enqueue(JobKind.CUT, encode_json({"closed_end": closed_end}), now)
    return True


def _judge_ratio(
    memory_id: str, request: RequestRecord, provider: int | None
) -> tuple[bool | None, str | None]:
    """Whether the provider's count against our estimate of `request` is kept, and why not."""
    if provider is None:
        return None, "the response carried no prompt token count"
    if request.estimate <= 0:
        return False, "our estimate was zero"
    ratio = provider / request.estimate
    low, high = C.PLAUSIBLE_RATIO
    if not low <= ratio <= high:
        note = (
            f"ratio {ratio:.3f} (provider {provider} / estimate {request.estimate}) is outside "
            f"the plausible range {low}–{high}"
        )
        log.warning("memory %r: %s; not kept", memory_id, note)
        return False, note
    return True, None


def answer_ask(
    services: Services,
    mirror: History,
    memory_id: str,
    writer: NoteWriter,
    at: float | datetime | None,
) -> bool:
    """Have `writer` answer the pending note ask, as a model's note would (see
    `Memory.answer_ask`); whether a note was taken."""
    now = services.now(at)
    with services.store.read(memory_id) as tx:
        ask = pending_ask(tx)
    if ask is None:
        return False
    with collecting() as used:
        deadline = time.monotonic() + C.LANE_JUDGE_DEADLINE
        note = run_sync(ask_writer(writer, ask.text, ask.messages, ask.context, deadline))
    arguments = within_limits(note, services.limits, writer.name)  # before anything is written
    with mirror.lock, writing(services.store, mirror, memory_id) as tx:
        tx.insert_usage(used, now)
        if awaiting_note(tx) != ask.awaiting:
            return False  # another note came meanwhile: its facts are those episodes'
        source = f"note-writer:{writer.name}"
        write_note(tx, memory_id, note, arguments, None, now, source, ask.awaiting)
    services.lane.queued()
    return True
