"""Memories in one store never see each other, on SQLite and on PostgreSQL."""

from __future__ import annotations

import msgspec
import pytest

from helpers import call, chat_reply

#: Memory ids a caller might send to break out: NUL, quotes, placeholders of either driver,
#: SQL, backslashes, any Unicode, the longest allowed, and ids that differ in one NUL.
HOSTILE_IDS = [
    "a",
    "a\x00",
    "\x00",
    "a\x00b",
    "'; DROP TABLE memories; --",
    "' OR '1'='1",
    '"',
    "?",
    "%s",
    "%(memory_id)s",
    "$1",
    "\\",
    "é",
    "🙂",
    "x" * 1024,
]


@pytest.mark.both_stores
def test_two_memories_in_one_file_never_see_each_other(engine):
    a, b = engine.memory("a"), engine.memory("b")
    req_a = a.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": "alpha"}]})
    req_b = b.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": "beta"}]})
    a.report(req_a, chat_reply(None, tool_calls=[call("shared-id")], prompt_tokens=1000))
    # b never made call "shared-id": its output is refused even though a's call has that id.
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


@pytest.mark.both_stores
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


@pytest.mark.both_stores
def test_hostile_memory_ids_are_kept_apart_and_listed_exactly(engine):
    """Each id's canary is in its own history and export alone; the store lists every id as
    given, in code point order on both stores."""
    for i, mid in enumerate(HOSTILE_IDS):
        engine.memory(mid).decorate({"messages": [{"role": "user", "content": f"canary-{i}"}]})
    for i, mid in enumerate(HOSTILE_IDS):
        mem = engine.memory(mid)
        assert [msgspec.json.decode(m.body)["content"] for m in mem.messages()] == [f"canary-{i}"]
        doc = mem.export()
        assert doc.memory_id == mid
        exported = msgspec.json.encode(doc).decode()
        others = [j for j in range(len(HOSTILE_IDS)) if f'"canary-{j}"' in exported]
        assert others == [i], mid
    assert list(engine.store.memory_ids()) == sorted(HOSTILE_IDS)


@pytest.mark.postgres
@pytest.mark.parametrize("db", ["postgres"], indirect=True)
def test_every_statement_on_postgres_is_keyed_by_its_id(engine, monkeypatch):
    """Record every statement the three calls run on PostgreSQL: each names the memory, bound
    as a parameter (its UTF-8 bytes), never written into the SQL."""
    from fadeway.store import postgres

    seen: list[tuple[str, list]] = []
    execute, executemany = postgres._Executor.execute, postgres._Executor.executemany

    def record_one(self, sql, parameters=()):
        seen.append((sql, list(parameters)))
        return execute(self, sql, parameters)

    def record_many(self, sql, parameters):
        rows = list(parameters)
        seen.extend((sql, list(row)) for row in rows)
        return executemany(self, sql, rows)

    monkeypatch.setattr(postgres._Executor, "execute", record_one)
    monkeypatch.setattr(postgres._Executor, "executemany", record_many)
    mid = "m'; --"
    mem = engine.memory(mid)
    req = mem.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": "q"}]})
    mem.report(req, chat_reply("a", prompt_tokens=10))
    mem.correction("gpt-4.1")
    mem.export()
    assert len(seen) >= 10
    for sql, args in seen:
        assert "memory_id" in sql and mid.encode() in args, sql
        assert mid not in sql
