"""The activation plot of `fadeway inspect --html`: every episode's activation over the memory's
time span (MECHANISM: "Activation"), computed from the trace log and drawn as inline SVG.

Activation at a moment counts only the traces written by then (a trace in the future would
count in full), so the log is replayed in time order: traces are added to one `TraceLog` as the
sample moments pass them, and each moment costs one Rust call over the traces so far. Moments
are an even grid plus, for each trace, the instants just before and at it, so that the jump a
trace makes is drawn where it happens rather than smoothed between grid points (a trace counts in
full for a minute, then fades by 1/sqrt(minutes): a grid of hours would miss its peak).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from ..mirror.trace_log import TraceLog
from ..records import TraceRecord
from .words import when

__all__ = ["ActivationHistory", "activation_history", "activation_svg", "legend"]

#: Evenly spaced moments over the span, besides those at the traces.
GRID_POINTS = 160
#: Past this many distinct trace moments, only the grid is sampled: each moment is one pass
#: over the whole log, and the page would carry two points per trace per episode.
MAX_TRACE_MOMENTS = 2_000
#: Just before a trace (seconds): the moment the plot shows the activation it jumps from.
BEFORE = 1e-3
#: The lowest activation drawn, as a fraction of the highest: the log axis spans at most this.
FLOOR_RATIO = 1e-4

#: The plot's size and margins, in SVG user units (pixels at 100%).
WIDTH, HEIGHT = 960, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 12, 40

#: A line's colour by the episode's state now.
STATE_COLOURS = {
    "live": "#1b7f3b",
    "leaving": "#d97706",
    "sealed": "#2563eb",
    "forgotten": "#9ca3af",
}


@dataclass(frozen=True, slots=True)
class ActivationHistory:
    """Each episode's activation at sample moments: `points[n]` is a list of (Unix seconds,
    activation), in time order, from the episode's first trace on (before it, the episode was
    not there to be active)."""

    start: float
    end: float
    points: Mapping[int, Sequence[tuple[float, float]]]
    thinned: bool  # True when only the grid was sampled (too many trace moments)


def activation_history(
    traces: Sequence[TraceRecord], episodes: Sequence[int], start: float, end: float
) -> ActivationHistory:
    """The activation of `episodes` over [start, end], sampled on a grid and at the traces."""
    end = max(end, start + 60.0)  # a span of a single moment is drawn as a minute
    step = (end - start) / (GRID_POINTS - 1)
    grid = [start + i * step for i in range(GRID_POINTS)]
    ordered = sorted(traces, key=lambda t: (t.at, t.n))
    moments_at = sorted({t.at for t in ordered if start <= t.at <= end})
    thinned = len(moments_at) > MAX_TRACE_MOMENTS
    own: dict[int, set[float]] = {n: set() for n in episodes}
    if not thinned:
        for t in ordered:
            if t.episode in own and start <= t.at <= end:
                own[t.episode].update((t.at - BEFORE, t.at))
    moments = sorted(set(grid).union(*own.values()))
    log, numbers, added = TraceLog(), list(episodes), 0
    born = {n: math.inf for n in episodes}
    for t in ordered:
        if t.episode in born:
            born[t.episode] = min(born[t.episode], t.at)
    values: dict[float, list[float]] = {}
    for moment in moments:
        taken = added
        while added < len(ordered) and ordered[added].at <= moment:
            added += 1
        if added > taken:
            log.extend(ordered[taken:added])
        if numbers and len(log):
            values[moment] = log.activation(numbers, moment).tolist()
    grid_set = set(grid)
    points = {
        n: [
            (m, values[m][i])
            for m in moments
            if m in values and m >= born[n] and (m in grid_set or m in own[n])
        ]
        for i, n in enumerate(numbers)
    }
    return ActivationHistory(start, end, points, thinned)


def _scale(history: ActivationHistory) -> tuple[float, float]:
    """The log axis's bounds (log10): the highest activation drawn, and the floor below it."""
    positive = [a for pts in history.points.values() for _, a in pts if a > 0]
    top = max(positive, default=1.0)
    low = max(min(positive, default=top * FLOOR_RATIO), top * FLOOR_RATIO)
    hi_exp, lo_exp = math.ceil(math.log10(top)), math.floor(math.log10(low))
    return lo_exp, max(hi_exp, lo_exp + 1)


def activation_svg(history: ActivationHistory, states: Mapping[int, str]) -> str:
    """The plot as an inline `<svg>`: one path per episode (coloured by its state now, titled
    with its number), a log activation axis and a UTC time axis."""
    lo, hi = _scale(history)
    width, height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    span = history.end - history.start

    def x(t: float) -> float:
        return LEFT + width * (t - history.start) / span

    def y(a: float) -> float:
        exp = math.log10(a) if a > 0 else lo
        return TOP + height * (hi - min(max(exp, lo), hi)) / (hi - lo)

    out = [
        f'<svg class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" '
        'aria-label="activation of each episode over time, log scale">',
        f'<rect x="{LEFT}" y="{TOP}" width="{width}" height="{height}" class="frame"/>',
    ]
    for exp in range(int(lo), int(hi) + 1):
        level = y(10.0**exp)
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + width}" y1="{level:.1f}" y2="{level:.1f}" '
            f'class="grid"/><text x="{LEFT - 6}" y="{level + 4:.1f}" class="tick" '
            f'text-anchor="end">1e{exp}</text>'
        )
    for i in range(5):
        t = history.start + span * i / 4
        anchor = ("start", "middle", "middle", "middle", "end")[i]
        out.append(
            f'<text x="{x(t):.1f}" y="{TOP + height + 16}" class="tick" '
            f'text-anchor="{anchor}">{escape(when(t))}</text>'
        )
    out.append(
        f'<text x="{LEFT + width / 2:.1f}" y="{HEIGHT - 4}" class="tick" '
        'text-anchor="middle">time (UTC)</text>'
    )
    for n, pts in history.points.items():
        state = states.get(n, "live")
        d = " ".join(
            f"{'M' if i == 0 else 'L'}{x(t):.1f},{y(a):.1f}" for i, (t, a) in enumerate(pts)
        )
        colour = STATE_COLOURS.get(state, "#000000")
        out.append(
            f'<path class="episode" data-episode="{n}" data-state="{escape(state)}" '
            f'd="{d or f"M{LEFT},{TOP + height}"}" stroke="{colour}">'
            f"<title>episode {n} ({escape(state)})</title></path>"
        )
    out.append("</svg>")
    return "\n".join(out)


def legend() -> str:
    """The colours of the states, as a line of HTML."""
    return " ".join(
        f'<span class="key" style="border-color:{colour}">{state}</span>'
        for state, colour in STATE_COLOURS.items()
    )
