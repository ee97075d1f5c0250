"""Replay lines, read and checked, and the steps a memory's lines become.

Input lines follow the replay format of the Contracts (ARCHITECTURE, "Time in replay"):
`{"memory_id": str, "at": ISO 8601 with zone or Unix seconds, "message": <Chat Completions
message or Responses item>}`. A memory's lines become steps:

- leading system/developer messages are the instructions from there on: they ride on the next
  decorate and are never stored as history;
- a reply (assistant messages, function calls, reasoning) right after a request is reported as
  the provider's response, at the reply's own time (a chat completion holds one message, so
  further assistant messages in a row are decorated, each at its own time);
- every other message is decorated at its own time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from .. import wire
from ..errors import FadewayError, ReplayFormatError
from ..export.files import numbered_lines
from ..wire import Format

__all__ = ["ReplayLine", "Step", "check_lines", "format_of", "plan", "read_replay"]


_REPLY_TYPES = ("function_call", "reasoning")


_INSTRUCTION_ROLES = ("system", "developer")


class ReplayLine(msgspec.Struct, frozen=True):
    memory_id: str
    at: float
    message: dict[str, Any]
    where: str = ""  # "file:line" (or file and place), for error messages


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


def _line_error(where: str, exc: Exception) -> ReplayFormatError:
    text = str(exc)
    if not isinstance(exc, msgspec.ValidationError):  # (a ValidationError is a DecodeError)
        return ReplayFormatError(f"{where}: not a complete JSON line ({text})")
    if "missing required field `at`" in text:
        return ReplayFormatError(
            f"{where}: the line has no 'at' (the message's time, ISO 8601 "
            "with zone or Unix seconds); replay needs each message's time"
        )
    return ReplayFormatError(
        f'{where}: {text}; a replay line is {{"memory_id": str, "at": time, "message": {{...}}}}'
    )


def read_replay(path: str | Path) -> Iterator[ReplayLine]:
    """The lines of a replay file, validated one by one; a bad line raises naming file and line."""
    decoder = msgspec.json.Decoder(_RawLine)
    for where, line in numbered_lines(path):
        try:
            raw = decoder.decode(line)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise _line_error(where, exc) from None
        if not raw.memory_id:
            raise ReplayFormatError(f"{where}: 'memory_id' must not be empty")
        yield ReplayLine(raw.memory_id, _seconds(raw.at, where), raw.message, where)


def _is_reply(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant" or message.get("type") in _REPLY_TYPES


def _is_instruction(message: dict[str, Any]) -> bool:
    return message.get("role") in _INSTRUCTION_ROLES and message.get("type", "message") == "message"


def format_of(lines: Sequence[ReplayLine]) -> Format:
    """Responses when any line is a typed item, else Chat Completions (whose messages never are)."""
    return (
        Format.RESPONSES
        if any("type" in line.message for line in lines)
        else (Format.CHAT_COMPLETIONS)
    )


def check_lines(lines: Sequence[ReplayLine]) -> Format:
    """Validate one memory's lines as its history (a tool output needs an earlier call, every
    message must be one of its format's); returns the memory's wire format."""
    fmt = format_of(lines)
    made: set[str] = set()
    for line in lines:
        if _is_instruction(line.message):
            continue
        try:
            entry = wire.entry(fmt, line.message, "the message", made.__contains__)
        except FadewayError as exc:
            raise ReplayFormatError(f"{line.where}: {exc}") from None
        made.update(entry.calls)
    return fmt


@dataclass(frozen=True, slots=True)
class Step:
    """One decorate (of one message) or one report (of the reply lines), in one transaction."""

    kind: str  # "decorate" or "report"
    lines: tuple[ReplayLine, ...]  # the messages it stores
    instructions: tuple[dict[str, Any], ...] = ()  # sent with a decorate when they changed

    @property
    def at(self) -> float:
        return self.lines[0].at


def plan(lines: Iterable[ReplayLine], fmt: Format = Format.CHAT_COMPLETIONS) -> list[Step]:
    """The steps that replay one memory's lines; each stores at least one message, and the
    stored messages are the lines that are not instructions, in order."""
    steps: list[Step] = []
    instructions: list[dict[str, Any]] = []
    instructions_done = True  # the last instruction lines were attached to a decorate
    instructions_where = ""
    reply: list[ReplayLine] = []
    requested = False

    def decorate(line: ReplayLine) -> None:
        nonlocal instructions_done, requested
        sent = () if instructions_done else tuple(instructions)
        steps.append(Step("decorate", (line,), sent))
        instructions_done, requested = True, True

    def flush() -> None:
        nonlocal requested
        if not reply:
            return
        if fmt is Format.RESPONSES:
            steps.append(Step("report", tuple(reply)))
            requested = False
        else:  # a chat completion holds one message; the rest are sent as history
            steps.append(Step("report", (reply[0],)))
            requested = False
            for line in reply[1:]:
                decorate(line)
        reply.clear()

    for line in lines:
        if _is_instruction(line.message):
            flush()  # new instructions end a reply; they go with the next decorate
            if instructions_done:
                instructions.clear()
            instructions.append(line.message)
            instructions_done, instructions_where = False, line.where
            continue
        if requested and _is_reply(line.message):
            reply.append(line)
            continue
        flush()
        decorate(line)
    flush()
    if not instructions_done:
        raise ReplayFormatError(
            f"{instructions_where}: instructions (a system or developer "
            "message) with no later message of the memory to send them with"
        )
    return steps
