"""The judge interface: every judgment the spec asks of a judgment model.

Judgments are async and batched, and take a deadline (an absolute `time.monotonic()` value,
or None for no limit): the LLM-backed judge of a later stage does network I/O, and the offline
and scripted judges honour the same shape. A judge that cannot answer by the deadline raises
`JudgeTimeout`; callers fall back as the spec says for each judgment.

"No answer": a model-backed judge may be left without a usable answer for some items (its answer
did not parse, or named ids it was not given, even after one retry). Such an item is `None` in
the result, never a made-up answer; each caller reads None as the judgment's neutral outcome:

- `boundaries`: a None score counts 0.0 (`Boundaries.slots`; the cut in `episodes/cut.py`);
- `about`: no trace is written for that fact and episode (`forgetting/scoring.py`);
- `relate`: "unrelated" (nothing merges, nothing retires; `graph/update.py`);
- `same_entity`: False (the name becomes an entity of its own; `graph/update.py`);
- `levels`: KEEP_LEVEL (the fact is shown as a search hit but does not lead on; `recall.walk`);
- `distill`: keep the item (`recall/distill.py`).

The offline and scripted judges always answer. A judge that cannot reach its model at all raises
(`fadeway.errors.EndpointError` for the LLM judge): lane jobs are retried, and decorate's inline
uses fall back as they do for `JudgeTimeout`.

Implemented judgments:

- `boundaries`: each unit read in context, scored as the first and as the last message of a
  concept (MECHANISM: "Episodes").
- `about`: is this fact about that episode? A yes or no with a score, for every pair of a batch
  of facts and a batch of episodes (MECHANISM: "Encoding and traces"). A judge may score its
  noes 0.0 (the LLM judge asks for the yeses only). An episode in view is its messages' text;
  one out of view, the facts that stand for it (`remembered_text`).
- `relate`: is a new fact the same as one already held, does it contradict it, or neither
  (MECHANISM: "The note ask and sealing": a restated fact merges, a newer one retires).
- `same_entity`: are two names the same entity (confirms a candidate that similarity found)?
- `levels`: candidate facts scored on four levels against the recent dialogue, for the walk
  (MECHANISM: "Recall").
- `distill`: which facts of a recall block were relevant to the turn and not already said.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import JudgeTimeout

__all__ = [
    "Judge",
    "JudgeTimeout",
    "UnitText",
    "Boundaries",
    "Answer",
    "FactText",
    "Relation",
    "RELATIONS",
    "UNRELATED",
    "RELATED",
    "RELEVANT",
    "CENTRAL",
    "REMEMBERED",
    "remembered_text",
]

#: The first paragraph of an episode out of view as `about` reads it (`remembered_text`).
REMEMBERED = "(Out of view: the facts remembered of it.)"


def remembered_text(facts: Sequence[str]) -> str:
    """An episode out of view as `about` reads it: the facts that stand for it, after the
    REMEMBERED line, a blank line apart (as an episode's messages are)."""
    return "\n\n".join([REMEMBERED, *facts])


@dataclass(frozen=True, slots=True)
class UnitText:
    """What a judge reads of a unit: who speaks and what is said (tool outputs included)."""

    role: str  # "user", "assistant" or "system"
    text: str


@dataclass(frozen=True, slots=True)
class Boundaries:
    """Per unit: how much it reads as the first message of a concept, and as the last (None:
    no answer for that unit)."""

    first: list[float | None]
    last: list[float | None]

    def slots(self) -> list[float]:
        """Score of each gap between units j and j+1: unit j ends a concept, j+1 starts one.

        A unit without an answer counts 0.0 there: it neither draws a cut nor blocks one."""
        return [
            (self.last[j] or 0.0) + (self.first[j + 1] or 0.0) for j in range(len(self.first) - 1)
        ]


@dataclass(frozen=True, slots=True)
class Answer:
    """A judge's answer to a yes/no question: only a yes counts; the score is kept as given."""

    yes: bool
    score: float


@dataclass(frozen=True, slots=True)
class FactText:
    """A fact as a judge reads it: its sentence and its two entities (canonical names)."""

    text: str
    subject: str
    object: str


#: How a new fact stands to one already held.
Relation = str  # "same" | "contradicts" | "unrelated"
RELATIONS = ("same", "contradicts", "unrelated")

#: The walk's four levels, from unrelated to central.
UNRELATED, RELATED, RELEVANT, CENTRAL = 0, 1, 2, 3


class Judge(abc.ABC):
    """A judgment model. Subclasses answer each judgment for a batch of items at once."""

    #: A short name recorded with what the judge decided.
    name: str = "judge"
    #: True for a judge whose judgments never wait (no I/O, no sleep): a caller in a hurry may
    #: then run them without an event loop (`lane.run_ready`).
    ready: bool = False

    def close(self) -> None:  # noqa: B027 - most judges hold nothing to release
        """Release what the judge holds (an LLM judge's connections); the engine calls it."""

    @abc.abstractmethod
    async def boundaries(
        self,
        units: Sequence[UnitText],
        *,
        before: Sequence[UnitText] = (),
        after: Sequence[UnitText] = (),
        deadline: float | None = None,
    ) -> Boundaries:
        """Score `units` as first and last messages of a concept.

        `before` and `after` are the units around them, given as context only: they are not
        scored. The result has one first and one last score per unit of `units`.
        """

    @abc.abstractmethod
    async def about(
        self, facts: Sequence[str], episodes: Sequence[str], *, deadline: float | None = None
    ) -> list[list[Answer | None]]:
        """For each fact, for each episode (its text, or `remembered_text` for one out of
        view): is this fact about that episode?"""

    @abc.abstractmethod
    async def relate(
        self, pairs: Sequence[tuple[FactText, FactText]], *, deadline: float | None = None
    ) -> list[Relation | None]:
        """For each (new fact, held fact): "same" (a restatement), "contradicts" (the new one
        makes the held one no longer true) or "unrelated"."""

    @abc.abstractmethod
    async def same_entity(
        self, pairs: Sequence[tuple[str, str]], *, deadline: float | None = None
    ) -> list[bool | None]:
        """For each pair of names: do they name the same entity?"""

    @abc.abstractmethod
    async def levels(
        self, facts: Sequence[FactText], dialogue: str, *, deadline: float | None = None
    ) -> list[int | None]:
        """For each fact, how it bears on the recent `dialogue` (ending with the newest
        message): UNRELATED (0), RELATED (1), RELEVANT (2) or CENTRAL (3)."""

    @abc.abstractmethod
    async def distill(
        self, facts: Sequence[FactText], conversation: str, *, deadline: float | None = None
    ) -> list[bool | None]:
        """For each fact recalled for a turn: keep it? Yes when it was relevant to the turn's
        `conversation` and the conversation did not already say it. The conversation's first
        line is the message (its own line breaks made spaces); the lines after it are what
        followed: the replies and the turn's tool outputs."""
