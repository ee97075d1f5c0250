"""Keeping fadeway's note call out of what the proxy's client sees (ARCHITECTURE: "The note call
in the caller's loop": a caller's agent loop must never have to know that `note` exists).

A library caller gets the remaining calls from `report`; a client of the proxy reads the
provider's response itself, so the proxy takes the note calls out of it: from a completion's
message, from a response's output, and, in a stream, from the chunks and events that carry
them (`NoteFilter`). The stored reply keeps them, as the library stores it.
"""

from __future__ import annotations

from typing import Any

from ..notes.tool import is_note_call, without_note_calls
from ..wire import Format

__all__ = ["NoteFilter", "without_notes"]


def without_notes(fmt: Format, response: Any) -> Any:
    """A completed response (its JSON) without fadeway's note calls; `response` itself when it
    holds none. A chat message left with no call loses `tool_calls` and finishes with "stop"."""
    if not isinstance(response, dict):
        return response
    if fmt is Format.RESPONSES:
        output = response.get("output")
        if not isinstance(output, list):
            return response
        kept = without_note_calls(fmt, output)
        return response if len(kept) == len(output) else {**response, "output": kept}
    choices = response.get("choices")
    if not isinstance(choices, list):
        return response
    changed = False
    out = []
    for choice in choices:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if not isinstance(calls, list):
            out.append(choice)
            continue
        kept = without_note_calls(fmt, calls)
        if len(kept) == len(calls):
            out.append(choice)
            continue
        changed = True
        assert isinstance(message, dict)  # it held the calls
        choice = {**choice, "message": _with_calls(message, kept)}
        if not kept and choice.get("finish_reason") == "tool_calls":
            choice["finish_reason"] = "stop"
        out.append(choice)
    return {**response, "choices": out} if changed else response


def _with_calls(message: dict[str, Any], calls: list[Any]) -> dict[str, Any]:
    """`message` (or a stream's delta) holding `calls` as its tool calls; none: no key."""
    out = {k: v for k, v in message.items() if k != "tool_calls"}
    if calls:
        out["tool_calls"] = calls
    return out


class NoteFilter:
    """Takes the note calls out of a stream, event by event (each the JSON of one `data:`
    line). Chat Completions: a tool call delta is a note's when its first delta at that index
    named `note`; the caller's calls are renumbered so their indexes stay 0, 1, ...; a finish
    reason "tool_calls" with no call of the caller's left reads "stop". Responses: the events
    of a note's output item are dropped, the others' `output_index` renumbered, and the
    terminal event's response loses the note items."""

    def __init__(self, fmt: Format) -> None:
        self.fmt = fmt
        self._notes: set[int] = set()  # upstream indexes of note calls (or items)
        self._index: dict[int, int] = {}  # upstream index -> the client's

    @property
    def saw_note(self) -> bool:
        """Whether a note call came in the stream so far."""
        return bool(self._notes)

    def _client_index(self, upstream: int) -> int:
        if upstream not in self._index:
            self._index[upstream] = len(self._index)
        return self._index[upstream]

    def apply(self, event: Any) -> Any:
        """The event as the client gets it: itself, a changed copy, or None (drop it)."""
        if not isinstance(event, dict):
            return event
        if self.fmt is Format.CHAT_COMPLETIONS:
            return self._chat(event)
        return self._responses(event)

    def _chat(self, chunk: dict[str, Any]) -> Any:
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            return chunk
        changed = False
        out = []
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            calls = delta.get("tool_calls") if isinstance(delta, dict) else None
            finish = choice.get("finish_reason") if isinstance(choice, dict) else None
            if isinstance(calls, list):
                kept = []
                for call in calls:
                    index = call.get("index") if isinstance(call, dict) else None
                    if not isinstance(index, int):
                        kept.append(call)
                        continue
                    if is_note_call(self.fmt, {"type": "function", **call}):
                        self._notes.add(index)
                    if index in self._notes:
                        continue
                    client = self._client_index(index)
                    kept.append(call if client == index else {**call, "index": client})
                if kept != calls:
                    changed = True
                    assert isinstance(delta, dict)  # it held the calls
                    choice = {**choice, "delta": _with_calls(delta, kept)}
            if finish == "tool_calls" and self._notes and not self._index:
                changed = True
                choice = {**choice, "finish_reason": "stop"}
            out.append(choice)
        return {**chunk, "choices": out} if changed else chunk

    def _responses(self, event: dict[str, Any]) -> Any:
        item = event.get("item")
        index = event.get("output_index")
        if isinstance(item, dict) and isinstance(index, int) and is_note_call(self.fmt, item):
            self._notes.add(index)
        if isinstance(index, int):
            if index in self._notes:
                return None
            client = self._client_index(index)
            if client != index:
                event = {**event, "output_index": client}
        response = event.get("response")
        if isinstance(response, dict) and self._notes:
            event = {**event, "response": without_notes(self.fmt, response)}
        return event
