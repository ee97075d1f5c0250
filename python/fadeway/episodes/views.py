"""The episodes of a memory as a caller inspects them (`Memory.episodes()`): each with its
units, its state and its traces."""

from __future__ import annotations

from ..records import EpisodeView, TraceRecord
from ..store import Transaction
from .units import units

__all__ = ["episode_views"]


def episode_views(tx: Transaction) -> list[EpisodeView]:
    """The memory's episodes, in order, with their units, state and traces."""
    episodes = tx.episodes()
    traces = tx.traces()
    messages = tx.messages(0, episodes[-1].last_seq + 1) if episodes else []
    by_episode: dict[int, list[TraceRecord]] = {}
    for t in traces:
        by_episode.setdefault(t.episode, []).append(t)
    return [
        EpisodeView(
            n=e.n,
            state=e.state,
            first_seq=e.first_seq,
            last_seq=e.last_seq,
            first_turn=e.first_turn,
            last_turn=e.last_turn,
            start_at=e.start_at,
            end_at=e.end_at,
            tokens=e.tokens,
            units=units(messages[e.first_seq : e.last_seq + 1]),
            traces=by_episode.get(e.n, []),
        )
        for e in episodes
    ]
