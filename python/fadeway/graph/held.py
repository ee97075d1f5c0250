"""The graph a memory holds, as read from the store: entities under their canonical names,
their surface names, facts as edges, merges and retirements (MECHANISM: "The note ask and
sealing": "the same entity under different names becomes one node, a restated fact merges
with the one already held, and a newer fact retires one it contradicts")."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from .._core import tokenize
from ..records import (
    AliasRecord,
    EdgeRecord,
    EntityRecord,
    FactRecord,
    HeldFact,
    RetirementRecord,
)
from ..store import Transaction

__all__ = ["Graph", "LinkedNames", "held_facts", "normalise_name"]


_NON_WORD = re.compile(r"[\W_]+")


_ARTICLES = frozenset({"the", "a", "an"})


def normalise_name(name: str) -> str:
    """The form names are matched by: NFKC, case-folded, punctuation as spaces, a leading
    article dropped. "The Pricing-Page copy V3" and "pricing page copy v3" share it."""
    words = _NON_WORD.sub(" ", unicodedata.normalize("NFKC", name).casefold()).split()
    while len(words) > 1 and words[0] in _ARTICLES:
        words = words[1:]
    return " ".join(words)


class Graph:
    """The graph as stored: nodes, surface names, fact edges, merges and retirements."""

    def __init__(
        self,
        entities: Sequence[EntityRecord],
        aliases: Sequence[AliasRecord],
        edges: Sequence[EdgeRecord],
        retirements: Sequence[RetirementRecord],
    ) -> None:
        self.entities = {e.n: e for e in entities}
        self.aliases = list(aliases)
        self.by_norm = {a.norm: a.entity for a in aliases}
        self.edges = {e.fact: e for e in edges}
        self.retired = {r.fact: r for r in retirements}
        self._touching: dict[int, list[int]] = {}
        #: Facts held as themselves (merged restatements left out).
        self.held = 0
        for e in edges:
            if e.merged_into is None:
                self.held += 1
                self._touching.setdefault(e.subject, []).append(e.fact)
                if e.object != e.subject:
                    self._touching.setdefault(e.object, []).append(e.fact)

    @classmethod
    def read(cls, tx: Transaction) -> Graph:
        return cls(tx.entities(), tx.aliases(), tx.edges(), tx.retirements())

    def root(self, fact: int) -> int:
        """The held fact that `fact` stands as (itself unless it merged into an older one)."""
        seen = set()
        while (edge := self.edges.get(fact)) is not None and edge.merged_into is not None:
            if fact in seen:
                break  # never written so, but a loop must not hang a read
            seen.add(fact)
            fact = edge.merged_into
        return fact

    def is_current(self, fact: int) -> bool:
        """Held and not retired (a fact the graph has not taken yet counts as current)."""
        return self.root(fact) == fact and fact not in self.retired

    def names(self, fact: FactRecord) -> tuple[str, str]:
        """The fact's subject and object under their entities' canonical names."""
        edge = self.edges.get(fact.n)
        if edge is None:
            return fact.subject, fact.object
        return self.entities[edge.subject].name, self.entities[edge.object].name

    def touching(self, entity: int) -> list[int]:
        """Held facts (merged restatements left out) with `entity` as subject or object."""
        return self._touching.get(entity, [])

    def shown(self, facts: Iterable[int]) -> list[int]:
        """The facts to show for `facts`: each as the held fact it stands as, once, in first
        appearance order, retired ones left out."""
        out: dict[int, None] = {}
        for n in facts:
            root = self.root(n)
            if root not in self.retired:
                out.setdefault(root, None)
        return list(out)


def held_facts(tx: Transaction) -> list[HeldFact]:
    """The facts the memory's graph holds now, oldest first, under their entities' canonical
    names: each taken in by the graph (a fact of a note whose graph job is pending is not yet),
    a restatement left out for the fact it merged into, a retired fact left out."""
    facts = tx.facts()
    graph = Graph.read(tx)
    restated: dict[int, float] = {}
    for f in facts:
        if (edge := graph.edges.get(f.n)) is not None and edge.merged_into is not None:
            root = graph.root(f.n)
            restated[root] = max(restated.get(root, f.at), f.at)
    out = []
    for f in facts:
        if f.n not in graph.edges or not graph.is_current(f.n):
            continue
        subject, obj = graph.names(f)
        out.append(
            HeldFact(
                n=f.n,
                text=f.text,
                subject=subject,
                object=obj,
                milestone=f.milestone,
                at=f.at,
                restated_at=restated.get(f.n),
            )
        )
    return out


class LinkedNames:
    """The canonical names of a graph's entities, by position, with the words and initials
    that can link another name to them (so a letter test runs on few of them): the gate for a
    note's new names (`update`), and the names a note writer is shown (`notes.context`)."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = list(names)
        self.by_key: dict[str, list[int]] = {}
        for j, name in enumerate(self.names):
            for key in _link_keys(name):
                self.by_key.setdefault(key, []).append(j)

    def __getitem__(self, j: int) -> str:
        return self.names[j]

    def near(self, name: str) -> set[int]:
        """The positions of the names that share a word, their run of letters or initials
        with `name`."""
        return {j for key in _link_keys(name) for j in self.by_key.get(key, ())}


def _link_keys(name: str) -> set[str]:
    """Keys two linked names share: their words, their letters run together, and the letters
    of initials (with and without small words) or of an acronym."""
    words = tokenize(name)
    keys = {f"w:{w}" for w in words if w != "s"}
    run = [w for w in tokenize(name, stopwords=False) if w != "s"]
    while run and run[0] in _DETERMINERS:
        run = run[1:]
    keys.add("j:" + "".join(run))
    parts = [p for p in re.split(r"[\s:&+/-]+", name) if p]
    if len(parts) >= 2:
        keys.add("a:" + "".join(p[0] for p in parts).lower())
        keys.add("a:" + "".join(p[0] for p in parts if p.lower() not in _SMALL).lower())
    else:
        keys.add("a:" + re.sub(r"[^A-Za-z]", "", name).lower())
    return keys


_SMALL = frozenset("of the and a an for in on at to".split())
_DETERMINERS = frozenset("the a an my your our their his her its this that".split())
