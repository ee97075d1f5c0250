"""The ceiling, the landing and the fade (MECHANISM: "The ceiling and the landing",
"Forgetting", "Sleep").

Pure decisions over sizes and activations; `memory.py` reads the store, calls these, and writes
the new states. Sizes here are corrected token estimates.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from . import _constants as C
from . import _core, blocks, tokens
from .graph import Graph
from .history import History
from .model import EpisodeRecord, FactRecord

__all__ = [
    "Budget", "budget", "typical_turn", "next_call_room", "least_active",
    "hidden_ranges", "facts_of", "facts_block_text", "turn_sizes", "sleeps", "fact_tokens",
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


def least_active(activation: np.ndarray, tie: np.ndarray) -> Iterator[int]:
    """Indices of `activation` in the fade's order (least active first, ties by `tie`), lazily:
    a prefix is ordered at a time, growing fourfold, so a fade that stops early never pays for
    ordering the rest."""
    activation = np.ascontiguousarray(activation, dtype=np.float64)
    tie = np.ascontiguousarray(tie, dtype=np.int64)
    done, limit = 0, C.FADE_FIRST
    while done < len(activation):
        order = _core.fade_order(activation, tie, limit=limit)
        yield from order[done:].tolist()
        done, limit = len(order), 4 * limit


def hidden_ranges(episodes: Sequence[EpisodeRecord]) -> list[tuple[int, int]]:
    """Seq ranges out of view: the messages of sealed and forgotten episodes."""
    return [(e.first_seq, e.last_seq) for e in episodes if e.state in ("sealed", "forgotten")]


def facts_of(episodes: Sequence[EpisodeRecord], facts: Sequence[FactRecord],
             acks: Sequence[tuple[int, int]], states: tuple[str, ...],
             graph: Graph | None = None) -> dict[int, list[FactRecord]]:
    """The facts of each episode in `states` (a note's facts belong to every episode it acked).

    With the `graph`, each fact is given as the held fact it stands as, once per episode, and
    retired facts are left out."""
    wanted = {e.n for e in episodes if e.state in states}
    notes_of: dict[int, list[int]] = {}
    for episode, note in acks:
        if episode in wanted:
            notes_of.setdefault(episode, []).append(note)
    by_note: dict[int, list[FactRecord]] = {}
    for f in facts:
        by_note.setdefault(f.note, []).append(f)
    out = {e: [f for note in ns for f in by_note.get(note, [])] for e, ns in notes_of.items()}
    if graph is None:
        return out
    by_n = {f.n: f for f in facts}
    return {e: [by_n[n] for n in graph.shown(f.n for f in fs) if n in by_n]
            for e, fs in out.items()}


def facts_block_text(facts: Sequence[FactRecord], order: Sequence[int],
                     graph: Graph | None = None) -> str | None:
    """The facts block of the facts numbered in `order`, under their entities' canonical names."""
    by_n = {f.n: f for f in facts}
    shown = [by_n[n] for n in order if n in by_n]

    def block_fact(f: FactRecord) -> blocks.BlockFact:
        subject, obj = graph.names(f) if graph is not None else (f.subject, f.object)
        return blocks.BlockFact(f.text, subject, obj)

    return blocks.facts_block([block_fact(f) for f in shown if not f.milestone],
                              [block_fact(f) for f in shown if f.milestone])


def turn_sizes(history: History, ratio: float) -> tuple[list[int], list[int]]:
    """Sizes of the last complete turns, and of their assistant steps (what follows the user
    message: calls, outputs, replies), oldest first."""
    totals: dict[int, int] = {}
    steps: dict[int, int] = {}
    stop = history.turn_start
    for i in range(stop - 1, -1, -1):
        turn = history.turns[i]
        if turn not in totals and len(totals) >= C.TYPICAL_TURN_WINDOW:
            break
        totals[turn] = totals.get(turn, 0) + history.tokens[i]
        if history.sides[i] != "user":
            steps[turn] = steps.get(turn, 0) + history.tokens[i]
    turns = sorted(t for t in totals if t > 0)
    return ([round(totals[t] * ratio) for t in turns],
            [round(steps.get(t, 0) * ratio) for t in turns])


def sleeps(history: History, before: int) -> bool:
    """A user message arrived 24 hours or more after the message before it."""
    for i in range(max(before, 1), len(history)):
        if history.sides[i] == "user" and history.ats[i] - history.ats[i - 1] >= C.SLEEP_GAP_SECONDS:
            return True
    return False


def fact_tokens(facts: Sequence[FactRecord], encoding: str, ratio: float) -> int:
    """What `facts` weigh in the facts block, corrected."""
    lines = [f"- {f.text} [{f.subject}, {f.object}]" for f in facts]
    return round((sum(tokens.count_texts(encoding, lines)) + len(lines)) * ratio)

