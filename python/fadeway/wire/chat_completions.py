"""The Chat Completions wire format: `messages` with roles system/developer/user/assistant/tool."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import (
    InvalidMessageError,
    InvalidResponseError,
    UnknownRoleError,
    UnmatchedToolOutputError,
)
from .base import Classified, Reply, Side, token_count

__all__ = ["ROLES", "split", "classify", "assemble", "reply"]

ROLES = ("system", "developer", "user", "assistant", "tool")
INSTRUCTION_ROLES = frozenset({"system", "developer"})
_CONTENT_PART_TYPES = frozenset({"text", "image_url", "input_audio", "file", "refusal"})


def _role_of(message: Any) -> str | None:
    role = message.get("role") if isinstance(message, dict) else getattr(message, "role", None)
    return role if isinstance(role, str) else None


def split(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """Leading system/developer messages are the caller's instructions; the rest is history."""
    n = 0
    while n < len(messages) and _role_of(messages[n]) in INSTRUCTION_ROLES:
        n += 1
    return messages[:n], messages[n:]


def _check_content(msg: dict[str, Any], where: str, *, required: bool) -> None:
    content = msg.get("content")
    if content is None:
        if required:
            raise InvalidMessageError(f"{where} has role {msg['role']!r} but no content")
        return
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise InvalidMessageError(
            f"{where} content must be a string or a list of parts, not {type(content).__name__}"
        )
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str) or kind not in _CONTENT_PART_TYPES:
            raise InvalidMessageError(
                f"{where} content part {i} must be an object with a type in "
                f"{sorted(_CONTENT_PART_TYPES)}"
            )


def _tool_call_ids(msg: dict[str, Any], where: str) -> tuple[str, ...]:
    calls = msg.get("tool_calls")
    if calls is None:
        return ()
    if not isinstance(calls, list):
        raise InvalidMessageError(f"{where} tool_calls must be a list")
    ids = []
    for i, call in enumerate(calls):
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessageError(f"{where} tool_calls[{i}] has no string id")
        ids.append(call_id)
    return tuple(ids)


def classify(msg: Any, where: str, known_calls: Callable[[str], bool]) -> Classified:
    """Validate one history message (plain JSON); `known_calls(id)`: did an earlier call make id?"""
    if not isinstance(msg, dict):
        raise InvalidMessageError(f"{where} must be an object, not {type(msg).__name__}")
    role = msg.get("role")
    if role not in ROLES:
        raise UnknownRoleError(f"{where} has role {role!r}; expected one of {', '.join(ROLES)}")
    if "name" in msg and not isinstance(msg["name"], (str, type(None))):
        raise InvalidMessageError(f"{where} has a name that is not a string")
    calls: tuple[str, ...] = ()
    answers = None
    if role == "assistant":
        calls = _tool_call_ids(msg, where)
        has_other = calls or msg.get("refusal") or msg.get("audio") or msg.get("function_call")
        _check_content(msg, where, required=not has_other)
        side = Side.ASSISTANT
    elif role == "tool":
        _check_content(msg, where, required=True)
        answers = msg.get("tool_call_id")
        if not isinstance(answers, str):
            raise InvalidMessageError(f"{where} has role 'tool' but no string tool_call_id")
        if not known_calls(answers):
            raise UnmatchedToolOutputError(
                f"{where} has role 'tool' but no earlier assistant call has id {answers!r}"
            )
        side = Side.OUTPUT
    else:
        _check_content(msg, where, required=True)
        side = Side.USER if role == "user" else Side.SYSTEM
    return Classified(role, "message", side, calls, answers)


def assemble(request: dict[str, Any], instructions: list[Any], view: list[Any]) -> dict[str, Any]:
    """The caller's request with its messages replaced by instructions + view."""
    out = dict(request)
    out["messages"] = [*instructions, *view]
    return out


def reply(response: dict[str, Any]) -> Reply:
    """The first choice's message of a chat completion."""
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        raise InvalidResponseError("chat completion has no choices")
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(message, dict) or message.get("role") != "assistant":
        raise InvalidResponseError("chat completion choices[0] has no assistant message")
    calls = message.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise InvalidResponseError(
            f"chat completion choices[0] message has tool_calls of type {type(calls).__name__}; "
            "tool_calls is a list"
        )
    usage = response.get("usage") or {}
    content = message.get("content")
    return Reply(
        items=[message],
        tool_calls=[c for c in calls or [] if isinstance(c, dict)],
        prompt_tokens=token_count(usage.get("prompt_tokens") if isinstance(usage, dict) else None),
        text=content if isinstance(content, str) else "",
    )
