"""The mirrors of recently used memories' histories, shared by every handle of an engine."""

from __future__ import annotations

from .. import _constants as C
from .._recent import RecentlyUsed
from .history import History

__all__ = ["Mirrors"]


class Mirrors(RecentlyUsed[History]):
    """A `History` mirror per memory id, for the HISTORY_CACHE_MEMORIES most recently used,
    whose bodies hold at most HISTORY_CACHE_BYTES together."""

    def __init__(self) -> None:
        super().__init__(
            lambda _memory_id: History(),
            size=lambda history: history.body_bytes,
            count=lambda: C.HISTORY_CACHE_MEMORIES,
            budget=lambda: C.HISTORY_CACHE_BYTES,
        )
