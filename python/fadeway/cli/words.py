"""How the command line words what it prints: counts with their nouns, and times."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["counted", "when"]


def counted(n: int, one: str, many: str | None = None) -> str:
    """`n` with its noun, singular for exactly one: "1 memory", "2 memories", "0 facts"."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def when(seconds: float | None) -> str:
    """A moment as UTC minutes ("2026-04-08 08:04"), "-" for none."""
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M")
