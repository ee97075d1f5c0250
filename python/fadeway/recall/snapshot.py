"""What recall reads of one memory, as it stood when the recall began: facts, the graph,
episodes' turns, the facts block's facts and the walk prepared for this turn."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from .. import blocks
from ..judge.base import FactText
from ..mirror.facts import MemoryCache
from ..records import WalkRecord
from ..store import Transaction

__all__ = ["Snapshot"]


class Snapshot:
    """What recall reads of one memory: the cache as it stood, the facts block's facts, and
    the walk prepared after turn `prepared_turn` (when one was)."""

    def __init__(
        self, tx: Transaction, cache: MemoryCache | None = None, prepared_turn: int | None = None
    ) -> None:
        if cache is None:
            cache = MemoryCache()
            cache.sync(tx)
        memory = tx.memory()
        self._cache = cache
        self.facts = cache.facts
        self.graph = cache.graph
        self.episodes = cache.episodes
        self.fact_episodes = cache.fact_episodes
        self.episode_facts = cache.episode_facts
        self.block_facts = set(
            msgspec.json.decode(memory.facts_order)
            if memory is not None and memory.facts_order
            else []
        )
        walks = tx.walks(prepared_turn) if prepared_turn is not None else []
        self.walk: WalkRecord | None = next((w for w in walks if w.turn == prepared_turn), None)
        self._latest: dict[int, int] | None = None  # held fact -> its latest restatement
        # Each fact as the block shows it: a block being fitted shows the same facts again.
        self._recalled: dict[int, blocks.RecalledFact] = {}

    def turns(self, fact: int) -> tuple[int, int]:
        """The turns a fact was written from (its note's episodes), or (0, 0) when unknown."""
        eps = [self.episodes[e] for e in self.fact_episodes.get(fact, ()) if e in self.episodes]
        if not eps:
            return 0, 0
        return min(e.first_turn for e in eps), max(e.last_turn for e in eps)

    def when(self, fact: int) -> float:
        """When a fact's turns happened: the time of the last of them (its note's episodes
        end), or when the fact was written when its episodes are unknown. A note may come days
        after the turns it covers; the turns' time is what a temporal question asks about."""
        eps = [self.episodes[e] for e in self.fact_episodes.get(fact, ()) if e in self.episodes]
        return max(e.end_at for e in eps) if eps else self.facts[fact].at

    def fact_text(self, n: int) -> FactText:
        subject, obj = self.graph.names(self.facts[n])
        return FactText(self.facts[n].text, subject, obj)

    def stated(self, n: int) -> int:
        """The latest statement of held fact `n`: a restatement merged into it, or itself. A
        restated fact is as new as its restatement ("newer facts win")."""
        if self._latest is None:
            self._latest = self._cache.restatements(self.graph, self.facts)
        return self._latest.get(n, n)

    def merged_into(self) -> dict[int, list[int]]:
        """Each held fact -> the facts merged into it, at any depth (`graph.root` of them)."""
        return self._cache.merged(self.graph)

    def recalled(self, n: int) -> blocks.RecalledFact:
        """Fact `n` as the block shows it: its text, dated with its latest statement's turns
        and their time."""
        if (known := self._recalled.get(n)) is not None:
            return known
        said = self.stated(n)
        first, last = self.turns(said)
        if (first, last) == (0, 0):
            said, (first, last) = n, self.turns(n)
        fact = self._recalled[n] = blocks.RecalledFact(
            self.facts[n].text, self.when(said), first, last, retired=n in self.graph.retired
        )
        return fact

    def shown(self, ns: Sequence[int]) -> list[int]:
        """`ns` as held facts, once each, in order, without those in the facts block (retired
        facts stay: shown marked, last)."""
        out: dict[int, None] = {}
        for n in ns:
            root = self.graph.root(n)
            if root in self.facts and root not in self.block_facts:
                out.setdefault(root, None)
        return list(out)
