"""Boundary-rank splitting through the binding, next to its numpy-assisted Python peer.

Run: python -m pytest benches/bench_split.py --benchmark-enable
Goal: at most 20 ns per unit (100k units in under 2 ms) and at least 50x the numpy version;
`benches/compare_split.py` prints the ratios and writes `benches/RESULTS-split.md`.
"""

from __future__ import annotations

import pytest
from compare_split import MAX_SIZE, MIN_SIZE, conversation, split_numpy

from fadeway import _core


@pytest.mark.parametrize("units", [100_000, 1_000_000])
def test_split_episodes(benchmark, units):
    sizes, scores = conversation(units)
    cuts = _core.split_episodes(sizes, scores, MIN_SIZE, MAX_SIZE)
    assert cuts.tolist() == split_numpy(sizes, scores, MIN_SIZE, MAX_SIZE)
    result = benchmark(_core.split_episodes, sizes, scores, MIN_SIZE, MAX_SIZE)
    assert (result == cuts).all()


def test_split_numpy_peer(benchmark):
    sizes, scores = conversation(100_000)
    want = _core.split_episodes(sizes, scores, MIN_SIZE, MAX_SIZE).tolist()
    result = benchmark.pedantic(
        split_numpy, args=(sizes, scores, MIN_SIZE, MAX_SIZE), rounds=3, iterations=1
    )
    assert result == want


@pytest.mark.parametrize("units", [0, 10, 1_000])
def test_split_episodes_call_overhead(benchmark, units):
    # Small conversations are the common case: what crossing the boundary costs.
    sizes, scores = conversation(units)
    result = benchmark(_core.split_episodes, sizes, scores, MIN_SIZE, MAX_SIZE)
    assert result.tolist() == split_numpy(sizes, scores, MIN_SIZE, MAX_SIZE)
