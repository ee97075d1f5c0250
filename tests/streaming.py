"""Streams as providers send them: a response cut into Chat Completions chunks or Responses
events the way OpenAI's API streams it (shapes from the official OpenAPI document)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

Split = Callable[[str], list[str]]


def in_pieces(n: int) -> Split:
    """Cut a text into `n` pieces of about equal length (an empty text stays one piece)."""

    def split(text: str) -> list[str]:
        step = max(1, -(-len(text) // n))
        return [text[i : i + step] for i in range(0, len(text), step)] or [""]

    return split


#: The default cut: three pieces.
THIRDS = in_pieces(3)


def chat_chunks(
    completion: dict[str, Any],
    split: Split = THIRDS,
    *,
    repeat_names: bool = False,
    include_usage: bool = True,
) -> list[dict[str, Any]]:
    """The chunks of a chat completion's first choice, as `"stream": true` sends them: the role
    first, then the text and each tool call's arguments in pieces, then the finish reason, then
    (with `stream_options.include_usage`) a chunk with no choice and the usage. With
    `repeat_names`, every piece of a tool call repeats its id, type and name (as some providers
    do)."""
    choice = completion["choices"][0]
    message = choice["message"]
    head = {
        k: completion[k]
        for k in ("id", "created", "model", "system_fingerprint")
        if k in completion
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    content = message.get("content")
    out = [
        chunk(
            {
                "role": "assistant",
                "content": "" if isinstance(content, str) else None,
                "refusal": None,
            }
        )
    ]
    if isinstance(content, str):
        out += [chunk({"content": piece}) for piece in split(content) if piece]
    for index, call in enumerate(message.get("tool_calls") or []):
        name = {"id": call["id"], "type": "function"}
        for k, piece in enumerate(split(call["function"]["arguments"])):
            function = {"arguments": piece}
            if k == 0 or repeat_names:
                function = {"name": call["function"]["name"], **function}
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                **(name if k == 0 or repeat_names else {}),
                                "function": function,
                            }
                        ]
                    }
                )
            )
    out.append(chunk({}, choice.get("finish_reason") or "stop"))
    if include_usage and "usage" in completion:
        out.append(
            {**head, "object": "chat.completion.chunk", "choices": [], "usage": completion["usage"]}
        )
    return out


def response_events(
    response: dict[str, Any], split: Split = THIRDS, *, terminal: str = "response.completed"
) -> list[dict[str, Any]]:
    """The events of a Responses stream for `response`: created, each output item added, its
    text or arguments in deltas, done, and the terminal event with the whole response."""
    started = {**copy.deepcopy(response), "status": "in_progress", "output": []}
    started.pop("usage", None)
    out: list[dict[str, Any]] = [{"type": "response.created", "response": started}]
    for index, item in enumerate(response["output"]):
        opening = copy.deepcopy(item)
        opening["status"] = "in_progress"
        if item["type"] == "message":
            opening["content"] = []
        if item["type"] == "function_call":
            opening["arguments"] = ""
        out.append({"type": "response.output_item.added", "output_index": index, "item": opening})
        if item["type"] == "message":
            for c, part in enumerate(item["content"]):
                where = {"item_id": item["id"], "output_index": index, "content_index": c}
                out.append(
                    {"type": "response.content_part.added", **where, "part": {**part, "text": ""}}
                )
                out += [
                    {"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []}
                    for piece in split(part["text"])
                ]
                out.append(
                    {
                        "type": "response.output_text.done",
                        **where,
                        "text": part["text"],
                        "logprobs": [],
                    }
                )
                out.append({"type": "response.content_part.done", **where, "part": part})
        if item["type"] == "function_call":
            where = {"item_id": item["id"], "output_index": index}
            out += [
                {"type": "response.function_call_arguments.delta", **where, "delta": piece}
                for piece in split(item["arguments"])
            ]
            out.append(
                {
                    "type": "response.function_call_arguments.done",
                    **where,
                    "name": item["name"],
                    "arguments": item["arguments"],
                }
            )
        out.append({"type": "response.output_item.done", "output_index": index, "item": item})
    final = copy.deepcopy(response)
    if terminal == "response.incomplete":
        final.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    out.append({"type": terminal, "response": final})
    return [{**event, "sequence_number": n} for n, event in enumerate(out)]


def sse(events: list[dict[str, Any]], *, done: bool) -> bytes:
    """Server-sent events for `events` (Chat Completions ends with `data: [DONE]`; Responses
    names each event)."""
    lines = []
    for event in events:
        if not done:
            lines.append(f"event: {event['type']}\n")
        lines.append(f"data: {json.dumps(event)}\n\n")
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()
