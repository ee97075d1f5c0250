"""The walk (MECHANISM: "Recall", "The walk"): a judgment model scores candidate facts on four
levels against the recent dialogue; a fact scored relevant enough leads on to the facts on the
far side of its entities. It is prepared in the lane after each reply (`WalkJob`), or run
inline with a short deadline, or else the search hits are used as they are.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import msgspec

from .. import _constants as C
from .._aio import run_ready, run_sync
from ..embed.base import Embedder
from ..errors import EndpointError, JudgeTimeout
from ..index.indexes import Indexes
from ..index.search import fuse
from ..judge.base import Judge
from ..records import JobRecord, WalkRecord
from ..store import Store, Transaction
from .snapshot import Snapshot

__all__ = ["WalkJob", "walk", "walked"]

log = logging.getLogger("fadeway.recall")


#: Orders fact numbers, the most like the dialogue first (`MemoryIndex.ranked_by_words`).
Rank = Callable[[list[int]], list[int]]


async def walk(
    judge: Judge,
    snap: Snapshot,
    dialogue: str,
    seeds: Sequence[int],
    *,
    deadline: float | None,
    rank: Rank | None = None,
) -> dict[int, int]:
    """Levels of the seeds and of the facts the walk reaches from them (MECHANISM: "The walk").
    A hub (an entity more than WALK_HUB_SHARE of the held facts touch, and more than a step
    takes) leads nowhere: which of its facts a step took would be happenstance. A step reaching
    more than WALK_FANOUT facts takes those `rank` puts first (`next_step`)."""
    levels: dict[int, int] = {}
    frontier = snap.shown(seeds)
    hub = max(C.WALK_FANOUT, C.WALK_HUB_SHARE * snap.graph.held)
    for _ in range(C.WALK_DEPTH + 1):
        if not frontier:
            break
        answers = await judge.levels(
            [snap.fact_text(n) for n in frontier], dialogue, deadline=deadline
        )
        # No answer: KEEP_LEVEL (shown as a search hit, does not lead on).
        levels.update(
            (n, C.KEEP_LEVEL if a is None else a) for n, a in zip(frontier, answers, strict=True)
        )
        reached: dict[int, None] = {}
        for n in frontier:
            edge = snap.graph.edges.get(n)
            if levels[n] < C.LEAD_LEVEL or edge is None:
                continue
            for entity in (edge.subject, edge.object):
                if len(snap.graph.touching(entity)) > hub:
                    continue
                for m in snap.graph.touching(entity):
                    if m not in levels and m in snap.facts and m not in snap.block_facts:
                        reached.setdefault(m, None)
        frontier = next_step(list(reached), rank)
    return levels


def next_step(reached: list[int], rank: Rank | None) -> list[int]:
    """The facts a step takes of those it `reached`: all of them, or past WALK_FANOUT those
    most like the dialogue (`rank`), the newest first where it cannot tell them apart. (Taken
    in the graph's order, a step took the oldest facts of the entities it crossed.)"""
    if len(reached) <= C.WALK_FANOUT:
        return reached
    newest = sorted(reached, reverse=True)
    return (rank(newest) if rank is not None else newest)[: C.WALK_FANOUT]


def walked(
    judge: Judge,
    snap: Snapshot,
    dialogue: str,
    candidates: list[int],
    deadline: float | None,
    rank: Rank | None = None,
) -> tuple[dict[int, int], str]:
    """The walk's levels: the prepared one with this message's hits added, else an inline walk
    by `deadline` (a step's facts ordered by `rank`), else the hits as they are."""
    if snap.walk is not None:
        # Prepared before this message: a fact may have joined the facts block or merged
        # into another since, and is then left out like any other.
        current = set(snap.shown([n for n, _ in snap.walk.levels]))
        levels = {n: level for n, level in snap.walk.levels if n in current}
        for n in candidates:
            levels[n] = max(levels.get(n, 0), C.KEEP_LEVEL)
        return levels, "prepared"
    if not candidates:
        return {}, "none"
    limit = time.monotonic() + C.RECALL_WALK_DEADLINE
    limit = min(limit, deadline) if deadline is not None else limit
    try:
        walking = walk(judge, snap, dialogue, candidates, deadline=limit, rank=rank)
        if judge.ready:  # the offline judge: milliseconds, and nothing to wait for
            return run_ready(walking), "inline"
        bounded = asyncio.wait_for(walking, timeout=max(0.0, limit - time.monotonic()))
        return run_sync(bounded), "inline"
    except (JudgeTimeout, TimeoutError, EndpointError) as exc:
        log.info(
            "recall: no walk by the deadline (%s); the search hits are used as they are",
            exc or "timed out",
        )
        return dict.fromkeys(candidates, C.KEEP_LEVEL), "search hits"
    except Exception:  # a caller's judge may raise its own client's errors: the turn goes on
        log.warning("recall: the judge failed; the search hits are used as they are", exc_info=True)
        return dict.fromkeys(candidates, C.KEEP_LEVEL), "search hits"


class WalkJob:
    """The lane job that prepares the walk for the next message from the turn's message and
    reply (`JobKind.WALK`)."""

    def __init__(self, store: Store, indexes: Indexes, embedder: Embedder, judge: Judge) -> None:
        self.store, self.indexes, self.embedder, self.judge = store, indexes, embedder, judge

    def stale(self, tx: Transaction, job: JobRecord) -> bool:
        """Whether the next message came, and was recalled for, already: a walk now would
        never be read (a lane behind a busy memory)."""
        return bool(tx.recall_blocks(msgspec.json.decode(job.payload)["turn"] + 1))

    async def prepare(self, memory_id: str, job: JobRecord) -> Any:
        payload = msgspec.json.decode(job.payload)
        turn, dialogue = payload["turn"], payload["dialogue"]
        index = self.indexes.get(memory_id)
        with self.store.read(memory_id) as tx:
            index.sync(tx)
            snap = Snapshot(tx, index.cache)
        k = C.RECALL_SEARCH_HITS
        vector = (await self.embedder.embed([dialogue]))[0]
        seeds = [
            h.n
            for h in fuse(
                [
                    index.by_words("fact", dialogue, k),
                    index.by_meaning("fact", vector, k, self.embedder.min_similarity),
                ],
                k,
            )
        ]
        deadline = time.monotonic() + C.LANE_JUDGE_DEADLINE
        rank = partial(index.ranked_by_words, "fact", dialogue)
        levels = await walk(self.judge, snap, dialogue, seeds, deadline=deadline, rank=rank)
        return WalkRecord(turn=turn, at=job.created_at, levels=sorted(levels.items()))

    def apply(self, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        tx.insert_walk(prepared)
        return True
