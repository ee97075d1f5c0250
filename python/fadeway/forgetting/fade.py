"""The ceiling, the landing and the fade (MECHANISM: "The ceiling and the landing",
"Forgetting", "Sleep").

Pure decisions over sizes and activations; `memory.py` reads the store, calls these, and writes
the new states. Sizes here are corrected token estimates.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .. import _constants as C
from .. import _core, blocks, tokens
from ..graph.update import Graph
from ..mirror.episode_table import STATES, EpisodeColumns
from ..mirror.history import History, opens_unit
from ..records import EpisodeRecord, FactRecord

__all__ = [
    "Budget",
    "Fade",
    "SharedFacts",
    "budget",
    "landing",
    "blocks_within",
    "typical_turn",
    "next_call_room",
    "fade_picks",
    "fade_episodes",
    "ask_spans",
    "hidden_ranges",
    "facts_of",
    "facts_block_text",
    "turn_sizes",
    "silence",
    "fact_tokens",
]


@dataclass(frozen=True, slots=True)
class Budget:
    """What the history may weigh in a request, and where a fade lands."""

    ceiling: int
    fixed: int  # instructions, tools, request fields, facts block, note ask
    room: int  # the next call: one batch of tool outputs and the reply
    budget: int  # ceiling − fixed − room: what the history may weigh
    landing: int  # where a fade stops
    current_turn: int  # the turn in progress, never forgotten


def typical_turn(turn_sizes: Sequence[int]) -> int:
    """The median of the last complete turns' sizes (a default when there are none)."""
    recent = list(turn_sizes)[-C.TYPICAL_TURN_WINDOW :]
    return int(statistics.median(recent)) if recent else C.DEFAULT_TYPICAL_TURN_TOKENS


def next_call_room(step_sizes: Sequence[int]) -> int:
    """Room for the next call: the largest recent assistant step (a reply with its calls and
    their outputs)."""
    recent = list(step_sizes)[-C.TYPICAL_TURN_WINDOW :]
    return max(recent) if recent else C.DEFAULT_NEXT_CALL_TOKENS


def budget(ceiling: int, fixed: int, room: int, typical: int, current_turn: int) -> Budget:
    """landing = max(current turn, min(budget / 2, budget − 2 × typical turn)) (Contracts)."""
    b = max(0, ceiling - fixed - room)
    land = int(landing(ceiling, fixed, room, typical, current_turn))
    return Budget(ceiling, fixed, room, b, land, current_turn)


def landing(
    ceiling: int, fixed: int | np.ndarray, room: int, typical: int, current_turn: int
) -> np.ndarray:
    """`budget`'s landing, for one fixed part or an array of them."""
    b = np.maximum(0, ceiling - fixed - room)
    return np.maximum(current_turn, np.minimum(b // 2, b - 2 * typical))


def blocks_within(first: np.ndarray, last: np.ndarray, block_sizes: dict[int, int]) -> np.ndarray:
    """The tokens of the blocks (sizes by the seq they stand before) among each episode's
    messages, seqs `first[i]` to `last[i]` inclusive, as an array over the episodes."""
    by_first = np.argsort(first, kind="stable")
    seqs = np.fromiter(block_sizes, dtype=np.int64, count=len(block_sizes))
    sizes = np.fromiter(block_sizes.values(), dtype=np.float64, count=len(block_sizes))
    at = np.searchsorted(first[by_first], seqs, side="right") - 1
    inside = at >= 0
    inside[inside] = seqs[inside] <= last[by_first[at[inside]]]
    return np.bincount(by_first[at[inside]], weights=sizes[inside], minlength=len(first))


def fade_picks(
    activation: np.ndarray,
    tie: np.ndarray,
    history_cut: np.ndarray,
    block_cut_along: Callable[[np.ndarray], np.ndarray],
    history: int,
    block: int,
    landing_of: Callable[[np.ndarray], np.ndarray],
    budget_of: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """The episodes a fade picks, as indices in the order picked: least active first (ties by
    `tie`), while the projected history stands above the landing, or above the budget
    `budget_of` gives for the facts block left (a block so large that the current turn alone
    does not fit beside it: the landing stops at the current turn, and the fade goes on
    forgetting sealed episodes until the request fits).

    Picking episode `i` takes `history_cut[i]` tokens from the history (a live episode's
    messages leave the view); `block_cut_along(order)` gives the tokens that leave the facts
    block at each pick of an order (a sealed episode's facts leave it, once no other sealed
    episode holds them; see `SharedFacts`). `landing_of` gives the landing for an array of facts
    block sizes, since a smaller block leaves the history more room. `history` and `block` are
    the sizes before the fade. The order is asked of Rust a prefix at a time and walked with
    running sums, so a fade that stops early never pays for ordering (or visiting) the rest. The
    first prefix holds the share of the episodes that the share of the history to shed
    suggests, with a quarter to spare (at least `FADE_FIRST`); each next one is four times as
    long.
    """
    activation = np.ascontiguousarray(activation, dtype=np.float64)
    tie = np.ascontiguousarray(tie, dtype=np.int64)
    history_cut = np.asarray(history_cut, dtype=np.int64)
    shed = history - int(landing_of(np.array([block]))[0])
    total = int(history_cut.sum())
    share = min(1.0, shed / total) if shed > 0 and total > 0 else 0.0
    done, limit = 0, max(C.FADE_FIRST, math.ceil(1.25 * share * len(activation)))
    order = np.empty(0, dtype=np.int64)
    while done < len(activation):
        order = _core.fade_order(activation, tie, limit=limit)
        # A longer prefix leaves the earlier picks' cuts as they were: a fact leaves the block
        # at the last of its holders, wherever the order puts it.
        cut_h, cut_b = history_cut[order[done:]], block_cut_along(order)[done:]
        after_h, after_b = history - np.cumsum(cut_h), block - np.cumsum(cut_b)
        # Each pick is considered with the sizes before it: after the ones ahead of it.
        before_h, before_b = after_h + cut_h, after_b + cut_b
        fits = before_h <= landing_of(before_b)
        if budget_of is not None:
            fits &= before_h <= budget_of(before_b)
        reached = np.flatnonzero(fits)
        if len(reached):
            return order[: done + int(reached[0])]
        history, block = int(after_h[-1]), int(after_b[-1])
        done, limit = len(order), 4 * limit
    return order


@dataclass(frozen=True, slots=True)
class Fade:
    """What a fade picked, in the order picked."""

    numbers: np.ndarray  # episode numbers
    live: np.ndarray  # whether each was live (it starts leaving) or sealed (it is forgotten)
    history_cut: int  # the tokens its picks take from the history
    block_cut: int  # and from the facts block


class SharedFacts:
    """The facts block's facts and the sealed episodes that hold them. A note's facts belong to
    every episode it acknowledged, so one fact may stand for several episodes; the block shows
    it once, and it leaves the block only when the last of them is forgotten."""

    __slots__ = ("n", "holders", "starts", "sizes")

    def __init__(
        self, n: int, holders_of: Mapping[int, Sequence[int]], sizes: Mapping[int, int]
    ) -> None:
        """`n` episodes (indices 0 to n − 1), `holders_of` each fact's holders by fact number,
        `sizes` each fact's tokens by fact number (none: it weighs nothing)."""
        facts = [f for f, held in holders_of.items() if held]
        self.n = n
        self.holders = np.fromiter((i for f in facts for i in holders_of[f]), dtype=np.int64)
        counts = np.fromiter((len(holders_of[f]) for f in facts), dtype=np.int64, count=len(facts))
        self.starts = np.concatenate(([0], np.cumsum(counts)))[:-1].astype(np.int64)
        self.sizes = np.fromiter((sizes.get(f, 0) for f in facts), dtype=np.int64, count=len(facts))

    def cut_along(self, order: np.ndarray) -> np.ndarray:
        """The tokens that leave the block at each pick of `order` (episode indices)."""
        if not len(self.sizes):
            return np.zeros(len(order), dtype=np.int64)
        position = np.full(self.n, len(order), dtype=np.int64)  # not in the order: never picked
        position[order] = np.arange(len(order))
        last = np.maximum.reduceat(position[self.holders], self.starts)
        leaves = last < len(order)
        return np.bincount(last[leaves], weights=self.sizes[leaves], minlength=len(order)).astype(
            np.int64
        )


def fade_episodes(
    episodes: EpisodeColumns,
    activation_of: Callable[[np.ndarray], np.ndarray],
    block_sizes: dict[int, int],
    sealed_facts: Mapping[int, Sequence[int]],
    fact_sizes: Mapping[int, int],
    ratio: float,
    history: int,
    block: int,
    landing_of: Callable[[np.ndarray], np.ndarray],
    budget_of: Callable[[np.ndarray], np.ndarray] | None = None,
) -> Fade:
    """The fade of a memory whose episodes are `episodes`, down to the landing.

    Only live and sealed episodes can fade: a live one starts leaving, taking its messages (and
    the recall blocks among them, `block_sizes` by seq) out of the history; a sealed one is
    forgotten, taking out of the facts block those of its facts (`sealed_facts`, fact numbers by
    episode number) that no sealed episode left still holds (`fact_sizes`, corrected tokens by
    fact number). `activation_of` gives the activations of an array of episode numbers;
    `history`, `block`, `landing_of` and `budget_of` are as `fade_picks` takes them.
    """
    at = episodes.where("live", "sealed")
    numbers = episodes.n[at]
    live = episodes.state[at] == STATES.index("live")
    shown = episodes.tokens[at]
    if block_sizes:
        shown = shown + blocks_within(episodes.first_seq[at], episodes.last_seq[at], block_sizes)
    history_cut = np.where(live, np.rint(shown * ratio), 0).astype(np.int64)
    holders: dict[int, list[int]] = {}
    for i, facts in zip(
        _sealed_positions(numbers, live, sealed_facts), sealed_facts.values(), strict=True
    ):
        if i >= 0:
            for f in dict.fromkeys(facts):
                holders.setdefault(f, []).append(i)
    shared = SharedFacts(len(at), holders, fact_sizes)
    picks = fade_picks(
        activation_of(numbers),
        numbers,
        history_cut,
        shared.cut_along,
        history,
        block,
        landing_of,
        budget_of,
    )
    return Fade(
        numbers[picks],
        live[picks],
        int(history_cut[picks].sum()),
        int(shared.cut_along(picks).sum()),
    )


def _sealed_positions(
    numbers: np.ndarray, live: np.ndarray, sealed_facts: Mapping[int, Sequence[int]]
) -> list[int]:
    """The position in `numbers` (ascending episode numbers) of each episode of `sealed_facts`,
    or -1 where it is not there or live. Searched, not mapped: a dict of every episode cost a
    fade on 10,000 episodes 0.75 ms, more than the rest of its decision."""
    wanted = np.fromiter(sealed_facts, dtype=np.int64, count=len(sealed_facts))
    at = np.minimum(np.searchsorted(numbers, wanted), max(len(numbers) - 1, 0))
    found = (numbers[at] == wanted) & ~live[at] if len(numbers) else np.zeros(len(wanted), bool)
    return np.where(found, at, -1).tolist()


def ask_spans(episodes: Sequence[EpisodeRecord]) -> list[tuple[int, int]]:
    """The turns the note ask names for `episodes` (those awaiting a note): their turn ranges in
    order, joined where they touch, so that a live episode between two leaving ones is not
    said to be leaving."""
    spans: list[tuple[int, int]] = []
    for e in sorted(episodes, key=lambda e: e.first_seq):
        if spans and e.first_turn <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(spans[-1][1], e.last_turn))
        else:
            spans.append((e.first_turn, e.last_turn))
    return spans


def hidden_ranges(episodes: Sequence[EpisodeRecord]) -> list[tuple[int, int]]:
    """Seq ranges out of view: the messages of sealed and forgotten episodes."""
    return [(e.first_seq, e.last_seq) for e in episodes if e.state in ("sealed", "forgotten")]


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


def turn_sizes(
    history: History, ratio: float, blocks: Mapping[int, int] | None = None
) -> tuple[list[int], list[int]]:
    """Sizes of the last complete turns as the view holds them, their recall blocks included
    (`blocks`: sizes by the seq of the user message a block stands before), and of each turn's
    largest assistant step (a reply with its tool calls, and the batch of outputs answering
    them: what one call adds to the history), oldest first."""
    blocks = blocks or {}
    totals: dict[int, int] = {}
    steps: dict[int, int] = {}
    sides = history.sides
    step = 0
    for i in range(history.turn_start - 1, -1, -1):
        turn = history.turns[i]
        if turn not in totals and len(totals) >= C.TYPICAL_TURN_WINDOW:
            break
        totals[turn] = totals.get(turn, 0) + history.tokens[i] + blocks.get(i, 0)
        if sides[i] != "user":
            step += history.tokens[i]
        # Read backwards, a step ends where its unit opens (a reasoning item and its calls are
        # one step); a user message has none of its own.
        opens = sides[i] == "assistant" and opens_unit(sides[i], sides[i - 1] if i else None)
        if sides[i] == "user" or opens:
            if step:
                steps[turn] = max(steps.get(turn, 0), step)
            step = 0
    turns = sorted(t for t in totals if t > 0)
    return (
        [round(totals[t] * ratio) for t in turns],
        [round(steps.get(t, 0) * ratio) for t in turns],
    )


def silence(history: History, before: int) -> float:
    """The longest the user was silent before a user message stored from `before` on (this
    call's): seconds since the user message before it, 0 without one. The turn sleeps at 24
    hours or more (spec: "When a user message arrives after 24 hours or more since the last
    one"); tool rounds and replies in between do not end the silence. User messages are stored
    by decorate alone, at their call's time."""
    users = history.user_seqs
    k = bisect.bisect_left(users, before)
    ats = [history.ats[seq] for seq in users[max(k - 1, 0) :]]
    return max((b - a for a, b in zip(ats, ats[1:], strict=False)), default=0.0)


def fact_tokens(facts: Sequence[FactRecord], encoding: str, ratio: float) -> dict[int, int]:
    """What each of `facts` weighs in the facts block, corrected, by fact number."""
    lines = [f"- {f.text} [{blocks.entities(f.subject, f.object)}]" for f in facts]
    return {
        f.n: round((size + 1) * ratio)
        for f, size in zip(facts, tokens.count_texts(encoding, lines), strict=True)
    }
