"""decorate: what it stores, what it recognises as stored, and what it returns."""

from __future__ import annotations

import copy

import msgspec
import pytest

from fadeway.errors import FormatMismatchError, HistoryConflictError, ServerStateError
from helpers import call, chat_reply

pytestmark = pytest.mark.both_stores  # each test runs on SQLite and on PostgreSQL

SYSTEM = {"role": "system", "content": "Be brief."}


def user(text):
    return {"role": "user", "content": text}


def bodies(mem):
    return [msgspec.json.decode(m.body) for m in mem.messages()]


def test_fields_pass_through_and_the_caller_request_is_not_mutated(engine):
    mem = engine.memory("m")
    req = {
        "model": "gpt-4.1",
        "temperature": 0.3,
        "tool_choice": "auto",
        "stream": False,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
        "messages": [SYSTEM, user("hi")],
    }
    before = copy.deepcopy(req)
    out = mem.decorate(req)
    assert req == before
    assert {k: v for k, v in out.items() if k != "messages"} == {
        k: v for k, v in req.items() if k != "messages"
    }
    assert out["messages"] == [SYSTEM, user("hi")]


def test_full_history_then_only_new_each_store_once(engine):
    mem = engine.memory("m")
    history = [SYSTEM, user("one")]
    req = mem.decorate({"messages": history})
    mem.report(req, chat_reply("two"))
    history += [{"role": "assistant", "content": "two"}, user("three")]
    mem.decorate({"messages": history})  # whole conversation so far
    mem.decorate({"messages": [SYSTEM, user("four")]})  # only the new message
    out = mem.decorate({"messages": history + [user("four"), user("five")]})
    assert [b["content"] for b in bodies(mem)] == ["one", "two", "three", "four", "five"]
    assert [m["content"] for m in out["messages"]] == [
        "Be brief.",
        "one",
        "two",
        "three",
        "four",
        "five",
    ]


def test_identical_messages_are_never_deduplicated(engine):
    mem = engine.memory("m")
    mem.decorate({"messages": [user("ok")]})
    mem.decorate({"messages": [user("ok"), user("ok")]})  # full history plus a second "ok"
    mem.decorate({"messages": [user("ok")]})  # only new: a third "ok"
    assert [b["content"] for b in bodies(mem)] == ["ok", "ok", "ok"]


def test_a_retry_of_the_same_request_stores_nothing(engine):
    mem = engine.memory("m")
    req = {"messages": [SYSTEM, user("a"), {"role": "assistant", "content": "b"}, user("c")]}
    first = mem.decorate(req)
    second = mem.decorate(req)
    assert len(mem.messages()) == 3 and first == second


def test_key_order_and_nulls_do_not_make_a_message_new(engine):
    mem = engine.memory("m")
    mem.decorate({"messages": [{"role": "user", "content": "hi", "name": None}]})
    mem.decorate({"messages": [{"content": "hi", "role": "user"}, user("next")]})
    assert [b["content"] for b in bodies(mem)] == ["hi", "next"]


def test_stored_body_is_exactly_what_was_sent(engine):
    mem = engine.memory("m")
    sent = {"content": [{"text": "é 🚀", "type": "text"}], "role": "user", "name": None}
    mem.decorate({"messages": [sent]})
    assert mem.messages()[0].body == msgspec.json.encode(sent)


def test_a_rebuilt_reply_counts_as_the_stored_reply(engine):
    """Callers often append {"role": "assistant", "content": text} instead of the SDK object."""
    mem = engine.memory("m")
    req = mem.decorate({"messages": [user("q")]})
    mem.report(
        req,
        {
            **chat_reply("a"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "a", "annotations": []},
                }
            ],
        },
    )
    mem.decorate({"messages": [user("q"), {"role": "assistant", "content": "a"}, user("q2")]})
    assert [b["content"] for b in bodies(mem)] == ["q", "a", "q2"]
    assert bodies(mem)[1] == {"role": "assistant", "content": "a", "annotations": []}


def test_a_reply_whose_call_arguments_were_reserialised_is_the_stored_reply(engine):
    """Frameworks re-serialise a call's arguments (other spacing, other key order): the same
    call, whether the whole history or only what is new is sent."""
    mem = engine.memory("m")
    req = mem.decorate({"messages": [user("q")]})
    mem.report(req, chat_reply(None, tool_calls=[call("c1", "f", '{"q": "x", "n": 1}')]))
    rebuilt = {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("c1", "f", '{"n":1,"q":"x"}')],
    }
    output = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    mem.decorate({"messages": [user("q"), rebuilt, output]})
    mem.report(
        req := mem.decorate({"messages": [user("q"), rebuilt, output, user("q2")]}),
        chat_reply(None, tool_calls=[call("c2", "f", '{"q": "y"}')]),
    )
    mem.decorate(
        {
            "messages": [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [call("c2", "f", '{"q":"y"}')],
                },
                {"role": "tool", "tool_call_id": "c2", "content": "43"},
            ]
        }
    )
    assert [b["role"] for b in bodies(mem)] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
    ]
    with pytest.raises(HistoryConflictError, match="message 1 of the sent history differs"):
        mem.decorate(
            {
                "messages": [
                    user("q"),
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [call("c1", "f", '{"q":"z"}')],
                    },
                ]
            }
        )


def _sdk_call(call_id: str) -> dict:
    """A tool call in the SDK's field order: the function's `arguments` before its `name`."""
    return {"id": call_id, "function": {"arguments": '{"q": "x"}', "name": "f"}, "type": "function"}


def test_a_rebuilt_reply_whose_call_keys_come_in_another_order_is_the_stored_reply(engine):
    """Issue 31: a reply rebuilt by hand (no `annotations`, the call's `name` before its
    `arguments`) is the stored SDK reply; key order is not a difference."""
    mem = engine.memory("m")
    req = mem.decorate({"messages": [user("q")]})
    stored = {
        "role": "assistant",
        "content": None,
        "annotations": [],
        "tool_calls": [_sdk_call("c1")],
    }
    mem.report(
        req,
        chat_reply(None)
        | {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": stored}]},
    )
    rebuilt = {"role": "assistant", "content": None, "tool_calls": [call("c1", "f", '{"q": "x"}')]}
    output = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    mem.decorate({"messages": [user("q"), rebuilt, output, user("q2")]})
    assert [b["role"] for b in bodies(mem)] == ["user", "assistant", "tool", "user"]
    assert bodies(mem)[1] == stored


def test_a_rebuilt_responses_call_item_in_another_key_order_is_the_stored_item(engine):
    """Issue 31: a Responses call item rebuilt without its id and status, keys in another
    order, is the stored item."""
    mem = engine.memory("r")
    req = mem.decorate({"input": [user("q")]})
    item = {
        "arguments": "{}",
        "call_id": "c1",
        "name": "f",
        "type": "function_call",
        "id": "fc_1",
        "status": "completed",
    }
    mem.report(req, {"id": "resp_1", "output": [item]})
    rebuilt = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "42"}
    mem.decorate({"input": [user("q"), rebuilt, output, user("q2")]})
    assert [b.get("type") for b in bodies(mem)] == [
        None,
        "function_call",
        "function_call_output",
        None,
    ]


@pytest.mark.parametrize("source", ["reply", "sent"])
@pytest.mark.parametrize(("first", "again"), [("", None), (None, "")])
def test_empty_content_beside_tool_calls_is_no_content(engine, source, first, again):
    """Issue 31: an assistant message with tool calls means the same with `content: ""` and
    with `content: None` (a streamed reply joins "" where the SDK object has None), whether
    `report` stored it or the caller sent it; with a text, content still counts."""
    mem = engine.memory("m")
    message = {"role": "assistant", "content": first, "tool_calls": [call("c1")]}
    output = {"role": "tool", "tool_call_id": "c1", "content": "42"}
    if source == "reply":
        req = mem.decorate({"messages": [user("q")]})
        mem.report(
            req,
            chat_reply(None)
            | {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]},
        )
    else:
        mem.decorate({"messages": [user("q"), message, output]})
    resent = {**message, "content": again, "tool_calls": [call("c1")]}
    mem.decorate({"messages": [user("q"), resent, output, user("q2")]})
    assert [b["role"] for b in bodies(mem)] == ["user", "assistant", "tool", "user"]
    with pytest.raises(HistoryConflictError, match="message 1 of the sent history differs"):
        mem.decorate({"messages": [user("q"), {**resent, "content": "x"}, output, user("q2")]})


def test_a_resent_history_with_its_first_message_edited_is_an_error(engine):
    """The first message differs but the ones after it are the stored ones: not new messages
    (which would store the whole history again, call ids and all) but an edited history."""
    mem = engine.memory("m")
    history = [
        user("a"),
        {"role": "assistant", "content": "b"},
        user("c"),
        {"role": "assistant", "content": "d"},
    ]
    mem.decorate({"messages": history[:3]})
    with pytest.raises(HistoryConflictError, match="message 0 of the sent history differs"):
        mem.decorate({"messages": [user("A!"), *history[1:], user("e")]})
    assert len(mem.messages()) == 3
    mem.decorate({"messages": [user("a again"), user("e")]})  # a delta of new messages
    assert len(mem.messages()) == 5


def test_reasoning_items_are_told_by_id_or_encrypted_content(engine):
    """A reasoning reply sent back without its ids (a stateless client) is the stored one, by
    its encrypted content; one with another encrypted content is another item."""
    mem = engine.memory("r")
    history = [{"role": "user", "content": "hello"}]
    req = mem.decorate({"model": "o4-mini", "input": history})
    reply = [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc1"},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "content": [{"type": "output_text", "text": "hi there"}],
        },
    ]
    mem.report(req, {"id": "resp_1", "output": reply})
    echo = [{k: v for k, v in item.items() if k != "id"} for item in reply]
    mem.decorate({"model": "o4-mini", "input": [*history, *echo, user("and now?")]})
    assert [m.kind for m in mem.messages()] == ["message", "reasoning", "message", "message"]
    other = {**echo[0], "encrypted_content": "enc2"}
    with pytest.raises(HistoryConflictError, match="message 1 of the sent history differs"):
        mem.decorate({"model": "o4-mini", "input": [*history, other, echo[1], user("and now?")]})


def _reasoned(fmt: str, calls: bool) -> tuple[dict, list[dict], list[dict]]:
    """A reasoning model's reply (DeepSeek's `reasoning_content`, or a Responses reasoning item
    without encrypted content), its items as a caller that strips the reasoning sends them back,
    and the outputs of its calls."""
    if fmt == "chat":
        message = {
            "role": "assistant",
            "content": None if calls else "4",
            "reasoning_content": "2 + 2 is 4.",
        }
        if calls:
            message["tool_calls"] = [call("c1")]
        stripped = [{k: v for k, v in message.items() if k != "reasoning_content"}]
        outputs = [{"role": "tool", "tool_call_id": "c1", "content": "42"}] if calls else []
        return (
            chat_reply(None)
            | {"choices": [{"index": 0, "finish_reason": "stop", "message": message}]},
            stripped,
            outputs,
        )
    items = [{"type": "reasoning", "id": "rs_1", "summary": []}]
    items += (
        [
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "c1",
                "name": "lookup",
                "arguments": "{}",
                "status": "completed",
            }
        ]
        if calls
        else [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "4", "annotations": []}],
            }
        ]
    )
    outputs = [{"type": "function_call_output", "call_id": "c1", "output": "42"}] if calls else []
    return {"id": "resp_1", "output": items}, items[1:], outputs


@pytest.mark.parametrize("sends", ["whole history", "new messages"])
@pytest.mark.parametrize("calls", [False, True], ids=["text", "calls"])
@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_a_reply_sent_back_without_its_reasoning_is_the_stored_reply(engine, fmt, calls, sends):
    """DeepSeek's older docs told callers to drop `reasoning_content`, many frameworks keep only
    role, content and calls, and a stateless Responses caller cannot send back a reasoning item
    it holds no encrypted content for: the reply without its reasoning is the stored one, not
    an edit (a conflict) nor new messages (stored twice)."""
    mem = engine.memory("m")
    key = "messages" if fmt == "chat" else "input"
    history = [user("What is 2+2?")]
    req = mem.decorate({"model": "m", key: history})
    response, stripped, outputs = _reasoned(fmt, calls)
    mem.report(req, response)
    stored = len(mem.messages())
    new = [*stripped, *outputs, user("And 3+3?")]
    mem.decorate({"model": "m", key: [*history, *new] if sends == "whole history" else new})
    assert len(mem.messages()) == stored + len(outputs) + 1
    assert [m.source for m in mem.messages()][-len(outputs) - 1 :] == ["request"] * (
        len(outputs) + 1
    )


def test_a_stateless_responses_request_gets_no_reasoning_it_cannot_resolve(engine):
    """With `store: false` the provider keeps no items, so a reasoning item sent back by id
    alone is refused ("Item with id 'rs_...' not found"): the view leaves out stored reasoning
    items without encrypted content, and keeps those with it. With items stored (the default),
    an id is enough."""
    mem = engine.memory("m")
    history = [user("What is 2+2?")]
    req = mem.decorate({"model": "m", "input": history, "store": False})
    plain = {"type": "reasoning", "id": "rs_1", "summary": []}
    sealed = {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "enc"}
    answer = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "4", "annotations": []}],
    }
    mem.report(req, {"id": "resp_1", "output": [plain, sealed, answer]})
    ask = [user("And 3+3?")]
    stateless = mem.decorate({"model": "m", "input": ask, "store": False})
    assert [i.get("id") for i in stateless["input"]] == [None, "rs_2", "msg_1", None]
    stored = mem.decorate({"model": "m", "input": []})
    assert [i.get("id") for i in stored["input"]] == [None, "rs_1", "rs_2", "msg_1", None]
    # The stateless request is the one decorate returned: report finds it, once, and the request
    # itself resent (a retry) is the stored history.
    stateless = mem.decorate({"model": "m", "input": [], "store": False})
    count = len(mem.messages())
    answer2 = {**answer, "id": "msg_2"}
    for _ in range(2):
        mem.report(stateless, {"id": "resp_2", "output": [answer2]})
    assert len(mem.messages()) == count + 1
    more = [user("And 4+4?")]
    again = mem.decorate({**stateless, "input": [*stateless["input"], answer2, *more]})
    assert len(mem.messages()) == count + 2 and again["input"][-2:] == [answer2, *more]
    # A caller that skips report sends the reply items itself: the same, from its request.
    other = engine.memory("other")
    sent = other.decorate({"model": "m", "input": [*history, plain, answer, *ask], "store": False})
    assert [i.get("id") for i in sent["input"]] == [None, "msg_1", None]
    other.decorate({**sent, "input": [*sent["input"], answer2, *more]})
    assert [m.kind for m in other.messages()] == [
        "message",
        "reasoning",
        "message",
        "message",
        "message",
        "message",
    ]


def test_only_new_messages_may_echo_the_reported_reply(engine):
    mem = engine.memory("m")
    req = mem.decorate({"messages": [user("q")]})
    mem.report(req, chat_reply(None, tool_calls=[call("c1")]))
    reply = {"role": "assistant", "content": None, "tool_calls": [call("c1")]}
    out = mem.decorate(
        {"messages": [reply, {"role": "tool", "tool_call_id": "c1", "content": "42"}]}
    )
    assert [b["role"] for b in bodies(mem)] == ["user", "assistant", "tool"]
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "tool"]


def test_an_edited_earlier_message_is_an_error_and_writes_nothing(engine):
    mem = engine.memory("m")
    mem.decorate({"messages": [user("a"), {"role": "assistant", "content": "b"}, user("c")]})
    with pytest.raises(HistoryConflictError, match="message 1 of the sent history differs"):
        mem.decorate(
            {"messages": [user("a"), {"role": "assistant", "content": "B!"}, user("c"), user("d")]}
        )
    assert len(mem.messages()) == 3


def test_instructions_are_not_history_and_the_latest_win(engine):
    mem = engine.memory("m")
    mem.decorate({"messages": [SYSTEM, user("a")]})
    out = mem.decorate({"messages": [{"role": "developer", "content": "New rules."}, user("b")]})
    assert out["messages"][0] == {"role": "developer", "content": "New rules."}
    assert [b["content"] for b in bodies(mem)] == ["a", "b"]
    assert msgspec.json.decode(mem.export().instructions)["messages"] == [
        {"role": "developer", "content": "New rules."}
    ]


def test_turns_start_at_each_user_message(engine):
    mem = engine.memory("m")
    mem.decorate(
        {
            "messages": [
                user("q1"),
                {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "tool", "tool_call_id": "b", "content": "2"},
                {"role": "assistant", "content": "done"},
                user("q2"),
                {"role": "assistant", "content": "sure"},
            ]
        }
    )
    assert [m.turn for m in mem.messages()] == [1, 1, 1, 1, 1, 2, 2]
    assert [(u.first, u.last) for u in mem.units()] == [(0, 0), (1, 3), (4, 4), (5, 5), (6, 6)]


def test_responses_string_input_and_instructions(engine):
    mem = engine.memory("r")
    out = mem.decorate({"model": "gpt-4.1", "instructions": "Be brief.", "input": "hello"})
    assert out["instructions"] == "Be brief."
    assert out["input"] == [{"role": "user", "content": "hello"}]
    mem.report(
        out,
        {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {
                    "type": "function_call",
                    "id": "fc_1",
                    "call_id": "call_1",
                    "name": "f",
                    "arguments": "{}",
                    "status": "completed",
                },
            ],
            "usage": {"input_tokens": 12},
        },
    )
    out = mem.decorate(
        {
            "model": "gpt-4.1",
            "instructions": "Be brief.",
            "input": [{"type": "function_call_output", "call_id": "call_1", "output": "42"}],
        }
    )
    assert [i.get("type", "message") for i in out["input"]] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert [(u.first, u.last) for u in mem.units()] == [(0, 0), (1, 3)]


def test_server_side_state_is_refused(engine):
    mem = engine.memory("r")
    with pytest.raises(ServerStateError, match="previous_response_id"):
        mem.decorate({"input": "hi", "previous_response_id": "resp_1"})
    with pytest.raises(ServerStateError, match="conversation"):
        mem.decorate({"input": "hi", "conversation": "conv_1"})
    with pytest.raises(ServerStateError, match="item_reference"):
        mem.decorate({"input": [{"type": "item_reference", "id": "msg_1"}]})
    assert engine.memory_ids() == []


def test_a_memory_keeps_its_wire_format(engine):
    mem = engine.memory("m")
    mem.decorate({"messages": [user("hi")]})
    with pytest.raises(FormatMismatchError, match="holds a chat_completions conversation"):
        mem.decorate({"input": "hi"})


def test_sdk_objects_in_the_history_are_stored_as_their_json(engine):
    openai = pytest.importorskip("openai")
    from openai.types.chat import ChatCompletionMessage

    mem = engine.memory("m")
    reply = ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": "a", "refusal": None}
    )
    mem.decorate({"messages": [user("q"), reply, user("q2")]})
    assert bodies(mem)[1] == {"role": "assistant", "content": "a", "refusal": None}
    assert openai is not None


async def _async_roundtrip(mem):
    req = await mem.adecorate({"messages": [user("q")]})
    result = await mem.areport(req, chat_reply("a"))
    return req, result, await mem.aexport()


def test_async_twins(engine):
    import asyncio

    req, result, doc = asyncio.run(_async_roundtrip(engine.memory("m")))
    assert req["messages"] == [user("q")] and result.tool_calls == []
    assert [m.role for m in doc.messages] == ["user", "assistant"]


def test_a_request_without_instructions_keeps_the_latest_ones(engine):
    mem = engine.memory("m")
    mem.decorate({"messages": [SYSTEM, user("a")]})
    out = mem.decorate({"messages": [user("b")]})  # only new, instructions left out
    assert out["messages"] == [SYSTEM, user("a"), user("b")]
    r = engine.memory("r")
    r.decorate({"instructions": "Be brief.", "input": "a"})
    out = r.decorate({"model": "gpt-4.1", "input": "b"})
    assert out["instructions"] == "Be brief." and out["model"] == "gpt-4.1"
    assert out["input"] == [user("a"), user("b")]


def test_the_mirrors_share_a_byte_budget_and_an_evicted_one_reads_the_store_again(
    engine, monkeypatch
):
    from fadeway import _constants as C

    talk = {name: [user(f"{name} says " + "word " * 200)] for name in ("a", "b", "c")}
    for name, history in talk.items():
        engine.memory(name).decorate({"messages": history})
    size = engine.services.mirrors.peek("a").body_bytes
    assert size == sum(len(m.body) for m in engine.memory("a").messages()) > 1000
    engine.memory("b")  # used in the order a, b, c from here
    monkeypatch.setattr(C, "HISTORY_CACHE_BYTES", 2 * size + 10)
    engine.memory("c")  # a, b, c hold three bodies' worth: the least recently used leaves
    assert list(engine.services.mirrors) == ["b", "c"]
    monkeypatch.setattr(C, "HISTORY_CACHE_BYTES", 0)
    mem = engine.memory("a")  # the one asked for stays, whatever its size
    assert (
        list(engine.services.mirrors) == ["a"] and engine.services.mirrors.peek("a").body_bytes == 0
    )
    # Read again from the store: the conversation goes on as if it had never left.
    talk["a"] += [{"role": "assistant", "content": "ok"}, user("and then?")]
    sent = mem.decorate({"messages": talk["a"]})
    assert [m["content"] for m in sent["messages"]] == [m["content"] for m in talk["a"]]
    assert len(mem.messages()) == 3
    assert engine.services.mirrors.peek("a").body_bytes == sum(len(m.body) for m in mem.messages())


def test_a_view_that_opens_with_reasoning_is_aligned_past_it():
    """A view may open with a reasoning item (its episode's first unit) that the caller's resend
    leaves out: the resend is aligned from the item after it, and an edited first message there
    is still an edit, not new messages."""
    from fadeway.decorate.align import align
    from fadeway.mirror.history import History
    from fadeway.records import MessageRecord
    from fadeway.wire.canonical import digest_of

    said = [
        user("a"),
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"role": "assistant", "content": "b"},
        user("c"),
        {"role": "assistant", "content": "d"},
        user("e"),
    ]
    kinds = ["message", "reasoning", "message", "message", "message", "message"]
    history = History()
    history.extend(
        MessageRecord(
            seq=i,
            turn=1 + (i >= 3) + (i >= 5),
            at=0.0,
            role=m.get("role", "assistant"),
            kind=kinds[i],
            side="user" if m.get("role") == "user" else "assistant",
            source="request" if m.get("role") == "user" else "reply",
            tokens=1,
            digest=digest_of(m),
            body=msgspec.json.encode(m),
        )
        for i, m in enumerate(said)
    )
    view = [1, 2, 3, 4, 5]  # the first turn's user message sealed
    resend = [said[2], said[3], said[4], said[5], user("f")]
    assert align(resend, [digest_of(m) for m in resend], history, 6, view) == 4
    edited = [{"role": "assistant", "content": "B!"}, *resend[1:]]
    with pytest.raises(
        HistoryConflictError, match="message 0 of the sent history differs from stored message 2"
    ):
        align(edited, [digest_of(m) for m in edited], history, 6, view)
