"""A transaction planned outside the write lock (`Deferred`): a read transaction whose writes
are kept, not made, for `recording.replay` to make in a short write transaction while the memory
is as it was (its `version`). SQLite has one writer for every memory of a file; a decorate that
forgot and assembled inside its write transaction held it about a millisecond (0.2 ms for its
writes alone), and a second replay worker on the file waited for it (docs/design/storage.md,
"Short write transactions").

A read cannot see a write that was only kept: a read of a table a kept write changed raises
`ReadsOwnWrite`, and so does a write whose result a plan would need (`create_memory`) or that is
not known here. The caller then does the work in a write transaction. A job queued is kept with
the number the lane will give it: the last job's, counted on (no other job can be queued while
the memory's `version` holds, since every transaction that queues one changes it).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from .base import WRITES, Transaction
from .recording import Write

__all__ = ["DEFERRABLE", "READS", "Deferred", "ReadsOwnWrite"]

#: The writes a plan may keep, with the tables each changes (`enqueue` too: `Deferred` numbers
#: its jobs). The rest return what a plan would read next (`create_memory`) or change what most
#: reads read: they are made in a write transaction.
DEFERRABLE: dict[str, frozenset[str]] = {
    "set_instructions": frozenset({"memories"}),
    "set_decorated_through": frozenset({"memories"}),
    "insert_messages": frozenset({"messages"}),
    "insert_block_text": frozenset({"block_texts"}),
    "insert_recall": frozenset({"recalls"}),
    "insert_emitted": frozenset({"emitted"}),
    "insert_usage": frozenset({"usage"}),
    "insert_request": frozenset({"requests"}),
    "record_report": frozenset({"requests"}),
}

#: The reads a plan may make after a kept write, with the tables each reads (any other read
#: after a write raises `ReadsOwnWrite`).
READS: dict[str, frozenset[str]] = {
    "memory": frozenset({"memories"}),
    "version": frozenset({"memories"}),
    "message_count": frozenset({"messages"}),
    "messages": frozenset({"messages"}),
    "latest_request": frozenset({"requests"}),
    "last_kept_ratio": frozenset({"requests"}),
    "pending_job": frozenset({"jobs"}),
    "recall_blocks": frozenset({"recalls", "block_texts"}),
    "recalls": frozenset({"recalls"}),
    "block_texts": frozenset({"block_texts"}),
    "marks": frozenset(
        "facts entities edges retirements episodes notes passages vectors jobs".split()
    ),
    "last_episode": frozenset({"episodes"}),
    "graph_rows": frozenset("facts entities edges retirements episodes notes".split()),
    "fact_count": frozenset({"facts"}),
    "passage_count": frozenset({"passages"}),
    "find_request": frozenset({"requests"}),
    "emitted_among": frozenset({"emitted"}),
    "last_job": frozenset({"jobs"}),
}


class ReadsOwnWrite(Exception):
    """A plan read what it wrote (or made a write it cannot keep): it must run in a write
    transaction."""


class Deferred:
    """`tx`, a read transaction, but that its writes are kept in `writes` (each with a copy of
    its arguments), not made; see the module's docstring."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx
        self.writes: list[Write] = []
        self._changed: set[str] = set()
        self._next_job: int | None = None

    def wrote(self) -> bool:
        return bool(self.writes)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._tx, name)
        if name == "enqueue":
            return self._enqueue
        if name in WRITES:
            return self._kept(name)
        if not self._changed or not callable(found):
            return found
        reads = READS.get(name)
        if reads is None or reads & self._changed:
            raise ReadsOwnWrite(f"{name} after a kept write to {', '.join(sorted(self._changed))}")
        return found

    def _enqueue(self, kind: str, payload: bytes, created_at: float) -> int:
        """Keep a job queued, numbered as the lane will number it (see the module)."""
        if self._next_job is None:
            self._next_job = self._tx.last_job() + 1
        n, self._next_job = self._next_job, self._next_job + 1
        self.writes.append(("enqueue", (kind, payload, created_at), {}))
        self._changed.add("jobs")
        return n

    def _kept(self, name: str) -> Callable[..., None]:
        changes = DEFERRABLE.get(name)
        if changes is None:
            raise ReadsOwnWrite(f"{name} cannot be kept for later")

        def write(*args: Any, **kwargs: Any) -> None:
            self.writes.append((name, copy.deepcopy(args), copy.deepcopy(kwargs)))
            self._changed |= changes

        return write
