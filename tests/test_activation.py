"""Activation, significance and the fade through the bindings (spec "Activation",
"Significance", "Forgetting"): `fadeway._core.activation`, `significance`,
`activation_log_order`, `fade_order` (whole and its first episodes) and `fade`, and the lazy
the fade's walk down that order (`forgetting.fade_picks`).

The kernels are kept equal to their slow twins in `reference.py` (to 1e-12 of the terms'
magnitude for the sums, exactly for the order and the picks), the spec's table is reproduced, and
the fade's promises are checked on the picks directly.
"""

from __future__ import annotations

import math
import random
import threading
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference
from fadeway import _constants as C
from fadeway import _core
from fadeway.forgetting import budget as forgetting_budget
from fadeway.forgetting import fade as forgetting
from fadeway.records import EpisodeRecord

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
RELATIVE = 1e-12

Groups = list[list[tuple[float, float]]]


def csr(groups: Groups) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, at, score) arrays for traces grouped per episode."""
    offsets = np.zeros(len(groups) + 1, dtype=np.int64)
    np.cumsum([len(g) for g in groups], out=offsets[1:])
    at = np.array([a for g in groups for a, _ in g], dtype=np.float64)
    score = np.array([s for g in groups for _, s in g], dtype=np.float64)
    return offsets, at, score


def activation(groups: Groups, now: float = NOW) -> list[float]:
    result = _core.activation(*csr(groups), now)
    assert result.dtype == np.float64 and result.shape == (len(groups),)
    return result.tolist()


def weight(age_seconds: float) -> float:
    return activation([[(NOW - age_seconds, 1.0)]])[0]


def assert_close(got: list[float], want: list[float], scale: list[float]) -> None:
    """Equal to `RELATIVE` of each sum's scale: the sum of its terms' magnitudes, since a sum
    with cancellation is only as exact as its largest terms."""
    assert len(got) == len(want)
    for g, w, s in zip(got, want, scale, strict=True):
        assert abs(g - w) <= RELATIVE * s, (g, w, s)


def magnitudes(groups: Groups, now: float = NOW) -> list[float]:
    return [sum(abs(s) * reference.trace_weight_reference(now - a) for a, s in g) for g in groups]


# The spec's table: a trace's weight against its age.


@pytest.mark.parametrize(
    ("age_seconds", "shown", "decimals"),
    [
        pytest.param(0, 1, 0, id="0"),
        pytest.param(60, 1.00, 2, id="1 min"),
        pytest.param(240, 0.50, 2, id="4 min"),
        pytest.param(3600, 0.13, 2, id="1 h"),
        pytest.param(86_400, 0.026, 3, id="1 day"),
    ],
)
def test_the_spec_table(age_seconds, shown, decimals):
    assert round(weight(age_seconds), decimals) == shown


@pytest.mark.parametrize(
    ("age_seconds", "exact"),
    [
        (0, 1.0),
        (30, 1.0),
        (60, 1.0),
        (240, 0.5),
        (3600, 1 / math.sqrt(60)),
        (86_400, 1 / math.sqrt(1440)),
        (7 * 86_400, 1 / math.sqrt(7 * 1440)),
    ],
)
def test_exact_weights(age_seconds, exact):
    assert weight(age_seconds) == pytest.approx(exact, rel=1e-13, abs=0)
    assert reference.trace_weight_reference(age_seconds) == pytest.approx(exact, rel=1e-15)


def test_the_first_minute_and_the_future_count_in_full():
    for age in (0.0, 1.0, 59.5, 60.0, -1.0, -86_400.0):
        assert weight(age) == 1.0


def test_traces_sum_per_episode():
    groups = [[(NOW, 1.0), (NOW - 240, 2.0)], [], [(NOW - 3600, 1.0)]]
    assert_close(activation(groups), [2.0, 0.0, 1 / math.sqrt(60)], [2.0, 0.0, 1.0])
    assert _core.significance(*csr(groups)[::2]).tolist() == [3.0, 0.0, 1.0]


# Equal to the slow twins on random trace logs.

ages = (
    st.floats(-1e6, 3e8, allow_nan=False)
    | st.floats(-120, 120, allow_nan=False)
    | st.integers(0, 100_000).map(lambda m: 60.0 * m)
)
scores = st.floats(0, 1, allow_nan=False) | st.floats(-5, 5, allow_nan=False)
trace_logs = st.lists(
    st.lists(st.tuples(ages.map(lambda a: NOW - a), scores), max_size=40), max_size=40
)


@given(trace_logs)
@settings(max_examples=300)
def test_activation_equals_the_reference(groups):
    assert_close(
        activation(groups), reference.activation_reference(groups, NOW), magnitudes(groups)
    )


@given(trace_logs)
@settings(max_examples=300)
def test_significance_equals_the_reference(groups):
    offsets, _, score = csr(groups)
    scale = [sum(abs(s) for _, s in g) for g in groups]
    got = _core.significance(offsets, score).tolist()
    assert_close(got, reference.significance_reference(groups), scale)


@given(trace_logs, st.randoms(use_true_random=False))
@settings(max_examples=300)
def test_log_order_equals_the_reference(groups, rng):
    rows = [(g, a, s) for g, traces in enumerate(groups) for a, s in traces]
    rng.shuffle(rows)
    got = _core.activation_log_order(
        np.array([r[0] for r in rows], dtype=np.int64),
        np.array([r[1] for r in rows], dtype=np.float64),
        np.array([r[2] for r in rows], dtype=np.float64),
        NOW,
        len(groups),
    ).tolist()
    assert_close(got, reference.activation_reference(groups, NOW), magnitudes(groups))


def test_a_long_log():
    # Many blocks of the kernel, episodes straddling them, and enough traces (over 2^17) that the
    # grouped kernel splits them over threads, one episode spanning the split; both layouts agree
    # with the twin.
    rng = random.Random(4)
    groups = [
        [(NOW - 60 * 525_600 ** rng.random(), rng.random()) for _ in range(rng.randrange(0, 60))]
        for _ in range(5_000)
    ]
    groups.insert(
        2_500, [(NOW - 60 * 525_600 ** rng.random(), rng.random()) for _ in range(40_000)]
    )
    assert sum(map(len, groups)) > 2**17
    want = reference.activation_reference(groups, NOW)
    assert_close(activation(groups), want, magnitudes(groups))
    group = np.repeat(np.arange(len(groups), dtype=np.int64), [len(g) for g in groups])
    _, at, score = csr(groups)
    got = _core.activation_log_order(group, at, score, NOW, len(groups)).tolist()
    assert_close(got, want, magnitudes(groups))


# The fade: order and picks.

activations = (
    st.floats(0, 50, allow_nan=False)
    | st.sampled_from([0.0, -0.0, 0.5, 1.0, 1.0 + 1e-12, 1.0 + 2e-12])
    | st.floats(allow_nan=False)
)


@st.composite
def episodes(draw: st.DrawFn) -> tuple[list[float], list[int], list[int]]:
    n = draw(st.integers(0, 60))
    act = draw(st.lists(activations, min_size=n, max_size=n))
    tie = draw(
        st.lists(st.integers(-3, 3) | st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n)
    )
    sizes = draw(st.lists(st.integers(0, 500), min_size=n, max_size=n))
    return act, tie, sizes


def fade(act: list[float], tie: list[int], sizes: list[int], view: int, landing: int) -> list[int]:
    picked = _core.fade(
        np.array(act, dtype=np.float64),
        np.array(tie, dtype=np.int64),
        np.array(sizes, dtype=np.int64),
        view,
        landing,
    )
    assert picked.dtype == np.int64
    return picked.tolist()


@given(episodes())
@settings(max_examples=500)
def test_fade_order_equals_the_reference(case):
    act, tie, _ = case
    got = _core.fade_order(np.array(act, dtype=np.float64), np.array(tie, dtype=np.int64))
    assert got.dtype == np.int64
    assert got.tolist() == reference.fade_order_reference(act, tie)


@given(episodes(), st.integers(0, 400))
@settings(max_examples=300)
def test_fade_order_limit_is_a_prefix_of_the_reference(case, limit):
    act, tie, _ = case
    got = _core.fade_order(np.array(act, dtype=np.float64), np.array(tie, dtype=np.int64), limit)
    assert got.tolist() == reference.fade_order_reference(act, tie)[:limit]


def walk_reference(
    act: list[float],
    tie: list[int],
    history_cut: list[int],
    block_cut: list[int],
    history: int,
    block: int,
    ceiling: int,
    typical: int,
    current: int,
    fit: bool = False,
) -> list[int]:
    """The fade (forgetting/fade.py) read literally: down the order while the history is
    above the landing (and, with `fit`, above the budget: the current turn may not fit beside
    a large facts block), the landing worked out again (`forgetting.budget`) whenever the
    facts block shrinks."""
    picked: list[int] = []
    plan = forgetting_budget.budget(ceiling, block, 0, typical, current)
    for i in reference.fade_order_reference(act, tie):
        if history <= plan.landing and (not fit or history <= plan.budget):
            break
        picked.append(i)
        history -= history_cut[i]
        if block_cut[i]:
            block -= block_cut[i]
            plan = forgetting_budget.budget(ceiling, block, 0, typical, current)
    return picked


@given(st.integers(0, 3), st.integers(0, 2**32 - 1), st.integers(0, 1))
@settings(max_examples=60)
def test_fade_picks_walk_the_order_to_the_landing(shape, seed, sealed_share):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3 * C.FADE_FIRST))
    act = [rng.lognormal(0, 2, n), rng.integers(0, 4, n) * 0.5, np.linspace(1, 0, n), np.zeros(n)][
        shape
    ]
    tie = rng.integers(-3, 3, n)
    # Live episodes shrink the history; sealed ones (none, or about half) the facts block,
    # which raises the landing.
    sealed = rng.random(n) < 0.5 * sealed_share
    history_cut = np.where(sealed, 0, rng.integers(0, 400, n))
    block_cut = np.where(sealed, rng.integers(0, 300, n), 0)
    block = int(block_cut.sum()) + int(rng.integers(0, 1000))
    history = int(rng.integers(0, 2 * int(history_cut.sum()) + 2))
    ceiling, typical, current = int(rng.integers(0, 60_000)), int(rng.integers(0, 2000)), 50
    args = (history_cut, lambda order: block_cut[order], history, block)
    want = walk_reference(
        act.tolist(),
        tie.tolist(),
        history_cut.tolist(),
        block_cut.tolist(),
        history,
        block,
        ceiling,
        typical,
        current,
    )
    got = forgetting.fade_picks(
        act, tie, *args, lambda b: forgetting_budget.landing(ceiling, b, 0, typical, current)
    )
    assert got.tolist() == want
    want_fit = walk_reference(
        act.tolist(),
        tie.tolist(),
        history_cut.tolist(),
        block_cut.tolist(),
        history,
        block,
        ceiling,
        typical,
        current,
        fit=True,
    )
    got_fit = forgetting.fade_picks(
        act,
        tie,
        *args,
        lambda b: forgetting_budget.landing(ceiling, b, 0, typical, current),
        lambda b: np.maximum(0, ceiling - b),
    )
    assert got_fit.tolist() == want_fit and want_fit[: len(want)] == want
    # A fade that stops within the first prefix asks Rust for that prefix only.
    calls: list[int | None] = []
    order = _core.fade_order

    def counting(a: np.ndarray, t: np.ndarray, limit: int | None = None) -> np.ndarray:
        calls.append(limit)
        return order(a, t, limit)

    with mock.patch.object(forgetting, "fade_order", counting):
        forgetting.fade_picks(
            act, tie, *args, lambda b: forgetting_budget.landing(ceiling, b, 0, typical, current)
        )
    # The first prefix as long as the share of the history to shed suggests (and at least
    # FADE_FIRST), each next one four times as long.
    land = int(forgetting_budget.landing(ceiling, block, 0, typical, current))
    share = min(1, max(0, history - land) / history_cut.sum()) if history_cut.sum() else 0
    assert calls == [
        max(C.FADE_FIRST, math.ceil(1.25 * share * n)) * 4**k for k in range(len(calls))
    ]
    # Just enough of the order: the prefix holding the episode where the walk stopped, or the
    # whole order when every episode was picked.
    needed = len(want) + 1 if len(want) < n else n
    assert (calls[-1] >= needed and (len(calls) == 1 or calls[-2] < needed)) if n else not calls


@given(
    st.lists(st.integers(1, 6), max_size=12),
    st.dictionaries(st.integers(0, 60), st.integers(1, 500)),
    st.randoms(),
)
def test_blocks_within_sums_the_blocks_among_each_episodes_messages(lengths, blocks, rnd):
    # Episodes over consecutive seqs with gaps between some (messages in no episode), in any
    # order; blocks anywhere, inside an episode or not.
    episodes, seq = [], 0
    for n, length in enumerate(lengths, start=1):
        seq += rnd.randint(0, 2)
        episodes.append(
            EpisodeRecord(
                n=n,
                first_seq=seq,
                last_seq=seq + length - 1,
                first_turn=0,
                last_turn=0,
                start_at=0.0,
                end_at=0.0,
                tokens=1,
                cut_at=0.0,
            )
        )
        seq += length
    rnd.shuffle(episodes)
    got = forgetting.blocks_within(
        np.array([e.first_seq for e in episodes], dtype=np.int64),
        np.array([e.last_seq for e in episodes], dtype=np.int64),
        blocks,
    )
    assert got.tolist() == [
        sum(size for s, size in blocks.items() if e.first_seq <= s <= e.last_seq) for e in episodes
    ]


@given(episodes(), st.integers(0, 20_000), st.integers(0, 20_000))
@settings(max_examples=500)
def test_fade_equals_the_reference_and_keeps_its_promises(case, view, landing):
    act, tie, sizes = case
    picked = fade(act, tie, sizes, view, landing)
    assert picked == reference.fade_reference(act, tie, sizes, view, landing)
    # A prefix of the order: least active first.
    assert picked == reference.fade_order_reference(act, tie)[: len(picked)]

    def projected(k: int) -> int:
        return view - sum(sizes[e] for e in picked[:k])

    # The projected view reaches the landing unless every episode was picked ...
    assert projected(len(picked)) <= landing or len(picked) == len(act)
    # ... and no pick is spare: without the last one it would still be above the landing.
    if picked:
        assert projected(len(picked) - 1) > landing


def test_fade_table():
    act, tie, sizes = [0.9, 0.1, 0.5, 0.1], [0, 3, 2, 1], [100, 10, 50, 20]
    assert fade(act, tie, sizes, 180, 180) == []
    assert fade(act, tie, sizes, 180, 160) == [3]
    assert fade(act, tie, sizes, 180, 155) == [3, 1]
    assert fade(act, tie, sizes, 180, 120) == [3, 1, 2]
    assert fade(act, tie, sizes, 180, 0) == [3, 1, 2, 0]
    assert fade([], [], [], 10, 0) == []


def test_readonly_arrays_and_threads():
    rng = np.random.default_rng(3)
    offsets = np.arange(0, 200_001, 20, dtype=np.int64)
    at = NOW - 60 * 525_600 ** rng.random(200_000)
    score = rng.random(200_000)
    for a in (offsets, at, score):
        a.flags.writeable = False
    want = _core.activation(offsets, at, score, NOW)
    order = _core.fade_order(want, np.arange(len(want), dtype=np.int64))
    results: list[tuple[np.ndarray, np.ndarray]] = []

    def run() -> None:
        act = _core.activation(offsets, at, score, NOW)
        results.append((act, _core.fade_order(act, np.arange(len(act), dtype=np.int64))))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    assert all(np.array_equal(a, want) and np.array_equal(o, order) for a, o in results)


# Errors: the argument named, TypeError for the array's kind, ValueError for its values.

OFFSETS = np.array([0, 1, 2], dtype=np.int64)
AT = np.array([NOW, NOW - 60])
SCORE = np.array([1.0, 0.5])


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (
            (OFFSETS.astype(np.int32), AT, SCORE, NOW),
            TypeError,
            "offsets must be .* int64, got .* int32",
        ),
        (([0, 1, 2], AT, SCORE, NOW), TypeError, "offsets must be a 1-D numpy array"),
        ((OFFSETS, AT.astype(np.float32), SCORE, NOW), TypeError, "at must be .* float64"),
        ((OFFSETS, AT, SCORE.reshape(2, 1), NOW), TypeError, "score must be .* got a 2-D array"),
        ((OFFSETS, np.arange(4.0)[::2], SCORE, NOW), TypeError, "at must be a C-contiguous"),
        ((OFFSETS, AT, SCORE, "now"), TypeError, None),
        ((np.array([], dtype=np.int64), AT, SCORE, NOW), ValueError, "offsets is empty"),
        ((np.array([1, 2]), AT, SCORE, NOW), ValueError, r"offsets\[0\] is 1"),
        ((np.array([0, 2, 1, 2]), AT, SCORE, NOW), ValueError, "must be non-decreasing"),
        ((np.array([0, 1]), AT, SCORE, NOW), ValueError, "offsets ends at 1 but there are 2"),
        ((OFFSETS, AT, SCORE[:1], NOW), ValueError, "at has 2 entries but score has 1"),
        ((OFFSETS, AT, SCORE, math.nan), ValueError, "now is NaN"),
        ((OFFSETS, np.array([NOW, math.nan]), SCORE, NOW), ValueError, r"at\[1\] is NaN"),
        ((OFFSETS, np.array([-math.inf, NOW]), SCORE, NOW), ValueError, r"at\[0\] is -inf"),
        ((OFFSETS, AT, np.array([1.0, math.inf]), NOW), ValueError, r"score\[1\] is inf"),
    ],
)
def test_activation_errors(args, error, match):
    with pytest.raises(error, match=match):
        _core.activation(*args)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: _core.significance(OFFSETS, SCORE.astype(np.float32)), TypeError, "score must be"),
        (
            lambda: _core.significance(OFFSETS, np.array([1.0, math.nan])),
            ValueError,
            r"score\[1\] is NaN",
        ),
        (
            lambda: _core.activation_log_order(np.array([0, 2]), AT, SCORE, NOW, 2),
            ValueError,
            r"group\[1\] is 2 but n_groups is 2",
        ),
        (
            lambda: _core.activation_log_order(np.array([0, 0]), AT, SCORE, NOW, -1),
            ValueError,
            "n_groups is -1",
        ),
        (
            lambda: _core.activation_log_order(np.array([0.0, 0.0]), AT, SCORE, NOW, 1),
            TypeError,
            "group must be .* int64",
        ),
        (
            lambda: _core.fade_order(np.array([0.1, 0.2]), np.array([0])),
            ValueError,
            "tie has 1 entries but activation has 2",
        ),
        (
            lambda: _core.fade_order(np.array([0.1, math.nan]), np.array([0, 1])),
            ValueError,
            r"activation\[1\] is NaN",
        ),
        (
            lambda: _core.fade_order(np.array([0.1, 0.2]), np.array([0, 1]), -1),
            ValueError,
            "limit is -1; it is a number of episodes and must be >= 0",
        ),
        (
            lambda: _core.fade_order(np.array([1, 2]), np.array([0, 1])),
            TypeError,
            "activation must be",
        ),
        (
            lambda: _core.fade(np.array([0.1]), np.array([0]), np.array([-4]), 10, 5),
            ValueError,
            r"sizes\[0\] is -4",
        ),
        (
            lambda: _core.fade(np.array([0.1]), np.array([0]), np.array([4]), -1, 5),
            ValueError,
            "view is -1",
        ),
        (
            lambda: _core.fade(np.array([0.1]), np.array([0]), np.array([4]), 10, -5),
            ValueError,
            "landing is -5",
        ),
        (
            lambda: _core.fade(np.array([0.1, 0.2]), np.array([0, 1]), np.array([4]), 10, 5),
            ValueError,
            "sizes has 1 entries but activation has 2",
        ),
        (
            lambda: _core.fade(np.array([0.1]), np.array([0]), np.array([4.0]), 10, 5),
            TypeError,
            "sizes must be .* int64",
        ),
    ],
)
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
