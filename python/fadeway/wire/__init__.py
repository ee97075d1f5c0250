"""Parsing requests and responses of both wire formats, and rebuilding requests around the view.

Contracts (ARCHITECTURE): leading system/developer messages of Chat Completions, and
`instructions` (with any leading system/developer items) of Responses, are the caller's
instructions; everything after them is history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeGuard

from .. import _constants as C
from ..errors import (
    EmptyRequestError,
    InvalidMessageError,
    InvalidRequestError,
    InvalidResponseError,
    ServerStateError,
)
from . import chat_completions, responses, streams
from .base import Entry, Format, ParsedRequest, Reply, Side, media_tokens_and_texts
from .canonical import body_of, digest_of, plain, to_plain
from .limits import Limits

__all__ = [
    "READ_FIELDS",
    "is_user_message",
    "is_schema_class",
    "Entry",
    "Format",
    "ParsedRequest",
    "Reply",
    "Side",
    "parse_request",
    "entry",
    "assemble",
    "parse_response",
    "reply_items_sent",
    "text_of",
]

_MODULES = {Format.CHAT_COMPLETIONS: chat_completions, Format.RESPONSES: responses}
_MEDIA = {"image": C.TOKENS_PER_IMAGE, "audio": C.TOKENS_PER_AUDIO, "file": C.TOKENS_PER_FILE}
#: Request fields beside the history that the model reads, and fadeway counts as the request's
#: fixed part: each must be JSON (checked in `parse_request`; `instructions` and `tools` are
#: stored or rebuilt besides), except a `response_format` that is a class (`is_schema_class`).
#: Fields of the SDK call only (timeout, extra_headers) are not read.
READ_FIELDS = (
    "instructions",
    "tools",
    "tool_choice",
    "response_format",
    "text",
    "functions",
    "function_call",
)
#: Fields of a history message that fadeway reads before the message is validated whole
#: (finding its own additions, splitting off the instructions), with the types they may have.
_SHAPE = (("role", str), ("type", str), ("tool_calls", list))


def parse_request(request: Any, limits: Limits | None = None) -> ParsedRequest:
    """Split a caller's request into instructions and history; raise before anything is stored
    (with `limits`, an instruction over max_message_bytes as soon as it is encoded)."""
    if not isinstance(request, Mapping):
        raise InvalidRequestError(f"a request must be a dict, not {type(request).__name__}")
    request = dict(request)
    for key in ("previous_response_id", "conversation"):
        if request.get(key) is not None:
            raise ServerStateError(
                f"the request sets {key!r}, which keeps the conversation on the provider's side; "
                "fadeway manages the history itself: send the input items instead"
            )
    model = request.get("model")
    if model is not None and not isinstance(model, str):
        raise InvalidRequestError(f"model must be a string, not {type(model).__name__}")
    _check_read_fields(request, limits)
    if "messages" in request and "input" in request:
        raise InvalidRequestError(
            "a request has either messages (Chat Completions) or input (Responses), not both"
        )
    if "messages" in request:
        messages = request["messages"]
        if not isinstance(messages, list):
            raise InvalidRequestError(f"messages must be a list, not {type(messages).__name__}")
        _check_shapes(messages, "messages")
        instructions, history = chat_completions.split(messages)
        _check_instructions(instructions, "messages", limits)
        return ParsedRequest(Format.CHAT_COMPLETIONS, request, instructions, history, model)
    if "input" in request:
        items = responses.normalise_input(request["input"])
        _check_shapes(items, "input")
        instructions, history = responses.split(items)
        _check_instructions(instructions, "input", limits)
        return ParsedRequest(Format.RESPONSES, request, instructions, history, model)
    raise EmptyRequestError(
        "the request has neither messages (Chat Completions) nor input (Responses)"
    )


def _check_read_fields(request: dict[str, Any], limits: Limits | None) -> None:
    """The model's name and the fields in READ_FIELDS are JSON fadeway can store and count:
    no lone surrogate (UTF-8 cannot carry it), no object JSON has no form for, no nesting past
    MAX_JSON_DEPTH, within `limits` when given; `tools` a list."""
    tools = request.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise InvalidRequestError(f"tools must be a list, not {type(tools).__name__}")
    for i, tool in enumerate(tools or ()):
        _check_object(tool, f"tools[{i}]")
    choice = request.get("tool_choice")
    if choice is not None and not isinstance(choice, str):
        _check_object(choice, "tool_choice")
    for key in ("model", *READ_FIELDS):
        value = request.get(key)
        if value is not None and not (key == "response_format" and is_schema_class(value)):
            size = None if limits is None else partial(_field_size, limits, key)
            body_of(value, key, InvalidRequestError, size=size)


def _field_size(limits: Limits, key: str, body: bytes, _where: str) -> None:
    limits.check_body(body, f"the request's {key}")


def is_schema_class(value: Any) -> TypeGuard[type]:
    """Whether `value` is a class, as `response_format` is in the SDK's
    `chat.completions.parse(response_format=SomeModel)`: the SDK turns it into a JSON schema,
    so fadeway passes the class through untouched and never stores it."""
    return isinstance(value, type)


def _check_instructions(instructions: list[Any], key: str, limits: Limits | None) -> None:
    """The leading system/developer messages are JSON fadeway can store, within `limits` when
    given (the history's messages are checked one by one as they are stored)."""
    size = limits.check_body if limits is not None else None
    for i, message in enumerate(instructions):
        body_of(message, f"{key}[{i}]", size=size)


def _check_object(value: Any, where: str) -> None:
    """A tool, or a tool_choice that names one, is an object, and so is its `function`."""
    if not isinstance(value, Mapping):
        raise InvalidRequestError(f"{where} must be an object, not {type(value).__name__}")
    function = value.get("function")
    if function is not None and not isinstance(function, Mapping):
        raise InvalidRequestError(
            f"{where}.function must be an object, not {type(function).__name__}"
        )


def _check_shapes(messages: list[Any], key: str) -> None:
    """The fields of each message read before it is validated whole have their types (an SDK
    object's are typed already): a role or type that is a list, say, is named here."""
    for i, message in enumerate(messages):
        if type(message) is not dict:
            continue
        for name, kind in _SHAPE:
            value = message.get(name)
            if value is not None and not isinstance(value, kind):
                raise InvalidMessageError(
                    f"{key}[{i}] has {_field_name(name)} of type {type(value).__name__}; "
                    f"{name} is a {kind.__name__}"
                )


def _field_name(name: str) -> str:
    return name if name == "tool_calls" else f"a {name}"


def entry(
    fmt: Format,
    message: Any,
    where: str,
    known_calls: Callable[[str], bool],
    body: bytes | None = None,
    digest: bytes | None = None,
) -> Entry:
    """Validate one history message and collect what storing and counting it needs."""
    if body is None:
        body = body_of(message, where)
    msg = plain(body)
    role, kind, side, calls, answers = _MODULES[fmt].classify(msg, where, known_calls)
    texts: list[str] = []
    fixed = media_tokens_and_texts(msg, texts, _MEDIA) + C.TOKENS_PER_MESSAGE
    if isinstance(msg, dict) and "name" in msg:
        fixed += C.TOKENS_PER_NAME
    return Entry(
        body=body,
        digest=digest if digest is not None else digest_of(msg, where),
        role=role,
        kind=kind,
        side=side,
        calls=calls,
        answers=answers,
        texts=texts,
        fixed_tokens=fixed,
    )


def assemble(parsed: ParsedRequest, view: list[Any]) -> dict[str, Any]:
    """The caller's request with its history replaced by the view; every other field unchanged."""
    return _MODULES[parsed.format].assemble(parsed.request, parsed.instructions, view)


def parse_response(fmt: Format, response: Any) -> Reply:
    """The reply of a provider response in format `fmt`: an SDK object or a plain dict, or the
    chunks or events of a streamed one (see `streams`)."""
    if streams.is_async_stream(response):
        raise InvalidResponseError(
            "the response is an async stream: pass it to `await "
            "mem.areport(...)`, or collect its chunks into a list first"
        )
    try:
        if streams.is_stream(response):
            events = (streams.lighten(e) for e in response)
            data = streams.collect(fmt, [to_plain(e, "a streamed chunk") for e in events])
        else:
            data = to_plain(response, "the response")
    except InvalidRequestError as exc:
        raise InvalidResponseError(str(exc)) from None
    if not isinstance(data, dict):
        raise InvalidResponseError(f"a response must be an object, not {type(data).__name__}")
    looks_like = (
        Format.CHAT_COMPLETIONS
        if "choices" in data
        else (Format.RESPONSES if "output" in data else None)
    )
    if looks_like is None:
        raise InvalidResponseError(
            "the response has neither choices (Chat Completions) nor output (Responses)"
        )
    if looks_like is not fmt:
        raise InvalidResponseError(
            f"a {looks_like.value} response was reported for a {fmt.value} request"
        )
    return _MODULES[fmt].reply(data)


def reply_items_sent(response: Any) -> int:
    """How many output items a Responses reply (a dict or an SDK object) holds, counted before
    it is parsed, so that a reply over max_request_messages is refused without reading it
    (parsing 100,000 items took 2 s and 135 MB first). 0 when it holds no list of them (a Chat
    reply, a stream, something malformed): parsing judges those."""
    if isinstance(response, dict):
        output = response.get("output")
    elif hasattr(response, "model_dump"):  # an SDK object: its fields are plain attributes
        output = getattr(response, "output", None)
    else:
        return 0
    return len(output) if isinstance(output, (list, tuple)) else 0


def is_user_message(message: Any) -> bool:
    """Whether a sent item is a user's message (not a tool output or another kind of item)."""
    return (
        isinstance(message, dict)
        and message.get("role") == "user"
        and (message.get("type") in (None, "message"))
    )


def text_of(value: Any) -> list[str]:
    """The text leaves of a message or item (what a reader or a search sees)."""
    texts: list[str] = []
    media_tokens_and_texts(value, texts, _MEDIA)
    return texts
