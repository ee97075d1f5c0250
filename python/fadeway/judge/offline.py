"""The offline judge: deterministic heuristics, no network, no key. The embedded default.

Boundaries come from lexical and embedding cohesion between the units before and after each gap
(TextTiling-like; see `fadeway.cohesion`), computed over the units with their context.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import cohesion
from .base import Boundaries, Judge, UnitText

__all__ = ["OfflineJudge"]


class OfflineJudge(Judge):
    """Judgments from similarity alone; what every user runs first."""

    name = "offline"

    async def boundaries(self, units: Sequence[UnitText], *, before: Sequence[UnitText] = (),
                         after: Sequence[UnitText] = (),
                         deadline: float | None = None) -> Boundaries:
        texts = [u.text for u in (*before, *units, *after)]
        first, last = cohesion.boundary_scores(texts)
        lo, hi = len(before), len(before) + len(units)
        return Boundaries(first[lo:hi].tolist(), last[lo:hi].tolist())
