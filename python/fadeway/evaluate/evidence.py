"""The strict evidence count shared by `fadeway eval --no-answer` and every recall bench
(`benches/recall_locomo.py`, `recall_padded.py`): whether a text the model receives carries an
evidence turn's own text.

An evidence turn counts as surfaced by a text (a recall block, a whole decorated request, a
baseline's turns) when that text carries the turn's own words:

- its first 60 characters, normalised, appear in the normalised text (normalised: Unicode
  NFKC, casefolded, every run of whitespace collapsed to one space, punctuation kept; a turn
  shorter than 60 characters must appear whole), or
- any 10 consecutive words of the turn appear consecutively among the text's words (words are
  `\\w+` tokens of the lowercased text).

"The turn's own text" is what its speaker said (LoCoMo's `text` field), without the speaker's
name or the photo caption the replay adds, so the same key is looked for in every system's text,
whatever it frames the turn with. A fact that quotes a turn (the offline note writer is
extractive) surfaces it by the same rule when it carries those words; a fact is never credited
with the turns of the episodes its note came from. That generous "range" count (a fact surfacing
every turn of its note's episodes) is retired as a goal: it credited turns the model never saw.

Only this count is reported. The functions are small and pure; tests/test_evidence.py checks
them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "HEAD_CHARS",
    "RUN_WORDS",
    "Received",
    "TurnKey",
    "carries",
    "evidence_ids",
    "normalise",
    "runs",
    "surfaced",
    "turn_key",
    "words",
]

K = TypeVar("K", bound=Hashable)  # what names a turn: a dia_id, an index

#: Characters of a turn's normalised text that must appear in the text received.
HEAD_CHARS = 60
#: Consecutive words of a turn that, found consecutively in the text received, surface it.
RUN_WORDS = 10

_WHITESPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


def normalise(text: str) -> str:
    """NFKC, casefolded, whitespace runs collapsed to one space (trimmed); punctuation kept."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def words(text: str) -> list[str]:
    """The `\\w+` tokens of the lowercased text."""
    return _WORD.findall(text.lower())


def runs(tokens: Sequence[str], n: int = RUN_WORDS) -> set[tuple[str, ...]]:
    """Every run of `n` consecutive tokens (none when there are fewer than `n`)."""
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


@dataclass(frozen=True)
class TurnKey:
    """What identifies a turn in a text: its normalised head and its runs of words."""

    head: str
    runs: frozenset[tuple[str, ...]]


def turn_key(text: str) -> TurnKey:
    """The key of a turn whose own text is `text`."""
    return TurnKey(normalise(text)[:HEAD_CHARS], frozenset(runs(words(text))))


class Received:
    """A text the model receives, prepared once for any number of look-ups."""

    __slots__ = ("normalised", "runs", "words")

    def __init__(self, text: str) -> None:
        self.normalised = normalise(text)
        self.words = words(text)
        self.runs = runs(self.words)


def carries(received: Received, key: TurnKey) -> bool:
    """Whether `received` carries the turn of `key` (an empty turn is carried by nothing)."""
    if key.head and key.head in received.normalised:
        return True
    return not received.runs.isdisjoint(key.runs)


def surfaced(text: str | Received | None, keys: Mapping[K, TurnKey], ids: Iterable[K]) -> set[K]:
    """The turns of `ids` (keys of `keys`) that `text` carries; none when there is no text."""
    if text is None:
        return set()
    received = text if isinstance(text, Received) else Received(text)
    return {i for i in ids if carries(received, keys[i])}


def evidence_ids(raw: Sequence[object], known: Iterable[str]) -> list[str]:
    """A LoCoMo question's evidence dia_ids, repaired ("D8:6; D9:17", "D:11:26", "D30:05") and
    limited to turns of the conversation (`known`), in order, each once."""
    known = set(known)
    out: list[str] = []
    for item in raw:
        for a, b in _EVIDENCE.findall(str(item)):
            dia = f"D{int(a)}:{int(b)}"
            if dia in known and dia not in out:
                out.append(dia)
    return out
