"""Cutting closed history into episodes, and encoding them (MECHANISM: "Episodes", "Encoding and
traces").

History is cut between whole units, so a call is never separated from its output. A judge scores
each unit, in context, as the first and the last message of a concept; those scores are used only
as an order by the boundary-rank splitter (Rust): a stretch longer than an episode may be is split
at its best-ranked boundary that leaves both sides big enough, and again, until every episode
fits. With no judgment (an inline cut whose judge failed), history is cut by size alone into
episodes near the largest size. The turn in progress is never cut; each cut starts where the last
one ended.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from .. import _constants as C
from .._core import split_episodes
from ..errors import EndpointError, JudgeTimeout
from ..judge.base import Boundaries, Judge, UnitText
from ..records import EpisodeRecord, JobRecord, MessageRecord, TraceRecord, Unit
from ..store import Store, Transaction
from ..wire import text_of
from .units import units

log = logging.getLogger("fadeway.episodes")

__all__ = [
    "CutJob",
    "CutRead",
    "CutSettings",
    "Cut",
    "plan_cut",
    "apply_cut",
    "uncut_range",
    "prepare_cut",
    "commit_cut",
    "read_cut",
    "plan_read_cut",
    "split_by_size",
]


@dataclass(frozen=True, slots=True)
class CutSettings:
    """Episode sizes and when to cut, in tokens (Contracts: "Defaults to start from")."""

    min_tokens: int = C.EPISODE_MIN_TOKENS
    max_tokens: int = C.EPISODE_MAX_TOKENS
    after_tokens: int = C.CUT_AFTER_TOKENS

    def __post_init__(self) -> None:
        if not 0 < self.min_tokens <= self.max_tokens:
            raise ValueError(
                "episode sizes need 0 < min_tokens <= max_tokens, not "
                f"{self.min_tokens} and {self.max_tokens}"
            )
        if self.after_tokens <= 0:
            raise ValueError(f"cut_after_tokens must be positive, not {self.after_tokens}")


@dataclass(frozen=True, slots=True)
class Cut:
    """New episodes planned for the uncut closed history starting at message `start`."""

    start: int  # first seq of the stretch that was cut (where the last cut ended)
    episodes: list[tuple[int, int]]  # (first_seq, last_seq) of each new episode


def uncut_range(tx: Transaction, closed_end: int) -> tuple[int, int]:
    """[start, closed_end): the closed history not yet cut (`closed_end` excluded)."""
    last = tx.last_episode()
    return (last.last_seq + 1 if last else 0), closed_end


def _unit_text(messages: Sequence[MessageRecord], unit: Unit, limit: int) -> UnitText:
    first = messages[0].seq
    parts = []
    for m in messages[unit.first - first : unit.last - first + 1]:
        parts.extend(text_of(msgspec.json.decode(m.body)))
    role = messages[unit.first - first].role
    return UnitText("assistant" if role == "tool" else role, " ".join(parts)[:limit])


def _texts(messages: Sequence[MessageRecord], us: Sequence[Unit]) -> list[UnitText]:
    return [_unit_text(messages, u, C.JUDGE_UNIT_CHARS) for u in us]


async def plan_cut(
    tail: Sequence[MessageRecord],
    start: int,
    closed_end: int,
    before: Sequence[MessageRecord],
    judge: Judge,
    settings: CutSettings,
    deadline: float | None = None,
    *,
    fallback: bool = False,
) -> Cut:
    """Plan the cut of [start, closed_end) given `tail`, the stored messages from `start` on.

    Only units that end before `closed_end` are cut (a unit reaching into the turn in progress,
    such as a call answered there, waits). `before` holds the messages of the last episode, read
    as context; the units after the cut are context too. A unit the judge left without an answer
    scores 0.0 (`Boundaries.slots`). With `fallback`, a judge that times out or fails cuts by
    size alone (`split_by_size`, logged) instead of raising: the inline cut inside decorate must
    not fail; a lane job raises and is retried. A judge that answered for no unit at all gave
    no judgment either: sizes alone decide there too.
    """
    us = units(tail)
    closed = [u for u in us if u.last < closed_end]
    if not closed:
        return Cut(start, [])
    rest = us[len(closed) : len(closed) + C.JUDGE_CONTEXT_UNITS]
    prior = units(before)[-C.JUDGE_CONTEXT_UNITS :] if before else []
    try:
        scores = await judge.boundaries(
            _texts(tail, closed),
            before=_texts(before, prior) if prior else (),
            after=_texts(tail, rest),
            deadline=deadline,
        )
    except Exception as exc:  # a caller's judge may raise its own client's errors
        if not fallback:
            raise
        log.warning(
            "cut: the judge gave no boundaries (%s: %s); cutting %d units by size alone",
            type(exc).__name__,
            exc,
            len(closed),
            exc_info=not isinstance(exc, (JudgeTimeout, EndpointError)),
        )
        scores = Boundaries([None] * len(closed), [None] * len(closed))
    if _judged(scores):
        sizes = np.fromiter((u.tokens for u in closed), dtype=np.int64, count=len(closed))
        cuts = split_episodes(
            sizes,
            np.asarray(scores.slots(), dtype=np.float64),
            settings.min_tokens,
            settings.max_tokens,
        ).tolist()
    else:  # no judgment: flat scores would cut every episode at its smallest size
        cuts = split_by_size([u.tokens for u in closed], settings.min_tokens, settings.max_tokens)
    bounds = [0, *cuts, len(closed)]
    return Cut(
        start,
        [(closed[a].first, closed[b - 1].last) for a, b in zip(bounds, bounds[1:], strict=False)],
    )


def _judged(scores: Boundaries) -> bool:
    """Whether the judge answered for any unit (a judgment to split by)."""
    return any(s is not None for s in scores.first) or any(s is not None for s in scores.last)


def split_by_size(sizes: Sequence[int], min_tokens: int, max_tokens: int) -> list[int]:
    """Cut positions (as `split_episodes` returns them) that split units of `sizes` by size
    alone, for a cut with no judgment: each episode takes as many whole units as fit in
    `max_tokens` (a unit larger than that alone), so episodes come out near the largest size,
    not the smallest. A last episode under `min_tokens` takes units from the one before it, as
    far as both stay within the sizes."""
    cuts: list[int] = []
    total = 0
    for j, size in enumerate(sizes):
        if j > 0 and total + size > max_tokens:
            cuts.append(j)
            total = 0
        total += size
    if cuts and total < min_tokens:  # rebalance the last two episodes
        start = cuts[-2] if len(cuts) > 1 else 0
        c, last = cuts[-1], total
        while c - 1 > start and last < min_tokens:
            c -= 1
            last += sizes[c]
        if min_tokens <= last <= max_tokens:
            cuts[-1] = c
    return cuts


def apply_cut(
    tx: Transaction, cut: Cut, tail: Sequence[MessageRecord], now: float
) -> list[EpisodeRecord]:
    """Write the planned episodes and their encoding traces; returns the new episodes.

    Each episode is encoded at the time its messages happened (its last message), with one trace
    at full strength.
    """
    if not cut.episodes:
        return []
    last = tx.last_episode()
    n = last.n if last else 0
    trace_n = tx.trace_count()
    first_seq = tail[0].seq
    episodes, traces = [], []
    for i, (a, b) in enumerate(cut.episodes, 1):
        ms = tail[a - first_seq : b - first_seq + 1]
        episode = EpisodeRecord(
            n=n + i,
            first_seq=a,
            last_seq=b,
            first_turn=ms[0].turn,
            last_turn=ms[-1].turn,
            start_at=ms[0].at,
            end_at=ms[-1].at,
            tokens=sum(m.tokens for m in ms),
            cut_at=now,
        )
        episodes.append(episode)
        traces.append(
            TraceRecord(
                n=trace_n + i,
                episode=episode.n,
                fact=None,
                kind="encoding",
                score=1.0,
                counted=True,
                at=episode.end_at,
            )
        )
    tx.insert_episodes(episodes)
    tx.append_traces(traces)
    return episodes


class CutJob:
    """The lane job that cuts closed history into episodes (`JobKind.CUT`)."""

    def __init__(self, store: Store, judge: Judge, settings: CutSettings) -> None:
        self.store, self.judge, self.settings = store, judge, settings

    async def prepare(self, memory_id: str, job: JobRecord) -> Any:
        closed_end = msgspec.json.decode(job.payload)["closed_end"]
        deadline = time.monotonic() + C.LANE_JUDGE_DEADLINE
        return await prepare_cut(
            self.store, self.judge, self.settings, memory_id, closed_end, deadline
        )

    def apply(self, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        return commit_cut(tx, prepared, now=job.created_at)


#: What `read_cut` reads: the messages from where the last cut ended, the first seq to cut, the
#: end of the closed history, and the last episode's messages (context).
CutRead = tuple[list[MessageRecord], int, int, list[MessageRecord]]


def read_cut(tx: Transaction, closed_end: int) -> CutRead | None:
    """What planning the cut of the closed history before `closed_end` reads: the messages from
    where the last cut ended, the range to cut, and the last episode's messages as context."""
    start, end = uncut_range(tx, closed_end)
    if start >= end:
        return None
    last = tx.last_episode()
    before = tx.messages(last.first_seq, last.last_seq + 1) if last else []
    return tx.messages(start), start, end, before


async def plan_read_cut(
    judge: Judge,
    settings: CutSettings,
    read: CutRead | None,
    deadline: float | None = None,
    *,
    fallback: bool = True,
) -> tuple[list[MessageRecord], Cut] | None:
    """Plan the episodes of what `read_cut` read. Falls back to sizes alone when the judge
    fails (`plan_cut`), by default: its direct caller is the inline cut forgetting needs."""
    if read is None:
        return None
    tail, start, end, before = read
    return tail, await plan_cut(
        tail, start, end, before, judge, settings, deadline, fallback=fallback
    )


async def prepare_cut(
    store: Store,
    judge: Judge,
    settings: CutSettings,
    memory_id: str,
    closed_end: int,
    deadline: float | None = None,
) -> tuple[list[MessageRecord], Cut] | None:
    """Read the uncut closed history before `closed_end` and plan its episodes (a judge that
    fails raises: the lane retries the job, `Memory.cut` tells its caller)."""
    with store.read(memory_id) as tx:
        read = read_cut(tx, closed_end)
    return await plan_read_cut(judge, settings, read, deadline, fallback=False)


def commit_cut(
    tx: Transaction, prepared: tuple[list[MessageRecord], Cut] | None, now: float
) -> bool:
    """Apply a prepared cut unless the history was cut since it was planned (then: False)."""
    if prepared is None:
        return True
    tail, cut = prepared
    last = tx.last_episode()
    if (last.last_seq + 1 if last else 0) != cut.start:
        return False
    apply_cut(tx, cut, tail, now)
    return True
