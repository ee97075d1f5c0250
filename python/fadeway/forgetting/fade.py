"""The fade (MECHANISM: "Forgetting", "Sleep"): when the history is over its budget, or the
turn sleeps, episodes leave the view least active first until the projected view reaches the
landing. A live episode picked starts leaving (or seals, when its facts were already written);
a sealed one is forgotten, its facts leaving the facts block. One order serves both, and the
room decides how many.

`fade_if_needed` runs it inside decorate's write transaction: it measures the request
(`budget.measure`), cuts history first if it was not yet, picks, and writes the new states. The
picking is pure, over columns and activations (`fade_episodes`, `fade_picks`).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from .. import _constants as C
from .._aio import run_sync
from .._core import fade_order
from .._services import Services
from ..episodes.cut import Cut, CutRead, commit_cut, plan_read_cut, read_cut
from ..mirror.episode_table import STATES, EpisodeColumns
from ..mirror.facts import MemoryCache
from ..mirror.history import History
from ..notes.ask import ask_spans
from ..records import EpisodeRecord, MessageRecord
from ..store import Transaction
from .budget import Decorating, Sizes, measure, note_ask_tokens
from .facts_block import fact_tokens, sealed_facts_of
from .sleep import silence

__all__ = [
    "CutFirst",
    "Fade",
    "Planned",
    "SharedFacts",
    "blocks_within",
    "fade_episodes",
    "fade_if_needed",
    "fade_picks",
]

log = logging.getLogger("fadeway")


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
    `budget_of` gives for the facts block left (a block so large that the landing stops at the
    current turn: the fade goes on forgetting sealed episodes until the request fits, with two
    typical turns free where they can be; `Sizes.spare`).

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
        order = fade_order(activation, tie, limit=limit)
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


def same_read(a: CutRead, b: CutRead) -> bool:
    """Whether two reads of the history to cut hold the same messages (a plan of one is then
    the plan of the other)."""
    return (
        a[1:3] == b[1:3]
        and [m.digest for m in a[0]] == [m.digest for m in b[0]]
        and [m.digest for m in a[3]] == [m.digest for m in b[3]]
    )


class CutFirst(NamedTuple):
    """History a fade found uncut where it may not cut inline: the cut is planned from `read`
    (the judge may take a while) with no write lock held, and decorate runs again with it."""

    read: CutRead


class Planned(NamedTuple):
    """A cut planned between transactions, and what it was planned from."""

    read: CutRead
    cut: tuple[list[MessageRecord], Cut] | None


def fade_if_needed(
    services: Services,
    tx: Transaction,
    mirror: History,
    call: Decorating,
    shown: Sequence[int],
    episodes: Sequence[EpisodeRecord],
    known: MemoryCache,
    block_sizes: dict[int, int],
    planned: Planned | None,
    inline: bool,
    *,
    sleep: bool = True,
) -> bool | CutFirst:
    """Run a fade to the landing when the history is over its budget, or the turn sleeps
    (unless not `sleep`: a fade already leaving lands for the silence); whether episodes
    changed state.

    `shown`, `episodes` and `known` are the memory's as this decorate stands (seals applied):
    the seqs in view, the episodes, and the facts, graph and acks; `block_sizes` are the recall
    blocks in view by the seq they stand before. History is cut once, when forgetting first
    needs it: with the `planned` cut when it was planned from the same messages, else `inline`
    (the judge runs inside this transaction), else the fade returns `CutFirst`.
    """
    by_episode = sealed_facts_of(episodes, known)
    # The block shows each fact once, however many sealed episodes hold it.
    fact_sizes = fact_tokens(
        list({f.n: f for fs in by_episode.values() for f in fs}.values()),
        call.encoding,
        call.ratio,
    )
    sizes = measure(services, mirror, call, shown, block_sizes, fact_sizes)
    silent = silence(mirror, call.before)
    sleeping = sleep and silent >= C.SLEEP_GAP_SECONDS
    plan, (fits, _) = sizes.plan(), sizes.beside()
    if sizes.history <= plan.budget and not sleeping:
        return False
    if sizes.history <= plan.landing and (not fits or sizes.history <= plan.budget):
        return False  # asleep, but already at the landing: nothing to fade
    cut = _cut_first(services, tx, mirror.turn_start, call.now, planned, inline)
    if cut is not None:
        return cut
    if sleeping:
        log.info(
            "memory %r: the turn sleeps after %.1f h of silence; fading to the landing",
            call.memory_id,
            silent / 3600,
        )
    mirror.episodes.sync(tx)
    mirror.trace_log.sync(tx)
    holding = {n: [f.n for f in fs] for n, fs in by_episode.items()}
    states, sizes = _pick(mirror, call, sizes, known, holding, fact_sizes, block_sizes)
    if states:
        tx.set_episode_states(states)
        _log_fade(call.memory_id, sizes, states)
    return bool(states)


def _cut_first(
    services: Services,
    tx: Transaction,
    closed_end: int,
    now: float,
    planned: Planned | None,
    inline: bool,
) -> CutFirst | None:
    """Cut the closed history not yet cut (before `closed_end`), as `fade_if_needed` says."""
    read = read_cut(tx, closed_end)
    if read is None:
        return None
    if planned is not None and same_read(planned.read, read):
        commit_cut(tx, planned.cut, now)
    elif inline:
        deadline = time.monotonic() + C.INLINE_CUT_DEADLINE
        plan = plan_read_cut(services.judge, services.cut_settings, read, deadline)
        commit_cut(tx, run_sync(plan), now)
    else:
        return CutFirst(read)
    return None


def _pick(
    mirror: History,
    call: Decorating,
    sizes: Sizes,
    known: MemoryCache,
    holding: dict[int, list[int]],
    fact_sizes: dict[int, int],
    block_sizes: dict[int, int],
) -> tuple[dict[int, str], Sizes]:
    """The new states of the episodes the fade picks, and the sizes once they are applied.

    The request a fade sends episodes leaving in carries the ask, which names those episodes'
    turns: `measure` counts it naming one span, as a fade of the oldest episodes asks. Episodes
    apart make an ask of several spans: the fade picks again with the fixed part that ask
    makes (the lower landing picks a longer prefix of the order, whose ask may be longer
    still, hence a few passes)."""
    acked = {e for e, _ in known.acks}
    for _ in range(C.FADE_ASK_PASSES):
        picked = _fade(mirror, call.now, sizes, holding, fact_sizes, block_sizes)
        states = {
            n: ("sealed" if n in acked else "leaving") if live else "forgotten"
            for n, live in zip(picked.numbers.tolist(), picked.live.tolist(), strict=True)
        }
        leaving = [n for n, state in states.items() if state == "leaving"]
        if not sizes.asks or not leaving:
            break
        spans = ask_spans(mirror.episodes.records(leaving))
        needed = note_ask_tokens(call.parsed, call.encoding, spans)
        if needed <= sizes.ask:
            break
        sizes = replace(sizes, ask=needed)
    left = replace(
        sizes, history=sizes.history - picked.history_cut, block=sizes.block - picked.block_cut
    )
    return states, left


def _fade(
    mirror: History,
    now: float,
    sizes: Sizes,
    holding: dict[int, list[int]],
    fact_sizes: dict[int, int],
    block_sizes: dict[int, int],
) -> Fade:
    """One pick of the fade over the memory's episodes, with the fixed part `sizes` holds. Below
    the landing, the history must leave the room for the next call and `Sizes.spare` free."""
    fits, room_left = sizes.beside()
    fixed, ceiling, spare = sizes.fixed, sizes.ceiling, sizes.spare()

    def budget_of(block: np.ndarray) -> np.ndarray:
        return np.maximum(0, ceiling - fixed - block - room_left - spare)

    return fade_episodes(
        mirror.episodes.columns(),
        lambda numbers: mirror.trace_log.activation(numbers, now),
        block_sizes,
        holding,
        fact_sizes,
        sizes.ratio,
        sizes.history,
        sizes.block,
        sizes.landing_of,
        budget_of if fits else None,
    )


def _log_fade(memory_id: str, sizes: Sizes, states: Mapping[int, str]) -> None:
    plan = sizes.plan()
    log.info(
        "memory %r: fade to the landing (%d tokens), projected view %d tokens%s: %s",
        memory_id,
        plan.landing,
        sizes.history,
        "" if sizes.history <= min(plan.landing, plan.budget) else " (nothing more to fade)",
        ", ".join(f"episode {n} {s}" for n, s in states.items()),
    )
