"""A judge whose answers a test writes: deterministic, and it records what it was asked."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from ..errors import JudgeTimeout
from .base import REMEMBERED, Answer, Boundaries, FactText, Judge, Relation, UnitText
from .offline import distill_offline, levels_offline, relate_offline, same_entity_offline

__all__ = ["ScriptedJudge"]

BoundaryScript = Callable[[Sequence[UnitText]], Boundaries]
AboutScript = Callable[[str, str], Answer]
RelateScript = Callable[[FactText, FactText], Relation]
SameEntityScript = Callable[[str, str], bool]
LevelsScript = Callable[[Sequence[FactText], str], list[int]]
DistillScript = Callable[[Sequence[FactText], str], list[bool]]


def _flat(units: Sequence[UnitText]) -> Boundaries:
    return Boundaries([0.0] * len(units), [0.0] * len(units))


def _shared_word(fact: str, episode: str) -> Answer:
    """Yes when the fact shares a word with the episode (a remembered episode's heading aside),
    scored by how many of the episode's words it shares."""
    words = set(fact.lower().split())
    text = episode.removeprefix(REMEMBERED)
    hits = sum(1 for w in text.lower().split() if w in words)
    return Answer(hits > 0, float(hits))


class ScriptedJudge(Judge):
    """Answers from the functions it is given; `delay` seconds per call simulates a slow model."""

    name = "scripted"

    def __init__(
        self,
        *,
        boundaries: BoundaryScript = _flat,
        about: AboutScript = _shared_word,
        relate: RelateScript = relate_offline,
        same_entity: SameEntityScript = same_entity_offline,
        levels: LevelsScript = levels_offline,
        distill: DistillScript = distill_offline,
        delay: float = 0.0,
    ) -> None:
        self._boundaries = boundaries
        self._about = about
        self._relate = relate
        self._same_entity = same_entity
        self._levels = levels
        self._distill = distill
        self.delay = delay
        self.calls: list[tuple[str, int]] = []

    async def _wait(self, deadline: float | None) -> None:
        if not self.delay:
            return
        if deadline is not None and time.monotonic() + self.delay > deadline:
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
            raise JudgeTimeout(f"scripted judge takes {self.delay}s, past its deadline")
        await asyncio.sleep(self.delay)

    async def boundaries(
        self,
        units: Sequence[UnitText],
        *,
        before: Sequence[UnitText] = (),
        after: Sequence[UnitText] = (),
        deadline: float | None = None,
    ) -> Boundaries:
        self.calls.append(("boundaries", len(units)))
        await self._wait(deadline)
        result = self._boundaries(units)
        if len(result.first) != len(units) or len(result.last) != len(units):
            raise ValueError("a boundary script must score every unit once")
        return result

    async def about(
        self, facts: Sequence[str], episodes: Sequence[str], *, deadline: float | None = None
    ) -> list[list[Answer | None]]:
        self.calls.append(("about", len(facts) * len(episodes)))
        await self._wait(deadline)
        return [[self._about(f, e) for e in episodes] for f in facts]

    async def relate(
        self, pairs: Sequence[tuple[FactText, FactText]], *, deadline: float | None = None
    ) -> list[Relation | None]:
        self.calls.append(("relate", len(pairs)))
        await self._wait(deadline)
        return [self._relate(new, held) for new, held in pairs]

    async def same_entity(
        self, pairs: Sequence[tuple[str, str]], *, deadline: float | None = None
    ) -> list[bool | None]:
        self.calls.append(("same_entity", len(pairs)))
        await self._wait(deadline)
        return [self._same_entity(a, b) for a, b in pairs]

    async def levels(
        self, facts: Sequence[FactText], dialogue: str, *, deadline: float | None = None
    ) -> list[int | None]:
        self.calls.append(("levels", len(facts)))
        await self._wait(deadline)
        return list(self._levels(facts, dialogue))

    async def distill(
        self, facts: Sequence[FactText], conversation: str, *, deadline: float | None = None
    ) -> list[bool | None]:
        self.calls.append(("distill", len(facts)))
        await self._wait(deadline)
        return list(self._distill(facts, conversation))
