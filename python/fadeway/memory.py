"""A memory: one conversation, and the three calls on it (decorate, report, export).

Orchestration only: parsing lives in `formats`, alignment and turns in `history`, sizes in
`tokens`, persistence in `store`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from . import _constants as C
from . import formats, tokens
from .errors import FormatMismatchError, InvalidRequestError
from .formats import Entry, Format, ParsedRequest
from .formats.canonical import digest_of, encode_json, plain
from .episodes import commit_cut, prepare_cut, uncut_range
from .history import History, align, next_turns, units
from .lane import run_sync
from .model import (
    EpisodeView,
    ExportedMessage,
    ExportedRequest,
    MemoryExport,
    MemoryRecord,
    MessageRecord,
    ReportResult,
    RequestRecord,
    TraceRecord,
    Unit,
)
from .store import Transaction

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["Memory"]

log = logging.getLogger("fadeway")
_decode_list = msgspec.json.decode


def _restore_instructions(parsed: ParsedRequest, stored: bytes) -> None:
    """A request that carries no instructions keeps the latest ones the memory was given."""
    saved = plain(stored)
    parsed.instructions = saved["messages"]
    if saved["instructions"] is not None:
        parsed.request["instructions"] = saved["instructions"]


class Memory:
    """One conversation, by id. Get it from `engine.memory(memory_id)`; it is a light handle."""

    def __init__(self, engine: Engine, memory_id: str, history: History) -> None:
        self._engine = engine
        self.memory_id = memory_id
        self._history = history

    def __repr__(self) -> str:
        return f"Memory({self.memory_id!r})"

    # -- decorate --------------------------------------------------------------------------

    def decorate(self, request: dict[str, Any], *, at: float | None = None) -> dict[str, Any]:
        """Store what is new in `request` and return the request to send to the provider.

        `request` is a Chat Completions or Responses request with the whole conversation so far
        or only what is new since the last call. Every field the caller set is kept unchanged;
        the history becomes the memory's view. `at` (Unix seconds) overrides the engine's clock,
        for replaying stored conversations.
        """
        parsed = formats.parse_request(request)
        now = self._engine._now(at)
        sent_digests = [digest_of(m, f"message {i}") for i, m in enumerate(parsed.history)]
        has_instructions = bool(parsed.instructions) or parsed.request.get("instructions") is not None
        instructions = encode_json({"instructions": parsed.request.get("instructions"),
                                    "messages": parsed.instructions})
        encoding = tokens.encoding_for_model(parsed.model)
        with self._history.lock, self._engine.store.write(self.memory_id) as tx:
            memory = self._open(tx, parsed.format, now)
            self._sync(tx)
            start = align(parsed.history, sent_digests, self._history, memory.decorated_through)
            new = self._entries(parsed.format, parsed.history, start, sent_digests)
            self._append(tx, new, encoding, now, source="request")
            if has_instructions and memory.instructions != instructions:
                tx.set_instructions(instructions)
            elif not has_instructions and memory.instructions is not None:
                _restore_instructions(parsed, memory.instructions)
            tx.set_decorated_through(len(self._history))
            view = self._view()
            decorated = formats.assemble(parsed, view)
            history_tokens = sum(self._history.tokens)
            latest = tx.latest_request()
            tx.insert_request(RequestRecord(
                n=(latest.n if latest else 0) + 1, at=now, model=parsed.model, encoding=encoding,
                estimate=tokens.request_estimate(parsed, history_tokens, encoding),
                view_len=len(view), view_last=self._history.digests[-1] if view else None,
                history_through=len(self._history)))
        return decorated

    def _open(self, tx: Transaction, fmt: Format, now: float) -> MemoryRecord:
        memory = tx.memory()
        if memory is None:
            return tx.create_memory(fmt.value, now)
        self._check_format(memory.format, fmt)
        return memory

    def _check_format(self, stored: str, fmt: Format) -> None:
        if stored != fmt.value:
            raise FormatMismatchError(f"memory {self.memory_id!r} holds a {stored} conversation; "
                                      f"this request is {fmt.value}")

    def _sync(self, tx: Transaction) -> None:
        self._history.sync(tx.message_count(), tx.messages)

    def _entries(self, fmt: Format, sent: Sequence[Any], start: int,
                 digests: Sequence[bytes] | None = None, label: str = "message") -> list[Entry]:
        """Validate the new messages `sent[start:]`; nothing is written if one is bad."""
        made: set[str] = set()
        known = self._history.calls

        def known_call(call_id: str) -> bool:
            return call_id in known or call_id in made

        out = []
        for i in range(start, len(sent)):
            e = formats.entry(fmt, sent[i], f"{label} {i}", known_call,
                              digest=digests[i] if digests else None)
            made.update(e.calls)
            out.append(e)
        return out

    def _append(self, tx: Transaction, new: list[Entry], encoding: str, at: float,
                source: str) -> None:
        if not new:
            return
        sizes = tokens.entry_tokens(encoding, new)
        turns = next_turns(self._history.turn, (e.side for e in new))
        first = len(self._history)
        rows = [
            MessageRecord(seq=first + i, turn=turns[i], at=at, role=e.role, kind=e.kind,
                          side=e.side.value, source=source, tokens=sizes[i], digest=e.digest,
                          calls=e.calls, answers=e.answers, body=e.body)
            for i, e in enumerate(new)
        ]
        tx.insert_messages(rows)
        self._history.extend(rows)

    def _view(self) -> list[Any]:
        """The history as the model sees it. Until forgetting runs, all of the stored history."""
        bodies = self._history.bodies
        if not bodies:
            return []
        return _decode_list(b"[" + b",".join(bodies) + b"]")

    # -- report ----------------------------------------------------------------------------

    def report(self, request: dict[str, Any], response: Any, *,
               at: float | None = None) -> ReportResult:
        """Store the provider's reply to a decorated `request`; `response` is an SDK object or a
        dict, in the request's wire format. Returns the tool calls left for the caller to run.
        """
        parsed = formats.parse_request(request)
        reply = formats.parse_response(parsed.format, response)
        now = self._engine._now(at)
        last = parsed.history[-1] if parsed.history else None
        last_digest = digest_of(last, "the request's last message") if last is not None else None
        with self._history.lock, self._engine.store.write(self.memory_id) as tx:
            memory = tx.memory()
            if memory is None:
                raise InvalidRequestError(
                    f"memory {self.memory_id!r} has no decorated request to report on; call "
                    "decorate first")
            self._check_format(memory.format, parsed.format)
            self._sync(tx)
            result = ReportResult(tool_calls=reply.tool_calls)
            match = tx.find_request(len(parsed.history), last_digest)
            latest = tx.latest_request()
            if match is not None and match.replied:
                log.info("memory %r: request %d was already reported; reply not stored again",
                         self.memory_id, match.n)
                return result
            if match is not None and latest is not None and match.n != latest.n:
                log.warning("memory %r: report for request %d arrived after request %d was "
                            "decorated; its reply is not stored and its token count not kept",
                            self.memory_id, match.n, latest.n)
                tx.record_report(match.n, reply.prompt_tokens, False,
                                 f"out of order: request {latest.n} was decorated since", False)
                return result
            new = self._entries(parsed.format, reply.items, 0, label="reply item")
            encoding = match.encoding if match else tokens.encoding_for_model(parsed.model)
            self._append(tx, new, encoding, now, source="reply")
            if match is None:
                log.info("memory %r: the reported request is not one decorate returned; its "
                         "token count is not kept", self.memory_id)
            else:
                kept, note = self._judge_ratio(match, reply.prompt_tokens)
                tx.record_report(match.n, reply.prompt_tokens, kept, note, True)
            queued = self._queue_cut(tx, now)
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

    def _judge_ratio(self, request: RequestRecord, provider: int | None) -> tuple[bool | None, str | None]:
        if provider is None:
            return None, "the response carried no prompt token count"
        if request.estimate <= 0:
            return False, "our estimate was zero"
        ratio = provider / request.estimate
        low, high = C.PLAUSIBLE_RATIO
        if not low <= ratio <= high:
            note = (f"ratio {ratio:.3f} (provider {provider} / estimate {request.estimate}) is "
                    f"outside the plausible range {low}–{high}")
            log.warning("memory %r: %s; not kept", self.memory_id, note)
            return False, note
        return True, None

    # -- sizes -----------------------------------------------------------------------------

    def correction(self, model: str | None) -> float:
        """The provider / estimate ratio of the latest kept report for `model` (1.0 before any)."""
        with self._engine.store.read(self.memory_id) as tx:
            ratio = tx.last_kept_ratio(model)
        return 1.0 if ratio is None else ratio

    def measure(self, request: dict[str, Any]) -> int:
        """Our corrected token estimate of a whole request, as sent (no message is stored)."""
        parsed = formats.parse_request(request)
        encoding = tokens.encoding_for_model(parsed.model)
        # Measuring stores nothing, so a call made in the stored history counts as known.
        entries = [formats.entry(parsed.format, m, f"message {i}", lambda _call: True)
                   for i, m in enumerate(parsed.history)]
        raw = tokens.request_estimate(parsed, sum(tokens.entry_tokens(encoding, entries)), encoding)
        return round(raw * self.correction(parsed.model))

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
        return [EpisodeView(
            n=e.n, state=e.state, first_seq=e.first_seq, last_seq=e.last_seq,
            first_turn=e.first_turn, last_turn=e.last_turn, start_at=e.start_at, end_at=e.end_at,
            tokens=e.tokens, units=units(messages[e.first_seq:e.last_seq + 1]),
            traces=by_episode.get(e.n, [])) for e in episodes]

    def cut(self, *, at: float | None = None) -> int:
        """Cut all closed, uncut history into episodes now; returns how many were made.

        The turn in progress is never cut. (After replies, cuts also run in the background lane
        once enough uncut history has built up.)
        """
        now = self._engine._now(at)
        with self._engine.store.read(self.memory_id) as tx:
            self._sync(tx)
        for _ in range(C.CUT_RETRIES):
            prepared = run_sync(prepare_cut(self._engine, self.memory_id,
                                            self._history.turn_start))
            with self._history.lock, self._engine.store.write(self.memory_id) as tx:
                if commit_cut(tx, prepared, now):
                    return len(prepared[1].episodes) if prepared else 0
        raise RuntimeError("the history kept changing while it was being cut")

    def export(self) -> MemoryExport:
        """The whole memory as one document (msgspec-encodable; see `fadeway.dumps`)."""
        with self._engine.store.read(self.memory_id) as tx:
            memory = tx.memory()
            if memory is None:
                raise KeyError(f"memory {self.memory_id!r} holds nothing to export")
            messages = tx.messages()
            requests = tx.requests()
            episodes = tx.episodes()
            traces = tx.traces()
        return MemoryExport(
            memory_id=self.memory_id,
            format=memory.format,
            created_at=memory.created_at,
            decorated_through=memory.decorated_through,
            instructions=msgspec.Raw(memory.instructions or b"null"),
            messages=[ExportedMessage(seq=m.seq, turn=m.turn, at=m.at, role=m.role, kind=m.kind,
                                      source=m.source, tokens=m.tokens,
                                      message=msgspec.Raw(m.body)) for m in messages],
            requests=[ExportedRequest(n=r.n, at=r.at, model=r.model, encoding=r.encoding,
                                      estimate=r.estimate, view_len=r.view_len,
                                      view_last=r.view_last,
                                      history_through=r.history_through,
                                      provider_tokens=r.provider_tokens, ratio_kept=r.ratio_kept,
                                      ratio_note=r.ratio_note, replied=r.replied)
                      for r in requests],
            episodes=episodes,
            traces=traces,
        )

    # -- async twins -----------------------------------------------------------------------

    async def adecorate(self, request: dict[str, Any], *, at: float | None = None) -> dict[str, Any]:
        """`decorate`, off the event loop."""
        return await asyncio.to_thread(self.decorate, request, at=at)

    async def areport(self, request: dict[str, Any], response: Any, *,
                      at: float | None = None) -> ReportResult:
        """`report`, off the event loop."""
        return await asyncio.to_thread(self.report, request, response, at=at)

    async def aexport(self) -> MemoryExport:
        """`export`, off the event loop."""
        return await asyncio.to_thread(self.export)
