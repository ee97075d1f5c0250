"""Malformed calls get a `FadewayError` and change nothing (ARCHITECTURE: "What bad input gets";
issue 33, item 1): valid requests and replies with one value anywhere replaced by a wrong one
(another type, a number out of range, what JSON cannot carry, nesting deeper than recursion)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fadeway
from conftest import Clock
from fadeway import _constants as C
from fadeway import errors
from helpers import call, chat_reply
from mutations import mutated, nested
from strategies import chat_conversations, responses_conversations

#: Top-level fields fadeway reads, mutated half the time (a path drawn anywhere rarely hits them).
READ_KEYS = ("model", "messages", "input", "instructions", "tools", "tool_choice")
FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
OK = {"role": "user", "content": "hi"}


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = fadeway.open(tmp_path_factory.mktemp("malformed") / "m.db", clock=Clock())
    yield eng
    eng.close()


_ids = itertools.count()


def _requests() -> st.SearchStrategy[dict]:
    return st.one_of(chat_conversations(), responses_conversations())


def _responses_reply() -> dict:
    return {
        "id": "resp_1",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}],
            },
            {"type": "function_call", "call_id": "c9", "name": "f", "arguments": "{}"},
        ],
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }


def _reply_to(request: dict) -> dict:
    if "messages" in request:
        return chat_reply("ok", tool_calls=[call("c9")], prompt_tokens=10)
    return _responses_reply()


@FUZZ
@given(mutated(_requests(), READ_KEYS))
def test_a_malformed_request_is_decorated_or_refused_with_nothing_stored(engine, case):
    _path, _wrong, request = case
    memory_id = f"d{next(_ids)}"
    try:
        engine.memory(memory_id).decorate(request)
    except errors.FadewayError as exc:
        assert str(exc)
        assert memory_id not in engine.memory_ids()


@FUZZ
@given(_requests(), st.booleans(), st.data())
def test_a_malformed_report_is_stored_or_refused_with_nothing_changed(
    engine, request, mutate_reply, data
):
    mem = engine.memory(f"r{next(_ids)}")
    sent = mem.decorate(request)
    reply = _reply_to(request)
    if mutate_reply:
        _path, _wrong, reply = data.draw(mutated(st.just(reply)))
    else:
        _path, _wrong, sent = data.draw(mutated(st.just(sent), READ_KEYS))
    before = fadeway.dumps(mem.export())
    try:
        mem.report(sent, reply)
    except errors.FadewayError as exc:
        assert str(exc)
        assert fadeway.dumps(mem.export()) == before


def _note_reply(arguments: str) -> dict:
    return chat_reply(None, tool_calls=[call("n1", "note", arguments)])


DEEP = nested(5_000)

#: The calls of issue 33 that raised plain Python errors: (request, error, what it says).
REFUSED = {
    "a role that is a list": (
        {"messages": [{"role": ["system"], "content": "x"}]},
        errors.InvalidMessageError,
        r"messages\[0\] has a role of type list",
    ),
    "a type that is an object": (
        {"input": [OK, {"type": {"x": 1}, "role": "user", "content": "x"}]},
        errors.InvalidMessageError,
        r"input\[1\] has a type of type dict",
    ),
    "tool_calls of -1": (
        {"messages": [OK, {"role": "assistant", "content": None, "tool_calls": -1}]},
        errors.InvalidMessageError,
        r"messages\[1\] has tool_calls of type int",
    ),
    "tool_calls of 5": (
        {"messages": [OK, {"role": "assistant", "content": "x", "tool_calls": 5}]},
        errors.InvalidMessageError,
        r"messages\[1\] has tool_calls of type int",
    ),
    "a content part whose type is a list": (
        {"messages": [{"role": "user", "content": [{"type": ["text"], "text": "x"}]}]},
        errors.InvalidMessageError,
        "content part 0 must be an object with a type in",
    ),
    "tools of 1.5": (
        {"messages": [OK], "tools": 1.5},
        errors.InvalidRequestError,
        "tools must be a list, not float",
    ),
    "a tool_choice that is no JSON": (
        {"messages": [OK], "tool_choice": object()},
        errors.InvalidRequestError,
        "tool_choice must be an object, not object",
    ),
    "a tool_choice holding no JSON": (
        {"messages": [OK], "tool_choice": {"type": "function", "function": {"name": object()}}},
        errors.InvalidRequestError,
        "tool_choice is not JSON-serialisable",
    ),
    "a tool that is a list": (
        {"messages": [OK], "tools": [["get_weather"]]},
        errors.InvalidRequestError,
        r"tools\[0\] must be an object, not list",
    ),
    "a model name with a lone surrogate": (
        {"model": "gpt-\ud800", "messages": [OK]},
        errors.InvalidRequestError,
        "model is not JSON-serialisable",
    ),
    "instructions with a lone surrogate": (
        {"input": "hi", "instructions": "be \udfff brief"},
        errors.InvalidRequestError,
        "instructions is not JSON-serialisable",
    ),
    "tools nested 5,000 deep": (
        {"messages": [OK], "tools": [{"type": "function", "function": DEEP}]},
        errors.InvalidRequestError,
        f"tools is nested deeper than {C.MAX_JSON_DEPTH} levels",
    ),
    "tools nested 500 deep": (
        {"messages": [OK], "tools": [{"type": "function", "function": nested(500)}]},
        errors.InvalidRequestError,
        f"tools is nested deeper than {C.MAX_JSON_DEPTH} levels",
    ),
    "instructions nested 5,000 deep": (
        {"input": "hi", "instructions": [{"role": "system", "content": "x", "x": DEEP}]},
        errors.InvalidRequestError,
        f"instructions is nested deeper than {C.MAX_JSON_DEPTH} levels",
    ),
    "a tool_choice nested 5,000 deep": (
        {"messages": [OK], "tool_choice": DEEP},
        errors.InvalidRequestError,
        f"tool_choice is nested deeper than {C.MAX_JSON_DEPTH} levels",
    ),
    "call arguments nested 5,000 deep": (
        {
            "messages": [
                OK,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "type": "function", "function": DEEP}],
                },
            ]
        },
        errors.InvalidMessageError,
        f"message 1 is nested deeper than {C.MAX_JSON_DEPTH} levels",
    ),
    "a message nested 500 deep": (
        {"messages": [{"role": "user", "content": "x", "meta": nested(500, "list")}]},
        errors.InvalidMessageError,
        f"message 0 is nested deeper than {C.MAX_JSON_DEPTH} levels",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_each_malformed_call_of_the_issue_is_refused_naming_what_was_wrong(engine, case):
    request, error, match = REFUSED[case]
    memory_id = f"refused-{next(_ids)}"
    with pytest.raises(error, match=match) as caught:
        engine.memory(memory_id).decorate(request)
    assert isinstance(caught.value, ValueError)  # the builtin it resembles, for older callers
    assert memory_id not in engine.memory_ids()


def test_json_exactly_as_deep_as_allowed_is_taken(engine):
    """The limit counts levels of objects and arrays: a message at the limit is stored."""
    meta = nested(C.MAX_JSON_DEPTH - 2, "list")  # its levels: the message, the list and these
    mem = engine.memory(f"deep-{next(_ids)}")
    mem.decorate({"messages": [{"role": "user", "content": "x", "meta": meta}]})
    assert len(mem.messages()) == 1
    with pytest.raises(errors.InvalidMessageError, match="nested deeper"):
        mem.decorate({"messages": [{"role": "user", "content": "y", "meta": [meta]}]})


REPLIES = {
    "tool_calls that are a number": (
        {"messages": [OK]},
        lambda r: r["choices"][0]["message"].__setitem__("tool_calls", 1.5),
        "choices\\[0\\] message has tool_calls of type float",
    ),
    "an output item whose type is a list": (
        {"input": [OK]},
        lambda r: r["output"][0].__setitem__("type", ["message"]),
        "output item 0 has a type of type list",
    ),
    "output content that is a number": (
        {"input": [OK]},
        lambda r: r["output"][0].__setitem__("content", 2**63),
        "output item 0 has content of type int",
    ),
    "a reply nested 5,000 deep": (
        {"messages": [OK]},
        lambda r: r["choices"][0]["message"].__setitem__("audio", DEEP),
        f"nested deeper than {C.MAX_JSON_DEPTH} levels",
    ),
}


@pytest.mark.parametrize("case", list(REPLIES))
def test_each_malformed_reply_is_refused_with_nothing_stored(engine, case):
    request, mutate, match = REPLIES[case]
    mem = engine.memory(f"reply-{next(_ids)}")
    sent = mem.decorate(request)
    reply = _reply_to(request)
    mutate(reply)
    before = fadeway.dumps(mem.export())
    with pytest.raises(errors.InvalidResponseError, match=match):
        mem.report(sent, reply)
    assert fadeway.dumps(mem.export()) == before


@pytest.mark.parametrize("count", [2**63, 2**70, -1, True])
def test_a_prompt_token_count_no_provider_could_give_is_no_count(engine, count):
    """A count the store could not hold (or no count at all) is noted as missing; the reply is
    stored all the same."""
    mem = engine.memory(f"count-{next(_ids)}")
    sent = mem.decorate({"messages": [OK]})
    reply = chat_reply("ok")
    reply["usage"] = {"prompt_tokens": count, "completion_tokens": 1, "total_tokens": 1}
    mem.report(sent, reply)
    (request,) = mem.export().requests
    assert request.provider_tokens is None and request.replied


def test_a_note_call_with_arguments_nested_5000_deep_is_no_note(engine):
    """A note's arguments are text the model wrote: unreadable ones leave the ask standing."""
    mem = engine.memory(f"note-{next(_ids)}")
    sent = mem.decorate({"messages": [OK]})
    deep = json.dumps({"notes": []})[:-2] + "[" * 5_000 + "]" * 5_000 + "}"
    result = mem.report(sent, _note_reply(deep))
    assert not result.note_taken
    assert mem.export().notes == []


def test_an_instruction_message_nested_5000_deep_is_refused(engine):
    memory_id = f"instr-{next(_ids)}"
    request = {"input": [{"role": "system", "content": DEEP}, OK]}
    with pytest.raises(errors.InvalidMessageError, match=r"input\[0\] is nested deeper"):
        engine.memory(memory_id).decorate(request)
    assert memory_id not in engine.memory_ids()


def _depth(value) -> int:
    """Levels of lists and dicts in a plain value: the obvious twin of `json_depth`."""
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


_BRACKETY = st.text(alphabet='[]{}"\\ aé\n', max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.integers() | _BRACKETY,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_BRACKETY, inner, max_size=4),
        max_leaves=40,
    ),
    st.booleans(),
)
def test_json_depth_counts_brackets_outside_strings_only(value, ascii_only):
    from fadeway.wire.canonical import json_depth

    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert json_depth(data) == _depth(value)
