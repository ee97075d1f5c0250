"""`fadeway.open()` and the Engine: the facade over one store of memories. `open()` builds the
services record (`_services.Services`) once; the engine hands it to each memory and to the lane,
and holds nothing else."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from . import _constants as C
from ._services import LaneQueue, Services
from .embed import Embedder, embedder_from
from .episodes.cut import CutSettings
from .export.files import import_file
from .export.restore import restore
from .index.indexes import Indexes
from .index.paths import data_dir_for
from .judge import Judge, judge_from
from .lane.jobs import Job, table
from .lane.worker import BackgroundWorker, Lane
from .memory import Memory
from .mirror.mirrors import Mirrors
from .notes.writers import LLMNoteWriter, NoteWriter, note_writer_from
from .records import MemoryExport, MemoryInfo
from .store import Store, open_store
from .wire.limits import Limits

__all__ = ["Engine", "open"]


def _check_settings(ceiling: int, lane_lease_seconds: float, lane_retry_seconds: float) -> None:
    if not isinstance(ceiling, int) or ceiling <= 0:
        raise ValueError(f"ceiling must be a positive number of tokens, not {ceiling!r}")
    if not lane_lease_seconds > 0:
        raise ValueError(f"lane_lease_seconds must be positive, not {lane_lease_seconds!r}")
    if not lane_retry_seconds >= 0:
        raise ValueError(f"lane_retry_seconds must be zero or more, not {lane_retry_seconds!r}")


class Engine:
    """Many memories in one store, with one clock and one set of settings (`services`).
    Get one from `fadeway.open()`."""

    def __init__(
        self,
        services: Services,
        *,
        jobs: Mapping[str, Job] | None = None,
        background: bool = True,
        lane_threads: int = C.LANE_THREADS,
    ) -> None:
        #: The store, clock, settings, models and per-memory caches every part reads.
        self.services = services
        #: The memories' lanes, run with the job table (`lane.jobs.table` by default).
        self.lane = Lane(services.store, services.lane, jobs or table(services))
        self._worker = BackgroundWorker(self.lane, lane_threads) if background else None

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the settings, as `open()` was given them ---------------------------------------------

    @property
    def store(self) -> Store:
        return self.services.store

    @property
    def ceiling(self) -> int:
        return self.services.ceiling

    @property
    def limits(self) -> Limits:
        """The sizes this engine accepts."""
        return self.services.limits

    @property
    def clock(self) -> Callable[[], float]:
        return self.services.clock

    @property
    def judge(self) -> Judge:
        return self.services.judge

    @property
    def embedder(self) -> Embedder:
        return self.services.embedder

    @property
    def note_writer(self) -> NoteWriter | None:
        """Who answers the note asks instead of the decorated model (None: the model)."""
        return self.services.note_writer

    @property
    def data_dir(self) -> Path | None:
        """Where each memory's search indexes are saved (None: kept in memory only)."""
        return self.services.indexes.data_dir

    # -- memories ------------------------------------------------------------------------------

    def memory(self, memory_id: str) -> Memory:
        """The memory (conversation) with this id; it is created by its first decorate."""
        return Memory(self.services, memory_id)

    def memory_ids(self) -> list[str]:
        """The ids of every memory in the store."""
        return list(self.services.store.memory_ids())

    def memories(self) -> list[MemoryInfo]:
        """Every memory in the store, by id: its format, when it was created, how many
        messages, turns and episodes it holds, and when its last message was stored."""
        out = []
        for memory_id in self.services.store.memory_ids():
            with self.services.store.read(memory_id) as tx:
                memory = tx.memory()
                if memory is None:  # gone between the listing and the read
                    continue
                count = tx.message_count()
                last = tx.messages(count - 1, count)[0] if count else None
                # Episodes are numbered 1, 2, ... and never deleted: the last one's number counts
                # them without reading them all.
                episode = tx.last_episode()
                out.append(
                    MemoryInfo(
                        memory_id=memory_id,
                        format=memory.format,
                        created_at=memory.created_at,
                        messages=count,
                        turns=last.turn if last is not None else 0,
                        episodes=episode.n if episode is not None else 0,
                        last_at=last.at if last is not None else None,
                    )
                )
        return out

    def import_memory(self, doc: MemoryExport | dict[str, Any] | bytes | str) -> Memory:
        """Restore a memory from its export (the document, its dict, or its JSON).

        The memory must not hold anything yet; every message is validated again first, and
        nothing is written if one is bad.
        """
        return self.memory(restore(self.services, doc))

    def import_file(self, path: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
        """Import every export of a JSONL file, one line at a time: (imported, skipped) ids. A
        memory the store already holds exactly as exported is skipped; one that holds
        something else is an `ImportConflictError` naming the line. Check the file first
        (`fadeway.export.files.check_export_file`) so a bad line stops it before it starts."""
        return import_file(self.services, path)

    # -- the lane ------------------------------------------------------------------------------

    def drain(self) -> int:
        """Run every pending background job of every memory to completion.

        For deterministic tests and batch replay; returns how many jobs were applied.
        """
        return self.lane.drain()

    def run_lane(self, memory_id: str) -> None:
        """Run one memory's pending background jobs to completion, here (waiting out a lease
        another worker holds, and a job waiting out an outage of its service)."""
        self.lane.run_through(memory_id)

    def close(self) -> None:
        """Stop the background worker (a job it was running stays pending) and close the store."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        s = self.services
        s.indexes.save()
        s.embedder.close()
        s.judge.close()
        if isinstance(s.note_writer, LLMNoteWriter):
            s.note_writer.close()
        s.store.close()

    # -- async twins -------------------------------------------------------------------------

    async def adrain(self) -> int:
        """`drain`, off the event loop."""
        return await asyncio.to_thread(self.drain)

    async def amemories(self) -> list[MemoryInfo]:
        """`memories`, off the event loop."""
        return await asyncio.to_thread(self.memories)

    async def aimport_memory(self, doc: MemoryExport | dict[str, Any] | bytes | str) -> Memory:
        """`import_memory`, off the event loop."""
        return await asyncio.to_thread(self.import_memory, doc)


# Longer than 60 lines: one keyword per setting, each documented in the docstring, which is
# the settings' reference (`help(fadeway.open)`).
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
    max_message_bytes: int = C.MAX_MESSAGE_BYTES,
    max_request_messages: int = C.MAX_REQUEST_MESSAGES,
    max_note_facts: int = C.MAX_NOTE_FACTS,
    max_note_bytes: int = C.MAX_NOTE_BYTES,
) -> Engine:
    """Open (or create) a store of memories.

    url: a file path or `sqlite:///path` (the embedded default); ":memory:" for a store in
        memory (tests), gone when the engine closes; `postgresql://user:password@host/db`
        for a database on a PostgreSQL server (the `postgres` extra).
    ceiling: the context window assumed for every model, in tokens.
    clock: any callable returning Unix seconds; the system clock by default.
    synchronous: SQLite's durability setting (FULL by default); on PostgreSQL, OFF and NORMAL
        commit asynchronously.
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
        the note ask and the note tool. Else a note writer (`fadeway.notes.writers.
        note_writer_from` names them: "offline", an OpenAI-compatible API root URL, or a
        `NoteWriter`) answers them in the lane, and the model is not asked.
    max_message_bytes: the largest message or item a request, a reply or an import may hold,
        in bytes of its JSON (1 MiB).
    max_request_messages: the most messages or items one request or reply may hold (50,000).
    max_note_facts, max_note_bytes: the most entries (200) and bytes of arguments (64 KiB) a
        note may hold; a larger note is not taken (the ask stands) and its call is shown to the
        model as a short stub. A request or import over a limit is refused with a
        `LimitExceededError` naming it, before anything is written.

    Search indexes are saved beside an SQLite file, in `<file>.indexes/`; on PostgreSQL they
    are rebuilt in memory.
    """
    _check_settings(ceiling, lane_lease_seconds, lane_retry_seconds)  # before the store opens
    limits = Limits(max_message_bytes, max_request_messages, max_note_facts, max_note_bytes)
    cut_settings = CutSettings(episode_min_tokens, episode_max_tokens, cut_after_tokens)
    chosen_judge = judge_from(judge, model=judge_model)  # a bad spec fails before the store opens
    chosen_writer = note_writer_from(note_writer, model=judge_model)
    chosen_embedder = embedder_from(embedder)
    services = Services(
        store=open_store(url, synchronous=synchronous),
        clock=clock or time.time,
        ceiling=ceiling,
        judge=chosen_judge,
        embedder=chosen_embedder,
        note_writer=chosen_writer,
        cut_settings=cut_settings,
        mirrors=Mirrors(),
        indexes=Indexes(chosen_embedder, data_dir_for(url)),
        lane=LaneQueue(lane_lease_seconds, lane_retry_seconds),
        limits=limits,
    )
    return Engine(services, background=background, lane_threads=lane_threads)
