"""Memory exports: one memory read from the store as a document, JSON and JSONL writers and
readers, and export files checked and imported line by line (one memory in memory at a time, so
a large store streams).

Beside everything derived from the inputs and the clock (ARCHITECTURE: "Export"), a document
holds the lane's pending jobs but embedding (`MemoryExport.jobs`): the work still to do when it
was taken, which the copy then does. A memory whose lane has run (a replay drained, say) has
none, so two replays of one input still export identically."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING

import msgspec

from . import blocks
from . import wire as formats
from .errors import FadewayError, ImportConflictError, InvalidExportError, MemoryNotFoundError
from .records import (
    EXPORT_VERSION,
    ExportedJob,
    ExportedMessage,
    ExportedRequest,
    ExportedUsage,
    MemoryExport,
)
from .wire import Entry, Format, chat_completions, responses

if TYPE_CHECKING:
    from .engine import Engine
    from .store import Transaction

__all__ = [
    "export_memory",
    "dumps",
    "loads",
    "write_jsonl",
    "read_jsonl",
    "check_export",
    "read_export_file",
    "numbered_lines",
    "check_export_file",
    "import_file",
]

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


def check_export(doc: MemoryExport) -> list[Entry]:
    """What `engine.import_memory` checks before it writes; returns the messages' entries.
    Raises `InvalidExportError`.

    An export may come from elsewhere, and what it holds goes back into requests: its version,
    format and memory id; every message valid in order (a tool output after its call), and the
    caller's instructions only system or developer messages; its facts and recall blocks
    blocks indeed (`resealed` neutralises what is inside them again); episodes that tile the
    history they cover in order, none sealed or forgotten without a note taken for it; facts
    and recall blocks that point at what the export holds; and the queued jobs' payloads JSON
    objects."""
    if doc.fadeway_export != EXPORT_VERSION:
        raise InvalidExportError(
            f"export version {doc.fadeway_export} is not supported (this "
            f"fadeway reads version {EXPORT_VERSION})"
        )
    if doc.format not in {f.value for f in Format}:
        raise InvalidExportError(f"unknown format {doc.format!r} in export")
    if not doc.memory_id:
        raise InvalidExportError("the export's memory_id is empty")
    fmt = Format(doc.format)
    made: set[str] = set()
    entries = []
    turn = 0
    for i, m in enumerate(doc.messages):
        if m.seq != i:
            raise InvalidExportError(f"message {i} of the export has seq {m.seq}")
        if m.turn < turn:
            raise InvalidExportError(
                f"message {i} of the export is in turn {m.turn}, before "
                f"the turn {turn} of the message before it"
            )
        turn = m.turn
        try:
            entry = formats.entry(
                fmt,
                msgspec.json.decode(m.message),
                f"exported message {i}",
                made.__contains__,
                body=bytes(m.message),
            )
        except FadewayError as exc:
            raise InvalidExportError(str(exc)) from None
        made.update(entry.calls)
        entries.append(entry)
    _check_instructions(fmt, bytes(doc.instructions))
    _check_episodes(doc)
    _check_blocks(doc)
    for i, job in enumerate(doc.jobs):
        try:
            payload = msgspec.json.decode(job.payload)
        except msgspec.DecodeError:
            payload = None
        if not isinstance(payload, dict):
            raise InvalidExportError(
                f"job {i} of the export ({job.kind}) has a payload that is not a JSON object"
            )
    return entries


def resealed(doc: MemoryExport) -> MemoryExport:
    """`doc` (checked) with its facts and recall blocks resealed (`blocks.resealed`): what an
    older fadeway stored, or what another writer put there, cannot open or close a block in
    the copy. A block fadeway writes now comes out as it went in."""

    def recall(text: str) -> str:
        return blocks.resealed(text, "recall") or text

    return msgspec.structs.replace(
        doc,
        facts_block=doc.facts_block
        and (blocks.resealed(doc.facts_block, "facts") or doc.facts_block),
        recalls=[msgspec.structs.replace(r, text=recall(r.text)) for r in doc.recalls],
        distills=[msgspec.structs.replace(r, text=r.text and recall(r.text)) for r in doc.distills],
        recall_finals=[
            msgspec.structs.replace(r, text=r.text and recall(r.text)) for r in doc.recall_finals
        ],
    )


def _check_instructions(fmt: Format, raw: bytes) -> None:
    """The caller's instructions as a memory keeps them: null, or {"instructions": the
    Responses field, "messages": the leading system and developer messages}."""
    if raw == b"null":
        return
    try:
        saved = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        saved = None
    if not (
        isinstance(saved, dict)
        and set(saved) == {"instructions", "messages"}
        and isinstance(saved["messages"], list)
    ):
        raise InvalidExportError(
            'the export\'s instructions are not null nor {"instructions": ..., "messages": [...]}'
        )
    # As decorate takes them: the leading system or developer messages as sent, and the
    # request's own `instructions` field, which a list may give as messages of those roles.
    split = (chat_completions if fmt is Format.CHAT_COMPLETIONS else responses).split
    field = saved["instructions"]
    for what, messages in (
        ("instructions", saved["messages"]),
        ("instructions field", field if isinstance(field, list) else []),
    ):
        lead, rest = split(messages)
        if rest:
            raise InvalidExportError(
                f"the export's {what} hold message {len(lead)}, which is "
                "not a system or developer message"
            )


def _check_episodes(doc: MemoryExport) -> None:
    acked = {episode for episode, _ in doc.acks}
    notes = {note.n for note in doc.notes}
    if any(note not in notes for _, note in doc.acks):
        raise InvalidExportError("the export acknowledges episodes by a note it does not hold")
    following = 0
    for i, e in enumerate(doc.episodes):
        if e.n != i + 1 or e.first_seq != following or e.last_seq < e.first_seq:
            raise InvalidExportError(
                f"episode {i + 1} of the export (n {e.n}, messages {e.first_seq}-{e.last_seq}) "
                f"does not follow the one before it (which ends before message {following})"
            )
        if e.last_seq >= len(doc.messages):
            raise InvalidExportError(
                f"episode {e.n} of the export ends at message {e.last_seq}, "
                f"past the {len(doc.messages)} messages it holds"
            )
        if e.state not in ("live", "leaving", "sealed", "forgotten"):
            raise InvalidExportError(f"episode {e.n} of the export is in state {e.state!r}")
        if e.state in ("sealed", "forgotten") and e.n not in acked:
            raise InvalidExportError(
                f"episode {e.n} of the export is {e.state} but no note was taken for it"
            )
        following = e.last_seq + 1


def _check_blocks(doc: MemoryExport) -> None:
    if doc.facts_block is not None and blocks.resealed(doc.facts_block, "facts") is None:
        raise InvalidExportError("the export's facts block is not a facts block")
    facts = {f.n for f in doc.facts}
    if doc.facts_order is not None and not facts.issuperset(doc.facts_order):
        raise InvalidExportError("the export's facts order names facts it does not hold")
    for kind, records in (
        ("recall", doc.recalls),
        ("distilled", doc.distills),
        ("final", doc.recall_finals),
    ):
        for r in records:
            if r.text is not None and blocks.resealed(r.text, "recall") is None:
                raise InvalidExportError(
                    f"the export's {kind} block for turn {r.turn} is not a recall block"
                )
    for r in doc.recalls:
        if not 0 <= r.seq < len(doc.messages) or doc.messages[r.seq].turn != r.turn:
            raise InvalidExportError(
                f"the export's recall block for turn {r.turn} stands before "
                f"message {r.seq}, which is not in that turn"
            )


def numbered_lines(path: str | Path) -> Iterator[tuple[str, bytes]]:
    """("file:line", line) for each non-blank line of a JSONL file, read one at a time."""
    with open(path, "rb") as fp:
        for number, line in enumerate(fp, 1):
            if line.strip():
                yield f"{path}:{number}", line


def read_export_file(path: str | Path) -> Iterator[tuple[str, MemoryExport]]:
    """("file:line", export) for each line of a JSONL file of exports, decoded one at a time."""
    for where, line in numbered_lines(path):
        try:
            yield where, _decoder.decode(line)
        except msgspec.DecodeError as exc:
            raise InvalidExportError(f"{where}: not a complete JSON line ({exc})") from None
        except msgspec.ValidationError as exc:
            raise InvalidExportError(f"{where}: not a fadeway memory export: {exc}") from None


def check_export_file(path: str | Path) -> dict[str, str]:
    """Check every export of a file before anything is imported; returns memory id → its line."""
    seen: dict[str, str] = {}
    for where, doc in read_export_file(path):
        try:
            check_export(doc)
        except InvalidExportError as exc:
            raise InvalidExportError(f"{where}: {exc}") from None
        if doc.memory_id in seen:
            raise InvalidExportError(
                f"{where}: memory {doc.memory_id!r} is exported twice "
                f"(also at {seen[doc.memory_id]})"
            )
        seen[doc.memory_id] = where
    return seen


def import_file(engine: Engine, path: str | Path) -> tuple[list[str], list[str]]:
    """Import every export of a checked file, one line at a time: (imported, skipped) ids.

    A memory the store already holds exactly as exported is skipped, so importing a file twice
    adds nothing; one that holds something else is an `ImportConflictError` naming the line.
    Call `check_export_file` first so that a bad line stops the import before it starts.
    """
    imported: list[str] = []
    skipped: list[str] = []
    present = set(engine.memory_ids())
    same: set[str] = set()
    for where, doc in read_export_file(path) if present else ():  # conflicts first
        if doc.memory_id in present:
            if dumps(engine.memory(doc.memory_id).export()) != dumps(doc):
                raise ImportConflictError(
                    f"{where}: memory {doc.memory_id!r} already holds "
                    "something else; import restores into an empty memory"
                )
            same.add(doc.memory_id)
    for _, doc in read_export_file(path):
        if doc.memory_id in same:
            skipped.append(doc.memory_id)
        else:
            engine.import_memory(doc)
            imported.append(doc.memory_id)
    return imported, skipped
