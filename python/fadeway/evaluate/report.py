"""The run's figures, from its journal: a Markdown table and a JSON document.

Rows are the benchmark's categories (LoCoMo's four, LongMemEval's question types), then
"abstention" (LongMemEval's questions whose answer was never given, also counted in their
type), then all.

Accuracy is the share of questions graded right; a grade the grader's answer did not state
readably counts as not right and is shown apart ("unreadable"). Evidence recall (`--no-answer`)
is the mean, over questions with evidence, of the share of its evidence turns a context carries
(the strict count of `evidence.py`). Latencies are p50 / p95 over questions: decorate alone, and
the whole question (its context built, the answer received).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..usage import UsageSummary
from .contexts import WAYS

__all__ = ["figures", "markdown"]

_WAY_NAMES = {"fadeway": "fadeway", "full": "full context", "retrieval": "retrieval (BM25)"}


def _percentiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None}
    p50, p95 = np.percentile(np.asarray(values, dtype=float), [50, 95])
    return {"p50": round(float(p50), 4), "p95": round(float(p95), 4)}


def _mean(values: Sequence[float]) -> float | None:
    return round(float(np.mean(values)), 4) if values else None


def _accuracy(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    right = sum(1 for e in entries if e["correct"] is True)
    provider = [e["input_tokens"] for e in entries if e.get("input_tokens") is not None]
    return {
        "questions": len(entries),
        "correct": right,
        "unreadable": sum(1 for e in entries if e["correct"] is None),
        "accuracy": round(right / len(entries), 4) if entries else None,
        "context_tokens": _mean([e["context_tokens"] for e in entries]),
        "input_tokens": _mean(provider),
        "question_seconds": _percentiles([e["question_seconds"] for e in entries]),
    }


def _recall(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "questions": len(entries),
        "recall": _mean([e["carried"] / e["evidence"] for e in entries]),
        "context_tokens": _mean([e["context_tokens"] for e in entries]),
    }
    if entries and "block_carried" in entries[0]:
        out["block_recall"] = _mean([e["block_carried"] / e["evidence"] for e in entries])
        out["block_tokens"] = _mean([e["block_tokens"] for e in entries])
    return out


def _spend(rows: Iterable[UsageSummary]) -> list[dict[str, Any]]:
    return [
        {
            "kind": u.kind,
            "model": u.model,
            "calls": u.calls,
            "tokens_in": u.tokens_in,
            "tokens_out": u.tokens_out,
        }
        for u in rows
    ]


def figures(
    entries: Iterable[Mapping[str, Any]],
    categories: Sequence[str],
    *,
    counting: bool,
    replay_spend: Sequence[UsageSummary],
    settings: Mapping[str, Any],
    versions: Mapping[str, Any],
) -> dict[str, Any]:
    """The run's JSON document: per way, overall and per category (in `categories`' order)."""
    entries = list(entries)
    summary = _recall if counting else _accuracy
    ways: dict[str, Any] = {}
    for way in WAYS:
        mine = [e for e in entries if e["way"] == way]
        groups = {c: [e for e in mine if e["category"] == c] for c in categories}
        groups["abstention"] = [e for e in mine if e.get("abstention")]
        ways[way] = {
            "overall": summary(mine),
            "categories": {c: summary(group) for c, group in groups.items() if group},
        }
    asked = [e for e in entries if e["way"] == "fadeway"]
    spent: dict[tuple[str, str], list[int]] = {}
    for e in asked:
        for u in e.get("spend", ()):
            acc = spent.setdefault((u["kind"], u["model"]), [0, 0, 0])
            acc[0] += u["calls"]
            acc[1] += u["tokens_in"]
            acc[2] += u["tokens_out"]
    return {
        "mode": "evidence" if counting else "answers",
        "settings": dict(settings),
        "versions": dict(versions),
        "ways": ways,
        "decorate_seconds": _percentiles([e["decorate_seconds"] for e in asked]),
        "memory_spend": {
            "replay": _spend(replay_spend),
            "questions": [
                {"kind": k, "model": m, "calls": c, "tokens_in": i, "tokens_out": o}
                for (k, m), (c, i, o) in spent.items()
            ],
        },
    }


def _cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _rows(doc: Mapping[str, Any]) -> list[str]:
    first = doc["ways"][WAYS[0]]
    return [*first["categories"], "all"]


def _of(doc: Mapping[str, Any], way: str, row: str) -> Mapping[str, Any]:
    found = doc["ways"][way]
    return found["overall"] if row == "all" else found["categories"].get(row, {})


def _answers_table(doc: Mapping[str, Any]) -> list[str]:
    head = ["category", "questions", *(_WAY_NAMES[w] for w in WAYS)]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in _rows(doc):
        cells = [row, str(_of(doc, WAYS[0], row).get("questions", 0))]
        cells += [_cell(_of(doc, w, row).get("accuracy")) for w in WAYS]
        out.append("| " + " | ".join(cells) + " |")
    unreadable = ", ".join(
        f"{_WAY_NAMES[w]} {doc['ways'][w]['overall']['unreadable']}" for w in WAYS
    )
    out += ["", f"Grades the grader did not state readably (counted as not right): {unreadable}."]
    out += [
        "",
        "| way | context tokens (mean) | input tokens, as the answerer counted (mean) "
        "| question s p50 | question s p95 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for w in WAYS:
        o = doc["ways"][w]["overall"]
        seconds = o["question_seconds"]
        out.append(
            f"| {_WAY_NAMES[w]} | {_cell(o['context_tokens'], 0)} | {_cell(o['input_tokens'], 0)} "
            f"| {_cell(seconds['p50'], 2)} | {_cell(seconds['p95'], 2)} |"
        )
    return out


def _evidence_table(doc: Mapping[str, Any]) -> list[str]:
    head = [
        "category",
        "questions",
        "fadeway request",
        "tokens",
        "fadeway recall block",
        "tokens",
        "BM25 at the request's tokens",
        "BM25 at the block's tokens",
        "full context",
        "tokens",
    ]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in _rows(doc):
        mine, bm25, full = (_of(doc, w, row) for w in ("fadeway", "retrieval", "full"))
        cells = [
            row,
            str(mine.get("questions", 0)),
            _cell(mine.get("recall")),
            _cell(mine.get("context_tokens"), 0),
            _cell(mine.get("block_recall")),
            _cell(mine.get("block_tokens"), 0),
            _cell(bm25.get("recall")),
            _cell(bm25.get("block_recall")),
            _cell(full.get("recall")),
            _cell(full.get("context_tokens"), 0),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


def markdown(doc: Mapping[str, Any]) -> str:
    """The run's figures as Markdown."""
    settings, versions = doc["settings"], doc["versions"]
    counting = doc["mode"] == "evidence"
    title = "evidence recall" if counting else "question answering"
    out = [f"# fadeway eval {settings['benchmark']}: {title}", ""]
    out.append(
        "Share of each question's evidence turns the context carries (strict count), and "
        "mean tokens:"
        if counting
        else "Accuracy by category (the benchmark's grading protocol):"
    )
    out += ["", *(_evidence_table(doc) if counting else _answers_table(doc)), ""]
    decorate = doc["decorate_seconds"]
    out.append(
        f"decorate s p50 / p95: {_cell(decorate['p50'], 4)} / {_cell(decorate['p95'], 4)} "
        "(on a copy of the memory's store; the copy is not timed)."
    )
    out += ["", "The memory's own model (judge, note writer, embedder):", ""]
    out += ["| stage | kind | model | calls | tokens in | tokens out |", "| --- " * 6 + "|"]
    spend = doc["memory_spend"]
    rows = [("replay", u) for u in spend["replay"]] + [("questions", u) for u in spend["questions"]]
    for stage, u in rows:
        out.append(
            f"| {stage} | {u['kind']} | {u['model']} | {u['calls']} | {u['tokens_in']} "
            f"| {u['tokens_out']} |"
        )
    if not rows:
        out.append("| - | none: no model call (offline judge, note writer and embedder) | | | | |")
    out += ["", "Settings: " + ", ".join(f"{k} {v}" for k, v in settings.items() if v is not None)]
    out += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()), ""]
    return "\n".join(out)
