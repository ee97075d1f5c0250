"""Values kept for the most recently used keys (per-memory caches: mirrors, search indexes)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["RecentlyUsed"]

V = TypeVar("V")


class RecentlyUsed(Generic[V]):
    """A value per key, made on first use; past `count()` values or `budget()` bytes in all
    (`size` of each), the least recently used leave (`on_leave` is told), all but the one just
    asked for, whatever its size. An evicted value is only a cache miss: the store stays the
    one truth. The limits are read at each use, so a setting changed at run time applies."""

    def __init__(
        self,
        make: Callable[[str], V],
        *,
        size: Callable[[V], int],
        count: Callable[[], int],
        budget: Callable[[], int],
        on_leave: Callable[[V], None] | None = None,
    ) -> None:
        self._make, self._size, self._count, self._budget = make, size, count, budget
        self._on_leave = on_leave
        self._held: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> V:
        """The value of `key`, made if it is not held; it becomes the most recently used."""
        with self._lock:
            value = self._held.get(key)
            if value is None:
                value = self._held[key] = self._make(key)
            else:
                self._held.move_to_end(key)
            held = sum(map(self._size, self._held.values()))
            while len(self._held) > 1 and (
                len(self._held) > self._count() or held > self._budget()
            ):
                leaving = self._held.popitem(last=False)[1]
                held -= self._size(leaving)
                if self._on_leave is not None:
                    self._on_leave(leaving)
        return value

    def peek(self, key: str) -> V | None:
        """The value held for `key`, if any, without using it (for inspection)."""
        return self._held.get(key)

    def values(self) -> list[V]:
        """The values held now, least recently used first."""
        with self._lock:
            return list(self._held.values())

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._held))

    def __contains__(self, key: object) -> bool:
        return key in self._held

    def __len__(self) -> int:
        return len(self._held)
