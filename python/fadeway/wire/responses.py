"""The Responses wire format: `instructions`, and `input` as a string or a list of items."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import (
    InvalidMessageError,
    InvalidResponseError,
    ServerStateError,
    UnknownRoleError,
    UnmatchedToolOutputError,
)
from .base import Classified, Reply, Side, token_count

__all__ = ["ROLES", "split", "classify", "assemble", "reply", "normalise_input"]

ROLES = ("user", "assistant", "system", "developer")
INSTRUCTION_ROLES = frozenset({"system", "developer"})

#: Output item types, with the key that names the call they answer.
OUTPUT_REF = {
    "function_call_output": "call_id",
    "custom_tool_call_output": "call_id",
    "computer_call_output": "call_id",
    "tool_search_output": "call_id",
    "shell_call_output": "call_id",
    "apply_patch_call_output": "call_id",
    "local_shell_call_output": "id",
    "mcp_approval_response": "approval_request_id",
}
#: Item types the model produces (calls, reasoning, server-side tool runs).
ASSISTANT_TYPES = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "tool_search_call",
        "reasoning",
        "web_search_call",
        "file_search_call",
        "image_generation_call",
        "code_interpreter_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "compaction",
        "additional_tools",
    }
)
#: Calls the caller's own loop runs and answers with an output item.
CLIENT_CALL_TYPES = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
    }
)
_KNOWN_TYPES = sorted({"message", *OUTPUT_REF, *ASSISTANT_TYPES})


def _field(item: Any, name: str) -> Any:
    if isinstance(item, dict):
        return item.get(name)
    return getattr(item, name, None)


def normalise_input(value: Any) -> list[Any]:
    """`input` as a list of items: a bare string is one user message."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if isinstance(value, list):
        return value
    raise InvalidMessageError(
        f"input must be a string or a list of items, not {type(value).__name__}"
    )


def split(items: list[Any]) -> tuple[list[Any], list[Any]]:
    """Leading system/developer messages join `instructions` as the caller's instructions."""
    n = 0
    while n < len(items) and _is_instruction(items[n]):
        n += 1
    return items[:n], items[n:]


def _is_instruction(item: Any) -> bool:
    role, kind = _field(item, "role"), _field(item, "type")
    return isinstance(role, str) and role in INSTRUCTION_ROLES and kind in (None, "message")


def _calls_made(item: dict[str, Any], kind: str) -> tuple[str, ...]:
    ids = []
    call_id = item.get("call_id")
    if isinstance(call_id, str):
        ids.append(call_id)
    if kind in ("local_shell_call", "mcp_approval_request") and isinstance(item.get("id"), str):
        ids.append(item["id"])
    return tuple(ids)


def classify(item: Any, where: str, known_calls: Callable[[str], bool]) -> Classified:
    """Validate one input item (plain JSON); `known_calls(id)`: did an earlier call make id?"""
    if not isinstance(item, dict):
        raise InvalidMessageError(f"{where} must be an object, not {type(item).__name__}")
    kind = item.get("type")
    if kind is None and "role" in item:
        kind = "message"
    if not isinstance(kind, str):
        raise InvalidMessageError(
            f"{where} has a type of type {type(kind).__name__}; type is a string"
        )
    if kind == "item_reference":
        raise ServerStateError(
            f"{where} is an item_reference to provider-side state; send the item itself"
        )
    if kind == "message":
        role = item.get("role")
        if role not in ROLES:
            raise UnknownRoleError(f"{where} has role {role!r}; expected one of {', '.join(ROLES)}")
        content = item.get("content")
        if not isinstance(content, (str, list)):
            raise InvalidMessageError(f"{where} content must be a string or a list of parts")
        if isinstance(content, list) and not all(
            isinstance(p, dict) and isinstance(p.get("type"), str) for p in content
        ):
            raise InvalidMessageError(f"{where} content parts must be objects with a string type")
        side = {"user": Side.USER, "assistant": Side.ASSISTANT}.get(role, Side.SYSTEM)
        return Classified(role, "message", side, (), None)
    if kind in OUTPUT_REF:
        ref = item.get(OUTPUT_REF[kind])
        if not isinstance(ref, str):
            raise InvalidMessageError(f"{where} is a {kind} with no string {OUTPUT_REF[kind]}")
        if not known_calls(ref):
            raise UnmatchedToolOutputError(
                f"{where} is a {kind} but no earlier call has id {ref!r}"
            )
        return Classified("tool", kind, Side.OUTPUT, (), ref)
    if kind in ASSISTANT_TYPES:
        return Classified("assistant", kind, Side.ASSISTANT, _calls_made(item, kind), None)
    raise InvalidMessageError(
        f"{where} has type {kind!r}; expected a message or one of {', '.join(_KNOWN_TYPES)}"
    )


def assemble(request: dict[str, Any], instructions: list[Any], view: list[Any]) -> dict[str, Any]:
    """The caller's request with its input replaced by the leading instructions + view."""
    out = dict(request)
    out["input"] = [*instructions, *view]
    return out


def reply(response: dict[str, Any]) -> Reply:
    """The output items of a response."""
    output = response.get("output")
    if not isinstance(output, list):
        raise InvalidResponseError("response has no output list")
    items = [item for item in output if isinstance(item, dict)]
    if len(items) != len(output):
        raise InvalidResponseError("response output holds a non-object item")
    for i, item in enumerate(items):
        _check_output_item(i, item)
    texts = [
        part.get("text", "")
        for item in items
        if item.get("type") == "message"
        for part in item.get("content") or []
        if isinstance(part, dict) and part.get("type") == "output_text"
    ]
    usage = response.get("usage") or {}
    return Reply(
        items=items,
        tool_calls=[item for item in items if item.get("type") in CLIENT_CALL_TYPES],
        prompt_tokens=token_count(usage.get("input_tokens") if isinstance(usage, dict) else None),
        text="".join(t for t in texts if isinstance(t, str)),
    )


def _check_output_item(i: int, item: dict[str, Any]) -> None:
    """An output item's type is a string, a message's content a list of parts (or a string),
    and a message is the assistant's: any other role stored from a reply would stand in every
    later request as the caller's own words."""
    kind = item.get("type")
    if kind is not None and not isinstance(kind, str):
        raise InvalidResponseError(
            f"response output item {i} has a type of type {type(kind).__name__}; type is a string"
        )
    if kind == "message" or (kind is None and "role" in item):
        if item.get("role") != "assistant":
            raise InvalidResponseError(
                f"response output item {i} is a message of role {item.get('role')!r}; output "
                "messages are the assistant's"
            )
        content = item.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise InvalidResponseError(
                f"response output item {i} has content of type {type(content).__name__}; "
                "content is a list of parts"
            )
