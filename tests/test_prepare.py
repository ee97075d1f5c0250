"""A request decorated now and stored once the provider accepted it (`Memory.prepare`,
`commit`, `discard`): what a proxy does so that a refused request leaves nothing."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import msgspec
import pytest

import fadeway
from fadeway.decorate.view import block_digest
from fadeway.store.base import WRITES, Transaction
from helpers import chat_reply, converse_with_notes, note_call

pytestmark = pytest.mark.both_stores  # each test runs on SQLite and on PostgreSQL


def _asks(request: dict[str, Any]) -> bool:
    return any((t.get("function") or {}).get("name") == "note" for t in request.get("tools") or [])


def _exported(mem: fadeway.Memory) -> bytes:
    """The memory's export, but its id: two memories told the same are alike."""
    return fadeway.dumps(msgspec.structs.replace(mem.export(), memory_id=""))


def _turn(t: int) -> str:
    return f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(40))


def test_prepared_and_committed_is_what_decorate_stores_and_discarded_is_nothing(small, clock):
    """Two memories told one conversation long enough to forget (note asks answered, episodes
    sealed and faded, the lane drained after each reply): one decorated, the other prepared
    and committed, with a refused request discarded before each turn. Each turn's request is
    the same for both, and so is everything they store."""
    direct, prepared = small.memory("direct"), small.memory("prepared")
    history: list[dict[str, Any]] = []
    notes = 0
    for t in range(40):
        clock.advance(60)
        history.append({"role": "user", "content": _turn(t)})
        body = {"model": "gpt-4.1", "messages": history}
        if t:
            before = _exported(prepared)
            refused = prepared.prepare(
                {**body, "messages": [*history[:-1], {"role": "user", "content": "no"}]}
            )
            prepared.discard(refused)
            assert _exported(prepared) == before
        request = direct.decorate(body)
        held = prepared.prepare(body)
        assert held.request == request
        assert prepared.commit(held) == request
        calls = (
            [note_call(f"note_{t}", [(f"fact {t}", f"topic{t}", "w", False)])]
            if _asks(request)
            else None
        )
        notes += bool(calls)
        reply = chat_reply(f"answer {t}", tool_calls=calls)
        for mem in (direct, prepared):
            mem.report(request, reply)
        small.drain()
        history.append(reply["choices"][0]["message"])
    assert notes >= 2 and any(e.state != "live" for e in direct.episodes())
    assert _exported(prepared) == _exported(direct)


def test_a_refused_first_request_leaves_no_memory(small):
    mem = small.memory("new")
    held = mem.prepare({"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]})
    assert held.request["messages"][-1] == {"role": "user", "content": "Hi"}
    mem.discard(held)
    assert "new" not in small.memory_ids()


def test_a_commit_after_another_caller_stored_decorates_again_and_stores_once(small, clock):
    """Another caller decorates the same history between prepare and commit: the commit
    finds the memory changed, decorates again with the recall it made, stores nothing twice,
    and returns the request that `report` then finds."""
    mem = small.memory("m")
    history = [{"role": "user", "content": "Plan the launch"}]
    body = {"model": "gpt-4.1", "messages": history}
    held = mem.prepare(body)
    other = mem.decorate(body)
    clock.advance(5)
    stored = mem.commit(held)
    assert stored["messages"] == other["messages"]
    reply = chat_reply("Done")
    mem.report(stored, reply)
    assert [json.loads(m.body)["content"] for m in mem.messages()] == ["Plan the launch", "Done"]
    assert len(mem.export().requests) == 2  # both decorates are recorded, one answered
    assert [r.replied for r in mem.export().requests] == [False, True]


def test_the_blocks_a_request_sent_stay_fadeways_own_when_it_is_decorated_again(small, clock):
    """A commit that decorates again may show other blocks than those sent (a seal meanwhile
    changed the facts block, and so what the recall block leaves out): the blocks sent are
    recorded as fadeway's own all the same, so a caller that sends them back has them taken
    out, not stored as its words. Here one such block stands in the prepared request's."""
    mem = small.memory("m")
    history = converse_with_notes(
        small, mem, clock, [[("Dana owns the launch", "Dana", "launch", True)]]
    )
    history.append({"role": "user", "content": "Who owns the launch?"})
    held = mem.prepare({"model": "gpt-4.1", "messages": history})
    sent = [*held._plan.emitted, block_digest("a block the decorate again does not show")]
    held = replace(held, _plan=replace(held._plan, emitted=sent))
    mem.decorate({"model": "gpt-4.1", "messages": history})  # the memory changes meanwhile
    mem.commit(held)
    with small.store.read("m") as tx:
        assert tx.emitted_among(sent) == set(sent)


def test_a_request_prepared_by_one_memory_is_refused_by_another(small):
    held = small.memory("a").prepare(
        {"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]}
    )
    with pytest.raises(ValueError, match="prepared by memory 'a', not 'b'"):
        small.memory("b").commit(held)
    assert list(small.memory_ids()) == []


def test_the_version_counts_changes_but_not_the_lanes_bookkeeping(small):
    """A write transaction that changed the memory counts in its version; one that only kept
    the lane's books (its lease) does not, so a lane at work does not make every prepared
    request decorate again."""
    store = small.store
    mem = small.memory("m")
    mem.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]})
    with store.read("m") as tx:
        first = tx.version()
    assert first is not None and first >= 1
    with store.write("m") as tx:
        tx.bookkeeping = True
        assert tx.claim_lane("w", 0.0, 10.0)
        tx.release_lane("w")
    with store.write("m") as tx:
        tx.enqueue("probe", b"{}", 0.0)
    with store.read("m") as tx:
        assert tx.version() == first + 1
    with store.read("other") as tx:
        assert tx.version() is None


def test_every_write_is_recorded():
    """The writes a recorded decorate makes again are every method of a transaction that
    writes: one missing from `WRITES` would be left out of a committed request."""
    methods = {n for n in dir(Transaction) if not n.startswith("_")}
    verbs = ("insert_", "set_", "append_", "create_", "enqueue", "finish_", "record_", "park_")
    verbs += ("revive_", "claim_", "release_", "bump_")
    assert {n for n in methods if n.startswith(verbs)} <= WRITES <= methods
