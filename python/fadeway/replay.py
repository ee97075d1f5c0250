"""Replaying stored conversations through decorate/report, each message at its own time.

Input lines follow the replay format of the Contracts (ARCHITECTURE): `{"memory_id": str, "at":
ISO 8601 with zone or Unix seconds, "message": <Chat Completions message or Responses item>}`.
A reply (an assistant message or output item right after a request) is reported as the
provider's response; every other message is decorated, each at its own timestamp.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from .errors import FadewayError
from .memory import Memory
from .note_writer import NoteWriter

__all__ = ["ReplayLine", "ReplayFormatError", "read_replay", "replay"]


class ReplayFormatError(FadewayError, ValueError):
    """A replay input line is malformed; the message names the file and the line."""


class ReplayLine(msgspec.Struct, frozen=True):
    memory_id: str
    at: float
    message: dict[str, Any]


class _RawLine(msgspec.Struct, frozen=True):
    memory_id: str
    at: str | float | int
    message: dict[str, Any]


def _seconds(at: str | float | int, where: str) -> float:
    if isinstance(at, str):
        try:
            parsed = datetime.fromisoformat(at.replace("Z", "+00:00"))
        except ValueError:
            raise ReplayFormatError(f"{where}: 'at' is not ISO 8601: {at!r}") from None
        if parsed.tzinfo is None:
            raise ReplayFormatError(f"{where}: 'at' has no time zone: {at!r}")
        return parsed.timestamp()
    if isinstance(at, bool) or not math.isfinite(at):
        raise ReplayFormatError(f"{where}: 'at' must be ISO 8601 or Unix seconds, not {at!r}")
    return float(at)


def read_replay(path: str | Path) -> Iterator[ReplayLine]:
    """The lines of a replay file, validated; a bad line raises naming the file and line."""
    decoder = msgspec.json.Decoder(_RawLine)
    with open(path, "rb") as fp:
        for number, line in enumerate(fp, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                raw = decoder.decode(line)
            except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                raise ReplayFormatError(f"{where}: {exc}") from None
            yield ReplayLine(raw.memory_id, _seconds(raw.at, where), raw.message)


def _is_reply(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant" or message.get("type") in (
        "function_call", "reasoning")


def replay(memory: Memory, lines: Iterable[ReplayLine], *, model: str = "gpt-4.1",
           fmt: str = "chat_completions", note_writer: NoteWriter | None = None) -> int:
    """Replay `lines` of one memory; returns how many messages were sent through.

    Replies recorded right after a request are reported as chat completions (or responses) with
    no token usage; everything else is decorated as new messages at its own time. A recorded
    reply cannot answer a note ask: when one is pending after a reply, `note_writer` answers it.
    """
    key = "messages" if fmt == "chat_completions" else "input"
    last_request: dict[str, Any] | None = None
    pending_reply: list[dict[str, Any]] = []
    reply_at = 0.0
    count = 0

    def flush_reply() -> None:
        nonlocal last_request
        if last_request is not None and pending_reply:
            if fmt == "chat_completions":
                response = {"choices": [{"index": 0, "message": pending_reply[0],
                                         "finish_reason": "stop"}]}
            else:
                response = {"output": list(pending_reply)}
            memory.report(last_request, response, at=reply_at)
            if note_writer is not None:
                memory.answer_ask(note_writer, at=reply_at)
            rest = pending_reply[1:] if fmt == "chat_completions" else []
            last_request = None
            pending_reply.clear()
            for message in rest:  # further assistant messages in a row: sent as history
                last_request = memory.decorate({"model": model, key: [message]}, at=reply_at)

    for line in lines:
        count += 1
        if _is_reply(line.message) and last_request is not None:
            pending_reply.append(line.message)
            reply_at = line.at
            continue
        flush_reply()
        last_request = memory.decorate({"model": model, key: [line.message]}, at=line.at)
    flush_reply()
    return count
