"""Sleep (MECHANISM: "Sleep"): when a user message arrives after 24 hours or more since the
last one, the turn sleeps first: the view fades to the landing before the reply, whether or
not it was over the ceiling."""

from __future__ import annotations

import bisect

from ..mirror.history import History

__all__ = ["silence"]


def silence(history: History, before: int) -> float:
    """The longest the user was silent before a user message stored from `before` on (this
    call's): seconds since the user message before it, 0 without one. The turn sleeps at 24
    hours or more (spec: "When a user message arrives after 24 hours or more since the last
    one"); tool rounds and replies in between do not end the silence. User messages are stored
    by decorate alone, at their call's time."""
    users = history.user_seqs
    k = bisect.bisect_left(users, before)
    ats = [history.ats[seq] for seq in users[max(k - 1, 0) :]]
    return max((b - a for a, b in zip(ats, ats[1:], strict=False)), default=0.0)
