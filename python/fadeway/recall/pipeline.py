"""Recall (MECHANISM: "Recall"): before a new user message joins the history, what is relevant
from sealed conversation and the graph comes back in a recall block.

A staged pipeline, each stage in its own module:

1. Parts (`parts`): the message split into sentences and lines, short ones joined, long ones
   windowed (Rust).
2. Searches (`searches`): the graph by words and by meaning for the message and for the recent
   conversation ending with it; the graph by meaning for each part; passages of sealed
   conversation by words and by meaning for each part, and those said on a day the message
   names (`dates`) by its words; each fused by reciprocal rank (Rust). While the graph is
   searched, the passages found are read and their excerpts made (`_quotes`).
3. The walk (`walk`): the judge scores candidate facts on four levels against the recent
   dialogue; a fact at LEAD_LEVEL or above leads on to the facts on the far side of its
   entities. The lane prepares a walk after each reply (`WalkJob`); the new message's own hits
   are added to it. Without one, a walk runs inline with a short deadline, and failing that the
   hits are used as they are.
4. Grouping (`grouping`): facts in the facts block are left out; the rest are grouped by the
   neighbourhood of entities they sit in, each group named for its most connected entity.
5. The block (`block`), by `blocks.recall_block`, within `block_limit` tokens.

Everything here reads; `recall.turns` stores the block with its turn.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from .. import _constants as C
from .. import blocks
from .._core import tokenize
from .._services import Services
from ..records import PassageRecord
from .block import (
    BlockContents,
    RecallResult,
    bare_excerpts,
    block_limit,
    excerpts_searched,
    said_by,
    with_facts,
)
from .dates import Span, named_spans, on_the_days, said_on, without_dates
from .parts import Part, message_parts
from .searches import Found, search
from .snapshot import Snapshot
from .walk import walked

__all__ = ["recall"]


class _Laps:
    """Seconds spent in each stage of one recall."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._clock = time.perf_counter()

    def __call__(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = now - self._clock
        self._clock = now


def recall(
    services: Services,
    memory_id: str,
    message: str,
    recent: str,
    *,
    prepared_turn: int | None = None,
    deadline: float | None = None,
    leave_out: Collection[int] = (),
    now: float | None = None,
) -> RecallResult:
    """The recall block for `message` (the new user message), `recent` being the conversation
    ending with it. The walk the lane prepared after turn `prepared_turn` (the turn the new
    message follows) is used when it is there. The facts `leave_out` (another block of the same
    request shows them) are left out as those of the facts block are. The block takes at most
    `block_limit` tokens. `now` is when the message was said: the days it names from there
    ("yesterday") are read only given it. Reads the store and the indexes; writes nothing but
    index caches.

    Synchronous: on decorate's usual path (a local embedder, a prepared walk) nothing waits on
    I/O, and an event loop would cost more than the searches it ran. An endpoint embedder or an
    inline walk by a model runs its own loop (`run_sync`)."""
    lap = _Laps()
    index = services.indexes.get(memory_id)
    spans = named_spans(message, now)
    with services.store.read(memory_id) as tx:
        index.sync(tx)
        snap = Snapshot(tx, index.cache, prepared_turn)
        dated = said_on(tx, spans, C.RECALL_DATE_PASSAGES)
    in_facts_block = set(snap.block_facts)
    snap.block_facts.update(leave_out)
    lap("read")
    if not snap.facts and not index.through.get("passage"):
        return RecallResult(None, timings=lap.timings)  # nothing to recall yet
    parts = message_parts(message)
    lap("parts")
    # Each distinct text is embedded and searched once: a one-part message is its own part, and
    # the first message of a memory is its own recent conversation.
    texts = list(dict.fromkeys([message, recent, *(p.text for p in parts)]))
    vectors = services.embedder.embed_sync(texts, deadline=deadline)
    lap("embed")
    limit = block_limit(services.ceiling)
    query = " ".join(p.text for p in parts)

    def quote(found: list[int]) -> _Quotes:
        return _quotes(services, memory_id, found, query, spans, limit)

    found, quotes = search(
        index,
        message,
        recent,
        parts,
        (texts, vectors),
        (dated, without_dates(message, now)),
        excerpts_searched(limit),
        services.embedder.min_similarity,
        meanwhile=quote,
    )
    lap("search")
    candidates = snap.shown([*found.message, *(n for hits in found.parts for n in hits)])
    rank = functools.partial(index.ranked_by_words, "fact", recent)
    kept, how = walked(services.judge, snap, recent, candidates, deadline, rank)
    lap("walk")
    # The message's own hits that the facts block holds: shown should a seal or fade in this
    # decorate let them go (`RecallResult.beside`).
    held_back = list(
        dict.fromkeys(r for n in found.message if (r := snap.graph.root(n)) in in_facts_block)
    )
    contents = _contents(snap, parts, found, quotes, (candidates, kept))
    contents.held_back = held_back
    contents.facts_room = limit * C.RECALL_FACTS_SHARE
    block = contents.fit(limit)
    lap("block")
    shown, quoted = contents.shown()
    return RecallResult(block, shown, quoted, how, lap.timings, contents)


def _lifted(
    order: list[int], passages: dict[int, PassageRecord], query: str, spans: Sequence[Span]
) -> list[int]:
    """The passages in `order`, those said by someone the `query` names, and those said on a
    day it names (that very day), moved up: each ranks as if its place were divided by 1 +
    RECALL_SPEAKER_LIFT and by 1 + RECALL_DATE_LIFT. Who said it is what BM25 over the words
    weighs least (a speaker's name is in half the turns of a conversation of two), and when is
    in no word of the text at all; a lift in place, not a fusion, keeps the best word matches
    ahead of a named passage that matches little else. The days are those `spans` name (the
    message's)."""
    asked = set(tokenize(query))
    speaker, day = 1.0 + C.RECALL_SPEAKER_LIFT, 1.0 + C.RECALL_DATE_LIFT
    on_a_day = on_the_days(spans, [passages[n].at for n in order])

    def place(i: int, n: int) -> float:
        at = float(i + 1)
        if asked & _speakers(passages[n]):
            at /= speaker
        if on_a_day[i]:
            at /= day
        return at

    places = {n: place(i, n) for i, n in enumerate(order)}
    return sorted(order, key=places.__getitem__)


def _speakers(passage: PassageRecord) -> frozenset[str]:
    """Who said a passage: its speaker, and a name that labels its text ("Gina: ...")."""
    words = passage.text.split(maxsplit=2)[:2]
    labels = [w[:-1] for w in words if w.endswith(":")]
    return _terms_of(" ".join([passage.role, *labels]))


@functools.lru_cache(maxsize=1024)  # a conversation has a few speakers
def _terms_of(who: str) -> frozenset[str]:
    return frozenset(tokenize(who))


def _ranked(kept: dict[int, int], candidates: Sequence[int]) -> list[int]:
    """The facts the walk kept (KEEP_LEVEL or above), best first: by level, then the message's
    own search hits (in their order) before the facts only the walk reached. A hit a prepared
    walk never judged stands at KEEP_LEVEL, so a fact that walk judged relevant or central
    ranks above it; at equal level the hit, which is about this message, comes first."""
    order = {n: i for i, n in enumerate(candidates)}
    return sorted(
        (n for n in kept if kept[n] >= C.KEEP_LEVEL),
        key=lambda n: (-kept[n], order.get(n, len(order))),
    )


@dataclass(frozen=True, slots=True)
class _Quotes:
    """The passages found, as the block may quote them: best first (`_lifted`), each excerpt
    without its facts (`bare_excerpts`: as many as a block of its size may show)."""

    order: list[int]
    passages: list[PassageRecord]  # in `order`
    bare: list[blocks.Excerpt]  # of the first passages


def _quotes(
    services: Services,
    memory_id: str,
    found: list[int],
    query: str,
    spans: Sequence[Span],
    limit: float,
) -> _Quotes:
    """What the block makes of the passages `found`, before the graph's searches end: they are
    read, lifted and windowed by the message's `query` (its parts) and the days it names
    (`spans`), and measured, for a block of `limit` tokens."""
    with services.store.read(memory_id) as tx:
        passages = {p.n: p for p in tx.passages_at(found)}
    order = _lifted([n for n in found if n in passages], passages, query, spans)
    records = [passages[n] for n in order]
    return _Quotes(order, records, bare_excerpts(records, query, limit))


def _contents(
    snap: Snapshot,
    parts: Sequence[Part],
    found: Found,
    quotes: _Quotes,
    walked: tuple[Sequence[int], dict[int, int]],
) -> BlockContents:
    """What the block shows: the grouped facts, each part's section, and the excerpts (those
    `quotes` made, with their facts). `walked` holds the walk's candidates and the levels it
    kept."""
    candidates, kept = walked
    # Facts only a part found are shown under that part, not in the groups.
    only_parts = {m for hits in found.parts for m in hits} - set(found.message)
    grouped = [n for n in _ranked(kept, candidates) if n not in only_parts]
    sections, section_facts = [], []
    for part, hits in zip(parts, found.parts, strict=True):
        facts = [n for n in snap.shown(hits) if kept.get(n, 0) >= C.KEEP_LEVEL]
        if facts and len(parts) > 1:
            sections.append(blocks.PartSection(part.text, [snap.recalled(n) for n in facts]))
            section_facts += facts
    # Under an excerpt, only what the walk kept: the message's other hits are what it judged
    # unrelated (shown there, they took an excerpt's tokens: .609 of the evidence without them
    # on the LoCoMo tuning split, .593 with one under each excerpt).
    walked_hits = [n for n in found.message if kept.get(n, 0) >= C.KEEP_LEVEL]
    fact_rank = {n: i for i, n in enumerate(walked_hits)}
    excerpts, excerpt_facts = with_facts(
        snap, quotes.passages, quotes.bare, fact_rank, shown=[*grouped, *section_facts]
    )
    quoted = quotes.order[: len(excerpts)]
    firm = frozenset(n for n in grouped if kept[n] > C.KEEP_LEVEL)
    said = said_by(snap, grouped, [(n, e.text) for n, e in zip(quoted, excerpts, strict=True)])
    return BlockContents(
        snap,
        grouped,
        sections,
        section_facts,
        excerpts,
        excerpt_facts,
        quoted,
        firm=firm,
        said=said,
    )
