"""The note tool: its definition in both wire formats, reading its arguments, finding its calls
in a reply and answering them.

Spec: MECHANISM "The note ask and sealing" (a call that asks carries the note tool; the model
answers with one note call whose notes list holds one entry per fact). ARCHITECTURE "The note
call in the caller's loop" and "Contracts" (the tool is named `note`; its arguments are
`{"notes": [{"note", "subject", "object", "milestone"}]}`; `report` hands the caller the tool
calls that remain, the note call removed; fadeway answers its own call in the next request).

Decisions:

- Chat Completions gets the plain function definition; Responses also says `"strict": true`
  (that API's own default, written out). The schema is strict-mode ready either way: every
  field required, `additionalProperties` false at each level.
- Parsing is strict on what fadeway needs (every field present, exact JSON types, no coercion
  of "true" to true) and tolerant of extra keys a model adds: an otherwise good note is not
  thrown away for them. An empty `notes` list, or entries with blank notes, mean "no facts".
- A malformed note is a recoverable event: `parse_note_arguments` logs why and returns None;
  the episodes stay leaving and the next call asks again, and the tool output says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from ..errors import InvalidRequestError
from ..wire import text_of
from ..wire.base import Format
from ..wire.canonical import encode_json, plain
from ..wire.limits import Limits, note_bytes

__all__ = [
    "caller_tools",
    "note_ask_allowed",
    "note_call_ids",
    "with_note_tool",
    "NOTED",
    "NOTE_NOT_READ",
    "NOTE_TOOL_NAME",
    "Note",
    "NoteEntry",
    "call_names",
    "find_note_calls",
    "is_note_call",
    "note_output",
    "note_tool",
    "parse_note_arguments",
    "read_note",
    "note_stub",
    "map_note_arguments",
    "without_note_calls",
]

log = logging.getLogger("fadeway.notes")

NOTE_TOOL_NAME = "note"
#: The tool output fadeway supplies for a note it took.
NOTED = "Noted."
#: The tool output for a note whose arguments could not be read; the ask stands.
NOTE_NOT_READ = (
    'The note could not be read: its arguments must be {"notes": [{"note": string, '
    '"subject": string, "object": string, "milestone": boolean}]}. Write it again.'
)

NOTE_TOOL_DESCRIPTION = (
    "Record the facts of history that is leaving live context, when asked to. One entry per "
    "fact, each a knowledge-graph triple: the note is one sentence readable on its own, subject "
    "and object are its two entities under their canonical names. Milestones (agreed, decided, "
    "done, blocked-on, next) are entries with milestone true. When those turns hold nothing "
    "worth keeping, one entry with an empty note."
)

_ENTITY = "an entity of the fact under its canonical name, the name earlier facts already use"
NOTE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "notes": {
            "type": "array",
            "description": "One entry per fact.",
            "items": {
                "type": "object",
                "properties": {
                    "note": {
                        "type": "string",
                        "description": "The fact as one sentence readable on its own; "
                        "identifiers and numbers verbatim. Empty when there "
                        "is nothing to keep.",
                    },
                    "subject": {"type": "string", "description": f"The subject: {_ENTITY}."},
                    "object": {"type": "string", "description": f"The object: {_ENTITY}."},
                    "milestone": {
                        "type": "boolean",
                        "description": "True when the fact is a milestone: agreed, chosen, "
                        "approved, rejected, done, in progress, blocked-on, "
                        "next or superseded.",
                    },
                },
                "required": ["note", "subject", "object", "milestone"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["notes"],
    "additionalProperties": False,
}


class NoteEntry(msgspec.Struct, frozen=True):
    """One entry of a note: a fact as a triple, possibly a milestone."""

    note: str
    subject: str
    object: str
    milestone: bool


class Note(msgspec.Struct, frozen=True):
    """The arguments of one note call."""

    notes: list[NoteEntry]

    @property
    def facts(self) -> list[NoteEntry]:
        """The entries that hold a fact: a note (blank means "nothing to keep") about entities
        that name something (a letter or a digit). A side left blank ("Dana resigned.") takes
        the other side's entity; an entry that names neither is no triple, and would join every
        such fact through one nameless entity of the graph: it is logged and left out (the
        note's arguments are stored whole)."""
        out, unnamed = [], []
        for entry in self.notes:
            if not entry.note.strip():
                continue
            subject, object_ = _names(entry.subject), _names(entry.object)
            if subject and object_:
                out.append(entry)
            elif subject or object_:
                name = entry.subject if subject else entry.object
                out.append(NoteEntry(entry.note, name, name, entry.milestone))
            else:
                unnamed.append(entry.note[:80])
        if unnamed:
            log.warning(
                "%d note entries name no entity and are left out: %r", len(unnamed), unnamed[:3]
            )
        return out


def _names(entity: str) -> bool:
    return any(c.isalnum() for c in entity)


_DECODER = msgspec.json.Decoder(Note)
# How much of a malformed argument string a log line quotes.
_LOG_EXCERPT_CHARS = 200


def note_tool(fmt: Format) -> dict[str, Any]:
    """The note tool's definition, as the `tools` list of a `fmt` request holds it."""
    if fmt is Format.CHAT_COMPLETIONS:
        return {
            "type": "function",
            "function": {
                "name": NOTE_TOOL_NAME,
                "description": NOTE_TOOL_DESCRIPTION,
                "parameters": NOTE_PARAMETERS,
            },
        }
    if fmt is Format.RESPONSES:
        return {
            "type": "function",
            "name": NOTE_TOOL_NAME,
            "description": NOTE_TOOL_DESCRIPTION,
            "parameters": NOTE_PARAMETERS,
            "strict": True,
        }
    raise ValueError(f"unknown format {fmt!r}")


def parse_note_arguments(arguments: str) -> Note | None:
    """A note call's arguments, read strictly; None (and a log line) when they are malformed,
    or when they hold facts and none of them names an entity (no fact could be kept: the ask
    stands, and the model is told its note could not be read)."""
    if not isinstance(arguments, str | bytes):
        log.warning(
            "note arguments are %s, not a JSON string; the ask stands", type(arguments).__name__
        )
        return None
    try:
        note = _DECODER.decode(arguments)
    except (msgspec.DecodeError, UnicodeEncodeError) as error:  # lone surrogates fail to encode
        log.warning(
            "note arguments could not be read (%s); the ask stands: %r",
            error,
            arguments[:_LOG_EXCERPT_CHARS],
        )
        return None
    if any(entry.note.strip() for entry in note.notes) and not note.facts:
        log.warning(
            "no entry of the note names an entity; the ask stands: %r",
            arguments[:_LOG_EXCERPT_CHARS],
        )
        return None
    return note


def read_note(arguments: str, limits: Limits) -> Note | None:
    """A note call's arguments read as `parse_note_arguments` reads them, within the engine's
    note limits; None (and a log line naming the limit) for a note over them, which is not
    taken: the ask stands, as for a malformed note."""
    over = limits.note_over(arguments) if isinstance(arguments, str) else None
    note = None if over else parse_note_arguments(arguments)
    if note is not None:
        over = limits.note_over(arguments, len(note.notes))
    if over:
        log.warning("a note was not taken: it holds %s; the ask stands", over)
        return None
    return note


def note_stub(arguments: str, limits: Limits) -> str | None:
    """What the view shows for note call arguments over max_note_bytes (None when within it): a
    short JSON object saying so, so that the call does not ride whole in every later request.
    The stored reply keeps the arguments whole."""
    size = note_bytes(arguments)
    if size <= limits.max_note_bytes:
        return None
    text = (
        f"a note of {size} bytes, over the limit of {limits.max_note_bytes} (max_note_bytes); "
        "not taken, and not shown here"
    )
    return encode_json({"omitted": text}).decode()


def map_note_arguments(message: Any, change: Callable[[str], str | None]) -> Any:
    """`message` (a Chat message or a Responses item) with each of its note calls' arguments
    replaced by `change(arguments)` where that gives a string; `message` itself when none is."""
    if not isinstance(message, dict):
        return message
    if message.get("type") == "function_call":
        if not is_note_call(Format.RESPONSES, message):
            return message
        new = change(_arguments(message.get("arguments")))
        return message if new is None else {**message, "arguments": new}
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return message
    changed, out = False, []
    for call in calls:
        if is_note_call(Format.CHAT_COMPLETIONS, call):
            new = change(_arguments(call["function"].get("arguments")))
            if new is not None:
                call = {**call, "function": {**call["function"], "arguments": new}}
                changed = True
        out.append(call)
    return {**message, "tool_calls": out} if changed else message


def is_note_call(fmt: Format, call: Any) -> bool:
    """Whether `call` (a Chat tool call, or a Responses output item) is a call to fadeway's note."""
    if not isinstance(call, dict):
        return False
    if fmt is Format.CHAT_COMPLETIONS:
        function = call.get("function")
        return (
            call.get("type", "function") == "function"
            and isinstance(function, dict)
            and function.get("name") == NOTE_TOOL_NAME
        )
    # A namespaced function named "note" belongs to the caller's namespace, not to fadeway.
    return (
        call.get("type") == "function_call"
        and call.get("name") == NOTE_TOOL_NAME
        and not call.get("namespace")
    )


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):  # a framework that decoded the arguments for us
        return msgspec.json.encode(value).decode()
    return ""  # parse_note_arguments rejects it, with a log line


def _calls(fmt: Format, items: Iterable[Any]) -> Iterable[Any]:
    if fmt is Format.RESPONSES:
        yield from items
        return
    for message in items:
        if isinstance(message, dict) and message.get("role") == "assistant":
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                yield from calls


def call_names(fmt: Format, items: Iterable[Any]) -> dict[str, str]:
    """The tool name of each call in a history's (or a reply's) messages or items, by call id."""
    out: dict[str, str] = {}
    for call in _calls(fmt, items):
        if not isinstance(call, dict):
            continue
        if fmt is Format.CHAT_COMPLETIONS:
            function = call.get("function")
            call_id = call.get("id")
            name = function.get("name") if isinstance(function, dict) else None
        else:
            call_id, name = call.get("call_id"), call.get("name")
        if isinstance(call_id, str) and isinstance(name, str):
            out[call_id] = name
    return out


def find_note_calls(fmt: Format, items: Iterable[Any]) -> list[tuple[str, str]]:
    """(call id, arguments) of each note call in a reply's (or a history's) messages or items.

    Chat Completions: the `tool_calls` of assistant messages; Responses: `function_call` items.
    A note call without a string id cannot be answered and is skipped, with a log line.
    """
    found: list[tuple[str, str]] = []
    id_key = "id" if fmt is Format.CHAT_COMPLETIONS else "call_id"
    for call in _calls(fmt, items):
        if not is_note_call(fmt, call):
            continue
        call_id = call.get(id_key)
        if not isinstance(call_id, str):
            log.warning("a note call has no string %s; it is skipped", id_key)
            continue
        raw = (
            call["function"].get("arguments")
            if fmt is Format.CHAT_COMPLETIONS
            else call.get("arguments")
        )
        found.append((call_id, _arguments(raw)))
    return found


def without_note_calls(fmt: Format, tool_calls: Iterable[Any]) -> list[Any]:
    """The tool calls that remain for the caller to run: `tool_calls` without the note calls."""
    return [call for call in tool_calls if not is_note_call(fmt, call)]


def message_without_notes(message: Any) -> Any:
    """A stored message without fadeway's note calls, as a caller rebuilding a reply from
    `report`'s tool calls sends it, and as a reader of the conversation sees it (what a note
    says is in the graph). None when nothing else is left (a Responses note call item, or a
    Chat reply that held only the note)."""
    if not isinstance(message, dict):
        return message
    if message.get("type") == "function_call":
        return None if is_note_call(Format.RESPONSES, message) else message
    calls = [
        c for c in message.get("tool_calls") or [] if not is_note_call(Format.CHAT_COMPLETIONS, c)
    ]
    rest = {**message, "tool_calls": calls}
    if not calls and not text_of(rest):  # the note's name and arguments are texts too
        return None
    return rest


def note_output(fmt: Format, call_id: str, accepted: bool) -> dict[str, Any]:
    """The tool output fadeway supplies for its own note call in the next request."""
    text = NOTED if accepted else NOTE_NOT_READ
    if fmt is Format.CHAT_COMPLETIONS:
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    if fmt is Format.RESPONSES:
        return {"type": "function_call_output", "call_id": call_id, "output": text}
    raise ValueError(f"unknown format {fmt!r}")


def note_call_ids(calls: Sequence[str], body: bytes) -> tuple[str, ...]:
    """Ids of the note calls a stored message (making `calls`, as JSON `body`) makes, in either
    wire format; a message without a call or the word "note" is not decoded."""
    if not calls or b'"note"' not in body:
        return ()
    message = plain(body)
    fmt = Format.RESPONSES if message.get("type") == "function_call" else Format.CHAT_COMPLETIONS
    return tuple(call_id for call_id, _ in find_note_calls(fmt, [message]))


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
        return name == NOTE_TOOL_NAME
    return False


def caller_tools(fmt: Format, request: dict[str, Any]) -> dict[str, Any]:
    """`request` with the caller's own tools only: fadeway's note tool, in a decorated request
    sent back, is left out (`with_note_tool` adds it again while a note is asked). The name
    `note` is fadeway's: a tool of the caller's so named is refused, since its calls could not
    be told from the note's, nor a request offer both."""
    tools = request.get("tools")
    if not isinstance(tools, list) or not tools:
        return request
    ours = note_tool(fmt)
    kept = []
    for i, tool in enumerate(tools):
        if tool == ours:
            continue
        if (
            isinstance(tool, dict)
            and tool.get("type") == "function"
            and NOTE_TOOL_NAME in (tool.get("name"), (tool.get("function") or {}).get("name"))
        ):
            raise InvalidRequestError(
                f"tools[{i}] is named {NOTE_TOOL_NAME!r}, the name of fadeway's note tool "
                "(the model writes its notes with it while history leaves the view); give your "
                "tool another name"
            )
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
    tools.append(note_tool(fmt))
    return {**request, "tools": tools}
