"""Dialogue topic segmentation on TIAGE: `fadeway.judge.cohesion.boundary_scores` against trivial
baselines.

Each utterance of a dialogue is one unit. A dialogue of N utterances has N - 1 slots; slot j is a
boundary when utterance j + 1 starts a new topic. Pk and WindowDiff are computed per dialogue with
k = max(2, round(N / (2 × gold segments))) and averaged over dialogues (macro), exactly as
shared/data/README.md section 3 defines them; boundary precision / recall / F1 count exact slots,
pooled over dialogues; "marked" is the number of boundaries a system placed (gold: test 315,
dev 311).

Turning scores into boundaries needs a count. Two rules:

- threshold (no gold): slot j is a boundary when first[j+1] + last[j] exceeds the mean of the
  dialogue's slot scores by `BOUNDARY_THRESHOLD_STD` standard deviations (tuned on train + dev);
- gold count (USES GOLD, like the even-spacing baseline): the k best slots, k = the gold number of
  boundaries, no two adjacent. This is how the library uses the scores: sizes decide how many
  cuts, the judgment decides where.

Usage:
    python benches/segmentation_tiage.py           # the tables, test (acceptance) and dev
    python benches/segmentation_tiage.py --tune    # repeat the search on train + dev (not test)

Data: $FADEWAY_SHARED_DATA/segmentation/tiage, else ../shared/data/segmentation/tiage beside the
repository.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from fadeway._constants import (
    BOUNDARY_THRESHOLD_STD,
    COHESION_EMBED_DIM,
    COHESION_LEXICAL_WEIGHT,
    COHESION_SMOOTHING,
    COHESION_WINDOW,
)
from fadeway.judge import cohesion

Slots = npt.NDArray[np.bool_]
Dialogue = tuple[list[str], Slots]  # utterances, gold slots

#: The corpus boundary rate (README section 3), for the random baseline.
RANDOM_RATE = 0.215
RANDOM_SEED = 0
#: The gold-count rule keeps chosen slots at least this many slots apart (tuned on train + dev).
GOLD_COUNT_MIN_GAP = 2
#: Threshold of the lexical-only variant, tuned on train + dev like ours.
LEXICAL_THRESHOLD_STD = 1.75

TUNE_WINDOWS = (1, 2, 3, 4)
TUNE_DIMS = (256, 1024)
TUNE_LEXICAL_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
TUNE_SMOOTHING = (1, 2, 3)
TUNE_MIN_GAPS = (1, 2, 3)
TUNE_THRESHOLDS = tuple(np.round(np.arange(0.0, 3.01, 0.25), 2))


def data_dir() -> Path:
    env = os.environ.get("FADEWAY_SHARED_DATA")
    base = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"
    return base / "segmentation" / "tiage"


def load(split: str) -> list[Dialogue]:
    raw = json.loads((data_dir() / f"anno_{split}.json").read_text(encoding="utf-8"))
    return [
        (
            [text for text, _ in turns],
            np.array([label == "1" for _, label in turns[1:]], dtype=bool),
        )
        for turns in raw.values()
    ]


# -- metrics (shared/data/README.md section 3) ------------------------------------------------


def window_k(gold: Slots) -> int:
    """Half the mean gold segment length, at least 2."""
    n = len(gold) + 1
    return max(2, round(n / (2 * (int(gold.sum()) + 1))))


def _boundaries_in_windows(slots: Slots, k: int) -> npt.NDArray[np.int64]:
    """For i = 0 .. N-k-1, the number of boundaries in slots i .. i+k-1."""
    before = np.concatenate([[0], np.cumsum(slots, dtype=np.int64)])
    return before[k:] - before[:-k]


def pk(gold: Slots, hyp: Slots, k: int) -> float:
    """Fraction of the N - k windows where gold and hypothesis disagree on "same segment"."""
    return float(
        np.mean((_boundaries_in_windows(gold, k) > 0) != (_boundaries_in_windows(hyp, k) > 0))
    )


def windowdiff(gold: Slots, hyp: Slots, k: int) -> float:
    """Fraction of the N - k windows where gold and hypothesis count different boundaries."""
    return float(np.mean(_boundaries_in_windows(gold, k) != _boundaries_in_windows(hyp, k)))


@dataclass(frozen=True)
class Scores:
    pk: float
    wd: float
    precision: float
    recall: float
    f1: float


def evaluate(data: Sequence[Dialogue], hyps: Sequence[Slots]) -> Scores:
    pks, wds = [], []
    tp = fp = fn = 0
    for (_, gold), hyp in zip(data, hyps, strict=True):
        k = window_k(gold)
        pks.append(pk(gold, hyp, k))
        wds.append(windowdiff(gold, hyp, k))
        tp += int((gold & hyp).sum())
        fp += int((~gold & hyp).sum())
        fn += int((gold & ~hyp).sum())
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return Scores(float(np.mean(pks)), float(np.mean(wds)), p, r, f1)


# -- from scores to boundaries ----------------------------------------------------------------


def slot_scores(texts: Sequence[str], **params: float) -> npt.NDArray[np.float64]:
    first, last = cohesion.boundary_scores(texts, **params)  # type: ignore[arg-type]
    return first[1:] + last[:-1]


def threshold_rule(scores: npt.NDArray[np.float64], c: float) -> Slots:
    return scores > scores.mean() + c * scores.std()


def top_slots(scores: npt.NDArray[np.float64], count: int, min_gap: int) -> Slots:
    """The `count` best slots (stable order on ties), none closer than `min_gap` to a chosen one."""
    chosen = np.zeros(len(scores), dtype=bool)
    taken = 0
    for j in np.argsort(-scores, kind="stable"):
        if taken == count:
            break
        if chosen[max(0, j - min_gap + 1) : j + min_gap].any():
            continue
        chosen[j] = True
        taken += 1
    return chosen


def even_spacing(n_slots: int, count: int) -> Slots:
    """`count` boundaries spread evenly: before utterance round(i · N / (count + 1))."""
    n = n_slots + 1
    hyp = np.zeros(n_slots, dtype=bool)
    for i in range(1, count + 1):
        hyp[min(max(round(i * n / (count + 1)) - 1, 0), n_slots - 1)] = True
    return hyp


def random_slots(data: Sequence[Dialogue]) -> list[Slots]:
    rng = random.Random(RANDOM_SEED)  # one draw per slot, dialogues in file order
    return [np.array([rng.random() < RANDOM_RATE for _ in gold], dtype=bool) for _, gold in data]


# -- the tables -------------------------------------------------------------------------------

OURS = {
    "window": COHESION_WINDOW,
    "dim": COHESION_EMBED_DIM,
    "lexical_weight": COHESION_LEXICAL_WEIGHT,
    "smoothing": COHESION_SMOOTHING,
}
LEXICAL_ONLY = {**OURS, "lexical_weight": 1.0}


def systems(data: Sequence[Dialogue]) -> list[tuple[str, list[Slots]]]:
    ours = [slot_scores(texts, **OURS) for texts, _ in data]
    lexical = [slot_scores(texts, **LEXICAL_ONLY) for texts, _ in data]
    counts = [int(gold.sum()) for _, gold in data]
    return [
        ("no boundary", [np.zeros_like(gold) for _, gold in data]),
        ("every slot a boundary", [np.ones_like(gold) for _, gold in data]),
        (f"random, p = {RANDOM_RATE}, seed {RANDOM_SEED}", random_slots(data)),
        (
            f"lexical only (tf-idf cosine), threshold c = {LEXICAL_THRESHOLD_STD}",
            [threshold_rule(s, LEXICAL_THRESHOLD_STD) for s in lexical],
        ),
        (
            f"**ours**, threshold c = {BOUNDARY_THRESHOLD_STD}",
            [threshold_rule(s, BOUNDARY_THRESHOLD_STD) for s in ours],
        ),
        (
            "even spacing, gold count (uses gold)",
            [even_spacing(len(gold), k) for (_, gold), k in zip(data, counts, strict=True)],
        ),
        (
            "lexical only, gold count (uses gold)",
            [top_slots(s, k, GOLD_COUNT_MIN_GAP) for s, k in zip(lexical, counts, strict=True)],
        ),
        (
            "**ours**, gold count (uses gold)",
            [top_slots(s, k, GOLD_COUNT_MIN_GAP) for s, k in zip(ours, counts, strict=True)],
        ),
    ]


def table(split: str, data: Sequence[Dialogue]) -> str:
    rows = [
        f"| system ({split}, {len(data)} dialogues) | Pk | WindowDiff | P | R | F1 | marked |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, hyps in systems(data):
        s = evaluate(data, hyps)
        rows.append(
            f"| {name} | {s.pk:.3f} | {s.wd:.3f} | {s.precision:.3f} | {s.recall:.3f} | {s.f1:.3f} "
            f"| {sum(int(h.sum()) for h in hyps)} |"
        )
    return "\n".join(rows)


def check_calibration(test: Sequence[Dialogue]) -> None:
    """The trivial rows must reproduce README section 3 (test Pk 0.459 / 0.541)."""
    none = evaluate(test, [np.zeros_like(gold) for _, gold in test])
    every = evaluate(test, [np.ones_like(gold) for _, gold in test])
    assert round(none.pk, 3) == 0.459 and round(none.wd, 3) == 0.459, none
    assert round(every.pk, 3) == 0.541 and round(every.wd, 3) == 0.983, every


# -- tuning (train + dev only) ----------------------------------------------------------------


def tune(data: Sequence[Dialogue]) -> None:
    """Choose the scoring parameters by ranking quality (Pk of the gold-count rule), then the
    threshold of each variant for those scores. Test is never read here."""
    counts = [int(gold.sum()) for _, gold in data]
    results = []
    grid = itertools.product(TUNE_WINDOWS, TUNE_DIMS, TUNE_LEXICAL_WEIGHTS, TUNE_SMOOTHING)
    for window, dim, weight, smoothing in grid:
        params = {"window": window, "dim": dim, "lexical_weight": weight, "smoothing": smoothing}
        scores = [slot_scores(texts, **params) for texts, _ in data]
        for gap in TUNE_MIN_GAPS:
            hyps = [top_slots(s, k, gap) for s, k in zip(scores, counts, strict=True)]
            results.append((evaluate(data, hyps), gap, params))
    results.sort(key=lambda r: r[0].pk)
    print("best by gold-count Pk on train + dev:")
    for s, gap, params in results[:15]:
        print(f"  Pk {s.pk:.4f} WD {s.wd:.4f} F1 {s.f1:.3f} min_gap {gap} {params}")

    def best_threshold(params: dict[str, float], label: str) -> None:
        scores = [slot_scores(texts, **params) for texts, _ in data]
        by_c = [
            (evaluate(data, [threshold_rule(s, c) for s in scores]), c) for c in TUNE_THRESHOLDS
        ]
        s, c = min(by_c, key=lambda r: r[0].pk)
        print(f"{label}: threshold c = {c} -> Pk {s.pk:.4f} WD {s.wd:.4f} F1 {s.f1:.3f}")

    best_threshold(OURS, f"ours {OURS}")
    best_threshold(LEXICAL_ONLY, f"lexical only {LEXICAL_ONLY}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tune", action="store_true", help="search parameters on train + dev")
    args = parser.parse_args(argv)
    if not (data_dir() / "anno_test.json").is_file():
        print(
            f"TIAGE not found at {data_dir()}; set FADEWAY_SHARED_DATA to the directory holding "
            "segmentation/tiage/anno_{train,dev,test}.json",
            file=sys.stderr,
        )
        return 2
    if args.tune:
        tune(load("train") + load("dev"))
        return 0
    test, dev = load("test"), load("dev")
    check_calibration(test)
    print(f"parameters: {OURS}; gold-count min gap {GOLD_COUNT_MIN_GAP}\n")
    print(table("test", test) + "\n")
    print(table("dev", dev) + "\n")
    start = time.perf_counter()
    for texts, _ in test:
        cohesion.boundary_scores(texts)
    elapsed = time.perf_counter() - start
    units = sum(len(t) for t, _ in test)
    print(
        f"boundary_scores: {elapsed / len(test) * 1e3:.2f} ms per dialogue "
        f"({units / elapsed:,.0f} units/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
