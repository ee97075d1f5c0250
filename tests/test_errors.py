"""Bad input gets its specific error, raised before anything is written."""

from __future__ import annotations

import pytest

import fadeway
from fadeway import errors
from helpers import call

OK = {"role": "user", "content": "hi"}


def _nested(depth):
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


BAD_REQUESTS = [
    ({"messages": [{"role": "wizard", "content": "x"}]}, errors.UnknownRoleError, "role 'wizard'"),
    (
        {"messages": [OK, {"role": "tool", "tool_call_id": "call_9", "content": "x"}]},
        errors.UnmatchedToolOutputError,
        "no earlier assistant call has id 'call_9'",
    ),
    (
        {"messages": [OK, {"role": "tool", "content": "x"}]},
        errors.InvalidMessageError,
        "no string tool_call_id",
    ),
    ({"messages": ["hello"]}, errors.InvalidMessageError, "message 0 must be an object"),
    ({"messages": [{"role": "user"}]}, errors.InvalidMessageError, "no content"),
    (
        {"messages": [{"role": "user", "content": 7}]},
        errors.InvalidMessageError,
        "content must be a string or a list",
    ),
    (
        {"messages": [{"role": "user", "content": [{"text": "no type"}]}]},
        errors.InvalidMessageError,
        "content part 0",
    ),
    (
        {"messages": [OK, {"role": "assistant", "tool_calls": [{"type": "function"}]}]},
        errors.InvalidMessageError,
        "tool_calls\\[0\\] has no string id",
    ),
    (
        {"messages": [OK, {"role": "user", "content": "x", "extra": object()}]},
        errors.InvalidMessageError,
        "not JSON-serialisable",
    ),
    # JSON cannot carry these as given: refused, not stored changed (base64 text, null).
    (
        {"messages": [OK, {"role": "user", "content": b"rm -rf /"}]},
        errors.InvalidMessageError,
        "message 1 holds bytes",
    ),
    (
        {"messages": [OK, {"role": "user", "content": "x", "score": float("nan")}]},
        errors.InvalidMessageError,
        "message 1 holds the number nan",
    ),
    (
        {
            "input": [
                {
                    "role": "user",
                    "content": [{"type": "input_text", "text": "x", "w": [1.0, float("-inf")]}],
                }
            ]
        },
        errors.InvalidMessageError,
        "message 0 holds the number -inf",
    ),
    (
        {"messages": [OK, {"role": "user", "content": "x", "meta": _nested(5_000)}]},
        errors.InvalidMessageError,
        "message 1 is nested deeper than 100 levels",
    ),
    (
        {"messages": [{"role": "user", "name": 7, "content": "x"}]},
        errors.InvalidMessageError,
        "message 0 has a name that is not a string",
    ),
    ({"messages": []}, errors.EmptyRequestError, "messages list is empty"),
    ({"model": "gpt-4.1"}, errors.EmptyRequestError, "neither messages"),
    ({"input": []}, errors.EmptyRequestError, "input list is empty"),
    ({"input": 5}, errors.InvalidMessageError, "input must be a string or a list"),
    ({"messages": [OK], "input": "x"}, errors.InvalidRequestError, "not both"),
    ({"messages": {"role": "user"}}, errors.InvalidRequestError, "messages must be a list"),
    (
        {"input": [{"type": "function_call_output", "call_id": "call_1", "output": "x"}]},
        errors.UnmatchedToolOutputError,
        "no earlier call has id 'call_1'",
    ),
    ({"input": [{"type": "telepathy"}]}, errors.InvalidMessageError, "type 'telepathy'"),
    ({"input": [{"role": "tool", "content": "x"}]}, errors.UnknownRoleError, "role 'tool'"),
    (
        {"input": "hi", "previous_response_id": "resp_1"},
        errors.ServerStateError,
        "send the input items instead",
    ),
    ("not a dict", errors.InvalidRequestError, "must be a dict"),
    # A call's outputs come right after the reply that made it, once each (providers refuse
    # anything else, and a stored history could never be sent again).
    (
        {
            "messages": [
                OK,
                {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
                {"role": "user", "content": "never mind"},
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
            ]
        },
        errors.InvalidMessageError,
        "message 2 comes before the output of call 'c1' "
        r"\(made in message 1\)",
    ),
    (
        {
            "messages": [
                OK,
                {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
                {"role": "assistant", "content": "and then"},
            ]
        },
        errors.InvalidMessageError,
        "message 3 comes before the output of call 'c2'",
    ),
    (
        {
            "messages": [
                OK,
                {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
                {"role": "tool", "tool_call_id": "c1", "content": "x"},
                {"role": "tool", "tool_call_id": "c1", "content": "x again"},
            ]
        },
        errors.UnmatchedToolOutputError,
        "message 3 answers call 'c1', which is not waiting",
    ),
    (
        {
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"role": "user", "content": "never mind"},
            ]
        },
        errors.InvalidMessageError,
        "message 2 comes before the output of call 'c1'",
    ),
]


@pytest.mark.parametrize(("request_", "error", "match"), BAD_REQUESTS)
def test_bad_request_raises_and_writes_nothing(engine, request_, error, match):
    mem = engine.memory("m")
    with pytest.raises(error, match=match):
        mem.decorate(request_)
    assert engine.memory_ids() == []


def test_a_bad_message_after_good_ones_writes_none_of_them(engine):
    mem = engine.memory("m")
    mem.decorate({"messages": [OK]})
    with pytest.raises(errors.UnmatchedToolOutputError):
        mem.decorate(
            {
                "messages": [
                    OK,
                    {"role": "user", "content": "fine"},
                    {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
                    {"role": "tool", "tool_call_id": "c2", "content": "x"},
                ]
            }
        )
    assert [m.body for m in mem.messages()] == [b'{"role":"user","content":"hi"}']
    assert len(mem.export().requests) == 1


def test_tool_output_may_answer_a_call_stored_earlier(engine):
    mem = engine.memory("m")
    mem.decorate(
        {"messages": [OK, {"role": "assistant", "content": None, "tool_calls": [call("c1")]}]}
    )
    mem.decorate({"messages": [{"role": "tool", "tool_call_id": "c1", "content": "x"}]})
    assert [m.answers for m in mem.messages()] == [None, None, "c1"]


def test_a_call_stored_by_report_waits_for_its_output_before_the_next_user_message(engine):
    """The calls of a reported reply wait for their outputs: a user message sent instead is
    refused (nothing stored), the outputs go through, a second output for a call is refused,
    and a Responses reply may hold a message item after its call. fadeway's own note call
    waits for nothing: it answers it itself."""
    from helpers import chat_reply, note_call

    mem = engine.memory("m")
    req = mem.decorate({"model": "gpt-4.1", "messages": [OK]})
    mem.report(req, chat_reply(None, tool_calls=[call("c1"), note_call("n1", [])]))
    stored = len(mem.messages())
    with pytest.raises(errors.InvalidMessageError, match="call 'c1' .made in stored message 1"):
        mem.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": "and?"}]})
    assert len(mem.messages()) == stored
    mem.decorate(
        {"model": "gpt-4.1", "messages": [{"role": "tool", "tool_call_id": "c1", "content": "x"}]}
    )
    with pytest.raises(errors.UnmatchedToolOutputError, match="'c1', which is not waiting"):
        mem.decorate(
            {
                "model": "gpt-4.1",
                "messages": [{"role": "tool", "tool_call_id": "c1", "content": "x"}],
            }
        )
    mem.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": "thanks"}]})
    responses = engine.memory("r")
    responses.decorate(
        {
            "model": "gpt-4.1",
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "message", "role": "assistant", "content": "Looking it up."},
                {"type": "function_call_output", "call_id": "c1", "output": "x"},
                {"role": "user", "content": "thanks"},
            ],
        }
    )
    assert len(responses.messages()) == 5
    # A local shell call names itself by two ids and is answered by one; an MCP approval
    # request the user never answers waits for nothing.
    shell = engine.memory("shell")
    shell.decorate(
        {
            "model": "codex-mini-latest",
            "input": [
                {"role": "user", "content": "list files"},
                {
                    "type": "local_shell_call",
                    "id": "lsh_1",
                    "call_id": "call_1",
                    "status": "completed",
                    "action": {"type": "exec", "command": ["ls"], "env": {}},
                },
                {"type": "local_shell_call_output", "id": "call_1", "output": "a.txt"},
                {
                    "type": "mcp_approval_request",
                    "id": "mcpr_1",
                    "server_label": "gh",
                    "name": "list",
                    "arguments": "{}",
                },
                {"role": "user", "content": "thanks, and skip the repo"},
            ],
        }
    )
    assert len(shell.messages()) == 5
    # Such items may be answered too, once: an approval, a client-run tool search's output.
    shell.decorate(
        {
            "model": "codex-mini-latest",
            "input": [
                {
                    "type": "mcp_approval_request",
                    "id": "mcpr_2",
                    "server_label": "gh",
                    "name": "list",
                    "arguments": "{}",
                },
                {"type": "mcp_approval_response", "approve": True, "approval_request_id": "mcpr_2"},
                {
                    "type": "tool_search_call",
                    "id": "tsc_1",
                    "call_id": "call_ts1",
                    "execution": "client",
                    "arguments": {"query": "weather"},
                    "status": "completed",
                },
                {
                    "type": "tool_search_output",
                    "id": "tso_1",
                    "call_id": "call_ts1",
                    "execution": "client",
                    "tools": [],
                    "status": "completed",
                },
            ],
        }
    )
    assert len(shell.messages()) == 9
    with pytest.raises(errors.UnmatchedToolOutputError, match="'mcpr_2', which is not waiting"):
        shell.decorate(
            {
                "model": "codex-mini-latest",
                "input": [
                    {
                        "type": "mcp_approval_response",
                        "approve": True,
                        "approval_request_id": "mcpr_2",
                    }
                ],
            }
        )
    with pytest.raises(errors.InvalidMessageError, match="before the output of call 'call_2'"):
        shell.decorate(
            {
                "model": "codex-mini-latest",
                "input": [
                    {
                        "type": "local_shell_call",
                        "id": "lsh_2",
                        "call_id": "call_2",
                        "status": "completed",
                        "action": {"type": "exec", "command": ["ls"], "env": {}},
                    },
                    {"role": "user", "content": "never mind"},
                ],
            }
        )


@pytest.mark.parametrize("memory_id", [None, 42, b"bytes", "", "x" * 1025, "a\ud800b"])
def test_bad_memory_ids(engine, memory_id):
    with pytest.raises(errors.InvalidMemoryIdError):
        engine.memory(memory_id)


def test_hostile_memory_ids_are_just_ids(engine):
    for memory_id in ["'; DROP TABLE messages; --", "../../etc/passwd", "%", "_"]:
        engine.memory(memory_id).decorate({"messages": [{"role": "user", "content": memory_id}]})
    assert sorted(engine.memory_ids()) == sorted(
        ["'; DROP TABLE messages; --", "../../etc/passwd", "%", "_"]
    )
    assert [m.body for m in engine.memory("%").messages()] == [b'{"role":"user","content":"%"}']


def test_errors_share_one_root():
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), errors.FadewayError)
    assert issubclass(errors.InvalidRequestError, ValueError)


def test_report_errors_write_nothing(engine):
    mem = engine.memory("m")
    req = mem.decorate({"messages": [OK]})
    with pytest.raises(errors.InvalidResponseError, match="no choices"):
        mem.report(req, {"choices": []})
    with pytest.raises(errors.InvalidResponseError, match="a responses response was reported"):
        mem.report(req, {"output": []})
    with pytest.raises(errors.InvalidResponseError, match="neither choices"):
        mem.report(req, {"id": "x"})
    with pytest.raises(errors.InvalidRequestError, match="no decorated request"):
        engine.memory("other").report(
            req, {"choices": []} | {"choices": [{"message": {"role": "assistant", "content": "x"}}]}
        )
    assert len(mem.messages()) == 1 and engine.memory_ids() == ["m"]


@pytest.mark.parametrize("at", [float("nan"), float("inf"), 1e30, "yesterday", True, object()])
def test_time_must_be_real(engine, at):
    """A bad `at=` is a FadewayError (and still the ValueError it resembles), before any write."""
    with pytest.raises(errors.InvalidTimeError, match="finite Unix seconds") as raised:
        engine.memory("m").decorate({"messages": [OK]}, at=at)
    assert isinstance(raised.value, ValueError)
    with pytest.raises(errors.InvalidTimeError, match="timezone-aware"):
        import datetime

        engine.memory("m").decorate({"messages": [OK]}, at=datetime.datetime(2026, 1, 1))
    assert engine.memory_ids() == []


def test_ceiling_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="ceiling must be a positive"):
        fadeway.open(tmp_path / "x.db", ceiling=0)


def test_a_memory_the_store_does_not_hold_is_named_not_found(engine):
    from fadeway.recall.turns import preview

    for read in (
        lambda: engine.memory("nope").export(),
        lambda: preview(engine.services, "nope", "hello"),
    ):
        with pytest.raises(errors.MemoryNotFoundError, match="holds no memory 'nope'") as caught:
            read()
        assert isinstance(caught.value, KeyError)  # as before, for callers that caught that
    assert engine.memory_ids() == []


def test_the_rust_cores_errors_reach_python_as_fadeway_errors():
    """`rust/py/src/errors.rs` maps each core error into the tree, keeping its text and the
    ValueError callers caught before."""
    from fadeway import _core
    from fadeway.recall.parts import message_parts

    with pytest.raises(errors.UnknownNameError, match="unknown encoding") as unknown:
        _core.count_tokens("nope", "x")
    with pytest.raises(errors.CoreInputError, match="min_chars <= max_chars") as refused:
        message_parts("Hello there.", min_chars=10, max_chars=5)
    for caught in (unknown.value, refused.value):
        assert isinstance(caught, errors.CoreError) and isinstance(caught, ValueError)
