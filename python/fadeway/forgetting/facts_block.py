"""The facts block (MECHANISM: "The note ask and sealing", "Activation"): the facts of sealed
episodes stand in it while their messages are out of view, most active first, under their
entities' canonical names. Its order is computed when it changes (at a seal or a fade) and
kept between (Contracts: "Cache stability").

It shows only what the graph has taken: each fact as the held fact it stands as, never a
retired one, never a fact of a note whose `graph` job is still pending (its facts could retire
or restate what the block shows; a job that failed for good leaves its facts as written). So
when the graph later retires, merges or takes in what concerns the block, the block is computed
anew at the next decorate (`is_current`): correctness before the cached prefix, and a fact is
never shown beside the fact that retires it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .. import blocks, tokens
from ..graph.held import Graph
from ..mirror.facts import MemoryCache
from ..mirror.trace_log import TraceLog
from ..records import EpisodeRecord, FactRecord
from ..store import Transaction

__all__ = [
    "fact_tokens",
    "facts_block_text",
    "facts_of",
    "facts_order",
    "is_current",
    "sealed_facts_of",
]


def facts_of(
    episodes: Sequence[EpisodeRecord],
    facts: Mapping[int, FactRecord],
    episode_facts: Mapping[int, Sequence[int]],
    states: tuple[str, ...],
    graph: Graph | None = None,
    awaiting: int | None = None,
) -> dict[int, list[FactRecord]]:
    """The facts of each episode in `states`, from `facts` by number and `episode_facts`, the
    numbers of the facts of the notes each episode acknowledged (a note's facts belong to every
    episode it acked; `MemoryCache` keeps both).

    With the `graph`, each fact is given as the held fact it stands as, once per episode;
    retired facts are left out, and so are the facts of notes from `awaiting` on (the first
    note the graph has not taken yet)."""
    out = {
        e.n: [facts[n] for n in episode_facts[e.n]]
        for e in episodes
        if e.state in states and e.n in episode_facts
    }
    if graph is None:
        return out

    def taken(f: FactRecord) -> bool:
        return awaiting is None or f.note < awaiting

    return {
        e: [facts[n] for n in graph.shown(f.n for f in fs if taken(f)) if n in facts]
        for e, fs in out.items()
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
    """The facts block's facts (`_shown`), most active first by their `traces` (the memory's
    trace log mirror, synced here). A held fact's activation counts the traces of the
    restatements merged into it."""
    shown = _shown(episodes, known)
    if not shown:
        return []
    ns = sorted(shown)
    traces.sync(tx)
    act = traces.activation(ns, now, by="fact", fact_key=known.graph.root)
    ranked = sorted(zip(act.tolist(), ns, strict=True), key=lambda p: (-p[0], -p[1]))
    return [n for _, n in ranked]


def is_current(order: Sequence[int], episodes: Sequence[EpisodeRecord], known: MemoryCache) -> bool:
    """Whether a facts block computed in `order` still shows what it should: the graph has
    retired, merged or taken in nothing that changes its facts since."""
    return set(order) == _shown(episodes, known)


def sealed_facts_of(
    episodes: Sequence[EpisodeRecord], known: MemoryCache
) -> dict[int, list[FactRecord]]:
    """The facts the block draws on, by sealed episode: those the graph has taken, each as the
    held fact it stands as, retired ones left out (`facts_of` over `known`)."""
    return facts_of(
        episodes,
        known.facts,
        known.episode_facts,
        states=("sealed",),
        graph=known.graph,
        awaiting=known.awaiting,
    )


def _shown(episodes: Sequence[EpisodeRecord], known: MemoryCache) -> set[int]:
    """The facts the block shows (`sealed_facts_of`), each once."""
    return {f.n for fs in sealed_facts_of(episodes, known).values() for f in fs}
