"""What a recall block shows, and the block itself within a size (MECHANISM: "Recall",
"Grouping"; the text is `blocks.recall_block`'s).

Everything the walk kept (KEEP_LEVEL or above) is shown while the block fits its size
(`block_limit`, or the room a request has left). When it must shrink, its parts are given up in
one order: first the lowest ranked grouped facts while they take more than their room
(`RECALL_FACTS_SHARE` of `block_limit`: past it, a fact is worth less than an excerpt), but
never one the walk judged relevant or central; then excerpts from the last (with their facts);
then the parts' sections; then the lowest ranked grouped facts. (Facts ranked by level first: a
walk's central fact is the last to go.) A grouped fact an excerpt shown carries is left out
while that excerpt stands, and a long passage is shown as the window of it that matches the
message (`said_by`, `window`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .. import _constants as C
from .. import blocks, tokens
from .._core import best_window, tokenize
from ..records import PassageRecord
from .grouping import group_facts
from .snapshot import Snapshot

__all__ = [
    "BlockContents",
    "RecallResult",
    "block_limit",
    "excerpts_searched",
    "block_tokens",
    "units_tokens",
    "excerpt_sizes",
    "excerpts_of",
    "bare_excerpts",
    "with_facts",
    "said_by",
    "shown_text",
    "window",
]


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
        that the block held then and has let go since (none that `shown`, another block of the
        request, shows), in at most `limit` tokens."""
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
    grouped: list[int]  # best first
    sections: list[blocks.PartSection]
    section_facts: list[int]
    excerpts: list[blocks.Excerpt]
    excerpt_facts: list[int]
    quoted: list[int]
    held_back: list[int] = field(default_factory=list)  # the message's hits in the facts block
    firm: frozenset[int] = frozenset()  # grouped facts ranked above an unjudged hit
    facts_room: float = math.inf  # tokens of grouped facts past which they give way first
    said: dict[int, frozenset[int]] = field(default_factory=dict)  # fact -> passages saying it
    _groups: dict[tuple[int, ...], list[blocks.RecallGroup]] = field(
        default_factory=dict, repr=False, compare=False
    )
    # While `fit` runs, only its truncations change the contents: each state's units, by counts.
    _fitting: dict[tuple[int, int, int, bool], list[str] | None] | None = field(
        default=None, repr=False, compare=False
    )

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
            self.firm,
            self.facts_room,
            self.said,
        )

    def beside(self, block_facts: set[int], elsewhere: set[int]) -> None:
        """Leave out the facts `block_facts` holds, and group the held-back hits it does not,
        but none shown `elsewhere`."""
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
        # The message's own hits, unjudged: after the facts the walk judged relevant or more,
        # before the rest.
        at = self._firm_prefix(grouped)
        grouped[at:at] = back
        self.grouped, self.sections, self.section_facts = grouped, sections, section_facts
        self.excerpts, self.excerpt_facts = excerpts, excerpt_facts

    def _firm_prefix(self, grouped: list[int]) -> int:
        """How many of `grouped` (ranked by level) lead it as `firm`: judged relevant or more."""
        return next((i for i, n in enumerate(grouped) if n not in self.firm), len(grouped))

    def _unsaid(self, facts: list[int]) -> list[int]:
        """`facts` but those a quoted passage says already."""
        if not self.said:
            return facts
        quoted = set(self.quoted)
        return [n for n in facts if not self.said.get(n, frozenset()) & quoted]

    def render(self, *, facts_only: bool = False) -> str | None:
        units = self._units(facts_only)
        return None if units is None else "".join(units)

    def size(self, *, facts_only: bool = False) -> int:
        """The tokens of the block as it stands (`block_tokens`), from its units' counts."""
        return units_tokens(self._units(facts_only))

    def fits(self, limit: float) -> bool:
        """Whether the block as it stands takes at most `limit` tokens (no block always does)."""
        units = self._units(False)
        return units is None or units_tokens(units) <= limit

    def _units(self, facts_only: bool) -> list[str] | None:
        """The block as it stands, cut into `blocks.recall_block_units`."""
        state = (len(self.grouped), len(self.sections), len(self.excerpts), facts_only)
        if self._fitting is not None and state in self._fitting:
            return self._fitting[state]
        shown = tuple(self._unsaid(self.grouped))
        if (groups := self._groups.get(shown)) is None:  # fitting renders the same facts again
            groups = self._groups[shown] = group_facts(self.snap, shown)
        units = blocks.recall_block_units(
            groups, [] if facts_only else self.sections, [] if facts_only else self.excerpts
        )
        if self._fitting is not None:
            self._fitting[state] = units
        return units

    def fit(self, limit: float) -> str | None:
        """The block, leaving out the least of what it shows, until it takes at most `limit`
        tokens (the order is the module's). What to leave out is first reckoned from each
        item's own size (one render per item given up made fitting most of recall's time),
        then checked on the block: the result is what giving up one item at a time shows. The
        block is counted from its units (`units_tokens`), never rendered whole until it fits."""
        self._fitting = {}
        try:
            return self._fit(limit)
        finally:
            self._fitting = None

    def _fit(self, limit: float) -> str | None:
        sizes = excerpt_sizes(self.excerpts)
        excerpts_size = sum(sizes) + _EXCERPTS_HEADING
        # The rest of the block is rendered and counted only when its size may matter: when
        # the excerpts alone are past the limit, the block cannot fit as it is.
        reckoned: float | None = None
        if excerpts_size - _RECKONING_SLACK <= limit:
            reckoned = self._without_excerpts() + excerpts_size
            if reckoned - _RECKONING_SLACK <= limit:  # it may fit: only the block says
                if self.fits(limit):
                    return self.render()
                reckoned = self.size()

        def over() -> float:
            whole = self._without_excerpts() + excerpts_size if reckoned is None else reckoned
            return whole - limit

        lines = [blocks.grouped_line(self.snap.recalled(n)) + "\n" for n in self.grouped]
        fact_size = dict(zip(self.grouped, unit_sizes(lines), strict=True))
        self._facts_past_room(over, limit, fact_size)
        if self.excerpts:
            reckoned = self._without_excerpts() + sum(sizes) + _EXCERPTS_HEADING
            self._fewer_excerpts(reckoned - limit, limit, fact_size, sizes)
        while not self.fits(limit):
            if self.excerpts:
                self._keep_excerpts(len(self.excerpts) - 1)
            elif self.sections:
                del self.section_facts[len(self.section_facts) - len(self.sections.pop().facts) :]
            else:
                self.grouped.pop()
        return self.render()

    def _facts_past_room(
        self, reckon: Callable[[], float], limit: float, fact_size: dict[int, int]
    ) -> None:
        """Leave out the lowest ranked grouped facts while the block is over `limit` and they
        take more than their room: as many as their sizes reckon (`reckon()` tokens too many,
        asked only when they are past their room), then the count set right on the rendered
        block. A fact the walk judged relevant or central (`firm`, ranked first) never gives
        way to the room: only the block's size takes it, after every excerpt."""
        grouped = self.grouped
        facts = self.size(facts_only=True)
        if facts <= self.facts_room:
            return
        over = reckon()
        shown = set(self._unsaid(grouped))
        saved = [0.0]  # tokens the lowest k facts take, reckoned
        for n in reversed(grouped):
            saved.append(saved[-1] + (fact_size[n] if n in shown else 0))
        most = len(grouped) - self._firm_prefix(grouped)
        gone = 0
        while gone < most and over > saved[gone] and facts - saved[gone] > self.facts_room:
            gone += 1

        def enough(k: int) -> bool:
            self.grouped = grouped[: len(grouped) - k]
            return (
                not self.grouped
                or self.size(facts_only=True) <= self.facts_room
                # counted only when the reckoning says it may fit: a heading is a few tokens
                or (over - saved[k] <= _RECKONING_SLACK and self.fits(limit))
            )

        while gone < most and not enough(gone):
            gone += 1
        while gone > 0 and enough(gone - 1):
            gone -= 1
        enough(gone)

    def _without_excerpts(self) -> int:
        """The tokens of the block but its excerpts (the facts they carry still left out)."""
        fitting, excerpts = self._fitting, self.excerpts
        self._fitting, self.excerpts = None, []  # not a state `fit` passes through
        try:
            return self.size()
        finally:
            self._fitting, self.excerpts = fitting, excerpts

    def _fewer_excerpts(
        self, over: float, limit: float, fact_size: dict[int, int], sizes: list[int]
    ) -> None:
        """Leave out the last excerpts, as many as their `sizes` reckon (`over` tokens too
        many; a fact an excerpt carried comes back with its tokens when it goes), then the
        count set right on the block."""
        whole = (self.excerpts, self.excerpt_facts, self.quoted)
        shown = set(self._unsaid(self.grouped))
        kept = len(self.excerpts)
        while kept > 0 and over > 0:
            kept -= 1
            over -= sizes[kept]
            self._keep_excerpts(kept)
            back = set(self._unsaid(self.grouped)) - shown
            over += sum(fact_size[n] for n in back)
            shown |= back

        def fits_with(n: int) -> bool:
            self.excerpts, self.excerpt_facts, self.quoted = whole
            self._keep_excerpts(n)
            return self.fits(limit)

        while kept > 0 and not fits_with(kept):
            kept -= 1
        while kept < len(whole[0]) and fits_with(kept + 1):
            kept += 1
        fits_with(kept)

    def _keep_excerpts(self, n: int) -> None:
        """Keep the first `n` excerpts, with their facts and passages."""
        gone = sum(len(e.facts) for e in self.excerpts[n:])
        self.excerpts, self.quoted = self.excerpts[:n], self.quoted[:n]
        self.excerpt_facts = self.excerpt_facts[: len(self.excerpt_facts) - gone]

    def shown(self) -> tuple[list[int], list[int]]:
        """The facts shown, in the block's order, and the passages quoted."""
        return (
            list(
                dict.fromkeys(
                    [*self._unsaid(self.grouped), *self.section_facts, *self.excerpt_facts]
                )
            ),
            list(self.quoted),
        )


# What the block's size may differ from the sum of its items' sizes (group headings, joins).
_RECKONING_SLACK = 64
# Excerpts made before their sizes are counted (one Rust call) to see whether more may fit.
_MEASURED_AT_ONCE = 8
# The excerpts' heading and the blank line before it.
_EXCERPTS_HEADING = 6


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


def excerpts_of(
    snap: Snapshot,
    passages: Sequence[Any],
    fact_rank: dict[int, int],
    shown: Sequence[int] = (),
    query: str | None = None,
    room: float = math.inf,
) -> tuple[list[blocks.Excerpt], list[int]]:
    """Excerpts of the found passages, each with those of its episode's facts that `fact_rank`
    holds (the message's own fact hits; for distill, the facts it kept), best first. Never a
    fact in the facts block, one shown above the excerpts (`shown`), or one under an earlier
    excerpt. (Before: the episode's first facts, so two excerpts of one episode repeated the
    same three facts, mostly about something else; on the LoCoMo tuning split that spent a
    third of the block for almost nothing.) Given the `query`, a long passage is shown as the
    window of it that matches the query best (`window`).

    Excerpts stop where those before them, even without their facts, take more than `room`
    tokens: a block of that size could show none of the rest, as it gives excerpts up from the
    last. (Recall searches more passages than a block holds, and windowing and measuring the
    ones it could never show was half the block stage's time.)

    In two steps, which recall runs apart: `bare_excerpts` (what needs only the passages) and
    `with_facts`."""
    bare = bare_excerpts(passages, query, room)
    return with_facts(snap, passages, bare, fact_rank, shown)


def bare_excerpts(
    passages: Sequence[Any], query: str | None = None, room: float = math.inf
) -> list[blocks.Excerpt]:
    """`excerpts_of` without facts: each passage's excerpt, windowed by the `query`, until
    those made take more than `room` tokens (measured in eights)."""
    wanted = frozenset(tokenize(query)) if query is not None else None
    least = _EXCERPTS_HEADING  # the fewest tokens the excerpts so far may take in a block
    bare: list[blocks.Excerpt] = []
    for i, p in enumerate(passages):
        if i and i % _MEASURED_AT_ONCE == 0 and room < math.inf:
            least += sum(excerpt_sizes(bare[-_MEASURED_AT_ONCE:]))
            if least > room:
                break
        bare.append(blocks.Excerpt(turn=p.turn, role=p.role, at=p.at, text=_shown(p, wanted)))
    return bare


def with_facts(
    snap: Snapshot,
    passages: Sequence[Any],
    bare: Sequence[blocks.Excerpt],
    fact_rank: dict[int, int],
    shown: Sequence[int] = (),
) -> tuple[list[blocks.Excerpt], list[int]]:
    """`excerpts_of`'s excerpts from their `bare_excerpts` (one for each of the first
    passages), each with its facts, and the facts they show, in order."""
    out: list[blocks.Excerpt] = []
    facts_shown: list[int] = []
    seen = set(shown)
    ranked = _ranked_by_episode(snap, fact_rank)
    for p, excerpt in zip(passages, bare, strict=False):
        own = [n for n in ranked.get(p.episode, ()) if n not in seen]
        own.sort(key=fact_rank.__getitem__)
        facts = own[: C.RECALL_EXCERPT_FACTS]
        seen.update(facts)
        facts_shown += facts
        out.append(replace(excerpt, facts=[snap.recalled(n) for n in facts]) if facts else excerpt)
    return out, facts_shown


def shown_text(passage: PassageRecord, query: str) -> str:
    """A passage's text as an excerpt of a block recalled for `query` shows it: without its
    speaker's prefix (the header names them), a long one windowed (`window`)."""
    return _shown(passage, frozenset(tokenize(query)))


def _shown(passage: PassageRecord, wanted: frozenset[str] | None) -> str:
    prefix = f"{passage.role}: "
    text = passage.text[len(prefix) :] if passage.text.startswith(prefix) else passage.text
    return text if wanted is None else _window(text, wanted)


def excerpt_sizes(excerpts: Sequence[blocks.Excerpt]) -> list[int]:
    """Each excerpt's tokens as the block shows it (`blocks.excerpt_text` and its line break: its
    unit of the block). Counted once per excerpt: fitting and `excerpts_of` ask for the same
    ones, and one topic's next messages quote many of them again."""
    return unit_sizes([blocks.excerpt_text(e) + "\n" for e in excerpts])


def units_tokens(units: Sequence[str] | None) -> int:
    """The tokens of a block given as its units (`blocks.recall_block_units`), as a message:
    `block_tokens` of their text, which is the sum of their counts."""
    return 0 if units is None else sum(unit_sizes(units)) + C.TOKENS_PER_MESSAGE


def unit_sizes(units: Sequence[str]) -> list[int]:
    """Each unit's tokens (the default encoding), counted once while it is kept: a block being
    fitted is counted again and again from mostly the same units, and the next recalls of a
    topic share its headings and many of its lines."""
    sizes = [_UNIT_SIZES.get(u) for u in units]
    missing = list(dict.fromkeys(u for u, size in zip(units, sizes, strict=True) if size is None))
    if not missing:
        return sizes  # type: ignore[return-value]  # every one counted
    counted = dict(
        zip(missing, tokens.count_texts(tokens.encoding_for_model(None), missing), strict=True)
    )
    if len(_UNIT_SIZES) + len(counted) > C.RECALL_UNIT_CACHE:
        _UNIT_SIZES.clear()
    _UNIT_SIZES.update(counted)
    return [counted[u] if size is None else size for u, size in zip(units, sizes, strict=True)]


_UNIT_SIZES: dict[str, int] = {}


def _ranked_by_episode(snap: Snapshot, fact_rank: dict[int, int]) -> dict[int, list[int]]:
    """Episode -> the facts of `fact_rank` that its passages may show: `snap.shown` of the
    episode's facts, those `fact_rank` holds (in no order: they are sorted by rank). Found from
    the ranked facts, a few, not from the facts of every episode a passage is in."""
    out: dict[int, dict[int, None]] = {}
    merged = snap.merged_into()
    for n in fact_rank:
        if snap.graph.root(n) != n or n not in snap.facts or n in snap.block_facts:
            continue  # `shown` never gives it
        for m in (n, *merged.get(n, ())):  # the facts that stand as n
            for episode in snap.fact_episodes.get(m, ()):
                out.setdefault(episode, {})[n] = None
    return {episode: list(facts) for episode, facts in out.items()}


def said_by(
    snap: Snapshot, facts: Sequence[int], excerpts: Sequence[tuple[int, str]]
) -> dict[int, frozenset[int]]:
    """Of `facts`, those an excerpt carries (FACT_SAID_SHARE of the fact's words or more in the
    text it shows), each with the passages of the `excerpts` ((passage, text shown)) that do."""
    shown = [(n, _word_set(text)) for n, text in excerpts]
    anywhere = frozenset().union(*(have for _, have in shown))
    out: dict[int, frozenset[int]] = {}
    for f in facts:
        words = _word_set(snap.facts[f].text)
        need = C.FACT_SAID_SHARE * len(words)
        if not words or len(words & anywhere) < need:  # no excerpt can say it: most facts
            continue
        said = frozenset(n for n, have in shown if len(words & have) >= need)
        if said:
            out[f] = said
    return out


def window(text: str, query: str) -> str:
    """`text` when it has at most EXCERPT_MAX_WORDS words, else the EXCERPT_WINDOW_WORDS words of
    it that hold the most of the `query`'s terms (the first such run), marked with an ellipsis
    where it was cut. A leading speaker label ("Gina:") stays: who said it matters."""
    return _window(text, frozenset(tokenize(query)))


def _window(text: str, wanted: frozenset[str]) -> str:
    """`window`, the query read as its terms, `wanted` (one query windows every excerpt). Which
    run of words holds the most of them is found in Rust (`best_window`): in Python, each
    word's terms and the sliding count were an eighth of the block stage on a memory of 100k
    passages, where one recall windows about 30 passages it never windowed before."""
    words = text.split()
    n = len(words)
    if n <= C.EXCERPT_MAX_WORDS:
        return text
    start, _ = best_window(text, wanted, C.EXCERPT_WINDOW_WORDS)
    end = start + C.EXCERPT_WINDOW_WORDS
    label = words[0] if words[0].endswith(":") and len(words[0]) > 1 else ""
    head = [label] if label and start > 0 else []
    cut_before = ["…"] if start > (1 if label else 0) else []
    cut_after = ["…"] if end < n else []
    return " ".join([*head, *cut_before, *words[start:end], *cut_after])


@functools.lru_cache(maxsize=C.RECALL_TEXT_CACHE)
def _word_set(text: str) -> frozenset[str]:
    """The terms of a fact's text or an excerpt's, as `said_by` compares them."""
    return frozenset(tokenize(text))


def block_limit(ceiling: int) -> float:
    """The most tokens a recall block may take under `ceiling`: `RECALL_BLOCK_SCALE` of it,
    from `RECALL_BLOCK_LEAST` up to `RECALL_BLOCK_TOKENS`, and never more than
    `RECALL_BLOCK_SHARE` of a small ceiling."""
    scaled = max(C.RECALL_BLOCK_LEAST, ceiling * C.RECALL_BLOCK_SCALE)
    return min(C.RECALL_BLOCK_TOKENS, ceiling * C.RECALL_BLOCK_SHARE, scaled)


def excerpts_searched(limit: float) -> int:
    """How many passages recall searches for a block of `limit` tokens: as many as it may
    quote (`RECALL_EXCERPTS` for each 1,000 tokens)."""
    return max(1, math.ceil(C.RECALL_EXCERPTS * limit / 1000))


@functools.lru_cache(maxsize=64)  # fitting asks the size of one rendering more than once
def block_tokens(text: str | None) -> int:
    """A block's size as a message in the request (estimated with the default encoding)."""
    if text is None:
        return 0
    return sum(tokens.count_texts(tokens.encoding_for_model(None), [text])) + C.TOKENS_PER_MESSAGE
