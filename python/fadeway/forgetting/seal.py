"""Sealing (MECHANISM: "The note ask and sealing"): an acknowledged episode seals once its last
turn is over: its messages leave the view and its facts take their place in the facts block.
Sealing happens at the next decorate after the note is taken (Contracts: "Sealing")."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..mirror.history import History
from ..records import EpisodeRecord
from ..store import Transaction

__all__ = ["seal"]


def seal(
    tx: Transaction, mirror: History, episodes: Sequence[EpisodeRecord], acked: Collection[int]
) -> list[EpisodeRecord] | None:
    """Seal the leaving episodes whose note was taken (`acked`) and whose last turn is over;
    the episodes as they stand after, or None when none sealed."""
    sealing = {
        e.n: "sealed"
        for e in episodes
        if e.state == "leaving" and e.n in acked and e.last_turn < mirror.turn
    }
    if not sealing:
        return None
    tx.set_episode_states(sealing)
    return mirror.episodes.sync(tx)
