"""The records fadeway keeps, as msgspec structs (MECHANISM: "Episodes": messages and turns).

Stored rows and the export document share these types, so what is stored is what is exported.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from . import _constants as C
from .errors import InvalidMemoryIdError

__all__ = [
    "check_memory_id",
    "EXPORT_VERSION",
    "JobKind",
    "MemoryRecord",
    "MessageRecord",
    "RequestRecord",
    "EpisodeRecord",
    "TraceRecord",
    "JobRecord",
    "NoteRecord",
    "FactRecord",
    "EntityRecord",
    "AliasRecord",
    "EdgeRecord",
    "GraphRows",
    "RetirementRecord",
    "PassageRecord",
    "Unit",
    "EpisodeView",
    "ReportResult",
    "SearchHit",
    "HeldFact",
    "MemoryInfo",
    "RecallRecord",
    "BlockText",
    "RecallBlock",
    "WalkRecord",
    "ExportedUsage",
    "ExportedJob",
    "ExportedMessage",
    "ExportedRequest",
    "MemoryExport",
]

#: The version of the export document's layout.
EXPORT_VERSION = 1


class MemoryRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One memory: a conversation, with its wire format and the caller's latest instructions."""

    memory_id: str
    format: str
    created_at: float
    instructions: bytes | None  # JSON {"instructions": str|None, "messages": [...]}, as sent
    decorated_through: int  # messages stored when the last decorate returned
    facts_order: str | None = None  # JSON list of the facts block's fact numbers, in order
    facts_block: str | None = None  # the facts block's text as last rendered (kept byte-stable)
    # Whether the digests of the blocks fadeway returns are kept (`Transaction.emitted_among`):
    # False for a memory from before they were, whose blocks are recognised by their look.
    blocks_tracked: bool = False


class MessageRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One stored message: its JSON exactly as sent, numbered per memory, with its turn."""

    seq: int  # 0-based position in the memory's history
    turn: int  # the user turn it belongs to; 0 before the first user message
    at: float  # Unix seconds, from the engine's clock or the replayed timestamp
    role: str
    kind: str  # "message", or the Responses item type
    side: str  # wire.Side: user / system / assistant / output
    source: str  # "request" (sent by the caller) or "reply" (stored by report)
    tokens: int  # our size estimate, per-message overhead included
    digest: bytes  # canonical digest (wire/canonical.py)
    calls: tuple[str, ...] = ()  # call ids this message makes
    answers: str | None = None  # call id this message answers
    body: bytes  # the JSON as sent


class RequestRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One decorated request: our estimate, and the provider's count once reported."""

    n: int  # 1-based number of the decorate call in this memory
    at: float
    model: str | None
    encoding: str
    estimate: int  # our raw (uncorrected) estimate of the decorated request
    view_len: int  # history messages in the decorated request
    view_last: bytes | None  # digest of its last history message
    history_through: int  # messages stored when it was decorated
    provider_tokens: int | None = None
    ratio_kept: bool | None = None
    ratio_note: str | None = None
    replied: bool = False


class EpisodeRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A stretch of closed history about one concept, cut between whole units."""

    n: int  # 1-based, in order of the history
    first_seq: int
    last_seq: int  # inclusive
    first_turn: int
    last_turn: int
    start_at: float  # time of its first message
    end_at: float  # time of its last message
    tokens: int
    cut_at: float  # when it was cut
    state: str = "live"  # live / leaving / sealed / forgotten


class TraceRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of the append-only trace log (MECHANISM: "Encoding and traces").

    The encoding trace of an episode has no fact and score 1; a fact trace links one fact and
    one episode and counts for both when the judge said yes. Traces are never edited.
    """

    n: int  # 1-based, in order of writing
    episode: int
    fact: int | None
    kind: str  # "encoding" or "fact"
    score: float  # as given
    counted: bool
    at: float


class NoteRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One note: the facts a model (or the offline note writer) wrote when history left."""

    n: int
    at: float
    call_id: str | None  # the note call's id in the reply, when it came in one
    source: str  # "model", or "note-writer:<name>" for a stand-in
    arguments: str  # the call's arguments exactly as given


class FactRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One fact of a note: a knowledge-graph triple stated as a sentence."""

    n: int
    note: int
    text: str
    subject: str
    object: str
    milestone: bool
    at: float


class EntityRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A node of the memory's knowledge graph, under its canonical name (the first seen)."""

    n: int
    name: str
    at: float


class AliasRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A surface name of an entity: every name a fact used is kept."""

    norm: str  # graph.normalise_name(name): names with one normal form name one entity
    entity: int
    name: str  # the surface name as written
    at: float  # when it was first used


class EdgeRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A fact as an edge of the graph, between its resolved subject and object entities.

    A fact that restates one already held merges into it (`merged_into`): the held fact stands
    for both, and both facts' notes and times stay recorded.
    """

    fact: int
    subject: int
    object: int
    merged_into: int | None = None
    at: float


class RetirementRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A held fact retired by a newer one that contradicts it; the old fact is kept."""

    fact: int
    by: int  # the newer fact
    at: float  # when the newer fact was written


class Marks(msgspec.Struct, frozen=True, kw_only=True):
    """How far each of a memory's append-only tables reaches: the highest number each holds
    (0 for none), and how many retirements; and the payload of the oldest pending graph job
    (None: none), whose note's facts the graph has not taken. A sync reads a table only past
    what it holds, and not at all when its mark says there is nothing past it
    (`Transaction.marks`)."""

    facts: int
    entities: int
    edges: int  # the highest fact with an edge
    retirements: int  # a count: retirements are read whole
    episodes: int
    acks: int  # the highest note with an acknowledgement
    passages: int
    fact_vectors: int  # of the embedder asked about
    passage_vectors: int
    graph_job: bytes | None = None


class GraphRows(msgspec.Struct, frozen=True, kw_only=True):
    """What a sync read of the graph's tables past what it held (`Transaction.graph_rows`): a
    table not read has no rows here, and retirements (read whole) are None when not read."""

    facts: list[FactRecord] = []
    entities: list[EntityRecord] = []
    edges: list[EdgeRecord] = []
    retirements: list[RetirementRecord] | None = None
    episodes: list[EpisodeRecord] = []
    acks: list[tuple[int, int]] = []  # (episode, note)


class PassageRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A searchable piece of sealed conversation: a whole message, or a window of a long one."""

    n: int
    episode: int
    seq: int
    part: int  # window number within the message (0 for a whole message)
    turn: int
    at: float
    role: str  # who said it: the message's name, else its role
    text: str  # "who: text", as indexed


class JobKind(enum.StrEnum):
    """The kinds of job a memory's lane runs. What each does, what queues it, how it is
    retried and whether a lane behind may skip it: the job table, `fadeway.lane.jobs`."""

    CUT = "cut"
    SCORE = "score"
    GRAPH = "graph"
    EMBED = "embed"
    PASSAGES = "passages"
    NOTE = "note"
    WALK = "walk"
    DISTILL = "distill"


class JobRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One job of a memory's ordered lane."""

    n: int
    kind: str  # a `JobKind` (kept a string: a store may hold kinds this version does not run)
    payload: bytes  # JSON
    created_at: float  # the engine's time when it was queued: the job's "now"
    state: str = "pending"  # pending / done / failed
    attempts: int = 0
    error: str | None = None
    retry_at: float | None = None  # real Unix seconds before which it does not run again
    waits: int = 0  # of its attempts, those that could not reach their service
    parked: int = 0  # times it ran out of attempts and was parked (state "failed")


class Unit(msgspec.Struct, frozen=True):
    """A unit: a user message, or an assistant step with the tool calls and outputs after it.

    Episodes are cut between units only, so a call is never separated from its output.
    """

    first: int  # seq of its first message
    last: int  # seq of its last message (inclusive)
    turn: int
    tokens: int


class EpisodeView(msgspec.Struct, frozen=True, kw_only=True):
    """An episode as `mem.episodes()` shows it: its span, size, state, units and traces."""

    n: int
    state: str
    first_seq: int
    last_seq: int
    first_turn: int
    last_turn: int
    start_at: float
    end_at: float
    tokens: int
    units: list[Unit]
    traces: list[TraceRecord]


class RecallRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The recall block a user turn got, stored with the turn (just before its message)."""

    turn: int
    seq: int  # the user message it stands before
    at: float
    text: str
    tokens: int
    facts: list[int]  # the facts it shows
    passages: list[int]  # the passages it quotes


class BlockText(msgspec.Struct, frozen=True, kw_only=True):
    """A turn's recall block as rewritten: by distill (prepared in the lane), or as fixed when
    the next message arrived (the distilled text when ready, else the original). None: removed."""

    turn: int
    at: float
    text: str | None
    tokens: int


class RecallBlock(msgspec.Struct, frozen=True, kw_only=True):
    """A turn's recall block as a request shows it: its final text once fixed (`final`), else
    the block as recalled (`text`, read only while the turn has no final: a turn's block is
    shown as its final from the next message on, so its own text is read back at most a turn)."""

    turn: int
    seq: int  # the user message it stands before
    text: str | None  # None once the final is fixed
    tokens: int
    final: BlockText | None


class WalkRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The walk the lane prepared after a reply: facts with the level the judge gave them."""

    turn: int
    at: float
    levels: list[tuple[int, int]]  # (fact, level)


class SearchHit(msgspec.Struct, frozen=True, kw_only=True):
    """A fact or passage found by `Memory.search`, best first."""

    kind: str  # "fact" or "passage"
    n: int
    score: float  # the fused reciprocal-rank score
    text: str
    at: float  # when the fact was written, or when the passage's message was sent
    turn: int | None  # the passage's turn (None for a fact)
    retired: bool = False  # a fact a newer one contradicted


class HeldFact(msgspec.Struct, frozen=True, kw_only=True):
    """A fact the memory's knowledge graph holds now (`Memory.facts`): taken in by the graph,
    not merged into an older fact that restates it, not retired by a newer one."""

    n: int  # the fact's number in its memory
    text: str
    subject: str  # the subject entity's canonical name (the first name the graph saw for it)
    object: str  # the object entity's canonical name
    milestone: bool  # a milestone of the conversation, shown apart in the facts block
    at: float  # when its note was taken (Unix seconds)
    restated_at: float | None = None  # when a note last restated it (merged into it), if one did


class MemoryInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One memory of a store, as `Engine.memories` lists it."""

    memory_id: str
    format: str  # "chat_completions" or "responses"
    created_at: float  # when its first decorate (or its import) stored it
    messages: int  # stored messages
    turns: int  # user turns
    episodes: int  # episodes cut from its history, in any state
    last_at: float | None  # its last message's time (the replayed time for a replay)


class ReportResult(msgspec.Struct, frozen=True, kw_only=True):
    """What `report` returns (ARCHITECTURE, Contracts: "What report returns"; `stored` and
    `not_stored` added by issue 33: a reply that is not stored says so, and why)."""

    tool_calls: list[dict[str, Any]]  # the calls the caller's loop runs (the note call removed)
    note_taken: bool = False
    call_again: bool = False
    stored: bool = True  # whether the reply was stored
    not_stored: str | None = None  # why not: "already reported", or "out of order: ..."


class ExportedMessage(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    turn: int
    at: float
    role: str
    kind: str
    source: str
    tokens: int
    message: msgspec.Raw  # the JSON exactly as stored


class ExportedRequest(msgspec.Struct, frozen=True, kw_only=True):
    n: int
    at: float
    model: str | None
    encoding: str
    estimate: int
    view_len: int
    view_last: bytes | None
    history_through: int
    provider_tokens: int | None
    ratio_kept: bool | None
    ratio_note: str | None
    replied: bool


class ExportedUsage(msgspec.Struct, frozen=True, kw_only=True):
    """A model call as the export keeps it: no wall-clock latency, so two replays of the same
    input export alike (Contracts: "Export")."""

    at: float
    kind: str
    model: str
    tokens_in: int
    tokens_out: int
    tokens_cached: int = 0  # of tokens_in, served from the provider's prompt cache


class ExportedJob(msgspec.Struct, frozen=True, kw_only=True):
    """A lane job still to run when the memory was exported, pending or parked after failing:
    the copy runs it too, or the work it stands for (a note's graph and traces, an episode cut,
    a recall walk) would never be done there. Embedding is left out: an import queues it
    anyway, vectors not being exported. (`state`, `attempts` and `error` came later: an export
    without them holds pending jobs only.)"""

    kind: str
    payload: msgspec.Raw  # JSON
    created_at: float
    state: str = "pending"  # or "failed": parked, out of attempts (the copy tries it again)
    attempts: int = 0  # of its last round, when parked
    error: str | None = None  # its last attempt's error


class MemoryExport(msgspec.Struct, frozen=True, kw_only=True):
    """The whole of one memory; `engine.import_memory` restores it exactly."""

    fadeway_export: int = EXPORT_VERSION
    memory_id: str
    format: str
    created_at: float
    decorated_through: int
    instructions: msgspec.Raw  # the caller's latest instructions, JSON (null when none)
    messages: list[ExportedMessage]
    requests: list[ExportedRequest]
    episodes: list[EpisodeRecord] = []
    traces: list[TraceRecord] = []
    notes: list[NoteRecord] = []
    facts: list[FactRecord] = []
    acks: list[tuple[int, int]] = []  # (episode, note)
    facts_order: list[int] | None = None
    facts_block: str | None = None
    entities: list[EntityRecord] = []
    aliases: list[AliasRecord] = []
    edges: list[EdgeRecord] = []
    retirements: list[RetirementRecord] = []
    passages: list[PassageRecord] = []
    recalls: list[RecallRecord] = []
    distills: list[BlockText] = []
    recall_finals: list[BlockText] = []
    walks: list[WalkRecord] = []
    usage: list[ExportedUsage] = []
    jobs: list[ExportedJob] = []  # pending and parked lane jobs, in the order queued
    # Whether the memory keeps the digests of the blocks it returned (an export from before
    # they were kept: not, and its blocks are recognised by their look), and those digests
    # (BLAKE2b of 16 bytes of each block's text, as 32 lowercase hex digits, in order).
    blocks_tracked: bool = False
    emitted: list[str] = []


def check_memory_id(memory_id: Any) -> str:
    """`memory_id` when it is a memory id: a non-empty string of valid Unicode, at most
    MAX_MEMORY_ID_LENGTH characters. Any such string is allowed: it never becomes a path or SQL
    itself."""
    if not isinstance(memory_id, str):
        raise InvalidMemoryIdError(f"a memory id must be a string, not {type(memory_id).__name__}")
    if not memory_id:
        raise InvalidMemoryIdError("a memory id must not be empty")
    if len(memory_id) > C.MAX_MEMORY_ID_LENGTH:
        raise InvalidMemoryIdError(
            f"a memory id must be at most {C.MAX_MEMORY_ID_LENGTH} characters, not {len(memory_id)}"
        )
    try:
        memory_id.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMemoryIdError(
            "a memory id must be valid Unicode (it holds a lone surrogate)"
        ) from None
    return memory_id
