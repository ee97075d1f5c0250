"""The graders' prompts, and strict reading of their answers.

LoCoMo follows the LLM-as-judge "J" protocol as the field uses it (Mem0's evaluation,
evaluation/metrics/llm_judge.py in github.com/mem0ai/mem0; categories 1-4): the grader sees the
question, the gold answer and the generated answer, grades generously (the same topic, or for
time the same date or period in any format or as a relative reference, is CORRECT), and gives a
one-sentence reason then the label, as a JSON object with key "label".

LongMemEval follows its per-type yes/no grading (github.com/xiaowu0162/LongMemEval,
src/evaluation/evaluate_qa.py, MIT): one set of criteria per question_type, another for the
abstention questions.

The prompts' wording is ours; their criteria are the sources'. The grader receives only the
question, the gold, the answer and the instructions. Answers are read strictly: an answer that
cannot be read is `Grade(correct=None)`, counted apart and never as right. In particular the
official LongMemEval script counts any answer containing "yes" as right ("yes and no", "the
answer is not yes"); here only a bare "yes" or "no" (case and one final "." or "!" aside) is
read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .datasets import LOCOMO_CATEGORIES, Question

__all__ = [
    "LONGMEMEVAL_TYPES",
    "Grade",
    "grade_messages",
    "grade_request",
    "read_grade",
]

_BENCHMARKS = ("locomo", "longmemeval")
_MAX_TOKENS = {"locomo": 200, "longmemeval": 10}

_LOCOMO = """\
Label a generated answer to a question as CORRECT or WRONG.

You are given three texts: a question, a gold answer (the ground truth) and a generated answer. \
The question asks about something one speaker should know of the other from their earlier \
conversations. The gold answer is short: usually just the fact or topic asked about.

Be generous. A generated answer that touches on the same topic as the gold answer is CORRECT, \
even when it is longer or says more. For a question about time, the gold answer is a date, \
month, year or period: a generated answer that refers to the same date or period is CORRECT, \
even in another format (such as "7 May" for "May 7th") or as a relative reference (such as \
"last Tuesday" or "the next month").

Question: {question}
Gold answer: {gold}
Generated answer: {answer}

Give your reason in one sentence, then the label. Reply with a JSON object only, \
{{"reason": "<one sentence>", "label": "CORRECT"}} or \
{{"reason": "<one sentence>", "label": "WRONG"}}: the label is exactly one of the two words."""

_CONTAINS = (
    "Answer yes if the response contains the correct answer, is equivalent to it, or contains "
    "all the intermediate steps needed to reach it. Answer no if the response holds only a "
    "subset of what the answer requires."
)
_TEMPORAL = (
    " Do not penalise off-by-one errors in counts of days, weeks or months: if the correct "
    "answer is 18 days, a response of 19 days is correct."
)
_UPDATE = (
    " A response that mentions earlier information together with the updated answer is still "
    "correct, as long as the updated answer is the one required."
)
_PREFERENCE = (
    "The correct answer is a rubric describing the personalised response the user wants. "
    "Answer yes if the response satisfies the rubric. It need not reflect every point of the "
    "rubric: it is enough that it recalls and uses the user's personal information correctly."
)
_ABSTENTION = (
    "The question cannot be answered from what the user said; the explanation says why. "
    "Answer yes if the response correctly identifies the question as unanswerable: it may say "
    "that the information is incomplete, or that other information was given but not the one "
    "asked for. Answer no otherwise."
)

#: The criteria of each LongMemEval question_type.
_CRITERIA = {
    "single-session-user": _CONTAINS,
    "single-session-assistant": _CONTAINS,
    "multi-session": _CONTAINS,
    "temporal-reasoning": _CONTAINS + _TEMPORAL,
    "knowledge-update": _CONTAINS + _UPDATE,
    "single-session-preference": _PREFERENCE,
}
#: LongMemEval's question types.
LONGMEMEVAL_TYPES = tuple(_CRITERIA)

_LONGMEMEVAL = """\
Decide whether a model's response to a question is correct. You are given the question, \
{what} and the response.

{criteria}

Question: {question}

{label}: {gold}

Model response: {answer}

{ask} Answer yes or no only."""


@dataclass(frozen=True, slots=True)
class Grade:
    """A grader's verdict: `correct` is None when its answer could not be read; `raw` is its
    text as returned."""

    correct: bool | None
    raw: str


def grade_messages(benchmark: str, question: Question, answer: str) -> list[dict[str, str]]:
    """The grader's messages for `answer` to `question` of `benchmark` ("locomo" or
    "longmemeval")."""
    if _benchmark(benchmark) == "locomo":
        if question.category not in LOCOMO_CATEGORIES.values():
            raise ValueError(
                f"LoCoMo question {question.key!r} has category {question.category!r}; "
                f"graded are {', '.join(LOCOMO_CATEGORIES.values())}"
            )
        prompt = _LOCOMO.format(question=question.text, gold=question.gold, answer=answer)
    else:
        prompt = _longmemeval_prompt(question, answer)
    return [{"role": "user", "content": prompt}]


def _longmemeval_prompt(question: Question, answer: str) -> str:
    criteria = _CRITERIA.get(question.category)
    if criteria is None:
        raise ValueError(
            f"unknown LongMemEval question_type {question.category!r} (question "
            f"{question.key!r}): known are {', '.join(LONGMEMEVAL_TYPES)}"
        )
    if question.abstention:  # whatever its type, the gold explains why there is no answer
        what, label = "an explanation of why it cannot be answered", "Explanation"
        criteria, ask = _ABSTENTION, "Does the response correctly identify it as unanswerable?"
    elif question.category == "single-session-preference":
        what, label = "a rubric for the desired response", "Rubric"
        ask = "Does the response satisfy the rubric?"
    else:
        what, label, ask = "its correct answer", "Correct answer", "Is the response correct?"
    return _LONGMEMEVAL.format(
        what=what,
        criteria=criteria,
        question=question.text,
        label=label,
        gold=question.gold,
        answer=answer,
        ask=ask,
    )


def grade_request(
    benchmark: str, question: Question, answer: str, *, model: str | None, seed: int
) -> dict[str, Any]:
    """A Chat Completions request body grading `answer` (deterministic: temperature 0, `seed`);
    no model key when `model` is None (the endpoint's default)."""
    name = _benchmark(benchmark)
    body: dict[str, Any] = {} if model is None else {"model": model}
    body.update(
        messages=grade_messages(name, question, answer),
        temperature=0,
        seed=seed,
        max_tokens=_MAX_TOKENS[name],
    )
    if name == "locomo":
        body["response_format"] = {"type": "json_object"}
    return body


def read_grade(benchmark: str, text: str) -> Grade:
    """The grader's answer `text` read strictly (see the module's docstring)."""
    if _benchmark(benchmark) == "locomo":
        return Grade(_locomo_label(text), text)
    verdict = {"yes": True, "no": False}.get(_yes_no(text))
    return Grade(verdict, text)


_FENCE = re.compile(r"```(?:json)?[ \t]*\n?(.*?)\n?[ \t]*```", re.DOTALL | re.IGNORECASE)
_LABELS = {"CORRECT": True, "WRONG": False}


def _locomo_label(text: str) -> bool | None:
    """True for CORRECT, False for WRONG, None unless the text is just a JSON object with
    such a "label" (in a code fence or not)."""
    body = text.strip()
    if fenced := _FENCE.fullmatch(body):
        body = fenced.group(1).strip()
    try:
        data = json.loads(body, object_pairs_hook=_unique_keys)
    except ValueError:
        return None
    label = data.get("label") if isinstance(data, dict) else None
    return _LABELS.get(label.strip().upper()) if isinstance(label, str) else None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object; a repeated key (two labels) makes it unreadable."""
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("repeated key")
    return dict(pairs)


def _yes_no(text: str) -> str:
    """LongMemEval's answer normalised: stripped, lowercased, one final "." or "!" removed."""
    word = text.strip().lower()
    return word[:-1] if word.endswith((".", "!")) else word


def _benchmark(name: str) -> str:
    if name not in _BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}: choose one of {', '.join(_BENCHMARKS)}")
    return name
