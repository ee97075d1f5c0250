"""Reciprocal rank fusion through the binding `fadeway._core.rrf` (issue 5, item 4).

The kernel is kept equal to its slow twin `reference.rrf_reference`, exactly rather than within a
tolerance, and its promises are checked directly: the order of the lists (with their weights)
does not change the result, and ties go to the best rank, then the smaller id.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference
from fadeway import _core
from fadeway._constants import RRF_K

I64 = st.integers(-(2**63), 2**63 - 1)


def rrf(
    lists: list[list[int]], weights: list[float], k: float, limit: int
) -> tuple[list[int], list[float]]:
    offsets = np.cumsum([0, *map(len, lists)], dtype=np.int64)
    ids = np.array([i for ranked in lists for i in ranked], dtype=np.int64)
    out_ids, out_scores = _core.rrf(offsets, ids, np.asarray(weights, dtype=np.float64), k, limit)
    assert out_ids.dtype == np.int64 and out_ids.ndim == 1
    assert out_scores.dtype == np.float64 and out_scores.shape == out_ids.shape
    return out_ids.tolist(), out_scores.tolist()


@st.composite
def fusions(draw: st.DrawFn, weights: st.SearchStrategy[float] | None = None):
    """Ranked lists of a few distinct ids (so ids repeat across and within lists, and scores
    tie), a weight per list, a rank constant and a limit."""
    ids = st.integers(-3, 12) | I64
    n = draw(st.integers(0, 6))
    lists = draw(st.lists(st.lists(ids, max_size=12), min_size=n, max_size=n))
    weight = weights if weights is not None else st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.0, 3.0])
    list_weights = draw(st.lists(weight, min_size=n, max_size=n))
    k = draw(st.sampled_from([float(RRF_K), 1.0, 0.5, 2.0]))
    limit = draw(st.integers(0, 30))
    return lists, list_weights, k, limit


@given(fusions())
@settings(max_examples=500)
def test_equals_the_reference(case):
    assert rrf(*case) == reference.rrf_reference(*case)


@given(
    fusions(st.floats(min_value=0.0, allow_infinity=False, allow_nan=False)),
    st.floats(min_value=1e-300, allow_infinity=False, allow_nan=False),
)
@settings(max_examples=300)
def test_equals_the_reference_on_any_weights_and_k(case, k):
    lists, weights, _, limit = case
    assert rrf(lists, weights, k, limit) == reference.rrf_reference(lists, weights, k, limit)


@given(fusions(st.floats(min_value=0.0, max_value=1e6, allow_nan=False)), st.randoms())
@settings(max_examples=300)
def test_the_order_of_the_lists_does_not_matter(case, random):
    lists, weights, k, limit = case
    pairs = list(zip(lists, weights, strict=True))
    random.shuffle(pairs)
    shuffled = [ranked for ranked, _ in pairs]
    shuffled_weights = [w for _, w in pairs]
    ids, scores = rrf(lists, weights, k, limit)
    again_ids, again_scores = rrf(shuffled, shuffled_weights, k, limit)
    assert ids == again_ids
    # Bit for bit: the floats compare equal and no -0.0 differs from a 0.0.
    assert [s.hex() for s in scores] == [s.hex() for s in again_scores]


@given(fusions())
@settings(max_examples=300)
def test_a_limit_cuts_the_tail_of_the_full_ranking(case):
    lists, weights, k, limit = case
    all_ids, all_scores = rrf(lists, weights, k, 2**40)
    assert sorted(all_ids) == sorted({i for ranked in lists for i in ranked})
    assert all_scores == sorted(all_scores, reverse=True)
    assert rrf(lists, weights, k, limit) == (all_ids[:limit], all_scores[:limit])


@pytest.mark.parametrize(
    ("lists", "weights", "k", "limit", "ids", "scores"),
    [
        ([], [], RRF_K, 5, [], []),
        ([[], []], [1.0, 1.0], RRF_K, 5, [], []),
        # 3: 1/3 + 2/2; 9: 2/3; 7: 1/2; 5: 1/4
        ([[7, 3, 5], [3, 9]], [1.0, 2.0], 1.0, 10, [3, 9, 7, 5], [1 / 3 + 1.0, 2 / 3, 0.5, 0.25]),
        # equal scores, both best rank 1: the smaller id
        ([[1, 2], [2, 1]], [1.0, 1.0], RRF_K, 10, [1, 2], [1 / 62 + 1 / 61] * 2),
        # 2, 8 and 6 all score 1/2; 2 and 8 rank first somewhere, 6 only third; 1 and 4 tie at 1/3
        (
            [[8, 1, 6], [2, 4, 6]],
            [1.0, 1.0],
            1.0,
            10,
            [2, 8, 6, 1, 4],
            [0.5, 0.5, 0.5, 1 / 3, 1 / 3],
        ),
        # a repeat counts at its first rank only
        ([[1, 1, 1, 2], [2]], [1.0, 1.0], 1.0, 10, [2, 1], [1 / 5 + 1 / 2, 1 / 2]),
        # zero weight: ranked by rank among the zeros, not by id
        ([[1], [4, 3]], [1.0, 0.0], RRF_K, 10, [1, 4, 3], [1 / 61, 0.0, 0.0]),
        ([[4, -2, 9, 0]], [1.0], RRF_K, 2, [4, -2], [1 / 61, 1 / 62]),
        ([[4, -2, 9, 0]], [1.0], RRF_K, 0, [], []),
    ],
)
def test_table(lists, weights, k, limit, ids, scores):
    assert rrf(lists, weights, k, limit) == (ids, scores)


def test_many_long_lists():
    rng = np.random.default_rng(11)
    lists = [rng.choice(100_000, size=1_000, replace=False).tolist() for _ in range(8)]
    weights = rng.random(8).tolist()
    assert rrf(lists, weights, RRF_K, 50) == reference.rrf_reference(lists, weights, RRF_K, 50)


def test_readonly_arrays_and_threads():
    offsets = np.array([0, 3, 6], dtype=np.int64)
    ids = np.array([5, 1, 2, 2, 7, 5], dtype=np.int64)
    weights = np.array([1.0, 0.5])
    for array in (offsets, ids, weights):
        array.flags.writeable = False
    want = _core.rrf(offsets, ids, weights, RRF_K, 10)
    results: list[tuple[np.ndarray, np.ndarray]] = []
    threads = [
        threading.Thread(target=lambda: results.append(_core.rrf(offsets, ids, weights, 60.0, 10)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    assert all(np.array_equal(i, want[0]) and np.array_equal(s, want[1]) for i, s in results)


OFFSETS = np.array([0, 2, 3], dtype=np.int64)
IDS = np.array([1, 2, 3], dtype=np.int64)
WEIGHTS = np.array([1.0, 1.0])


@pytest.mark.parametrize(
    ("offsets", "ids", "weights", "k", "limit", "error", "match"),
    [
        (OFFSETS.astype(np.int32), IDS, WEIGHTS, 60.0, 5, TypeError, "offsets must be .* int64"),
        (OFFSETS, IDS.astype(np.uint64), WEIGHTS, 60.0, 5, TypeError, "ids must be .* uint64"),
        (OFFSETS, [1, 2, 3], WEIGHTS, 60.0, 5, TypeError, "ids must be a 1-D numpy array"),
        (
            OFFSETS,
            IDS,
            WEIGHTS.astype(np.float32),
            60.0,
            5,
            TypeError,
            "weights must be .* float64",
        ),
        (OFFSETS, IDS.reshape(3, 1), WEIGHTS, 60.0, 5, TypeError, "ids must be .* 2-D array"),
        (OFFSETS, np.arange(6)[::2], WEIGHTS, 60.0, 5, TypeError, "ids must be a C-contiguous"),
        (np.array([], dtype=np.int64), IDS, np.array([]), 60.0, 5, ValueError, "offsets is empty"),
        (np.array([1, 3]), IDS, np.array([1.0]), 60.0, 5, ValueError, r"offsets\[0\] is 1"),
        (np.array([0, 3, 2]), IDS, WEIGHTS, 60.0, 5, ValueError, "non-decreasing"),
        (np.array([0, 2]), IDS, np.array([1.0]), 60.0, 5, ValueError, "ends at 2 but there are 3"),
        (OFFSETS, IDS, np.array([1.0]), 60.0, 5, ValueError, "one weight per list"),
        (OFFSETS, IDS, np.array([1.0, -0.5]), 60.0, 5, ValueError, r"weights\[1\] is -0.5"),
        (OFFSETS, IDS, np.array([np.nan, 1.0]), 60.0, 5, ValueError, r"weights\[0\] is NaN"),
        (OFFSETS, IDS, np.array([np.inf, 1.0]), 60.0, 5, ValueError, "finite and >= 0"),
        (OFFSETS, IDS, WEIGHTS, 0.0, 5, ValueError, "k is 0"),
        (OFFSETS, IDS, WEIGHTS, -60.0, 5, ValueError, "k is -60"),
        (OFFSETS, IDS, WEIGHTS, float("nan"), 5, ValueError, "k is NaN"),
        (OFFSETS, IDS, WEIGHTS, 60.0, -1, ValueError, "limit is -1"),
    ],
)
def test_errors(offsets, ids, weights, k, limit, error, match):
    with pytest.raises(error, match=match):
        _core.rrf(offsets, ids, weights, k, limit)
