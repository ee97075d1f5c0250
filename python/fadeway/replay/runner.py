"""Replaying stored conversations through decorate/report, each message at its own time.

Input lines follow the replay format of the Contracts (ARCHITECTURE, "Time in replay"):
`{"memory_id": str, "at": ISO 8601 with zone or Unix seconds, "message": <Chat Completions
message or Responses item>}`. A memory's lines become steps:

- leading system/developer messages are the instructions from there on: they ride on the next
  decorate and are never stored as history;
- a reply (assistant messages, function calls, reasoning) right after a request is reported as
  the provider's response, at the reply's own time (a chat completion holds one message, so
  further assistant messages in a row are decorated, each at its own time);
- every other message is decorated at its own time.

Each step stores its messages in one transaction, so the number of messages a memory holds says
which steps are done: `replay_memory` resumes after the last one, and a replay run twice adds
nothing. It also runs the memory's lane after every step and has the note writer answer every
ask after a report, so a resumed replay makes exactly the store an uninterrupted one makes.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from .. import wire as formats
from ..errors import EndpointError, FadewayError
from ..export import numbered_lines
from ..lane.worker import idle_wait, run_lane
from ..memory import Memory
from ..notes.writers import NoteWriter, NoteWriterError
from ..wire import Format, text_of
from ..wire.canonical import digest_of

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = [
    "ReplayLine",
    "ReplayFormatError",
    "Step",
    "read_replay",
    "check_lines",
    "plan",
    "replay",
    "replay_memory",
    "DEFAULT_MODEL",
]

log = logging.getLogger("fadeway.replay")

#: The model named in replayed requests (it picks the token encoding: o200k_base).
DEFAULT_MODEL = "gpt-4.1"
_REPLY_TYPES = ("function_call", "reasoning")
_INSTRUCTION_ROLES = ("system", "developer")


class ReplayFormatError(FadewayError, ValueError):
    """A replay input is malformed; the message names the file and the line."""


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


# -- steps ------------------------------------------------------------------------------------


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
            entry = formats.entry(fmt, line.message, "the message", made.__contains__)
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


def _essence(message: dict[str, Any]) -> tuple:
    calls = tuple(c.get("id") for c in message.get("tool_calls") or () if isinstance(c, dict))
    return (
        message.get("role"),
        message.get("type") or "message",
        tuple(text_of(message)),
        calls,
        message.get("call_id"),
    )


class _Runner:
    """Runs steps against one memory, sending one message per decorate, or the whole history
    when the message repeats an earlier one (a lone repeat could be read as a resent head or
    as an echo of the stored reply; the whole history cannot)."""

    def __init__(
        self,
        memory: Memory,
        fmt: Format,
        model: str,
        note_writer: NoteWriter | None,
        history: list[dict[str, Any]],
    ) -> None:
        self.memory = memory
        self.key = "messages" if fmt is Format.CHAT_COMPLETIONS else "input"
        self.fmt = fmt
        self.model = model
        self.note_writer = note_writer
        self.history = history  # the messages stored so far, as sent
        self.seen = {_essence(m) for m in history}
        self.last_request: dict[str, Any] | None = None

    def run(self, step: Step) -> None:
        if step.kind == "report":
            self.report(step)
        else:
            self.decorate(step)

    def decorate(self, step: Step) -> None:
        message = step.lines[0].message
        essence = _essence(message)
        sent = self.history + [message] if essence in self.seen else [message]
        self.last_request = self.memory.decorate(
            {"model": self.model, self.key: [*step.instructions, *sent]}, at=step.at
        )
        self.seen.add(essence)
        self.history.append(message)

    def report(self, step: Step) -> None:
        request = self.last_request
        if request is None:
            raise RuntimeError("a report step needs the request decorated before it")
        items = [line.message for line in step.lines]
        if self.fmt is Format.CHAT_COMPLETIONS:
            response: dict[str, Any] = {
                "choices": [{"index": 0, "message": items[0], "finish_reason": "stop"}]
            }
        else:
            response = {"output": items}
        self.memory.report(request, response, at=step.at)
        self.last_request = None
        for message in items:
            self.seen.add(_essence(message))
            self.history.append(message)
        self.answer(step.at)

    def answer(self, at: float) -> None:
        """A recorded reply cannot answer a note ask: the note writer does, at the reply's time."""
        if self.note_writer is None:
            return
        try:
            self.memory.answer_ask(self.note_writer, at=at)
        except (NoteWriterError, EndpointError) as exc:
            # The ask stays pending and is asked again at the next reply; replay goes on.
            log.warning(
                "memory %r: the note writer did not answer (%s); the ask stays pending",
                self.memory.memory_id,
                exc,
            )


def replay(
    memory: Memory,
    lines: Iterable[ReplayLine],
    *,
    model: str = DEFAULT_MODEL,
    fmt: str = "chat_completions",
    note_writer: NoteWriter | None = None,
) -> int:
    """Replay `lines` of one new memory; returns how many lines were read.

    Replies recorded right after a request are reported as chat completions (or responses) with
    no token usage; everything else is decorated at its own time. A recorded reply cannot answer
    a note ask: when one is pending after a reply, `note_writer` answers it. Background jobs are
    left to the engine's lanes (see `replay_memory` for a resumable replay that runs them).
    """
    lines = list(lines)
    runner = _Runner(memory, Format(fmt), model, note_writer, [])
    for step in plan(lines, Format(fmt)):
        runner.run(step)
    return len(lines)


# -- resumable replay -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Replayed:
    """What `replay_memory` did: messages found already stored, and messages it stored."""

    memory_id: str
    skipped: int
    stored: int


def run_lane_through(engine: Engine, memory_id: str) -> None:
    """Run the memory's pending jobs to completion here (waiting out a lease a killed worker
    left, which `lane_lease_seconds` bounds, and a job waiting out its service's outage)."""
    while True:
        with engine.store.read(memory_id) as tx:
            if tx.pending_job() is None:
                return
        if not run_lane(engine, memory_id):
            time.sleep(idle_wait(engine, [memory_id]))


def _resume_point(
    engine: Engine, memory_id: str, steps: Sequence[Step], history: Sequence[ReplayLine]
) -> tuple[int, int]:
    """(steps done, messages stored): where an earlier run of these lines stopped."""
    with engine.store.read(memory_id) as tx:
        stored = tx.message_count()
        last = tx.messages(stored - 1, stored)[0] if stored else None
    if stored > len(history):
        raise ReplayFormatError(
            f"memory {memory_id!r} already holds {stored} messages, more "
            f"than the {len(history)} its lines hold; replay appends to a "
            "memory only from the same beginning"
        )
    if last is not None and digest_of(history[stored - 1].message) != last.digest:
        raise ReplayFormatError(
            f"{history[stored - 1].where}: memory {memory_id!r} already "
            f"holds a different message {stored - 1}; replay appends to a "
            "memory only from the same beginning"
        )
    done = total = 0
    while done < len(steps) and total < stored:
        total += len(steps[done].lines)
        done += 1
    if total != stored:  # a step is one transaction; this means other writes were mixed in
        raise ReplayFormatError(
            f"memory {memory_id!r} holds {stored} messages, which is not "
            "where any step of its lines ends"
        )
    return done, stored


def _request_for_report(engine: Engine, memory_id: str, model: str, fmt: Format) -> dict[str, Any]:
    """A request that `report` matches to the latest decorated one (a run that stopped between
    a decorate and its report has lost the decorated request): the stored messages it showed
    end with the newest, and are as many as it showed, which is all the match compares."""
    with engine.store.read(memory_id) as tx:
        latest = tx.latest_request()
        stored = tx.message_count()
        if latest is None:
            raise RuntimeError(f"memory {memory_id!r} has no decorated request to report on")
        tail = tx.messages(max(0, stored - latest.view_len), stored)
    key = "messages" if fmt is Format.CHAT_COMPLETIONS else "input"
    return {"model": model, key: [msgspec.json.decode(m.body) for m in tail]}


def replay_memory(
    engine: Engine,
    memory_id: str,
    lines: Sequence[ReplayLine],
    *,
    fmt: Format | None = None,
    model: str = DEFAULT_MODEL,
    note_writer: NoteWriter | None = None,
    progress: Callable[[int], None] | None = None,
) -> Replayed:
    """Replay one memory's lines, resuming after what an earlier run stored.

    After every step the memory's lane runs to completion, and after every report the note
    writer answers a pending ask, so the store after a resumed run is the store of an
    uninterrupted one. `progress(n)` is told of every n messages done (stored ones included).
    """
    fmt = fmt or format_of(lines)
    steps = plan(lines, fmt)
    history = [line for step in steps for line in step.lines]
    done, stored = _resume_point(engine, memory_id, steps, history)
    runner = _Runner(
        engine.memory(memory_id),
        fmt,
        model,
        note_writer,
        [line.message for line in history[:stored]],
    )
    if done:  # finish what the stopped run had left of its last step
        if steps[done - 1].kind == "report":
            runner.answer(steps[done - 1].at)
        run_lane_through(engine, memory_id)
    if progress is not None and stored:
        progress(stored)
    for step in steps[done:]:
        if step.kind == "report" and runner.last_request is None:
            runner.last_request = _request_for_report(engine, memory_id, model, fmt)
        runner.run(step)
        run_lane_through(engine, memory_id)
        if progress is not None:
            progress(len(step.lines))
    return Replayed(memory_id, stored, len(history) - stored)
