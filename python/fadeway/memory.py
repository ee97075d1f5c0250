"""A memory: one conversation, and the calls on it (decorate, report, export), with their async
twins. A facade: decorate and report are `decorate.call` and `decorate.report`, parsing is
`wire`'s, persistence the store's."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from . import _constants as C
from . import tokens, wire
from ._aio import run_sync
from ._services import Services
from .decorate.call import Prepared, commit, decorate, discard, prepare
from .decorate.ingest import sync, writing
from .decorate.report import answer_ask, report
from .episodes.cut import commit_cut, prepare_cut
from .episodes.units import units
from .episodes.views import episode_views
from .export.document import export_memory
from .graph.held import held_facts
from .index.search import search_memory
from .notes.writers import NoteWriter
from .records import (
    EpisodeView,
    HeldFact,
    JobKind,
    JobRecord,
    MemoryExport,
    MessageRecord,
    ReportResult,
    SearchHit,
    Unit,
    check_memory_id,
)
from .usage import UsageSummary, collecting, summarise_usage
from .wire import streams

__all__ = ["Memory"]

When = float | datetime | None


class Memory:
    """One conversation, by id. Get it from `engine.memory(memory_id)`; it is a light handle."""

    def __init__(self, services: Services, memory_id: str) -> None:
        self.memory_id = check_memory_id(memory_id)
        self._services = services
        self._mirror = services.mirrors.get(memory_id)

    def __repr__(self) -> str:
        return f"Memory({self.memory_id!r})"

    # -- the three calls -------------------------------------------------------------------

    def decorate(self, request: dict[str, Any], *, at: When = None) -> dict[str, Any]:
        """Store what is new in `request` and return the request to send to the provider.

        `request` is a Chat Completions or Responses request with the whole conversation so far
        or only what is new since the last call. Every field the caller set is kept unchanged;
        the history becomes the memory's view (with the facts block, and the note ask while
        history is leaving). `at` (Unix seconds) overrides the engine's clock, for replaying
        stored conversations.
        """
        return decorate(self._services, self._mirror, self.memory_id, request, at)

    def prepare(self, request: dict[str, Any], *, at: When = None) -> Prepared:
        """Decorate `request` without storing anything yet: `prepared.request` is what to send
        to the provider; `commit(prepared)` once it accepted it (then `report` the reply
        against what `commit` returns), `discard(prepared)` if it refused it. What the
        provider refuses so leaves no trace of the request in the memory.

        `commit` stores exactly what was sent when nothing else changed the memory meanwhile
        (another caller, the lane); otherwise it decorates the request again, with the same
        recall, and returns that request (its blocks may differ from what was sent).
        """
        return prepare(self._services, self._mirror, self.memory_id, request, at)

    def commit(self, prepared: Prepared) -> dict[str, Any]:
        """Store a request `prepare` decorated; returns the request as stored, the one to
        `report` the reply against."""
        self._check_own(prepared)
        return commit(self._services, self._mirror, prepared)

    def discard(self, prepared: Prepared) -> None:
        """Drop a request `prepare` decorated (its provider refused it). Nothing of it is
        stored but the cost of the model calls its recall made, in `usage()`."""
        self._check_own(prepared)
        discard(self._services, prepared)

    def _check_own(self, prepared: Prepared) -> None:
        if prepared.memory_id != self.memory_id:
            raise ValueError(
                f"this request was prepared by memory {prepared.memory_id!r}, "
                f"not {self.memory_id!r}"
            )

    def report(self, request: dict[str, Any], response: Any, *, at: When = None) -> ReportResult:
        """Store the provider's reply to a decorated `request`; `response` is an SDK object or a
        dict in the request's wire format, or what a stream yielded (its chunks or events, as a
        list or any iterable). Returns the tool calls left for the caller to run.
        """
        return report(self._services, self._mirror, self.memory_id, request, response, at)

    def export(self) -> MemoryExport:
        """The whole memory as one document (msgspec-encodable; see `fadeway.dumps`)."""
        with self._services.store.read(self.memory_id) as tx:
            return export_memory(tx, self.memory_id)

    def answer_ask(self, writer: NoteWriter, *, at: When = None) -> bool:
        """Have `writer` answer the pending note ask, as a model's note would.

        For batch replay of recorded conversations (whose replies cannot answer an ask), and for
        a model that never answers. (An engine opened with `note_writer=` has its writer answer
        every ask in the lane, without this call.)
        Returns whether a note was taken (False when nothing is awaiting one).
        """
        return answer_ask(self._services, self._mirror, self.memory_id, writer, at)

    # -- sizes and costs -------------------------------------------------------------------

    def usage(self) -> list[UsageSummary]:
        """What the model calls made for this memory cost (judge, note writer and an endpoint
        embedder), summed by what they were for and which model: calls, tokens in and out,
        seconds."""
        with self._services.store.read(self.memory_id) as tx:
            rows = tx.usage()
        return summarise_usage(rows)

    def correction(self, model: str | None) -> float:
        """The provider / estimate ratio of the latest kept report for `model` (1.0 before any)."""
        with self._services.store.read(self.memory_id) as tx:
            ratio = tx.last_kept_ratio(model)
        return 1.0 if ratio is None else ratio

    def measure(self, request: dict[str, Any]) -> int:
        """Our corrected token estimate of a whole request, as sent (no message is stored)."""
        parsed = wire.parse_request(request)
        return round(tokens.measure_parsed(parsed) * self.correction(parsed.model))

    # -- inspection --------------------------------------------------------------------------

    def messages(self) -> list[MessageRecord]:
        """Every stored message, in order."""
        with self._services.store.read(self.memory_id) as tx:
            return tx.messages()

    def units(self) -> list[Unit]:
        """The stored history cut into units (the pieces episodes are cut from)."""
        return units(self.messages())

    def episodes(self) -> list[EpisodeView]:
        """The memory's episodes, in order, with their units, state and traces."""
        with self._services.store.read(self.memory_id) as tx:
            return episode_views(tx)

    def facts(self) -> list[HeldFact]:
        """The facts the memory's knowledge graph holds now, oldest first: each under its
        entities' canonical names, with when it was written and last restated. Retired facts
        and restatements merged into an older fact are left out; the graph takes a note's facts
        in the lane (`engine.drain()` first for a note just taken)."""
        with self._services.store.read(self.memory_id) as tx:
            return held_facts(tx)

    def search(self, query: str, *, kind: str = "fact", k: int = 10) -> list[SearchHit]:
        """The `k` facts (kind "fact") or passages of conversation out of view (kind "passage":
        sealed or forgotten turns, and a note writer's leaving ones) that best match `query`,
        by words (BM25) and by meaning (the engine's embedder), fused by reciprocal rank. Only
        this memory is searched. Facts and passages are indexed by the
        lane: `engine.drain()` first for what was just written. An endpoint embedder's call
        for the query is recorded in the memory's `usage()`."""
        s = self._services
        index = s.indexes.get(self.memory_id)
        with collecting() as used:
            hits = search_memory(s.store, index, s.embedder, query, kind=kind, k=k)
        if used:
            with s.store.write(self.memory_id) as tx:
                if tx.memory() is not None:  # a memory never written has no usage to hold it
                    tx.insert_usage(used, s.now())
        return hits

    def parked_jobs(self) -> list[JobRecord]:
        """The lane jobs that ran out of attempts and are parked (state "failed"), with their
        last error and attempts: kept, and tried again by a later lane run or `retry_jobs`."""
        with self._services.store.read(self.memory_id) as tx:
            return tx.jobs("failed")

    # -- maintenance -----------------------------------------------------------------------

    def retry_jobs(self) -> int:
        """Queue every parked lane job of this memory again now, each in its place with its
        attempts counted afresh; returns how many. The engine's lane (or any process's
        background worker on this store) then runs them."""
        s = self._services
        with s.store.write(self.memory_id) as tx:
            revived = tx.revive_jobs()
        if revived:
            s.lane.queued()
        return revived

    def cut(self, *, at: When = None) -> int:
        """Cut all closed, uncut history into episodes now; returns how many were made.

        The turn in progress is never cut. (After replies, cuts also run in the background lane
        once enough uncut history has built up.)
        """
        s, mirror = self._services, self._mirror
        now = s.now(at)
        with mirror.lock, s.store.read(self.memory_id) as tx:
            sync(mirror, tx)
        for _ in range(C.CUT_RETRIES):
            plan = prepare_cut(s.store, s.judge, s.cut_settings, self.memory_id, mirror.turn_start)
            with collecting() as used:
                prepared = run_sync(plan)
            with mirror.lock, writing(s.store, mirror, self.memory_id) as tx:
                if used:  # spent whether or not this plan still fits the history
                    tx.insert_usage(used, now)
                if commit_cut(tx, prepared, now):
                    return len(prepared[1].episodes) if prepared else 0
        raise RuntimeError("the history kept changing while it was being cut")

    def reindex(self) -> None:
        """Drop this memory's saved search indexes and queue the embedding of its facts and
        passages by the engine's embedder (after changing embedders, which an index saved by
        another refuses with `EmbedderMismatchError`)."""
        s = self._services
        s.indexes.get(self.memory_id).drop()
        with s.store.write(self.memory_id) as tx:
            if tx.memory() is None:
                return
            tx.enqueue(JobKind.EMBED, b"{}", s.now())
        s.lane.queued()

    # -- async twins -----------------------------------------------------------------------

    async def adecorate(self, request: dict[str, Any], *, at: When = None) -> dict[str, Any]:
        """`decorate`, off the event loop."""
        return await asyncio.to_thread(self.decorate, request, at=at)

    async def aprepare(self, request: dict[str, Any], *, at: When = None) -> Prepared:
        """`prepare`, off the event loop."""
        return await asyncio.to_thread(self.prepare, request, at=at)

    async def acommit(self, prepared: Prepared) -> dict[str, Any]:
        """`commit`, off the event loop."""
        return await asyncio.to_thread(self.commit, prepared)

    async def adiscard(self, prepared: Prepared) -> None:
        """`discard`, off the event loop."""
        await asyncio.to_thread(self.discard, prepared)

    async def areport(
        self, request: dict[str, Any], response: Any, *, at: When = None
    ) -> ReportResult:
        """`report`, off the event loop; an async stream (an SDK `AsyncStream`) is read here."""
        if streams.is_async_stream(response):
            response = [event async for event in response]
        return await asyncio.to_thread(self.report, request, response, at=at)

    async def aexport(self) -> MemoryExport:
        """`export`, off the event loop."""
        return await asyncio.to_thread(self.export)

    async def afacts(self) -> list[HeldFact]:
        """`facts`, off the event loop."""
        return await asyncio.to_thread(self.facts)
