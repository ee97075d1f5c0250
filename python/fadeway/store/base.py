"""The store interface (ARCHITECTURE: "Storage and scale").

A store holds many memories. Every operation runs inside a transaction bound to one memory id, so
no query can read across memories. Writes take the memory's write lock for the whole transaction
(`BEGIN IMMEDIATE` on SQLite, the memory's advisory lock on PostgreSQL): one transaction per
decorate, report or lane job.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager

import numpy as np

from ..records import (
    AliasRecord,
    BlockText,
    EdgeRecord,
    EntityRecord,
    EpisodeRecord,
    FactRecord,
    GraphRows,
    JobRecord,
    Marks,
    MemoryRecord,
    MessageRecord,
    NoteRecord,
    PassageRecord,
    RecallBlock,
    RecallRecord,
    RequestRecord,
    RetirementRecord,
    TraceRecord,
    WalkRecord,
)
from ..usage import UsageRecord

__all__ = ["SYNCHRONOUS", "WRITES", "Store", "Transaction", "check_synchronous"]

#: The durability settings a store takes (SQLite's names; PostgreSQL maps them).
SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


def check_synchronous(synchronous: str) -> str:
    """`synchronous` in upper case, or a ValueError naming the settings there are."""
    chosen = synchronous.upper()
    if chosen not in SYNCHRONOUS:
        raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS)}, not {chosen!r}")
    return chosen


class Transaction(abc.ABC):
    """Reads and writes of one memory inside one transaction."""

    memory_id: str
    #: Set by a transaction that only keeps the lane's books (its lease, a job's attempts or a
    #: job skipped): it leaves the memory's `version` as it was.
    bookkeeping: bool = False

    @abc.abstractmethod
    def wrote(self) -> bool:
        """Whether this transaction has written anything yet."""

    @abc.abstractmethod
    def version(self) -> int | None:
        """How many write transactions have changed the memory (None: no such memory yet)."""

    @abc.abstractmethod
    def bump_version(self) -> None: ...

    def settle(self) -> None:
        """Run by the store just before it commits: a transaction that changed the memory
        counts in its `version`."""
        if not self.bookkeeping and self.wrote():  # (on PostgreSQL wrote() may wait on a sync)
            self.bump_version()

    @abc.abstractmethod
    def memory(self) -> MemoryRecord | None:
        """The memory's record, or None when nothing was ever stored for it."""

    @abc.abstractmethod
    def create_memory(
        self, fmt: str, created_at: float, *, blocks_tracked: bool = True
    ) -> MemoryRecord:
        """Create the memory. Its blocks are tracked (`insert_emitted`) unless `blocks_tracked`
        is False (an import of a memory from before they were)."""

    @abc.abstractmethod
    def set_instructions(self, instructions: bytes | None) -> None: ...

    @abc.abstractmethod
    def set_decorated_through(self, count: int) -> None: ...

    @abc.abstractmethod
    def message_count(self) -> int:
        """How many messages the memory holds (they are numbered 0 … count − 1)."""

    @abc.abstractmethod
    def messages(self, start: int = 0, stop: int | None = None) -> list[MessageRecord]:
        """Messages with start <= seq < stop, in order."""

    @abc.abstractmethod
    def insert_messages(self, rows: Sequence[MessageRecord]) -> None: ...

    @abc.abstractmethod
    def requests(self) -> list[RequestRecord]: ...

    @abc.abstractmethod
    def latest_request(self) -> RequestRecord | None: ...

    @abc.abstractmethod
    def find_request(self, view_len: int, view_last: bytes | None) -> RequestRecord | None:
        """The newest decorated request whose view had this length and last message digest."""

    @abc.abstractmethod
    def insert_request(self, row: RequestRecord) -> None: ...

    @abc.abstractmethod
    def record_report(
        self,
        n: int,
        provider_tokens: int | None,
        kept: bool | None,
        note: str | None,
        replied: bool,
    ) -> None:
        """Record the provider's count (and whether its ratio was kept) on request `n`."""

    @abc.abstractmethod
    def last_kept_ratio(self, model: str | None) -> float | None:
        """provider / estimate of the latest report whose ratio was kept, for `model`."""

    # -- the blocks fadeway emitted ----------------------------------------------------------

    @abc.abstractmethod
    def insert_emitted(self, digests: Sequence[bytes]) -> None:
        """Record the digests of block texts fadeway put in a request it returned (one already
        recorded is kept; there is no way to delete one)."""

    @abc.abstractmethod
    def emitted_among(self, digests: Sequence[bytes]) -> set[bytes]:
        """Those of `digests` recorded by `insert_emitted`."""

    @abc.abstractmethod
    def emitted(self) -> list[bytes]:
        """Every digest recorded by `insert_emitted`, in byte order."""

    # -- episodes and traces --------------------------------------------------------------

    @abc.abstractmethod
    def episodes(self, after: int = 0) -> list[EpisodeRecord]:
        """The episodes numbered above `after` (every episode by default), in order."""

    @abc.abstractmethod
    def episode_changes(self) -> int:
        """How many writes have inserted episodes or changed their states (0 for none): a
        mirror of the episodes that has read up to this count holds what the store holds."""

    @abc.abstractmethod
    def episodes_changed(self, after: int) -> list[EpisodeRecord]:
        """The episodes inserted or changed by the writes counted past `after`, in order."""

    @abc.abstractmethod
    def last_episode(self) -> EpisodeRecord | None: ...

    @abc.abstractmethod
    def insert_episodes(self, rows: Sequence[EpisodeRecord]) -> None:
        """Insert episodes (one write, counted in `episode_changes`)."""

    @abc.abstractmethod
    def traces(self, after: int = 0) -> list[TraceRecord]:
        """The trace log past trace number `after` (all of it by default), in order of writing."""

    @abc.abstractmethod
    def append_traces(self, rows: Sequence[TraceRecord]) -> None:
        """Append to the trace log; there is no way to edit or delete a trace."""

    @abc.abstractmethod
    def trace_count(self) -> int: ...

    @abc.abstractmethod
    def trace_columns(self, after: int = 0) -> np.ndarray:
        """The trace log past trace number `after`, in order of writing, as what activation
        reads of it: an (n, 4) float64 array of episode, fact (0 for an encoding trace), at,
        and weight (the score when the trace counts, else 0). Numbers are exact in float64."""

    @abc.abstractmethod
    def note_traced(self, note: int) -> bool:
        """Whether a trace links a fact of note `note` (its facts were judged)."""

    @abc.abstractmethod
    def set_episode_states(self, states: dict[int, str]) -> None:
        """Move episodes to new states (the only change an episode allows; one write, counted
        in `episode_changes`)."""

    # -- notes and facts ------------------------------------------------------------------

    @abc.abstractmethod
    def notes(self) -> list[NoteRecord]: ...

    @abc.abstractmethod
    def insert_note(
        self, note: NoteRecord, facts: Sequence[FactRecord], acknowledged: Sequence[int]
    ) -> None:
        """Store a note, its facts, and the episodes it acknowledges."""

    @abc.abstractmethod
    def facts(self, after: int = 0, *, note: int | None = None) -> list[FactRecord]:
        """The facts numbered above `after` (every fact by default), or only those of `note`,
        in order."""

    @abc.abstractmethod
    def fact_count(self) -> int:
        """The highest fact number (facts are numbered 1, 2, ...), 0 when none."""

    @abc.abstractmethod
    def acks(self, after_note: int = 0) -> list[tuple[int, int]]:
        """(episode, note) for every acknowledgement by a note numbered above `after_note`,
        in note order."""

    @abc.abstractmethod
    def set_facts_order(self, order: str | None) -> None: ...

    @abc.abstractmethod
    def set_facts_block(self, text: str | None) -> None:
        """Keep the facts block's rendered text, so it repeats byte for byte until it changes."""

    # -- the knowledge graph, passages and vectors ----------------------------------------

    @abc.abstractmethod
    def entities(self, after: int = 0) -> list[EntityRecord]: ...

    @abc.abstractmethod
    def aliases(self) -> list[AliasRecord]: ...

    @abc.abstractmethod
    def edges(self, after: int = 0) -> list[EdgeRecord]:
        """The edges of facts numbered above `after`, in fact order."""

    @abc.abstractmethod
    def retirements(self) -> list[RetirementRecord]: ...

    @abc.abstractmethod
    def graph_rows(self, past: Mapping[str, int]) -> GraphRows:
        """The rows of each table `past` names past the number it gives (facts, entities,
        edges, episodes, acks by note; retirements whole, whatever number it gives), all queries
        sent before any is read: on PostgreSQL one round trip, where a read each was one each.
        A table not named is not read."""

    @abc.abstractmethod
    def insert_graph(
        self,
        entities: Sequence[EntityRecord],
        aliases: Sequence[AliasRecord],
        edges: Sequence[EdgeRecord],
        retirements: Sequence[RetirementRecord],
    ) -> None:
        """Add nodes, surface names, fact edges and retirements (all append-only)."""

    @abc.abstractmethod
    def passages(self, after: int = 0) -> list[PassageRecord]:
        """Passages numbered above `after`, in order."""

    @abc.abstractmethod
    def facts_at(self, ns: Sequence[int]) -> list[FactRecord]:
        """The facts numbered `ns` (those that exist), in order."""

    @abc.abstractmethod
    def passages_at(self, ns: Sequence[int]) -> list[PassageRecord]:
        """The passages numbered `ns` (those that exist), in order."""

    @abc.abstractmethod
    def passages_between(self, start: float, end: float, most: int) -> list[int]:
        """The numbers of at most `most` passages said from `start` to before `end` (Unix
        seconds), the earliest first."""

    @abc.abstractmethod
    def passage_times(self) -> tuple[float, float] | None:
        """When the first and the last passage were said, None when there are none."""

    @abc.abstractmethod
    def passage_count(self) -> int:
        """The highest passage number (passages are numbered 1, 2, ...), 0 when none."""

    @abc.abstractmethod
    def passaged_episodes(self) -> set[int]:
        """Episodes whose passages are written."""

    @abc.abstractmethod
    def insert_passages(self, rows: Sequence[PassageRecord]) -> None: ...

    @abc.abstractmethod
    def vectors(self, kind: str, embedder: str, after: int = 0) -> list[tuple[int, bytes]]:
        """(n, float32 bytes) of `kind` ("fact", "passage", "entity") vectors by `embedder`."""

    @abc.abstractmethod
    def vector_ns(self, kind: str, embedder: str) -> set[int]: ...

    @abc.abstractmethod
    def marks(self, embedder: str) -> Marks:
        """How far each append-only table of the memory reaches, and its oldest pending graph
        job, in one query (`Marks`; the vectors are `embedder`'s)."""

    @abc.abstractmethod
    def insert_vectors(self, kind: str, embedder: str, rows: Sequence[tuple[int, bytes]]) -> None:
        """Store vectors; one already stored for (kind, embedder, n) is kept as it was."""

    # -- recall -----------------------------------------------------------------------------

    @abc.abstractmethod
    def recalls(self, since_turn: int = 0) -> list[RecallRecord]:
        """The recall blocks of turns from `since_turn` on, in turn order."""

    @abc.abstractmethod
    def recall_blocks(self, since_turn: int = 0) -> list[RecallBlock]:
        """The recall blocks of turns from `since_turn` on, in turn order, with their final
        texts, in one query: what decorate shows and fixes (`RecallBlock`: a block's own text
        only while it has no final; not the facts and passages it shows)."""

    @abc.abstractmethod
    def insert_recall(self, row: RecallRecord) -> None: ...

    @abc.abstractmethod
    def block_texts(self, table: str, since_turn: int = 0) -> list[BlockText]:
        """Rewrites of recall blocks: `table` is "distills" (prepared by the lane) or
        "recall_finals" (fixed when the next message arrived)."""

    @abc.abstractmethod
    def insert_block_text(self, table: str, row: BlockText) -> None:
        """Store a rewrite; one already stored for the turn is kept as it was."""

    @abc.abstractmethod
    def walks(self, since_turn: int = 0) -> list[WalkRecord]: ...

    @abc.abstractmethod
    def insert_walk(self, row: WalkRecord) -> None:
        """Store a prepared walk; one already stored for the turn is kept as it was."""

    # -- usage ------------------------------------------------------------------------------

    @abc.abstractmethod
    def usage(self) -> list[UsageRecord]:
        """Every model call recorded for the memory, in order."""

    @abc.abstractmethod
    def insert_usage(self, rows: Sequence[UsageRecord], at: float) -> None:
        """Record model calls, at the engine's time `at` (nothing when `rows` is empty)."""

    # -- the ordered lane -----------------------------------------------------------------

    @abc.abstractmethod
    def enqueue(self, kind: str, payload: bytes, created_at: float) -> int:
        """Queue a job at the end of the memory's lane; returns its number (`last_job` + 1)."""

    @abc.abstractmethod
    def last_job(self) -> int:
        """The number of the last job queued in the memory's lane (0: none yet)."""

    @abc.abstractmethod
    def pending_job(self, kind: str | None = None) -> JobRecord | None:
        """The oldest pending job (of `kind`, when given)."""

    @abc.abstractmethod
    def finish_job(self, n: int, state: str, error: str | None = None) -> None: ...

    @abc.abstractmethod
    def record_attempt(
        self, n: int, error: str | None, retry_at: float | None = None, *, waited: bool = False
    ) -> tuple[int, int]:
        """Count one more attempt at job `n` (`waited`: one that could not reach its service),
        which may run again from `retry_at` (real Unix seconds; None: at once); returns the
        attempts so far and, of them, those that could not reach the service."""

    @abc.abstractmethod
    def park_job(
        self, n: int, error: str, retry_at: float | None, *, attempts: int | None = None
    ) -> None:
        """Park job `n`, out of attempts: state "failed" with its `error`, kept (never deleted),
        one more time parked, to run again from `retry_at` (real Unix seconds; None: at the next
        lane run). `attempts` sets its count of attempts (an import's), else it is kept."""

    @abc.abstractmethod
    def revive_jobs(
        self, now: float | None = None, *, kind: str | None = None, outages: int = 0
    ) -> int:
        """Queue parked jobs again, in their places: those whose `retry_at` has passed by `now`
        (None: all), with their attempts counted afresh; or, given `kind`, that kind's jobs
        parked after `outages` attempts could not reach their service (whatever their
        `retry_at`), left one such attempt before they are parked again. Returns how many."""

    @abc.abstractmethod
    def jobs(self, state: str | None = None) -> list[JobRecord]:
        """The memory's jobs in the order queued (those in `state`, when given)."""

    @abc.abstractmethod
    def claim_lane(
        self, owner: str, now: float, until: float, *, gone: Callable[[str], bool] | None = None
    ) -> bool:
        """Take (or renew) the memory's lane for `owner` unless another holds an unexpired lease
        (one whose holder `gone` says no longer runs is taken all the same)."""

    @abc.abstractmethod
    def release_lane(self, owner: str) -> None: ...


#: The `Transaction` methods that write (the rest only read): what a recorded decorate makes
#: again when its request is stored (`decorate.call.commit`).
WRITES = frozenset(
    {
        "create_memory",
        "set_instructions",
        "set_decorated_through",
        "insert_messages",
        "insert_request",
        "record_report",
        "insert_emitted",
        "insert_episodes",
        "append_traces",
        "set_episode_states",
        "insert_note",
        "set_facts_order",
        "set_facts_block",
        "insert_graph",
        "insert_passages",
        "insert_vectors",
        "insert_recall",
        "insert_block_text",
        "insert_walk",
        "insert_usage",
        "enqueue",
        "finish_job",
        "record_attempt",
        "park_job",
        "revive_jobs",
        "claim_lane",
        "release_lane",
        "bump_version",
    }
)


class Store(abc.ABC):
    """Many memories in one database."""

    #: Whether the store makes one write transaction at a time, whatever the memory (SQLite's
    #: file lock): decorate then plans in a read transaction and holds the writer only for its
    #: writes (`decorate.call`). PostgreSQL serialises writes per memory only.
    serial_writes: bool = False

    @abc.abstractmethod
    def write(self, memory_id: str) -> AbstractContextManager[Transaction]:
        """A write transaction on one memory; it commits on exit, rolls back on error."""

    @abc.abstractmethod
    def read(self, memory_id: str) -> AbstractContextManager[Transaction]:
        """A read-only snapshot of one memory."""

    @abc.abstractmethod
    def memory_ids(self) -> Iterator[str]:
        """Every memory id in the store (ids only; for export of all and administration)."""

    @abc.abstractmethod
    def memories_with_pending_jobs(self, due: float | None = None) -> list[str]:
        """Ids of the memories whose lanes hold pending jobs (ids only: for the lane workers),
        and, given `due`, those holding a parked job whose wait has passed by then (or that has
        none: parked before waits were kept), as `Transaction.revive_jobs(due)` would revive."""

    @abc.abstractmethod
    def listen_for_jobs(
        self, wake: threading.Event, stop: threading.Event
    ) -> threading.Thread | None:
        """Set `wake` whenever another process (or engine) commits a transaction that queued
        jobs, and once more each time listening (re)starts, until `stop` is set or the store
        closes: the thread that listens, or None when the store has no notifications (then only
        a poll finds jobs other processes queued)."""

    @abc.abstractmethod
    def close(self) -> None: ...
