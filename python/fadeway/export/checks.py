"""Checking an export before it is imported: it must be what fadeway could have written
(ARCHITECTURE: "What bad input gets"); every message is validated again, and the blocks it
carries are resealed so that no stored text can close one early."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from .. import blocks, wire
from ..errors import FadewayError, InvalidExportError
from ..records import EXPORT_VERSION, MemoryExport
from ..wire import Entry, Format, chat_completions, responses
from ..wire.canonical import check_depth
from .ranges import check_numbers

__all__ = ["check_export", "decode_export", "resealed"]

_decoder = msgspec.json.Decoder(MemoryExport)


def decode_export(data: bytes | str, where: str = "") -> MemoryExport:
    """One export document from its JSON; `InvalidExportError` (prefixed by `where`, a file's
    line) when it is not JSON or not an export."""
    try:
        return _decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise InvalidExportError(f"{where}not a fadeway memory export: {exc}") from None
    except msgspec.DecodeError as exc:
        raise InvalidExportError(f"{where}not JSON: {exc}") from None
    except RecursionError:  # what a message holds is nested: refused before anything reads it
        raise InvalidExportError(
            f"{where}the export nests its JSON deeper than recursion goes"
        ) from None


def check_export(doc: MemoryExport) -> list[Entry]:
    """What `engine.import_memory` checks before it writes; returns the messages' entries.
    Raises `InvalidExportError`.

    An export may come from elsewhere, and what it holds goes back into requests: its version,
    format and memory id; every message valid in order (a tool output after its call), and the
    caller's instructions only system or developer messages; its facts and recall blocks
    blocks indeed (`resealed` neutralises what is inside them again), and the digests of
    the blocks it returned each 32 lowercase hex digits; episodes that tile the
    history they cover in order, none sealed or forgotten without a note taken for it; facts
    and recall blocks that point at what the export holds; every number and time one fadeway
    could have written (`ranges`); and the queued jobs pending or parked, their payloads JSON
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
            entry = wire.entry(
                fmt,
                _decoded(m.message, f"exported message {i}"),
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
    _check_emitted(doc)
    check_numbers(doc)  # last: the checks above say more where they apply
    for i, job in enumerate(doc.jobs):
        if job.state not in ("pending", "failed") or job.attempts < 0:
            raise InvalidExportError(
                f"job {i} of the export ({job.kind}) is in state {job.state!r} with "
                f"{job.attempts} attempts; an exported job is pending or failed (parked), "
                "with attempts not below 0"
            )
        try:
            payload = _decoded(job.payload, f"job {i} of the export")
        except InvalidExportError:
            payload = None
        if not isinstance(payload, dict):
            raise InvalidExportError(
                f"job {i} of the export ({job.kind}) has a payload that is not a JSON object"
            )
    return entries


def _decoded(raw: msgspec.Raw | bytes, where: str) -> Any:
    """The JSON value of raw JSON the export holds (a message, a payload): its nesting is
    checked first, on the bytes, and text that is not UTF-8 is refused."""
    data = bytes(raw)
    check_depth(data, where, InvalidExportError)
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise InvalidExportError(f"{where} is not JSON: {exc}") from None


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
        saved = _decoded(raw, "the export's instructions")
    except InvalidExportError:
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


def _check_emitted(doc: MemoryExport) -> None:
    """Whether the memory tracks its blocks is a boolean, and each digest of a block it
    returned is what `block_digest` gives, as hex: 32 lowercase hex digits."""
    if type(doc.blocks_tracked) is not bool:
        raise InvalidExportError(
            f"the export's blocks_tracked is {doc.blocks_tracked!r}, not true or false"
        )
    if not isinstance(doc.emitted, list):
        raise InvalidExportError("the export's emitted is not a list of hex digests")
    for i, digest in enumerate(doc.emitted):
        if not (isinstance(digest, str) and _HEX_DIGEST.fullmatch(digest)):
            raise InvalidExportError(
                f"the export's emitted[{i}] is {digest!r:.80}, not a block's digest "
                "(32 lowercase hex digits)"
            )


_HEX_DIGEST = re.compile(r"[0-9a-f]{32}")


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
