"""`fadeway.open()` and the Engine: settings, the clock, the store, and memories by id."""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from . import _constants as C
from .embed import Embedder, embedder_from
from .episodes import traces as scoring  # noqa: F401
from .episodes.cut import CutSettings
from .errors import ImportConflictError, InvalidExportError, InvalidMemoryIdError
from .export import check_export, resealed
from .graph import update as graph  # noqa: F401
from .index import passages  # noqa: F401
from .index.paths import data_dir_for, index_dir
from .index.search import MemoryIndex
from .judge import Judge, judge_from
from .lane.worker import BackgroundWorker, drain, job_kinds
from .memory import Memory
from .mirror.history import History
from .notes import taking as note_taking  # noqa: F401
from .notes.writers import LLMNoteWriter, NoteWriter, note_writer_from
from .records import MemoryExport, MessageRecord, RequestRecord
from .store import Store, open_store
from .usage import UsageRecord

__all__ = ["Engine", "open"]

#: Longest memory id accepted, in characters.
MAX_MEMORY_ID_LENGTH = 1024


def _check_memory_id(memory_id: Any) -> str:
    if not isinstance(memory_id, str):
        raise InvalidMemoryIdError(f"a memory id must be a string, not {type(memory_id).__name__}")
    if not memory_id:
        raise InvalidMemoryIdError("a memory id must not be empty")
    if len(memory_id) > MAX_MEMORY_ID_LENGTH:
        raise InvalidMemoryIdError(
            f"a memory id must be at most {MAX_MEMORY_ID_LENGTH} characters, not {len(memory_id)}"
        )
    try:
        memory_id.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMemoryIdError(
            "a memory id must be valid Unicode (it holds a lone surrogate)"
        ) from None
    return memory_id


def _check_settings(ceiling: int, lane_lease_seconds: float, lane_retry_seconds: float) -> None:
    if not isinstance(ceiling, int) or ceiling <= 0:
        raise ValueError(f"ceiling must be a positive number of tokens, not {ceiling!r}")
    if not lane_lease_seconds > 0:
        raise ValueError(f"lane_lease_seconds must be positive, not {lane_lease_seconds!r}")
    if not lane_retry_seconds >= 0:
        raise ValueError(f"lane_retry_seconds must be zero or more, not {lane_retry_seconds!r}")


class Engine:
    """Many memories in one store, with one clock and one set of settings."""

    def __init__(
        self,
        store: Store,
        *,
        ceiling: int = C.DEFAULT_CEILING,
        clock: Callable[[], float] | None = None,
        judge: Judge | str | None = None,
        judge_model: str | None = None,
        cut_settings: CutSettings | None = None,
        background: bool = True,
        lane_threads: int = C.LANE_THREADS,
        lane_lease_seconds: float = C.LANE_LEASE_SECONDS,
        lane_retry_seconds: float = C.LANE_RETRY_SECONDS,
        embedder: Embedder | str | None = None,
        data_dir: Path | None = None,
        note_writer: NoteWriter | str | None = None,
    ) -> None:
        _check_settings(ceiling, lane_lease_seconds, lane_retry_seconds)
        self.store = store
        self.ceiling = ceiling
        self.clock: Callable[[], float] = clock or time.time
        self.judge: Judge = judge_from(judge, model=judge_model)
        self.embedder: Embedder = embedder_from(embedder)
        #: Who answers the note asks instead of the decorated model (None: the model).
        self.note_writer: NoteWriter | None = note_writer_from(note_writer, model=judge_model)
        #: Where each memory's search indexes are saved (None: kept in memory only).
        self.data_dir = data_dir
        self._indexes: OrderedDict[str, MemoryIndex] = OrderedDict()
        self.cut_settings = cut_settings or CutSettings()
        self.lane_lease_seconds = lane_lease_seconds
        self.lane_retry_seconds = lane_retry_seconds
        # Mirrors of recently used memories' histories. An evicted mirror is only a cache miss:
        # the next handle re-reads the history from the store, which stays the one truth.
        self._histories: OrderedDict[str, History] = OrderedDict()
        self._guard = threading.Lock()
        self._worker = BackgroundWorker(self, lane_threads) if background else None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the background worker (a job it was running stays pending) and close the store."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        for index in list(self._indexes.values()):
            index.save()
        self.embedder.close()
        self.judge.close()
        if isinstance(self.note_writer, LLMNoteWriter):
            self.note_writer.close()
        self.store.close()

    def drain(self) -> int:
        """Run every pending background job of every memory to completion.

        For deterministic tests and batch replay; returns how many jobs were applied.
        """
        return drain(self)

    async def adrain(self) -> int:
        """`drain`, off the event loop."""
        return await asyncio.to_thread(self.drain)

    def _jobs_queued(self) -> None:
        if self._worker is not None:
            self._worker.notify()

    def memory(self, memory_id: str) -> Memory:
        """The memory (conversation) with this id; it is created by its first decorate."""
        memory_id = _check_memory_id(memory_id)
        with self._guard:
            history = self._histories.get(memory_id)
            if history is None:
                history = self._histories[memory_id] = History()
            else:
                self._histories.move_to_end(memory_id)
            held = sum(h.body_bytes for h in self._histories.values())
            while len(self._histories) > 1 and (
                len(self._histories) > C.HISTORY_CACHE_MEMORIES or held > C.HISTORY_CACHE_BYTES
            ):
                held -= self._histories.popitem(last=False)[1].body_bytes
        return Memory(self, memory_id, history)

    def index(self, memory_id: str) -> MemoryIndex:
        """The search indexes of one memory (opened on first use, kept for recent memories)."""
        with self._guard:
            index = self._indexes.get(memory_id)
            if index is None:
                directory = index_dir(self.data_dir, memory_id) if self.data_dir else None
                index = self._indexes[memory_id] = MemoryIndex(memory_id, directory, self.embedder)
            else:
                self._indexes.move_to_end(memory_id)
            held = sum(i.nbytes for i in self._indexes.values())
            while len(self._indexes) > 1 and (
                len(self._indexes) > C.OPEN_INDEXES or held > C.OPEN_INDEX_BYTES
            ):
                closing = self._indexes.popitem(last=False)[1]
                held -= closing.nbytes
                closing.save()
        return index

    def memory_ids(self) -> list[str]:
        """The ids of every memory in the store."""
        return list(self.store.memory_ids())

    def _now(self, at: float | datetime | None) -> float:
        if at is None:
            value = self.clock()
        elif isinstance(at, datetime):
            if at.tzinfo is None:
                raise ValueError("at must be timezone-aware (or Unix seconds)")
            value = at.timestamp()
        else:
            value = at
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise ValueError(f"the time must be finite Unix seconds, not {value!r}")
        return float(value)

    # -- import ----------------------------------------------------------------------------

    def import_memory(self, doc: MemoryExport | dict[str, Any] | bytes | str) -> Memory:
        """Restore a memory from its export (the document, its dict, or its JSON).

        The memory must not hold anything yet; every message is validated again first, and
        nothing is written if one is bad.
        """
        export = _load_export(doc)
        unknown = sorted({j.kind for j in export.jobs} - job_kinds())
        if unknown:
            raise InvalidExportError(f"the export queues jobs of unknown kind {unknown}")
        entries = check_export(export)
        export = resealed(export)
        rows = [
            MessageRecord(
                seq=m.seq,
                turn=m.turn,
                at=m.at,
                role=e.role,
                kind=e.kind,
                side=e.side.value,
                source=m.source,
                tokens=m.tokens,
                digest=e.digest,
                calls=e.calls,
                answers=e.answers,
                body=e.body,
            )
            for m, e in zip(export.messages, entries, strict=True)
        ]
        memory = self.memory(export.memory_id)
        with memory._history.lock, self.store.write(export.memory_id) as tx:
            if tx.memory() is not None:
                raise ImportConflictError(
                    f"memory {export.memory_id!r} already exists; import "
                    "restores into an empty memory only"
                )
            tx.create_memory(export.format, export.created_at)
            instructions = bytes(export.instructions)
            tx.set_instructions(None if instructions == b"null" else instructions)
            tx.set_decorated_through(export.decorated_through)
            tx.insert_messages(rows)
            for r in export.requests:
                tx.insert_request(RequestRecord(**msgspec.structs.asdict(r)))
            tx.insert_episodes(export.episodes)
            facts_of: dict[int, list] = {}
            for f in export.facts:
                facts_of.setdefault(f.note, []).append(f)
            acks_of: dict[int, list[int]] = {}
            for episode, acked in export.acks:
                acks_of.setdefault(acked, []).append(episode)
            for note in export.notes:
                tx.insert_note(note, facts_of.get(note.n, []), acks_of.get(note.n, []))
            tx.append_traces(export.traces)
            if export.facts_order is not None:
                tx.set_facts_order(msgspec.json.encode(export.facts_order).decode())
            tx.set_facts_block(export.facts_block)
            tx.insert_graph(export.entities, export.aliases, export.edges, export.retirements)
            tx.insert_passages(export.passages)
            for recall in export.recalls:
                tx.insert_recall(recall)
            for table, texts in (
                ("distills", export.distills),
                ("recall_finals", export.recall_finals),
            ):
                for text in texts:
                    tx.insert_block_text(table, text)
            for walk in export.walks:
                tx.insert_walk(walk)
            for u in export.usage:
                tx.insert_usage(
                    [
                        UsageRecord(
                            kind=u.kind,
                            model=u.model,
                            tokens_in=u.tokens_in,
                            tokens_out=u.tokens_out,
                            seconds=0.0,
                        )
                    ],
                    u.at,
                )
            for job in export.jobs:  # the work the source had still to do
                tx.enqueue(job.kind, bytes(job.payload), job.created_at)
            if export.facts or export.passages:
                # Vectors are not exported (the embedder remakes them): queue their making.
                tx.enqueue("embed", b"{}", self.clock())
        if export.facts or export.passages or export.jobs:
            self._jobs_queued()
        return memory

    async def aimport_memory(self, doc: MemoryExport | dict[str, Any] | bytes | str) -> Memory:
        """`import_memory`, off the event loop."""
        return await asyncio.to_thread(self.import_memory, doc)


def _load_export(doc: MemoryExport | dict[str, Any] | bytes | str) -> MemoryExport:
    try:
        if isinstance(doc, MemoryExport):
            export = doc
        elif isinstance(doc, (bytes, str)):
            export = msgspec.json.decode(doc, type=MemoryExport)
        else:  # a dict: through JSON, since its messages are kept as raw JSON
            export = msgspec.json.decode(msgspec.json.encode(doc), type=MemoryExport)
    except msgspec.ValidationError as exc:
        raise InvalidExportError(f"not a fadeway memory export: {exc}") from None
    except msgspec.DecodeError as exc:
        raise InvalidExportError(f"not JSON: {exc}") from None
    _check_memory_id(export.memory_id)
    return export


def open(
    url: str | os.PathLike[str] = "fadeway.db",
    *,
    ceiling: int = C.DEFAULT_CEILING,
    clock: Callable[[], float] | None = None,
    synchronous: str = "FULL",
    judge: Judge | str | None = None,
    judge_model: str | None = None,
    episode_min_tokens: int = C.EPISODE_MIN_TOKENS,
    episode_max_tokens: int = C.EPISODE_MAX_TOKENS,
    cut_after_tokens: int = C.CUT_AFTER_TOKENS,
    background: bool = True,
    lane_threads: int = C.LANE_THREADS,
    lane_lease_seconds: float = C.LANE_LEASE_SECONDS,
    lane_retry_seconds: float = C.LANE_RETRY_SECONDS,
    embedder: Embedder | str | None = None,
    note_writer: NoteWriter | str | None = None,
) -> Engine:
    """Open (or create) a store of memories.

    url: a file path or `sqlite:///path` (the embedded default).
    ceiling: the context window assumed for every model, in tokens.
    clock: any callable returning Unix seconds; the system clock by default.
    synchronous: SQLite's durability setting (FULL by default).
    judge: the judgment model (`fadeway.judge.judge_from` names them): the offline judge (no
        network) by default, or an OpenAI-compatible API root URL for the LLM judge, its model
        from `judge_model` or FADEWAY_JUDGE_MODEL and its key from FADEWAY_JUDGE_API_KEY.
    judge_model: the LLM judge's model, when `judge` is a URL.
    episode_min_tokens, episode_max_tokens: the sizes an episode is cut to.
    cut_after_tokens: uncut closed history that makes a reply queue a cut.
    background: run the memories' lanes in background threads (else only `drain()` runs them).
    lane_threads: threads of that background worker.
    lane_lease_seconds: how long a worker holds a lane before another may take it over.
    lane_retry_seconds: the first wait before a lane job that could not reach its judge or
        embedder runs again; each later wait is twice the last, up to five minutes.
    embedder: what facts and passages are embedded with for search (`fadeway.embed.embedder_from`
        names them): the offline hashing embedder by default, an OpenAI-compatible endpoint URL,
        or "local:<path>" for a sentence-transformers model on disk.
    note_writer: who answers the note asks. None (the default): the decorated model, through
        the note ask and the note tool. Else a note writer (`fadeway.note_writer.note_writer_from`
        names them: "offline", an OpenAI-compatible API root URL, or a `NoteWriter`) answers
        them in the lane, and the model is not asked.

    Search indexes are saved beside an SQLite file, in `<file>.indexes/`.
    """
    _check_settings(ceiling, lane_lease_seconds, lane_retry_seconds)  # before the store opens
    settings = CutSettings(episode_min_tokens, episode_max_tokens, cut_after_tokens)
    judge = judge_from(judge, model=judge_model)  # a bad spec fails before the store opens
    note_writer = note_writer_from(note_writer, model=judge_model)
    return Engine(
        open_store(url, synchronous=synchronous),
        ceiling=ceiling,
        clock=clock,
        judge=judge,
        cut_settings=settings,
        background=background,
        lane_threads=lane_threads,
        lane_lease_seconds=lane_lease_seconds,
        lane_retry_seconds=lane_retry_seconds,
        embedder=embedder,
        data_dir=data_dir_for(url),
        note_writer=note_writer,
    )
