"""A memory's trace log mirrored as columns (MECHANISM: "Encoding and traces", "Activation").

The fade and the facts block's order read every counted trace of a memory. Mirrored here as
numpy columns, kept in step by reading only the traces written since, that costs one Rust call;
the first read of a log of 200,000 traces, streamed as four numbers a row
(`Transaction.trace_columns`), about 140 ms (330 as one Python record a trace).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .._core import activation_log_order
from ..records import TraceRecord
from ..store import Transaction

__all__ = ["TraceLog"]


class TraceLog:
    """The append-only trace log of one memory as columns, in order of writing.

    A trace that does not count is held with weight 0: added in its place it changes no sum, so
    one Rust call over the whole log, grouped by the episode or fact numbers themselves, gives
    every activation without a pass to filter or regroup the traces. `sync` brings the mirror
    up to the store by reading only the traces numbered past the last one it holds; a store
    whose log is shorter than the mirror (replaced under it) is read again whole.
    """

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._last = 0  # the number of the last trace held
        self._size = 0
        self._top = {"episode": 0, "fact": 0}  # the largest number in each column
        self._episode = np.empty(0, dtype=np.int64)
        self._fact = np.empty(0, dtype=np.int64)  # 0 for an episode's encoding trace
        self._at = np.empty(0, dtype=np.float64)
        self._weight = np.empty(0, dtype=np.float64)  # the score if the trace counts, else 0

    @classmethod
    def of(cls, traces: Sequence[TraceRecord]) -> TraceLog:
        """A log holding `traces` (as `tx.traces()` returns them)."""
        log = cls()
        log.extend(traces)
        return log

    def __len__(self) -> int:
        return self._size

    @property
    def last(self) -> int:
        """The number of the last trace held (0 for none)."""
        return self._last

    def sync(self, tx: Transaction) -> None:
        """Read the traces the store holds past this mirror's last one."""
        top = tx.trace_count()
        if top < self._last:
            self.clear()
        if top > self._last:
            columns = tx.trace_columns(after=self._last)
            self._append(
                columns[:, 0].astype(np.int64),
                columns[:, 1].astype(np.int64),
                columns[:, 2],
                columns[:, 3],
                top,
            )

    def extend(self, traces: Sequence[TraceRecord]) -> None:
        """Append `traces`, which follow the last one held."""
        if traces:
            self._append(
                [t.episode for t in traces],
                [t.fact or 0 for t in traces],
                [t.at for t in traces],
                [t.score if t.counted else 0.0 for t in traces],
                traces[-1].n,
            )

    def _append(
        self,
        episode: Sequence[int] | np.ndarray,
        fact: Sequence[int] | np.ndarray,
        at: Sequence[float] | np.ndarray,
        weight: Sequence[float] | np.ndarray,
        last: int,
    ) -> None:
        """Append the columns of traces that follow the last one held; `last` is the number of
        the last of them."""
        if not len(at):
            return
        end = self._size + len(at)
        if end > len(self._at):
            capacity = max(end, 2 * len(self._at), 1024)
            for name in ("_episode", "_fact", "_at", "_weight"):
                old = getattr(self, name)
                grown = np.empty(capacity, dtype=old.dtype)
                grown[: self._size] = old[: self._size]
                setattr(self, name, grown)
        part = slice(self._size, end)
        self._episode[part] = episode
        self._fact[part] = fact
        self._at[part] = at
        self._weight[part] = weight
        for by, column in (("episode", self._episode), ("fact", self._fact)):
            self._top[by] = max(self._top[by], int(column[part].max()))
        self._size, self._last = end, last

    def activation(
        self,
        keys: Sequence[int] | np.ndarray,
        now: float,
        *,
        by: str = "episode",
        fact_key: Callable[[int], int] | None = None,
    ) -> np.ndarray:
        """The activation at `now` of each of `keys` (episode or fact numbers) from its
        counted traces, added in the order they were written (`activation_log_order`).

        `by` is "episode" (the encoding trace and counted fact traces of each episode) or
        "fact" (each fact's own counted traces; `fact_key` maps a fact's number to the number
        its traces count for, such as the held fact a restatement merged into).
        """
        group, keys_, span = self._groups(keys, by, fact_key)
        n = self._size
        every = activation_log_order(group, self._at[:n], self._weight[:n], now, span)
        return every[keys_]

    def significance(
        self,
        keys: Sequence[int] | np.ndarray,
        *,
        by: str = "episode",
        fact_key: Callable[[int], int] | None = None,
    ) -> np.ndarray:
        """The plain, never faded sum of each key's counted scores; arguments as `activation`."""
        group, keys_, span = self._groups(keys, by, fact_key)
        every = np.bincount(group, weights=self._weight[: self._size], minlength=span)
        return every[keys_].astype(np.float64)

    def _groups(
        self, keys: Sequence[int] | np.ndarray, by: str, fact_key: Callable[[int], int] | None
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Each trace's group (the number it counts for), the keys, and how many groups."""
        if by not in ("episode", "fact"):
            raise ValueError(f"by must be 'episode' or 'fact', not {by!r}")
        if fact_key is not None and by != "fact":
            raise ValueError("fact_key maps fact numbers; it needs by='fact'")
        keys_ = np.asarray(keys, dtype=np.int64)
        if len(keys_) and keys_.min() < 1:
            raise ValueError(f"keys are episode or fact numbers (from 1), not {int(keys_.min())}")
        column = (self._episode if by == "episode" else self._fact)[: self._size]
        top = self._top[by]
        if fact_key is not None:
            # Fact 0 stands for no fact (an encoding trace): a group no key asks for.
            table = np.fromiter(
                (f and fact_key(f) for f in range(top + 1)), dtype=np.int64, count=top + 1
            )
            column, top = table[column], int(table.max())
        return column, keys_, max(top, int(keys_.max(initial=0))) + 1
