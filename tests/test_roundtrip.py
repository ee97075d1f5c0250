"""Round trips: what is stored comes back byte for byte, each message is stored once however
the history is sent, and export → import → export is identical."""

from __future__ import annotations

import itertools
from unittest import mock

import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import fadeway
from fadeway.decorate.align import digests_of_sent
from fadeway.wire import parse_request
from fadeway.wire.canonical import digest_of
from strategies import chat_conversations, responses_conversations

_settings = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
conversations = st.one_of(chat_conversations(), responses_conversations())


def _history(request):
    return parse_request(request).history


@pytest.fixture
def fresh(tmp_path_factory):
    """A new engine per hypothesis example (each in its own file)."""
    engines = []

    def make():
        eng = fadeway.open(tmp_path_factory.mktemp("rt") / "m.db", clock=lambda: 1.7e9)
        engines.append(eng)
        return eng

    yield make
    for eng in engines:
        eng.close()


@_settings
@given(conversations)
def test_stored_and_exported_messages_are_byte_identical(fresh, request_):
    mem = fresh().memory("m")
    mem.decorate(request_)
    history = _history(request_)
    doc = mem.export()
    assert [bytes(m.message) for m in doc.messages] == [msgspec.json.encode(m) for m in history]
    assert [msgspec.json.decode(m.message) for m in doc.messages] == history
    # The JSON writer keeps every byte too.
    again = fadeway.loads(fadeway.dumps(doc))
    assert [bytes(m.message) for m in again.messages] == [bytes(m.message) for m in doc.messages]


@_settings
@given(conversations, st.data())
def test_full_then_only_new_stores_each_message_once(fresh, request_, data):
    history = _history(request_)
    assume(history)
    key = "messages" if "messages" in request_ else "input"
    head = (
        request_[key][: len(request_[key]) - len(history)]
        if isinstance(request_[key], list)
        else []
    )
    k = data.draw(st.integers(1, len(history)), label="split")
    # A delta whose first message equals the first stored one is indistinguishable from a
    # resent full history; the contract reads it as the full history.
    assume(k == len(history) or digest_of(history[k]) != digest_of(history[0]))
    # A delta that opens with a system message reads it as instructions, by the contract.
    assume(k == len(history) or _history({**request_, key: history[k:]}) == history[k:])
    mem = fresh().memory("m")
    mem.decorate({**request_, key: head + history[:k]})
    mem.decorate({**request_, key: head + history[:k]})  # resent as is: nothing new
    if k < len(history):
        mem.decorate({**request_, key: head + history[k:]})  # only the new part
    out = mem.decorate({**request_, key: head + history})  # the whole conversation again
    assert [msgspec.json.decode(m.body) for m in mem.messages()] == history
    assert out[key] == head + history
    assert {k_: v for k_, v in out.items() if k_ != key} == {
        k_: v for k_, v in request_.items() if k_ != key
    }


@_settings
@given(conversations)
def test_export_import_export_is_identical(fresh, request_):
    source = fresh().memory("m")
    source.decorate(request_)
    doc = source.export()
    target = fresh()
    target.import_memory(fadeway.dumps(doc))
    assert fadeway.dumps(target.memory("m").export()) == fadeway.dumps(doc)
    # The restored memory continues like the original: resending the history adds nothing.
    target.memory("m").decorate(request_)
    assert len(target.memory("m").messages()) == len(doc.messages)


_ids = itertools.count()


@pytest.mark.both_stores
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(conversations)
def test_either_store_keeps_every_byte_and_exports_what_it_imported(engine, request_):
    """The round trips above on both stores (fewer examples: they share one store, each in a
    memory of its own, where the tests above open a file per example)."""
    n = next(_ids)
    mem = engine.memory(f"m{n}")
    mem.decorate(request_)
    history = _history(request_)
    doc = mem.export()
    assert [bytes(m.message) for m in doc.messages] == [msgspec.json.encode(m) for m in history]
    copy = msgspec.structs.replace(doc, memory_id=f"copy{n}")
    engine.import_memory(fadeway.dumps(copy))
    restored = engine.memory(f"copy{n}")
    assert fadeway.dumps(restored.export()) == fadeway.dumps(copy)
    restored.decorate(request_)
    assert len(restored.messages()) == len(doc.messages)


@pytest.mark.both_stores
def test_import_refuses_an_existing_memory_and_bad_documents(engine):
    from fadeway.errors import ImportConflictError, InvalidExportError

    mem = engine.memory("m")
    mem.decorate({"messages": [{"role": "user", "content": "hi"}]})
    doc = mem.export()
    with pytest.raises(ImportConflictError, match="already exists"):
        engine.import_memory(doc)
    with pytest.raises(InvalidExportError, match="not a fadeway memory export"):
        engine.import_memory({"memory_id": "x"})
    with pytest.raises(InvalidExportError, match="not JSON"):
        engine.import_memory(b"{")
    with pytest.raises(InvalidExportError, match="export version 9"):
        engine.import_memory(msgspec.structs.replace(doc, memory_id="y", fadeway_export=9))
    bad = msgspec.json.decode(fadeway.dumps(doc))
    bad["memory_id"] = "z"
    bad["messages"].append(
        {
            **bad["messages"][0],
            "seq": 1,
            "message": {"role": "tool", "tool_call_id": "nope", "content": "x"},
        }
    )
    with pytest.raises(InvalidExportError, match="no earlier assistant call has id 'nope'"):
        engine.import_memory(bad)
    assert sorted(engine.memory_ids()) == ["m"]


@pytest.mark.both_stores
def test_jsonl_writer_streams_many_memories(engine, tmp_path):
    import io

    for mid in ("a", "b", "c"):
        engine.memory(mid).decorate({"messages": [{"role": "user", "content": mid}]})
    buf = io.BytesIO()
    assert fadeway.write_jsonl((engine.memory(m).export() for m in engine.memory_ids()), buf) == 3
    buf.seek(0)
    docs = list(fadeway.read_jsonl(buf))
    assert [d.memory_id for d in docs] == ["a", "b", "c"]
    assert buf.getvalue().count(b"\n") == 3


@_settings
@given(conversations, st.data())
def test_the_digests_of_a_sent_history_are_digest_of_each_message(fresh, request_, data):
    # Sent against a stored history: the same messages, some edited (a value changed, keys
    # reordered, a null added), some dropped or repeated, in another order.
    engine = fresh()
    mem = engine.memory("m")
    mem.decorate(request_)
    stored = engine.services.mirrors.peek("m")
    history = _history(request_)
    assume(history)

    def vary(m):
        if not isinstance(m, dict):
            return m
        how = data.draw(st.sampled_from(["same", "edit", "reorder", "null"]))
        if how == "edit":
            return {**m, "content": "edited"}
        if how == "reorder":
            return dict(reversed(list(m.items())))
        return {**m, "name": None} if how == "null" else m

    sent = [vary(m) for m in data.draw(st.lists(st.sampled_from(history), max_size=8))]
    view = data.draw(st.lists(st.integers(0, len(stored) - 1), max_size=len(sent)))
    assert digests_of_sent(sent, stored, view, engine.limits) == [digest_of(m) for m in sent]


@pytest.mark.both_stores
def test_a_resent_history_is_recognised_without_hashing_it_again(engine):
    mem = engine.memory("m")
    history = [
        {"role": "user", "content": f"question {i}"}
        if i % 2 == 0
        else {"role": "assistant", "content": f"answer {i}", "refusal": None}
        for i in range(9)
    ]
    mem.decorate({"messages": history})
    with mock.patch("fadeway.decorate.align.digest_of", wraps=digest_of) as hashed:
        mem.decorate({"messages": [*history, {"role": "user", "content": "and now?"}]})
    assert hashed.call_count == 1  # the new message only
    assert len(mem.messages()) == 10


def test_an_export_carries_the_work_its_lane_had_still_to_do(tmp_path, clock):
    """Exported while the lane is behind (right after a note, a crash, or with background
    lanes): the copy queues the same pending jobs, so once both lanes have run, the copy holds
    the same graph and traces; export → import → export stays identical."""
    from conftest import open_small
    from helpers import chat_reply, note_call

    source = open_small(tmp_path / "a.db", clock)
    mem = source.memory("m")
    history: list = []
    for t in range(60):
        clock.advance(60)
        history.append(
            {"role": "user", "content": f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(40))}
        )
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        if any(x.get("function", {}).get("name") == "note" for x in req.get("tools", [])):
            mem.report(
                req,
                chat_reply(
                    None,
                    tool_calls=[
                        note_call("n1", [("Dana owns the checkout.", "Dana", "checkout", False)])
                    ],
                ),
            )
            break  # the lane has not run since the note
        mem.report(req, reply := chat_reply(f"answer {t}"))
        history.append(reply["choices"][0]["message"])
        source.drain()
    doc = mem.export()
    assert {"graph", "score"} <= {j.kind for j in doc.jobs}
    copy = open_small(tmp_path / "b.db", clock)
    copy.import_memory(fadeway.dumps(doc))
    assert fadeway.dumps(copy.memory("m").export()) == fadeway.dumps(doc)
    source.drain()
    copy.drain()
    done = [source.memory("m").export(), copy.memory("m").export()]
    assert done[0].entities and done[0].traces and not done[0].jobs
    assert [(d.entities, d.edges, d.traces) for d in done] == [
        (done[0].entities, done[0].edges, done[0].traces)
    ] * 2
    with pytest.raises(fadeway.errors.InvalidExportError, match=r"unknown kind \['teleport'\]"):
        copy.import_memory(
            msgspec.structs.replace(
                doc,
                memory_id="x",
                jobs=[
                    fadeway.records.ExportedJob(
                        kind="teleport", payload=msgspec.Raw(b"{}"), created_at=0.0
                    )
                ],
            )
        )
    source.close()
    copy.close()
