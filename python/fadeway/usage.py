"""Cost and usage accounting: what each judge and note-writer call to a model cost.

A model-backed component calls `record(...)` after each call; whoever runs the work (a lane job,
decorate's recall or cut) collects the records with `collecting()` and writes them to the store
with the memory they were spent on. Collection follows the context (asyncio tasks, and
`lane.run_sync`'s helper thread), so a judge never needs to know which memory it works for.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import msgspec

__all__ = ["UsageRecord", "UsageSummary", "record", "collecting", "sum_usage", "summarise_usage"]


class UsageRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One call to a model: what for (`kind`, e.g. "judge:levels" or "note"), which model, the
    tokens it read and wrote as the endpoint reported them, and how long it took.
    `tokens_cached` are the tokens read that the provider served from its prompt cache (part
    of `tokens_in`, billed lower; 0 when it did not say)."""

    kind: str
    model: str
    tokens_in: int
    tokens_out: int
    seconds: float
    at: float = 0.0  # the engine's time when it was stored (set by the store's writer)
    tokens_cached: int = 0


class UsageSummary(msgspec.Struct, frozen=True, kw_only=True):
    """Model calls of one kind to one model, summed."""

    kind: str
    model: str
    calls: int
    tokens_in: int
    tokens_out: int
    seconds: float
    tokens_cached: int = 0  # of tokens_in, served from the provider's prompt cache


def summarise_usage(rows: list[UsageRecord]) -> list[UsageSummary]:
    """`rows` summed by (kind, model), in order of first appearance."""
    return sum_usage(
        UsageSummary(
            kind=u.kind,
            model=u.model,
            calls=1,
            tokens_in=u.tokens_in,
            tokens_out=u.tokens_out,
            seconds=u.seconds,
            tokens_cached=u.tokens_cached,
        )
        for u in rows
    )


def sum_usage(summaries: Iterable[UsageSummary]) -> list[UsageSummary]:
    """`summaries` (of several calls or memories) summed by (kind, model), in order of first
    appearance."""
    sums: dict[tuple[str, str], list[float]] = {}
    for u in summaries:
        acc = sums.setdefault((u.kind, u.model), [0, 0, 0, 0.0, 0])
        acc[0] += u.calls
        acc[1] += u.tokens_in
        acc[2] += u.tokens_out
        acc[3] += u.seconds
        acc[4] += u.tokens_cached
    return [
        UsageSummary(
            kind=kind,
            model=model,
            calls=int(c),
            tokens_in=int(i),
            tokens_out=int(o),
            seconds=sec,
            tokens_cached=int(cached),
        )
        for (kind, model), (c, i, o, sec, cached) in sums.items()
    ]


_collector: ContextVar[list[UsageRecord] | None] = ContextVar("fadeway_usage", default=None)


def record(
    kind: str,
    model: str,
    tokens_in: int,
    tokens_out: int,
    seconds: float,
    tokens_cached: int = 0,
) -> None:
    """Record one model call where a `collecting()` block is listening (else nowhere)."""
    collector = _collector.get()
    if collector is not None:
        collector.append(
            UsageRecord(
                kind=kind,
                model=model,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                seconds=seconds,
                tokens_cached=tokens_cached,
            )
        )


@contextmanager
def collecting() -> Iterator[list[UsageRecord]]:
    """Collect the usage recorded inside the block (by this context and the tasks it starts)."""
    collected: list[UsageRecord] = []
    token = _collector.set(collected)
    try:
        yield collected
    finally:
        _collector.reset(token)
