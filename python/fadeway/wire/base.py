"""What both wire formats share: the parsed request, history entries and replies."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "Format",
    "Side",
    "Classified",
    "Entry",
    "ParsedRequest",
    "Reply",
    "media_tokens_and_texts",
    "token_count",
]

#: The largest count SQLite's INTEGER holds: a provider's token count above it is no count.
_MAX_COUNT = 2**63 - 1


class Format(enum.StrEnum):
    """The two wire formats fadeway manages."""

    CHAT_COMPLETIONS = "chat_completions"
    RESPONSES = "responses"


class Side(enum.StrEnum):
    """Where a history entry stands in a conversation; units are cut from these."""

    USER = "user"  # a user message: starts a unit and a turn
    SYSTEM = "system"  # a system/developer message inside the history: a unit of its own
    ASSISTANT = "assistant"  # an assistant message, tool call or reasoning item
    OUTPUT = "output"  # a tool output: belongs to the assistant step that called it


class Classified(NamedTuple):
    """What validation learns of a history message: its role, kind, side and calls."""

    role: str
    kind: str
    side: Side
    calls: tuple[str, ...]
    answers: str | None


@dataclass(slots=True)
class Entry:
    """One history message or item, validated, with what storage and estimation need."""

    body: bytes  # the JSON exactly as sent
    digest: bytes  # canonical digest (see canonical.py)
    role: str  # user / assistant / tool / system / developer
    kind: str  # "message", or the Responses item type
    side: Side
    calls: tuple[str, ...] = ()  # call ids this entry makes
    answers: str | None = None  # the call id this entry answers
    texts: list[str] = field(default_factory=list)  # text to count
    fixed_tokens: int = 0  # tokens of media the text does not show, plus per-message overhead


@dataclass(slots=True)
class ParsedRequest:
    """A caller's request, split into instructions and history (ARCHITECTURE, Contracts)."""

    format: Format
    request: dict[str, Any]  # the caller's top-level fields, unchanged
    instructions: list[Any]  # leading system/developer messages, as sent
    history: list[Any]  # everything after them, as sent
    model: str | None


@dataclass(slots=True)
class Reply:
    """The reply a provider response carries."""

    items: list[Any]  # the messages/items to store, as plain JSON values
    tool_calls: list[dict[str, Any]]  # the calls the caller's loop runs
    prompt_tokens: int | None  # the provider's count of the request
    text: str  # the reply's text for the user, "" when none


def token_count(value: object) -> int | None:
    """A provider's token count as reported, or None when it gave none that could be one: not
    an integer (a bool is not one), negative, or too large to store."""
    if type(value) is int and 0 <= value <= _MAX_COUNT:
        return value
    return None


_MEDIA_KEYS = {
    "image_url": "image",
    "input_image": "image",
    "input_audio": "audio",
    "file": "file",
    "input_file": "file",
}
# Keys whose values are identifiers or opaque data, not text the model reads as tokens.
_SKIP_KEYS = frozenset(
    {
        "type",
        "role",
        "id",
        "status",
        "call_id",
        "tool_call_id",
        "detail",
        "format",
        "encrypted_content",
        "approval_request_id",
        "annotations",
        "logprobs",
    }
)


def media_tokens_and_texts(value: Any, texts: list[str], media: dict[str, int]) -> int:
    """Collect the text leaves of a message into `texts`; return the fixed tokens of its media.

    `media` maps "image", "audio" and "file" to their fixed token estimates.
    """
    fixed = 0
    if isinstance(value, dict):
        kind = value.get("type")
        if isinstance(kind, str) and kind in _MEDIA_KEYS:
            return media[_MEDIA_KEYS[kind]]
        for key, item in value.items():
            if key in _SKIP_KEYS:
                continue
            if key in _MEDIA_KEYS and not isinstance(item, str):
                fixed += media[_MEDIA_KEYS[key]]
                continue
            fixed += media_tokens_and_texts(item, texts, media)
    elif isinstance(value, list):
        for item in value:
            fixed += media_tokens_and_texts(item, texts, media)
    elif isinstance(value, str):
        if value and not value.startswith("data:"):
            texts.append(value)
    return fixed
