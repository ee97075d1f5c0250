"""The facts block (MECHANISM: "The note ask and sealing", "Activation"): the facts of sealed
episodes stand in it while their messages are out of view, most active first, under their
entities' canonical names. Its order is computed when it changes (at a seal or a fade) and
kept between (Contracts: "Cache stability").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .. import blocks, tokens
from ..graph.held import Graph
from ..mirror.facts import MemoryCache
from ..mirror.trace_log import TraceLog
from ..records import EpisodeRecord, FactRecord
from ..store import Transaction

__all__ = ["fact_tokens", "facts_block_text", "facts_of", "facts_order"]


def facts_of(
    episodes: Sequence[EpisodeRecord],
    facts: Mapping[int, FactRecord],
    episode_facts: Mapping[int, Sequence[int]],
    states: tuple[str, ...],
    graph: Graph | None = None,
) -> dict[int, list[FactRecord]]:
    """The facts of each episode in `states`, from `facts` by number and `episode_facts`, the
    numbers of the facts of the notes each episode acknowledged (a note's facts belong to every
    episode it acked; `MemoryCache` keeps both).

    With the `graph`, each fact is given as the held fact it stands as, once per episode, and
    retired facts are left out."""
    out = {
        e.n: [facts[n] for n in episode_facts[e.n]]
        for e in episodes
        if e.state in states and e.n in episode_facts
    }
    if graph is None:
        return out
    return {
        e: [facts[n] for n in graph.shown(f.n for f in fs) if n in facts] for e, fs in out.items()
    }


def facts_block_text(
    facts: Mapping[int, FactRecord], order: Sequence[int], graph: Graph | None = None
) -> str | None:
    """The facts block of the facts numbered in `order` (`facts` by number), under their
    entities' canonical names."""
    shown = [facts[n] for n in order if n in facts]

    def block_fact(f: FactRecord) -> blocks.BlockFact:
        subject, obj = graph.names(f) if graph is not None else (f.subject, f.object)
        return blocks.BlockFact(f.text, subject, obj)

    return blocks.facts_block(
        [block_fact(f) for f in shown if not f.milestone],
        [block_fact(f) for f in shown if f.milestone],
    )


def fact_tokens(facts: Sequence[FactRecord], encoding: str, ratio: float) -> dict[int, int]:
    """What each of `facts` weighs in the facts block, corrected, by fact number."""
    lines = [f"- {f.text} [{blocks.entities(f.subject, f.object)}]" for f in facts]
    return {
        f.n: round((size + 1) * ratio)
        for f, size in zip(facts, tokens.count_texts(encoding, lines), strict=True)
    }


def facts_order(
    tx: Transaction,
    traces: TraceLog,
    episodes: Sequence[EpisodeRecord],
    known: MemoryCache,
    now: float,
) -> list[int]:
    """The facts block's facts (those of sealed episodes, each as the held fact it stands as,
    retired ones left out), most active first by their `traces` (the memory's trace log mirror,
    synced here). A held fact's activation counts the traces of the restatements merged into
    it."""
    shown = {
        f.n
        for fs in facts_of(
            episodes, known.facts, known.episode_facts, states=("sealed",), graph=known.graph
        ).values()
        for f in fs
    }
    if not shown:
        return []
    ns = sorted(shown)
    traces.sync(tx)
    act = traces.activation(ns, now, by="fact", fact_key=known.graph.root)
    ranked = sorted(zip(act.tolist(), ns, strict=True), key=lambda p: (-p[0], -p[1]))
    return [n for _, n in ranked]
