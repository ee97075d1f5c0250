"""A memory read from the store as one document (ARCHITECTURE: "Export"), and the JSON and
JSONL writers and readers of documents.

Beside everything derived from the inputs and the clock, a document holds the lane's pending
and parked jobs but embedding (`MemoryExport.jobs`): the work still to do when it was taken,
which the copy then does (a parked job keeps its error and attempts, and is tried again). A
memory whose lane has run (a replay drained, say) has none, so two replays of one input still
export identically."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO

import msgspec

from ..errors import MemoryNotFoundError
from ..records import (
    ExportedJob,
    ExportedMessage,
    ExportedRequest,
    ExportedUsage,
    JobKind,
    JobRecord,
    MemoryExport,
    MessageRecord,
    RequestRecord,
)
from ..store import Transaction
from ..usage import UsageRecord

__all__ = ["dumps", "export_memory", "loads", "read_jsonl", "write_jsonl"]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(MemoryExport)


def export_memory(tx: Transaction, memory_id: str) -> MemoryExport:
    """Memory `memory_id` as one export document, read through `tx`."""
    memory = tx.memory()
    if memory is None:
        raise MemoryNotFoundError(f"the store holds no memory {memory_id!r} to export")
    return MemoryExport(
        memory_id=memory_id,
        format=memory.format,
        created_at=memory.created_at,
        decorated_through=memory.decorated_through,
        instructions=msgspec.Raw(memory.instructions or b"null"),
        messages=[_message(m) for m in tx.messages()],
        requests=[_request(r) for r in tx.requests()],
        episodes=tx.episodes(),
        traces=tx.traces(),
        notes=tx.notes(),
        facts=tx.facts(),
        acks=tx.acks(),
        facts_order=msgspec.json.decode(memory.facts_order) if memory.facts_order else None,
        facts_block=memory.facts_block,
        entities=tx.entities(),
        aliases=tx.aliases(),
        edges=tx.edges(),
        retirements=tx.retirements(),
        passages=tx.passages(),
        recalls=tx.recalls(),
        distills=tx.block_texts("distills"),
        recall_finals=tx.block_texts("recall_finals"),
        walks=tx.walks(),
        usage=[_usage(u) for u in tx.usage()],
        # The work still to do but embedding, which the importing embedder does anew.
        jobs=[_job(j) for j in tx.jobs() if j.state != "done" and j.kind != JobKind.EMBED],
        blocks_tracked=memory.blocks_tracked,
        emitted=[d.hex() for d in tx.emitted()],
    )


def _job(j: JobRecord) -> ExportedJob:
    """A pending job as exported; a parked one with its state, attempts and error."""
    job = ExportedJob(kind=j.kind, payload=msgspec.Raw(j.payload), created_at=j.created_at)
    if j.state == "pending":
        return job  # as an export before parked jobs were kept: no wall-clock waits
    return msgspec.structs.replace(job, state=j.state, attempts=j.attempts, error=j.error)


def _message(m: MessageRecord) -> ExportedMessage:
    """A stored message as exported: its body as sent, raw."""
    return ExportedMessage(
        seq=m.seq,
        turn=m.turn,
        at=m.at,
        role=m.role,
        kind=m.kind,
        source=m.source,
        tokens=m.tokens,
        message=msgspec.Raw(m.body),
    )


def _request(r: RequestRecord) -> ExportedRequest:
    return ExportedRequest(
        n=r.n,
        at=r.at,
        model=r.model,
        encoding=r.encoding,
        estimate=r.estimate,
        view_len=r.view_len,
        view_last=r.view_last,
        history_through=r.history_through,
        provider_tokens=r.provider_tokens,
        ratio_kept=r.ratio_kept,
        ratio_note=r.ratio_note,
        replied=r.replied,
    )


def _usage(u: UsageRecord) -> ExportedUsage:
    """A model call's cost as exported (its seconds are not: they differ between runs)."""
    return ExportedUsage(
        at=u.at,
        kind=u.kind,
        model=u.model,
        tokens_in=u.tokens_in,
        tokens_out=u.tokens_out,
        tokens_cached=u.tokens_cached,
    )


def dumps(doc: MemoryExport) -> bytes:
    """One export as JSON bytes."""
    return _encoder.encode(doc)


def loads(data: bytes | str) -> MemoryExport:
    """One export from JSON."""
    return _decoder.decode(data)


def write_jsonl(docs: Iterable[MemoryExport], fp: IO[bytes]) -> int:
    """Write exports one per line; returns how many were written."""
    n = 0
    for doc in docs:
        fp.write(_encoder.encode(doc))
        fp.write(b"\n")
        n += 1
    return n


def read_jsonl(fp: IO[bytes]) -> Iterator[MemoryExport]:
    """Read exports written by `write_jsonl`, one at a time."""
    for line in fp:
        if line.strip():
            yield _decoder.decode(line)
