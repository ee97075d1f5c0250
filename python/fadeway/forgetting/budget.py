"""The ceiling, the budget and the landing (MECHANISM: "The ceiling and the landing").

Every request is measured. The part forgetting cannot shrink (instructions, tools and request
fields, the facts block, the note ask) is subtracted from the ceiling, with room for the next
call; what is left is the history's budget. A fade runs to the landing: half the budget, or
lower when two typical turns would not fit between the landing and the next trigger, and never
below the current turn. Sizes here are corrected token estimates unless said raw.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from .. import _constants as C
from .. import blocks, tokens
from .._services import Services
from ..episodes.units import opens_unit
from ..mirror.history import History
from ..notes.tool import note_ask_allowed, with_note_tool
from ..wire import ParsedRequest

__all__ = [
    "Budget",
    "Decorating",
    "Sizes",
    "budget",
    "landing",
    "measure",
    "next_call_room",
    "note_ask_tokens",
    "turn_sizes",
    "typical_turn",
]


class Decorating(NamedTuple):
    """The decorate forgetting runs in: the memory, the request as parsed, how it is measured
    (the encoding, and the provider's ratio to our estimate), its time, and the first seq it
    stored."""

    memory_id: str
    parsed: ParsedRequest
    encoding: str
    ratio: float
    now: float
    before: int


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


def note_ask_tokens(parsed: ParsedRequest, encoding: str, spans: Sequence[tuple[int, int]]) -> int:
    """What the note ask for the turn `spans` (`ask_spans`) adds to `parsed`: its message and
    the note tool (raw tokens)."""
    bare = ParsedRequest(parsed.format, parsed.request, parsed.instructions, [], parsed.model)
    with_tool = replace(bare, request=with_note_tool(parsed.format, parsed.request))
    tool = tokens.fixed_request_tokens(with_tool, encoding) - tokens.fixed_request_tokens(
        bare, encoding
    )
    first, *more = spans
    [ask] = tokens.count_texts(encoding, [blocks.note_ask(*first, *more)])
    return tool + C.TOKENS_PER_MESSAGE + ask


@dataclass(frozen=True, slots=True)
class Sizes:
    """A request as a fade reckons it, in corrected tokens but `bare` and `ask` (raw)."""

    ceiling: int
    history: int  # the history in view, its recall blocks included
    block: int  # the facts block
    bare: int  # everything else forgetting cannot shrink, but the note ask
    ask: int  # the note ask and the note tool, as counted so far (0 when no ask is sent)
    asks: bool  # whether the model is asked for notes (else a note writer answers, or none)
    ratio: float
    next_call: int  # room for the next call
    typical: int  # a typical turn
    current: int  # the turn in progress, never forgotten

    @property
    def fixed(self) -> int:
        """The fixed part but the facts block."""
        return round((self.bare + self.ask) * self.ratio)

    def plan(self) -> Budget:
        return budget(
            self.ceiling, self.fixed + self.block, self.next_call, self.typical, self.current
        )

    def landing_of(self, block: np.ndarray) -> np.ndarray:
        """The landing for each of an array of facts block sizes."""
        return landing(self.ceiling, self.fixed + block, self.next_call, self.typical, self.current)

    def beside(self) -> tuple[bool, int]:
        """Whether the current turn fits beside a facts block forgetting could empty: then a
        block too large for it gives way (the fade goes on below the budget, not only the
        landing, which stops at the current turn), keeping what room for the next call it can
        (a large recent step may leave none); else forgetting the block gains nothing. And that
        room."""
        free = self.ceiling - self.fixed - self.current
        return self.current <= self.ceiling - self.fixed, min(self.next_call, free)

    def spare(self) -> int:
        """The history a fade leaves free below the next trigger beyond the current turn: two
        typical turns (the landing's own promise) when they fit beside the current turn, the
        room for the next call and an empty facts block; else none (a part of them would empty
        the block for less than the promise). Below the landing's floor (the current turn) that
        room can only come from the facts block: a block that leaves less gives way, else every
        turn would trigger a fade that cuts one turn (and its note makes the block larger
        still)."""
        two = 2 * self.typical
        return two if self.current + two <= self.ceiling - self.fixed - self.next_call else 0


def measure(
    services: Services,
    mirror: History,
    call: Decorating,
    shown: Sequence[int],
    block_sizes: Mapping[int, int],
    fact_sizes: Mapping[int, int],
) -> Sizes:
    """The sizes of the request `call` builds: the messages `shown` and the recall blocks in
    view (`block_sizes`, by the seq they stand before), the facts block's facts (`fact_sizes`).

    The request a fade sends episodes leaving in carries the ask and the note tool; until the
    fade has picked them, the ask is counted naming one span of turns, as a fade of the oldest
    episodes asks (or a token more)."""
    ratio, parsed = call.ratio, call.parsed
    history = round(
        (sum(map(mirror.tokens.__getitem__, shown)) + sum(block_sizes.values())) * ratio
    )
    asks = services.note_writer is None and note_ask_allowed(parsed.request)
    ask = note_ask_tokens(parsed, call.encoding, [(mirror.turn, mirror.turn + 1)]) if asks else 0
    sizes, steps = turn_sizes(mirror, ratio, block_sizes)
    current = sum(mirror.tokens[mirror.turn_start :]) + block_sizes.get(mirror.turn_start, 0)
    return Sizes(
        ceiling=services.ceiling,
        history=history,
        block=sum(fact_sizes.values()),
        bare=tokens.fixed_request_tokens(parsed, call.encoding),
        ask=ask,
        asks=asks,
        ratio=ratio,
        next_call=next_call_room(steps),
        typical=typical_turn(sizes),
        current=round(current * ratio),
    )
