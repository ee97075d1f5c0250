"""The ceiling, the landing and the fade (MECHANISM: "The ceiling and the landing",
"Forgetting", "Sleep").

Pure decisions over sizes and activations; `memory.py` reads the store, calls these, and writes
the new states. Sizes here are corrected token estimates.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import _constants as C
from . import _core
from .model import EpisodeRecord, TraceRecord

__all__ = ["Budget", "budget", "typical_turn", "next_call_room", "activations", "plan_fade"]


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
    recent = list(turn_sizes)[-C.TYPICAL_TURN_WINDOW:]
    return int(statistics.median(recent)) if recent else C.DEFAULT_TYPICAL_TURN_TOKENS


def next_call_room(step_sizes: Sequence[int]) -> int:
    """Room for the next call: the largest recent assistant step (calls, outputs, reply)."""
    recent = list(step_sizes)[-C.TYPICAL_TURN_WINDOW:]
    return max(recent) if recent else C.DEFAULT_NEXT_CALL_TOKENS


def budget(ceiling: int, fixed: int, room: int, typical: int, current_turn: int) -> Budget:
    """landing = max(current turn, min(budget / 2, budget − 2 × typical turn)) (Contracts)."""
    b = max(0, ceiling - fixed - room)
    landing = max(current_turn, min(b // 2, b - 2 * typical))
    return Budget(ceiling, fixed, room, b, landing, current_turn)


def activations(episode_ns: Sequence[int], traces: Sequence[TraceRecord], now: float,
                *, by: str = "episode") -> tuple[np.ndarray, np.ndarray]:
    """(activation, significance) of each item of `episode_ns`, from its counted traces.

    `by` is "episode" (the encoding trace and counted fact traces of each episode) or "fact"
    (each fact's own counted traces); `episode_ns` then holds fact numbers.
    """
    index = {n: i for i, n in enumerate(episode_ns)}
    groups: list[list[TraceRecord]] = [[] for _ in episode_ns]
    for t in traces:
        key = t.episode if by == "episode" else t.fact
        if t.counted and key in index:
            groups[index[key]].append(t)
    offsets = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum([len(g) for g in groups], out=offsets[1:])
    at = np.fromiter((t.at for g in groups for t in g), dtype=np.float64, count=int(offsets[-1]))
    score = np.fromiter((t.score for g in groups for t in g), dtype=np.float64,
                        count=int(offsets[-1]))
    return _core.activation(offsets, at, score, now), _core.significance(offsets, score)


@dataclass(frozen=True, slots=True)
class Fade:
    """The states a fade moves episodes to, and the projected view it reaches."""

    states: dict[int, str]  # episode n → "leaving", "sealed" or "forgotten"
    projected: int


def plan_fade(episodes: Sequence[EpisodeRecord], activation: np.ndarray, sizes: Sequence[int],
              acknowledged: set[int], view: int, landing: int) -> Fade:
    """Episodes in order of activation, least active first, until the projected view reaches
    the landing. A live episode picked starts leaving (or seals straight away if its facts were
    already written); a sealed one is forgotten. One order serves both.

    `sizes[i]` is what picking episode i takes out of the projected view: its messages for a
    live episode, its facts in the facts block for a sealed one.
    """
    candidates = [i for i, e in enumerate(episodes) if e.state in ("live", "sealed")]
    if not candidates or view <= landing:
        return Fade({}, view)
    act = np.ascontiguousarray(activation[candidates], dtype=np.float64)
    tie = np.fromiter((episodes[i].n for i in candidates), dtype=np.int64, count=len(candidates))
    size = np.fromiter((sizes[i] for i in candidates), dtype=np.int64, count=len(candidates))
    picked = _core.fade(act, tie, size, view, landing).tolist()
    states, projected = {}, view
    for k in picked:
        e = episodes[candidates[k]]
        projected -= int(size[k])
        if e.state == "sealed":
            states[e.n] = "forgotten"
        else:
            states[e.n] = "sealed" if e.n in acknowledged else "leaving"
    return Fade(states, projected)
