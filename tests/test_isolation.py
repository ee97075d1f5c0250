"""Memories in one file never see each other."""

from __future__ import annotations

import msgspec

from helpers import call, chat_reply


def test_two_memories_in_one_file_never_see_each_other(engine):
    a, b = engine.memory("a"), engine.memory("b")
    req_a = a.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": "alpha"}]})
    req_b = b.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": "beta"}]})
    a.report(req_a, chat_reply(None, tool_calls=[call("shared-id")], prompt_tokens=1000))
    # b never made call "shared-id": its output is refused even though a's call has that id.
    import pytest

    from fadeway.errors import UnmatchedToolOutputError

    with pytest.raises(UnmatchedToolOutputError):
        b.decorate({"messages": [{"role": "tool", "tool_call_id": "shared-id", "content": "x"}]})
    out_b = b.decorate(
        {
            "model": "gpt-4.1",
            "messages": [{"role": "user", "content": "beta"}, {"role": "user", "content": "gamma"}],
        }
    )
    assert [m["content"] for m in out_b["messages"]] == ["beta", "gamma"]
    assert [msgspec.json.decode(m.body)["content"] for m in b.messages()] == ["beta", "gamma"]
    assert len(a.messages()) == 2
    # a's kept ratio (whatever it is) is not b's.
    assert b.correction("gpt-4.1") == 1.0
    assert [r.n for r in b.export().requests] == [1, 2]
    assert req_b["messages"] == [{"role": "user", "content": "beta"}]


def test_same_messages_in_two_memories_are_two_histories(engine):
    msgs = [{"role": "user", "content": "same"}]
    for mid in ("x", "y"):
        engine.memory(mid).decorate({"messages": msgs})
    assert [m.seq for m in engine.memory("x").messages()] == [0]
    assert [m.seq for m in engine.memory("y").messages()] == [0]


def test_every_statement_on_a_memory_is_keyed_by_its_id(engine):
    """Trace every SQL statement the three calls run: each names the memory it works on."""
    statements = []
    conn = engine.store._connection()
    conn.set_trace_callback(statements.append)
    mem = engine.memory("m")
    req = mem.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": "q"}]})
    mem.report(req, chat_reply("a", prompt_tokens=10))
    mem.correction("gpt-4.1")
    mem.export()
    conn.set_trace_callback(None)
    data = [s for s in statements if any(t in s for t in ("memories", "messages", "requests"))]
    assert len(data) >= 10
    for sql in data:
        assert "memory_id = 'm'" in sql or ("INSERT" in sql and "'m'" in sql), sql
