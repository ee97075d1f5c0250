"""LoCoMo evidence recall in a long history: each tuning conversation padded with the sessions of
the other four, replayed as one memory; the recall block against BM25, and the whole decorated
request against a sliding window plus BM25 (the project's issue on recall quality).

The padded memory of an anchor conversation (conv-26, 30, 41, 42 or 43) holds every session of
the five tuning conversations, 128 sessions and 2,760 turns:

- Order: each conversation keeps its sessions in order and is spread over the whole history,
  interleaved by relative position: session i (1-based) of a conversation with n sessions sits
  at i / n, and sessions are sorted by that position; on a tie the anchor comes last and the
  others keep the order of the file. So every conversation's last session is at 1.0 and the
  anchor's is the memory's very last session, right before its questions, as in LoCoMo.
- Dates: the anchor's sessions keep their own dates (the days its questions name, and the
  turns 30 s apart, as the LoCoMo replay maps them); the padding's sessions are re-dated, spread
  evenly between the anchor's sessions around them (and two days apart start to start before
  the anchor's first), their turns 30 s apart. The turns' words are untouched. (Until
  2026-12-03 every session was re-dated, two days apart start to start from the anchor's first:
  every day a question names then fell on some other session, so the figures before recall read
  named days are by that dating.)
- Speakers: each conversation's turns are mapped as the LoCoMo replay maps them (its speaker_a
  is `user`, speaker_b `assistant`; content "speaker: text", with " [image: caption]"), so the
  memory holds ten speakers in two roles (conv-41 and conv-43 each have a John).

It is replayed into a fresh SQLite store at a 16,000-token ceiling with `background=False`, the
offline judge and the offline note writer (`replay_memory`, which runs the lane after every
step). Then only the anchor's questions (categories 1-4) are asked, never the padding's.

Two measures, both counted by the strict count of `benches/evidence.py` (a text surfaces an
evidence turn when it carries the turn's first 60 characters, normalised, or any 10 consecutive
words of it):

1. The recall block, as `recall_locomo.py` asks it (`recall(services, memory_id, question,
   recent_text(history, question), prepared_turn=None)`, read-only), against BM25 over all the
   memory's turns at the block's own token size, and BM25's top 10 turns.
2. The whole decorated request: each question is sent through `mem.decorate` as the next user
   message ({"model": "gpt-4.1", "messages": [question]}, at the last turn's time + 30 s, so no
   sleep), on a throwaway copy of the store (the SQLite file, any -wal/-shm, and its `.indexes/`
   directory, copied after the replaying engine closed; opened with the same settings and
   `background=False`, decorated, read, closed, deleted), so no question changes the memory for
   the next. What the model receives is every message of the returned request (the facts block,
   the view with its recall blocks and note calls, the question's recall block, the question,
   the note ask); its tokens are `fadeway.tokens.count_texts` with the request's encoding over
   the messages' texts (`wire.text_of`). The baseline of the same total: the most recent turns of
   the replayed history, as messages, up to the tokens of fadeway's in-view history (its
   non-block messages but the question), then BM25 (question as the query, the whole memory's
   statistics) over the turns older than that window, top turns joined one a line while they fit
   in the rest of fadeway's total, then the question. The recall block alone is the question's
   block as that request shows it.

    pip install rank_bm25
    python benches/recall_padded.py                   # 6-23 min on 2 processes
    python benches/recall_padded.py --out             # writes benches/RESULTS-recall-padded.md
    python benches/recall_padded.py --only conv-30 --workers 1 --show 2

Runtime on this project's 2-core machine, shared with other runs: each padded replay takes
70-500 s, the recall() questions 1-35 s, the decorated questions 0.15-0.6 s each (a 50 MB store
copied to /dev/shm, opened, decorated, closed); the five anchors 6 minutes on a quiet machine
at 1eea5ed, 23 minutes at 17d2e4c with the machine loaded.

The padded set is built from the tuning split only. LoCoMo is read from shared/data (or
$FADEWAY_SHARED_DATA), never copied here: Maharana et al., "Evaluating Very Long-Term
Conversational Memory of LLM Agents", ACL 2024, CC BY-NC 4.0.
"""

from __future__ import annotations

import argparse
import itertools
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

import msgspec
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from evidence import turn_key
from recall_locomo import (
    TUNING,
    Asked,
    Column,
    Turns,
    add_settings_argument,
    ambiguity_note,
    ambiguous,
    apply_settings,
    ask_block,
    own_texts,
    provenance,
    questions,
    replay_checked,
    run_pool,
    settings_line,
    settings_of,
    show_examples,
    table,
    verdict,
    walks,
    write_section,
)

import fadeway
from fadeway import blocks, tokens
from fadeway.evaluate.contexts import copy_store
from fadeway.recall.block import block_tokens
from fadeway.replay.lines import ReplayLine
from fadeway.replay.locomo import TURN_SECONDS, locomo_lines, read_locomo
from fadeway.replay.runner import DEFAULT_MODEL
from fadeway.wire import text_of
from helpers import shared_data

RESULTS = Path(__file__).with_name("RESULTS-recall-padded.md")
DEFAULT_CEILING = 16_000
WORKERS = 2
#: Start to start, between consecutive sessions of the padded history.
SESSION_SPACING = 2 * 24 * 3600.0
_SESSION = re.compile(r"session_(\d+)$")
#: Where the throwaway copies go: memory-backed when the machine has it.
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None


# -- the padded history -----------------------------------------------------------------------


def sessions(sample: dict[str, Any]) -> list[tuple[int, list[tuple[str, ReplayLine]]]]:
    """The sample's sessions in order, each (number, its (dia_id, line) pairs as the LoCoMo
    replay maps them)."""
    conv = sample["conversation"]
    numbers = sorted(int(m.group(1)) for key in conv if (m := _SESSION.match(key)))
    session_of = {t["dia_id"]: n for n in numbers for t in conv[f"session_{n}"]}
    out: dict[int, list[tuple[str, ReplayLine]]] = {n: [] for n in numbers}
    for dia, line in locomo_lines(sample):
        out[session_of[dia]].append((dia, line))
    return list(out.items())


def padded_lines(
    anchor: str, samples: Sequence[dict[str, Any]]
) -> list[tuple[str, str, ReplayLine]]:
    """(turn id "<sample_id>:<dia_id>", own text, replay line) of every turn of the padded
    memory of `anchor`, in order, re-dated (the module's docstring says how)."""
    memory_id = f"padded-{anchor}"
    order = [s for s in samples if s["sample_id"] != anchor] + [
        s for s in samples if s["sample_id"] == anchor
    ]
    placed = []
    for rank, sample in enumerate(order):
        own = own_texts(sample)
        found = sessions(sample)
        for i, (_, turns) in enumerate(found, start=1):
            placed.append((i / len(found), rank, sample["sample_id"], own, turns))
    placed.sort(key=lambda p: (p[0], p[1]))
    starts = _session_starts([(sample_id == anchor, turns) for _, _, sample_id, _, turns in placed])
    out = []
    for (_, _, sample_id, own, turns), at in zip(placed, starts, strict=True):
        for j, (dia, line) in enumerate(turns):
            moved = msgspec.structs.replace(
                line, memory_id=memory_id, at=line.at if at is None else at + j * TURN_SECONDS
            )
            out.append((f"{sample_id}:{dia}", own[dia], moved))
    return out


def _session_starts(placed: Sequence[tuple[bool, Sequence[tuple[str, ReplayLine]]]]) -> list:
    """When each session of `placed` ((of the anchor?, its turns), in order) starts: None for
    the anchor's, which keep their own dates (the days its questions name); the padding's
    between the anchor's sessions around them, evenly, and SESSION_SPACING apart before its
    first."""
    anchor_at = [i for i, (mine, _) in enumerate(placed) if mine]
    out: list[float | None] = [None] * len(placed)
    first = anchor_at[0]
    for i in range(first):
        out[i] = placed[first][1][0][1].at - (first - i) * SESSION_SPACING
    for a, b in itertools.pairwise([*anchor_at, None]):
        a_turns = placed[a][1]
        after = a_turns[-1][1].at + TURN_SECONDS
        between = range(a + 1, b if b is not None else len(placed))
        until = (
            placed[b][1][0][1].at if b is not None else after + (len(between) + 1) * SESSION_SPACING
        )
        for r, i in enumerate(between, start=1):
            out[i] = after + (until - after) * r / (len(between) + 1)
    return out


# -- the whole request, on a throwaway copy ---------------------------------------------------


#: The parts of a decorated request, in the order they are reported.
PARTS = (
    "facts block",
    "earlier recall blocks",
    "note ask",
    "view history",
    "recall block",
    "question",
)


@dataclass
class Request:
    """A decorated request's messages as texts, and its tokens by part (`PARTS`)."""

    texts: list[str]  # every message's text, in order
    kinds: list[str]  # every message's part
    sizes: list[int]  # every message's tokens

    def tokens(self, *parts: str) -> int:
        return sum(n for n, k in zip(self.sizes, self.kinds, strict=True) if k in parts)

    def text(self, *parts: str) -> str:
        return "\n".join(t for t, k in zip(self.texts, self.kinds, strict=True) if k in parts)

    @property
    def total(self) -> int:
        return sum(self.sizes)

    @property
    def block(self) -> str | None:
        """The question's recall block, as the request shows it."""
        return self.text("recall block") or None


def _part(message: dict[str, Any]) -> str:
    text = message.get("content")
    if message.get("role") not in ("system", "developer") or not blocks.is_block(text):
        return "view history"
    if text.startswith(blocks.FACTS_HEADER):
        return "facts block"
    return "earlier recall blocks" if text.startswith(blocks.RECALL_OPEN) else "note ask"


def read_request(request: dict[str, Any], question: str) -> Request:
    """The request's messages, each with its part and its tokens (`count_texts` with the
    request's encoding over the message's texts)."""
    encoding = tokens.encoding_for_model(request.get("model"))
    messages = request["messages"]
    kinds = [_part(m) for m in messages]
    asked_at = max(
        i for i, m in enumerate(messages) if m.get("role") == "user" and m["content"] == question
    )
    kinds[asked_at] = "question"
    if asked_at and kinds[asked_at - 1] == "earlier recall blocks":  # its block stands before it
        kinds[asked_at - 1] = "recall block"
    texts = [text_of(m) for m in messages]
    sizes = [sum(tokens.count_texts(encoding, t)) for t in texts]
    return Request(["\n".join(t) for t in texts], kinds, sizes)


def decorated(
    db: Path, settings: dict[str, Any], memory_id: str, question: str, at: float
) -> dict[str, Any]:
    """The request `decorate` returns for `question` as the next user message, on a throwaway
    copy of the store at `db`."""
    with tempfile.TemporaryDirectory(dir=SCRATCH) as tmp:
        copy = copy_store(db, Path(tmp))
        with fadeway.open(copy, background=False, **settings) as engine:
            return engine.memory(memory_id).decorate(
                {"model": DEFAULT_MODEL, "messages": [{"role": "user", "content": question}]},
                at=at,
            )


# -- one anchor -------------------------------------------------------------------------------


@dataclass
class Padded:
    anchor: str
    turns: int
    sealed_turns: int
    facts: int
    seconds_replay: float
    seconds_recall: float
    seconds_requests: float
    store_mb: float
    asked: list[Asked] = field(default_factory=list)  # the recall block against BM25
    requests: list[Asked] = field(default_factory=list)  # the whole request against the window
    ambiguous: list[str] = field(default_factory=list)

    @property
    def sample_id(self) -> str:
        return self.anchor


def evaluate(
    anchor: str, samples: list[dict[str, Any]], ceiling: int, embedder: str | None, keep: bool
) -> Padded:
    padded = padded_lines(anchor, samples)
    ids = [i for i, _, _ in padded]
    contents = [line.message["content"] for _, _, line in padded]
    turns = Turns(ids, contents, [own for _, own, _ in padded])
    plain_sizes = tokens.count_texts(turns.encoding, contents)  # each turn as a message's text
    sample = next(s for s in samples if s["sample_id"] == anchor)
    prefix = f"{anchor}:"
    asked_here = [
        (qa, [prefix + d for d in evidence])
        for qa, evidence in questions(
            sample, [i[len(prefix) :] for i in ids if i.startswith(prefix)]
        )
    ]
    memory_id = padded[0][2].memory_id
    last_at = padded[-1][2].at
    settings = {"ceiling": ceiling, "embedder": embedder}
    out = Padded(anchor, len(ids), 0, 0, 0.0, 0.0, 0.0, 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "padded.db"
        started = time.perf_counter()
        with fadeway.open(db, background=False, **settings) as engine:
            replayed = replay_checked(engine, memory_id, turns, [line for _, _, line in padded])
            done = time.perf_counter()
            out.facts = replayed.facts
            out.sealed_turns = len(ids) - len(replayed.in_view)
            for qa, evidence in asked_here:
                out.asked.append(
                    ask_block(engine.services, memory_id, replayed, qa, evidence, turns, keep)
                )
            recalled = time.perf_counter()
        out.store_mb = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file()) / 1e6
        for qa, evidence in asked_here:
            question = str(qa["question"])
            request = read_request(
                decorated(db, settings, memory_id, question, last_at + TURN_SECONDS), question
            )
            out.requests.append(
                whole_request(
                    qa["category"],
                    question,
                    evidence,
                    replayed.in_view,
                    request,
                    turns,
                    plain_sizes,
                    keep,
                )
            )
        out.seconds_replay = done - started
        out.seconds_recall = recalled - done
        out.seconds_requests = time.perf_counter() - recalled
    out.ambiguous = ambiguous(turns, (d for a in out.asked for d in a.evidence))
    return out


def whole_request(
    category: int,
    question: str,
    evidence: list[str],
    shown: set[str],
    request: Request,
    turns: Turns,
    plain_sizes: Sequence[int],
    keep: bool,
) -> Asked:
    """fadeway's whole request against the window + BM25 of the same total, for one question."""
    asked = Asked(category, question, evidence, shown & set(evidence))
    keys = turns.keys
    asked.count("request", "\n".join(request.texts), request.total, keys, keep)
    asked.count("block", request.block, block_tokens(request.block), keys, keep)
    view = request.tokens("view history")
    asked.count("view", request.text("view history"), view, keys, keep)
    others = [p for p in PARTS if p not in ("view history", "question")]
    asked.count("blocks", request.text(*others), request.tokens(*others), keys, keep)
    for part in PARTS:
        asked.tokens[part] = request.tokens(part)
    # The window: the most recent turns while they fit in fadeway's in-view history.
    start, used = len(turns.contents), 0
    while start > 0 and used + plain_sizes[start - 1] <= view:
        start -= 1
        used += plain_sizes[start]
    window = turns.contents[start:]
    rest = request.total - request.tokens("question") - used
    older = turns.fill(turns.bm25(question, among=range(start)), rest)
    found = turns.text(older)
    found_tokens = sum(tokens.count_texts(turns.encoding, [found])) if found else 0
    asked.count("window", "\n".join(window), used, keys, keep)
    asked.count("bm25_old", found, found_tokens, keys, keep)
    baseline = "\n".join([*([found] if found else []), *window, question])
    total = found_tokens + used + request.tokens("question")
    asked.count("window_bm25", baseline, total, keys, keep)
    return asked


def request_parts(requests: Sequence[Asked]) -> str:
    """fadeway's requests' mean tokens by part."""
    head = "| " + " | ".join(["", *PARTS, "whole request"]) + " |"
    cells = [f"{np.mean([a.tokens[p] for a in requests]):.0f}" for p in PARTS]
    cells.append(f"{np.mean([a.tokens['request'] for a in requests]):.0f}")
    return "\n".join(
        [head, "|" + " --- |" * (len(PARTS) + 2), "| mean tokens | " + " | ".join(cells) + " |"]
    )


def _evaluate_star(args: tuple[Any, ...]) -> Padded:
    *job, settings = args
    apply_settings(settings)  # a spawned worker starts from the defaults
    return evaluate(*job)


# -- the report -------------------------------------------------------------------------------


BLOCK_COLUMNS: list[Column] = [
    ("block", "recall block", "block tokens"),
    ("bm25", "BM25 same budget", "BM25 tokens"),
    ("bm25_top", "BM25 top-10", "top-10 tokens"),
]
REQUEST_COLUMNS: list[Column] = [
    ("request", "whole request", "request tokens"),
    ("window_bm25", "window + BM25", "window + BM25 tokens"),
    ("block", "recall block alone", "block tokens"),
]
PARTS_COLUMNS: list[Column] = [
    ("view", "fadeway: view history", "tokens"),
    ("blocks", "fadeway: blocks", "tokens"),
    ("window", "baseline: window", "tokens"),
    ("bm25_old", "baseline: BM25 part", "tokens"),
]


def summary(runs: Sequence[Padded]) -> str:
    lines = [
        "| anchor | turns | out of view at the end | facts | store MB | replay s | recall s | "
        "requests s | questions |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        lines.append(
            f"| {r.anchor} | {r.turns} | {r.sealed_turns} | {r.facts} | {r.store_mb:.0f} | "
            f"{r.seconds_replay:.1f} | {r.seconds_recall:.1f} | {r.seconds_requests:.1f} | "
            f"{len(r.asked)} |"
        )
    return "\n".join(lines)


def report(
    runs: Sequence[Padded],
    command: str,
    seconds: float,
    workers: int,
    ceiling: int,
    embedder: str | None,
) -> str:
    asked = [a for r in runs for a in r.asked]
    requests = [a for r in runs for a in r.requests]
    evidence = len({d for a in asked for d in a.evidence})
    return "\n".join(
        [
            f"## tuning split, padded ({', '.join(r.anchor for r in runs)} as anchors)",
            "",
            f"Command: `{command}`. Date: {date.today().isoformat()}; machine: "
            f"{os.cpu_count()} cores, Python {platform.python_version()}; {workers} "
            f"process{'es' if workers > 1 else ''}, {seconds:.0f} s in all. {provenance()}.",
            "",
            f"Settings: {settings_line(ceiling)}; embedder {embedder or 'hashing (offline)'}; "
            "offline judge and note writer; the anchor's sessions on their own dates, the "
            "padding's spread between them; the "
            f"questions decorated at the last turn's time + {TURN_SECONDS:.0f} s.",
            "",
            "### The recall block against BM25",
            "",
            "Share of each question's evidence turns the text carries (the strict count of "
            "`benches/evidence.py`), and each text's mean tokens; recall() with the walk "
            "inline, as in RESULTS-recall.md:",
            "",
            table(asked, BLOCK_COLUMNS),
            "",
            verdict(asked, "block", "bm25", "Recall block >= BM25 at the same budget"),
            "",
            "### The whole decorated request against a window plus BM25 of the same size",
            "",
            table(requests, REQUEST_COLUMNS),
            "",
            verdict(requests, "request", "window_bm25", "Whole request >= window + BM25"),
            "",
            "Where each side's evidence is (the same count over each part alone; fadeway's "
            "blocks are the facts block, every recall block in view and the note ask):",
            "",
            table(requests, PARTS_COLUMNS, in_context=False),
            "",
            "fadeway's requests by part (the recall block is the question's own; earlier recall "
            "blocks stand before the user turns still in view):",
            "",
            request_parts(requests),
            "",
            summary(runs),
            "",
            walks(asked) + " (recall block against BM25); the decorated requests use the walk "
            "the lane prepared after the last turn.",
            "",
            ambiguity_note(runs, evidence),
        ]
    )


HEADER = (
    "# Recall in a long history: LoCoMo conversations padded with each other\n\n"
    "Written by `benches/recall_padded.py --out` (its docstring says how the padded memories "
    'are built and what is measured). LoCoMo: Maharana et al., "Evaluating Very Long-Term '
    'Conversational Memory of LLM Agents", ACL 2024, CC BY-NC 4.0; read from shared/data, '
    "not copied here.\n"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ceiling", type=int, default=DEFAULT_CEILING)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--only", nargs="*", help="only these anchors (for quick looks)")
    parser.add_argument("--embedder", default=None, help="fadeway's embedder (embedder_from)")
    add_settings_argument(parser)
    parser.add_argument(
        "--show",
        type=int,
        default=0,
        help="print this many examples of surfaced and not surfaced evidence",
    )
    parser.add_argument(
        "--out",
        nargs="?",
        const=str(RESULTS),
        default=None,
        help=f"write the tables to this file (default {RESULTS.name})",
    )
    args = parser.parse_args()
    settings = settings_of(args)
    path = shared_data("locomo/locomo10.json")
    if path is None:
        print("LoCoMo is not in shared/data; nothing to measure", file=sys.stderr)
        return 1
    samples = [s for s in read_locomo(path) if s["sample_id"] in TUNING]
    anchors = [s["sample_id"] for s in samples if not args.only or s["sample_id"] in args.only]
    started = time.perf_counter()
    jobs = [(a, samples, args.ceiling, args.embedder, bool(args.show), settings) for a in anchors]
    runs = run_pool(_evaluate_star, jobs, args.workers)
    seconds = time.perf_counter() - started
    command = " ".join(["python benches/recall_padded.py", *sys.argv[1:]])
    text = report(runs, command, seconds, args.workers, args.ceiling, args.embedder)
    print(text, end="\n\n")
    if args.show:
        for r in runs:
            own = {i: t for i, t, _ in padded_lines(r.anchor, samples)}
            keys = {i: turn_key(t) for i, t in own.items()}
            print(f"\n##### examples of {r.anchor}, recall block against BM25")
            show_examples(r.asked, keys, own, [c[0] for c in BLOCK_COLUMNS], args.show)
            print(f"\n##### examples of {r.anchor}, whole request against window + BM25")
            show_examples(r.requests, keys, own, ["request", "window_bm25"], args.show)
    if args.out and not args.only:
        write_section(Path(args.out), "tuning padded", text, HEADER)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
