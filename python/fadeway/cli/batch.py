"""Batch replay: many memories through decorate/report in parallel worker processes, with a
progress bar and a summary read back from the store.

Memories are independent, so each replays in one worker, start to end, in order; the workers
are this process and spawned ones, each with its own engine on the same store (SQLite queues
concurrent writers with BEGIN IMMEDIATE and a busy timeout). A worker dies with its parent (so a
killed run never leaves a writer behind that a resumed run would race), and a resumed run picks
each memory up after its last stored step (`replay.replay_memory`).
"""

from __future__ import annotations

import ctypes
import logging
import logging.handlers
import multiprocessing
import os
import queue
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import _constants as C
from .._blas import one_thread_for_process
from ..engine import Engine
from ..export.files import import_file
from ..notes.writers import NoteWriter, note_writer_from
from ..replay.runner import DEFAULT_MODEL, Replayed, replay_memory
from ..replay.sources import Batch, MemoryLines
from ..usage import UsageSummary, summarise_usage
from .stores import open_store

__all__ = [
    "ReplaySettings",
    "MemorySummary",
    "die_with_parent",
    "open_for_replay",
    "run_batch",
    "summarize",
]

#: How often a worker reports progress to the parent, in seconds.
_PROGRESS_SECONDS = 0.2
#: Linux prctl option: the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    """What every worker opens its engine with."""

    db: str
    ceiling: int | None = None
    note_writer: str | None = "offline"  # "offline", an endpoint URL, or None (asks wait)
    model: str = DEFAULT_MODEL
    judge: str = "offline"  # "offline" or an endpoint URL
    judge_model: str | None = None  # the LLM judge's (and LLM note writer's) model
    limits: tuple[tuple[str, int], ...] = ()  # engine size limits set on the command line
    embedder: str | None = None  # what facts and passages are embedded with (None: hashing)


def open_for_replay(settings: ReplaySettings) -> Engine:
    """An engine for replay: no background threads (the replay runs each lane itself, at fixed
    points, so a resumed run repeats an uninterrupted one exactly)."""
    ceiling = C.DEFAULT_CEILING if settings.ceiling is None else settings.ceiling
    return open_store(
        settings.db,
        ceiling=ceiling,
        background=False,
        synchronous=C.REPLAY_SYNCHRONOUS,
        lane_lease_seconds=C.REPLAY_LANE_LEASE_SECONDS,
        judge=settings.judge,
        judge_model=settings.judge_model,
        embedder=settings.embedder,
        **dict(settings.limits),
    )


def _note_writer(settings: ReplaySettings) -> NoteWriter | None:
    return note_writer_from(settings.note_writer, model=settings.judge_model)


# -- workers ----------------------------------------------------------------------------------

_worker: dict[str, object] = {}


def die_with_parent(parent: int) -> None:
    """Have this worker process killed when `parent` dies (so no orphan goes on writing)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _init_worker(
    settings: ReplaySettings,
    progress: multiprocessing.Queue,
    tasks: multiprocessing.Queue,
    parent: int,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    die_with_parent(parent)
    one_thread_for_process()
    # Log records go to the parent with the progress, and are written there by its handlers
    # (above its progress bar); written here, they would cut through it.
    logging.root.handlers = [logging.handlers.QueueHandler(progress)]
    _worker.update(
        engine=open_for_replay(settings),
        settings=settings,
        progress=progress,
        tasks=tasks,
        parent=parent,
    )


def _replay_queued() -> list[Replayed]:
    """Replay the memories of the shared task queue until its end marker."""
    tasks: multiprocessing.Queue = _worker["tasks"]  # type: ignore[assignment]
    return [_replay_in_worker(memory) for memory in iter(tasks.get, None)]


def _replay_in_worker(memory: MemoryLines) -> Replayed:
    engine: Engine = _worker["engine"]  # type: ignore[assignment]
    settings: ReplaySettings = _worker["settings"]  # type: ignore[assignment]
    out: multiprocessing.Queue = _worker["progress"]  # type: ignore[assignment]
    pending = 0
    last = time.monotonic()

    def progress(n: int) -> None:
        nonlocal pending, last
        pending += n
        now = time.monotonic()
        if now - last >= _PROGRESS_SECONDS:
            if os.getppid() != _worker["parent"]:  # where prctl is missing
                os._exit(1)
            out.put(pending)
            pending, last = 0, now

    result = _replay_here(engine, memory, settings, progress)
    out.put(pending)
    return result


def _replay_in_workers(
    engine: Engine,
    memories: Sequence[MemoryLines],
    settings: ReplaySettings,
    workers: int,
    advance: Callable[[int], None],
) -> list[Replayed]:
    """Replay `memories` over `workers` processes: this one (its engine already open) and
    `workers - 1` spawned ones, each taking the next memory from one queue when it finishes
    one. This process starts on the longest while the others import and open their engines
    (most of a second each); between its own messages it forwards the others' progress."""
    context = multiprocessing.get_context("spawn")
    progress: multiprocessing.Queue = context.Queue()
    tasks: multiprocessing.Queue = context.Queue()
    tasks.cancel_join_thread()  # a failed run may leave memories queued: exit all the same
    # Longest first (as given), so that the last to finish is a short one.
    for memory in [*memories, *[None] * workers]:
        tasks.put(memory)
    pool = context.Pool(workers - 1, _init_worker, (settings, progress, tasks, os.getpid()))
    try:
        running = [pool.apply_async(_replay_queued) for _ in range(workers - 1)]

        def tend() -> None:
            for result in running:
                if result.ready():
                    result.get()  # raises what the worker raised, at once
            _drain(progress, advance)

        last = time.monotonic()

        def own_progress(n: int) -> None:
            nonlocal last
            advance(n)
            if time.monotonic() - last >= _PROGRESS_SECONDS:
                tend()
                last = time.monotonic()

        done = [_replay_here(engine, m, settings, own_progress) for m in iter(tasks.get, None)]
        for result in running:
            while not result.ready():
                result.wait(_PROGRESS_SECONDS)
                tend()
            done += result.get()
        pool.close()
        pool.join()
    except BaseException:
        pool.terminate()
        pool.join()
        raise
    _drain(progress, advance)
    return done


def _replay_here(
    engine: Engine,
    memory: MemoryLines,
    settings: ReplaySettings,
    progress: Callable[[int], None],
) -> Replayed:
    return replay_memory(
        engine,
        memory.memory_id,
        memory.lines,
        fmt=memory.format,
        model=settings.model,
        note_writer=_note_writer(settings),
        progress=progress,
    )


def _drain(progress: multiprocessing.Queue, advance: Callable[[int], None]) -> None:
    while True:
        try:
            _forward(progress.get_nowait(), advance)
        except queue.Empty:
            return


def _forward(item: int | logging.LogRecord, advance: Callable[[int], None]) -> None:
    """What a worker sent: messages replayed, or a log record for this process's loggers."""
    if isinstance(item, logging.LogRecord):
        logger = logging.getLogger(item.name)
        if logger.isEnabledFor(item.levelno):  # the levels this process set, not the worker's
            logger.handle(item)
    else:
        advance(item)


# -- the run ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemorySummary:
    """One memory as the store holds it after a run (`new`: messages this run stored;
    `usage`: the model calls recorded for it, this run and earlier ones)."""

    memory_id: str
    messages: int
    new: int
    episodes: int
    facts: int
    sealed: int
    forgotten: int
    usage: tuple[UsageSummary, ...] = ()


def summarize(engine: Engine, new: dict[str, int]) -> list[MemorySummary]:
    """The store's counts for each memory of `new` (memory id → messages stored this run)."""
    rows = []
    for memory_id, added in new.items():
        with engine.services.store.read(memory_id) as tx:
            messages = tx.message_count()
            states = [e.state for e in tx.episodes()]
            facts = len(tx.facts())
            used = tuple(summarise_usage(tx.usage()))
        rows.append(
            MemorySummary(
                memory_id,
                messages,
                added,
                len(states),
                facts,
                states.count("sealed"),
                states.count("forgotten"),
                used,
            )
        )
    return rows


def run_batch(
    batch: Batch,
    settings: ReplaySettings,
    *,
    workers: int = 1,
    advance: Callable[[int], None] = lambda n: None,
) -> list[MemorySummary]:
    """Import the batch's exports, replay its memories (`workers` processes when there are
    several), and return the store's summary of every memory touched."""
    new: dict[str, int] = {}
    with open_for_replay(settings) as engine:
        for memory_id in batch.memories:
            engine.memory(memory_id)  # a bad memory id fails here, before any worker starts
        for path in batch.exports:
            imported, skipped = import_file(engine.services, path)
            for memory_id in imported:
                with engine.services.store.read(memory_id) as tx:
                    new[memory_id] = tx.message_count()
            new.update(dict.fromkeys(skipped, 0))
        # An import queues the embedding of its facts and passages. Not the lanes of memories
        # being replayed: each runs its own at fixed points, and one that a killed run left
        # between a reply and its note must take the note before its jobs run, as an
        # uninterrupted run did.
        for memory_id in new:
            if memory_id not in batch.memories:
                engine.run_lane(memory_id)
        # Longest first, so that the last memory to finish is a short one.
        memories = sorted(batch.memories.values(), key=lambda m: -m.messages)
        workers = max(1, min(workers, len(memories)))
        if workers == 1:
            results = [_replay_here(engine, m, settings, advance) for m in memories]
        else:
            results = _replay_in_workers(engine, memories, settings, workers, advance)
        stored = {r.memory_id: r.stored for r in results}
        new.update((memory_id, stored[memory_id]) for memory_id in batch.memories)
        return summarize(engine, new)
