"""Reading LongMemEval as conversations (Wu et al., "LongMemEval: Benchmarking Chat Assistants on
Long-Term Interactive Memory", ICLR 2025; MIT).

Each item is its own memory, its `question_id` the memory id. Its sessions are replayed in date
order (stable for equal dates; the file does not sort them), each session's turns 30 s apart
from its date, read as UTC. The one question is asked at `question_date`, but never before the
last turn + 30 s: some items date a session after their question, and the question must come
after the turns it asks about. Places in errors and replay lines count from 1 in the file's
order: "<file>: e47becba session 2 turn 3" is the third turn of haystack_sessions[1].
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import ReplayFormatError
from ..replay.lines import ReplayLine
from ..replay.locomo import TURN_SECONDS, read_json
from .datasets import Conversation, Question, Turn

__all__ = ["FIELDS", "read_longmemeval", "longmemeval_conversations", "longmemeval_time"]

#: The fields every LongMemEval item must have.
FIELDS = (
    "question_id",
    "question_type",
    "question",
    "answer",
    "question_date",
    "haystack_dates",
    "haystack_sessions",
)
_ROLES = ("user", "assistant")
# "2023/05/23 (Tue) 19:11"; the weekday is redundant and not checked.
_DATE = re.compile(r"(\d{4})/(\d{1,2})/(\d{1,2}) \(\w+\) (\d{1,2}):(\d{2})")


def longmemeval_time(text: object) -> float:
    """Unix seconds of a LongMemEval date such as "2023/05/23 (Tue) 19:11" (read as UTC)."""
    found = _DATE.fullmatch(text.strip()) if isinstance(text, str) else None
    try:
        if found is None:
            raise ValueError
        year, month, mday, hour, minute = (int(g) for g in found.groups())
        moment = datetime(year, month, mday, hour, minute, tzinfo=UTC)
    except ValueError:
        raise ReplayFormatError(
            f'not a LongMemEval date ("2023/05/23 (Tue) 19:11"): {text!r}'
        ) from None
    return moment.timestamp()


def read_longmemeval(path: str | Path) -> list[dict[str, Any]]:
    """The items of a LongMemEval file (longmemeval_oracle.json, _s or _m)."""
    data = read_json(path)
    shape = f"a LongMemEval file is a list of objects with {', '.join(FIELDS)}"
    if not isinstance(data, list):
        raise ReplayFormatError(f"{path}: not a list; {shape}")
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise ReplayFormatError(f"{path}: item {i} is not an object; {shape}")
        missing = [field for field in FIELDS if field not in item]
        if missing:
            raise ReplayFormatError(
                f"{path}: item {i} ({item.get('question_id', '?')!r}) lacks "
                f"{', '.join(missing)}; {shape}"
            )
    return data


def longmemeval_conversations(
    items: Sequence[dict[str, Any]], source: str = ""
) -> list[Conversation]:
    """Every LongMemEval item as a conversation of its own, with its one question."""
    return [_conversation(item, f"{source}: " if source else "") for item in items]


def _conversation(item: dict[str, Any], label: str) -> Conversation:
    memory_id = item["question_id"]
    if not isinstance(memory_id, str) or not memory_id:
        raise ReplayFormatError(
            f"{label}a LongMemEval question_id must be a non-empty string, not {memory_id!r}"
        )
    place = f"{label}{memory_id}"
    lines: list[ReplayLine] = []
    turns: list[Turn] = []
    evidence: list[int] = []
    for k, start, session in _sessions(item, place):
        if not isinstance(session, list):
            raise ReplayFormatError(f"{place} session {k + 1}: a session is a list of turns")
        for j, turn in enumerate(session):
            where = f"{place} session {k + 1} turn {j + 1}"
            role, content = _turn(turn, where)
            at = start + j * TURN_SECONDS
            if turn.get("has_answer") is True:
                evidence.append(len(turns))
            lines.append(ReplayLine(memory_id, at, {"role": role, "content": content}, where))
            turns.append(Turn(content, content, at))
    if not turns:
        raise ReplayFormatError(f"{place} has no turns")
    last = max(turn.at for turn in turns)  # (sessions may overlap: the latest, not the final)
    asked = max(_time_at(item["question_date"], place), last + TURN_SECONDS)
    question = Question(
        key=memory_id,
        memory_id=memory_id,
        text=str(item["question"]),
        gold=str(item["answer"]),
        category=str(item["question_type"]),
        at=asked,
        evidence=tuple(evidence),
        abstention=memory_id.endswith("_abs"),
    )
    return Conversation(memory_id, lines, turns, [question])


def _sessions(item: dict[str, Any], place: str) -> list[tuple[int, float, Any]]:
    """(index in the file, start, turns) of each session, in date order (stable for equal dates)."""
    dates, sessions = item["haystack_dates"], item["haystack_sessions"]
    if not isinstance(dates, list) or not isinstance(sessions, list) or len(dates) != len(sessions):
        raise ReplayFormatError(
            f"{place}: haystack_dates and haystack_sessions must be lists of the same length"
        )
    starts = [_time_at(date, f"{place} session {k + 1}") for k, date in enumerate(dates)]
    order = sorted(range(len(sessions)), key=starts.__getitem__)
    return [(k, starts[k], sessions[k]) for k in order]


def _turn(turn: Any, where: str) -> tuple[str, str]:
    """The role and content of a turn, checked."""
    if not isinstance(turn, dict):
        raise ReplayFormatError(f"{where}: a turn is an object with role and content")
    role, content = turn.get("role"), turn.get("content")
    if role not in _ROLES:
        raise ReplayFormatError(f"{where}: role must be user or assistant, not {role!r}")
    if not isinstance(content, str):
        raise ReplayFormatError(f"{where}: content must be a string, not {content!r}")
    return role, content


def _time_at(text: object, place: str) -> float:
    """`longmemeval_time`, its error prefixed with `place`."""
    try:
        return longmemeval_time(text)
    except ReplayFormatError as exc:
        raise ReplayFormatError(f"{place}: {exc}") from None
