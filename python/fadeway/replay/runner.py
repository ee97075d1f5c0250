"""Replaying stored conversations through decorate/report, each message at its own time, as
the steps `replay.lines.plan` makes of their lines.

Each step stores its messages in one transaction, so the number of messages a memory holds says
which steps are done: `replay_memory` resumes after the last one, and a replay run twice adds
nothing. It also runs the memory's lane after every step and has the note writer answer every
ask after a report, so a resumed replay makes exactly the store an uninterrupted one makes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from .._services import Services
from ..errors import EndpointError, NoteWriterError, ReplayFormatError
from ..memory import Memory
from ..notes.writers import NoteWriter
from ..store import Store
from ..wire import Format, text_of
from ..wire.canonical import digest_of
from .lines import ReplayLine, Step, format_of, plan

__all__ = ["DEFAULT_MODEL", "Memories", "Replayed", "replay", "replay_memory"]

log = logging.getLogger("fadeway.replay")

#: The model named in replayed requests (it picks the token encoding: o200k_base).
DEFAULT_MODEL = "gpt-4.1"
# -- steps ------------------------------------------------------------------------------------


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


class Memories(Protocol):
    """What a replay needs of an engine: its services, a memory by id, and a memory's lane run
    here to completion (`fadeway.Engine` is one)."""

    services: Services

    def memory(self, memory_id: str) -> Memory: ...

    def run_lane(self, memory_id: str) -> None: ...


def _resume_point(
    store: Store, memory_id: str, steps: Sequence[Step], history: Sequence[ReplayLine]
) -> tuple[int, int]:
    """(steps done, messages stored): where an earlier run of these lines stopped."""
    with store.read(memory_id) as tx:
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


def _request_for_report(store: Store, memory_id: str, model: str, fmt: Format) -> dict[str, Any]:
    """A request that `report` matches to the latest decorated one (a run that stopped between
    a decorate and its report has lost the decorated request): the stored messages it showed
    end with the newest, and are as many as it showed, which is all the match compares."""
    with store.read(memory_id) as tx:
        latest = tx.latest_request()
        stored = tx.message_count()
        if latest is None:
            raise RuntimeError(f"memory {memory_id!r} has no decorated request to report on")
        tail = tx.messages(max(0, stored - latest.view_len), stored)
    key = "messages" if fmt is Format.CHAT_COMPLETIONS else "input"
    return {"model": model, key: [msgspec.json.decode(m.body) for m in tail]}


def replay_memory(
    engine: Memories,
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
    store = engine.services.store
    done, stored = _resume_point(store, memory_id, steps, history)
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
        engine.run_lane(memory_id)
    if progress is not None and stored:
        progress(stored)
    for step in steps[done:]:
        if step.kind == "report" and runner.last_request is None:
            runner.last_request = _request_for_report(store, memory_id, model, fmt)
        runner.run(step)
        engine.run_lane(memory_id)
        if progress is not None:
            progress(len(step.lines))
    return Replayed(memory_id, stored, len(history) - stored)
