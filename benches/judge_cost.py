"""What the LLM judge and note writer cost: calls and tokens per user turn, by kind.

    python benches/judge_cost.py [--sample conv-26] [--ceilings 20000 6000]
        [--out benches/RESULTS-judge-cost.md]

Replays one LoCoMo conversation through `fadeway replay`'s own path (`batch.open_for_replay`,
`replay.replay_memory`) with the LLM judge and the LLM note writer pointed at a scripted
OpenAI-compatible server on 127.0.0.1 (`tests/openai_server.py`). The server answers every
request validly (`tests/judge_answers.everything`: each unit a boundary score, each fact about
each episode, every walk level 2, every distilled item kept, a fact per leaving user message) and
reports as usage fadeway's own estimate of the request it got and of the answer it sent, so the
tokens are what a real endpoint would count for these prompts; a real model's answers differ in
size and in what they lead to (fewer facts about, fewer levels that lead on). The counts come
from `mem.usage()`, as a user would read them.

LoCoMo is read from shared/data (or $FADEWAY_SHARED_DATA); it is never copied here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from fadeway import tokens
from fadeway import wire as formats  # noqa: E402
from fadeway.cli.batch import ReplaySettings, _note_writer, open_for_replay  # noqa: E402
from fadeway.replay.locomo import locomo_lines, read_locomo  # noqa: E402
from fadeway.replay.runner import replay_memory  # noqa: E402
from fadeway.wire import text_of  # noqa: E402
from helpers import shared_data  # noqa: E402
from judge_answers import everything  # noqa: E402
from openai_server import OpenAIServer, Recorded, Reply  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS-judge-cost.md")
MODEL = "judge-model"
ENCODING = tokens.encoding_for_model(MODEL)
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


def _estimated(request: Recorded) -> Reply:
    """`everything`'s answer, with usage set to fadeway's estimate of request and answer."""
    reply = everything(request)
    body = dict(reply.body)
    tokens_in = tokens.measure_parsed(formats.parse_request(request.body))
    tokens_out = sum(tokens.count_texts(ENCODING, text_of(body["choices"][0]["message"])))
    body["usage"] = {
        "prompt_tokens": tokens_in,
        "completion_tokens": tokens_out,
        "total_tokens": tokens_in + tokens_out,
    }
    return Reply(body=body)


def measure(sample: dict, ceiling: int) -> tuple[int, dict[str, tuple[int, int, int]], float]:
    """(user turns, {kind: (calls, tokens in, tokens out)}, seconds) of one replay."""
    lines = [line for _, line in locomo_lines(sample)]
    turns = sum(1 for line in lines if line.message["role"] == "user")
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer() as server:
        server.script(*[_estimated] * 200_000)
        settings = ReplaySettings(
            db=str(Path(tmp) / "cost.db"),
            ceiling=ceiling,
            note_writer=server.url,
            judge=server.url,
            judge_model=MODEL,
        )
        start = time.perf_counter()
        with open_for_replay(settings) as engine:
            replay_memory(engine, sample["sample_id"], lines, note_writer=_note_writer(settings))
            usage = engine.memory(sample["sample_id"]).usage()
        seconds = time.perf_counter() - start
    return turns, {u.kind: (u.calls, u.tokens_in, u.tokens_out) for u in usage}, seconds


def _per_turn(value: float) -> str:
    if value == 0:
        return "0"
    return f"{value:,.0f}" if value >= 10 else f"{value:.2f}"


def table(results: list[tuple[int, int, dict[str, tuple[int, int, int]]]]) -> list[str]:
    """Markdown rows: per user turn, for each ceiling, calls, tokens in and tokens out."""
    head = "| per user turn |" + "".join(
        f" ceiling {c:,}: calls | tokens in | tokens out |" for c, _, _ in results
    )
    lines = [head, "| --- |" + " --- | --- | --- |" * len(results)]
    kinds = KINDS + sorted({k for _, _, u in results for k in u} - set(KINDS))
    for kind in kinds:
        if not any(kind in u for _, _, u in results):
            continue
        cells = []
        for _, turns, usage in results:
            calls, tin, tout = usage.get(kind, (0, 0, 0))
            cells += [_per_turn(calls / turns), _per_turn(tin / turns), _per_turn(tout / turns)]
        lines.append(f"| {LABELS.get(kind, kind)} | " + " | ".join(cells) + " |")
    totals = []
    for _, turns, usage in results:
        calls, tin, tout = (sum(v[i] for v in usage.values()) for i in range(3))
        totals += [_per_turn(calls / turns), _per_turn(tin / turns), _per_turn(tout / turns)]
    lines.append("| total | " + " | ".join(totals) + " |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", default="conv-26", help="LoCoMo sample_id (default conv-26)")
    parser.add_argument("--ceilings", type=int, nargs="+", default=[20_000, 6_000])
    parser.add_argument("--out", type=Path, help=f"write the results here (e.g. {RESULTS})")
    args = parser.parse_args()
    path = shared_data("locomo/locomo10.json")
    if path is None:
        print("LoCoMo not found under shared/data; nothing to measure", file=sys.stderr)
        return 1
    samples = {s["sample_id"]: s for s in read_locomo(path)}
    if args.sample not in samples:
        parser.error(f"no sample {args.sample!r}; LoCoMo has {', '.join(samples)}")
    results = []
    for ceiling in args.ceilings:
        turns, usage, seconds = measure(samples[args.sample], ceiling)
        print(f"ceiling {ceiling:,}: {turns} user turns, {seconds:.0f} s", file=sys.stderr)
        results.append((ceiling, turns, usage))
    lines = [
        "# What the LLM judge and note writer cost",
        "",
        "`python benches/judge_cost.py --out benches/RESULTS-judge-cost.md`, "
        f"{time.strftime('%Y-%m-%d')}. LoCoMo {args.sample} ({results[0][1]} user turns) "
        "replayed with the LLM judge and note writer against a scripted local server that "
        "answers every request validly and reports fadeway's own token estimate of each "
        "request and answer (see the script's docstring).",
        "",
        *table(results),
    ]
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
