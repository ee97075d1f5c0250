"""The offline judge: deterministic heuristics, no network, no key. The embedded default.

Boundaries come from lexical and embedding cohesion between the units before and after each gap
(TextTiling-like; see `fadeway.cohesion`), computed over the units with their context. Whether
a fact is about an episode is the cosine of their hashing embeddings against a threshold.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import _constants as C
from .. import _core, cohesion
from .base import Answer, Boundaries, Judge, UnitText

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

    async def about(self, facts: Sequence[str], episodes: Sequence[str], *,
                    deadline: float | None = None) -> list[list[Answer]]:
        if not facts or not episodes:
            return [[] for _ in facts]
        # An episode holds several messages ("\n\n" between them); a fact is about the
        # episode as much as it is about its closest message, so one topic of many still counts.
        chunks, owner = [], []
        for i, text in enumerate(episodes):
            for chunk in text.split("\n\n") or [""]:
                chunks.append(chunk)
                owner.append(i)
        dim = C.ABOUT_EMBED_DIM
        cos = _core.hash_embed(list(facts), dim) @ _core.hash_embed(chunks, dim).T
        best = np.full((len(facts), len(episodes)), -1.0)
        np.maximum.at(best.T, np.asarray(owner), cos.T)
        best = np.clip(best, -1.0, 1.0)
        return [[Answer(bool(c >= C.ABOUT_THRESHOLD), float(c)) for c in row] for row in best]
