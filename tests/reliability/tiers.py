"""The tiers of the reliability suite: each harness is parametrized by `TIERS`, the quick one
running in the normal test command and the long one only under FADEWAY_RELIABILITY=long."""

from __future__ import annotations

import os

import pytest

#: "quick" (the default, in every test run) or "long" (FADEWAY_RELIABILITY=long).
TIER = os.environ.get("FADEWAY_RELIABILITY", "quick")
if TIER not in ("quick", "long"):
    raise pytest.UsageError(f"FADEWAY_RELIABILITY is {TIER!r}; allowed are quick and long")

TIERS = [
    pytest.param(
        "quick", marks=pytest.mark.skipif(TIER == "long", reason="the long tier runs instead")
    ),
    pytest.param(
        "long",
        marks=pytest.mark.skipif(
            TIER != "long",
            reason="the long tier: FADEWAY_RELIABILITY=long pytest -s tests/reliability",
        ),
    ),
]


def figure(text: str) -> None:
    """Print a harness's figure on a line of its own (shown by `pytest -s`)."""
    print(f"\n[reliability] {text}", flush=True)


def scaled(tier: str, quick: int, long: int) -> int:
    """The count a harness runs in `tier`."""
    return quick if tier == "quick" else long
