"""The search indexes of recently used memories, opened on first use and saved as they close."""

from __future__ import annotations

from pathlib import Path

from .. import _constants as C
from .._recent import RecentlyUsed
from ..embed.base import Embedder
from .paths import index_dir
from .search import MemoryIndex

__all__ = ["Indexes"]


class Indexes(RecentlyUsed[MemoryIndex]):
    """A `MemoryIndex` per memory id, for the OPEN_INDEXES most recently used, whose vectors
    hold at most OPEN_INDEX_BYTES together; an index that closes is saved first. `data_dir` is
    where each memory's indexes are saved (None: kept in memory only)."""

    def __init__(self, embedder: Embedder, data_dir: Path | None) -> None:
        self.data_dir = data_dir
        super().__init__(
            lambda memory_id: MemoryIndex(
                memory_id, index_dir(data_dir, memory_id) if data_dir else None, embedder
            ),
            size=lambda index: index.nbytes,
            count=lambda: C.OPEN_INDEXES,
            budget=lambda: C.OPEN_INDEX_BYTES,
            on_leave=MemoryIndex.save,
        )

    def save(self) -> None:
        """Save every open index that changed since it was last saved."""
        for index in self.values():
            index.save()
