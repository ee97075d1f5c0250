"""The parts of a message (MECHANISM: "Recall").

"The message is split into its parts (sentences and lines, short ones joined, long ones windowed),
so a question tacked onto a long correction gets its own memories." The split is the Rust kernel
`split_parts` (rules in `rust/core/src/parts.rs`); this module turns its character spans
into `Part`s and drops the blank ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import _constants as C
from .._core import split_parts

__all__ = ["Part", "message_parts"]

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a message: its text, stripped, and its span `[start, end)` in the message.

    `start` and `end` are `str` indices of the unstripped span, so `text` is
    `message[start:end].strip()`. Windows of a long part overlap; other parts touch.
    """

    text: str
    start: int
    end: int


def message_parts(
    text: str,
    *,
    min_chars: int = C.PART_MIN_CHARS,
    max_chars: int = C.PART_MAX_CHARS,
    overlap: int = C.PART_OVERLAP_CHARS,
) -> list[Part]:
    """The parts of `text`, in order: sentences and lines, those under `min_chars` visible
    characters joined to a neighbour, those over `max_chars` cut into windows overlapping by at
    most `overlap`. Every non-whitespace character lies in some part; an empty or blank message
    has none. Raises ValueError unless 0 <= min_chars <= max_chars and 0 <= overlap < max_chars.
    """
    parts = []
    # A lone surrogate (JSON allows "\ud800") cannot cross into Rust as UTF-8; one replacement
    # character in its place keeps every index, so the spans still index `text`.
    safe = _SURROGATE.sub("\ufffd", text)
    for start, end in split_parts(safe, min_chars, max_chars, overlap):
        stripped = text[start:end].strip()
        # Only a window inside a long run of whitespace is blank.
        if stripped:
            parts.append(Part(stripped, start, end))
    return parts
