"""Recall (MECHANISM: "Recall"): before a new user message joins the history, what is relevant
from sealed conversation and the graph comes back in a recall block.

1. The message is split into parts (Rust: sentences and lines, short ones joined, long ones
   windowed).
2. Searches: the graph by words and by meaning for the message and for the recent conversation
   ending with it; the graph by meaning for each part; passages of sealed conversation by words
   and by meaning for each part; each fused by reciprocal rank (Rust).
3. The walk: the judge scores candidate facts on four levels against the recent dialogue; a fact
   at LEAD_LEVEL or above leads on to the facts on the far side of its entities. The lane
   prepares a walk after each reply (`WalkJob`); the new message's own hits are added to it.
   Without one, a walk runs inline with a short deadline, and failing that the hits are used as
   they are.
4. Grouping: facts in the facts block are left out; the rest are grouped by the neighbourhood of
   entities they sit in, each group named for its most connected entity.
5. The block, by `blocks.recall_block`.

Everything here reads; `memory.py` stores the block with its turn.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import msgspec

from .. import _constants as C
from .. import blocks, tokens
from ..errors import EndpointError
from ..graph.update import normalise_name
from ..index.search import MemoryIndex, fuse
from ..judge import FactText, Judge, JudgeTimeout
from ..lane.worker import JobHandler, register_job, run_ready, run_sync
from ..mirror.facts import MemoryCache
from ..records import BlockText, JobRecord, WalkRecord
from ..store import Transaction
from .parts import message_parts

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = [
    "RecallResult",
    "BlockContents",
    "MemoryCache",
    "Snapshot",
    "recall",
    "walk",
    "group_facts",
    "block_tokens",
    "WalkJob",
    "DistillJob",
]

log = logging.getLogger("fadeway.recall")

#: Threads the passage searches run on, beside the graph searches (shared by every recall).
_SEARCHES = ThreadPoolExecutor(
    max_workers=C.RECALL_SEARCH_THREADS, thread_name_prefix="fadeway-search"
)


@dataclass
class RecallResult:
    """A recall: the block (None when nothing was found) and what went into it."""

    block: str | None
    facts: list[int] = field(default_factory=list)  # facts shown, in the block's order
    passages: list[int] = field(default_factory=list)  # passages quoted
    walk: str = "none"  # "prepared", "inline", "search hits" or "none" (no candidates)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    # What the block shows, to leave out more of it (see `within`).
    contents: BlockContents | None = field(default=None, compare=False, repr=False)

    def beside(
        self, block_facts: Collection[int], shown: Collection[int], limit: float
    ) -> RecallResult:
        """This recall beside a facts block that changed since it ran (a seal or a fade in the
        same decorate): without the facts the block now holds, and with the message's own hits
        that the block held then and has let go since (up to `RECALL_FACTS` grouped, none that
        `shown`, another block of the request, shows), in at most `limit` tokens."""
        if self.contents is None:
            return self
        contents = self.contents.copy()
        contents.beside(set(block_facts), set(shown))
        return self._fitted(contents, limit)

    def within(self, limit: int) -> RecallResult:
        """This recall with a block of at most `limit` tokens (`block_tokens`): the least of
        what it shows left out first, as when it passes its share of the ceiling; no block
        when nothing fits."""
        if self.block is None or self.size <= limit or self.contents is None:
            return self
        return self._fitted(self.contents.copy(), limit)

    def _fitted(self, contents: BlockContents, limit: float) -> RecallResult:
        """This recall with `contents` (a copy of its own, changed) fitted to `limit`."""
        block = contents.fit(limit)
        return RecallResult(
            block,
            *contents.shown() if block else ([], []),
            walk=self.walk,
            timings=self.timings,
            contents=contents,
        )

    @functools.cached_property
    def size(self) -> int:
        """The block's size as a message (`block_tokens`), counted once."""
        return block_tokens(self.block)


@dataclass
class BlockContents:
    """The parts of a recall block, each list in the order it is given up: excerpts from the
    last (with their facts), then the parts' sections, then the lowest ranked grouped facts."""

    snap: Snapshot
    grouped: list[int]
    sections: list[blocks.PartSection]
    section_facts: list[int]
    excerpts: list[blocks.Excerpt]
    excerpt_facts: list[int]
    quoted: list[int]
    held_back: list[int] = field(default_factory=list)  # the message's hits in the facts block

    def copy(self) -> BlockContents:
        return BlockContents(
            self.snap,
            list(self.grouped),
            list(self.sections),
            list(self.section_facts),
            list(self.excerpts),
            list(self.excerpt_facts),
            list(self.quoted),
            list(self.held_back),
        )

    def beside(self, block_facts: set[int], elsewhere: set[int]) -> None:
        """Leave out the facts `block_facts` holds, and group the held-back hits it does not
        (while fewer than `RECALL_FACTS` are grouped), but none shown `elsewhere`."""
        gone = block_facts | elsewhere
        sections, section_facts = _leave_out(
            self.sections, self.section_facts, gone, keep_empty=False
        )
        excerpts, excerpt_facts = _leave_out(
            self.excerpts, self.excerpt_facts, gone, keep_empty=True
        )
        grouped = [n for n in self.grouped if n not in gone]
        shown = {*grouped, *section_facts, *excerpt_facts}
        back = [n for n in self.held_back if n not in gone and n not in shown]
        grouped += back[: max(0, C.RECALL_FACTS - len(grouped))]
        self.grouped, self.sections, self.section_facts = grouped, sections, section_facts
        self.excerpts, self.excerpt_facts = excerpts, excerpt_facts

    def render(self) -> str | None:
        return blocks.recall_block(
            group_facts(self.snap, self.grouped), self.sections, self.excerpts
        )

    def fit(self, limit: float) -> str | None:
        """The block, leaving out the least of what it shows, one at a time, until it takes at
        most `limit` tokens."""
        block = self.render()
        while block is not None and block_tokens(block) > limit:
            if self.excerpts:
                del self.excerpt_facts[len(self.excerpt_facts) - len(self.excerpts.pop().facts) :]
                self.quoted.pop()
            elif self.sections:
                del self.section_facts[len(self.section_facts) - len(self.sections.pop().facts) :]
            else:
                self.grouped.pop()
            block = self.render()
        return block

    def shown(self) -> tuple[list[int], list[int]]:
        """The facts shown, in the block's order, and the passages quoted."""
        return (
            list(dict.fromkeys([*self.grouped, *self.section_facts, *self.excerpt_facts])),
            list(self.quoted),
        )


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

    def turns(self, fact: int) -> tuple[int, int]:
        """The turns a fact was written from (its note's episodes), or (0, 0) when unknown."""
        eps = [self.episodes[e] for e in self.fact_episodes.get(fact, ()) if e in self.episodes]
        if not eps:
            return 0, 0
        return min(e.first_turn for e in eps), max(e.last_turn for e in eps)

    def fact_text(self, n: int) -> FactText:
        subject, obj = self.graph.names(self.facts[n])
        return FactText(self.facts[n].text, subject, obj)

    def stated(self, n: int) -> int:
        """The latest statement of held fact `n`: a restatement merged into it, or itself. A
        restated fact is as new as its restatement ("newer facts win")."""
        if self._latest is None:
            self._latest = {}
            for fact, edge in self.graph.edges.items():
                if edge.merged_into is None or fact not in self.facts:
                    continue
                root = self.graph.root(fact)
                best = self._latest.get(root, root)
                if best not in self.facts or (self.facts[fact].at, fact) > (
                    self.facts[best].at,
                    best,
                ):
                    self._latest[root] = fact
        return self._latest.get(n, n)

    def recalled(self, n: int) -> blocks.RecalledFact:
        """Fact `n` as the block shows it: its text, dated with its latest statement's time and
        turns."""
        said = self.stated(n)
        first, last = self.turns(said)
        if (first, last) == (0, 0):
            first, last = self.turns(n)
        return blocks.RecalledFact(
            self.facts[n].text, self.facts[said].at, first, last, retired=n in self.graph.retired
        )

    def shown(self, ns: Sequence[int]) -> list[int]:
        """`ns` as held facts, once each, in order, without those in the facts block (retired
        facts stay: shown marked, last)."""
        out: dict[int, None] = {}
        for n in ns:
            root = self.graph.root(n)
            if root in self.facts and root not in self.block_facts:
                out.setdefault(root, None)
        return list(out)


async def walk(
    judge: Judge, snap: Snapshot, dialogue: str, seeds: Sequence[int], *, deadline: float | None
) -> dict[int, int]:
    """Levels of the seeds and of the facts the walk reaches from them (MECHANISM: "The walk")."""
    levels: dict[int, int] = {}
    frontier = snap.shown(seeds)
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
                for m in snap.graph.touching(entity):
                    if m not in levels and m in snap.facts and m not in snap.block_facts:
                        reached.setdefault(m, None)
        frontier = list(reached)[: C.WALK_FANOUT]
    return levels


def _leave_out(
    items: list[Any], ns: list[int], facts: set[int], *, keep_empty: bool
) -> tuple[list[Any], list[int]]:
    """`items` (part sections or excerpts, whose facts are numbered `ns`, in order) without the
    facts numbered in `facts`; an item left with none stays only when `keep_empty`."""
    out: list[Any] = []
    out_ns: list[int] = []
    k = 0
    for item in items:
        mine, k = ns[k : k + len(item.facts)], k + len(item.facts)
        kept = [(n, f) for n, f in zip(mine, item.facts, strict=True) if n not in facts]
        if kept or keep_empty:
            out.append(replace(item, facts=[f for _, f in kept]))
            out_ns += [n for n, _ in kept]
    return out, out_ns


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
    for n in ns:
        members.setdefault(find(ends[n][0]), []).append(n)
    groups = []
    for facts in members.values():
        degree: dict[Any, int] = {}
        for n in facts:
            for end in dict.fromkeys(ends[n]):  # subject first: a tie names the group by it
                degree[end] = degree.get(end, 0) + 1
        hub = max(
            degree, key=lambda e: (degree[e], -min(i for i, n in enumerate(ns) if e in ends[n]))
        )
        newest = max(snap.facts[snap.stated(n)].at for n in facts)
        groups.append((newest, names[hub], [snap.recalled(n) for n in facts]))
    groups.sort(key=lambda g: -g[0])
    return [blocks.RecallGroup(name, facts) for _, name, facts in groups]


def recall(
    engine: Engine,
    memory_id: str,
    message: str,
    recent: str,
    *,
    prepared_turn: int | None = None,
    deadline: float | None = None,
    leave_out: Collection[int] = (),
) -> RecallResult:
    """The recall block for `message` (the new user message), `recent` being the conversation
    ending with it. The walk the lane prepared after turn `prepared_turn` (the turn the new
    message follows) is used when it is there. The facts `leave_out` (another block of the same
    request shows them) are left out as those of the facts block are. The block takes at most
    `RECALL_BLOCK_SHARE` of the engine's ceiling. Reads the store and the indexes; writes
    nothing but index caches.

    Synchronous: on decorate's usual path (a local embedder, a prepared walk) nothing waits on
    I/O, and an event loop would cost more than the searches it ran. An endpoint embedder or an
    inline walk by a model runs its own loop (`run_sync`)."""
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[stage] = now - clock
        clock = now

    index: MemoryIndex = engine.index(memory_id)
    with engine.store.read(memory_id) as tx:
        index.sync(tx)
        snap = Snapshot(tx, index.cache, prepared_turn)
    in_facts_block = set(snap.block_facts)
    snap.block_facts.update(leave_out)
    lap("read")
    if not snap.facts and not index.through.get("passage"):
        return RecallResult(None, timings=timings)  # nothing to recall yet
    parts = message_parts(message)
    lap("parts")
    # Each distinct text is embedded and searched once: a one-part message is its own part, and
    # the first message of a memory is its own recent conversation.
    texts = list(dict.fromkeys([message, recent, *(p.text for p in parts)]))
    row = {t: i for i, t in enumerate(texts)}
    vectors = engine.embedder.embed_sync(texts, deadline=deadline)
    lap("embed")
    k, floor = C.RECALL_SEARCH_HITS, C.RECALL_MIN_SIMILARITY
    part_texts = list(dict.fromkeys(p.text for p in parts))
    # Every search releases the GIL (BM25 in Rust, hnswlib in C++), and runs as a task on the
    # search threads, longest first, so that both cores stay busy to the end whatever the
    # number of parts. Vector searches of one index go in one batch: the index takes them one
    # at a time anyway (`VectorIndex` locks around hnswlib).
    fact_meaning = _SEARCHES.submit(index.by_meaning_batch, "fact", vectors, k, floor)
    passage_meaning = _SEARCHES.submit(
        index.by_meaning_batch, "passage", vectors[[row[t] for t in part_texts]], k, floor
    )
    passage_words = [_SEARCHES.submit(index.by_words, "passage", t, k) for t in part_texts]
    fact_words = {t: _SEARCHES.submit(index.by_words, "fact", t, k) for t in (recent, message)}
    by_meaning = dict(zip(texts, fact_meaning.result(), strict=True))
    same = recent == message  # the first message of a memory: searched once
    message_hits = [
        h.n
        for h in fuse(
            [
                fact_words[message].result(),
                [] if same else fact_words[recent].result(),
                by_meaning[message],
                [] if same else by_meaning[recent],
            ],
            k,
        )
    ]
    part_hits = [by_meaning[p.text][: C.RECALL_PART_FACTS] for p in parts]
    passage_hits = [
        h.n
        for h in fuse(
            [
                ids
                for words, meaning in zip(passage_words, passage_meaning.result(), strict=True)
                for ids in (words.result(), meaning)
            ],
            C.RECALL_EXCERPTS,
        )
    ]
    lap("search")

    candidates = snap.shown([*message_hits, *(n for hits in part_hits for n in hits)])
    kept, how = _walked(engine.judge, snap, recent, candidates, deadline)
    lap("walk")

    order = {n: i for i, n in enumerate(candidates)}
    # A prepared walk judged the previous exchange, not this message: its own search hits come
    # first, in their search order, then the walk's other facts by level.
    if how == "prepared":
        rank = lambda n: (0, order[n]) if n in order else (1, -kept[n])  # noqa: E731
    else:
        rank = lambda n: (-kept[n], order.get(n, len(order)))  # noqa: E731
    ranked = sorted((n for n in kept if kept[n] >= C.KEEP_LEVEL), key=rank)
    # Facts only a part found are shown under that part, not in the groups.
    only_parts = {m for hits in part_hits for m in hits} - set(message_hits)
    grouped = [n for n in ranked if n not in only_parts][: C.RECALL_FACTS]
    sections, section_facts = [], []
    for part, hits in zip(parts, part_hits, strict=True):
        facts = [n for n in snap.shown(hits) if kept.get(n, 0) >= C.KEEP_LEVEL]
        if facts and len(parts) > 1:
            sections.append(blocks.PartSection(part.text, [snap.recalled(n) for n in facts]))
            section_facts += facts
    with engine.store.read(memory_id) as tx:
        passages = {p.n: p for p in tx.passages_at(passage_hits)}
    quoted = [n for n in passage_hits if n in passages]
    fact_rank = {n: i for i, n in enumerate(message_hits)}
    excerpts, excerpt_facts = _excerpts(
        snap, [passages[n] for n in quoted], fact_rank, shown=[*grouped, *section_facts]
    )
    held_back = list(
        dict.fromkeys(root for n in message_hits if (root := snap.graph.root(n)) in in_facts_block)
    )
    contents = BlockContents(
        snap, grouped, sections, section_facts, excerpts, excerpt_facts, quoted, held_back
    )
    block = contents.fit(engine.ceiling * C.RECALL_BLOCK_SHARE)  # at most its share
    lap("block")
    shown, quoted = contents.shown()
    return RecallResult(block, shown, quoted, how, timings, contents)


def _walked(
    judge: Judge, snap: Snapshot, dialogue: str, candidates: list[int], deadline: float | None
) -> tuple[dict[int, int], str]:
    """The walk's levels: the prepared one with this message's hits added, else an inline walk
    by `deadline`, else the hits as they are."""
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
        if judge.ready:  # the offline judge: milliseconds, and nothing to wait for
            return run_ready(walk(judge, snap, dialogue, candidates, deadline=limit)), "inline"
        bounded = asyncio.wait_for(
            walk(judge, snap, dialogue, candidates, deadline=limit),
            timeout=max(0.0, limit - time.monotonic()),
        )
        levels = run_sync(bounded)
        return levels, "inline"
    except (JudgeTimeout, TimeoutError, EndpointError) as exc:
        log.info(
            "recall: no walk by the deadline (%s); the search hits are used as they are",
            exc or "timed out",
        )
        return dict.fromkeys(candidates, C.KEEP_LEVEL), "search hits"
    except Exception:  # a caller's judge may raise its own client's errors: the turn goes on
        log.warning("recall: the judge failed; the search hits are used as they are", exc_info=True)
        return dict.fromkeys(candidates, C.KEEP_LEVEL), "search hits"


def _excerpts(
    snap: Snapshot, passages: Sequence[Any], fact_rank: dict[int, int], shown: Sequence[int] = ()
) -> tuple[list[blocks.Excerpt], list[int]]:
    """Excerpts of the found passages, each with those of its episode's facts that `fact_rank`
    holds (the message's own fact hits; for distill, the facts it kept), best first. Never a
    fact in the facts block, one shown above the excerpts (`shown`), or one under an earlier
    excerpt. (Before: the episode's first facts, so two excerpts of one episode repeated the
    same three facts, mostly about something else; on the LoCoMo tuning split that spent a
    third of the block for almost nothing.)"""
    out: list[blocks.Excerpt] = []
    facts_shown: list[int] = []
    seen = set(shown)
    for p in passages:
        own = [
            n
            for n in snap.shown(snap.episode_facts.get(p.episode, []))
            if n not in seen and n in fact_rank
        ]
        own.sort(key=fact_rank.__getitem__)
        facts = own[: C.RECALL_EXCERPT_FACTS]
        seen.update(facts)
        facts_shown += facts
        prefix = f"{p.role}: "
        text = p.text[len(prefix) :] if p.text.startswith(prefix) else p.text
        out.append(
            blocks.Excerpt(
                turn=p.turn,
                role=p.role,
                at=p.at,
                text=text,
                hint=f"turn {p.turn}",
                facts=[snap.recalled(n) for n in facts],
            )
        )
    return out, facts_shown


class WalkJob(JobHandler):
    """Prepare the walk for the next message from the turn's message and reply."""

    async def prepare(self, engine: Engine, memory_id: str, job: JobRecord) -> Any:
        payload = msgspec.json.decode(job.payload)
        turn, dialogue = payload["turn"], payload["dialogue"]
        index = engine.index(memory_id)
        with engine.store.read(memory_id) as tx:
            if tx.recalls(turn + 1):  # the next message came, and was recalled for, already:
                return None  # a walk now would never be read (a lane behind a busy memory)
            index.sync(tx)
            snap = Snapshot(tx, index.cache)
        k = C.RECALL_SEARCH_HITS
        vector = (await engine.embedder.embed([dialogue]))[0]
        seeds = [
            h.n
            for h in fuse(
                [
                    index.by_words("fact", dialogue, k),
                    index.by_meaning("fact", vector, k, C.RECALL_MIN_SIMILARITY),
                ],
                k,
            )
        ]
        levels = await walk(
            engine.judge, snap, dialogue, seeds, deadline=time.monotonic() + C.LANE_JUDGE_DEADLINE
        )
        return WalkRecord(turn=turn, at=job.created_at, levels=sorted(levels.items()))

    def apply(self, engine: Engine, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        if prepared is not None:
            tx.insert_walk(prepared)
        return True


register_job("walk", WalkJob())


class DistillJob(JobHandler):
    """Reread a turn's recall block against the turn (its message and reply): keep the facts and
    excerpts that were relevant and not already said, and rewrite the block to those (None:
    removed). Applied when the next message arrives (`memory.py` fixes the turn's final text)."""

    async def prepare(self, engine: Engine, memory_id: str, job: JobRecord) -> Any:
        payload = msgspec.json.decode(job.payload)
        turn, conversation = payload["turn"], payload["conversation"]
        with engine.store.read(memory_id) as tx:
            found = [r for r in tx.recalls(turn) if r.turn == turn]
            if not found or any(r.turn == turn for r in tx.block_texts("recall_finals", turn)):
                return None  # nothing to distill, or the turn's text is fixed: never read
            snap = Snapshot(tx)
            passages = tx.passages_at(found[0].passages)
        record = found[0]
        facts = [n for n in record.facts if n in snap.facts]
        items = [snap.fact_text(n) for n in facts]
        items += [FactText(p.text, p.role, "") for p in passages]
        keep = await engine.judge.distill(
            items, conversation, deadline=time.monotonic() + C.LANE_JUDGE_DEADLINE
        )
        keep = [k is not False for k in keep]  # no answer (None) keeps the item
        if all(keep):
            return turn, record.text, record.tokens  # the block as it was, not regrouped
        kept_facts = [n for n, k in zip(facts, keep, strict=False) if k]
        kept_passages = [p for p, k in zip(passages, keep[len(facts) :], strict=True) if k]
        # Only what was kept: a kept fact of a kept excerpt's episode stands under it, the rest
        # in the groups. (Excerpts once took their episode's first facts, kept or not, and the
        # rewrite grew the block it was to shrink: 124 of 149 on a LoCoMo conversation.)
        excerpts, under = _excerpts(snap, kept_passages, {n: i for i, n in enumerate(kept_facts)})
        placed = set(under)
        grouped = [n for n in kept_facts if n not in placed]
        text = blocks.recall_block(group_facts(snap, grouped), [], excerpts)
        return turn, text, block_tokens(text)

    def apply(self, engine: Engine, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        if prepared is not None:
            turn, text, size = prepared
            tx.insert_block_text(
                "distills", BlockText(turn=turn, at=job.created_at, text=text, tokens=size)
            )
        return True


def block_tokens(text: str | None) -> int:
    """A block's size as a message in the request (estimated with the default encoding)."""
    if text is None:
        return 0
    return sum(tokens.count_texts(tokens.encoding_for_model(None), [text])) + C.TOKENS_PER_MESSAGE


register_job("distill", DistillJob())
