"""Activation and the fade through the bindings, next to their numpy peers.

Run: python -m pytest benches/bench_activation.py --benchmark-enable
Goals (the issue): activation at most 1 ns per trace grouped by episode and 2 ns in log order;
the fade's order at most 2 ns per episode; a whole fade decision on 10,000 episodes x 20 traces
under 1 ms. `benches/compare_activation.py` measures all of them against numpy and pure Python in
one run and writes `benches/RESULTS-activation.md`.
"""

from __future__ import annotations

import numpy as np
import pytest
from compare_activation import (
    NOW,
    activation_bincount,
    activation_reduceat,
    decision_memory,
    episode_activations,
    fade_numpy,
    in_log_order,
    trace_log,
)

from fadeway import _core

RELATIVE = 1e-12


@pytest.mark.parametrize("traces", [100_000, 1_000_000])
def test_activation_grouped(benchmark, traces):
    offsets, at, score = trace_log(traces)
    want = activation_reduceat(offsets, at, score, NOW)
    result = benchmark(_core.activation, offsets, at, score, NOW)
    assert np.allclose(result, want, rtol=RELATIVE, atol=0)


@pytest.mark.parametrize("traces", [100_000, 1_000_000])
def test_activation_log_order(benchmark, traces):
    offsets, at, score = trace_log(traces)
    group, at_log, score_log = in_log_order(offsets, at, score)
    groups = len(offsets) - 1
    want = activation_reduceat(offsets, at, score, NOW)
    result = benchmark(_core.activation_log_order, group, at_log, score_log, NOW, groups)
    assert np.allclose(result, want, rtol=RELATIVE, atol=0)


def test_activation_numpy_reduceat_peer(benchmark):
    offsets, at, score = trace_log(100_000)
    want = _core.activation(offsets, at, score, NOW)
    result = benchmark(activation_reduceat, offsets, at, score, NOW)
    assert np.allclose(result, want, rtol=RELATIVE, atol=0)


def test_activation_numpy_bincount_peer(benchmark):
    offsets, at, score = trace_log(100_000)
    group, at_log, score_log = in_log_order(offsets, at, score)
    want = _core.activation(offsets, at, score, NOW)
    result = benchmark(activation_bincount, group, at_log, score_log, NOW, len(offsets) - 1)
    assert np.allclose(result, want, rtol=RELATIVE, atol=0)


@pytest.mark.parametrize("episodes", [100_000, 1_000_000])
def test_fade_order(benchmark, episodes):
    activation = episode_activations(episodes)
    tie = np.arange(episodes, dtype=np.int64)
    want = np.lexsort((tie, activation))
    result = benchmark(_core.fade_order, activation, tie)
    assert np.array_equal(result, want)


def test_fade_order_numpy_lexsort_peer(benchmark):
    activation = episode_activations(100_000)
    tie = np.arange(len(activation), dtype=np.int64)
    want = _core.fade_order(activation, tie)
    result = benchmark(np.lexsort, (tie, activation))
    assert np.array_equal(result, want)


def test_fade_decision(benchmark):
    offsets, at, score, tie, sizes, view, landing = decision_memory()

    def decide() -> np.ndarray:
        return _core.fade(_core.activation(offsets, at, score, NOW), tie, sizes, view, landing)

    want = fade_numpy(activation_reduceat(offsets, at, score, NOW), tie, sizes, view, landing)
    assert len(want) > 0
    result = benchmark(decide)
    assert np.array_equal(result, want)


@pytest.mark.parametrize("episodes", [0, 10, 1_000])
def test_call_overhead(benchmark, episodes):
    # Small memories are the common case: what crossing the boundary costs.
    offsets = np.arange(0, 20 * episodes + 1, 20, dtype=np.int64)
    at = np.full(20 * episodes, NOW - 3600.0)
    score = np.ones(20 * episodes)
    result = benchmark(_core.activation, offsets, at, score, NOW)
    assert np.allclose(result, 20 / np.sqrt(60.0), rtol=RELATIVE, atol=0)
