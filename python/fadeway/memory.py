"""A memory: one conversation, and the three calls on it (decorate, report, export).

Orchestration only: parsing lives in `formats`, alignment and turns in `history`, sizes in
`tokens`, a decorate's forgetting and view in `assembly`, persistence in `store`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from . import _constants as C
from . import tokens
from . import wire as formats
from .decorate.assemble import Assembly, Key, PlanCut, Planned, note_arguments
from .decorate.view import caller_tools, last_user_messages, strip_own_additions
from .episodes.cut import commit_cut, plan_read_cut, prepare_cut, uncut_range
from .errors import (
    EmptyRequestError,
    FormatMismatchError,
    InvalidMessageError,
    InvalidRequestError,
    UnmatchedToolOutputError,
)
from .export import export_memory
from .index.search import search_memory
from .lane.worker import run_sync
from .mirror.history import (
    History,
    PendingCalls,
    align,
    digests_of_sent,
    next_turns,
    note_call_ids,
    opens_unit,
    units,
)
from .notes import tool as notes
from .notes.taking import awaiting_note, pending_ask, write_note
from .notes.writers import NoteWriter
from .recall.turns import Pending, place_recall, queue_after_reply, recall_for, store_recall
from .records import (
    EpisodeView,
    MemoryExport,
    MemoryRecord,
    MessageRecord,
    ReportResult,
    RequestRecord,
    SearchHit,
    TraceRecord,
    Unit,
)
from .store import Transaction
from .usage import UsageRecord, UsageSummary, collecting, summarise_usage
from .wire import Entry, Format, ParsedRequest, Side, streams
from .wire.canonical import digest_of, encode_json, plain

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["Memory"]

log = logging.getLogger("fadeway")


def _restore_instructions(parsed: ParsedRequest, stored: bytes) -> None:
    """A request that carries no instructions keeps the latest ones the memory was given."""
    saved = plain(stored)
    parsed.instructions = saved["messages"]
    if saved["instructions"] is not None:
        parsed.request["instructions"] = saved["instructions"]


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


class Memory:
    """One conversation, by id. Get it from `engine.memory(memory_id)`; it is a light handle."""

    def __init__(self, engine: Engine, memory_id: str, history: History) -> None:
        self._engine = engine
        self.memory_id = memory_id
        self._history = history
        self._assembly = Assembly(engine, memory_id, history)

    def __repr__(self) -> str:
        return f"Memory({self.memory_id!r})"

    # -- decorate --------------------------------------------------------------------------

    def decorate(self, request: dict[str, Any], *, at: float | None = None) -> dict[str, Any]:
        """Store what is new in `request` and return the request to send to the provider.

        `request` is a Chat Completions or Responses request with the whole conversation so far
        or only what is new since the last call. Every field the caller set is kept unchanged;
        the history becomes the memory's view (with the facts block, and the note ask while
        history is leaving). `at` (Unix seconds) overrides the engine's clock, for replaying
        stored conversations.
        """
        parsed = formats.parse_request(request)
        parsed.request = caller_tools(parsed.format, parsed.request)
        if not parsed.history and not parsed.instructions:
            # Nothing new is fine for a memory with history (a caller that sends only what is
            # new, asked to call the model again): the request is its view.
            with self._engine.store.read(self.memory_id) as tx:
                if tx.message_count() == 0:
                    key = "messages" if parsed.format is Format.CHAT_COMPLETIONS else "input"
                    raise EmptyRequestError(
                        f"the request's {key} list is empty and memory {self.memory_id!r} holds "
                        "no history yet: there is nothing to send"
                    )
        now = self._engine._now(at)
        encoding = tokens.encoding_for_model(parsed.model)
        fmt = parsed.format
        with self._history.lock, collecting() as used:
            pending = self._recall(parsed)
            return self._decorate(parsed, fmt, encoding, now, pending, used)

    def _recall(self, parsed: ParsedRequest) -> list[Pending]:
        """Recall for each of the request's new user messages, before they join the history
        (and before the write transaction: the embedder and an inline walk may take a moment)."""
        users = last_user_messages(parsed.history, self._history.answers_note)
        if not users:
            return []
        with self._engine.store.read(self.memory_id) as tx:
            self._sync(tx)
        return recall_for(
            self._engine,
            self.memory_id,
            self._history,
            [(digest_of(m, f"message {i}"), m) for i, m in users],
        )

    def _decorate(
        self,
        parsed: ParsedRequest,
        fmt: Format,
        encoding: str,
        now: float,
        pending: list[Pending],
        used: list[UsageRecord],
    ) -> dict[str, Any]:
        planned: Planned | None = None
        for attempt in range(1, C.CUT_RETRIES + 1):
            mark = self._history.mark()
            try:
                # The last attempt cuts inline if the history changed under every plan.
                return self._decorate_once(
                    replace(parsed, request=dict(parsed.request)),
                    fmt,
                    encoding,
                    now,
                    pending,
                    used,
                    planned,
                    inline=attempt == C.CUT_RETRIES,
                )
            except PlanCut as need:
                self._history.roll_back(mark)
                planned = Planned(
                    need.read,
                    run_sync(
                        plan_read_cut(
                            self._engine,
                            need.read,
                            deadline=time.monotonic() + C.INLINE_CUT_DEADLINE,
                        )
                    ),
                )
        raise AssertionError("unreachable: the last attempt cuts inline")

    def _decorate_once(
        self,
        parsed: ParsedRequest,
        fmt: Format,
        encoding: str,
        now: float,
        pending: list[Pending],
        used: list[UsageRecord],
        planned: Planned | None,
        inline: bool,
    ) -> dict[str, Any]:
        with self._writing() as tx:
            memory = self._open(tx, fmt, now)
            self._sync(tx)
            mirror = self._history
            parsed.instructions = strip_own_additions(parsed.instructions, mirror.answers_note)
            parsed.history = strip_own_additions(parsed.history, mirror.answers_note)
            has_instructions = bool(parsed.instructions) or (
                parsed.request.get("instructions") is not None
            )
            instructions = encode_json(
                {
                    "instructions": parsed.request.get("instructions"),
                    "messages": parsed.instructions,
                }
            )
            episodes = mirror.episodes.sync(tx)
            last_view = self._assembly.shown()
            sent_digests = digests_of_sent(parsed.history, mirror, last_view)
            start = align(parsed.history, sent_digests, mirror, memory.decorated_through, last_view)
            new = self._entries(fmt, parsed.history, start, sent_digests)
            before = len(mirror)
            self._append(tx, new, encoding, now, source="request")
            placed = place_recall(mirror, pending, before)
            took = self._take_notes(tx, fmt, before, now, source="model")
            if has_instructions and memory.instructions != instructions:
                tx.set_instructions(instructions)
            elif not has_instructions and memory.instructions is not None:
                _restore_instructions(parsed, memory.instructions)
            tx.set_decorated_through(len(mirror))
            out = self._assembly.forget_and_assemble(
                tx,
                parsed,
                memory,
                episodes,
                encoding,
                now,
                before,
                placed,
                planned=planned,
                inline=inline,
            )
            store_recall(tx, mirror, out.recalls, now)
            self._record_request(tx, parsed, encoding, now, used, out.key)
        if took or out.queued:
            self._engine._jobs_queued()
        return out.request

    def _record_request(
        self,
        tx: Transaction,
        parsed: ParsedRequest,
        encoding: str,
        now: float,
        used: list[UsageRecord],
        key: Key,
    ) -> None:
        """Record a decorated request (what `report` finds it by), and the model calls made
        for it (recall's, and a cut's)."""
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
                history_through=len(self._history),
            )
        )

    # -- notes -----------------------------------------------------------------------------

    def _take_notes(
        self, tx: Transaction, fmt: Format, since: int, now: float, source: str
    ) -> bool:
        """Take the note calls in the messages stored from `since` on."""
        mirror = self._history
        seqs = [seq for seq in mirror.note_calls if seq >= since]
        if not seqs:
            return False
        took = False
        answered: dict[int, list[int]] = {}  # by message: the episodes its notes answer
        # In the order made. Each is new, as stored now: an id may repeat (some providers number
        # every turn's calls from 0 again), so an earlier note of the same id is another note.
        for (seq, call_id), arguments in note_arguments(mirror, seqs).items():
            note = notes.parse_note_arguments(arguments)
            if note is None:
                continue  # logged by the parser; the episodes stay leaving and the ask stands
            # Note calls of one reply answer the same ask: their facts are those episodes'. A
            # reply is the run of assistant items its call sits in (Responses gives each call
            # an item of its own).
            start = seq
            while start > 0 and not opens_unit(mirror.sides[start], mirror.sides[start - 1]):
                start -= 1
            answered[start] = self._write_note(
                tx, note, arguments, call_id, now, source, answered.get(start)
            )
            took = True
        return took

    def _write_note(
        self,
        tx: Transaction,
        note: notes.Note,
        arguments: str,
        call_id: str | None,
        now: float,
        source: str,
        awaiting: list[int] | None = None,
    ) -> list[int]:
        """Write a note's facts against every episode awaiting them (or `awaiting`), and
        acknowledge those; returns them."""
        if awaiting is None:
            awaiting = awaiting_note(tx)
        write_note(tx, self.memory_id, note, arguments, call_id, now, source, awaiting)
        return awaiting

    def _open(self, tx: Transaction, fmt: Format, now: float) -> MemoryRecord:
        memory = tx.memory()
        if memory is None:
            return tx.create_memory(fmt.value, now)
        self._check_format(memory.format, fmt)
        return memory

    def _check_format(self, stored: str, fmt: Format) -> None:
        if stored != fmt.value:
            raise FormatMismatchError(
                f"memory {self.memory_id!r} holds a {stored} conversation; "
                f"this request is {fmt.value}"
            )

    @contextmanager
    def _writing(self) -> Iterator[Transaction]:
        """A write transaction on this memory, under the mirror's lock (the caller holds it).
        If it fails after writing, the mirrors are reset: they may hold what it rolled back."""
        tx = None
        try:
            with self._engine.store.write(self.memory_id) as tx:
                yield tx
        except PlanCut:
            raise  # the caller rolls the mirrors back to where they stood
        except BaseException:
            if tx is not None and tx.wrote():
                self._history.reset()
            raise

    def _sync(self, tx: Transaction) -> None:
        self._history.sync(tx.message_count(), tx.messages)

    def _entries(
        self,
        fmt: Format,
        sent: Sequence[Any],
        start: int,
        digests: Sequence[bytes] | None = None,
        label: str = "message",
    ) -> list[Entry]:
        """Validate the new messages `sent[start:]`; nothing is written if one is bad. A request
        may end before the outputs of its last calls (a replay sends them one by one); what
        comes after them is checked when it comes."""
        history = self._history
        made: dict[str, bool] = {}  # calls made by the new messages: whether each is a note's
        pending = history.pending.copy()  # the turn in progress's calls, unanswered

        def known_call(call_id: str) -> bool:
            return call_id in made or call_id in history.makers

        def answers_note(call_id: str) -> bool:
            return made[call_id] if call_id in made else history.answers_note(call_id)

        out = []
        step: set[str] = set()  # ids the reply in progress (a run of assistant items) made
        for i in range(start, len(sent)):
            where = f"{label} {i}"
            e = formats.entry(
                fmt, sent[i], where, known_call, digest=digests[i] if digests else None
            )
            if e.side is not Side.ASSISTANT:
                step = set()
            elif e.calls:
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
                        f"{where} makes call {again!r}, an id its reply already gave another "
                        "call: the outputs of the two could not be told apart (ids may repeat "
                        "across replies, not within one)"
                    )
                step.update(e.calls)
            if e.answers is not None and answers_note(e.answers):
                # A loop that skipped `report` answered every call of the reply it sends back,
                # the note's too: that output is fadeway's to give, not stored.
                continue
            own = note_call_ids(e.calls, e.body)
            _check_pairing(fmt, e, where, pending, own)
            made.update((c, c in own) for c in e.calls)
            out.append(e)
        return out

    def _append(
        self, tx: Transaction, new: list[Entry], encoding: str, at: float, source: str
    ) -> None:
        if not new:
            return
        sizes = tokens.entry_tokens(encoding, new)
        turns = next_turns(self._history.turn, (e.side for e in new))
        first = len(self._history)
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
        self._history.extend(rows)

    # -- report ----------------------------------------------------------------------------

    def report(
        self, request: dict[str, Any], response: Any, *, at: float | None = None
    ) -> ReportResult:
        """Store the provider's reply to a decorated `request`; `response` is an SDK object or a
        dict in the request's wire format, or what a stream yielded (its chunks or events, as a
        list or any iterable). Returns the tool calls left for the caller to run.
        """
        parsed = formats.parse_request(request)
        reply = formats.parse_response(parsed.format, response)
        now = self._engine._now(at)
        with self._history.lock, self._writing() as tx:
            memory = tx.memory()
            if memory is None:
                raise InvalidRequestError(
                    f"memory {self.memory_id!r} has no decorated request to report on; call "
                    "decorate first"
                )
            self._check_format(memory.format, parsed.format)
            self._sync(tx)
            sent = strip_own_additions(parsed.history, self._history.answers_note)
            last_digest = digest_of(sent[-1], "the request's last message") if sent else None
            result = ReportResult(
                tool_calls=notes.without_note_calls(parsed.format, reply.tool_calls)
            )
            match = tx.find_request(len(sent), last_digest)
            latest = tx.latest_request()
            if match is not None and match.replied:
                log.info(
                    "memory %r: request %d was already reported; reply not stored again",
                    self.memory_id,
                    match.n,
                )
                return result
            if match is not None and latest is not None and match.n != latest.n:
                log.warning(
                    "memory %r: report for request %d arrived after request %d was "
                    "decorated; its reply is not stored and its token count not kept",
                    self.memory_id,
                    match.n,
                    latest.n,
                )
                tx.record_report(
                    match.n,
                    reply.prompt_tokens,
                    False,
                    f"out of order: request {latest.n} was decorated since",
                    False,
                )
                return result
            new = self._entries(parsed.format, reply.items, 0, label="reply item")
            encoding = match.encoding if match else tokens.encoding_for_model(parsed.model)
            before = len(self._history)
            self._append(tx, new, encoding, now, source="reply")
            took = self._take_notes(tx, parsed.format, before, now, source="model")
            calls = notes.find_note_calls(parsed.format, reply.items)
            remaining = notes.without_note_calls(parsed.format, reply.tool_calls)
            result = ReportResult(
                tool_calls=remaining,
                note_taken=took,
                call_again=bool(calls) and not remaining and not reply.text,
            )
            if match is None:
                log.info(
                    "memory %r: the reported request is not one decorate returned; its "
                    "token count is not kept",
                    self.memory_id,
                )
            else:
                kept, note = self._judge_ratio(match, reply.prompt_tokens)
                tx.record_report(match.n, reply.prompt_tokens, kept, note, True)
            queued = self._queue_cut(tx, now) or took
            if not result.tool_calls and not result.call_again:
                queued = queue_after_reply(tx, self._history, now) or queued
        if queued:
            self._engine._jobs_queued()
        return result

    def _queue_cut(self, tx: Transaction, now: float) -> bool:
        """After a reply: queue a cut once enough uncut closed history has built up."""
        closed_end = self._history.turn_start
        start, end = uncut_range(tx, closed_end)
        uncut = sum(self._history.tokens[start:end])
        if uncut < self._engine.cut_settings.after_tokens or tx.pending_job("cut") is not None:
            return False
        tx.enqueue("cut", encode_json({"closed_end": closed_end}), now)
        return True

    def _judge_ratio(
        self, request: RequestRecord, provider: int | None
    ) -> tuple[bool | None, str | None]:
        if provider is None:
            return None, "the response carried no prompt token count"
        if request.estimate <= 0:
            return False, "our estimate was zero"
        ratio = provider / request.estimate
        low, high = C.PLAUSIBLE_RATIO
        if not low <= ratio <= high:
            note = (
                f"ratio {ratio:.3f} (provider {provider} / estimate {request.estimate}) is "
                f"outside the plausible range {low}–{high}"
            )
            log.warning("memory %r: %s; not kept", self.memory_id, note)
            return False, note
        return True, None

    def answer_ask(self, writer: NoteWriter, *, at: float | None = None) -> bool:
        """Have `writer` answer the pending note ask, as a model's note would.

        For batch replay of recorded conversations (whose replies cannot answer an ask) and for
        callers who configure a note writer; in live use only the decorated model answers.
        Returns whether a note was taken (False when nothing is awaiting one).
        """
        now = self._engine._now(at)
        with self._engine.store.read(self.memory_id) as tx:
            ask = pending_ask(tx)
        if ask is None:
            return False
        with collecting() as used:
            note = run_sync(
                writer.write(
                    ask.text, ask.messages, deadline=time.monotonic() + C.LANE_JUDGE_DEADLINE
                )
            )
        with self._history.lock, self._writing() as tx:
            tx.insert_usage(used, now)
            if awaiting_note(tx) != ask.awaiting:
                return False  # another note came meanwhile: its facts are those episodes'
            write_note(
                tx,
                self.memory_id,
                note,
                encode_json(note).decode(),
                None,
                now,
                f"note-writer:{writer.name}",
                ask.awaiting,
            )
        self._engine._jobs_queued()
        return True

    def usage(self) -> list[UsageSummary]:
        """What the model calls made for this memory cost (judge and note writer), summed by
        what they were for and which model: calls, tokens in and out, seconds."""
        with self._engine.store.read(self.memory_id) as tx:
            rows = tx.usage()
        return summarise_usage(rows)

    # -- sizes -----------------------------------------------------------------------------

    def correction(self, model: str | None) -> float:
        """The provider / estimate ratio of the latest kept report for `model` (1.0 before any)."""
        with self._engine.store.read(self.memory_id) as tx:
            ratio = tx.last_kept_ratio(model)
        return 1.0 if ratio is None else ratio

    def measure(self, request: dict[str, Any]) -> int:
        """Our corrected token estimate of a whole request, as sent (no message is stored)."""
        parsed = formats.parse_request(request)
        return round(tokens.measure_parsed(parsed) * self.correction(parsed.model))

    # -- inspection and export -------------------------------------------------------------

    def messages(self) -> list[MessageRecord]:
        """Every stored message, in order."""
        with self._engine.store.read(self.memory_id) as tx:
            return tx.messages()

    def units(self) -> list[Unit]:
        """The stored history cut into units (the pieces episodes are cut from)."""
        return units(self.messages())

    def episodes(self) -> list[EpisodeView]:
        """The memory's episodes, in order, with their units, state and traces."""
        with self._engine.store.read(self.memory_id) as tx:
            episodes = tx.episodes()
            traces = tx.traces()
            messages = tx.messages(0, episodes[-1].last_seq + 1) if episodes else []
        by_episode: dict[int, list[TraceRecord]] = {}
        for t in traces:
            by_episode.setdefault(t.episode, []).append(t)
        return [
            EpisodeView(
                n=e.n,
                state=e.state,
                first_seq=e.first_seq,
                last_seq=e.last_seq,
                first_turn=e.first_turn,
                last_turn=e.last_turn,
                start_at=e.start_at,
                end_at=e.end_at,
                tokens=e.tokens,
                units=units(messages[e.first_seq : e.last_seq + 1]),
                traces=by_episode.get(e.n, []),
            )
            for e in episodes
        ]

    def cut(self, *, at: float | None = None) -> int:
        """Cut all closed, uncut history into episodes now; returns how many were made.

        The turn in progress is never cut. (After replies, cuts also run in the background lane
        once enough uncut history has built up.)
        """
        now = self._engine._now(at)
        with self._history.lock, self._engine.store.read(self.memory_id) as tx:
            self._sync(tx)
        for _ in range(C.CUT_RETRIES):
            prepared = run_sync(prepare_cut(self._engine, self.memory_id, self._history.turn_start))
            with self._history.lock, self._writing() as tx:
                if commit_cut(tx, prepared, now):
                    return len(prepared[1].episodes) if prepared else 0
        raise RuntimeError("the history kept changing while it was being cut")

    def export(self) -> MemoryExport:
        """The whole memory as one document (msgspec-encodable; see `fadeway.dumps`)."""
        with self._engine.store.read(self.memory_id) as tx:
            return export_memory(tx, self.memory_id)

    def search(self, query: str, *, kind: str = "fact", k: int = 10) -> list[SearchHit]:
        """The `k` facts (kind "fact") or passages of sealed conversation (kind "passage") that
        best match `query`, by words (BM25) and by meaning (the engine's embedder), fused by
        reciprocal rank. Only this memory is searched. Facts and passages are indexed by the
        lane: `engine.drain()` first for what was just written."""
        return search_memory(self._engine, self.memory_id, query, kind=kind, k=k)

    def reindex(self) -> None:
        """Drop this memory's saved search indexes and queue the embedding of its facts and
        passages by the engine's embedder (after changing embedders, which an index saved by
        another refuses with `EmbedderMismatchError`)."""
        self._engine.index(self.memory_id).drop()
        with self._engine.store.write(self.memory_id) as tx:
            if tx.memory() is None:
                return
            tx.enqueue("embed", b"{}", self._engine._now(None))
        self._engine._jobs_queued()

    # -- async twins -----------------------------------------------------------------------

    async def adecorate(
        self, request: dict[str, Any], *, at: float | None = None
    ) -> dict[str, Any]:
        """`decorate`, off the event loop."""
        return await asyncio.to_thread(self.decorate, request, at=at)

    async def areport(
        self, request: dict[str, Any], response: Any, *, at: float | None = None
    ) -> ReportResult:
        """`report`, off the event loop; an async stream (an SDK `AsyncStream`) is read here."""
        if streams.is_async_stream(response):
            response = [event async for event in response]
        return await asyncio.to_thread(self.report, request, response, at=at)

    async def aexport(self) -> MemoryExport:
        """`export`, off the event loop."""
        return await asyncio.to_thread(self.export)
