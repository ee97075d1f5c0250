"""The view: what of the history a request shows, and fadeway's own additions to it
(MECHANISM: "What the model sees").

Sealed and forgotten episodes' messages leave the view; every note call fadeway asked for is
answered with its own tool output, so the provider never sees an unanswered call; the facts
block follows the caller's instructions and the note ask ends the request, each in the
instructions' role. Those additions are recognised when a caller sends them back, and never
stored as the caller's messages: a block by what fadeway recorded of the blocks it returned
(`emitted_blocks`), not by its look alone, so a caller's own message that reads like one is the
caller's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import numpy as np

from .. import blocks
from ..mirror.history import History
from ..notes import tool as notes
from ..records import EpisodeRecord, MemoryRecord
from ..store import Transaction
from ..wire import Format
from ..wire.canonical import to_plain
from ..wire.responses import CLIENT_CALL_TYPES

__all__ = [
    "instruction_role",
    "block_message",
    "block_digest",
    "emitted_blocks",
    "own_additions",
    "strip_own_additions",
    "history_view",
    "resolvable",
    "stateless",
    "view_seqs",
]


def instruction_role(fmt: Format, instructions: Sequence[Any]) -> str:
    """Our blocks' role: system, or developer when the caller's instructions are developer
    messages, and always developer for Responses."""
    if fmt is Format.RESPONSES:
        return "developer"
    roles = [
        m.get("role") if isinstance(m, dict) else getattr(m, "role", None) for m in instructions
    ]
    return "developer" if "developer" in roles and "system" not in roles else "system"


def block_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


def _made_calls(m: Any) -> dict[str, bool]:
    """The calls a sent message or item makes, by id: whether each is a note call."""
    if not isinstance(m, dict):
        if not (getattr(m, "tool_calls", None) or getattr(m, "type", None) in CLIENT_CALL_TYPES):
            return {}
        m = to_plain(m, "message")  # an SDK object's calls count as made all the same
    if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list):
        made: dict[str, bool] = {}
        _chat_calls(m["tool_calls"], made)
        return made
    if m.get("type") in CLIENT_CALL_TYPES and isinstance(m.get("call_id"), str):
        return {m["call_id"]: notes.is_note_call(Format.RESPONSES, m)}
    return {}


def _chat_calls(calls: Any, into: dict[str, bool]) -> None:
    """Each Chat Completions tool call in `calls` into `into`, by id: whether it is a note call."""
    for c in calls:
        if type(c) is dict and type(call_id := c.get("id")) is str:
            into[call_id] = notes.is_note_call(Format.CHAT_COMPLETIONS, c)


def _answered(m: Any) -> str | None:
    """The call a sent tool output answers; None for anything else."""
    if not isinstance(m, dict):
        return None
    call_id = (
        m.get("tool_call_id")
        if m.get("role") == "tool"
        else (m.get("call_id") if m.get("type") == "function_call_output" else None)
    )
    return call_id if isinstance(call_id, str) else None


def _is_block(m: Any) -> bool:
    return (
        type(m) is dict
        and m.get("role") in ("system", "developer")
        and blocks.is_block(m.get("content"))
    )


def block_digest(text: str) -> bytes:
    """What the store keeps of a block text fadeway returned (`Transaction.insert_emitted`)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _by_look(text: str) -> bool:
    return True


def emitted_blocks(
    tx: Transaction, memory: MemoryRecord | None, *sent: Sequence[Any]
) -> Callable[[str], bool]:
    """Which texts of the system and developer messages in the `sent` lists that look like
    fadeway's blocks are blocks fadeway returned in a request of this memory: the predicate
    `own_additions` takes, read now through `tx`. A memory from before fadeway kept what it
    returned (`blocks_tracked` False) recognises its blocks by their look alone; one not
    created yet returned none."""
    if memory is not None and not memory.blocks_tracked:
        return _by_look
    texts = {m["content"] for messages in sent for m in messages if _is_block(m)}
    if memory is None or not texts:
        return frozenset[str]().__contains__
    by_digest = {block_digest(text): text for text in texts}
    return frozenset(by_digest[d] for d in tx.emitted_among(list(by_digest))).__contains__


def own_additions(
    messages: Sequence[Any],
    answers_note: Callable[[str], bool],
    emitted: Callable[[str], bool],
) -> list[bool]:
    """For each sent message, whether it is one of fadeway's additions: a block it returned, or
    its output for a note call. A block is a system or developer message whose text reads as
    one (`blocks.is_block`) and that `emitted` (`emitted_blocks`) says fadeway returned.
    An output answers the latest call of its id before it in `messages`
    or, when `messages` makes none, the one `answers_note(call_id)` tells of (the stored
    history's latest): some providers give every turn's calls the same ids again."""
    latest: dict[str, bool] = {}  # call id → whether its latest call so far is a note call
    out = [False] * len(messages)
    for i, m in enumerate(messages):  # one pass over a long history: kept to plain lookups
        if type(m) is not dict:
            latest.update(_made_calls(m))
            continue
        role = m.get("role")
        answered = None
        if role == "user":
            continue
        if role == "assistant":
            if calls := m.get("tool_calls"):
                _chat_calls(calls, latest)
        elif role == "tool":
            answered = m.get("tool_call_id")
        elif role is None:
            kind = m.get("type")
            if kind == "function_call_output":
                answered = m.get("call_id")
            elif kind in CLIENT_CALL_TYPES:
                latest.update(_made_calls(m))
        elif role == "system" or role == "developer":
            text = m.get("content")
            out[i] = isinstance(text, str) and blocks.is_block(text) and emitted(text)
        if type(answered) is str:
            out[i] = latest[answered] if answered in latest else answers_note(answered)
    return out


def strip_own_additions(
    messages: Sequence[Any],
    answers_note: Callable[[str], bool],
    emitted: Callable[[str], bool],
) -> list[Any]:
    """`messages` without fadeway's blocks and its outputs for its own note calls
    (`own_additions`)."""
    own = own_additions(messages, answers_note, emitted)
    return [m for m, mine in zip(messages, own, strict=True) if not mine]


def view_seqs(count: int, hidden: Sequence[tuple[int, int]] | np.ndarray) -> list[int]:
    """The seqs of `count` stored messages that are not in the `hidden` ranges (first and last
    seq, inclusive; pairs, or an array of two columns)."""
    ranges = np.asarray(hidden, dtype=np.int64).reshape(-1, 2)
    ranges = ranges[ranges[:, 0] <= ranges[:, 1]]
    if not len(ranges):
        return list(range(count))
    # +1 where a range starts, -1 after it ends: a seq is hidden where the running sum is above 0.
    marks = np.zeros(count + 1, dtype=np.int64)
    np.add.at(marks, np.clip(ranges[:, 0], 0, count), 1)
    np.add.at(marks, np.clip(ranges[:, 1] + 1, 0, count), -1)
    return np.flatnonzero(np.cumsum(marks[:-1]) <= 0).tolist()


def stateless(fmt: Format, request: dict[str, Any]) -> bool:
    """Whether the provider keeps no items for `request` (Responses with `store: false`), so a
    reasoning item sent back by id alone is refused ("Item with id 'rs_...' not found")."""
    return fmt is Format.RESPONSES and request.get("store") is False


def resolvable(history: History, seqs: Sequence[int]) -> list[int]:
    """`seqs` without the stored reasoning items that carry no encrypted content, which a
    provider keeping no items cannot resolve by their id (see `stateless`)."""
    return [
        seq
        for seq in seqs
        if history.row_kinds[seq] != "reasoning"
        or msgspec.json.decode(history.bodies[seq]).get("encrypted_content")
    ]


def history_view(
    fmt: Format,
    history: History,
    seqs: Sequence[int],
    accepted: dict[tuple[int, str], bool],
    before: dict[int, Any] | None = None,
    stubs: dict[int, Any] | None = None,
) -> list[Any]:
    """The stored messages `seqs` (what `view_seqs` leaves in view), each note call followed by
    fadeway's output for it, and the `before` messages (recall blocks) just before the seqs
    they belong to; a message in `stubs` as shown there (its note call too large to show)."""
    if not seqs:
        return []
    view = msgspec.json.decode(b"[" + b",".join(map(history.bodies.__getitem__, seqs)) + b"]")
    if not history.note_calls and not before:
        return view
    out: list[Any] = []
    before, stubs = before or {}, stubs or {}
    for message, seq in zip(view, seqs, strict=True):
        if seq in before:
            out.append(before[seq])
        out.append(stubs.get(seq, message))
        for call_id in history.note_calls.get(seq, ()):
            out.append(notes.note_output(fmt, call_id, accepted.get((seq, call_id), False)))
    return out


def hidden_ranges(episodes: Sequence[EpisodeRecord]) -> list[tuple[int, int]]:
    """Seq ranges out of view: the messages of sealed and forgotten episodes."""
    return [(e.first_seq, e.last_seq) for e in episodes if e.state in ("sealed", "forgotten")]
