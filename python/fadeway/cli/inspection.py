"""`fadeway inspect`: one memory as the store holds it (episodes with their state and
activation, the facts block as the model sees it, the knowledge graph's counts, the lane's
pending jobs and those parked after failing).

Activation is computed at any moment (`at`) from the append-only traces (MECHANISM:
"Activation"); states and the facts block are the stored, current ones.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from ..errors import MemoryNotFoundError
from ..mirror.trace_log import TraceLog
from ..records import EpisodeRecord, JobRecord, TraceRecord
from ..store import Store
from .words import counted
from .words import when as _when

__all__ = ["MemoryNotFoundError", "empty_facts_block", "inspect_memory", "render"]


def inspect_memory(store: Store, memory_id: str, at: float) -> dict[str, Any]:
    """Everything `fadeway inspect` shows, as plain JSON values; activation at `at`."""
    with store.read(memory_id) as tx:
        memory = tx.memory()
        if memory is None:
            raise MemoryNotFoundError(f"the store holds no memory {memory_id!r}")
        count = tx.message_count()
        first, last = (
            (tx.messages(0, 1)[0], tx.messages(count - 1, count)[0]) if count else (None, None)
        )
        episodes = tx.episodes()
        traces = tx.traces()
        edges = tx.edges()
        graph = {
            "notes": len(tx.notes()),
            "facts": len(tx.facts()),
            "entities": len(tx.entities()),
            "aliases": len(tx.aliases()),
            "edges": len(edges),
            "merged": sum(1 for e in edges if e.merged_into is not None),
            "retired": len(tx.retirements()),
            "passages": tx.passage_count(),
        }
        lane = {
            "pending": len(tx.jobs("pending")),
            "parked": [_parked(j) for j in tx.jobs("failed")],
        }
    states = [e.state for e in episodes]
    return {
        "memory_id": memory_id,
        "format": memory.format,
        "at": at,
        "messages": count,
        "turns": last.turn if last else 0,
        "first_at": first.at if first else None,
        "last_at": last.at if last else None,
        "episodes": _episodes(episodes, traces, at),
        "states": {
            state: states.count(state) for state in ("live", "leaving", "sealed", "forgotten")
        },
        "facts_block": memory.facts_block,
        "graph": graph,
        "lane": lane,
    }


def _parked(job: JobRecord) -> dict[str, Any]:
    """A parked job as inspect shows it (`retry_at`: real Unix seconds; None: next lane run)."""
    return {
        "n": job.n,
        "kind": job.kind,
        "created_at": job.created_at,
        "attempts": job.attempts,
        "parked": job.parked,
        "retry_at": job.retry_at,
        "error": job.error,
    }


def _episodes(
    episodes: Sequence[EpisodeRecord], traces: Sequence[TraceRecord], at: float
) -> list[dict[str, Any]]:
    """Each episode with its traces' count, its activation at `at` and its significance."""
    log, numbers = TraceLog.of(traces), [e.n for e in episodes]
    act, sig = log.activation(numbers, at), log.significance(numbers)
    trace_count: dict[int, int] = {}
    for t in traces:
        trace_count[t.episode] = trace_count.get(t.episode, 0) + 1
    return [
        {
            "n": e.n,
            "state": e.state,
            "first_turn": e.first_turn,
            "last_turn": e.last_turn,
            "first_seq": e.first_seq,
            "last_seq": e.last_seq,
            "start_at": e.start_at,
            "end_at": e.end_at,
            "tokens": e.tokens,
            "traces": trace_count.get(e.n, 0),
            "activation": float(a),
            "significance": float(s),
        }
        for e, a, s in zip(episodes, act.tolist(), sig.tolist(), strict=True)
    ]


def _span(start: float, end: float) -> str:
    a, b = _when(start), _when(end)
    return f"{a} → {b[11:]}" if a[:10] == b[:10] else f"{a} → {b}"


def render(view: dict[str, Any]) -> str:
    """The inspect view as text for a terminal."""
    out = [
        f"memory {view['memory_id']!r} ({view['format']}): {counted(view['messages'], 'message')} "
        f"in {counted(view['turns'], 'turn')}, {_when(view['first_at'])} → "
        f"{_when(view['last_at'])} UTC",
        f"activation at {_when(view['at'])} UTC; states as stored now",
        "",
    ]
    episodes = view["episodes"]
    if episodes:
        out.append(
            f"{'ep':>4}  {'state':<9}  {'turns':>9}  {'time span (UTC)':<33}  "
            f"{'tokens':>6}  {'traces':>6}  {'activation':>10}  {'signif.':>7}"
        )
        for e in episodes:
            turns = f"{e['first_turn']}–{e['last_turn']}"
            out.append(
                f"{e['n']:>4}  {e['state']:<9}  {turns:>9}  "
                f"{_span(e['start_at'], e['end_at']):<33}  {e['tokens']:>6}  "
                f"{e['traces']:>6}  {e['activation']:>10.4f}  {e['significance']:>7.2f}"
            )
        counts = ", ".join(f"{n} {state}" for state, n in view["states"].items() if n)
        out.append(f"{counted(len(episodes), 'episode')}: {counts}")
    else:
        out.append("no episodes yet (history is cut once enough of it has closed)")
    g = view["graph"]
    out += [
        "",
        f"graph: {counted(g['entities'], 'entity', 'entities')}, "
        f"{counted(g['aliases'], 'alias', 'aliases')}, {counted(g['facts'], 'fact')} "
        f"from {counted(g['notes'], 'note')}, {g['merged']} merged, {g['retired']} retired; "
        f"{counted(g['passages'], 'passage')}",
        *_render_lane(view["memory_id"], view["lane"]),
        "",
        "facts block (as the model sees it):",
    ]
    out.append(view["facts_block"] or empty_facts_block(view["states"]))
    return "\n".join(out)


def empty_facts_block(states: dict[str, int]) -> str:
    """Why the facts block is empty, given the episodes' counts by state."""
    if states.get("sealed"):
        return "(empty: the notes of the sealed episodes hold no facts)"
    if states.get("forgotten"):
        return (
            "(empty: no episode is sealed now; the forgotten ones' facts left the block, "
            "and recall brings them back)"
        )
    return "(empty: no episode has sealed yet)"


def _render_lane(memory_id: str, lane: dict[str, Any]) -> list[str]:
    parked = lane["parked"]
    out = [f"lane: {counted(lane['pending'], 'job')} pending, {len(parked)} parked after failing"]
    for j in parked:
        retry_at = j["retry_at"]
        again = "next lane run" if retry_at is None else f"lane run after {_when(retry_at)} UTC"
        out.append(
            f"  job {j['n']} ({j['kind']}, queued {_when(j['created_at'])} UTC): failed "
            f"{counted(j['attempts'], 'time')}, parked {j['parked']}x, tried again at the "
            f"{again}: "
            f"{j['error']}"
        )
    if parked:
        out.append(f"  `fadeway lane retry {shlex.quote(memory_id)}` queues them again now")
    return out
