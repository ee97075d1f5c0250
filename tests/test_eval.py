"""`fadeway eval`: the whole harness against scripted local endpoints that answer from the
context they are given, so fadeway's recall decides the score.

The conversations are written here in LoCoMo's and LongMemEval's formats (LoCoMo itself is
non-commercial and never copied into the repository); one test reads the real LoCoMo from the
shared data, to hold the evidence count to the recall bench's figure.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from fadeway.cli.main import main
from fadeway.evaluate.contexts import FULL_HEADER, RETRIEVAL_HEADER
from openai_server import OpenAIServer, Recorded, Reply

DATA = Path(os.environ.get("FADEWAY_SHARED_DATA", Path(__file__).parents[2] / "shared" / "data"))
LOCOMO = DATA / "locomo" / "locomo10.json"

_ANIMALS = ["cat", "dog", "parrot", "turtle", "rabbit", "goat", "horse", "ferret", "owl", "lizard"]
_FILLER = (
    "weather garden bakery river mountain concert novel recipe bicycle museum harbour train "
    "festival painting kitchen library market coffee lantern meadow orchard violin theatre"
).split()


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(_FILLER) for _ in range(rng.randint(14, 22))).capitalize() + "."


def locomo_file(path: Path, conversations: int = 2, sessions: int = 4, turns: int = 24) -> Path:
    """A LoCoMo-format file: filler turns, and in each session one planted fact per speaker
    that a question of category 4 (single-hop) asks about, its turn as the evidence."""
    rng = random.Random(7)
    samples = []
    for c in range(conversations):
        conv: dict[str, Any] = {"speaker_a": "Ann", "speaker_b": "Bo"}
        qa = []
        for s in range(1, sessions + 1):
            conv[f"session_{s}_date_time"] = f"1:56 pm on {s + 2} May, 2023"
            rows = []
            for t in range(1, turns + 1):
                speaker = "Ann" if t % 2 else "Bo"
                text = _sentence(rng)
                if t in (5, 12):
                    animal = _ANIMALS[(s * 2 + t + c) % len(_ANIMALS)]
                    name = f"Zeph{c}{s}{t}x"
                    text = f"I keep a {animal} named {name} at home, {_sentence(rng).lower()}"
                    qa.append(
                        {
                            "question": f"What is the name of {speaker}'s {animal} from "
                            f"session {s}?",
                            "answer": name,
                            "evidence": [f"D{s}:{t}"],
                            "category": 4,
                        }
                    )
                rows.append({"speaker": speaker, "dia_id": f"D{s}:{t}", "text": text})
            conv[f"session_{s}"] = rows
        qa.append(
            {
                "question": "What was never said?",
                "evidence": [],
                "category": 5,
                "adversarial_answer": "x",
            }
        )
        samples.append({"sample_id": f"conv-t{c}", "conversation": conv, "qa": qa})
    path.write_text(json.dumps(samples))
    return path


def _completion(text: str, prompt_tokens: int = 0) -> Reply:
    return Reply(
        body={
            "id": "x",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 3},
        }
    )


def _context_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages[1:-1])


def _way(messages: list[dict[str, Any]]) -> str:
    first = str(messages[1].get("content") or "") if len(messages) > 2 else ""
    if first.startswith(FULL_HEADER):
        return "full"
    return "retrieval" if first.startswith(RETRIEVAL_HEADER) else "fadeway"


class Scripted:
    """An answerer that answers a question's gold answer when its context carries it, else
    that it does not know; and a grader that grades "I do not know" wrong, anything else right,
    except where `unreadable` names a word of the question (then it answers no label)."""

    def __init__(self, golds: dict[str, str], unreadable: str | None = None) -> None:
        self.golds = golds
        self.unreadable = unreadable

    def answer(self, request: Recorded) -> Reply:
        messages = request.body["messages"]
        gold = self.golds[messages[-1]["content"]]
        text = gold if gold.lower() in _context_text(messages).lower() else "I do not know."
        return _completion(text, prompt_tokens=len(json.dumps(messages)) // 4)

    def grade(self, request: Recorded) -> Reply:
        prompt = request.body["messages"][0]["content"]
        if self.unreadable and self.unreadable in prompt:
            return _completion("I think it is right")
        label = "WRONG" if "I do not know" in prompt else "CORRECT"
        return _completion(json.dumps({"label": label}))


def _golds(path: Path) -> dict[str, str]:
    return {
        qa["question"]: str(qa["answer"])
        for sample in json.loads(path.read_text())
        for qa in sample["qa"]
        if "answer" in qa
    }


def _journal(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]


def _args(data: Path, out: Path, *extra: str) -> list[str]:
    return ["eval", "locomo", "--data", str(data), "--out", str(out), "--ceiling", "3000", *extra]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return locomo_file(tmp_path / "locomo.json")


def test_three_ways_on_one_answerer(data: Path, tmp_path: Path, capsys: Any) -> None:
    scripted = Scripted(_golds(data))
    out = tmp_path / "run"
    with (
        OpenAIServer(fallback=scripted.answer) as answerer,
        OpenAIServer(fallback=scripted.grade) as grader,
    ):
        code = main(
            _args(
                data,
                out,
                "--answerer",
                answerer.url,
                "--answerer-model",
                "a-1",
                "--grader",
                grader.url,
                "--grader-model",
                "g-1",
                "--concurrency",
                "3",
            )
        )
        asked = [r.body for r in answerer.requests]
        graded = [r.body for r in grader.requests]
    assert code == 0
    journal = _journal(out)
    questions = {e["key"] for e in journal}
    assert len(questions) == 16  # 2 conversations x 4 sessions x 2 facts; category 5 skipped
    assert len(journal) == len(asked) == len(graded) == 3 * len(questions)

    # The answerer's prompt is the same for the three ways but for the context.
    by_question: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for body in asked:
        assert body["model"] == "a-1" and body["temperature"] == 0 and body["seed"] == 0
        messages = body["messages"]
        by_question.setdefault(messages[-1]["content"], {})[_way(messages)] = messages
    for ways in by_question.values():
        assert set(ways) == {"fadeway", "full", "retrieval"}
        firsts = {json.dumps(m[0]) for m in ways.values()}
        lasts = {json.dumps(m[-1]) for m in ways.values()}
        assert len(firsts) == 1 and len(lasts) == 1
        assert ways["fadeway"][-2]["content"].startswith("[assistant_recent_memories]")

    # The grader sees the question, the gold and the answer, never a context.
    for body in graded:
        prompt = body["messages"][0]["content"]
        assert body["model"] == "g-1"
        assert "[assistant_recent_memories]" not in prompt and "I keep a" not in prompt

    # Each way is right exactly when its context carried the gold (the scripted answerer's
    # rule), and the report adds the journal up.
    golds = _golds(data)
    report = json.loads((out / "report.json").read_text())
    for way in ("fadeway", "full", "retrieval"):
        mine = [e for e in journal if e["way"] == way]
        for entry in mine:
            question = entry["question"]
            carried = golds[question].lower() in _context_text(by_question[question][way]).lower()
            assert entry["correct"] is carried
        overall = report["ways"][way]["overall"]
        assert overall["questions"] == 16
        assert overall["correct"] == sum(e["correct"] is True for e in mine)
        assert overall["unreadable"] == 0
    assert report["ways"]["full"]["overall"]["accuracy"] == 1.0  # the whole conversation fits
    # Retrieval is held to fadeway's tokens, question by question.
    tokens = {(e["key"], e["way"]): e["context_tokens"] for e in journal}
    assert all(tokens[(k, "retrieval")] <= tokens[(k, "fadeway")] for k in questions)
    assert (
        report["ways"]["fadeway"]["overall"]["context_tokens"]
        < (report["ways"]["full"]["overall"]["context_tokens"])
    )
    assert report["settings"]["seed"] == 0 and report["versions"]["fadeway"]
    table = (out / "report.md").read_text()
    assert "| single-hop | 16 |" in table and "| all | 16 |" in table
    assert table in capsys.readouterr().out


def test_an_unreadable_grade_is_counted_apart_never_as_right(data: Path, tmp_path: Path) -> None:
    scripted = Scripted(_golds(data), unreadable="session 2?")
    out = tmp_path / "run"
    with (
        OpenAIServer(fallback=scripted.answer) as answerer,
        OpenAIServer(fallback=scripted.grade) as grader,
    ):
        assert main(_args(data, out, "--answerer", answerer.url, "--grader", grader.url)) == 0
    journal = _journal(out)
    odd = [e for e in journal if "session 2?" in e["question"]]
    assert odd and all(e["correct"] is None and e["grade"] == "I think it is right" for e in odd)
    report = json.loads((out / "report.json").read_text())
    for way in ("fadeway", "full", "retrieval"):
        overall = report["ways"][way]["overall"]
        mine = [e for e in journal if e["way"] == way]
        assert overall["unreadable"] == sum(e["correct"] is None for e in mine) == 4
        assert overall["accuracy"] == round(overall["correct"] / overall["questions"], 4)
    assert report["ways"]["full"]["overall"]["accuracy"] == 0.75  # 12 of 16: the 4 not right
    assert "counted as not right): fadeway 4, full context 4" in (out / "report.md").read_text()


def test_a_killed_run_resumes_where_it_stopped(data: Path, tmp_path: Path) -> None:
    scripted = Scripted(_golds(data))

    def slow(request: Recorded) -> Reply:
        time.sleep(0.05)
        return scripted.answer(request)

    whole, killed = tmp_path / "whole", tmp_path / "killed"
    with OpenAIServer(fallback=slow) as answerer, OpenAIServer(fallback=scripted.grade) as grader:
        endpoints = ["--answerer", answerer.url, "--grader", grader.url, "--concurrency", "2"]
        assert main(_args(data, whole, *endpoints)) == 0
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        child = subprocess.Popen(
            [sys.executable, "-m", "fadeway", *_args(data, killed, *endpoints)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        journal = killed / "answers.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            if journal.exists() and journal.read_text().count("\n") >= 9:
                break
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait()
        before = journal.read_text().count("\n")
        assert 9 <= before < 48, "the run was not killed midway"
        with open(journal, "a") as fp:
            fp.write('{"key": "conv-t0:0", "way": "fad')  # a line torn by the kill
        asked_before = len(answerer.requests)
        assert main(_args(data, killed, *endpoints)) == 0
        asked_again = len(answerer.requests) - asked_before
    resumed = _journal(killed)
    assert len(resumed) == 48 and len({(e["key"], e["way"]) for e in resumed}) == 48
    assert asked_again <= 48 - before + 2  # only what the journal lacked (2 threads in flight)
    answers = {(e["key"], e["way"]): (e["answer"], e["correct"]) for e in _journal(whole)}
    assert {(e["key"], e["way"]): (e["answer"], e["correct"]) for e in resumed} == answers
    first, second = (json.loads((d / "report.json").read_text())["ways"] for d in (whole, killed))
    for way in first:
        assert first[way]["overall"]["correct"] == second[way]["overall"]["correct"]


def test_questions_run_concurrently_and_obey_retry_after(data: Path, tmp_path: Path) -> None:
    scripted = Scripted(_golds(data))
    lock = threading.Lock()
    seen: set[str] = set()
    refused: list[float] = []  # when each 429 left the server

    def limited(request: Recorded) -> Reply:
        # Every third request is refused once (its retry is answered).
        body = json.dumps(request.body, sort_keys=True)
        with lock:
            first = body not in seen
            seen.add(body)
            refuse = first and len(seen) % 3 == 0
        if refuse:
            refused.append(time.monotonic())
            return Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "0.3"})
        time.sleep(0.02)
        return scripted.answer(request)

    out = tmp_path / "run"
    with (
        OpenAIServer(fallback=limited) as answerer,
        OpenAIServer(fallback=scripted.grade) as grader,
    ):
        code = main(
            _args(
                data, out, "--answerer", answerer.url, "--grader", grader.url, "--concurrency", "4"
            )
        )
        arrivals = [r.at for r in answerer.requests]
        most = answerer.max_in_flight
    assert code == 0 and len(_journal(out)) == 48
    assert most >= 2
    assert refused
    # Nothing reached the endpoint while it asked every call to wait (calls already on their
    # way when the 429 left are given 30 ms to arrive).
    for at in refused:
        assert not [a for a in arrivals if at + 0.03 < a < at + 0.3 - 0.03]


def test_a_resumed_run_must_name_the_same_settings(data: Path, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "run"
    assert main(_args(data, out, "--no-answer")) == 0
    capsys.readouterr()
    code = main(
        [
            "eval",
            "locomo",
            "--data",
            str(data),
            "--out",
            str(out),
            "--ceiling",
            "4000",
            "--no-answer",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "ceiling (3000 then, 4000 now)" in err and "another --out" in err


def test_without_an_answerer_it_says_what_to_give(
    data: Path, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    monkeypatch.delenv("FADEWAY_ANSWERER_BASE_URL", raising=False)
    assert main(_args(data, tmp_path / "run")) == 2
    assert "--answerer URL" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_no_answer_counts_the_evidence_each_context_carries(data: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(_args(data, out, "--no-answer", "--json")) == 0
    journal = _journal(out)
    assert len(journal) == 48 and all(e["evidence"] == 1 for e in journal)
    report = json.loads((out / "report.json").read_text())
    assert report["mode"] == "evidence"
    assert report["ways"]["full"]["overall"]["recall"] == 1.0
    mine = report["ways"]["fadeway"]["overall"]
    assert 0 < mine["block_recall"] <= mine["recall"] <= 1.0
    assert mine["block_tokens"] < mine["context_tokens"]
    bm25 = [e for e in journal if e["way"] == "retrieval"]
    assert all(e["block_tokens"] <= e["context_tokens"] for e in bm25)


@pytest.mark.skipif(not LOCOMO.exists(), reason=f"LoCoMo is not at {LOCOMO}")
def test_no_answer_reproduces_the_recall_bench_on_a_tuning_conversation(tmp_path: Path) -> None:
    pytest.importorskip("rank_bm25", reason="the recall bench's baseline needs rank_bm25")
    benches = str(Path(__file__).parents[1] / "benches")
    sys.path.insert(0, benches)
    try:
        import recall_locomo
    finally:
        sys.path.remove(benches)
    sample = next(s for s in json.loads(LOCOMO.read_text()) if s["sample_id"] == "conv-30")
    bench = recall_locomo.evaluate(sample, 8000, None, False, decorated=True)
    out = tmp_path / "run"
    args = [
        "eval",
        "locomo",
        "--data",
        str(LOCOMO),
        "--out",
        str(out),
        "--only",
        "conv-30",
        "--ceiling",
        "8000",
        "--no-answer",
    ]
    assert main(args) == 0
    mine = json.loads((out / "report.json").read_text())["ways"]["fadeway"]["overall"]
    assert mine["questions"] == len(bench.asked)
    assert mine["block_recall"] == round(recall_locomo.recall_of(bench.asked, "block"), 4)
    # Recall quotes sealed conversation only: the block carries no evidence the view still
    # holds, so out of view it counts the same, while BM25 over every turn may lose some.
    in_view = [a for a in bench.asked if a.in_view]
    assert in_view, "no question's evidence was still in view: the split below tests nothing"
    assert all(a.hits["block-view"] == a.hits["block"] for a in bench.asked)
    assert all(a.hits["bm25-view"] == a.hits["bm25"] - a.in_view for a in bench.asked)
    assert all(a.hits["block+view"] == a.hits["block"] | a.in_view for a in bench.asked)


def _longmemeval_file(path: Path) -> Path:
    rng = random.Random(3)
    items = []
    for i, (kind, abstain) in enumerate(
        [
            ("single-session-user", False),
            ("temporal-reasoning", False),
            ("single-session-user", True),
        ]
    ):
        turns = [
            {
                "role": "user" if t % 2 == 0 else "assistant",
                "content": _sentence(rng),
                "has_answer": False,
            }
            for t in range(30)
        ]
        turns[4] = {"role": "user", "content": f"My locker code is Q{i}77x.", "has_answer": True}
        items.append(
            {
                "question_id": f"q{i}" + ("_abs" if abstain else ""),
                "question_type": kind,
                "question": f"What is my locker code, number {i}?",
                "answer": "It was never said." if abstain else f"Q{i}77x",
                "question_date": "2023/05/30 (Tue) 10:00",
                "haystack_dates": ["2023/05/20 (Sat) 08:00"],
                "haystack_sessions": [turns],
            }
        )
    path.write_text(json.dumps(items))
    return path


def test_longmemeval_graded_by_type_with_abstention_apart(tmp_path: Path) -> None:
    data = _longmemeval_file(tmp_path / "lme.json")
    golds = {i["question"]: i["answer"] for i in json.loads(data.read_text())}
    prompts: list[str] = []

    def answer(request: Recorded) -> Reply:
        messages = request.body["messages"]
        gold = golds[messages[-1]["content"]]
        return _completion(gold if gold in _context_text(messages) else "I do not know.")

    def grade(request: Recorded) -> Reply:
        prompt = request.body["messages"][0]["content"]
        prompts.append(prompt)
        return _completion("no." if "I do not know" in prompt else "Yes")

    out = tmp_path / "run"
    with OpenAIServer(fallback=answer) as answerer, OpenAIServer(fallback=grade) as grader:
        args = [
            "eval",
            "longmemeval",
            "--data",
            str(data),
            "--out",
            str(out),
            "--answerer",
            answerer.url,
            "--grader",
            grader.url,
            "--ceiling",
            "1500",
        ]
        assert main(args) == 0
    assert len(prompts) == 9 and sum("off-by-one" in p for p in prompts) == 3
    assert sum("unanswerable" in p for p in prompts) == 3
    report = json.loads((out / "report.json").read_text())
    full = report["ways"]["full"]["categories"]
    assert set(full) == {"single-session-user", "temporal-reasoning", "abstention"}
    assert full["abstention"]["questions"] == 1 and full["single-session-user"]["questions"] == 2
    assert report["ways"]["full"]["overall"]["accuracy"] == round(2 / 3, 4)  # the gold of the
    # abstention question is no turn's text: the scripted answerer says it does not know
    assert "| abstention | 1 |" in (out / "report.md").read_text()


def test_the_memorys_own_model_calls_are_reported(
    data: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("FADEWAY_EMBEDDINGS_MODEL", "emb-1")
    out = tmp_path / "run"
    with OpenAIServer() as embeddings:
        args = _args(data, out, "--no-answer", "--only", "conv-t0", "--embedder", embeddings.url)
        assert main(args) == 0
        calls = len(embeddings.requests)
    spend = json.loads((out / "report.json").read_text())["memory_spend"]
    replayed = sum(u["calls"] for u in spend["replay"])
    asked = sum(u["calls"] for u in spend["questions"])
    assert replayed > 0 and asked > 0
    assert {u["model"] for u in spend["replay"] + spend["questions"]} == {"emb-1"}
    # Every call the endpoint saw is counted once, but the harness's own for each of the 8
    # questions: the embedder's dimension probe as the copy opens, and the two warm-up
    # searches before decorate is timed.
    assert calls == replayed + asked + 3 * 8
    assert "| questions | embed" in (out / "report.md").read_text()


def test_a_question_an_endpoint_fails_is_asked_again_by_the_next_run(
    data: Path, tmp_path: Path, capsys: Any
) -> None:
    scripted = Scripted(_golds(data))
    down = [True]

    def failing(request: Recorded) -> Reply:
        if down[0] and "session 3?" in request.body["messages"][-1]["content"]:
            return Reply(400, {"error": {"message": "context_length_exceeded"}})
        return scripted.answer(request)

    out = tmp_path / "run"
    with (
        OpenAIServer(fallback=failing) as answerer,
        OpenAIServer(fallback=scripted.grade) as grader,
    ):
        endpoints = ["--answerer", answerer.url, "--grader", grader.url]
        assert main(_args(data, out, *endpoints)) == 1
        err = capsys.readouterr().err
        assert "4 questions failed at an endpoint" in err and "run the same command again" in err
        assert len({e["key"] for e in _journal(out)}) == 12  # the failed ones are not journaled
        down[0] = False
        before = len(answerer.requests)
        assert main(_args(data, out, *endpoints)) == 0
        assert len(answerer.requests) - before == 4 * 3  # only the 4 failed questions, 3 ways
    assert len(_journal(out)) == 48
