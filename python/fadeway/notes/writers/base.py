"""The note writer interface, and what a writer reads: the leaving turns, and the context beside
them."""

from __future__ import annotations

import abc
import inspect
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from ... import blocks
from ...records import MessageRecord
from ...wire import text_of
from ...wire.base import Format
from ...wire.canonical import plain
from ..tool import Note, call_names

__all__ = [
    "NO_CONTEXT",
    "LeavingMessage",
    "NoteContext",
    "NoteWriter",
    "leaving_messages",
    "ask_writer",
]


@dataclass(frozen=True, slots=True)
class LeavingMessage:
    """A message of the turns that are leaving, as a note writer reads it."""

    turn: int
    role: str  # user / assistant / tool / system / developer, or the speaker's name
    text: str
    tool: str = ""  # for a tool output, the name of the tool whose call it answers


@dataclass(frozen=True, slots=True)
class NoteContext:
    """What a note writer reads beside the leaving turns (`notes.context.note_context` chooses
    it, within NOTE_CONTEXT_TOKENS): the caller's latest instructions, the canonical names the
    memory holds for the entities those turns mention, and the facts held about them, most
    relevant first, as facts block lines."""

    instructions: str = ""
    names: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()

    @property
    def text(self) -> str | None:
        """The context as one message's text; None when it holds nothing."""
        return blocks.note_context(self.instructions, self.names, self.facts)


#: The empty context: a writer called without one reads the leaving turns alone.
NO_CONTEXT = NoteContext()


#: The roles of the wire formats: who says a message, but no entity of the conversation.
WIRE_ROLES = frozenset({"user", "assistant", "tool", "system", "developer"})


def leaving_messages(records: Sequence[MessageRecord], fmt: Format) -> list[LeavingMessage]:
    """The leaving turns' stored messages (of a memory in format `fmt`) as a note writer reads
    them: their text, and for a tool output the name of the tool it answers (from the call
    among `records`, if there)."""
    values = [plain(m.body) for m in records]
    names = call_names(fmt, values)
    return [
        LeavingMessage(
            m.turn, m.role, " ".join(text_of(value)), names.get(m.answers, "") if m.answers else ""
        )
        for m, value in zip(records, values, strict=True)
    ]


class NoteWriter(abc.ABC):
    """Answers a note ask with a note, from the leaving turns."""

    name: str = "note-writer"

    @abc.abstractmethod
    async def write(
        self,
        ask: str,
        messages: Sequence[LeavingMessage],
        *,
        context: NoteContext = NO_CONTEXT,
        deadline: float | None = None,
    ) -> Note:
        """The note for `ask` (the note ask's text), given the leaving turns' messages and the
        `context` beside them."""


def ask_writer(
    writer: NoteWriter,
    ask: str,
    messages: Sequence[LeavingMessage],
    context: NoteContext,
    deadline: float | None,
) -> Coroutine[Any, Any, Note]:
    """`writer.write` with the context when it takes one: a writer written before the context
    was added (`write(ask, messages, *, deadline)`) is called as it was then."""
    if _takes_context(writer):
        return writer.write(ask, messages, context=context, deadline=deadline)
    return writer.write(ask, messages, deadline=deadline)


def _takes_context(writer: NoteWriter) -> bool:
    params = inspect.signature(writer.write).parameters.values()
    return any(p.name == "context" or p.kind is p.VAR_KEYWORD for p in params)
