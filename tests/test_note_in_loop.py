"""The note call in the caller's loop (ARCHITECTURE: "The note call in the caller's loop"): a loop
that never knew the note tool exists goes on however it rebuilds its history, and the name
`note` is fadeway's."""

from __future__ import annotations

import json

import pytest

import fadeway
import fadeway.notes.writers
from conftest import open_small
from fadeway.errors import InvalidRequestError
from helpers import call, chat_reply, note_call

FACT = [("Dana owns the checkout.", "Dana", "checkout", False)]
KEY = {"chat": "messages", "responses": "input"}


def _user(t: int, fmt: str = "chat") -> dict:
    text = f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(40))
    if fmt == "chat":
        return {"role": "user", "content": text}
    return {"type": "message", "role": "user", "content": text}


def _asks(request: dict) -> bool:
    return any(
        "note" in (t.get("name"), (t.get("function") or {}).get("name"))
        for t in request.get("tools") or []
    )


def _reply(fmt: str, t: int, text: str | None, calls: list[tuple[str, str, str]]) -> dict:
    """A provider reply with `text` and calls (id, name, arguments), in `fmt`."""
    if fmt == "chat":
        return chat_reply(text, tool_calls=[call(i, n, a) for i, n, a in calls] or None)
    output = (
        [
            {
                "type": "message",
                "id": f"msg_{t}",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
                ],
            }
        ]
        if text
        else []
    )
    output += [
        {
            "type": "function_call",
            "id": f"fc_{i}",
            "call_id": i,
            "name": n,
            "arguments": a,
            "status": "completed",
        }
        for i, n, a in calls
    ]
    return {"id": f"resp_{t}", "object": "response", "status": "completed", "output": output}


def _sent_reply(fmt: str, reply: dict) -> list[dict]:
    """The reply as a loop that appends the provider's message (or output items) sends it."""
    if fmt == "chat":
        return [reply["choices"][0]["message"]]
    return list(reply["output"])


def _rebuilt(fmt: str, t: int, text: str | None, tool_calls: list[dict]) -> list[dict]:
    """The reply as a loop that rebuilds it from `report`'s result sends it: its text and the
    tool calls left for it to run (the note's are not among them)."""
    if fmt == "chat":
        return [{"role": "assistant", "content": text, "tool_calls": tool_calls}]
    return _sent_reply(fmt, _reply(fmt, t, text, [])) + tool_calls


def _output(fmt: str, call_id: str, text: str) -> dict:
    if fmt == "chat":
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def _until_ask(mem, clock, fmt: str, history: list, pending: list) -> tuple[dict, int]:
    """Talk (text replies, reported) until a request asks for a note; that request and turn."""
    for t in range(80):
        clock.advance(60)
        history.append(_user(t, fmt))
        pending.append(history[-1])
        req = mem.decorate({"model": "gpt-4.1", KEY[fmt]: list(pending)})
        pending.clear()
        if _asks(req):
            return req, t
        reply = _reply(fmt, t, f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)), [])
        mem.report(req, reply)
        history.extend(_sent_reply(fmt, reply))
    raise AssertionError("no note was asked for")


def _calls_and_outputs(fmt: str, items: list[dict]) -> tuple[list[str], list[str]]:
    made, answered = [], []
    for m in items:
        if fmt == "chat":
            made += [c["id"] for c in m.get("tool_calls") or []]
            if m.get("role") == "tool":
                answered.append(m["tool_call_id"])
        elif m.get("type") == "function_call":
            made.append(m["call_id"])
        elif m.get("type") == "function_call_output":
            answered.append(m["call_id"])
    return made, answered


@pytest.mark.parametrize("sends", ["whole history", "new messages"])
@pytest.mark.parametrize("fmt", ["chat", "responses"])
@pytest.mark.parametrize("with_call", [True, False], ids=["note beside a call", "note and text"])
def test_a_loop_that_rebuilds_the_reply_from_report_goes_on(small, clock, fmt, sends, with_call):
    """The loop appends the reply's text and `result.tool_calls` (the note call left out) and
    the outputs of those calls: the memory takes it as the stored reply, stores nothing twice,
    and every call in the next requests has exactly one output."""
    mem = small.memory("m")
    history: list = []
    pending: list = []
    req, t = _until_ask(mem, clock, fmt, history, pending)
    note = note_call("note_1", FACT)["function"]
    calls = [("note_1", "note", note["arguments"])]
    calls += [("call_x", "lookup", '{"q": "x"}')] if with_call else []
    text = None if with_call else "Here is the answer."
    result = mem.report(req, _reply(fmt, t, text, calls))
    assert [c.get("call_id") or c["id"] for c in result.tool_calls] == (
        ["call_x"] if with_call else []
    )
    stored = len(mem.messages())
    new = _rebuilt(fmt, t, text, result.tool_calls)
    new += [_output(fmt, "call_x", "x is 42")] if with_call else []
    for turn in (t + 1, t + 2):
        history.extend(new)
        pending.extend(new)
        clock.advance(60)
        history.append(_user(turn, fmt))
        pending.append(history[-1])
        req = mem.decorate(
            {"model": "gpt-4.1", KEY[fmt]: history if sends == "whole history" else list(pending)}
        )
        pending.clear()
        made, answered = _calls_and_outputs(fmt, req[KEY[fmt]])
        assert sorted(made) == sorted(answered) and len(set(made)) == len(made)
        mem.report(req, reply := _reply(fmt, turn, f"answer {turn}", []))
        new = _sent_reply(fmt, reply)
    # Stored once each after the reply (as report stored it): the output, two user messages
    # and their two replies.
    assert len(mem.messages()) == stored + (1 if with_call else 0) + 4
    assert [f.text for f in mem.export().facts] == ["Dana owns the checkout."]


def _as_sdk_objects(fmt: str, reply: dict) -> list:
    """The reply's message (or output items) as the `openai` SDK's objects."""
    openai = pytest.importorskip("openai")
    if fmt == "chat":
        return [
            openai.types.chat.ChatCompletion.model_validate({**reply, "created": 0, "model": "m"})
            .choices[0]
            .message
        ]
    return list(
        openai.types.responses.Response.model_validate(
            {
                **reply,
                "created_at": 0,
                "model": "m",
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            }
        ).output
    )


@pytest.mark.parametrize("objects", ["dicts", "sdk objects"])
@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_a_loop_that_skips_report_and_answers_the_note_call_itself(small, clock, fmt, objects):
    """A loop that skips `report` sends the reply back and answers every call in it, the note's
    too ("unknown tool"): that output is fadeway's to give, so it is not stored, the request
    holds one output per call, and the whole history can be sent again."""
    mem = small.memory("m")
    history: list = []
    pending: list = []
    _, t = _until_ask(mem, clock, fmt, history, pending)
    note = note_call("note_1", FACT)["function"]
    reply = _reply(
        fmt, t, None, [("note_1", "note", note["arguments"]), ("call_x", "lookup", "{}")]
    )
    sent = _sent_reply(fmt, reply) if objects == "dicts" else _as_sdk_objects(fmt, reply)
    history += [
        *sent,
        _output(fmt, "note_1", "error: unknown tool note"),
        _output(fmt, "call_x", "x is 42"),
    ]
    for turn in (t + 1, t + 2):
        req = mem.decorate({"model": "gpt-4.1", KEY[fmt]: history})
        made, answered = _calls_and_outputs(fmt, req[KEY[fmt]])
        assert sorted(made) == sorted(answered) and len(set(made)) == len(made)
        assert "error: unknown tool note" not in json.dumps(req)
        history += _sent_reply(fmt, _reply(fmt, turn, f"answer {turn}", []))
        clock.advance(60)
        history.append(_user(turn, fmt))
    assert not any(b"unknown tool" in m.body for m in mem.messages())
    assert [f.text for f in mem.export().facts] == ["Dana owns the checkout."]


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_a_tool_of_the_callers_named_note_is_refused_before_anything_is_stored(small, fmt):
    mem = small.memory("m")
    if fmt == "chat":
        tool = {"type": "function", "function": {"name": "note", "parameters": {}}}
    else:
        tool = {"type": "function", "name": "note", "parameters": {}}
    with pytest.raises(InvalidRequestError, match=r"tools\[1\] is named 'note'"):
        mem.decorate(
            {
                "model": "gpt-4.1",
                KEY[fmt]: [_user(0, fmt)],
                "tools": [
                    {
                        "type": "function",
                        "name": "lookup",
                        "parameters": {},
                        "function": {"name": "lookup", "parameters": {}},
                    },
                    tool,
                ],
            }
        )
    assert mem.messages() == []


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_a_decorated_request_sent_back_carries_the_note_tool_once(small, clock, fmt):
    """A caller that reuses the decorated request (its tools included) for the next call: the
    note tool is fadeway's own, recognised, and not offered twice."""
    mem = small.memory("m")
    req, t = _until_ask(mem, clock, fmt, [], [])
    again = dict(req)
    again[KEY[fmt]] = [*req[KEY[fmt]], _user(t + 1, fmt)]
    out = mem.decorate(again)
    names = [t.get("name") or t["function"]["name"] for t in out["tools"]]
    assert names == ["note"]


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_a_delta_caller_follows_call_again_with_nothing_new(small, clock, fmt):
    """A reply that held only the note says `call_again`; a caller that sends only what is new
    has nothing to send, and an empty list gets the view, the note answered by fadeway."""
    mem = small.memory("m")
    req, t = _until_ask(mem, clock, fmt, [], [])
    note = note_call("note_1", FACT)["function"]
    result = mem.report(req, _reply(fmt, t, None, [("note_1", "note", note["arguments"])]))
    assert result.call_again and not result.tool_calls
    stored = len(mem.messages())
    again = mem.decorate({"model": "gpt-4.1", KEY[fmt]: []})
    made, answered = _calls_and_outputs(fmt, again[KEY[fmt]])
    assert "note_1" in made and sorted(made) == sorted(answered)
    assert len(mem.messages()) == stored
    with pytest.raises(fadeway.errors.EmptyRequestError, match="holds no history yet"):
        small.memory("new").decorate({"model": "gpt-4.1", KEY[fmt]: []})


class _Failing(fadeway.notes.writers.NoteWriter):
    """A note writer whose endpoint is down for its first `down` calls."""

    name = "flaky"

    def __init__(self, down: int) -> None:
        self.down, self.calls = down, 0
        self.offline = fadeway.notes.writers.OfflineNoteWriter()

    async def write(
        self, ask, messages, *, context=fadeway.notes.writers.NO_CONTEXT, deadline=None
    ):
        self.calls += 1
        if self.calls <= self.down:
            # refused, not out of reach: the lane gives the job up, and the next call asks again
            raise fadeway.errors.EndpointError("the note writer refused the key", status=401)
        return await self.offline.write(ask, messages, context=context, deadline=deadline)


@pytest.mark.parametrize("writer", ["offline", "flaky"])
def test_an_engine_with_a_note_writer_answers_asks_in_the_lane_and_never_asks_the_model(
    tmp_path, clock, writer
):
    """`fadeway.open(note_writer=...)`: the requests carry no note ask and no note tool; the
    lane's note job answers the ask (again at the next call while the writer fails), and the
    call after the note seals the episodes, their facts marked as the writer's."""
    spec = "offline" if writer == "offline" else _Failing(down=3)
    eng = open_small(tmp_path / "w.db", clock, note_writer=spec)
    mem = eng.memory("m")
    history: list = []
    leaving_seen = 0
    for t in range(40):
        clock.advance(60)
        history.append(_user(t))
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        assert not _asks(req) and "History from turns" not in json.dumps(req)
        leaving_seen += any(e.state == "leaving" for e in mem.episodes())
        reply = chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)))
        mem.report(req, reply)
        history.append(reply["choices"][0]["message"])
        eng.drain()
    states = {e.state for e in mem.episodes()}
    assert leaving_seen and states & {"sealed", "forgotten"}
    doc = mem.export()
    assert doc.notes and {n.source for n in doc.notes} == {f"note-writer:{writer}"}
    assert doc.facts
    if writer == "flaky":
        assert spec.calls > 3  # failed three times (one job, retried), then asked again
    eng.close()


def test_a_bad_note_writer_is_refused_before_the_store_opens(tmp_path):
    with pytest.raises(ValueError, match="unknown note writer 'carrier pigeon'"):
        fadeway.open(tmp_path / "x.db", note_writer="carrier pigeon")
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_a_loop_that_rebuilds_replies_leaves_out_a_note_only_reply(small, clock, fmt):
    """A reply that held only the note call leaves the rebuilding loop nothing to append
    (`call_again`, no calls, no text): the whole history, resent without it, is the stored one."""
    mem = small.memory("m")
    history: list = []
    req, t = _until_ask(mem, clock, fmt, history, [])
    note = note_call("note_1", FACT)["function"]
    result = mem.report(req, _reply(fmt, t, None, [("note_1", "note", note["arguments"])]))
    assert result.call_again and not result.tool_calls
    req = mem.decorate({"model": "gpt-4.1", KEY[fmt]: history})  # the call again
    mem.report(req, reply := _reply(fmt, t, f"answer {t}", []))
    history.extend(_sent_reply(fmt, reply))
    stored = len(mem.messages())
    clock.advance(60)
    history.append(_user(t + 1, fmt))
    req = mem.decorate({"model": "gpt-4.1", KEY[fmt]: history})
    assert len(mem.messages()) == stored + 1
    made, answered = _calls_and_outputs(fmt, req[KEY[fmt]])
    assert sorted(made) == sorted(answered)


def test_the_note_jobs_facts_carry_the_time_of_the_call_that_asked(tmp_path, clock):
    """Replayed at the messages' own times (`at=`), a note writer's note is dated when the
    decorate that queued it ran, like every lane job's work, not when the lane got to it."""
    eng = open_small(tmp_path / "w.db", clock, note_writer="offline")
    mem = eng.memory("m")
    history: list = []
    start = 1_577_836_800.0  # 2020-01-01, six years before the engine's clock
    for t in range(40):
        history.append(_user(t))
        at = start + 60 * t
        req = mem.decorate({"model": "gpt-4.1", "messages": history}, at=at)
        reply = chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)))
        mem.report(req, reply, at=at)
        history.append(reply["choices"][0]["message"])
        clock.advance(3600)  # the lane runs later, by the engine's clock
        eng.drain()
    doc = mem.export()
    assert doc.notes and doc.facts
    assert all(start <= n.at < start + 60 * 40 for n in doc.notes)
    assert all(start <= f.at < start + 60 * 40 for f in doc.facts)
    eng.close()


def test_a_responses_delta_loop_with_reasoning_items_goes_on_past_a_seal(small, clock):
    """A reasoning model's replies start with reasoning items whose summaries are empty; a
    caller that sends what is new (the reported reply echoed, then the outputs) goes on after
    the view starts at such an item: items are told apart by id, not taken for a resent view."""
    mem = small.memory("m")
    note = note_call("x", FACT)["function"]["arguments"]

    def reply(t, calls, text=None):
        out = _reply("responses", t, text, calls)
        out["output"].insert(
            0, {"type": "reasoning", "id": f"rs_{t}", "summary": [], "encrypted_content": "e"}
        )
        return out

    pending: list = []
    sealed = 0
    for t in range(30):
        clock.advance(60)
        pending.append(_user(t, "responses"))
        req = mem.decorate({"model": "o4-mini", "input": pending})
        calls = [(f"call_{t}", "lookup", "{}")]
        if _asks(req):
            calls.insert(0, (f"note_{t}", "note", note))
        first = reply(t, calls)
        result = mem.report(req, first)
        pending = [
            *first["output"],
            *(_output("responses", c["call_id"], "42") for c in result.tool_calls),
        ]
        req = mem.decorate({"model": "o4-mini", "input": pending})
        made, answered = _calls_and_outputs("responses", req["input"])
        assert sorted(made) == sorted(answered)
        second = reply(f"{t}b", [], f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)))
        mem.report(req, second)
        pending = list(second["output"])
        small.drain()
        sealed += any(e.state in ("sealed", "forgotten") for e in mem.episodes())
    assert sealed >= 5  # it went on well past the first seal
    assert len({m.digest for m in mem.messages()}) == len(mem.messages())  # nothing twice


def _paired_by_position(fmt: str, items: list) -> bool:
    """Whether each reply's calls are answered right after it, one output each, and no output
    stands anywhere else: providers pair by position as much as by id, and ids may repeat."""
    i = 0
    while i < len(items):
        made, answered = _calls_and_outputs(fmt, [items[i]])
        if answered:
            return False  # an output no reply just made
        i += 1
        if fmt == "responses":  # a reply's call items come one after another
            while made and i < len(items) and items[i].get("type") == "function_call":
                made += _calls_and_outputs(fmt, [items[i]])[0]
                i += 1
        got = []
        while i < len(items) and (answers := _calls_and_outputs(fmt, [items[i]])[1]):
            got += answers
            i += 1
        if sorted(got) != sorted(made):
            return False
    return True


@pytest.mark.parametrize("sends", ["whole history", "new messages"])
@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_a_provider_that_reuses_call_ids_every_turn_goes_on(small, clock, fmt, sends):
    """Some providers number a reply's calls from 0 again on every turn (Kimi's `lookup:0`,
    some proxies' `call_0`), so a note call and a later call of the caller's share an id, and
    so do two notes: each note is taken, each of the caller's outputs is stored, and every
    request pairs every call with one output."""
    mem = small.memory("m")
    history: list = []
    pending: list = []
    notes_given = lookups = 0
    for t in range(60):
        clock.advance(60)
        history.append(_user(t, fmt))
        pending.append(history[-1])
        for _ in range(3):  # the rounds of the turn: calls, then text
            req = mem.decorate(
                {
                    "model": "gpt-4.1",
                    KEY[fmt]: history if sends == "whole history" else list(pending),
                }
            )
            pending.clear()
            assert _paired_by_position(fmt, req[KEY[fmt]]), f"turn {t}"
            calls = []
            if _asks(req):
                note = note_call("x", [(f"Dana met Lee on day {t}.", "Dana", f"day {t}", False)])
                calls.append(("call_0", "note", note["function"]["arguments"]))
                notes_given += 1
            if t % 2 == 0 and not any(b'"lookup"' in m.body for m in mem.messages()[-3:]):
                calls.append((f"call_{len(calls)}", "lookup", json.dumps({"q": t})))
                lookups += 1
            reply = _reply(
                fmt,
                t,
                None if calls else f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)),
                calls,
            )
            result = mem.report(req, reply)
            new = _sent_reply(fmt, reply)
            new += [
                _output(fmt, c["call_id"] if fmt == "responses" else c["id"], f"result {t}")
                for c in result.tool_calls
            ]
            history.extend(new)
            pending.extend(new)
            if not calls:
                break
    assert notes_given >= 3
    assert len(mem.export().notes) == notes_given
    outputs = [m.body for m in mem.messages() if m.answers is not None]
    assert len(outputs) == lookups and all(b"result" in b for b in outputs)
    assert {e.state for e in mem.episodes()} & {"sealed", "forgotten"}


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_a_reply_that_gives_two_calls_one_id_is_refused_before_anything_is_stored(
    small, clock, fmt
):
    """Ids may repeat across replies, not within one: two outputs for one id could not be told
    apart (a note's and a lookup's, or two notes'), so the reply is refused rather than one of
    them lost."""
    mem = small.memory("m")
    req, t = _until_ask(mem, clock, fmt, [], [])
    stored = len(mem.messages())
    note = note_call("x", FACT)["function"]["arguments"]
    for second in ("lookup", "note"):
        reply = _reply(fmt, t, None, [("call_0", "note", note), ("call_0", second, note)])
        with pytest.raises(fadeway.errors.InvalidMessageError, match="'call_0', an id its reply"):
            mem.report(req, reply)
        assert len(mem.messages()) == stored and not mem.export().notes
