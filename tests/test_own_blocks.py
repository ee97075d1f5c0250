"""Only what fadeway emitted is fadeway's (issue 33, item 4): a block is recognised by what the
memory recorded of the blocks it returned, not by its look, so a caller's own system message
that reads like a facts block, a recall block or a note ask is the caller's: sent on and stored
as its instructions. A decorated request sent back has every block fadeway put in it stripped,
whichever version of the facts block it holds; a memory from before the blocks were recorded
recognises them by their look, as before; an export carries what was recorded."""

from __future__ import annotations

import json
import sqlite3

import msgspec
import pytest

import fadeway
from conftest import open_small
from fadeway import blocks
from fadeway.errors import InvalidExportError
from helpers import chat_reply, note_call
from test_migrations import _as_of

#: Texts that read as fadeway's blocks, written by a caller as its own instructions.
LOOKALIKES = {
    "facts block": blocks.facts_block(
        [blocks.BlockFact("Answer in French.", "assistant", "French")], []
    ),
    "recall block": blocks.recall_block(
        [
            blocks.RecallGroup(
                "house rules",
                [blocks.RecalledFact("Answer in French.", 1_767_225_600.0, 1, 1)],
            )
        ],
        [],
        [],
    ),
    "note ask": blocks.note_ask(3, 5),
}
NOTES = [[(f"Fact {i} about the launch.", "launch", f"item {i}", False)] for i in range(3)]


def _instructions(mem) -> list:
    return json.loads(bytes(mem.export().instructions))["messages"]


def _stored_blocks(mem) -> list[str]:
    """Stored messages and instructions whose text reads as a block."""
    texts = [json.loads(m.body).get("content") for m in mem.messages()]
    texts += [m.get("content") for m in _instructions(mem)]
    return [t for t in texts if blocks.is_block(t)]


def _blocks_in(request: dict) -> list[str]:
    key = "messages" if "messages" in request else "input"
    return [
        m["content"]
        for m in request[key]
        if m.get("role") in ("system", "developer") and blocks.is_block(m.get("content"))
    ]


def _user(t: int) -> dict:
    words = " ".join(f"w{t}_{i}" for i in range(40))
    return {"role": "user", "content": f"Turn {t}: what about item {t % 3} and the launch? {words}"}


def _talk(engine, mem, clock, turns, history, notes, *, between=None):
    """An agent loop that sends back each decorated request as its history, with the reply and
    a new user message; notes given when asked. `between(t, request)` runs after each report
    and drain. Returns the history to send next and every decorated request."""
    requests = []
    for t in range(turns):
        clock.advance(60)
        out = mem.decorate({"model": "gpt-4.1", "messages": [*history, _user(t)]})
        requests.append(out)
        asked = any(x.get("function", {}).get("name") == "note" for x in out.get("tools") or [])
        calls = [note_call(f"note_{t}", notes.pop(0))] if asked and notes else None
        reply = chat_reply(f"answer {t}", tool_calls=calls)
        mem.report(out, reply)
        engine.drain()
        history = [*out["messages"], reply["choices"][0]["message"]]
        if between is not None:
            between(t, out)
    return history, requests


@pytest.mark.parametrize("kind", list(LOOKALIKES))
@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_a_callers_own_instructions_that_read_as_a_block_are_kept(engine, kind, fmt):
    text = LOOKALIKES[kind]
    assert blocks.is_block(text)
    mem = engine.memory("m")
    for t in range(3):
        if fmt == "chat":
            sent = {"model": "gpt-4.1", "messages": [{"role": "system", "content": text}]}
            sent["messages"].append({"role": "user", "content": f"Hello {t}."})
        else:
            sent = {"model": "gpt-4.1", "input": [{"role": "developer", "content": text}]}
            sent["input"].append({"role": "user", "content": f"Hello {t}."})
        out = mem.decorate(sent)
        key = "messages" if fmt == "chat" else "input"
        assert out[key][0] == sent[key][0], "sent on"
        assert _instructions(mem) == [sent[key][0]], "stored as the caller's instructions"
        reply = (
            chat_reply(f"Bonjour {t}.")
            if fmt == "chat"
            else {
                "output": [
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": f"Bonjour {t}."}],
                    }
                ]
            }
        )
        mem.report(out, reply)
    assert [m.role for m in mem.messages()] == ["user", "assistant"] * 3


def test_a_lookalike_of_the_callers_own_among_fadeways_blocks_is_kept(small, clock):
    """In a memory that has returned facts blocks, recall blocks and note asks, a caller's
    own block-like instructions still go on and are stored, while fadeway's are stripped."""
    mem = small.memory("m")
    mine = {"role": "system", "content": LOOKALIKES["facts block"]}
    history, requests = _talk(small, mem, clock, 40, [mine], list(NOTES))
    kinds = {b[:12] for r in requests for b in _blocks_in(r)[1:]}
    assert len(kinds) == 3, "a facts block, recall blocks and note asks were returned"
    assert all(r["messages"][0] == mine for r in requests)
    assert _instructions(mem) == [mine]
    assert _stored_blocks(mem) == [mine["content"]]


def test_a_resent_request_loses_every_block_even_an_older_facts_block(small, clock):
    """A caller sends back a decorated request after another decorate (a second caller asking
    for the view) has changed the facts block: the older version it holds is still
    fadeway's, and nothing of fadeway's is stored."""
    mem = small.memory("m")
    older: list[str] = []

    def view_meanwhile(t, out):
        before = mem.export().facts_block
        mem.decorate({"model": "gpt-4.1", "messages": []})  # another caller: the view
        after = mem.export().facts_block
        if before is not None and after != before:
            older.append(before)

    history, requests = _talk(
        small,
        mem,
        clock,
        40,
        [{"role": "system", "content": "Be brief."}],
        list(NOTES),
        between=view_meanwhile,
    )
    assert older, "a facts block changed between a request and its resending"
    resent = {b for r in requests for b in _blocks_in(r)}
    assert resent & set(older)
    assert _stored_blocks(mem) == []
    assert _instructions(mem) == [{"role": "system", "content": "Be brief."}]
    out = mem.decorate({"model": "gpt-4.1", "messages": [*history, _user(99)]})
    assert len([b for b in _blocks_in(out) if b.startswith(blocks.FACTS_HEADER)]) == 1
    assert _stored_blocks(mem) == []


def _untracked(tmp_path, clock) -> fadeway.Engine:
    """An engine on a store written at schema 9 (before blocks were recorded), holding a
    conversation whose facts block is set, migrated on open."""
    today = tmp_path / "today.db"
    eng = open_small(today, clock)
    mem = eng.memory("m")
    _talk(eng, mem, clock, 30, [{"role": "system", "content": "Be brief."}], list(NOTES))
    eng.close()
    old = tmp_path / "v9.db"
    _as_of(9, today, old)
    with sqlite3.connect(old) as conn:
        assert conn.execute("SELECT COUNT(*) FROM memories").fetchone() == (1,)
    return open_small(old, clock)


def test_a_memory_from_before_recognises_blocks_by_their_look(tmp_path, clock):
    eng = _untracked(tmp_path, clock)
    mem = eng.memory("m")
    doc = mem.export()
    assert doc.blocks_tracked is False and doc.emitted == [] and doc.facts_block
    stored = len(mem.messages())
    clock.advance(60)
    sent = [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": doc.facts_block},  # as an older fadeway returned it
        *map(json.loads, (m.body for m in mem.messages())),
        {"role": "system", "content": blocks.note_ask(1, 2)},
        {"role": "user", "content": "Next."},
    ]
    out = mem.decorate({"model": "gpt-4.1", "messages": sent})
    assert len(mem.messages()) == stored + 1
    assert _stored_blocks(mem) == []
    assert _instructions(mem) == [{"role": "system", "content": "Be brief."}]
    mem.report(out, chat_reply("ok"))
    # What it returns from now on is recorded, but the memory stays untracked.
    assert mem.export().emitted and mem.export().blocks_tracked is False
    eng.close()


def test_export_and_import_keep_what_was_recorded(tmp_path, clock):
    src = open_small(tmp_path / "src.db", clock)
    mem = src.memory("m")
    mine = {"role": "system", "content": LOOKALIKES["note ask"]}
    history, _ = _talk(src, mem, clock, 30, [mine], list(NOTES))
    doc = mem.export()
    assert doc.blocks_tracked is True and doc.emitted == sorted(doc.emitted)
    assert len(doc.emitted) >= 3
    src.close()
    dst = open_small(tmp_path / "dst.db", clock)
    dst.import_memory(fadeway.dumps(doc))
    copy = dst.memory("m")
    assert fadeway.dumps(copy.export()) == fadeway.dumps(doc)
    stored = len(copy.messages())
    clock.advance(60)
    out = copy.decorate({"model": "gpt-4.1", "messages": [*history, _user(99)]})
    assert out["messages"][0] == mine
    assert len(copy.messages()) == stored + 1
    assert _stored_blocks(copy) == [mine["content"]]
    dst.close()


def test_an_untracked_export_imports_untracked_and_an_older_one_too(tmp_path, clock):
    eng = _untracked(tmp_path, clock)
    doc = eng.memory("m").export()
    eng.close()
    dst = open_small(tmp_path / "dst.db", clock)
    dst.import_memory(fadeway.dumps(msgspec.structs.replace(doc, memory_id="a")))
    assert dst.memory("a").export().blocks_tracked is False
    older = json.loads(fadeway.dumps(msgspec.structs.replace(doc, memory_id="b")))
    del older["blocks_tracked"], older["emitted"]  # an export from before they were kept
    dst.import_memory(older)
    copy = dst.memory("b")
    assert copy.export().blocks_tracked is False
    clock.advance(60)
    sent = [
        {"role": "system", "content": doc.facts_block},
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Next."},
    ]
    copy.decorate({"model": "gpt-4.1", "messages": sent})
    assert _stored_blocks(copy) == []  # by its look, as the source would have
    dst.close()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["emitted"].append("not hex at all, but 32 letters!!"), r"emitted\[\d+\]"),
        (lambda d: d["emitted"].append("ab" * 15), r"emitted\[\d+\] is 'abab"),
        (lambda d: d["emitted"].append("AB" * 16), r"emitted\[\d+\] is 'ABAB"),
        (lambda d: d["emitted"].append(d["emitted"][0]), r"emitted\[\d+\] repeats"),
        (lambda d: d["emitted"].append(7), r"emitted\[\d+\]"),
        (lambda d: d.__setitem__("blocks_tracked", 1), r"blocks_tracked"),
    ],
)
def test_a_malformed_digest_is_refused_naming_the_field(small, clock, mutate, message):
    mem = small.memory("m")
    _talk(small, mem, clock, 16, [], list(NOTES))
    doc = json.loads(fadeway.dumps(mem.export()))
    assert doc["emitted"]
    doc["memory_id"] = "copy"
    mutate(doc)
    with pytest.raises(InvalidExportError, match=message):
        small.import_memory(doc)
    assert small.memory_ids() == ["m"]
    # A document given as the struct itself is checked the same.
    if not isinstance(doc["emitted"][-1], int) and doc["blocks_tracked"] is True:
        struct = msgspec.json.decode(json.dumps(doc), type=fadeway.MemoryExport)
        with pytest.raises(InvalidExportError, match=message):
            small.import_memory(struct)


def test_a_store_keeps_each_memorys_record_apart(small, clock):
    """What one memory returned does not make a block the caller sends another its own."""
    a, b = small.memory("a"), small.memory("b")
    _talk(small, a, clock, 16, [], list(NOTES))
    theirs = a.export().facts_block
    assert theirs, "memory a returned a facts block"
    clock.advance(60)
    sent = [{"role": "system", "content": theirs}, {"role": "user", "content": "Hi."}]
    out = b.decorate({"model": "gpt-4.1", "messages": sent})
    assert out["messages"][0] == sent[0]
    assert _instructions(b) == [sent[0]]


def test_a_memory_made_today_is_tracked(engine):
    mem = engine.memory("m")
    mem.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi."}]})
    assert mem.export().blocks_tracked is True


@pytest.mark.parametrize("kind", list(LOOKALIKES))
def test_a_callers_block_like_system_message_within_the_history_is_stored(engine, kind):
    mem = engine.memory("m")
    sent = [
        {"role": "user", "content": "Hi."},
        {"role": "assistant", "content": "Hello."},
        {"role": "system", "content": LOOKALIKES[kind]},
        {"role": "user", "content": "Go on."},
    ]
    out = mem.decorate({"model": "gpt-4.1", "messages": sent})
    assert out["messages"] == sent
    assert [json.loads(m.body) for m in mem.messages()] == sent
