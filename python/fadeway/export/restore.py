"""Restoring a memory from its export (ARCHITECTURE: "Export": "an import of an export restores
it"). Everything is checked first (every message validated again, every block resealed), and
the memory is written in one transaction: nothing is written if anything is bad."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from .._services import Services
from ..errors import ExportLimitError, ImportConflictError, InvalidExportError
from ..records import JobKind, MemoryExport, MessageRecord, RequestRecord, check_memory_id
from ..store import Transaction
from ..usage import UsageRecord
from ..wire import Entry
from ..wire.limits import Limits
from .checks import check_export, decode_export, resealed

__all__ = ["load_export", "restore"]


def load_export(doc: MemoryExport | dict[str, Any] | bytes | str) -> MemoryExport:
    """An export given as the document, its dict, or its JSON."""
    if isinstance(doc, MemoryExport):
        _encoded(doc)  # its text must be text the store can hold
        export = doc
    else:
        # A dict goes through JSON, since its messages are kept as raw JSON.
        export = decode_export(doc if isinstance(doc, (bytes, str)) else _encoded(doc))
    check_memory_id(export.memory_id)
    return export


def _encoded(doc: Any) -> bytes:
    """`doc` as JSON; InvalidExportError when JSON cannot carry it (a lone surrogate, an object
    JSON has no form for, nesting deeper than recursion goes)."""
    try:
        return msgspec.json.encode(doc)
    except RecursionError:
        raise InvalidExportError("the export is nested too deeply to be JSON") from None
    except (TypeError, ValueError, msgspec.EncodeError) as exc:
        where = _unencodable(doc)
        said = f"{where} holds text that is not valid Unicode" if where else "it"
        raise InvalidExportError(f"the export is not JSON: {said} ({exc})") from None


def _unencodable(value: Any, path: str = "") -> str | None:
    """The path of the first text in `value` that UTF-8 cannot encode (a lone surrogate), such
    as `messages[3].message`; None when there is none."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path or "the document"
        return None
    if isinstance(value, msgspec.Struct):
        value = {f: getattr(value, f) for f in value.__struct_fields__}
    if isinstance(value, dict):
        for key, item in value.items():
            name = key if _unencodable(key) is None else ascii(key)  # a path fit to print
            here = f"{path}.{name}" if path else str(name)
            if (found := _unencodable(key, here) or _unencodable(item, here)) is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if (found := _unencodable(item, f"{path}[{i}]")) is not None:
                return found
    return None


def restore(services: Services, doc: MemoryExport | dict[str, Any] | bytes | str) -> str:
    """Restore a memory from its export into an empty memory; returns its id."""
    export = load_export(doc)
    unknown = sorted({j.kind for j in export.jobs} - set(JobKind))
    if unknown:
        raise InvalidExportError(f"the export queues jobs of unknown kind {unknown}")
    check_limits(export, services.limits)  # sizes first: a 50 MB message, read, took 0.5 s
    entries = check_export(export)
    export = resealed(export)
    mirror = services.mirrors.get(export.memory_id)
    with mirror.lock, services.store.write(export.memory_id) as tx:
        if tx.memory() is not None:
            raise ImportConflictError(
                f"memory {export.memory_id!r} already exists; import restores into an empty "
                "memory only"
            )
        _write_history(tx, export, entries)
        _write_notes(tx, export)
        _write_recall(tx, export)
        _write_usage(tx, export)
        for job in export.jobs:  # the work the source had still to do
            n = tx.enqueue(job.kind, bytes(job.payload), job.created_at)
            if job.state == "failed":  # parked there: parked here, tried at the next lane run
                tx.park_job(n, job.error or "", None, attempts=job.attempts)
        if export.facts or export.passages:
            # Vectors are not exported (the embedder remakes them): queue their making.
            tx.enqueue(JobKind.EMBED, b"{}", services.clock())
    if export.facts or export.passages or export.jobs:
        services.lane.queued()
    return export.memory_id


def check_limits(export: MemoryExport, limits: Limits) -> None:
    """Every message and note of `export` within the importing engine's limits (an export from
    an engine with larger ones may hold more); raises `ExportLimitError` naming the limit."""
    for i, m in enumerate(export.messages):
        limits.check_size(len(m.message), f"exported message {i}", ExportLimitError)
    facts: dict[int, int] = {}
    for f in export.facts:
        facts[f.note] = facts.get(f.note, 0) + 1
    for note in export.notes:
        count = facts.get(note.n, 0)
        over = limits.note_over(note.arguments, count)
        if over is not None:
            raise over.error(f"exported note {note.n}", ExportLimitError)


def _write_history(tx: Transaction, export: MemoryExport, entries: Sequence[Entry]) -> None:
    """The memory (with what it recorded of the blocks it returned), its messages, requests
    and episodes."""
    tx.create_memory(export.format, export.created_at, blocks_tracked=export.blocks_tracked)
    tx.insert_emitted([bytes.fromhex(d) for d in export.emitted])
    instructions = bytes(export.instructions)
    tx.set_instructions(None if instructions == b"null" else instructions)
    tx.set_decorated_through(export.decorated_through)
    tx.insert_messages(
        [
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
    )
    for r in export.requests:
        tx.insert_request(RequestRecord(**msgspec.structs.asdict(r)))
    tx.insert_episodes(export.episodes)


def _write_notes(tx: Transaction, export: MemoryExport) -> None:
    """The notes with their facts and acknowledgements, the traces, the facts block, and the
    graph."""
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


def _write_recall(tx: Transaction, export: MemoryExport) -> None:
    """Passages, recall blocks with their distilled and final texts, and prepared walks."""
    tx.insert_passages(export.passages)
    for recall in export.recalls:
        tx.insert_recall(recall)
    for table, texts in (("distills", export.distills), ("recall_finals", export.recall_finals)):
        for text in texts:
            tx.insert_block_text(table, text)
    for walk in export.walks:
        tx.insert_walk(walk)


def _write_usage(tx: Transaction, export: MemoryExport) -> None:
    """What the memory's own model calls cost (their seconds are not exported)."""
    for u in export.usage:
        spent = UsageRecord(
            kind=u.kind,
            model=u.model,
            tokens_in=u.tokens_in,
            tokens_out=u.tokens_out,
            seconds=0.0,
            tokens_cached=u.tokens_cached,
        )
        tx.insert_usage([spent], u.at)
