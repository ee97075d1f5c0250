"""Offline boundary scores (`fadeway.judge.cohesion`): shapes and edge cases, a topic change
found on a written dialogue, equality with an obvious dense computation, and TIAGE dev when it
is present."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fadeway import _core
from fadeway._constants import BOUNDARY_THRESHOLD_STD
from fadeway.judge import cohesion

PASTA = [
    "I'm making pasta tonight, do you have a good tomato sauce recipe?",
    "Sure: crush tomatoes with garlic and olive oil, then simmer the sauce for twenty minutes.",
    "Should the pasta water be salted? I always forget the salt.",
    "Yes, salt the pasta water well, and keep a cup of it to loosen the tomato sauce.",
    "Great, and fresh basil on top of the pasta at the end?",
    "Basil, yes, and grated parmesan over the pasta with a little of the tomato sauce.",
    "Perfect, the pasta and sauce are on the stove now.",
]
CAR = [
    "Different question: my car engine makes a knocking noise when I accelerate.",
    "Engine knock often means the wrong fuel octane or worn spark plugs in the car.",
    "The spark plugs in this engine are old, maybe I should replace them.",
    "Replace the spark plugs and check the ignition timing; the knocking should stop.",
    "The mechanic can also test the fuel pump if the engine still knocks.",
    "Thanks, I'll take the car to a mechanic to look at the engine this weekend.",
]
GARDEN = [
    "Also, my tomato plants in the garden have yellow leaves.",
    "Yellow leaves on garden plants usually mean too much water or too little nitrogen.",
    "I water the garden plants every day, so that might be it.",
    "Water the plants less often and add compost to the garden soil.",
    "Should the compost go around the tomato plants or dug into the garden soil?",
    "Spread the compost around the plants; the soil takes it in when you water.",
]


def slot_scores(texts: list[str], **params: float) -> np.ndarray:
    first, last = cohesion.boundary_scores(texts, **params)  # type: ignore[arg-type]
    return first[1:] + last[:-1]


def test_shapes_dtype_range_and_ends() -> None:
    texts = PASTA + CAR
    first, last = cohesion.boundary_scores(texts)
    for scores in (first, last):
        assert scores.shape == (len(texts),)
        assert scores.dtype == np.float64
        assert np.all((scores >= 0.0) & (scores <= 1.0))
    assert first[0] == 1.0 and last[-1] == 1.0


@pytest.mark.parametrize("n", [0, 1, 2])
def test_tiny_inputs(n: int) -> None:
    first, last = cohesion.boundary_scores(PASTA[:n])
    assert first.shape == last.shape == (n,)
    if n == 0:
        return
    assert first[0] == 1.0 and last[-1] == 1.0
    if n == 2:
        # One gap has no other gap to compare its cohesion with: depth 0 on both sides.
        assert first[1] == 0.0 and last[0] == 0.0


def test_texts_without_words() -> None:
    first, last = cohesion.boundary_scores(["", "...", "?!", ""])
    np.testing.assert_array_equal(first, [1, 0, 0, 0])
    np.testing.assert_array_equal(last, [0, 0, 0, 1])


def test_deterministic() -> None:
    texts = PASTA + CAR + GARDEN
    a = cohesion.boundary_scores(texts)
    b = cohesion.boundary_scores(tuple(texts))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize("window", [1, 2, 3, 4])
@pytest.mark.parametrize("lexical_weight", [0.0, 0.75, 1.0])
@pytest.mark.parametrize("smoothing", [1, 3])
def test_topic_change_is_the_best_slot(window: int, lexical_weight: float, smoothing: int) -> None:
    scores = slot_scores(
        PASTA + CAR, window=window, lexical_weight=lexical_weight, smoothing=smoothing
    )
    assert int(np.argmax(scores)) == len(PASTA) - 1


def test_two_topic_changes_rank_first_with_default_settings() -> None:
    scores = slot_scores(PASTA + CAR + GARDEN)
    best = int(np.argmax(scores))
    assert best in (len(PASTA) - 1, len(PASTA) + len(CAR) - 1)
    # Each change is the best slot of its own half of the conversation.
    cut = len(PASTA) + len(CAR) // 2
    assert int(np.argmax(scores[:cut])) == len(PASTA) - 1
    assert cut + int(np.argmax(scores[cut:])) == len(PASTA) + len(CAR) - 1


@pytest.mark.parametrize("smoothing", [1, 3])
def test_first_and_last_point_at_the_same_gap(smoothing: int) -> None:
    first, last = cohesion.boundary_scores(PASTA + CAR, smoothing=smoothing)
    assert int(np.argmax(first[1:])) + 1 == len(PASTA)  # the first message of the car topic
    assert int(np.argmax(last[:-1])) == len(PASTA) - 1  # the last message of the pasta topic


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"window": 0}, "window"),
        ({"smoothing": 0}, "smoothing"),
        ({"lexical_weight": 1.5}, "lexical_weight"),
    ],
)
def test_bad_parameters(params: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cohesion.boundary_scores(PASTA, **params)  # type: ignore[arg-type]


# -- the banded computation equals the obvious dense one ---------------------------------------


def dense_gap_cohesion(
    texts: list[str], window: int, dim: int, lexical_weight: float
) -> np.ndarray:
    """Whole unit × vocabulary tf-idf matrix, centred; window sums by slicing, gap by gap."""
    n = len(texts)
    tokens = [re.findall(r"[^\W_]+", t.lower()) for t in texts]
    vocabulary = sorted({w for ws in tokens for w in ws})
    column = {w: i for i, w in enumerate(vocabulary)}
    tf = np.zeros((n, len(vocabulary)))
    for i, ws in enumerate(tokens):
        for w in ws:
            tf[i, column[w]] += 1
    df = (tf > 0).sum(axis=0)
    lexical = np.where(tf > 0, 1 + np.log(np.maximum(tf, 1)), 0) * np.log((n + 1) / (df + 1))
    embedded = _core.hash_embed(texts, dim).astype(np.float64)

    def cosines(x: np.ndarray) -> np.ndarray:
        x = x - x.mean(axis=0)
        out = []
        for j in range(n - 1):
            lefts, rights = x[max(0, j - window + 1) : j + 1], x[j + 1 : j + 1 + window]
            left, right = lefts.sum(axis=0), rights.sum(axis=0)
            # A window whose units cancel out has no direction: cosine 0.
            cancelled = float(left @ left) <= 1e-9 * float((lefts * lefts).sum()) or float(
                right @ right
            ) <= 1e-9 * float((rights * rights).sum())
            norm = math.sqrt(float(left @ left) * float(right @ right))
            out.append(0.0 if cancelled else float(left @ right) / norm)
        return np.array(out)

    return lexical_weight * cosines(lexical) + (1 - lexical_weight) * cosines(embedded)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(["tea", "cake", "Tea", "rain", "sun", "car", "42", "x", "ä"]),
            max_size=6,
        ),
        max_size=12,
    ),
    st.integers(1, 4),
    st.sampled_from([0.0, 0.5, 1.0]),
)
def test_gap_cohesion_equals_dense(
    words: list[list[str]], window: int, lexical_weight: float
) -> None:
    texts = [" ".join(ws) for ws in words]
    got = cohesion.gap_cohesion(texts, window=window, dim=64, lexical_weight=lexical_weight)
    want = dense_gap_cohesion(texts, window, 64, lexical_weight) if len(texts) > 1 else np.zeros(0)
    np.testing.assert_allclose(got, want, atol=1e-9)


# -- TIAGE dev (skipped when the shared data is absent) ----------------------------------------


def tiage_dev() -> list[tuple[list[str], np.ndarray]]:
    roots = [Path(p) for p in [os.environ.get("FADEWAY_SHARED_DATA")] if p]
    roots.append(Path(__file__).resolve().parents[2] / "shared" / "data")
    for root in roots:
        path = root / "segmentation" / "tiage" / "anno_dev.json"
        if path.is_file():
            raw = json.loads(path.read_text(encoding="utf-8"))
            return [
                ([text for text, _ in turns], np.array([lab == "1" for _, lab in turns[1:]]))
                for turns in raw.values()
            ]
    pytest.skip("TIAGE (shared/data/segmentation/tiage) is not present")


def naive_pk(gold: np.ndarray, hyp: np.ndarray) -> float:
    """Pk as shared/data/README.md section 3 words it, one window at a time."""
    n = len(gold) + 1
    k = max(2, round(n / (2 * (int(gold.sum()) + 1))))
    disagree = [gold[i : i + k].any() != hyp[i : i + k].any() for i in range(n - k)]
    return sum(disagree) / len(disagree)


def top_slots(scores: np.ndarray, count: int) -> np.ndarray:
    chosen = np.zeros(len(scores), dtype=bool)
    for j in np.argsort(-scores, kind="stable"):
        if chosen.sum() == count:
            break
        if not chosen[max(0, j - 1) : j + 2].any():
            chosen[j] = True
    return chosen


def macro_pk(dialogues: list[tuple[list[str], np.ndarray]], hyps: list[np.ndarray]) -> float:
    return float(
        np.mean([naive_pk(gold, hyp) for (_, gold), hyp in zip(dialogues, hyps, strict=True)])
    )


def test_tiage_dev_ranking_at_the_gold_count() -> None:
    dev = tiage_dev()
    none = macro_pk(dev, [np.zeros_like(gold) for _, gold in dev])
    assert round(none, 3) == 0.450  # README section 3 calibration
    even = []
    for _, gold in dev:
        n, count = len(gold) + 1, int(gold.sum())
        hyp = np.zeros_like(gold)
        hyp[[round(i * n / (count + 1)) - 1 for i in range(1, count + 1)]] = True
        even.append(hyp)
    ours = [top_slots(slot_scores(texts), int(gold.sum())) for texts, gold in dev]
    # Measured: ours .414, even spacing .416, no boundary .450. On dev the ranking only ties even
    # spacing (on test it beats it, .391 against .416), so that side is guarded loosely.
    assert macro_pk(dev, ours) < none - 0.02
    assert macro_pk(dev, ours) < macro_pk(dev, even) + 0.01


def test_tiage_dev_threshold_rule_beats_no_boundary() -> None:
    # Measured: .448 against .450. The tuned threshold marks only 7 boundaries in the 100 dev
    # dialogues (gold: 311); cohesion alone is rarely sure enough (benches/RESULTS-segmentation.md).
    dev = tiage_dev()
    none = macro_pk(dev, [np.zeros_like(gold) for _, gold in dev])
    ours = []
    for texts, _ in dev:
        scores = slot_scores(texts)
        ours.append(scores > scores.mean() + BOUNDARY_THRESHOLD_STD * scores.std())
    assert macro_pk(dev, ours) < none
