"""Turns and units: the pieces history is cut into episodes from (MECHANISM: "Episodes").

A turn starts with each new user message and includes every tool call and reply until the
next. A unit is a user message, or an assistant step with the tool calls and outputs that
follow it, so a cut between units never separates a call from its output.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..records import MessageRecord, Unit
from ..wire import Side

__all__ = ["next_turns", "opens_unit", "units"]


def next_turns(turn: int, sides: Iterable[Side]) -> list[int]:
    """Turn numbers for new messages after `turn`: each user message starts the next turn."""
    out = []
    for side in sides:
        if side is Side.USER:
            turn += 1
        out.append(turn)
    return out


def opens_unit(side: str, before: str | None) -> bool:
    """Whether a message on `side`, after one on `before` (None: it is the first), starts a
    unit: every user (or mid-history system) message, and the first item of an assistant step
    (after a user message, a system message or an output). Sides compare as `Side` values."""
    return (
        before is None
        or side in (Side.USER, Side.SYSTEM)
        or (side == Side.ASSISTANT and before in (Side.USER, Side.SYSTEM, Side.OUTPUT))
    )


def units(messages: Sequence[MessageRecord]) -> list[Unit]:
    """Cut stored messages into units: a user (or mid-history system) message alone, or an
    assistant step (consecutive assistant messages, calls and reasoning) with the outputs after it.

    An output always lands in the unit of the call it answers: should anything stand between
    them, the units from the call to the output become one, so no cut can separate them.
    """
    groups: list[list[MessageRecord]] = []
    unit_of_call: dict[str, int] = {}
    for i, m in enumerate(messages):
        if opens_unit(m.side, messages[i - 1].side if i else None):
            groups.append([])
        groups[-1].append(m)
        for call in m.calls:
            unit_of_call[call] = len(groups) - 1
        home = unit_of_call.get(m.answers) if m.answers is not None else None
        if home is not None and home < len(groups) - 1:
            merged = [r for g in groups[home:] for r in g]
            del groups[home:]
            groups.append(merged)
            for call, g in unit_of_call.items():
                if g > home:
                    unit_of_call[call] = home
    return [Unit(g[0].seq, g[-1].seq, g[0].turn, sum(r.tokens for r in g)) for g in groups]
