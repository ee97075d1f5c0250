"""Boundary-rank splitting through the binding `fadeway._core.split_episodes` (spec "Episodes").

The kernel is kept equal to its slow twin `reference.split_reference`, and the spec's promises
are checked on the cuts directly: whole units, every episode fits or is one unit, every cut
leaves both sides of its stretch at least `min_size` where some cut could, and only the order of
the scores matters.
"""

from __future__ import annotations

import functools
import itertools
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference
from fadeway import _core
from fadeway.episodes.cut import split_by_size


def split(sizes: list[int], scores: list[float], min_size: int, max_size: int) -> list[int]:
    cuts = _core.split_episodes(
        np.asarray(sizes, dtype=np.int64), np.asarray(scores, dtype=np.float64), min_size, max_size
    )
    assert cuts.dtype == np.int64 and cuts.ndim == 1
    return cuts.tolist()


@st.composite
def conversations(draw: st.DrawFn, scores: st.SearchStrategy[float] | None = None):
    """Unit sizes (zeros and oversized units included), boundary scores, and 0 < min <= max.

    Scores default to a few integers so that ties are common; integers also keep `3x + 1` and
    `x ** 3` exact.
    """
    n = draw(st.integers(0, 40))
    sizes = draw(st.lists(st.integers(0, 30) | st.integers(0, 300), min_size=n, max_size=n))
    scores_strategy = scores if scores is not None else st.integers(0, 8).map(float)
    boundaries = draw(st.lists(scores_strategy, min_size=max(n - 1, 0), max_size=max(n - 1, 0)))
    min_size = draw(st.integers(1, 60))
    max_size = min_size + draw(st.integers(0, 120))
    return sizes, boundaries, min_size, max_size


def decomposes(sizes: list[int], cuts: list[int], min_size: int, max_size: int) -> bool:
    """Whether the cuts can come from splitting by the rule's sizes: a stretch that fits holds no
    cut; one that does not is cut somewhere that leaves both sides >= min_size whenever any
    boundary could, and both sides decompose the same way."""

    @functools.cache
    def ok(a: int, b: int) -> bool:
        inside = [c for c in cuts if a < c < b]
        if b - a < 2 or sum(sizes[a:b]) <= max_size:
            return not inside

        def both_big(c: int) -> bool:
            return sum(sizes[a:c]) >= min_size and sum(sizes[c:b]) >= min_size

        some_could = any(both_big(c) for c in range(a + 1, b))
        return any((not some_could or both_big(c)) and ok(a, c) and ok(c, b) for c in inside)

    return ok(0, len(sizes))


@given(conversations())
@settings(max_examples=500)
def test_equals_the_reference(case):
    assert split(*case) == reference.split_reference(*case)


@given(
    conversations(
        st.floats(allow_nan=False, allow_infinity=True) | st.sampled_from([0.0, -0.0, 1.0])
    )
)
@settings(max_examples=300)
def test_equals_the_reference_on_any_floats(case):
    assert split(*case) == reference.split_reference(*case)


@given(conversations())
@settings(max_examples=300)
def test_cuts_are_whole_units_and_every_episode_fits(case):
    sizes, _, _, max_size = case
    cuts = split(*case)
    assert all(0 < c < len(sizes) for c in cuts)
    assert cuts == sorted(set(cuts))
    bounds = [0, *cuts, len(sizes)]
    for a, b in itertools.pairwise(bounds):
        assert b - a == 1 or sum(sizes[a:b]) <= max_size, (a, b)


@given(conversations())
@settings(max_examples=300)
def test_every_cut_leaves_both_sides_big_enough_where_some_cut_could(case):
    sizes, _, min_size, max_size = case
    assert decomposes(sizes, split(*case), min_size, max_size)


@given(conversations())
@settings(max_examples=300)
def test_only_the_order_of_scores_matters(case):
    sizes, scores, min_size, max_size = case
    cuts = split(*case)
    assert split(sizes, [3 * x + 1 for x in scores], min_size, max_size) == cuts
    assert split(sizes, [x**3 for x in scores], min_size, max_size) == cuts


@given(conversations())
@settings(max_examples=200)
def test_only_the_ratio_of_sizes_to_the_limits_matters(case):
    # Scaled past 2**32 tokens in total, so the kernel's wide prefix sums are exercised too.
    sizes, scores, min_size, max_size = case
    scale = 2**33
    scaled = split([s * scale for s in sizes], scores, min_size * scale, max_size * scale)
    assert scaled == split(*case)


@pytest.mark.parametrize(
    ("sizes", "scores", "min_size", "max_size", "cuts"),
    [
        pytest.param([], [], 1, 10, [], id="empty"),
        pytest.param([50], [], 1, 10, [], id="one oversized unit"),
        pytest.param([3, 3, 3], [0.0, 9.0], 1, 10, [], id="all fit"),
        pytest.param([4, 4, 4, 4], [0.1, 0.9, 0.5], 1, 10, [2], id="best boundary"),
        pytest.param([2, 30, 2], [0.0, 0.0], 1, 10, [1, 2], id="oversized unit alone"),
        pytest.param([4, 4, 4, 4], [0.5, 0.5, 0.5], 1, 10, [1, 2], id="ties to the earliest"),
        pytest.param([4, 4, 4, 4], [0.9, 0.1, 0.5], 5, 10, [2], id="min rules out the edge"),
        pytest.param([4, 4, 4, 4], [0.9, 0.1, 0.8], 9, 10, [2], id="fallback: largest side"),
        pytest.param([4, 0, 4], [0.1, 0.2], 6, 6, [2], id="fallback tie: highest score"),
    ],
)
def test_table(sizes, scores, min_size, max_size, cuts):
    assert split(sizes, scores, min_size, max_size) == cuts
    assert reference.split_reference(sizes, scores, min_size, max_size) == cuts


def test_a_long_conversation():
    rng = np.random.default_rng(7)
    n = 200_000
    sizes = np.maximum(np.rint(rng.lognormal(np.log(150), 0.8, n)), 1).astype(np.int64)
    scores = rng.random(n - 1)
    cuts = _core.split_episodes(sizes, scores, 400, 4000)
    bounds = np.concatenate(([0], cuts, [n]))
    prefix = np.concatenate(([0], np.cumsum(sizes)))
    totals = prefix[bounds[1:]] - prefix[bounds[:-1]]
    assert np.all(np.diff(bounds) > 0)
    assert np.all((totals <= 4000) | (np.diff(bounds) == 1))


def test_readonly_arrays_and_threads():
    sizes = np.full(10_000, 100, dtype=np.int64)
    sizes.flags.writeable = False
    scores = np.linspace(0.0, 1.0, 9_999)
    scores.flags.writeable = False
    want = _core.split_episodes(sizes, scores, 400, 4000)
    results: list[np.ndarray] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(_core.split_episodes(sizes, scores, 400, 4000))
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(np.array_equal(r, want) for r in results)


SIZES = np.array([4, 4, 4], dtype=np.int64)
SCORES = np.array([0.5, 0.5])


@pytest.mark.parametrize(
    ("sizes", "scores", "min_size", "max_size", "error", "match"),
    [
        (np.array([4, -1, 4]), SCORES, 1, 10, ValueError, r"sizes\[1\] is -1"),
        (SIZES.astype(np.int32), SCORES, 1, 10, TypeError, "sizes must be .* int64, got .* int32"),
        ([4, 4, 4], SCORES, 1, 10, TypeError, "sizes must be a 1-D numpy array"),
        (SIZES.reshape(3, 1), SCORES, 1, 10, TypeError, "sizes must be .* got a 2-D array"),
        (SIZES, SCORES.astype(np.float32), 1, 10, TypeError, "scores must be .* float64"),
        (
            np.arange(6, dtype=np.int64)[::2],
            SCORES,
            1,
            10,
            TypeError,
            "sizes must be a C-contiguous",
        ),
        (SIZES, np.array([0.5]), 1, 10, ValueError, "scores has 1 entries but 3 units"),
        (SIZES, np.array([0.5, np.nan]), 1, 10, ValueError, r"scores\[1\] is NaN"),
        (SIZES, SCORES, 0, 10, ValueError, "0 < min_size <= max_size"),
        (SIZES, SCORES, 11, 10, ValueError, "0 < min_size <= max_size"),
        (SIZES, SCORES, -1, 10, ValueError, "min_size is -1"),
        (SIZES, SCORES, 1, -10, ValueError, "max_size is -10"),
        (np.array([2**62, 2**62, 2**62, 2**62]), np.zeros(3), 1, 10, ValueError, "add up to"),
    ],
)
def test_errors(sizes, scores, min_size, max_size, error, match):
    with pytest.raises(error, match=match):
        _core.split_episodes(sizes, scores, min_size, max_size)


@settings(max_examples=300, deadline=None)
@given(conversations())
def test_with_no_judgment_episodes_are_as_large_as_they_may_be(case):
    sizes, _, min_size, max_size = case
    cuts = split_by_size(sizes, min_size, max_size)
    bounds = [0, *cuts, len(sizes)]
    pieces = [sizes[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    assert cuts == sorted(set(cuts)) and all(0 < c < len(sizes) for c in cuts)
    assert all(sum(p) <= max_size or len(p) == 1 for p in pieces)
    # Every episode but the last two took units while the next one fit: none was cut smaller.
    for piece, following in zip(pieces[:-2], pieces[1:-1], strict=False):
        assert sum(piece) + following[0] > max_size
    if len(pieces) >= 2 and sum(pieces[-1]) < min_size:
        # A last episode under the minimum only where no cut of the last two could mend it.
        both = pieces[-2] + pieces[-1]
        assert not any(min_size <= sum(both[c:]) <= max_size for c in range(1, len(both)))


def test_no_judgment_cuts_near_the_largest_size_where_flat_scores_cut_the_smallest():
    sizes = [50] * 100  # 5,000 tokens, episodes of 400 to 4,000 tokens
    bounds = [0, *split_by_size(sizes, 400, 4000), len(sizes)]
    assert [50 * (b - a) for a, b in zip(bounds, bounds[1:], strict=False)] == [4000, 1000]
    bounds = [0, *split_by_size([50] * 84, 400, 4000), 84]  # a last 200 takes from before it
    assert [50 * (b - a) for a, b in zip(bounds, bounds[1:], strict=False)] == [3800, 400]
    flat = split(sizes, [0.0] * 99, 400, 4000)  # what flat scores gave: the smallest episodes
    assert flat == [8, 16, 24]  # 400, 400, 400 and 3,800 tokens
