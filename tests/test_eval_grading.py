"""The graders' prompts and the strict reading of their answers (fadeway.evaluate.grading)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fadeway.evaluate.datasets import LOCOMO_CATEGORIES, Question
from fadeway.evaluate.grading import (
    LONGMEMEVAL_TYPES,
    Grade,
    grade_messages,
    grade_request,
    read_grade,
)

# Distinctive strings: the grader must see these three and nothing else of the question.
TEXT, GOLD, ANSWER = "QTEXT-7f3a when?", "GOLD-91c2 {braces}", "ANSWER-55de"
HIDDEN = ("KEY-0b1e", "MEMORY-a7d4", "12345.5")


def _question(category: str, abstention: bool = False) -> Question:
    return Question(
        key=HIDDEN[0],
        memory_id=HIDDEN[1],
        text=TEXT,
        gold=GOLD,
        category=category,
        at=float(HIDDEN[2]),
        evidence=(31337,),
        abstention=abstention,
    )


def _prompt(bench: str, question: Question) -> str:
    messages = grade_messages(bench, question, ANSWER)
    assert [m["role"] for m in messages] == ["user"] and set(messages[0]) == {"role", "content"}
    return messages[0]["content"]


def _cases() -> list[tuple[str, Question]]:
    """(benchmark, question) for every kind of question graded."""
    cases = [("locomo", _question(name)) for name in LOCOMO_CATEGORIES.values()]
    cases += [("longmemeval", _question(kind)) for kind in LONGMEMEVAL_TYPES]
    cases += [("longmemeval", _question(kind, abstention=True)) for kind in LONGMEMEVAL_TYPES]
    return cases


# (Not "benchmark": pytest-benchmark owns that fixture name.)
@pytest.mark.parametrize(("bench", "question"), _cases())
def test_the_grader_sees_the_three_texts_and_nothing_else(bench: str, question: Question) -> None:
    prompt = _prompt(bench, question)
    for text in (TEXT, GOLD, ANSWER):
        assert prompt.count(text) == 1
    for hidden in (*HIDDEN, "31337", question.category):
        assert hidden not in prompt
    # The question, then the gold, then the answer.
    assert prompt.index(TEXT) < prompt.index(GOLD) < prompt.index(ANSWER)


# Each criterion's words, and the question types whose prompt has them.
CONTAINS = {"single-session-user", "single-session-assistant", "multi-session"}
CRITERIA = {
    "intermediate steps": CONTAINS | {"temporal-reasoning", "knowledge-update"},
    "subset": CONTAINS | {"temporal-reasoning", "knowledge-update"},
    "off-by-one": {"temporal-reasoning"},
    "19 days": {"temporal-reasoning"},
    "updated answer": {"knowledge-update"},
    "earlier information": {"knowledge-update"},
    "rubric": {"single-session-preference"},
    "every point": {"single-session-preference"},
    "personal information": {"single-session-preference"},
    "unanswerable": {"abstention"},
    "incomplete": {"abstention"},
}


@pytest.mark.parametrize("kind", [*LONGMEMEVAL_TYPES, "abstention"])
def test_each_longmemeval_type_gets_its_criteria(kind: str) -> None:
    if kind == "abstention":  # an abstention question of any type gets the abstention criteria
        prompts = {_prompt("longmemeval", _question(t, True)) for t in LONGMEMEVAL_TYPES}
        assert len(prompts) == 1
        (prompt,) = prompts
    else:
        prompt = _prompt("longmemeval", _question(kind))
    for words, kinds in CRITERIA.items():
        assert (words in prompt.lower()) == (kind in kinds), (kind, words)
    assert prompt.endswith("Answer yes or no only.")
    assert "CORRECT" not in prompt and "JSON" not in prompt


def test_the_locomo_prompt_keeps_the_j_criteria() -> None:
    prompt = _prompt("locomo", _question("temporal"))
    for words in (
        "one speaker should know of the other",
        "earlier conversations",
        "gold answer is short",
        "generous",
        "same topic",
        "same date or period",
        "another format",
        "relative reference",
        "one sentence",
        "JSON",
        '"label"',
        "CORRECT",
        "WRONG",
    ):
        assert words in prompt, words
    assert "yes or no" not in prompt and "off-by-one" not in prompt
    # The categories graded do not change it (apart from the question itself).
    assert {_prompt("locomo", _question(c)) for c in LOCOMO_CATEGORIES.values()} == {prompt}


def test_what_cannot_be_graded() -> None:
    with pytest.raises(ValueError, match="'temporal-reasonin'"):
        grade_messages("longmemeval", _question("temporal-reasonin"), ANSWER)
    with pytest.raises(ValueError, match="'adversarial'"):
        grade_messages("locomo", _question("adversarial"), ANSWER)
    with pytest.raises(ValueError, match="'locomo2'"):
        grade_messages("locomo2", _question("temporal"), ANSWER)
    with pytest.raises(ValueError, match="'LongMemEval'"):
        read_grade("LongMemEval", "yes")


def test_request_bodies() -> None:
    question = _question("temporal")
    body = grade_request("locomo", question, ANSWER, model="gpt-4o-mini", seed=7)
    assert body == {
        "model": "gpt-4o-mini",
        "messages": grade_messages("locomo", question, ANSWER),
        "temperature": 0,
        "seed": 7,
        "max_tokens": 200,
        "response_format": {"type": "json_object"},
    }
    body = grade_request("locomo", question, ANSWER, model=None, seed=0)
    assert "model" not in body and body["seed"] == 0
    question = _question("multi-session")
    body = grade_request("longmemeval", question, ANSWER, model=None, seed=3)
    assert body == {
        "messages": grade_messages("longmemeval", question, ANSWER),
        "temperature": 0,
        "seed": 3,
        "max_tokens": 10,
    }
    json.dumps(body)  # a body as sent


@pytest.mark.parametrize(
    ("text", "correct"),
    [
        ('{"label": "CORRECT"}', True),
        ('{"label": "WRONG"}', False),
        ('{"reason": "Same city, so WRONG is not it.", "label": "CORRECT"}', True),
        ('  {"reason": "Another year.", "label": "WRONG"}\n', False),
        ('{"label": " correct "}', True),
        ('{"label": "Wrong"}', False),
        ('```json\n{"label": "CORRECT"}\n```', True),
        ('```JSON\n{"label": "WRONG"}\n```', False),
        ('```\n{"label": "CORRECT"}\n```', True),
        ('\n```json {"label": "WRONG"} ```  ', False),
        # Refused: counted apart, never as right.
        ("CORRECT", None),
        ("WRONG", None),
        ("", None),
        ("   ", None),
        ('"CORRECT"', None),
        ('["CORRECT"]', None),
        ('{"reason": "Same topic."}', None),
        ('{"Label": "CORRECT"}', None),
        ('{"label": "RIGHT"}', None),
        ('{"label": "CORRECT or WRONG"}', None),
        ('{"label": "CORRECT WRONG"}', None),
        ('{"label": "CORRECT."}', None),
        ('{"label": true}', None),
        ('{"label": ["CORRECT"]}', None),
        ('{"label": "CORRECT", "label": "WRONG"}', None),
        ('The answer matches. {"label": "CORRECT"}', None),
        ('{"label": "CORRECT"} That is my verdict.', None),
        ('{"label": "CORRECT"}{"label": "WRONG"}', None),
        ('{"label": "CORRECT"', None),
        ('```json\n{"label": "CORRECT"}', None),
        ('```python\n{"label": "CORRECT"}\n```', None),
        ('```json\n{"label": "CORRECT"}\n``` and more', None),
    ],
)
def test_reading_locomo_grades(text: str, correct: bool | None) -> None:
    assert read_grade("locomo", text) == Grade(correct, text)


@pytest.mark.parametrize(
    ("text", "correct"),
    [
        ("yes", True),
        ("Yes", True),
        ("YES.", True),
        ("  yes!\n", True),
        ("no", False),
        ("No.", False),
        ("\tNO!", False),
        # Refused (the official script would count most of these right: they contain "yes").
        ("", None),
        ("   ", None),
        ("yes and no", None),
        ("the answer is yes", None),
        ("Yes, it is correct.", None),
        ("yes..", None),
        ("yes.!", None),
        ("yes ?", None),
        ("yes?", None),
        ("no, yes", None),
        ("maybe", None),
        ("y", None),
        ("yeah", None),
        ("nope", None),
        ("yes.\nno", None),
        ('{"label": "CORRECT"}', None),
        ("**yes**", None),
    ],
)
def test_reading_longmemeval_grades(text: str, correct: bool | None) -> None:
    assert read_grade("longmemeval", text) == Grade(correct, text)


def _normalised(text: str) -> str:
    word = text.strip().lower()
    return word[:-1] if word[-1:] in (".", "!") else word


_SPACE = st.text(alphabet=" \t\n\r", max_size=3)
_NEAR = st.builds(
    lambda before, word, end, after: before + word + end + after,
    _SPACE,
    st.sampled_from(["yes", "YES", "Yes", "yEs", "no", "No", "NO", "yes no", "ye", "noo"]),
    st.sampled_from(["", ".", "!", "..", "!.", "?", " ."]),
    _SPACE,
)


@given(st.one_of(st.text(), _NEAR))
def test_longmemeval_reads_only_a_bare_yes_as_right(text: str) -> None:
    grade = read_grade("longmemeval", text)
    assert grade.raw == text
    if grade.correct is True:
        assert _normalised(text) == "yes"
    if _normalised(text) not in ("yes", "no"):
        assert grade.correct is None
    else:
        assert grade.correct is (_normalised(text) == "yes")
