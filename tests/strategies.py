"""Hypothesis strategies for valid OpenAI requests, in both wire formats fadeway manages.

Every request drawn here is one a provider accepts: it validates against the official OpenAI
OpenAPI document (`CreateChatCompletionRequest`, `CreateResponse`; see test_openapi_schema.py)
and it is well formed as a conversation: every tool call is answered by an output after it, call
ids are unique within a conversation, a reasoning item stands right before the call or message it
led to.

    chat_conversations()       Chat Completions requests: {"model", "messages", ...}
    responses_conversations()  Responses requests: {"model", "input": str | [items], ...}

Both take the same size knobs (kept small by default so a property test stays fast) and return
plain dicts, freshly built for each example, so a test may mutate what it draws.

Shape of a drawn conversation, in both formats:

- instructions first (Chat: leading system/developer messages; Responses: the top-level
  `instructions` string and/or leading system/developer items), then the history;
- the history is a run of turns: a user message, then up to `max_tool_steps` tool steps (an
  assistant call of 1..`max_calls` functions followed by one output per call, in any order),
  then the assistant's answer;
- with `open_end=True` (the default) the last turn is left open, as in a request that asks the
  model for its next step: it ends after the user message or after a tool step's outputs.
  With `open_end=False` every turn is complete (a recorded conversation, for replays).

Things the official schema forces, so that "valid" holds literally:

- a structured assistant message in Responses input is an `OutputMessage`: it carries `id`
  ("msg_..."), `status`, and each `output_text` part carries `annotations` and `logprobs` (what
  a response returns and what a caller sends back). The short form
  `{"role": "assistant", "content": "<text>"}` (an `EasyInputMessage`) is drawn as well;
- `input_image` parts carry `detail`.

Text is any Unicode but lone surrogates (which JSON cannot carry), empty strings included.
"""

from __future__ import annotations

import json
import string
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "CHAT_MODELS",
    "RESPONSES_MODELS",
    "TOOL_NAMES",
    "texts",
    "names",
    "arguments",
    "chat_conversations",
    "chat_tools",
    "responses_conversations",
    "responses_tools",
]

#: Models drawn for requests: o200k_base and cl100k_base models, reasoning and not.
CHAT_MODELS = ("gpt-4.1", "gpt-4o-mini", "gpt-5", "o3", "gpt-4-turbo", "gpt-3.5-turbo")
RESPONSES_MODELS = ("gpt-4.1", "gpt-4o-mini", "gpt-5", "o3", "o4-mini")

#: The functions a drawn conversation may call; the request's `tools` (when drawn) declare them.
TOOL_NAMES = ("get_weather", "search_docs", "send_email", "lookup-order_2")

_ID_ALPHABET = string.ascii_letters + string.digits
_NAME_ALPHABET = string.ascii_letters + string.digits + "_-"


def texts(*, max_size: int = 30) -> st.SearchStrategy[str]:
    """Unicode text, empty included; no lone surrogates (JSON cannot encode them)."""
    return st.text(st.characters(exclude_categories=("Cs",)), max_size=max_size)


def names() -> st.SearchStrategy[str]:
    """A participant `name` as the API allows it: ^[a-zA-Z0-9_-]{1,64}$ (kept short)."""
    return st.text(_NAME_ALPHABET, min_size=1, max_size=12)


def arguments() -> st.SearchStrategy[str]:
    """A function call's `arguments`: a JSON object, as a string, with Unicode values."""
    values = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), texts(max_size=12))
    return st.dictionaries(st.text(_NAME_ALPHABET, min_size=1, max_size=8), values, max_size=3).map(
        lambda d: json.dumps(d, ensure_ascii=False)
    )


def _image_urls() -> st.SearchStrategy[str]:
    return st.text(_ID_ALPHABET, min_size=1, max_size=10).map(
        lambda slug: f"https://example.com/images/{slug}.png"
    )


def _maybe(
    draw: st.DrawFn, key: str, strategy: st.SearchStrategy[Any], out: dict[str, Any]
) -> None:
    """Set `out[key]` to a drawn value, or leave it out."""
    if draw(st.booleans()):
        out[key] = draw(strategy)


class _Ids:
    """Unique ids within one conversation: a drawn tag (so conversations differ) and a counter."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.n = 0

    def __call__(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{self.tag}{self.n}"


def _turn_plan(
    draw: st.DrawFn, max_turns: int, max_tool_steps: int, open_end: bool
) -> list[tuple[int, bool]]:
    """Per turn: how many tool steps, and whether the turn ends with the assistant's answer.

    An open last turn stops after its user message (0 steps) or after its last tool step's
    outputs, never after an assistant call still waiting for outputs.
    """
    n = draw(st.integers(1, max_turns))
    plan = [(draw(st.integers(0, max_tool_steps)), True) for _ in range(n)]
    if open_end:
        plan[-1] = (plan[-1][0], False)
    return plan


# -- Chat Completions ------------------------------------------------------------------------


def _chat_text_parts(draw: st.DrawFn) -> list[dict[str, Any]]:
    return [{"type": "text", "text": draw(texts())} for _ in range(draw(st.integers(1, 2)))]


def _chat_content(draw: st.DrawFn) -> str | list[dict[str, Any]]:
    """A string, or a list of text parts (what system, developer, assistant and tool accept)."""
    return draw(texts()) if draw(st.booleans()) else _chat_text_parts(draw)


def _chat_instruction(draw: st.DrawFn, role: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": role, "content": _chat_content(draw)}
    _maybe(draw, "name", names(), msg)
    return msg


def _chat_user(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        content: Any = draw(texts())
    else:
        content = []
        for _ in range(draw(st.integers(1, 3))):
            if draw(st.integers(0, 2)):
                content.append({"type": "text", "text": draw(texts())})
            else:
                image: dict[str, Any] = {"url": draw(_image_urls())}
                _maybe(draw, "detail", st.sampled_from(["auto", "low", "high"]), image)
                content.append({"type": "image_url", "image_url": image})
    msg: dict[str, Any] = {"role": "user", "content": content}
    _maybe(draw, "name", names(), msg)
    return msg


def _chat_answer(draw: st.DrawFn) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": _chat_content(draw)}
    # What an SDK `model_dump()` of a reply adds, as callers send it back.
    if draw(st.booleans()):
        msg["refusal"] = None
    _maybe(draw, "name", names(), msg)
    return msg


def _chat_tool_step(draw: st.DrawFn, ids: _Ids, max_calls: int) -> list[dict[str, Any]]:
    """An assistant message calling 1..max_calls functions, then one tool message per call."""
    calls = [
        {
            "id": ids("call"),
            "type": "function",
            "function": {"name": draw(st.sampled_from(TOOL_NAMES)), "arguments": draw(arguments())},
        }
        for _ in range(draw(st.integers(1, max_calls)))
    ]
    call: dict[str, Any] = {"role": "assistant"}
    shape = draw(st.sampled_from(["none", "absent", "text"]))
    if shape == "none":
        call["content"] = None
    elif shape == "text":
        call["content"] = draw(texts())
    call["tool_calls"] = calls
    outputs = [
        {
            "role": "tool",
            "tool_call_id": c["id"],
            "content": draw(texts()) if draw(st.integers(0, 3)) else _chat_text_parts(draw),
        }
        for c in draw(st.permutations(calls))
    ]
    return [call, *outputs]


def chat_tools() -> st.SearchStrategy[list[dict[str, Any]]]:
    """Chat Completions `tools` declaring every function in TOOL_NAMES (a fresh list each time)."""
    return st.builds(
        lambda: [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"the {name} function",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
            for name in TOOL_NAMES
        ]
    )


@st.composite
def chat_conversations(
    draw: st.DrawFn,
    *,
    max_turns: int = 3,
    max_tool_steps: int = 2,
    max_calls: int = 2,
    max_instructions: int = 2,
    open_end: bool = True,
    extras: bool = True,
    mid_system: bool = True,
) -> dict[str, Any]:
    """A valid Chat Completions request: {"model", "messages", ...}.

    max_turns: user turns in the history (at least one).
    max_tool_steps: assistant tool-call steps per turn, each answered by tool messages.
    max_calls: function calls per step (parallel calls when above one).
    max_instructions: leading system/developer messages (0..this many).
    open_end: leave the last turn open (ending with a user or tool message), as a request does.
    extras: also draw request fields (temperature, tools, tool_choice, ...), which decorate
        must keep unchanged.
    mid_system: allow a system message between turns (history, not instructions).
    """
    ids = _Ids(draw(st.text(_ID_ALPHABET, min_size=1, max_size=6)))
    messages: list[dict[str, Any]] = [
        _chat_instruction(draw, draw(st.sampled_from(["system", "developer"])))
        for _ in range(draw(st.integers(0, max_instructions)))
    ]
    for t, (steps, answered) in enumerate(_turn_plan(draw, max_turns, max_tool_steps, open_end)):
        if t and mid_system and draw(st.integers(0, 5)) == 0:
            messages.append({"role": "system", "content": draw(texts())})
        messages.append(_chat_user(draw))
        for _ in range(steps):
            messages.extend(_chat_tool_step(draw, ids, max_calls))
        if answered:
            messages.append(_chat_answer(draw))
    request: dict[str, Any] = {"model": draw(st.sampled_from(CHAT_MODELS)), "messages": messages}
    if extras:
        _maybe(draw, "temperature", st.floats(0, 2, allow_nan=False), request)
        _maybe(draw, "max_completion_tokens", st.integers(1, 4096), request)
        _maybe(
            draw,
            "metadata",
            st.dictionaries(
                st.text(_NAME_ALPHABET, min_size=1, max_size=8), texts(max_size=10), max_size=2
            ),
            request,
        )
        if draw(st.booleans()):
            request["tools"] = draw(chat_tools())
            _maybe(draw, "tool_choice", st.sampled_from(["auto", "none", "required"]), request)
            _maybe(draw, "parallel_tool_calls", st.booleans(), request)
    return request


# -- Responses --------------------------------------------------------------------------------


def _responses_instruction(draw: st.DrawFn, role: str) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"role": role, "content": draw(texts())}
    return {
        "type": "message",
        "role": role,
        "content": [{"type": "input_text", "text": draw(texts())}],
    }


def _responses_user(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        content: Any = draw(texts())
    else:
        content = []
        for _ in range(draw(st.integers(1, 3))):
            if draw(st.integers(0, 2)):
                content.append({"type": "input_text", "text": draw(texts())})
            else:
                content.append(
                    {
                        "type": "input_image",
                        "image_url": draw(_image_urls()),
                        "detail": draw(st.sampled_from(["auto", "low", "high"])),
                    }
                )
    item: dict[str, Any] = {"role": "user", "content": content}
    if draw(st.booleans()):
        item = {"type": "message", **item}
    return item


def _responses_answer(draw: st.DrawFn, ids: _Ids) -> dict[str, Any]:
    if draw(st.integers(0, 2)) == 0:
        return {"role": "assistant", "content": draw(texts())}
    return {
        "type": "message",
        "id": ids("msg"),
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": draw(texts()), "annotations": [], "logprobs": []}
            for _ in range(draw(st.integers(1, 2)))
        ],
    }


def _responses_reasoning(draw: st.DrawFn, ids: _Ids) -> list[dict[str, Any]]:
    """Nothing, or one reasoning item (its summary empty or not)."""
    if not draw(st.booleans()):
        return []
    summary = [
        {"type": "summary_text", "text": draw(texts())} for _ in range(draw(st.integers(0, 1)))
    ]
    return [{"type": "reasoning", "id": ids("rs"), "summary": summary}]


def _responses_tool_step(draw: st.DrawFn, ids: _Ids, max_calls: int) -> list[dict[str, Any]]:
    calls = []
    for _ in range(draw(st.integers(1, max_calls))):
        call: dict[str, Any] = {
            "type": "function_call",
            "call_id": ids("call"),
            "name": draw(st.sampled_from(TOOL_NAMES)),
            "arguments": draw(arguments()),
        }
        if draw(st.booleans()):  # as a response returns it
            call = {**call, "id": ids("fc"), "status": "completed"}
        calls.append(call)
    outputs = [
        {"type": "function_call_output", "call_id": c["call_id"], "output": draw(texts())}
        for c in draw(st.permutations(calls))
    ]
    return [*_responses_reasoning(draw, ids), *calls, *outputs]


def responses_tools() -> st.SearchStrategy[list[dict[str, Any]]]:
    """Responses `tools` declaring every function in TOOL_NAMES (a fresh list each time)."""
    return st.builds(
        lambda: [
            {
                "type": "function",
                "name": name,
                "description": f"the {name} function",
                "parameters": {"type": "object", "properties": {}},
                "strict": False,
            }
            for name in TOOL_NAMES
        ]
    )


@st.composite
def responses_conversations(
    draw: st.DrawFn,
    *,
    max_turns: int = 3,
    max_tool_steps: int = 2,
    max_calls: int = 2,
    max_instructions: int = 1,
    open_end: bool = True,
    extras: bool = True,
    string_input: bool = True,
) -> dict[str, Any]:
    """A valid Responses request: {"model", "input", "instructions"?, ...}.

    The knobs are those of `chat_conversations`; besides:
    max_instructions: leading system/developer input items (0..this many); the top-level
        `instructions` string is drawn independently.
    string_input: sometimes draw `input` as a bare string (a first user message, nothing else).
    """
    ids = _Ids(draw(st.text(_ID_ALPHABET, min_size=1, max_size=6)))
    request: dict[str, Any] = {"model": draw(st.sampled_from(RESPONSES_MODELS))}
    _maybe(draw, "instructions", texts(), request)
    if string_input and open_end and draw(st.integers(0, 4)) == 0:
        request["input"] = draw(texts())
    else:
        items: list[dict[str, Any]] = [
            _responses_instruction(draw, draw(st.sampled_from(["system", "developer"])))
            for _ in range(draw(st.integers(0, max_instructions)))
        ]
        plan = _turn_plan(draw, max_turns, max_tool_steps, open_end)
        for steps, answered in plan:
            items.append(_responses_user(draw))
            for _ in range(steps):
                items.extend(_responses_tool_step(draw, ids, max_calls))
            if answered:
                items.extend(_responses_reasoning(draw, ids))
                items.append(_responses_answer(draw, ids))
        request["input"] = items
    if extras:
        _maybe(draw, "temperature", st.floats(0, 2, allow_nan=False), request)
        _maybe(draw, "max_output_tokens", st.integers(16, 4096), request)
        _maybe(draw, "store", st.booleans(), request)
        if request.get("store") is False and isinstance(request["input"], list):
            # Nothing is kept provider-side: reasoning goes back with its encrypted content.
            request["input"] = [
                {**i, "encrypted_content": f"enc-{i['id']}"} if i.get("type") == "reasoning" else i
                for i in request["input"]
            ]
        _maybe(
            draw,
            "metadata",
            st.dictionaries(
                st.text(_NAME_ALPHABET, min_size=1, max_size=8), texts(max_size=10), max_size=2
            ),
            request,
        )
        if draw(st.booleans()):
            request["tools"] = draw(responses_tools())
            _maybe(draw, "tool_choice", st.sampled_from(["auto", "none", "required"]), request)
            _maybe(draw, "parallel_tool_calls", st.booleans(), request)
    return request
