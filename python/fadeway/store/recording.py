"""A transaction whose writes are kept, to be made again in another transaction (`Recording`,
`replay`): a request decorated now and stored once its provider accepted it
(`Memory.prepare`)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from .base import WRITES, Transaction

__all__ = ["Recording", "Write", "replay"]

#: One write: the `Transaction` method's name and its arguments.
Write = tuple[str, tuple[Any, ...], dict[str, Any]]


class Recording:
    """`tx` itself, but that each of its writes (`WRITES`) is also kept in `writes`, with a
    copy of its arguments as they were (a caller may change a list it passed later)."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx
        self.writes: list[Write] = []

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._tx, name)
        if name not in WRITES:
            return found
        return _recorded(found, name, self.writes)


def _recorded(method: Callable[..., Any], name: str, writes: list[Write]) -> Callable[..., Any]:
    def write(*args: Any, **kwargs: Any) -> Any:
        writes.append((name, copy.deepcopy(args), copy.deepcopy(kwargs)))
        return method(*args, **kwargs)

    return write


def replay(tx: Transaction, writes: Sequence[Write]) -> None:
    """Make `writes` in `tx`, in order. On the memory as it was when they were recorded, they
    write the same rows."""
    for name, args, kwargs in writes:
        getattr(tx, name)(*args, **kwargs)
