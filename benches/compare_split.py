"""Boundary-rank splitting: fadeway's Rust kernel against pure Python and numpy, in one run.

    python benches/compare_split.py [--units 100000 1000000] [--out benches/RESULTS-split.md]

Three implementations of the same rule (spec "Episodes"; `reference.split_reference` is the
literal, quadratic twin used by the tests):

- `fadeway._core.split_episodes`: prefix sums, a blocked range-maximum structure, O(log n) a cut.
- `split_python`: what one writes in plain Python: `itertools.accumulate` prefix sums, `bisect`
  for the sizes, `max` over the allowed boundaries, a stack.
- `split_numpy`: the same loop with `np.cumsum`, `np.searchsorted` and `np.argmax` on slices.

The data is generated from a fixed seed: log-normal token sizes around 150 and uniform random
scores, min 400, max 4000. The script checks that all three return the same cuts before it times
anything; each figure is the best of several calls on one thread.
"""

from __future__ import annotations

import argparse
import bisect
import datetime
import itertools
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from fadeway import _core

SEED = 20260
MEDIAN_UNIT_TOKENS = 150
UNIT_TOKENS_SIGMA = 0.8
MIN_SIZE = 400
MAX_SIZE = 4000
DEFAULT_UNITS = (100_000, 1_000_000)
RUST_REPEATS = 30
NUMPY_REPEATS = 5
PYTHON_REPEATS = 2


def conversation(n: int, seed: int = SEED) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Realistic unit sizes (log-normal token counts, at least 1) and random boundary scores."""
    rng = np.random.default_rng(seed)
    sizes = rng.lognormal(np.log(MEDIAN_UNIT_TOKENS), UNIT_TOKENS_SIGMA, n)
    return np.maximum(np.rint(sizes), 1).astype(np.int64), rng.random(max(n - 1, 0))


def split_python(sizes: list[int], scores: list[float], min_size: int, max_size: int) -> list[int]:
    """The rule in plain Python: prefix sums and bisect for the sizes, max over the allowed
    boundaries for the scores, an explicit stack."""
    prefix = [0, *itertools.accumulate(sizes)]
    cuts: list[int] = []
    stack = [(0, len(sizes))]
    while stack:
        a, b = stack.pop()
        if b - a < 2 or prefix[b] - prefix[a] <= max_size:
            if a > 0:
                cuts.append(a)
            continue
        lo = max(bisect.bisect_left(prefix, prefix[a] + min_size, a + 1, b), a + 1)
        hi = min(bisect.bisect_right(prefix, prefix[b] - min_size, a + 1, b) - 1, b - 1)
        if lo > hi:
            # No boundary leaves both sides big enough: where is the smaller side largest?
            best = max(min(prefix[c] - prefix[a], prefix[b] - prefix[c]) for c in range(a + 1, b))
            lo = bisect.bisect_left(prefix, prefix[a] + best, a + 1, b)
            hi = bisect.bisect_right(prefix, prefix[b] - best, a + 1, b) - 1
        cut = max(range(lo, hi + 1), key=lambda c: (scores[c - 1], -c))
        stack.append((cut, b))
        stack.append((a, cut))
    return cuts


def split_numpy(
    sizes: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], min_size: int, max_size: int
) -> list[int]:
    """The same loop with numpy doing the searching: np.cumsum, np.searchsorted, np.argmax."""
    prefix = np.concatenate(([0], np.cumsum(sizes)))
    cuts: list[int] = []
    stack = [(0, len(sizes))]
    while stack:
        a, b = stack.pop()
        pa, pb = int(prefix[a]), int(prefix[b])
        if b - a < 2 or pb - pa <= max_size:
            if a > 0:
                cuts.append(a)
            continue
        lo = max(int(np.searchsorted(prefix, pa + min_size, "left")), a + 1)
        hi = min(int(np.searchsorted(prefix, pb - min_size, "right")) - 1, b - 1)
        if lo > hi:
            inner = prefix[a + 1 : b]
            best = int(np.minimum(inner - pa, pb - inner).max())
            lo = max(int(np.searchsorted(prefix, pa + best, "left")), a + 1)
            hi = min(int(np.searchsorted(prefix, pb - best, "right")) - 1, b - 1)
        # np.argmax returns the first maximum: ties go to the earliest boundary.
        cut = lo + int(np.argmax(scores[lo - 1 : hi]))
        stack.append((cut, b))
        stack.append((a, cut))
    return cuts


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def measure(n: int) -> list[tuple[str, ...]]:
    sizes, scores = conversation(n)
    sizes_list, scores_list = sizes.tolist(), scores.tolist()
    cuts = _core.split_episodes(sizes, scores, MIN_SIZE, MAX_SIZE).tolist()
    assert cuts == split_numpy(sizes, scores, MIN_SIZE, MAX_SIZE)
    assert cuts == split_python(sizes_list, scores_list, MIN_SIZE, MAX_SIZE)

    times = {
        "fadeway (Rust)": best_seconds(
            lambda: _core.split_episodes(sizes, scores, MIN_SIZE, MAX_SIZE), RUST_REPEATS
        ),
        "numpy-assisted Python": best_seconds(
            lambda: split_numpy(sizes, scores, MIN_SIZE, MAX_SIZE), NUMPY_REPEATS
        ),
        "pure Python": best_seconds(
            lambda: split_python(sizes_list, scores_list, MIN_SIZE, MAX_SIZE), PYTHON_REPEATS
        ),
    }
    rust = times["fadeway (Rust)"]
    return [
        (
            f"{n:,}",
            name,
            f"{len(cuts):,}",
            f"{t * 1e3:.2f}",
            f"{t * 1e9 / n:.1f}",
            f"{t / rust:.0f}x",
        )
        for name, t in times.items()
    ]


def markdown_table(rows: list[tuple[str, ...]]) -> str:
    header = ("units", "implementation", "cuts", "ms / call", "ns / unit", "time vs Rust")
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--units", type=int, nargs="+", default=list(DEFAULT_UNITS))
    parser.add_argument("--out", type=Path, help="also write the table to this markdown file")
    args = parser.parse_args()

    rows = [row for n in args.units for row in measure(n)]
    table = markdown_table(rows)
    print(table)
    if args.out:
        today = datetime.date.today().isoformat()
        args.out.write_text(
            "# Boundary-rank splitting: measured\n\n"
            f"Command: `python benches/compare_split.py --out {args.out}`  \n"
            f"Date: {today}; Python {platform.python_version()}, numpy {np.__version__}, "
            f"{platform.machine()}, 2 cores shared with other work (load average "
            f"{os.getloadavg()[0]:.1f}); one thread.  \n"
            f"Workload: log-normal unit sizes (median {MEDIAN_UNIT_TOKENS} tokens, sigma "
            f"{UNIT_TOKENS_SIGMA}), uniform random scores, min {MIN_SIZE}, max {MAX_SIZE}; "
            "all three return identical cuts (checked before timing). Best of "
            f"{RUST_REPEATS} / {NUMPY_REPEATS} / {PYTHON_REPEATS} calls.\n\n"
            f"{table}\n\n"
            "On a shared machine repeated runs vary by 10-30%, the Python figures most; the ratios "
            "above come from one run. What was tried on the Rust side, and what it measured, is "
            "the design log at the top of `rust/core/src/split.rs`.\n"
        )


if __name__ == "__main__":
    sys.exit(main())
