"""`fadeway usage`: what a memory's own model calls cost (judge, note writer, embedder), by kind
and model, with a cost column when the user gives prices per million tokens.

A prices file is TOML, one table per model: `["gpt-4.1-mini"]` with `input = 0.40` and
`output = 1.60` (dollars per million tokens; `output` may be left out, as for an embedding model),
and `cached_input = 0.10` for the input tokens a provider serves from its prompt cache (left out,
they cost what other input tokens cost).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import MemoryNotFoundError, UsageError
from ..store import Store
from ..usage import UsageSummary, sum_usage, summarise_usage

__all__ = [
    "NO_CALLS",
    "Price",
    "Prices",
    "combine",
    "memory_usage",
    "parked_jobs",
    "read_prices",
    "render_usage",
    "usage_view",
]


class Price(NamedTuple):
    """One model's dollars per million tokens: read, written, and read from the provider's
    prompt cache."""

    input: float
    output: float
    cached_input: float

    def cost(self, tokens_in: int, tokens_out: int, tokens_cached: int) -> float:
        """Dollars for these tokens (`tokens_cached` are some of `tokens_in`)."""
        fresh = tokens_in - tokens_cached
        return (
            fresh * self.input + tokens_cached * self.cached_input + tokens_out * self.output
        ) / 1e6


#: model -> its price.
Prices = dict[str, Price]
_PRICE_KEYS = ("input", "output", "cached_input")

_NO_COST = "—"

#: What a memory without recorded model calls shows for its usage.
NO_CALLS = "no model calls recorded (an offline judge, note writer or embedder makes none)"


def read_prices(path: str | Path) -> Prices:
    """The prices in the TOML file at `path`; a file that is not one is a `UsageError`."""
    where = f"--prices {path}"
    try:
        with open(path, "rb") as fp:
            doc = tomllib.load(fp)
    except OSError as exc:
        raise UsageError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where}: not TOML: {exc}") from None
    prices: Prices = {}
    for model, entry in doc.items():
        if not isinstance(entry, dict):
            raise UsageError(
                f'{where}: {model!r} must be a table, e.g. ["{model}"] with input = 0.40 '
                "and output = 1.60 (dollars per million tokens)"
            )
        unknown = sorted(set(entry) - set(_PRICE_KEYS))
        if unknown:
            raise UsageError(
                f"{where}: {model!r} has unknown keys {unknown}; allowed are input, output and "
                'cached_input (quote a model name that holds dots: ["gpt-4.1"])'
            )
        if "input" not in entry:
            raise UsageError(f"{where}: {model!r} has no input price")
        given = {key: _price(entry[key], f"{where}: {model!r} {key}") for key in entry}
        prices[model] = Price(
            given["input"], given.get("output", 0.0), given.get("cached_input", given["input"])
        )
    return prices


def _price(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{where} must be a number of dollars per million tokens, not {value!r}")
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{where} must be a finite number not below 0, not {value!r}")
    return float(value)


def memory_usage(store: Store, memory_id: str) -> list[UsageSummary]:
    """The memory's model calls summed by kind and model; raises if the store lacks it."""
    with store.read(memory_id) as tx:
        if tx.memory() is None:
            raise MemoryNotFoundError(f"the store holds no memory {memory_id!r}")
        rows = tx.usage()
    return summarise_usage(rows)


def parked_jobs(store: Store, memory_id: str) -> int:
    """How many of the memory's lane jobs failed and are parked (their calls are in the usage)."""
    with store.read(memory_id) as tx:
        return len(tx.jobs("failed"))


def combine(summaries: Iterable[UsageSummary]) -> list[UsageSummary]:
    """Summaries (of several memories) summed by kind and model, sorted by both."""
    return sorted(sum_usage(summaries), key=lambda s: (s.kind, s.model))


def usage_view(rows: list[UsageSummary], prices: Prices | None = None) -> dict[str, Any]:
    """`rows` and their total as plain JSON values (`tokens_cached`: of the tokens read, those
    served from the provider's prompt cache); with `prices`, each row's cost in dollars (None for
    a model without a price), the total of those priced, and the unpriced models."""
    rows = combine(rows)
    out: list[dict[str, Any]] = [
        {
            "kind": r.kind,
            "model": r.model,
            "calls": r.calls,
            "tokens_in": r.tokens_in,
            "tokens_cached": r.tokens_cached,
            "tokens_out": r.tokens_out,
            "seconds": r.seconds,
        }
        for r in rows
    ]
    total: dict[str, Any] = {
        key: sum(r[key] for r in out)
        for key in ("calls", "tokens_in", "tokens_cached", "tokens_out", "seconds")
    }
    view: dict[str, Any] = {"rows": out, "total": total}
    if prices is not None:
        for r in out:
            price = prices.get(r["model"])
            r["cost"] = (
                None
                if price is None
                else price.cost(r["tokens_in"], r["tokens_out"], r["tokens_cached"])
            )
        total["cost"] = sum(r["cost"] for r in out if r["cost"] is not None)
        view["unpriced"] = sorted({r["model"] for r in out if r["cost"] is None})
    return view


def render_usage(view: dict[str, Any], indent: str = "") -> str:
    """The usage view as a table for a terminal (a cost column when it holds costs)."""
    if not view["rows"]:
        return indent + NO_CALLS
    priced = "cost" in view["total"]
    head = (
        f"{'kind':<20} {'model':<24} {'calls':>7} {'tokens in':>12} {'cached':>11} "
        f"{'tokens out':>11} {'seconds':>9}" + (f" {'cost':>11}" if priced else "")
    )

    def line(kind: str, model: str, r: dict[str, Any]) -> str:
        text = (
            f"{kind[:20]:<20} {model[:24]:<24} {r['calls']:>7,} {r['tokens_in']:>12,} "
            f"{r['tokens_cached']:>11,} {r['tokens_out']:>11,} {r['seconds']:>9.1f}"
        )
        if priced:
            cost = _NO_COST if r["cost"] is None else f"${r['cost']:,.4f}"
            text += f" {cost:>11}"
        return indent + text

    lines = [indent + head, indent + "-" * len(head)]
    lines += [line(r["kind"], r["model"], r) for r in view["rows"]]
    lines += [indent + "-" * len(head), line("total", "", view["total"])]
    if view.get("unpriced"):
        lines.append(
            f"{indent}no price for {', '.join(view['unpriced'])}: "
            "the total cost leaves those calls out"
        )
    return "\n".join(lines)
