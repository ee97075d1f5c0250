"""A memory read from the store as one document (ARCHITECTURE: "Export"), and the JSON and
JSONL writers and readers of documents.

Beside everything derived from the inputs and the clock, a document holds the lane's pending
jobs but embedding (`MemoryExport.jobs`): the work still to do when it was taken, which the copy
then does. A memory whose lane has run (a replay drained, say) has none, so two replays of one
input still export identically."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO

import msgspec

from ..errors import MemoryNotFoundError
from ..records import ExportedJob, ExportedMessage, ExportedRequest, ExportedUsage, MemoryExport
from ..store import Transaction

__all__ = ["dumps", "export_memory", "loads", "read_jsonl", "write_jsonl"]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(MemoryExport)


def export_memory(tx: Transaction, memory_id: str) -> MemoryExport:
    """Memory `memory_id` as one export document, read through `tx`."""
    memory = tx.memory()
    if memory is None:
        raise MemoryNotFoundError(f"the store holds no memory {memory_id!r} to export")
    messages = tx.messages()
    requests = tx.requests()
    episodes = tx.episodes()
    traces = tx.traces()
    notes_, facts, acks = tx.notes(), tx.facts(), tx.acks()
    graph = (tx.entities(), tx.aliases(), tx.edges(), tx.retirements())
    passages = tx.passages()
    recalls = (
        tx.recalls(),
        tx.block_texts("distills"),
        tx.block_texts("recall_finals"),
        tx.walks(),
    )
    usage = tx.usage()
    return MemoryExport(
        memory_id=memory_id,
        format=memory.format,
        created_at=memory.created_at,
        decorated_through=memory.decorated_through,
        instructions=msgspec.Raw(memory.instructions or b"null"),
        messages=[
            ExportedMessage(
                seq=m.seq,
                turn=m.turn,
                at=m.at,
                role=m.role,
                kind=m.kind,
                source=m.source,
                tokens=m.tokens,
                message=msgspec.Raw(m.body),
            )
            for m in messages
        ],
        requests=[
            ExportedRequest(
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
            for r in requests
        ],
        episodes=episodes,
        traces=traces,
        notes=notes_,
        facts=facts,
        acks=acks,
        facts_order=msgspec.json.decode(memory.facts_order) if memory.facts_order else None,
        facts_block=memory.facts_block,
        entities=graph[0],
        aliases=graph[1],
        edges=graph[2],
        retirements=graph[3],
        passages=passages,
        recalls=recalls[0],
        distills=recalls[1],
        recall_finals=recalls[2],
        walks=recalls[3],
        usage=[
            ExportedUsage(
                at=u.at, kind=u.kind, model=u.model, tokens_in=u.tokens_in, tokens_out=u.tokens_out
            )
            for u in usage
        ],
        jobs=[
            ExportedJob(kind=j.kind, payload=msgspec.Raw(j.payload), created_at=j.created_at)
            for j in tx.jobs()
            if j.state == "pending" and j.kind != "embed"
        ],
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
