"""report: storing replies, the tool calls it returns, and the token-count correction ratio."""

from __future__ import annotations

import logging

import pytest

from helpers import call, chat_reply

pytestmark = pytest.mark.both_stores  # each test runs on SQLite and on PostgreSQL


def user(text):
    return {"role": "user", "content": text}


def test_report_returns_the_tool_calls_and_stores_the_reply(engine):
    mem = engine.memory("m")
    req = mem.decorate({"model": "gpt-4.1", "messages": [user("weather?")]})
    result = mem.report(req, chat_reply(None, tool_calls=[call("c1", "weather")]))
    assert result.tool_calls == [call("c1", "weather")]
    assert result.note_taken is False and result.call_again is False
    assert result.stored is True and result.not_stored is None
    stored = mem.messages()[-1]
    assert (stored.role, stored.source, stored.calls) == ("assistant", "reply", ("c1",))


def test_a_second_report_of_the_same_request_stores_nothing(engine):
    mem = engine.memory("m")
    req = mem.decorate({"messages": [user("q")]})
    assert mem.report(req, chat_reply("a", prompt_tokens=10)).stored
    again = mem.report(req, chat_reply("a", prompt_tokens=10))
    assert [m.source for m in mem.messages()] == ["request", "reply"]
    assert again.stored is False and again.not_stored.startswith("already reported")


def test_out_of_order_report_is_not_kept(engine, caplog):
    mem = engine.memory("m")
    first = mem.decorate({"model": "gpt-4.1", "messages": [user("q1")]})
    mem.decorate({"model": "gpt-4.1", "messages": [user("q1"), user("q2")]})
    with caplog.at_level(logging.WARNING, logger="fadeway"):
        late = mem.report(first, chat_reply("late", prompt_tokens=10))
    assert "arrived after request 2" in caplog.text
    assert [m.source for m in mem.messages()] == ["request", "request"]
    assert late.stored is False and late.not_stored.startswith("out of order")
    assert "request 1, latest 2" in late.not_stored
    # What the README tells the caller: resend the reply in the next request, it is stored then.
    said = chat_reply("late")["choices"][0]["message"]
    mem.decorate({"model": "gpt-4.1", "messages": [user("q1"), user("q2"), said, user("q3")]})
    assert [m.source for m in mem.messages()] == ["request"] * 4
    r1 = mem.export().requests[0]
    assert r1.ratio_kept is False and "out of order" in r1.ratio_note
    assert mem.correction("gpt-4.1") == 1.0


def _turn(mem, i, provider):
    req = mem.decorate({"model": "gpt-4.1", "messages": [user(f"question number {i} " * (i + 1))]})
    estimate = mem.export().requests[-1].estimate
    mem.report(req, chat_reply(f"answer {i}", prompt_tokens=provider(estimate)))
    return estimate


def test_ratio_converges_and_ignores_an_outlier(engine, caplog):
    mem = engine.memory("m")
    assert mem.correction("gpt-4.1") == 1.0
    for i in range(6):
        _turn(mem, i, lambda e: round(e * 1.1))
    assert mem.correction("gpt-4.1") == pytest.approx(1.1, abs=0.02)
    with caplog.at_level(logging.WARNING, logger="fadeway"):
        _turn(mem, 6, lambda e: e * 40)  # a count from another request entirely
    assert "outside the plausible range" in caplog.text
    assert mem.correction("gpt-4.1") == pytest.approx(1.1, abs=0.02)
    assert mem.export().requests[-1].ratio_kept is False
    for i in range(7, 10):
        _turn(mem, i, lambda e: round(e * 1.25))
    assert mem.correction("gpt-4.1") == pytest.approx(1.25, abs=0.02)


def test_ratio_is_per_model(engine):
    mem = engine.memory("m")
    req = mem.decorate({"model": "gpt-4.1", "messages": [user("hello there")]})
    estimate = mem.export().requests[-1].estimate
    mem.report(req, chat_reply("a", prompt_tokens=round(estimate * 1.5)))
    assert mem.correction("gpt-4.1") == pytest.approx(1.5, abs=0.05)
    assert mem.correction("gpt-4o-mini") == 1.0


def test_measure_applies_the_correction(engine):
    mem = engine.memory("m")
    request = {"model": "gpt-4.1", "messages": [user("a fairly long question " * 20)]}
    raw = mem.measure(request)
    req = mem.decorate(request)
    estimate = mem.export().requests[-1].estimate
    assert raw == estimate
    mem.report(req, chat_reply("a", prompt_tokens=round(estimate * 1.2)))
    assert mem.measure(request) == round(estimate * mem.correction("gpt-4.1"))
    assert mem.measure(request) > raw


def test_estimate_counts_instructions_tools_and_history(engine):
    mem = engine.memory("m")
    base = {"model": "gpt-4.1", "messages": [user("hi")]}
    with_system = {**base, "messages": [{"role": "system", "content": "word " * 100}, user("hi")]}
    with_tools = {
        **base,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "lookup",
                    "description": "word " * 100,
                    "parameters": {"type": "object"},
                },
            }
        ],
    }
    b, s, t = mem.measure(base), mem.measure(with_system), mem.measure(with_tools)
    assert 100 <= s - b <= 110
    assert 100 <= t - b <= 130


def test_cl100k_models_are_estimated_with_cl100k(engine):
    from fadeway.tokens import encoding_for_model

    assert encoding_for_model("gpt-4") == "cl100k_base"
    assert encoding_for_model("gpt-3.5-turbo-0125") == "cl100k_base"
    assert encoding_for_model("gpt-4.1") == "o200k_base"
    assert encoding_for_model("gpt-4o-mini") == "o200k_base"
    assert encoding_for_model(None) == "o200k_base"
    mem = engine.memory("m")
    mem.decorate({"model": "gpt-4", "messages": [user("hi")]})
    assert mem.export().requests[-1].encoding == "cl100k_base"
