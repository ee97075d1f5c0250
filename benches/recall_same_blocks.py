"""The recall blocks of a fixed workload, written one a line, so that a change meant only to make
recall faster can be checked to leave every block byte-identical: run it before and after the
change (or with PYTHONPATH at the old and the new code) and compare the two files.

    python benches/recall_same_blocks.py --db /tmp/big.db --out /tmp/old.jsonl
    python benches/recall_same_blocks.py --db /tmp/big.db --out /tmp/new.jsonl
    cmp /tmp/old.jsonl /tmp/new.jsonl

The workload: the latency bench's queries over its synthetic memory (`recall_latency.py`; the
store at `--db` is built first when it is missing), once with the prepared walk and once with
the walk inline; then every recall of the LoCoMo tuning conversations as `recall_locomo.py`
runs them (the replay's own recalls through decorate, and the questions'). Each line is one
recall's block as JSON (null for no block), with what it showed (facts and passages).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fadeway
from fadeway.recall import pipeline, turns
from fadeway.recall.block import RecallResult

sys.path.insert(0, str(Path(__file__).parent))

import recall_latency  # noqa: E402
import recall_locomo  # noqa: E402


def _recording(lines: list[str]) -> Callable[..., RecallResult]:
    """`pipeline.recall`, each result's block and what it showed appended to `lines`."""
    original = pipeline.recall

    def recall(*args: Any, **kwargs: Any) -> RecallResult:
        result = original(*args, **kwargs)
        lines.append(json.dumps([result.block, result.facts, result.passages, result.walk]))
        return result

    return recall


def synthetic(db: Path, queries: int, passages: int, facts: int) -> list[str]:
    if not db.exists():
        recall_latency.build(db, passages, facts)
    texts, recents = recall_latency.messages(queries)
    lines: list[str] = []
    with fadeway.open(db, background=False) as engine:
        for prepared in (recall_latency.PREPARED_TURN, None):
            for text, recent in zip(texts, recents, strict=True):
                result = pipeline.recall(
                    engine.services, "big", text, recent, prepared_turn=prepared
                )
                lines.append(json.dumps([result.block, result.facts, result.passages]))
    return lines


def locomo(sample: dict[str, Any]) -> list[str]:
    """Every recall of one LoCoMo conversation, replayed and asked as `recall_locomo` does."""
    lines: list[str] = []
    recording = _recording(lines)
    turns.recall = recording  # decorate's recalls during the replay
    recall_locomo.recall = recording  # the questions'
    recall_locomo.evaluate(sample, recall_locomo.DEFAULT_CEILING, None, False)
    return [f"{sample['sample_id']} {line}" for line in lines]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, default=Path(tempfile.mkdtemp()) / "big.db")
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--facts", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    lines = synthetic(args.db, args.queries, args.passages, args.facts)
    path = recall_locomo.shared_data("locomo/locomo10.json")
    if path is None:
        print("LoCoMo is not in shared/data: only the synthetic memory", file=sys.stderr)
    else:
        samples = [
            s for s in recall_locomo.read_locomo(path) if s["sample_id"] in recall_locomo.TUNING
        ]
        with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
            for done in pool.map(locomo, samples, chunksize=1):
                lines += done
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} recalls written to {args.out}")


if __name__ == "__main__":
    main()
