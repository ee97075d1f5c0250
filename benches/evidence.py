"""The strict evidence count shared by every recall bench (`recall_locomo.py`,
`recall_padded.py`): whether a text the model receives carries an evidence turn's own text.

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

Only this count is reported. The functions are small and pure so they can be checked alone; the
self-checks at the bottom run with `python benches/evidence.py`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

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


def surfaced(
    text: str | Received | None, keys: Mapping[str, TurnKey], ids: Iterable[str]
) -> set[str]:
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


def _self_checks() -> None:
    assert normalise("  Ｆｕｌｌ\u00a0width\n\tTEXT, kept! ") == "full width text, kept!"
    assert normalise("Straße") == "strasse"  # casefold, not lower
    assert words("It's 9-5, OK?") == ["it", "s", "9", "5", "ok"]
    assert runs(["a", "b", "c"], 2) == {("a", "b"), ("b", "c")} and runs(["a"], 2) == set()

    turn = (
        "Hey Gina! Good to see you too. Lost my job as a banker yesterday, so I'm gonna take "
        "a shot at starting my own business."
    )
    keys = {"D1:2": turn_key(turn), "D9:9": turn_key("Thanks!"), "D0:0": turn_key("")}
    # Quoted whole, with the speaker and a caption around it, on other lines, other case.
    block = f"- [Turn 1 · User · Jan 20]\nJon:   {turn.upper()} [image: a desk]"
    assert surfaced(block, keys, ["D1:2"]) == {"D1:2"}
    # Only a later sentence, 10+ words long, quoted (a fact): the run of words finds it.
    fact = "- [2023-01-20, turn 1] Jon: Lost my job as a banker yesterday, so I'm gonna take a shot"
    assert surfaced(fact, keys, ["D1:2"]) == {"D1:2"}
    # Nine words of it are not enough, nor the same words out of order.
    assert surfaced("my job as a banker yesterday, so i'm", keys, ["D1:2"]) == set()  # 9: i, m
    assert surfaced("yesterday banker a as job my lost so i'm gonna take", keys, ["D1:2"]) == set()
    # The head is the turn's whole first 60 characters: a shorter opening is not enough.
    assert surfaced("Jon: Hey Gina! Good to see you too. Lost my", keys, ["D1:2"]) == set()
    # A short turn is found whole; an empty one never; no text surfaces nothing.
    assert surfaced("Gina: Thanks! See you.", keys, ["D9:9", "D0:0"]) == {"D9:9"}
    assert surfaced(None, keys, ["D1:2"]) == set()
    # Unicode look-alikes fold: a fullwidth quote of the head still counts.
    wide = unicodedata.normalize("NFKC", turn[:70]).translate(
        {c: c + 0xFEE0 for c in range(0x21, 0x7F)}
    )
    assert surfaced(wide, keys, ["D1:2"]) == {"D1:2"}

    known = {"D8:6", "D9:17", "D11:26", "D30:5"}
    raw = ["D8:6; D9:17", "D:11:26", "D30:05", "D", "D99:1", "D8:6"]
    assert evidence_ids(raw, known) == ["D8:6", "D9:17", "D11:26", "D30:5"]


if __name__ == "__main__":
    _self_checks()
    print("evidence.py: self-checks passed")
