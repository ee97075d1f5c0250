"""Grouping (MECHANISM: "Recall"): recalled facts grouped by the neighbourhood of entities they
sit in, each group named for its most connected entity, newest first. Nothing is dropped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import blocks
from ..graph.held import normalise_name
from .snapshot import Snapshot

__all__ = ["group_facts"]


def group_facts(snap: Snapshot, ns: Sequence[int]) -> list[blocks.RecallGroup]:
    """Facts grouped by the neighbourhood of entities they sit in (connected through the shown
    facts), each group named for its most connected entity; groups with the newest fact first.
    Nothing is dropped."""
    parent: dict[Any, Any] = {}

    def find(x: Any) -> Any:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    ends: dict[int, tuple[Any, Any]] = {}
    names: dict[Any, str] = {}
    a: int | str  # an entity's id, or the normalised name of one not in the graph yet
    b: int | str
    for n in ns:
        edge, fact = snap.graph.edges.get(n), snap.facts[n]
        if edge is not None:
            a, b = edge.subject, edge.object
            names[a], names[b] = snap.graph.entities[a].name, snap.graph.entities[b].name
        else:  # not in the graph yet: its names as written
            a, b = normalise_name(fact.subject), normalise_name(fact.object)
            names.setdefault(a, fact.subject)
            names.setdefault(b, fact.object)
        ends[n] = (a, b)
        parent[find(a)] = find(b)
    members: dict[Any, list[int]] = {}
    first: dict[Any, int] = {}  # each entity's first fact, by its place in `ns`
    for i, n in enumerate(ns):
        members.setdefault(find(ends[n][0]), []).append(n)
        for end in ends[n]:
            first.setdefault(end, i)
    groups = []
    for facts in members.values():
        degree: dict[Any, int] = {}
        for n in facts:
            for end in dict.fromkeys(ends[n]):  # subject first: a tie names the group by it
                degree[end] = degree.get(end, 0) + 1
        hub = max(degree, key=lambda e: (degree[e], -first[e]))
        newest = max(snap.when(snap.stated(n)) for n in facts)
        groups.append((newest, names[hub], [snap.recalled(n) for n in facts]))
    groups.sort(key=lambda g: -g[0])
    return [blocks.RecallGroup(name, facts) for _, name, facts in groups]
