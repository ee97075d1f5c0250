"""The view: what of the history a request shows, and fadeway's own additions to it
(MECHANISM: "What the model sees").

Sealed and forgotten episodes' messages leave the view; every note call fadeway asked for is
answered with its own tool output, so the provider never sees an unanswered call; the facts
block follows the caller's instructions and the note ask ends the request, each in the
instructions' role. Those additions are recognised when a caller sends them back, and never
stored as the caller's messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from . import blocks, notes
from .errors import InvalidRequestError
from .formats import Format
from .history import History

__all__ = ["instruction_role", "block_message", "strip_own_additions", "is_user_message",
           "last_user_messages", "history_view", "view_seqs", "with_note_tool", "note_ask_allowed",
           "caller_tools"]


def instruction_role(fmt: Format, instructions: Sequence[Any]) -> str:
    """Our blocks' role: system, or developer when the caller's instructions are developer
    messages, and always developer for Responses."""
    if fmt is Format.RESPONSES:
        return "developer"
    roles = [m.get("role") if isinstance(m, dict) else getattr(m, "role", None)
             for m in instructions]
    return "developer" if "developer" in roles and "system" not in roles else "system"


def block_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


def _own_addition(m: Any, note_calls: dict[str, int]) -> bool:
    """Whether a sent message is one of fadeway's blocks or its output for its own note call."""
    if not isinstance(m, dict):
        return False
    role = m.get("role")
    if role in ("system", "developer"):
        return blocks.is_block(m.get("content"))
    return bool(note_calls) and (
        (role == "tool" and m.get("tool_call_id") in note_calls)
        or (m.get("type") == "function_call_output" and m.get("call_id") in note_calls))


def strip_own_additions(messages: Sequence[Any], note_calls: dict[str, int]) -> list[Any]:
    """`messages` without fadeway's blocks and its outputs for its own note calls."""
    return [m for m in messages if not _own_addition(m, note_calls)]


def is_user_message(message: Any) -> bool:
    """Whether a sent item is a user's message (not a tool output or another kind of item)."""
    return isinstance(message, dict) and message.get("role") == "user" and (
        message.get("type") in (None, "message"))


def last_user_messages(messages: Sequence[Any],
                       note_calls: dict[str, int]) -> list[tuple[int, Any]]:
    """The user messages that end `messages` once fadeway's additions are stripped, in order,
    each with its index in `messages`: the messages no reply has followed yet (empty when the
    last message is not a user's)."""
    run: list[tuple[int, Any]] = []
    for i in range(len(messages) - 1, -1, -1):
        if _own_addition(messages[i], note_calls):
            continue
        if not is_user_message(messages[i]):
            break
        run.append((i, messages[i]))
    return run[::-1]


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


def history_view(fmt: Format, history: History, seqs: Sequence[int], accepted: dict[str, bool],
                 before: dict[int, Any] | None = None) -> list[Any]:
    """The stored messages `seqs` (what `view_seqs` leaves in view), each note call followed by
    fadeway's output for it, and the `before` messages (recall blocks) just before the seqs
    they belong to."""
    if not seqs:
        return []
    view = msgspec.json.decode(b"[" + b",".join(map(history.bodies.__getitem__, seqs)) + b"]")
    if not history.note_calls and not before:
        return view
    by_seq: dict[int, list[str]] = {}
    for call_id, seq in history.note_calls.items():
        by_seq.setdefault(seq, []).append(call_id)
    out: list[Any] = []
    before = before or {}
    for message, seq in zip(view, seqs, strict=True):
        if seq in before:
            out.append(before[seq])
        out.append(message)
        for call_id in by_seq.get(seq, ()):
            out.append(notes.note_output(fmt, call_id, accepted.get(call_id, False)))
    return out


def note_ask_allowed(request: dict[str, Any]) -> bool:
    """fadeway never overrides the caller's tool_choice: while it is "none" or forces another
    tool, the ask waits for a call that allows it."""
    choice = request.get("tool_choice")
    if choice is None or choice in ("auto", "required"):
        return True
    if choice == "none":
        return False
    if isinstance(choice, dict):
        name = choice.get("name") or (choice.get("function") or {}).get("name")
        if choice.get("type") == "allowed_tools":
            return False
        return name == notes.NOTE_TOOL_NAME
    return False


def caller_tools(fmt: Format, request: dict[str, Any]) -> dict[str, Any]:
    """`request` with the caller's own tools only: fadeway's note tool, in a decorated request
    sent back, is left out (`with_note_tool` adds it again while a note is asked). The name
    `note` is fadeway's: a tool of the caller's so named is refused, since its calls could not
    be told from the note's, nor a request offer both."""
    tools = request.get("tools")
    if not isinstance(tools, list) or not tools:
        return request
    ours = notes.note_tool(fmt)
    kept = []
    for i, tool in enumerate(tools):
        if tool == ours:
            continue
        if isinstance(tool, dict) and tool.get("type") == "function" and notes.NOTE_TOOL_NAME in (
                tool.get("name"), (tool.get("function") or {}).get("name")):
            raise InvalidRequestError(
                f"tools[{i}] is named {notes.NOTE_TOOL_NAME!r}, the name of fadeway's note tool "
                "(the model writes its notes with it while history leaves the view); give your "
                "tool another name")
        kept.append(tool)
    if len(kept) == len(tools):
        return request
    out = dict(request)
    if kept:
        out["tools"] = kept
    else:
        del out["tools"]
    return out


def with_note_tool(fmt: Format, request: dict[str, Any]) -> dict[str, Any]:
    """The request with the note tool added to its tools (created when it had none)."""
    tools = list(request.get("tools") or [])
    tools.append(notes.note_tool(fmt))
    return {**request, "tools": tools}
