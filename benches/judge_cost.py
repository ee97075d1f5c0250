"""What the memory's own model (the LLM judge and note writer) costs: calls and tokens per user
turn, by kind, and what it reads against the conversation's own text.

    python benches/judge_cost.py [--samples launch-week conv-30] [--ceilings 20000 6000]
        [--answers everything selective] [--out benches/RESULTS-judge-cost.md]

Replays the bundled launch-week sample and LoCoMo tuning conversations (conv-30 by default)
through `fadeway replay`'s own path (`batch.open_for_replay`, `replay.replay_memory`) with the
LLM judge and the LLM note writer pointed at a scripted OpenAI-compatible server on 127.0.0.1
(`tests/openai_server.py`). The server answers every request validly (`answer`): `about` says yes
where half the fact's longer words are in the episode (a real model's yeses are few; each is a
line of the answer), every other judgment as `tests/judge_answers.everything` does (each unit a
boundary score, every walk level 2 so every fact leads on, every distilled item kept, a fact per
leaving user message), so no judgment the mechanism names is skipped: the worst case, for the
walk and distill above all, since a model lists only the facts that bear on the turn. With
`--answers selective` boundaries, the walk's levels, distill, `relate` and `same_entity` are
answered as the offline judge would answer them, read back from the LLM judge's own prompts
(`selective`; boundaries list the third of the units the offline judge scores highest), and
notes as the offline note writer writes them from the leaving turns (`selective_note`): a model
that finds most recalled facts unrelated, keeps little, and writes facts of a sentence each (the
worst case's facts are every leaving message's first 200 characters, JSON of tool calls and
outputs included, which no model writes). It counts the tokens of each
call (fadeway's own estimate of the request and of its answer) and reports them as the call's
usage, so the tokens are what a real endpoint would count for these prompts. The figures come
from `mem.usage()`, as a user reads them; the conversation's own text is its messages' text
(tool outputs included) in the same encoding. A last table gives what a note reads, and how much
of it is the context beside the leaving turns (`NoteContext`, at most NOTE_CONTEXT_TOKENS).

The server also plays a provider's prompt cache as OpenAI's works (`PromptCache`): a request
whose longest prefix seen in an earlier request of its judgment is 1,024 tokens or more reports
that prefix, in steps of 128 tokens, as `cached_tokens`. A replay runs in seconds, so nothing
expires: a live conversation whose notes come more than a few minutes apart is served less.

The goal (issue 29): over a replay the memory's own model reads at most 10 times the
conversation's text, and writes at most a tenth of what it reads.

LoCoMo is read from shared/data (or $FADEWAY_SHARED_DATA); it is never copied here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import re
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fadeway import tokens  # noqa: E402
from fadeway import wire as formats  # noqa: E402
from fadeway._constants import TOKENS_PER_MESSAGE  # noqa: E402
from fadeway.blocks import NOTE_CONTEXT_HEADER  # noqa: E402
from fadeway.cli.batch import ReplaySettings, _note_writer, open_for_replay  # noqa: E402
from fadeway.judge import cohesion, prompts  # noqa: E402
from fadeway.judge.base import FactText  # noqa: E402
from fadeway.judge.offline import (  # noqa: E402
    distill_offline,
    levels_offline,
    relate_offline,
    same_entity_offline,
)
from fadeway.notes.writers.base import LeavingMessage  # noqa: E402
from fadeway.notes.writers.offline import OfflineNoteWriter  # noqa: E402
from fadeway.replay.lines import ReplayLine, read_replay  # noqa: E402
from fadeway.replay.locomo import locomo_lines, read_locomo  # noqa: E402
from fadeway.replay.runner import replay_memory  # noqa: E402
from fadeway.wire import text_of  # noqa: E402
from helpers import shared_data  # noqa: E402
from judge_answers import about_sections, completion, everything, judgment, user_text  # noqa: E402
from judge_answers import answer as answer_as_asked  # noqa: E402
from openai_server import OpenAIServer, Recorded, Reply  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS-judge-cost.md")
MODEL = "judge-model"
ENCODING = tokens.encoding_for_model(MODEL)
#: The bundled sample's name (any other is a LoCoMo sample_id).
BUNDLED = "launch-week"
#: Kinds in the order the table lists them (any other kind follows).
KINDS = [
    "judge:boundaries",
    "judge:about",
    "judge:same_entity",
    "judge:relate",
    "judge:levels",
    "judge:distill",
    "note",
]
LABELS = {"judge:levels": "judge:levels (the walk)", "note": "note (replay only)"}
#: The issue's goal: reads per conversation token, writes per read.
GOAL_READS, GOAL_WRITES = 10.0, 0.1


@dataclass
class Cost:
    """One replay: user turns, the conversation's own tokens, {kind: [calls, in, out]} from
    `mem.usage()`, the same counted by the server call by call, and seconds."""

    sample: str
    ceiling: int
    turns: int
    text: int
    usage: dict[str, tuple[int, int, int]]
    counted: dict[str, list[int]] = field(default_factory=dict)
    seconds: float = 0.0
    #: Each note request's context message (`NoteContext`), in tokens (0 when it sent none).
    note_context: list[int] = field(default_factory=list)
    answers: str = "everything"  # how the server answered (`Counter`)
    #: {kind: tokens read that a prompt cache served} (`PromptCache`), from `mem.usage()`.
    cached: dict[str, int] = field(default_factory=dict)

    @property
    def label(self) -> str:
        selective = " (selective)" if self.answers == "selective" else ""
        return f"{self.sample} @ {self.ceiling:,}{selective}"

    @property
    def reads(self) -> int:
        return sum(v[1] for v in self.usage.values())

    @property
    def writes(self) -> int:
        return sum(v[2] for v in self.usage.values())

    @property
    def calls(self) -> int:
        return sum(v[0] for v in self.usage.values())

    @property
    def cached_reads(self) -> int:
        return sum(self.cached.values())


_WORD = re.compile(r"[a-z0-9]{4,}")
#: The judgments `selective` answers (about and notes are answered alike).
_SELECTIVE = {f"judge:{k}" for k in ("boundaries", "levels", "distill", "relate", "same_entity")}
#: The share of a boundaries call's units a selective model lists: a concept of about six units
#: opens and closes once.
SELECTIVE_BOUNDARY_SHARE = 1 / 3


def _about_yeses(body: dict) -> dict:
    """Yes, at 0.8, where half of a fact's words of 4+ letters are in the episode (or piece)."""
    facts_text, episodes_text = about_sections(user_text(body))
    facts = {
        int(m.group(1)): set(_WORD.findall(m.group(2).lower()))
        for m in re.finditer(r"^\[(\d+)\] (.*)$", facts_text, re.MULTILINE)
    }
    episodes = {
        int(m.group(1)): set(_WORD.findall(m.group(2).lower()))
        for m in re.finditer(r"^\[(\d+)\]\n(.*?)(?=\n\n\[\d+\]\n|\Z)", episodes_text, re.S | re.M)
    }
    return {
        "about": [
            [f, e, 0.8]
            for f, words in facts.items()
            for e, seen in episodes.items()
            if words and len(words & seen) * 2 >= len(words)
        ]
    }


# -- a selective model: what the offline judge would answer ------------------------------------

_FACT_LINE = re.compile(r"^\[(\d+)\] (.*?)(?: \[([^\]]*); ([^\]]*)\])?$", re.MULTILINE)
_LABELLED = re.compile(r"^(F\d+): (.*?)(?: \[([^\]]*); ([^\]]*)\])?$", re.MULTILINE)
_PAIR = re.compile(r"^\[(\d+)\] new (F\d+), held (F\d+)$", re.MULTILINE)
_NAMES = re.compile(r'^\[(\d+)\] (".*") \| (".*")$', re.MULTILINE)
_UNIT = re.compile(r"^(?:\[(\d+)\]|-) ([^:\n]+): (.*)$", re.MULTILINE)


#: Each line the walk's prompts showed -> its fact, while `walk_lines_recorded` is open.
_WALK_LINES: dict[str, FactText] = {}


@contextlib.contextmanager
def walk_lines_recorded() -> Iterator[None]:
    """While open, each line the walk's prompts show is kept with its fact: a line leaves out
    the entities its sentence names (`prompts.walk_line`), and the offline levels a selective
    model answers with read them too."""
    real = prompts.walk_line

    def recorded(fact: FactText) -> str:
        line = real(fact)
        _WALK_LINES[line] = fact
        return line

    prompts.walk_line = recorded
    try:
        yield
    finally:
        prompts.walk_line = real
        _WALK_LINES.clear()


def _facts(text: str, pattern: re.Pattern[str] = _FACT_LINE) -> dict[Any, FactText]:
    return {
        (int(k) if k.isdigit() else k): FactText(t, s or "", o or "")
        if s or o
        else _WALK_LINES.get(t, FactText(t, "", ""))
        for k, t, s, o in pattern.findall(text)
    }


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def selective(body: dict) -> dict:
    """The answer object the offline judge's judgments give for a `boundaries`, `levels`,
    `distill`, `relate` or `same_entity` request, read back from its prompt: a model that finds
    most recalled facts unrelated and keeps little, and lists the units where a concept opens or
    closes (the offline judge's strongest, SELECTIVE_BOUNDARY_SHARE of them, scores to two places
    as a model writes them), where `everything` lists every item."""
    name, _ = judgment(body)
    text = user_text(body)
    if name == "boundaries":
        units = _UNIT.findall(text)  # the context before, the units, the context after
        first, last = cohesion.boundary_scores([t for _, _, t in units])
        scored = [i for i, (k, _, _) in enumerate(units) if k]
        listed = sorted(scored, key=lambda i: -max(first[i], last[i]))
        listed = listed[: math.ceil(len(scored) * SELECTIVE_BOUNDARY_SHARE)]
        return {
            "units": [
                [int(units[i][0]), round(first[i], 2), round(last[i], 2)] for i in sorted(listed)
            ]
        }
    if name == "levels":
        dialogue = _between(text, "Recent dialogue (newest last):\n", "\n\nFacts:\n")
        facts = _facts(text.split("\n\nFacts:\n", 1)[1])
        levels = levels_offline(list(facts.values()), dialogue)
        return {"facts": [[i, v] for i, v in zip(facts, levels, strict=True) if v >= 1]}
    if name == "distill":
        conversation = _between(text, "Exchange:\n", "\n\nRecalled items:\n")
        items = _facts(text.split("\n\nRecalled items:\n", 1)[1])
        kept = distill_offline(list(items.values()), conversation)
        return {"facts": [i for i, k in zip(items, kept, strict=True) if k]}
    if name == "relate":
        facts = _facts(_between(text, "Facts:\n", "\n\nPairs:\n"), _LABELLED)
        pairs = []
        for i, new, held in _PAIR.findall(text):
            relation = relate_offline(facts[new], facts[held])
            if relation != "unrelated":
                pairs.append({"id": int(i), "relation": relation})
        return {"pairs": pairs}
    if name == "same_entity":
        return {
            "pairs": [
                int(i)
                for i, a, b in _NAMES.findall(text)
                if same_entity_offline(json.loads(a), json.loads(b))
            ]
        }
    raise ValueError(f"no selective answer for {name!r}")


_TOOL_OUTPUT = re.compile(r"^\[([^\]\s]+) output\] ")


def _leaving(message: dict) -> LeavingMessage:
    """A note request's message as the leaving message it was made from (`_chat_message` in
    reverse, as far as it goes: a tool output is marked, a speaker's name stays in the text)."""
    text = message["content"]
    if message["role"] == "assistant" and (tool := _TOOL_OUTPUT.match(text)):
        return LeavingMessage(0, "tool", text[tool.end() :], tool.group(1))
    return LeavingMessage(0, message["role"], text)


def selective_note(body: dict) -> Reply:
    """The note the offline note writer writes from a note request's leaving turns (the
    messages between the context and the ask): facts of a sentence each, as a model writes
    them, where `everything` makes one of every leaving message's first 200 characters."""
    messages = body["messages"][:-1]
    if messages and messages[0]["content"].startswith(NOTE_CONTEXT_HEADER):
        messages = messages[1:]
    ask = body["messages"][-1]["content"]
    note = asyncio.run(OfflineNoteWriter().write(ask, [_leaving(m) for m in messages]))
    return Reply(body=completion(tool=("note", msgspec.json.encode(note).decode())))


class PromptCache:
    """A provider's prompt cache as OpenAI documents it: a request is served from the cache for
    its longest prefix that an earlier request sent (here: one of the last `kept` requests of
    the same judgment, whose system prompt is its own), when that prefix is at least `least`
    tokens, in steps of `step` tokens past it. Prefixes are compared as the messages' text."""

    def __init__(self, least: int = 1_024, step: int = 128, kept: int = 16) -> None:
        self.least, self.step, self.kept = least, step, kept
        self._seen: dict[str, list[str]] = {}

    def cached(self, kind: str, body: dict, tokens_in: int) -> int:
        """The tokens of this request (`tokens_in` in all) the cache serves; then it is kept."""
        text = "\x00".join(f"{m['role']}\n{_content(m)}" for m in body["messages"])
        seen = self._seen.setdefault(kind, [])
        common = max((_common_prefix(text, earlier) for earlier in seen), default=0)
        seen.append(text)
        del seen[: -self.kept]
        prefix = sum(tokens.count_texts(ENCODING, [text[:common]])) if common else 0
        if prefix < self.least:
            return 0
        return min(tokens_in, self.least + (prefix - self.least) // self.step * self.step)


def _content(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of `a` and `b` (by halves: slices compare in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


class Counter:
    """Answers every request (see the module docstring) with usage set to fadeway's estimate of
    the request and of the answer, and what a prompt cache would serve of it (`PromptCache`),
    and counts them by kind, call by call. `model`: "everything" (every item listed and kept)
    or "selective" (`selective`)."""

    def __init__(self, model: str = "everything") -> None:
        self.model = model
        self.counted: dict[str, list[int]] = {}
        self.note_context: list[int] = []
        self.cache = PromptCache()
        self._lock = threading.Lock()

    def __call__(self, request: Recorded) -> Reply:
        body = request.body
        is_note = any(t.get("function", {}).get("name") == "note" for t in body.get("tools", []))
        kind = "note" if is_note else f"judge:{judgment(body)[0]}"
        if kind == "judge:about":
            reply = answer_as_asked(body, _about_yeses(body))
        elif self.model == "selective" and is_note:
            reply = selective_note(body)
        elif self.model == "selective" and kind in _SELECTIVE:
            reply = answer_as_asked(body, selective(body))
        else:
            reply = everything(request)
        sent = dict(reply.body)
        tokens_in = tokens.measure_parsed(formats.parse_request(body))
        tokens_out = sum(tokens.count_texts(ENCODING, text_of(sent["choices"][0]["message"])))
        with self._lock:
            cached = self.cache.cached(kind, body, tokens_in)
        sent["usage"] = {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        with self._lock:
            if is_note:
                self.note_context.append(_context_tokens(body))
            calls = self.counted.setdefault(kind, [0, 0, 0])
            calls[0] += 1
            calls[1] += tokens_in
            calls[2] += tokens_out
        return Reply(body=sent)


def _context_tokens(body: dict) -> int:
    """The tokens of a note request's context message, as the request's estimate counts it."""
    first = body["messages"][0]
    if first["role"] != "system" or not first["content"].startswith(NOTE_CONTEXT_HEADER):
        return 0
    return tokens.count_texts(ENCODING, [first["content"]])[0] + TOKENS_PER_MESSAGE


def sample_lines(name: str, locomo: Path | None = None) -> list[ReplayLine]:
    """The replay lines of the bundled sample or of a LoCoMo sample (from `locomo`)."""
    if name == BUNDLED:
        sample = resources.files("fadeway") / "samples" / f"{BUNDLED}.jsonl"
        with resources.as_file(sample) as path:
            return list(read_replay(str(path)))
    if locomo is None:
        raise FileNotFoundError("LoCoMo not found under shared/data")
    samples = {s["sample_id"]: s for s in read_locomo(locomo)}
    if name not in samples:
        raise KeyError(f"no sample {name!r}; LoCoMo has {', '.join(samples)}")
    return [line for _, line in locomo_lines(samples[name])]


def conversation_tokens(lines: list[ReplayLine]) -> int:
    """The conversation's own text in tokens: every message's text, tool outputs included."""
    return sum(sum(tokens.count_texts(ENCODING, text_of(line.message))) for line in lines)


def measure(name: str, lines: list[ReplayLine], ceiling: int, answers: str = "everything") -> Cost:
    """What one replay of `lines` at `ceiling` cost the memory's own model, its judge answered
    as `answers` says (`Counter`)."""
    memory_id = lines[0].memory_id
    turns = sum(1 for line in lines if line.message.get("role") == "user")
    counter = Counter(answers)
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer() as server, walk_lines_recorded():
        server.script(*[counter] * 200_000)
        settings = ReplaySettings(
            db=str(Path(tmp) / "cost.db"),
            ceiling=ceiling,
            note_writer=server.url,
            judge=server.url,
            judge_model=MODEL,
        )
        start = time.perf_counter()
        with open_for_replay(settings) as engine:
            replay_memory(engine, memory_id, lines, note_writer=_note_writer(settings))
            usage = engine.memory(memory_id).usage()
        seconds = time.perf_counter() - start
    return Cost(
        sample=name,
        ceiling=ceiling,
        turns=turns,
        text=conversation_tokens(lines),
        usage={u.kind: (u.calls, u.tokens_in, u.tokens_out) for u in usage},
        cached={u.kind: u.tokens_cached for u in usage},
        counted=counter.counted,
        seconds=seconds,
        note_context=counter.note_context,
        answers=answers,
    )


def _per_turn(value: float) -> str:
    if value == 0:
        return "0"
    return f"{value:,.0f}" if value >= 10 else f"{value:.2f}"


def _ratio(value: float, goal: float, places: int = 1) -> str:
    """`value` to `places` places, or to one more where they would round it onto the `goal`."""
    shown = f"{value:.{places}f}"
    return f"{value:.{places + 1}f}" if shown == f"{goal:.{places}f}" else shown


def table(results: list[Cost]) -> list[str]:
    """Markdown rows: per user turn, for each replay, calls, tokens in and tokens out; then the
    conversation's own text per turn and the ratios the goal bounds."""
    head = "| per user turn |" + "".join(f" {c.label}: calls | in | out |" for c in results)
    lines = [head, "| --- |" + " --- | --- | --- |" * len(results)]
    kinds = KINDS + sorted({k for c in results for k in c.usage} - set(KINDS))
    for kind in kinds:
        if not any(kind in c.usage for c in results):
            continue
        cells = []
        for c in results:
            calls, tin, tout = c.usage.get(kind, (0, 0, 0))
            cells += [_per_turn(calls / c.turns), _per_turn(tin / c.turns)]
            cells.append(_per_turn(tout / c.turns))
        lines.append(f"| {LABELS.get(kind, kind)} | " + " | ".join(cells) + " |")
    cells = []
    for c in results:
        cells += [_per_turn(c.calls / c.turns), _per_turn(c.reads / c.turns)]
        cells.append(_per_turn(c.writes / c.turns))
    lines.append("| **total** | " + " | ".join(f"**{x}**" for x in cells) + " |")
    cells = []
    for c in results:
        cells += ["", _per_turn(c.text / c.turns), ""]
    lines.append("| the conversation's own text | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| replay | user turns | reads / text | writes / reads | reads a prompt cache serves "
        "(`about`'s) | seconds |",
    ]
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for c in results:
        about = c.usage.get("judge:about", (0, 0, 0))[1]
        lines.append(
            f"| {c.label} | {c.turns} | {_ratio(c.reads / c.text, GOAL_READS)}× "
            f"(goal ≤ {GOAL_READS:.0f}×) | {_ratio(c.writes / max(1, c.reads), GOAL_WRITES, 2)} "
            f"(goal ≤ {GOAL_WRITES}) | {c.cached_reads / max(1, c.reads):.2f} "
            f"({c.cached.get('judge:about', 0) / max(1, about):.2f}) | {c.seconds:.0f} |"
        )
    lines += ["", "| replay | notes | note in, a note | its context, a note (mean) | max |"]
    lines.append("| --- | --- | --- | --- | --- |")
    for c in results:
        calls, tin, _ = c.usage.get("note", (0, 0, 0))
        n = len(c.note_context)
        lines.append(
            f"| {c.label} | {calls} | {tin / max(1, calls):,.0f} | "
            f"{sum(c.note_context) / max(1, n):,.0f} | {max(c.note_context, default=0):,} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--samples",
        nargs="+",
        default=[BUNDLED, "conv-30"],
        help=f"{BUNDLED} (bundled) and/or LoCoMo sample_ids (default: {BUNDLED} conv-30)",
    )
    parser.add_argument("--ceilings", type=int, nargs="+", default=[20_000, 6_000])
    parser.add_argument(
        "--answers",
        nargs="+",
        choices=["everything", "selective"],
        default=["everything"],
        help="how the scripted judge answers: every item listed and kept (the worst case), "
        "or as the offline judge would (a selective model); several: one replay each",
    )
    parser.add_argument("--out", type=Path, help=f"write the results here (e.g. {RESULTS})")
    args = parser.parse_args()
    locomo = shared_data("locomo/locomo10.json")
    results = []
    for name in args.samples:
        try:
            lines = sample_lines(name, locomo)
        except (FileNotFoundError, KeyError) as exc:
            parser.error(str(exc))
        for ceiling in args.ceilings:
            for answers in args.answers:
                cost = measure(name, lines, ceiling, answers)
                print(
                    f"{cost.label}: {cost.turns} user turns, {cost.seconds:.0f} s", file=sys.stderr
                )
                results.append(cost)
    lines_out = [
        "# What the memory's own model costs",
        "",
        "`python benches/judge_cost.py --out benches/RESULTS-judge-cost.md`, "
        f"{time.strftime('%Y-%m-%d')}. Each sample replayed with the LLM judge and note writer "
        "against a scripted local server that answers every request validly and reports "
        "fadeway's own token estimate of each request and answer (see the script's "
        "docstring); the conversation's own text in the same encoding.",
        "",
        *table(results),
    ]
    text = "\n".join(lines_out) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
