"""The engine's limits on sizes (issue 33): a message's bytes, messages per request or reply,
entries and bytes of a note. Each is a setting of `fadeway.open`; each refusal names its setting,
what was found and what is allowed, and comes before anything is written.

Nesting depth stays the constant MAX_JSON_DEPTH (`canonical.check_depth`): it guards Python's
recursion in code that has no engine at hand (encoding, digests, the note parser), and no real
message comes near it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

from .. import _constants as C
from ..errors import LimitExceededError
from .canonical import encode_json

__all__ = ["Limits", "Over", "note_bytes"]

# What encoding a value that is not JSON raises (its own check says what is wrong).
_NOT_JSON = (TypeError, ValueError, RecursionError, msgspec.EncodeError)


@dataclass(frozen=True, slots=True)
class Limits:
    """The sizes an engine accepts (see `_constants` for what each default trades)."""

    max_message_bytes: int = C.MAX_MESSAGE_BYTES
    max_request_messages: int = C.MAX_REQUEST_MESSAGES
    max_note_facts: int = C.MAX_NOTE_FACTS
    max_note_bytes: int = C.MAX_NOTE_BYTES

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")

    def check_count(self, count: int, what: str) -> None:
        """Raise when `what` (a request's list, a reply) holds more than max_request_messages."""
        if count > self.max_request_messages:
            over = Over("max_request_messages", count, self.max_request_messages, "messages")
            raise over.error(what, LimitExceededError)

    def check_body(
        self, body: bytes, where: str, error: type[LimitExceededError] = LimitExceededError
    ) -> None:
        """Raise `error` when the JSON `body` of the message at `where` is over
        max_message_bytes."""
        self.check_size(len(body), where, error)

    def check_size(
        self, size: int, where: str, error: type[LimitExceededError] = LimitExceededError
    ) -> None:
        """Raise `error` when `size` bytes of JSON (the message at `where`) are over
        max_message_bytes."""
        if size > self.max_message_bytes:
            over = Over("max_message_bytes", size, self.max_message_bytes, "bytes of JSON")
            raise over.error(where, error)

    def check_reply(self, response: Any) -> None:
        """Raise when an item of a plain-dict reply (a chat completion's first choice's message,
        the one stored; a response's output items) is over max_message_bytes, before the whole
        reply is read
        (reading a 50 MB reply, before its size was known, took 0.35 s). SDK objects and
        streams are measured as they are read."""
        if not isinstance(response, dict):
            return
        choices = response.get("choices")
        if isinstance(choices, list):
            first = choices[0] if choices else None
            items = [first.get("message")] if isinstance(first, dict) else []
        elif isinstance(response.get("output"), list):
            items = response["output"]
        else:
            return
        for i, item in enumerate(items):
            try:
                body = encode_json(item)
            except _NOT_JSON:
                continue  # reading the reply says what is wrong with it
            self.check_body(body, f"reply item {i}")

    def check_fields(self, request: dict[str, Any], skip: Collection[str]) -> None:
        """Raise when a field of `request` but those in `skip` (its history list, checked
        message by message) is over max_message_bytes as JSON: its tools, response_format or
        text format, metadata and the rest pass through into every request of the memory."""
        for name, value in request.items():
            if name in skip or value is None or isinstance(value, (bool, int, float)):
                continue
            try:
                body = encode_json(value)
            except _NOT_JSON:
                continue  # not JSON (a response_format class the SDK reads): passed through
            self.check_body(body, f"the request's {name}")

    def note_over(self, arguments: str, facts: int | None = None) -> Over | None:
        """Which note limit a note call's `arguments` (holding `facts` entries, when read) is
        over; None when within them."""
        size = note_bytes(arguments)
        if size > self.max_note_bytes:
            return Over("max_note_bytes", size, self.max_note_bytes, "bytes of arguments")
        if facts is not None and facts > self.max_note_facts:
            return Over("max_note_facts", facts, self.max_note_facts, "entries")
        return None


class Over(NamedTuple):
    """A size over one of the limits: the setting, what was found, the limit, and its unit."""

    setting: str
    found: int
    limit: int
    unit: str

    def __str__(self) -> str:
        return f"{self.found} {self.unit}, over the engine's limit of {self.limit} ({self.setting})"

    def error(self, what: str, error: type[LimitExceededError]) -> LimitExceededError:
        """`error` saying that `what` is over this limit."""
        return error(
            f"{what} holds {self}", setting=self.setting, found=self.found, limit=self.limit
        )


def note_bytes(arguments: str) -> int:
    """The size of a note call's arguments in bytes of UTF-8 (a lone surrogate counts too)."""
    return len(arguments.encode("utf-8", "surrogatepass"))
