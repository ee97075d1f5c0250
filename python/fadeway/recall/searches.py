"""Recall's searches (MECHANISM: "Recall", "Searches"): the memory's graph by words and by
meaning for the message and for the recent conversation ending with it; the graph by meaning
for each part; passages of sealed conversation by words and by meaning for each part; each
fused by rank."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import numpy as np

from .. import _constants as C
from ..index.search import MemoryIndex, fused
from .parts import Part

__all__ = ["Found", "search"]

T = TypeVar("T")

#: Threads that run searches beside the recalling thread (shared by every recall).
_SEARCHES = ThreadPoolExecutor(
    max_workers=max(1, C.RECALL_SEARCH_THREADS - 1), thread_name_prefix="fadeway-search"
)  # at least one: a pool of none is an error, and RECALL_SEARCH_THREADS 1 submits to none


@dataclass(frozen=True, slots=True)
class Found:
    """What the searches found, best first: facts for the message (and the recent conversation),
    facts for each part, and passages for the parts."""

    message: list[int]
    parts: list[list[int]]
    passages: list[int]


def search(
    index: MemoryIndex,
    message: str,
    recent: str,
    parts: Sequence[Part],
    embedded: tuple[Sequence[str], np.ndarray],
    dated: tuple[Sequence[int], str],
    quotes: int,
    floor: float,
    meanwhile: Callable[[list[int]], T],
) -> tuple[Found, T]:
    """Run every search of one recall over `index` (synced). `embedded` holds the distinct
    texts and their vectors (row by row): the message, the recent conversation and the parts.
    Passages are searched `quotes` deep: as many as the block may quote. `dated` holds the
    passages said on a day the message names and the message without its dates: they are
    ranked by its words as one more list (those it matches first), so that what was said that
    day comes up though the message shares few words with it. A hit by meaning under `floor`
    (the embedder's `min_similarity`) is no hit.

    Every search releases the GIL (BM25 in Rust, hnswlib in C++). The passages are searched
    first, each part's words and meaning a task, which this thread and the search threads take
    in turn (`_share`); then the graph's searches run on a search thread while this one runs
    `meanwhile` on the passages found (what recall makes of them needs nothing the graph's
    searches give: reading them, windowing and measuring their excerpts, most of it Python,
    which would otherwise wait for the searches, or they for it). Returns what was found and
    what `meanwhile` returned. The graph's searches by meaning go in one batch: one thread runs
    them all."""
    k = C.RECALL_SEARCH_HITS
    texts, vectors = embedded
    row = {t: i for i, t in enumerate(texts)}
    part_texts = list(dict.fromkeys(p.text for p in parts))
    same = recent == message  # the first message of a memory: searched once
    # Each part's words, then its meaning (BM25 over the passages takes longer than hnswlib),
    # one task each: two threads taking them in turn end about together. (One batch for every
    # part's meaning ran after both threads' words, on one thread, while the other waited.)
    passage_lists = _share(
        [
            task
            for t in part_texts
            for task in (
                partial(index.by_words, "passage", t, quotes),
                partial(index.by_meaning, "passage", vectors[row[t]], quotes, floor),
            )
        ]
    )
    on_days, undated = dated
    if on_days:
        # Those the words match first, then the rest in their order (the day itself first): a
        # message of no other words ("what did we do yesterday?") is all about the day.
        passage_lists.append(index.ranked_by_words("passage", undated, on_days)[:quotes])
    passages = fused(passage_lists, quotes)
    graph = [
        partial(index.by_meaning_batch, "fact", vectors, k, floor),
        partial(index.by_words, "fact", recent, k) if not same else list,  # list(): []
        partial(index.by_words, "fact", message, k),
    ]
    later = _SEARCHES.submit(_each, graph) if C.RECALL_SEARCH_THREADS > 1 else None
    try:
        made = meanwhile(passages)
    finally:
        # Not started (queued behind another recall's searches): run here, not waited for.
        fact_meaning, recent_words, message_words = (
            _each(graph) if later is None or later.cancel() else later.result()
        )
    by_meaning = dict(zip(texts, fact_meaning, strict=True))
    message_lists = [
        message_words,
        [] if same else recent_words,
        by_meaning[message],
        [] if same else by_meaning[recent],
    ]
    return Found(
        message=fused(message_lists, k),
        parts=[by_meaning[p.text][: C.RECALL_PART_FACTS] for p in parts],
        passages=passages,
    ), made


def _each(tasks: Sequence[Callable[[], Any]]) -> list[Any]:
    return [task() for task in tasks]


def _share(tasks: Sequence[Callable[[], Any]]) -> list[Any]:
    """Each task's result, in order: the search threads and this one take the next task in
    turn until none is left. This thread works too, rather than wait for every task to be
    handed over and back (a hand-off costs as much as a short search)."""
    results: list[Any] = [None] * len(tasks)
    queue = enumerate(tasks)  # one `next` at a time: the GIL is held while it runs
    helpers = [
        _SEARCHES.submit(_take, queue, results)
        for _ in range(min(C.RECALL_SEARCH_THREADS - 1, len(tasks) - 1))
    ]
    _take(queue, results)
    for helper in helpers:
        # One not started yet (queued behind another recall's) took no task: not waited for.
        if not helper.cancel():
            helper.result()
    return results


def _take(queue: Iterator[tuple[int, Callable[[], Any]]], results: list[Any]) -> None:
    for i, task in queue:
        results[i] = task()
