"""Recall's searches (MECHANISM: "Recall", "Searches"): the memory's graph by words and by
meaning for the message and for the recent conversation ending with it; the graph by meaning
for each part; passages of sealed conversation by words and by meaning for each part; each
fused by rank."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .. import _constants as C
from ..index.search import MemoryIndex, fuse
from .parts import Part

__all__ = ["Found", "search"]

#: Threads the passage searches run on, beside the graph searches (shared by every recall).
_SEARCHES = ThreadPoolExecutor(
    max_workers=C.RECALL_SEARCH_THREADS, thread_name_prefix="fadeway-search"
)


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
    texts: Sequence[str],
    vectors: np.ndarray,
    quotes: int,
) -> Found:
    """Run every search of one recall over `index` (synced). `texts` are the distinct texts
    embedded as `vectors` (row by row): the message, the recent conversation and the parts.
    Passages are searched `quotes` deep: as many as the block may quote.

    Every search releases the GIL (BM25 in Rust, hnswlib in C++) and runs as a task on the
    search threads, longest first, so that both cores stay busy to the end whatever the number
    of parts. Vector searches of one index go in one batch: the index takes them one at a time
    anyway (`VectorIndex` locks around hnswlib)."""
    k, floor = C.RECALL_SEARCH_HITS, C.RECALL_MIN_SIMILARITY
    row = {t: i for i, t in enumerate(texts)}
    part_texts = list(dict.fromkeys(p.text for p in parts))
    fact_meaning = _SEARCHES.submit(index.by_meaning_batch, "fact", vectors, k, floor)
    passage_meaning = _SEARCHES.submit(
        index.by_meaning_batch, "passage", vectors[[row[t] for t in part_texts]], quotes, floor
    )
    passage_words = [_SEARCHES.submit(index.by_words, "passage", t, quotes) for t in part_texts]
    fact_words = {t: _SEARCHES.submit(index.by_words, "fact", t, k) for t in (recent, message)}
    by_meaning = dict(zip(texts, fact_meaning.result(), strict=True))
    same = recent == message  # the first message of a memory: searched once
    message_lists = [
        fact_words[message].result(),
        [] if same else fact_words[recent].result(),
        by_meaning[message],
        [] if same else by_meaning[recent],
    ]
    passage_lists = [
        ids
        for words, meaning in zip(passage_words, passage_meaning.result(), strict=True)
        for ids in (words.result(), meaning)
    ]
    return Found(
        message=[h.n for h in fuse(message_lists, k)],
        parts=[by_meaning[p.text][: C.RECALL_PART_FACTS] for p in parts],
        passages=[h.n for h in fuse(passage_lists, quotes)],
    )
