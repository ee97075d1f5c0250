"""LongMemEval as conversations (fadeway.evaluate.longmemeval): session order, times, evidence,
abstention, the question's time, and the errors naming what is wrong."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fadeway.errors import ReplayFormatError
from fadeway.evaluate.datasets import read_benchmark
from fadeway.evaluate.longmemeval import (
    longmemeval_conversations,
    longmemeval_time,
    read_longmemeval,
)

ORACLE = (
    Path(os.environ.get("FADEWAY_SHARED_DATA", "/work/shared/data"))
    / "longmemeval/longmemeval_oracle.json"
)


def _at(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp()


def _turn(role: str, content: str, has_answer: bool = False) -> dict[str, Any]:
    return {"role": role, "content": content, "has_answer": has_answer}


def _items() -> list[dict[str, Any]]:
    return [
        {
            "question_id": "q1",
            "question_type": "multi-session",
            "question": "How many bikes do I own?",
            "answer": 3,  # integers occur in the real file
            "question_date": "2023/05/30 (Tue) 10:00",
            # The later session comes first in the file.
            "haystack_dates": ["2023/05/25 (Thu) 09:00", "2023/05/20 (Sat) 08:00"],
            "haystack_sessions": [
                [_turn("user", "I bought a third bike.", True), _turn("assistant", "Nice!")],
                [
                    _turn("user", "Hi"),
                    _turn("assistant", "Hello"),
                    _turn("user", "I have two bikes.", True),
                ],
            ],
        },
        {
            "question_id": "q2_abs",
            "question_type": "single-session-user",
            "question": "What is my cat's name?",
            "answer": "You did not mention a cat.",
            # The same minute as the session: the question must still come after its turns.
            "question_date": "2023/06/01 (Thu) 12:00",
            "haystack_dates": ["2023/06/01 (Thu) 12:00"],
            "haystack_sessions": [[_turn("user", "I have a dog."), _turn("assistant", "")]],
        },
    ]


def _write(tmp_path: Path, data: object, raw: bool = False) -> Path:
    path = tmp_path / "lme.json"
    path.write_text(data if raw else json.dumps(data))  # type: ignore[arg-type]
    return path


def test_sessions_in_date_order_with_times_and_places(tmp_path: Path) -> None:
    path = _write(tmp_path, _items())
    first, second = longmemeval_conversations(read_longmemeval(path), str(path))
    assert first.memory_id == "q1" and second.memory_id == "q2_abs"
    assert [t.content for t in first.turns] == [
        "Hi",
        "Hello",
        "I have two bikes.",
        "I bought a third bike.",
        "Nice!",
    ]
    assert all(t.own == t.content for t in first.turns)
    early, late = _at("2023-05-20 08:00"), _at("2023-05-25 09:00")
    assert [t.at for t in first.turns] == [early, early + 30, early + 60, late, late + 30]
    assert [line.at for line in first.lines] == [t.at for t in first.turns]
    assert first.lines[0].memory_id == "q1"
    assert first.lines[2].message == {"role": "user", "content": "I have two bikes."}
    assert first.lines[1].message["role"] == "assistant"
    # Places count from 1 in the file's order: the first replayed session is the file's second.
    assert first.lines[0].where == f"{path}: q1 session 2 turn 1"
    assert first.lines[3].where == f"{path}: q1 session 1 turn 1"
    # Every turn is kept as given, an empty one too.
    assert [t.content for t in second.turns] == ["I have a dog.", ""]


def test_equal_dates_keep_the_file_order(tmp_path: Path) -> None:
    item = _items()[0]
    item["haystack_dates"] = ["2023/05/20 (Sat) 08:00"] * 2
    (conversation,) = longmemeval_conversations([item])
    assert conversation.turns[0].content == "I bought a third bike."
    assert conversation.lines[0].where == "q1 session 1 turn 1"  # no source: no file prefix


def test_the_question(tmp_path: Path) -> None:
    first, second = longmemeval_conversations(_items(), "f.json")
    (q1,) = first.questions
    assert (q1.key, q1.memory_id, q1.category) == ("q1", "q1", "multi-session")
    assert q1.text == "How many bikes do I own?"
    assert q1.gold == "3" and not q1.abstention
    assert q1.at == _at("2023-05-30 10:00")
    # The has_answer turns, as indexes in the replayed (date-ordered) turns.
    assert q1.evidence == (2, 3)
    assert [first.turns[i].content for i in q1.evidence] == [
        "I have two bikes.",
        "I bought a third bike.",
    ]
    (q2,) = second.questions
    assert q2.abstention and q2.evidence == ()
    assert q2.gold == "You did not mention a cat."
    # Dated the session's minute: asked 30 s after its last turn instead.
    assert q2.at == _at("2023-06-01 12:00") + 60 == second.turns[-1].at + 30


def test_a_question_dated_before_its_sessions_comes_after_them() -> None:
    item = _items()[0]
    item["question_date"] = "2023/05/01 (Mon) 00:00"
    (conversation,) = longmemeval_conversations([item])
    assert conversation.questions[0].at == _at("2023-05-25 09:00") + 60


def test_dates() -> None:
    assert longmemeval_time("2023/05/23 (Tue) 19:11") == _at("2023-05-23 19:11")
    for bad in ("2023-05-23 19:11", "2023/13/01 (Mon) 10:00", "", 5):
        with pytest.raises(ReplayFormatError, match="not a LongMemEval date"):
            longmemeval_time(bad)


def test_not_json(tmp_path: Path) -> None:
    path = _write(tmp_path, '[{"question_id": ', raw=True)
    with pytest.raises(ReplayFormatError, match="not complete JSON") as caught:
        read_longmemeval(path)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("data", "wrong"),
    [
        ({"question_id": "q1"}, "not a list"),
        (["q1"], "item 0 is not an object"),
        ([{**_items()[0], "question_date": None}], None),
        ([{k: v for k, v in _items()[0].items() if k != "haystack_sessions"}], "lacks"),
    ],
)
def test_wrong_shape(tmp_path: Path, data: object, wrong: str | None) -> None:
    path = _write(tmp_path, data)
    if wrong is None:  # the fields are there; the date is checked when read as a conversation
        with pytest.raises(ReplayFormatError, match=r"q1: not a LongMemEval date"):
            longmemeval_conversations(read_longmemeval(path), str(path))
        return
    with pytest.raises(ReplayFormatError, match=wrong) as caught:
        read_longmemeval(path)
    assert str(path) in str(caught.value)
    assert "question_id, question_type, question, answer" in str(caught.value)
    if wrong == "lacks":
        assert "haystack_sessions" in str(caught.value).split(";")[0]


def test_bad_turns_are_named() -> None:
    item = _items()[0]
    item["haystack_sessions"][1][2]["role"] = "system"
    with pytest.raises(ReplayFormatError) as caught:
        longmemeval_conversations([item], "f.json")
    assert str(caught.value) == "f.json: q1 session 2 turn 3: role must be user or assistant, " + (
        "not 'system'"
    )
    item = _items()[0]
    item["haystack_sessions"][0][1]["content"] = ["Nice!"]
    with pytest.raises(ReplayFormatError, match=r"q1 session 1 turn 2: content must be a string"):
        longmemeval_conversations([item], "f.json")
    item = _items()[0]
    item["haystack_dates"] = item["haystack_dates"][:1]
    with pytest.raises(ReplayFormatError, match="same length"):
        longmemeval_conversations([item], "f.json")
    item = _items()[0]
    item["haystack_sessions"] = [[], []]
    with pytest.raises(ReplayFormatError, match="q1 has no turns"):
        longmemeval_conversations([item], "f.json")


def test_read_benchmark(tmp_path: Path) -> None:
    path = _write(tmp_path, _items())
    conversations = read_benchmark("longmemeval", path)
    assert [c.memory_id for c in conversations] == ["q1", "q2_abs"]
    assert conversations[0].lines[0].where.startswith(f"{path}: ")


@pytest.mark.skipif(not ORACLE.exists(), reason=f"LongMemEval oracle not found at {ORACLE}")
def test_the_oracle_file() -> None:
    conversations = read_benchmark("longmemeval", ORACLE)
    assert len(conversations) == 500
    questions = [q for c in conversations for q in c.questions]
    assert len(questions) == 500 and len({q.key for q in questions}) == 500
    assert sum(q.abstention for q in questions) == 30
    assert all(q.abstention == q.key.endswith("_abs") for q in questions)
    marked = {
        item["question_id"]: {
            turn["content"]
            for session in item["haystack_sessions"]
            for turn in session
            if turn["has_answer"]
        }
        for item in read_longmemeval(ORACLE)
    }
    for conversation in conversations:
        (question,) = conversation.questions
        assert question.at >= max(t.at for t in conversation.turns) + 30
        assert [line.at for line in conversation.lines] == [t.at for t in conversation.turns]
        if question.abstention:
            continue
        assert question.evidence, question.key
        found = {conversation.turns[i].content for i in question.evidence}
        assert found == marked[question.key], question.key
