"""`fadeway inspect MEMORY --html FILE`: one memory as a self-contained static HTML page.

The page shows what `fadeway inspect` shows (episodes with their state and activation, the facts
block as the model sees it, the graph's counts, the lane), and beside it every episode's
activation over time as an inline SVG plot (`plot.py`), the graph's held facts grouped by
neighbourhood as recall groups them, the recall block of each turn (as first added, distilled,
and as fixed once the next message arrived), and the memory's own model calls (`fadeway usage`).

It stays offline and safe to open: no script, and nothing fetched at view time (CSS and SVG are
inline, the fonts the viewer's own), and a Content-Security-Policy that forbids loading anything,
so a page that somehow held a reference could not follow it. Every stored text (memory ids,
messages quoted by recall, facts, entity names, model names) is untrusted and HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from .. import blocks
from .._version import __version__
from ..graph.held import held_facts
from ..recall.grouping import group_facts
from ..recall.snapshot import Snapshot
from ..records import BlockText, RecallRecord
from ..store import Store
from .inspection import empty_facts_block, inspect_memory
from .plot import ActivationHistory, activation_history, activation_svg, legend
from .spending import NO_CALLS, memory_usage, usage_view
from .words import counted, when

__all__ = ["PageData", "TurnRecall", "build_page", "gather_page"]

#: Nothing is loaded from anywhere: inline styles only, no scripts, images only as data.
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px;
       padding: 0 16px; color: #111827; background: #ffffff; }
h1 { font-size: 20px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 32px; }
h3 { font-size: 15px; margin: 16px 0 4px; }
.meta { color: #4b5563; margin: 2px 0; }
pre { background: #f3f4f6; padding: 8px 10px; white-space: pre-wrap; overflow-wrap: anywhere;
      font: 12.5px/1.4 ui-monospace, monospace; border-radius: 4px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e5e7eb; text-align: right; }
th { background: #f9fafb; } td.text, th.text { text-align: left; }
tr.total td { font-weight: 600; }
svg.plot { max-width: 100%; height: auto; }
svg .frame { fill: #ffffff; stroke: #d1d5db; } svg .grid { stroke: #f3f4f6; }
svg .tick { font-size: 11px; fill: #4b5563; }
svg path.episode { fill: none; stroke-width: 1.4; stroke-opacity: 0.85; }
.key { border-left: 14px solid; padding-left: 4px; margin-right: 12px; }
td.state-live { color: #1b7f3b; } td.state-leaving { color: #d97706; }
td.state-sealed { color: #2563eb; } td.state-forgotten { color: #6b7280; }
details { margin: 4px 0; } summary { cursor: pointer; }
"""


@dataclass(frozen=True, slots=True)
class TurnRecall:
    """The recall block a user turn got, with its rewrites (None where there is none)."""

    record: RecallRecord
    distilled: BlockText | None  # prepared by the lane's distill
    final: BlockText | None  # fixed when the next message arrived (text None: removed)


@dataclass(frozen=True, slots=True)
class PageData:
    """Everything the page shows, read from the store."""

    view: dict[str, Any]  # `inspect_memory`'s view
    usage: dict[str, Any]  # `usage_view`'s
    history: ActivationHistory | None  # None for a memory without messages
    groups: list[blocks.RecallGroup]
    recalls: list[TurnRecall]


def gather_page(store: Store, memory_id: str, at: float, plot_end: float | None = None) -> PageData:
    """Read what the page shows; activation at `at`. The plot runs from the first message to
    `plot_end`, or to the last activity (message or trace) when None, so that a conversation
    replayed long ago shows its own time rather than years of fading since."""
    view = inspect_memory(store, memory_id, at)  # raises for a memory the store lacks
    usage = usage_view(memory_usage(store, memory_id))
    with store.read(memory_id) as tx:
        traces = tx.traces()
        distills = {b.turn: b for b in tx.block_texts("distills")}
        finals = {b.turn: b for b in tx.block_texts("recall_finals")}
        recalls = [TurnRecall(r, distills.get(r.turn), finals.get(r.turn)) for r in tx.recalls()]
        held = [f.n for f in held_facts(tx)]
        groups = group_facts(Snapshot(tx), held) if held else []
    history = None
    if view["first_at"] is not None:
        last = max([view["last_at"], *(t.at for t in traces)])
        history = activation_history(
            traces,
            [e["n"] for e in view["episodes"]],
            view["first_at"],
            plot_end if plot_end is not None else last,
        )
    return PageData(view, usage, history, groups, recalls)


def _e(value: object) -> str:
    """Untrusted text as HTML text or an attribute value."""
    return escape(str(value), quote=True)


def _pre(text: str) -> str:
    return f"<pre>{_e(text)}</pre>"


def _td(html: str, cls: str | None = None) -> str:
    """A cell holding `html` (already escaped), with a class to align or colour it."""
    return f'<td class="{cls}">{html}</td>' if cls else f"<td>{html}</td>"


def _table(head: Sequence[str], rows: Sequence[str], text_columns: set[int]) -> str:
    """A table of `rows` (each `<tr>` made by the caller) under `head`; the columns in
    `text_columns` align left."""
    ths = "".join(
        f'<th class="text">{h}</th>' if i in text_columns else f"<th>{h}</th>"
        for i, h in enumerate(head)
    )
    return f"<table><thead><tr>{ths}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _header(view: dict[str, Any]) -> str:
    lane = view["lane"]
    return (
        f"<h1>memory {_e(view['memory_id'])}</h1>"
        f'<p class="meta">{_e(view["format"])}: {counted(view["messages"], "message")} in '
        f"{counted(view['turns'], 'turn')}, {when(view['first_at'])} → "
        f"{when(view['last_at'])} UTC</p>"
        f'<p class="meta">activation at {when(view["at"])} UTC; states as stored now; lane: '
        f"{counted(lane['pending'], 'job')} pending, {len(lane['parked'])} parked after "
        f"failing</p>"
    )


def _plot_section(data: PageData) -> str:
    out = ['<section id="activation"><h2>Activation over time</h2>']
    history = data.history
    if history is None or not data.view["episodes"]:
        out.append("<p>no episodes yet (history is cut once enough of it has closed)</p>")
    else:
        states = {e["n"]: e["state"] for e in data.view["episodes"]}
        out += [
            f'<p class="meta">each episode from its first trace, log scale, '
            f"{when(history.start)} → {when(history.end)} UTC; colour: state now "
            f"{legend()}</p>",
            activation_svg(history, states),
        ]
        if history.thinned:
            out.append(
                '<p class="meta">sampled on an even grid only (too many traces to draw each '
                "one's jump): short peaks between samples are not drawn</p>"
            )
    out.append("</section>")
    return "".join(out)


def _episodes_section(view: dict[str, Any]) -> str:
    rows = [
        f'<tr class="episode" data-episode="{e["n"]}">'
        + _td(str(e["n"]))
        + _td(f"{e['first_turn']}–{e['last_turn']}")
        + _td(_e(e["state"]), f"text state-{_e(e['state'])}")
        + _td(f"{when(e['start_at'])} → {when(e['end_at'])}", "text")
        + _td(f"{e['tokens']:,}")
        + _td(str(e["traces"]))
        + _td(f"{e['activation']:.4f}")
        + _td(f"{e['significance']:.2f}")
        + "</tr>"
        for e in view["episodes"]
    ]
    head = ["episode", "turns", "state", "time span (UTC)", "tokens", "traces", "activation"]
    table = _table([*head, "signif."], rows, {2, 3})
    counts = ", ".join(f"{n} {state}" for state, n in view["states"].items() if n)
    return (
        f'<section id="episodes"><h2>Episodes</h2><p class="meta">'
        f"{counted(len(view['episodes']), 'episode')}{': ' + counts if counts else ''}; "
        f"activation at {when(view['at'])} UTC</p>{table}</section>"
    )


def _facts_section(view: dict[str, Any]) -> str:
    block = view["facts_block"]
    shown = _pre(block) if block else f"<p>{_e(empty_facts_block(view['states']))}</p>"
    return f'<section id="facts-block"><h2>Facts block (as the model sees it)</h2>{shown}</section>'


def _graph_section(data: PageData) -> str:
    g = data.view["graph"]
    out = [
        '<section id="graph"><h2>Graph neighbourhoods</h2><p class="meta">'
        f"{counted(g['entities'], 'entity', 'entities')}, "
        f"{counted(g['aliases'], 'alias', 'aliases')}, {counted(g['facts'], 'fact')} from "
        f"{counted(g['notes'], 'note')}, {g['merged']} merged, {g['retired']} retired; "
        f"{counted(g['passages'], 'passage')}. The held facts, grouped as recall groups them: "
        "by the neighbourhood of entities they connect, each group named for its most "
        "connected entity, the newest group first.</p>"
    ]
    if not data.groups:
        out.append("<p>no held facts yet (facts come from notes taken as episodes leave)</p>")
    for group in data.groups:
        lines = "".join(
            f"<li>{_e(blocks.grouped_line(fact).removeprefix('- '))}</li>" for fact in group.facts
        )
        out.append(f'<div class="group"><h3>{_e(group.name)}</h3><ul>{lines}</ul></div>')
    out.append("</section>")
    return "".join(out)


def _final(turn: TurnRecall) -> str:
    """What the turn's block became once the next message arrived."""
    final = turn.final
    if final is None:
        return "<p class=meta>not fixed yet (the turn's next message has not arrived)</p>"
    if final.text is None:
        return "<p class=meta>final: removed</p>"
    if final.text == turn.record.text:
        return "<p class=meta>final: as first added</p>"
    if turn.distilled is not None and final.text == turn.distilled.text:
        return "<p class=meta>final: the distilled text</p>"
    return f"<p class=meta>final ({final.tokens:,} tokens):</p>{_pre(final.text)}"


def _recalls_section(recalls: Sequence[TurnRecall]) -> str:
    out = ['<section id="recall"><h2>Recall blocks, turn by turn</h2>']
    if not recalls:
        out.append("<p>no recall blocks yet (recall begins once history has left the view)</p>")
    for turn in recalls:
        r = turn.record
        summary = (
            f"turn {r.turn} · {when(r.at)} UTC · {r.tokens:,} tokens · "
            f"{counted(len(r.facts), 'fact')}, {counted(len(r.passages), 'passage')}"
        )
        body = [f"<p class=meta>as first added:</p>{_pre(r.text)}"]
        if turn.distilled is not None and turn.distilled.text is not None:
            body.append(
                f"<p class=meta>distilled ({turn.distilled.tokens:,} tokens):</p>"
                f"{_pre(turn.distilled.text)}"
            )
        body.append(_final(turn))
        out.append(
            f'<details class="recall" data-turn="{r.turn}"><summary>{summary}</summary>'
            f"{''.join(body)}</details>"
        )
    out.append("</section>")
    return "".join(out)


def _usage_section(usage: dict[str, Any]) -> str:
    out = ['<section id="usage"><h2>Model calls</h2>']
    if not usage["rows"]:
        out.append(f"<p>{_e(NO_CALLS)}</p>")
    else:

        def row(kind: str, model: str, r: dict[str, Any], cls: str = "") -> str:
            return (
                f"<tr{cls}>"
                + _td(_e(kind), "text")
                + _td(_e(model), "text")
                + _td(f"{r['calls']:,}")
                + _td(f"{r['tokens_in']:,}")
                + _td(f"{r['tokens_cached']:,}")
                + _td(f"{r['tokens_out']:,}")
                + _td(f"{r['seconds']:.1f}")
                + "</tr>"
            )

        rows = [row(r["kind"], r["model"], r) for r in usage["rows"]]
        rows.append(row("total", "", usage["total"], ' class="total"'))
        head = ["kind", "model", "calls", "tokens in", "cached", "tokens out", "seconds"]
        out.append(_table(head, rows, {0, 1}))
    out.append("</section>")
    return "".join(out)


def build_page(data: PageData) -> str:
    """The whole page, as one string of HTML."""
    view = data.view
    sections = [
        _header(view),
        _plot_section(data),
        _episodes_section(view),
        _facts_section(view),
        _graph_section(data),
        _recalls_section(data.recalls),
        _usage_section(data.usage),
    ]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>fadeway: memory {_e(view['memory_id'])}</title>"
        f"<style>{STYLE}</style></head><body>\n"
        + "\n".join(sections)
        + f'\n<footer class="meta"><p>fadeway {_e(__version__)} · '
        "<code>fadeway inspect</code> · a static page: nothing here loads from the network"
        "</p></footer></body></html>\n"
    )
