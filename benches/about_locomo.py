"""How well the offline judge answers "is this fact about that episode?", measured on LoCoMo.

LoCoMo's generated observations are facts with the turn they came from (`[fact, dia_id]`). Each
conversation is replayed, cut into episodes with the default settings, and every observation is
judged against every episode; the episode holding its turn is the one right answer. Reported:
top-1 accuracy (the highest-scoring episode is the right one), and precision / recall / F1 /
F0.5 of the yes answers at each threshold. The threshold is chosen on the tuning split (the
first five conversations) for F0.5, precision weighed twice recall: a wrong yes is a trace that
keeps an unrelated episode active, on every note, in every long memory (the facts block of a
long history was most of the request, `RESULTS-recall-padded.md`); a missed yes only lets an
episode fade sooner, and recall still finds it. Reported on the acceptance split (the last
five), as shared/data/README.md asks.

Run: python benches/about_locomo.py  (LoCoMo is read from shared/data, never bundled;
results: Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM Agents",
ACL 2024, CC BY-NC 4.0.)
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fadeway  # noqa: E402
from fadeway.episodes.traces import episode_text  # noqa: E402
from fadeway.judge import OfflineJudge  # noqa: E402
from fadeway.replay.locomo import dia_ids, locomo_lines, read_locomo  # noqa: E402
from fadeway.replay.runner import replay  # noqa: E402
from helpers import shared_data  # noqa: E402

TUNING = {"conv-26", "conv-30", "conv-41", "conv-42", "conv-43"}
THRESHOLDS = np.round(np.arange(0.05, 0.61, 0.025), 3)


def scores_for(sample: dict) -> tuple[np.ndarray, np.ndarray]:
    """(scores[fact, episode], right[fact, episode]) for one conversation."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        fadeway.open(Path(tmp) / "a.db", background=False, ceiling=10**9) as engine,
    ):
        mem = engine.memory(sample["sample_id"])
        replay(mem, [line for _, line in locomo_lines(sample)])
        mem.cut()
        episodes = mem.episodes()
        messages = mem.messages()
    seq_of = {dia: i for i, dia in enumerate(dia_ids(sample))}
    episode_of = {
        seq: k for k, e in enumerate(episodes) for seq in range(e.first_seq, e.last_seq + 1)
    }
    texts = [
        episode_text([m.body for m in messages[e.first_seq : e.last_seq + 1]]) for e in episodes
    ]
    facts, right = [], []
    for session in sample["observation"].values():
        for items in session.values():
            for fact, dia in items:
                dia = dia if isinstance(dia, str) else str(dia)
                k = episode_of.get(seq_of.get(dia.strip(), -1))
                if k is not None:
                    facts.append(fact)
                    right.append(k)
    answers = asyncio.run(OfflineJudge().about(facts, texts))
    scores = np.array([[a.score for a in row] for row in answers])
    truth = np.zeros_like(scores, dtype=bool)
    truth[np.arange(len(right)), right] = True
    return scores, truth


def f_beta(p: float, r: float, beta: float) -> float:
    """The F-measure weighing recall `beta` times precision (F1 at 1, F0.5 at 0.5)."""
    return (1 + beta**2) * p * r / max(1e-12, beta**2 * p + r)


def evaluate(pairs: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    scores = np.concatenate([s.ravel() for s, _ in pairs])
    truth = np.concatenate([t.ravel() for _, t in pairs])
    top1 = np.mean(np.concatenate([t[np.arange(len(s)), s.argmax(1)] for s, t in pairs]))
    rows = []
    for th in THRESHOLDS:
        yes = scores >= th
        tp = np.sum(yes & truth)
        p = tp / max(1, yes.sum())
        r = tp / max(1, truth.sum())
        rows.append((th, p, r, f_beta(p, r, 1.0), f_beta(p, r, 0.5), yes.mean()))
    return {"top1": top1, "rows": rows, "facts": int(sum(len(s) for s, _ in pairs))}


def main() -> int:
    path = shared_data("locomo/locomo10.json")
    if path is None:
        print("LoCoMo is not in shared/data; nothing to measure", file=sys.stderr)
        return 1
    samples = read_locomo(path)
    tuning = [scores_for(s) for s in samples if s["sample_id"] in TUNING]
    acceptance = [scores_for(s) for s in samples if s["sample_id"] not in TUNING]
    tune, accept = evaluate(tuning), evaluate(acceptance)
    best = max(tune["rows"], key=lambda row: row[4])
    print(f"facts: tuning {tune['facts']}, acceptance {accept['facts']}")
    print(f"top-1 accuracy: tuning {tune['top1']:.3f}, acceptance {accept['top1']:.3f}")
    print(
        "| threshold | tuning P | tuning R | tuning F1 | tuning F0.5 | acceptance P | "
        "acceptance R | acceptance F1 | acceptance F0.5 | acceptance yes rate |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (th, p, r, f, h, _), (_, p2, r2, f2, h2, y2) in zip(
        tune["rows"], accept["rows"], strict=True
    ):
        mark = " **(chosen on tuning)**" if th == best[0] else ""
        print(
            f"| {th:.3f}{mark} | {p:.3f} | {r:.3f} | {f:.3f} | {h:.3f} | {p2:.3f} | {r2:.3f} | "
            f"{f2:.3f} | {h2:.3f} | {y2:.3f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
