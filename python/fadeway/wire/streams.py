"""Streamed provider responses, collected into the response they stand for.

A caller that streams (`"stream": true`) shows the model's words as they come and then passes
`report` what it received: the chunks of a Chat Completions stream or the events of a Responses
stream, as a list or any iterable of SDK objects or dicts. `collect` rebuilds the one response
the provider would have sent without streaming, so that the reply is stored, its note taken and
its tool calls handed back exactly as for a plain response.

- Chat Completions: each choice's deltas are joined the way the provider's own SDK joins them:
  text pieces (content, refusal, a tool call's arguments, a provider's reasoning text) are
  concatenated, tool calls are merged by their `index` (which the final message leaves out),
  identifiers and names are taken, not concatenated, since some providers repeat them in every
  chunk. Providers' variants are read too: chunks without choices (Azure's filter results, with
  a blank object), call deltas without an index (a new id starts a new call), a new id at an
  index in use. A stream cut off before its finish reason keeps its text, but not its tool calls
  (one may be cut short, and the caller must not run it). The usage comes from the chunk that
  carries it (only when the request asked for it with `stream_options: {"include_usage":
  true}`; without it the estimate's correction is not updated).
- Responses: the terminal event (`response.completed`, or `response.incomplete` when the output
  was cut short) holds the whole response. A stream that ended before it (a dropped connection)
  stands for the output items it finished (`response.output_item.done`), in output order. A
  `response.failed` or `error` event is an error: the provider produced no reply to store.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Iterable, Mapping
from typing import Any

from ..errors import InvalidResponseError
from .base import Format

__all__ = ["is_stream", "is_async_stream", "collect", "lighten"]

log = logging.getLogger("fadeway")

#: Delta keys whose value names something: repeated as is, never concatenated.
_NAMES = frozenset({"id", "type", "name", "role", "index", "call_id", "model", "object"})
#: The event types of the SDK's `chat.completions.stream()` helper: `chunk` events carry the
#: provider's chunks, the others are derived from them.
_HELPER_EVENTS = frozenset(
    {
        "chunk",
        "content.delta",
        "content.done",
        "refusal.delta",
        "refusal.done",
        "tool_calls.function.arguments.delta",
        "tool_calls.function.arguments.done",
        "logprobs.content.delta",
        "logprobs.content.done",
        "logprobs.refusal.delta",
        "logprobs.refusal.done",
    }
)
_HELPER = "`client.chat.completions.stream()`"
#: Responses events that end a stream with the whole response.
_TERMINAL = frozenset({"response.completed", "response.incomplete"})


def is_stream(response: Any) -> bool:
    """Whether `response` is a stream of chunks or events (an iterable that is not itself one
    JSON object or an SDK model)."""
    return (
        isinstance(response, Iterable)
        and not isinstance(response, (Mapping, str, bytes, bytearray))
        and not callable(getattr(response, "model_dump", None))
    )


def is_async_stream(response: Any) -> bool:
    """Whether `response` is an async stream (an SDK `AsyncStream`), which `areport` collects."""
    return isinstance(response, AsyncIterable) and not is_stream(response)


def lighten(event: Any) -> Any:
    """An SDK event of the `chat.completions.stream()` helper as only what `collect` reads of
    it: a `chunk` event's chunk, a derived event's type. Each helper event also carries a
    snapshot of the whole reply so far, which would make dumping a stream quadratic in its
    length. Anything else is returned as it is."""
    kind = getattr(event, "type", None)
    if isinstance(event, Mapping) or not _is_helper_event(kind):
        return event
    if kind == "chunk":
        return {"type": kind, "chunk": getattr(event, "chunk", None)}
    return {"type": kind}


def _is_helper_event(kind: Any) -> bool:
    return isinstance(kind, str) and kind in _HELPER_EVENTS


def collect(fmt: Format, events: list[Any]) -> dict[str, Any]:
    """The response that `events` (plain JSON values, in the order received) stand for."""
    if not events:
        raise InvalidResponseError(
            "the streamed response is empty: pass the chunks or events the stream yielded"
        )
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            raise InvalidResponseError(
                f"item {i} of the streamed response is a {type(event).__name__}, not an object"
            )
    return _chat(events) if fmt is Format.CHAT_COMPLETIONS else _responses(events)


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or error)
    return str(error)


# -- Chat Completions -----------------------------------------------------------------------


def _helper_chunks(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chunks in what the SDK's `chat.completions.stream()` helper yielded: each `chunk`
    event carries one, as the provider sent it; its other events (`content.delta`,
    `tool_calls.function.arguments.done`, ...) are derived from those chunks and left aside.
    Plain chunks pass through, so a stream of chunks is read as before."""
    if not any(_is_helper_event(event.get("type")) for event in events):
        return events
    chunks = [
        event["chunk"]
        for event in events
        if event.get("type") == "chunk" and isinstance(event.get("chunk"), dict)
    ]
    if not chunks:
        raise InvalidResponseError(
            f"the streamed response holds no chunk: these are {_HELPER}'s derived events only. "
            f"Pass every event it yielded (its `chunk` events carry the chunks), the helper's "
            "stream itself, or `stream.get_final_completion()`"
        )
    return chunks


def _chat(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The chat completion a Chat Completions stream's chunks stand for."""
    chunks = _helper_chunks(chunks)
    head: dict[str, Any] = {}
    choices: dict[int, dict[str, Any]] = {}
    calls: dict[int, _Calls] = {}
    usage = None
    for i, chunk in enumerate(chunks):
        parts = _chunk_parts(chunk, i)
        for key in ("id", "created", "model", "service_tier", "system_fingerprint"):
            if chunk.get(key):
                head.setdefault(key, chunk[key])
        if chunk.get("usage") is not None:
            usage = chunk["usage"]
        for part in parts:
            _take_part(part, i, choices, calls)
    if not choices:
        raise InvalidResponseError("the stream holds no choice: no chunk carried a delta")
    for index, choice in choices.items():
        _finish_choice(choice, calls.get(index), first=index == min(choices))
    out = {"object": "chat.completion", **head, "choices": [choices[k] for k in sorted(choices)]}
    if usage is not None:
        out["usage"] = usage
    return out


def _chunk_parts(chunk: dict[str, Any], i: int) -> list[Any]:
    """The choices of stream chunk `i`, which must be a chat.completion.chunk."""
    if chunk.get("error"):
        raise InvalidResponseError(
            f"chunk {i} of the stream is an error: {_error_text(chunk['error'])}"
        )
    parts = chunk.get("choices", [])
    # Azure's first chunk (prompt filter results) and its content filter chunks have a blank
    # object and no choices; a usage chunk may have no choices key at all.
    if (
        not isinstance(parts, list)
        or "type" in chunk
        or chunk.get("object") not in (None, "", "chat.completion.chunk")
    ):
        raise InvalidResponseError(
            f"chunk {i} of the stream is not a chat.completion.chunk{_guess(chunk)}"
        )
    return parts


def _guess(item: dict[str, Any]) -> str:
    """What a streamed item that is no chat.completion.chunk looks like, and what to pass."""
    kind = item.get("type")
    if isinstance(kind, str) and (kind.startswith("response.") or kind == "error"):
        return (
            f" but a Responses event ({kind!r}): a Responses stream for a Chat Completions request?"
        )
    if isinstance(kind, str):
        return (
            f" but an event of type {kind!r}. Pass the chunks of "
            "`client.chat.completions.create(..., stream=True)`, or every event of "
            f"{_HELPER} (its `chunk` events carry the chunks), or `stream.get_final_completion()`"
        )
    return ""


def _take_part(
    part: Any, i: int, choices: dict[int, dict[str, Any]], calls: dict[int, _Calls]
) -> None:
    """Join one choice delta of chunk `i` into the choice it continues."""
    index = part.get("index", 0) if isinstance(part, dict) else None
    if not isinstance(index, int):
        raise InvalidResponseError(
            f"chunk {i} of the stream holds a choice without an integer index"
        )
    choice = choices.setdefault(index, {"index": index, "message": {}, "finish_reason": None})
    delta = part.get("delta")
    if isinstance(delta, dict):
        for call in delta.get("tool_calls") or []:
            if isinstance(call, dict):
                calls.setdefault(index, _Calls()).add(call)
        _join(choice["message"], {k: v for k, v in delta.items() if k != "tool_calls"})
    if part.get("finish_reason") is not None:
        choice["finish_reason"] = part["finish_reason"]
    if isinstance(part.get("logprobs"), dict):
        _join(choice.setdefault("logprobs", {}), part["logprobs"])


def _finish_choice(choice: dict[str, Any], calls: _Calls | None, *, first: bool) -> None:
    """A choice whose deltas are all joined, as a reply holds it."""
    message = choice["message"]
    message.setdefault("role", "assistant")
    message.setdefault("content", None)
    if calls is not None:
        message["tool_calls"] = calls.calls
    if choice["finish_reason"] is not None:
        return
    # Cut off (a dropped connection): a call may be cut short, and the caller must not run it.
    # What text came is kept; with nothing else, there is no reply.
    cut = [c.get("id") for c in message.pop("tool_calls", [])]
    if message.pop("function_call", None) is not None:
        cut.append("function_call")
    if cut:
        log.warning(
            "a streamed reply ended before its finish reason; its tool calls %s are left out "
            "(they may be cut short)",
            cut,
        )
    if first and not message.get("content") and not message.get("refusal"):
        raise InvalidResponseError(
            "the stream ended before its reply was complete (no finish reason) and holds no "
            "text: pass every chunk the stream yielded"
        )


class _Calls:
    """The tool calls of one choice, as their deltas come. A delta names its call by `index`;
    one that has none (as from some providers' compatible endpoints) continues the last call,
    or starts a new one when it brings a new id, and so does a new id at an index in use."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._at: dict[int, int] = {}  # the provider's index -> position in `calls`

    def add(self, delta: dict[str, Any]) -> None:
        index, call_id = delta.get("index"), delta.get("id")
        if isinstance(index, int) and index in self._at:
            position = self._at[index]
        else:
            position = len(self.calls) - 1 if self.calls and not isinstance(index, int) else -1
        if position >= 0 and call_id and self.calls[position].get("id") not in (None, call_id):
            position = -1  # a new id: a new call
        if position < 0:
            self.calls.append({})
            position = len(self.calls) - 1
        if isinstance(index, int):
            self._at[index] = position
        _join(self.calls[position], {k: v for k, v in delta.items() if k != "index"})


def _join(acc: dict[str, Any], delta: dict[str, Any]) -> None:
    """Add one delta to what its choice's message holds so far."""
    for key, value in delta.items():
        if value is None:
            continue
        held = acc.get(key)
        if isinstance(value, str) and isinstance(held, str) and key not in _NAMES:
            acc[key] = held + value
        elif isinstance(value, dict) and isinstance(held, dict):
            _join(held, value)
        elif isinstance(value, list) and isinstance(held, list):
            held.extend(value)
        elif isinstance(value, dict):
            acc[key] = {}
            _join(acc[key], value)
        else:
            acc[key] = list(value) if isinstance(value, list) else value


# -- Responses ------------------------------------------------------------------------------


def _responses(events: list[dict[str, Any]]) -> dict[str, Any]:
    done: dict[int, Any] = {}
    for i, event in enumerate(events):
        kind = event.get("type")
        if not isinstance(kind, str) or "choices" in event:
            raise InvalidResponseError(
                f"item {i} of the stream is not a Responses event (a Chat Completions chunk "
                "for a Responses request?)"
            )
        if kind in _TERMINAL and isinstance(event.get("response"), dict):
            return event["response"]
        if kind == "response.failed":
            error = (event.get("response") or {}).get("error")
            raise InvalidResponseError(f"the streamed response failed: {_error_text(error)}")
        if kind == "error":
            raise InvalidResponseError(f"the stream carried an error: {_error_text(event)}")
        if kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            index = event.get("output_index")
            done[index if isinstance(index, int) else len(done)] = event["item"]
    if not done:
        raise InvalidResponseError(
            "the stream ended before its response was complete and finished no output item; "
            "pass every event the stream yielded, up to response.completed"
        )
    return {"object": "response", "status": "incomplete", "output": [done[k] for k in sorted(done)]}
