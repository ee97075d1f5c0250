"""The benchmarks' conversations and questions, read from where the user keeps them.

A `Conversation` is one memory: its replay lines (the mapping of `fadeway.replay.locomo` for
LoCoMo; LongMemEval's sessions in date order, in `longmemeval.py`), its turns as the baselines
show them, and the questions asked of it. Nothing is bundled: LoCoMo is CC BY-NC 4.0 (Maharana
et al., ACL 2024), LongMemEval MIT (Wu et al., ICLR 2025); both are read from `--data`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import ReplayFormatError
from ..replay.lines import ReplayLine
from ..replay.locomo import TURN_SECONDS, locomo_lines, read_locomo
from .evidence import evidence_ids

__all__ = [
    "BENCHMARKS",
    "LOCOMO_CATEGORIES",
    "Conversation",
    "Question",
    "Turn",
    "locomo_conversations",
    "day",
    "read_benchmark",
]

#: LoCoMo's categories graded (5, the adversarial one, has no gold answer and is skipped, as
#: the field does), by the names the project's benches use.
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass(frozen=True, slots=True)
class Turn:
    """A turn of the conversation: its text as replayed, what its speaker said (the evidence
    count looks for that), and when it was said (Unix seconds)."""

    content: str
    own: str
    at: float


@dataclass(frozen=True, slots=True)
class Question:
    """A question, asked as the next user message of its memory at `at`.

    `key` is unique in its benchmark ("conv-26:3": the sample and the question's index there;
    LongMemEval's question_id). `gold` is the answer (LongMemEval: the rubric of a preference
    question, the explanation of an abstention one). `evidence` holds the indexes, in the
    conversation's turns, of the turns that carry the answer; `abstention` marks a question
    whose answer was never given."""

    key: str
    memory_id: str
    text: str
    gold: str
    category: str
    at: float
    evidence: tuple[int, ...] = ()
    abstention: bool = False


@dataclass(frozen=True, slots=True)
class Conversation:
    """One memory of a benchmark: its replay lines, its turns in order (the same messages), and
    the questions asked of it."""

    memory_id: str
    lines: list[ReplayLine]
    turns: list[Turn]
    questions: list[Question]


def locomo_conversations(samples: Sequence[dict[str, Any]], source: str = "") -> list[Conversation]:
    """Every LoCoMo sample as a conversation, with its questions of categories 1-4 (the
    adversarial category 5 has no answer to grade). A question is asked 30 s after the last
    turn, as the replay spaces turns."""
    out = []
    for sample in samples:
        pairs = list(locomo_lines(sample, source))
        if not pairs:
            raise ReplayFormatError(f"{source}: sample {sample['sample_id']!r} has no turns")
        own = _own_texts(sample)
        turns: list[Turn] = []
        index: dict[str, int] = {}
        for dia, line in pairs:
            index[dia] = len(turns)
            turns.append(Turn(line.message["content"], own[dia], line.at))
        asked_at = pairs[-1][1].at + TURN_SECONDS
        questions = []
        for i, qa in enumerate(sample.get("qa") or ()):
            category = LOCOMO_CATEGORIES.get(qa.get("category"))  # type: ignore[arg-type]
            if category is None or "answer" not in qa:
                continue
            evidence = evidence_ids(qa.get("evidence") or [], index)
            questions.append(
                Question(
                    key=f"{sample['sample_id']}:{i}",
                    memory_id=sample["sample_id"],
                    text=str(qa["question"]),
                    gold=str(qa["answer"]),
                    category=category,
                    at=asked_at,
                    evidence=tuple(index[d] for d in evidence),
                )
            )
        out.append(Conversation(sample["sample_id"], [line for _, line in pairs], turns, questions))
    return out


def _own_texts(sample: dict[str, Any]) -> dict[str, str]:
    """dia_id -> what its speaker said (`locomo_lines` has checked the turns)."""
    conversation = sample["conversation"]
    return {
        turn["dia_id"]: str(turn["text"])
        for key, turns in conversation.items()
        if key.startswith("session_") and isinstance(turns, list)
        for turn in turns
    }


#: The benchmarks `fadeway eval` runs, by name.
BENCHMARKS = ("locomo", "longmemeval")


def read_benchmark(name: str, path: str | Path) -> list[Conversation]:
    """The conversations of benchmark `name` ("locomo" or "longmemeval") in the file `path`."""
    if name == "locomo":
        return locomo_conversations(read_locomo(path), str(path))
    if name == "longmemeval":
        from .longmemeval import longmemeval_conversations, read_longmemeval

        return longmemeval_conversations(read_longmemeval(path), str(path))
    raise ValueError(f"unknown benchmark {name!r}: choose one of {', '.join(BENCHMARKS)}")


def day(at: float) -> str:
    """The day of Unix seconds `at`, as contexts date their turns: "8 May 2023"."""
    moment = datetime.fromtimestamp(at, UTC)
    return f"{moment.day} {moment:%B %Y}"
