"""Server-sent events as the proxy relays them: cut at blank lines, each event's `data:` read
as JSON (for `report` and the note filter), and written back unchanged unless it was changed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Event", "EventSplitter", "encode_event"]

_BOUNDARY = re.compile(rb"\r?\n\r?\n")


@dataclass(frozen=True, slots=True)
class Event:
    """One event: its bytes as received (with the blank line that ends it), its `event:` name,
    and its data as JSON (None for `[DONE]`, a comment, or data that is not JSON)."""

    raw: bytes
    name: str | None
    data: Any
    done: bool = False  # `data: [DONE]`, the end of a Chat Completions stream


class EventSplitter:
    """Feeds bytes in, hands complete events out."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[Event]:
        self._buffer += data
        out = []
        while match := _BOUNDARY.search(self._buffer):
            raw, self._buffer = self._buffer[: match.end()], self._buffer[match.end() :]
            out.append(_parse(raw))
        return out

    def rest(self) -> Event | None:
        """What is left after the stream ended without a blank line (a cut stream), if any."""
        raw, self._buffer = self._buffer, b""
        return _parse(raw) if raw.strip() else None


def _parse(raw: bytes) -> Event:
    name = None
    data = []
    for line in raw.decode("utf-8", "replace").splitlines():
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)
    text = "\n".join(data)
    try:
        parsed = json.loads(text) if data and text != "[DONE]" else None
    except ValueError:
        parsed = None
    return Event(raw, name, parsed, text == "[DONE]")


def encode_event(event: Event, data: Any) -> bytes:
    """`event` with other data (its name kept)."""
    head = f"event: {event.name}\n" if event.name is not None else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
