"""A memory's episodes mirrored as records and columns (MECHANISM: "Episodes", "Forgetting").

Every decorate reads the episodes' states (what is out of view, what is leaving), and a fade
reads their numbers, sizes and spans as columns. Read from the store as one Python object an
episode, 10,000 episodes cost 13-16 ms a call, and turning them into columns 1.5-2.6 ms more.
Mirrored here and kept in step by the store's count of episode changes, a call reads one number
and the few episodes written since.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..records import EpisodeRecord
from ..store import Transaction

__all__ = ["EpisodeColumns", "EpisodeTable", "STATES"]

#: Episode states in the order they move, as the codes of `EpisodeColumns.state`.
STATES = ("live", "leaving", "sealed", "forgotten")
_CODE = {s: np.int8(i) for i, s in enumerate(STATES)}


@dataclass(frozen=True, slots=True)
class EpisodeColumns:
    """The episodes as columns, one entry an episode in order of number."""

    n: np.ndarray  # int64
    first_seq: np.ndarray  # int64
    last_seq: np.ndarray  # int64, inclusive
    tokens: np.ndarray  # int64
    state: np.ndarray  # int8, an index into STATES

    def __len__(self) -> int:
        return len(self.n)

    def where(self, *states: str) -> np.ndarray:
        """The positions of the episodes in any of `states`."""
        wanted = np.zeros(len(STATES), dtype=bool)
        wanted[[_CODE[s] for s in states]] = True
        return np.flatnonzero(wanted[self.state])

    def hidden(self, leaving: bool = False) -> np.ndarray:
        """The seq ranges out of view, one row (first, last) a sealed or forgotten episode, and
        a leaving one when `leaving` (a note writer, not the model, answers for it)."""
        at = (
            self.where("leaving", "sealed", "forgotten")
            if leaving
            else self.where("sealed", "forgotten")
        )
        return np.column_stack((self.first_seq[at], self.last_seq[at]))


class EpisodeTable:
    """The episodes of one memory, in order of number, kept in step with the store.

    `sync` reads the store's count of episode writes and, when it moved, only the episodes those
    writes touched. A count below the mirror's (the store replaced under it) reads them all again.
    A transaction that fails after this mirror read its writes leaves it holding what was rolled
    back: `History.roll_back` and `History.reset` clear it then.
    """

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._changes = -1  # the store's count of episode writes this mirror has read up to
        self._records: list[EpisodeRecord] = []
        self._position: dict[int, int] = {}  # episode number → index
        self._columns: EpisodeColumns | None = None
        #: What callers derive from the episodes as they stand (the view's seqs, asked for
        #: several times a decorate), emptied whenever they change.
        self.derived: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self._records)

    @property
    def changes(self) -> int:
        """The store's count of episode writes this mirror has read up to (-1 before any)."""
        return self._changes

    def sync(self, tx: Transaction) -> list[EpisodeRecord]:
        """Bring the mirror up to the store and return its episodes, in order."""
        changes = tx.episode_changes()
        if changes < self._changes:
            self.clear()
        if changes != self._changes:
            self._apply(tx.episodes_changed(after=self._changes))
            self._changes = changes
        return list(self._records)

    def records(self, numbers: Iterable[int]) -> list[EpisodeRecord]:
        """The episodes numbered `numbers`, as they stand since the last `sync`."""
        return [self._records[self._position[n]] for n in numbers]

    def columns(self) -> EpisodeColumns:
        """The episodes as they stand since the last `sync`, as columns (until the next one)."""
        if self._columns is None:
            self._columns = _columns_of(self._records)
        return self._columns

    def _apply(self, changed: list[EpisodeRecord]) -> None:
        self.derived.clear()
        cols, new = self._columns, []
        for e in changed:
            i = self._position.get(e.n)
            if i is None:
                new.append(e)
                continue
            self._records[i] = e
            if cols is not None:
                cols.state[i] = _CODE[e.state]  # the only field an episode may change
        if not new:
            return
        in_order = not self._records or new[0].n > self._records[-1].n
        self._records.extend(new)
        if not in_order:  # not written by fadeway, which numbers episodes in order: sort
            self._records.sort(key=lambda e: e.n)
            self._position = {e.n: i for i, e in enumerate(self._records)}
            self._columns = None
            return
        self._position.update((e.n, len(self._records) - len(new) + i) for i, e in enumerate(new))
        if cols is not None:
            more = _columns_of(new)
            self._columns = EpisodeColumns(
                *(np.concatenate((getattr(cols, f), getattr(more, f))) for f in _FIELDS)
            )


_FIELDS = ("n", "first_seq", "last_seq", "tokens", "state")


def _columns_of(records: list[EpisodeRecord]) -> EpisodeColumns:
    count = len(records)

    def column(field: str) -> np.ndarray:
        return np.fromiter((getattr(e, field) for e in records), dtype=np.int64, count=count)

    return EpisodeColumns(
        n=column("n"),
        first_seq=column("first_seq"),
        last_seq=column("last_seq"),
        tokens=column("tokens"),
        state=np.fromiter((_CODE[e.state] for e in records), dtype=np.int8, count=count),
    )
