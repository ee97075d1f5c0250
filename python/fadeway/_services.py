"""The services record: what `fadeway.open()` builds once and passes down (ARCHITECTURE:
"The three calls", "Time"), so that a module says in its signature what it uses.

Every part reads the store, the clock and the settings from here, never from the engine: the
engine is the facade that builds this record, and nothing below it imports it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from . import _constants as C
from .embed.base import Embedder
from .episodes.cut import CutSettings
from .errors import InvalidTimeError
from .index.indexes import Indexes
from .judge.base import Judge
from .mirror.mirrors import Mirrors
from .notes.writers import NoteWriter
from .store import Store
from .wire.limits import Limits

__all__ = ["LaneQueue", "Services", "now_of"]


@dataclass(frozen=True, slots=True)
class LaneQueue:
    """The lane's queue as the calls see it. Jobs are queued in the store (`tx.enqueue`, in
    the transaction that makes them due); `queued()` then wakes the in-process worker, which
    waits on `wake`. The lease and the first retry wait are the lane's settings."""

    lease_seconds: float
    retry_seconds: float
    wake: threading.Event = field(default_factory=threading.Event, compare=False)

    def queued(self) -> None:
        """Jobs were queued: a waiting worker looks at the lanes now."""
        self.wake.set()


@dataclass(frozen=True, slots=True)
class Services:
    """The store, the clock, the settings and the models of one engine, and its per-memory
    caches (history mirrors, search indexes)."""

    store: Store
    clock: Callable[[], float]
    ceiling: int
    judge: Judge
    embedder: Embedder
    #: Who answers the note asks instead of the decorated model (None: the model).
    note_writer: NoteWriter | None
    cut_settings: CutSettings
    mirrors: Mirrors
    indexes: Indexes
    lane: LaneQueue
    #: The sizes the engine accepts (a message's bytes, messages per request, a note's size).
    limits: Limits = field(default_factory=Limits)

    def now(self, at: float | datetime | None = None) -> float:
        """`at` as Unix seconds (checked), or the clock's time when it is None."""
        return now_of(self.clock() if at is None else at)


def now_of(at: float | datetime) -> float:
    """A time given as Unix seconds or an aware datetime, as finite Unix seconds."""
    if isinstance(at, datetime):
        if at.tzinfo is None:
            raise InvalidTimeError(f"at must be timezone-aware (or Unix seconds), not {at!r}")
        value: object = at.timestamp()
    else:
        value = at
    low, high = C.TIME_RANGE
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise InvalidTimeError(
            f"the time must be finite Unix seconds of years 1 to 9999 ({low:.0f} to "
            f"{high:.0f}), not {value!r}"
        )
    return float(value)
