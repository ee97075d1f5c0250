"""The bundled launch-week sample: a multi-day replay that parses and holds together."""

from __future__ import annotations

import json
from datetime import timedelta
from importlib import resources
from itertools import pairwise

import pytest

from fadeway.replay.lines import read_replay

SAMPLE = resources.files("fadeway") / "samples" / "launch-week.jsonl"


@pytest.fixture(scope="module")
def lines():
    with resources.as_file(SAMPLE) as path:
        return list(read_replay(path))


def test_sample_ships_inside_the_package_and_is_small():
    assert SAMPLE.is_file()
    assert len(SAMPLE.read_bytes()) < 1_000_000


def test_every_line_parses_into_one_memory(lines):
    raw = [line for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) == len(raw)
    assert {line.memory_id for line in lines} == {"launch-week"}
    for line in raw:  # timestamps are ISO 8601 in UTC, as the format asks
        assert json.loads(line)["at"].endswith("Z")


def test_timestamps_never_go_back_and_span_more_than_a_week(lines):
    times = [line.at for line in lines]
    assert all(a <= b for a, b in pairwise(times))
    assert times[-1] - times[0] > timedelta(days=7).total_seconds()
    gaps = [b - a for a, b in pairwise(times)]
    assert max(gaps) > timedelta(hours=24).total_seconds()  # a weekend


def test_enough_distinct_user_turns(lines):
    users = [line.message["content"] for line in lines if line.message["role"] == "user"]
    assert len(users) >= 250
    assert all(isinstance(text, str) and text.strip() for text in users)
    assert len(set(users)) == len(users)


def test_roles_and_contents_are_chat_completions_messages(lines):
    for line in lines:
        message = line.message
        assert message["role"] in {"user", "assistant", "tool"}
        if message["role"] == "assistant" and message.get("tool_calls"):
            assert message["content"] is None
        else:
            assert isinstance(message["content"], str) and message["content"]


def test_every_tool_call_is_answered_right_after_it_in_order(lines):
    messages = [line.message for line in lines]
    seen_ids: set[str] = set()
    i = 0
    while i < len(messages):
        message = messages[i]
        assert message["role"] != "tool", f"tool message without its call at line {i + 1}"
        calls = message.get("tool_calls") or []
        if message["role"] == "assistant" and calls:
            ids = [call["id"] for call in calls]
            for call in calls:
                assert call["type"] == "function"
                json.loads(call["function"]["arguments"])  # arguments are a JSON string
            answers = messages[i + 1 : i + 1 + len(ids)]
            assert [m["role"] for m in answers] == ["tool"] * len(ids), f"line {i + 1}"
            assert [m["tool_call_id"] for m in answers] == ids, f"line {i + 1}"
            assert all(isinstance(m["content"], str) for m in answers)
            assert not seen_ids & set(ids), f"reused tool call id at line {i + 1}"
            seen_ids.update(ids)
            i += 1 + len(ids)
            # after the results comes the assistant again: another call or the answer
            assert i < len(messages) and messages[i]["role"] == "assistant", f"line {i + 1}"
            continue
        i += 1
    assert messages[-1]["role"] == "assistant"
