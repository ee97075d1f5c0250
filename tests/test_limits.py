"""Limits on every size (issue 33, item 2): a message's bytes, messages per request, a note's
entries and bytes. Each is a setting of `fadeway.open`; each refusal names its setting and comes
before anything is written; a note over them is not taken, and its call is shown as a stub."""

from __future__ import annotations

import json

import pytest

import fadeway
from conftest import SMALL_CEILING, open_small
from fadeway import _constants as C
from fadeway import errors
from fadeway.notes.tool import NOTE_NOT_READ, Note, NoteEntry
from fadeway.notes.writers import NoteWriter
from helpers import call, chat_reply, note_call

USER = {"role": "user", "content": "Hello there."}


def _started(engine: fadeway.Engine, memory_id: str = "m") -> fadeway.Memory:
    """A memory holding one reported turn."""
    mem = engine.memory(memory_id)
    sent = mem.decorate({"model": "gpt-4.1", "messages": [USER]})
    mem.report(sent, chat_reply("Hi."))
    return mem


def _unchanged(mem: fadeway.Memory, before: bytes) -> None:
    assert fadeway.dumps(mem.export()) == before


def test_the_default_limits_are_the_named_constants(engine):
    limits = engine.limits
    assert (limits.max_message_bytes, limits.max_request_messages) == (2**20, 50_000)
    assert (limits.max_note_facts, limits.max_note_bytes) == (200, 64 * 2**10)
    assert limits.max_note_bytes == C.MAX_NOTE_BYTES


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "10"])
def test_a_limit_that_is_not_a_positive_integer_is_refused_before_the_store_opens(tmp_path, value):
    with pytest.raises(ValueError, match="max_note_facts must be a positive integer"):
        fadeway.open(tmp_path / "x.db", max_note_facts=value)
    assert not (tmp_path / "x.db").exists()


def test_the_defaults_take_a_large_tool_output(engine):
    """A 200 KB tool output (a file, a long log) is stored whole and sent back."""
    mem = engine.memory("m")
    output = "line of a long log\n" * 11_000  # about 200 KB
    assert len(output) > 200_000
    messages = [
        USER,
        chat_reply(None, tool_calls=[call("c1", "read_log")])["choices"][0]["message"],
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]
    sent = mem.decorate({"model": "gpt-4.1", "messages": messages})
    assert sent["messages"][-1]["content"] == output
    assert json.loads(mem.messages()[-1].body)["content"] == output


def test_a_message_over_max_message_bytes_is_refused_naming_it_and_nothing_is_stored(engine):
    mem = _started(engine)
    before = fadeway.dumps(mem.export())
    big = {"role": "user", "content": "x" * (2**20 + 1)}
    with pytest.raises(errors.LimitExceededError, match=r"max_message_bytes") as caught:
        mem.decorate({"model": "gpt-4.1", "messages": [big]})
    assert caught.value.setting == "max_message_bytes"
    assert caught.value.found > caught.value.limit == 2**20
    assert isinstance(caught.value, errors.InvalidRequestError)
    _unchanged(mem, before)


def test_a_first_message_over_the_limit_makes_no_memory(tmp_path, clock):
    with fadeway.open(tmp_path / "x.db", clock=clock, max_message_bytes=1_000) as eng:
        big = {"role": "user", "content": "x" * 2_000}
        with pytest.raises(errors.LimitExceededError, match=r"message 0 holds \d+ bytes"):
            eng.memory("m").decorate({"messages": [big]})
        assert eng.memory_ids() == []


def test_instructions_over_max_message_bytes_are_refused(tmp_path, clock):
    with fadeway.open(tmp_path / "x.db", clock=clock, max_message_bytes=1_000) as eng:
        mem = _started(eng)
        before = fadeway.dumps(mem.export())
        system = {"role": "system", "content": "rule " * 400}
        with pytest.raises(errors.LimitExceededError, match=r"messages\[0\].*max_message_bytes"):
            mem.decorate({"messages": [system, USER]})
        with pytest.raises(errors.LimitExceededError, match=r"instructions.*max_message_bytes"):
            eng.memory("r").decorate({"instructions": "rule " * 400, "input": "hi"})
        _unchanged(mem, before)
        assert eng.memory_ids() == ["m"]


def test_a_request_over_max_request_messages_is_refused_naming_it(tmp_path, clock):
    with fadeway.open(tmp_path / "x.db", clock=clock, max_request_messages=50) as eng:
        mem = _started(eng)
        before = fadeway.dumps(mem.export())
        many = [{"role": "user", "content": f"m{i}"} for i in range(51)]
        with pytest.raises(errors.LimitExceededError, match=r"holds 51 messages.*\(max_request"):
            mem.decorate({"messages": many})
        _unchanged(mem, before)
        mem.decorate({"messages": many[:50]})  # at the limit: taken


def test_the_issues_request_of_100k_messages_is_refused_by_default(engine):
    mem = _started(engine)
    before = fadeway.dumps(mem.export())
    many = [{"role": "user", "content": f"m{i}"} for i in range(100_000)]
    with pytest.raises(errors.LimitExceededError, match=r"100000 messages.*of 50000"):
        mem.decorate({"messages": many})
    _unchanged(mem, before)


def test_a_reply_message_over_max_message_bytes_is_refused_and_nothing_is_stored(tmp_path, clock):
    with fadeway.open(tmp_path / "x.db", clock=clock, max_message_bytes=1_000) as eng:
        mem = eng.memory("m")
        sent = mem.decorate({"messages": [USER]})
        before = fadeway.dumps(mem.export())
        with pytest.raises(errors.LimitExceededError, match=r"reply item 0.*max_message_bytes"):
            mem.report(sent, chat_reply("y" * 2_000))
        _unchanged(mem, before)


def test_an_import_over_the_engines_limits_is_refused_naming_it(tmp_path, clock, engine):
    """An export from an engine with larger limits is checked against the importing one's."""
    mem = _started(engine)
    mem.decorate({"messages": [{"role": "user", "content": "z" * 5_000}]})
    doc = mem.export()
    with fadeway.open(tmp_path / "y.db", clock=clock, max_message_bytes=1_000) as eng:
        with pytest.raises(errors.ExportLimitError, match=r"exported message 2.*max_message"):
            eng.import_memory(doc)
        assert eng.memory_ids() == []
    with fadeway.open(tmp_path / "z.db", clock=clock) as eng:
        assert fadeway.dumps(eng.import_memory(doc).export()) == fadeway.dumps(doc)


# -- notes over the limits ----------------------------------------------------------------


def _user(t: int) -> dict:
    return {"role": "user", "content": f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(40))}


def _asks(request: dict) -> bool:
    return any((t.get("function") or {}).get("name") == "note" for t in request.get("tools") or [])


def _until_ask(mem, clock) -> dict:
    """Talk until a request asks for a note; that request."""
    for t in range(80):
        clock.advance(60)
        req = mem.decorate({"model": "gpt-4.1", "messages": [_user(t)]})
        if _asks(req):
            return req
        mem.report(req, chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30))))
    raise AssertionError("no note was asked for")


def _facts(n: int) -> list[tuple[str, str, str, bool]]:
    return [
        (f"Service {i} runs on host h{i}.", f"service {i}", f"host h{i}", False) for i in range(n)
    ]


def _note_calls(request: dict) -> list[dict]:
    return [
        c
        for m in request["messages"]
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == "note"
    ]


def test_a_reply_with_the_issues_10k_fact_note_is_over_max_message_bytes(tmp_path, clock):
    """Its 1.3 MB message is refused whole, as any message over the limit, before anything is
    written: no model's reply is that long."""
    with open_small(tmp_path / "s.db", clock) as eng:
        mem = eng.memory("m")
        req = _until_ask(mem, clock)
        before = fadeway.dumps(mem.export())
        huge = note_call("n1", _facts(10_000))
        with pytest.raises(errors.LimitExceededError, match=r"reply item 0.*max_message_bytes"):
            mem.report(req, chat_reply(None, tool_calls=[huge]))
        _unchanged(mem, before)


def test_a_3k_fact_note_is_not_taken_and_shown_as_a_stub(tmp_path, clock):
    """A reply within max_message_bytes whose note is over max_note_bytes is stored whole, its
    note is not taken (the ask stands), and the next request shows the call as a short stub,
    answered as an unread note, under the ceiling."""
    with open_small(tmp_path / "s.db", clock) as eng:
        mem = eng.memory("m")
        req = _until_ask(mem, clock)
        huge = note_call("n1", _facts(3_000))
        assert len(huge["function"]["arguments"]) > 300_000
        result = mem.report(req, chat_reply(None, tool_calls=[huge]))
        assert not result.note_taken and result.call_again
        stored = json.loads(mem.messages()[-1].body)
        assert stored["tool_calls"][0]["function"]["arguments"] == huge["function"]["arguments"]
        assert mem.export().notes == []
        assert mem.messages()[-1].tokens < 200  # counted as the view shows it
        nxt = mem.decorate({"model": "gpt-4.1", "messages": []})
        (shown,) = _note_calls(nxt)
        stub = json.loads(shown["function"]["arguments"])
        assert "max_note_bytes" in stub["omitted"] and len(shown["function"]["arguments"]) < 300
        outputs = [m for m in nxt["messages"] if m.get("tool_call_id") == "n1"]
        assert [m["content"] for m in outputs] == [NOTE_NOT_READ]
        assert _asks(nxt)  # the ask stands
        assert len(json.dumps(nxt)) < 4 * SMALL_CEILING
        # The note alone would be some 90,000 tokens; the request stands near the ceiling (over
        # it only by the turns that wait for the note, as any asking request may).
        record = max(mem.export().requests, key=lambda r: r.n)
        assert record.estimate < 1.5 * SMALL_CEILING
        # The view ends with the stub: its report finds the request by the stub's digest.
        reply = chat_reply("Noted nothing.")
        reply["usage"] = {"prompt_tokens": 3_000, "completion_tokens": 3, "total_tokens": 3_003}
        mem.report(nxt, reply)
        record = max(mem.export().requests, key=lambda r: r.n)
        assert record.replied and record.provider_tokens == 3_000 and record.ratio_kept


def test_a_note_over_max_note_facts_is_not_taken_and_a_good_one_then_is(tmp_path, clock):
    with open_small(tmp_path / "s.db", clock, max_note_facts=3) as eng:
        mem = eng.memory("m")
        req = _until_ask(mem, clock)
        result = mem.report(req, chat_reply(None, tool_calls=[note_call("n1", _facts(4))]))
        assert not result.note_taken
        nxt = mem.decorate({"model": "gpt-4.1", "messages": []})
        (shown,) = _note_calls(nxt)  # within max_note_bytes: shown whole
        assert len(json.loads(shown["function"]["arguments"])["notes"]) == 4
        assert _asks(nxt)
        result = mem.report(nxt, chat_reply(None, tool_calls=[note_call("n2", _facts(3))]))
        assert result.note_taken
        assert len(mem.export().facts) == 3


def test_a_loop_that_sends_back_the_stubbed_view_goes_on(tmp_path, clock):
    """A caller that sends back the decorated messages, the stub among them, is taken as
    resending the stored history: nothing is stored twice, and its report finds the request."""
    with open_small(tmp_path / "s.db", clock) as eng:
        mem = eng.memory("m")
        req = _until_ask(mem, clock)
        huge = note_call("n1", _facts(2_000))
        mem.report(req, chat_reply(None, tool_calls=[huge]))
        nxt = mem.decorate({"model": "gpt-4.1", "messages": []})
        stored = len(mem.messages())
        clock.advance(60)
        again = mem.decorate({"model": "gpt-4.1", "messages": [*nxt["messages"], _user(99)]})
        assert len(mem.messages()) == stored + 1
        (shown,) = _note_calls(again)
        assert "omitted" in json.loads(shown["function"]["arguments"])
        reply = chat_reply("Done.")
        reply["usage"] = {"prompt_tokens": 900, "completion_tokens": 2, "total_tokens": 902}
        mem.report(again, reply)
        last = max(mem.export().requests, key=lambda r: r.n)
        assert last.replied and last.provider_tokens == 900


def test_a_reply_over_max_request_messages_is_refused(tmp_path, clock):
    with fadeway.open(tmp_path / "x.db", clock=clock, max_request_messages=3) as eng:
        mem = eng.memory("m")
        sent = mem.decorate({"input": "hi"})
        before = fadeway.dumps(mem.export())
        item = {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}
        reply = {"id": "r", "object": "response", "status": "completed", "output": [item] * 4}
        with pytest.raises(errors.LimitExceededError, match=r"the reply holds 4 messages"):
            mem.report(sent, reply)
        _unchanged(mem, before)


def test_a_responses_note_call_over_max_note_bytes_is_shown_as_a_stub(tmp_path, clock):
    """The same in Responses, where the note call is an item of its own."""
    with open_small(tmp_path / "s.db", clock) as eng:
        mem = eng.memory("m")
        for t in range(80):
            clock.advance(60)
            req = mem.decorate({"model": "gpt-4.1", "input": [{**_user(t), "type": "message"}]})
            if any(tool.get("name") == "note" for tool in req.get("tools") or []):
                break
            text = f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30))
            item = {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            }
            mem.report(
                req, {"id": f"r{t}", "object": "response", "status": "completed", "output": [item]}
            )
        else:
            raise AssertionError("no note was asked for")
        arguments = note_call("n1", _facts(1_000))["function"]["arguments"]
        assert len(arguments) > C.MAX_NOTE_BYTES
        item = {"type": "function_call", "call_id": "n1", "name": "note", "arguments": arguments}
        result = mem.report(
            req, {"id": "rn", "object": "response", "status": "completed", "output": [item]}
        )
        assert not result.note_taken
        assert json.loads(mem.messages()[-1].body)["arguments"] == arguments
        nxt = mem.decorate({"model": "gpt-4.1", "input": []})
        (shown,) = [i for i in nxt["input"] if i.get("type") == "function_call"]
        assert "max_note_bytes" in json.loads(shown["arguments"])["omitted"]
        (output,) = [i for i in nxt["input"] if i.get("type") == "function_call_output"]
        assert output["output"] == NOTE_NOT_READ


class _ManyFacts(NoteWriter):
    """A note writer whose note holds `n` entries."""

    name = "many"

    def __init__(self, n: int) -> None:
        self.n = n

    async def write(self, ask, messages, *, context=None, deadline=None):
        return Note(notes=[NoteEntry(*fact) for fact in _facts(self.n)])


def test_a_note_writers_note_over_max_note_facts_is_not_taken(tmp_path, clock):
    """A note writer is held to the same limits: its note over them is a NoteWriterError
    naming the limit, and the ask stays pending; one within them is taken."""
    with open_small(tmp_path / "s.db", clock, max_note_facts=3) as eng:
        mem = eng.memory("m")
        _until_ask(mem, clock)
        with pytest.raises(errors.NoteWriterError, match=r"4 entries.*\(max_note_facts\)"):
            mem.answer_ask(_ManyFacts(4))
        assert mem.export().notes == []
        assert mem.answer_ask(_ManyFacts(3))
        assert len(mem.export().facts) == 3


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tools", [{"type": "function", "function": {"name": "f", "description": "x" * 3000}}]),
        ("response_format", {"type": "json_schema", "json_schema": {"name": "x" * 3000}}),
        ("metadata", {"note": "x" * 3000}),
    ],
)
def test_a_request_field_over_the_limit_is_refused_before_any_write(tmp_path, field, value):
    """Fields that pass through into every request of the memory (tools, response_format,
    metadata) are held to max_message_bytes like a message, before anything is written."""
    eng = fadeway.open(tmp_path / "f.db", max_message_bytes=2_000)
    mem = _started(eng)
    before = fadeway.dumps(mem.export())
    said = chat_reply("Hi.")["choices"][0]["message"]
    request = {"model": "gpt-4.1", "messages": [USER, said, {"role": "user", "content": "More."}]}
    with pytest.raises(errors.LimitExceededError, match=f"the request's {field} holds") as got:
        mem.decorate(request | {field: value})
    assert got.value.setting == "max_message_bytes" and got.value.found > 2_000
    _unchanged(mem, before)
    sent = mem.decorate(request | {field: {"small": 1} if field != "tools" else value[:0]})
    assert sent["messages"][-1]["content"] == "More."
    eng.close()
