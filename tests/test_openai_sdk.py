"""fadeway in the caller's loop with the real `openai` SDK, against a local imitation of the API.

A stdlib HTTP server on 127.0.0.1 answers POST /v1/chat/completions and POST /v1/responses with
realistic bodies and records what it received. The tests check that the provider receives
exactly the decorated request, that `report` takes the SDK's objects (the reply stored as the
JSON the server sent, the tool calls handed back), that a tool loop stores nothing twice, and
that the provider's token count is recorded and kept only when plausible.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest

import fadeway
from streaming import chat_chunks, response_events, sse

CREATED = 1_700_000_000
WEATHER_TOOL_CHAT = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
WEATHER_TOOL_RESPONSES = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    "strict": False,
}
WEATHER_ARGS = json.dumps({"city": "Paris"})
#: A provider count this far from our estimate is not plausible (PLAUSIBLE_RATIO is 0.5-2.0).
ABSURD_FACTOR = 10
#: A provider count this close to our estimate is.
CLOSE_FACTOR = 1.05

Reply = Callable[[dict[str, Any], int], dict[str, Any]]


# -- realistic bodies -----------------------------------------------------------------------------


def chat_completion(
    message: dict[str, Any], prompt_tokens: int, *, finish_reason: str = "stop"
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": CREATED,
        "model": "gpt-4.1-2025-04-14",
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 12,
            "total_tokens": prompt_tokens + 12,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_b376dfbbd5",
    }


def chat_text(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text, "refusal": None, "annotations": []}


def chat_tool_call(call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "annotations": [],
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "get_weather", "arguments": WEATHER_ARGS},
            }
        ],
    }


def response_object(
    output: list[dict[str, Any]], input_tokens: int, request: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "max_output_tokens": None,
        "model": "gpt-4.1-2025-04-14",
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": request.get("tools", []),
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 18,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + 18,
        },
        "user": None,
        "metadata": {},
    }


def output_message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e6",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def output_function_call(call_id: str) -> list[dict[str, Any]]:
    return [
        {"type": "reasoning", "id": "rs_67ccd2bf0f5c81908a2ad0f1ea5b8c61", "summary": []},
        {
            "type": "function_call",
            "id": "fc_67ccd2bfc04c8190a4ba0aaa1d6e3ebe",
            "call_id": call_id,
            "name": "get_weather",
            "arguments": WEATHER_ARGS,
            "status": "completed",
        },
    ]


# -- the imitation server -------------------------------------------------------------------------


class FakeOpenAI(ThreadingHTTPServer):
    """Answers each POST with the next queued reply; records (path, body) of every request.

    A queued reply is a function of the request body and the prompt token count; the count is
    `prompt_tokens` (set by the test) when set.
    """

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.replies: dict[str, list[Reply]] = {"/v1/chat/completions": [], "/v1/responses": []}
        self.prompt_tokens = 42
        self.sent: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body in self.received if p == path]


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with self.server.lock:
            self.server.received.append((self.path, body))
            queue = self.server.replies.get(self.path)
            reply = queue.pop(0)(body, self.server.prompt_tokens) if queue else None
            if reply is not None:
                self.server.sent.append(reply)
        if reply is None:
            self._send(
                404,
                {
                    "error": {
                        "message": f"no reply queued for {self.path}",
                        "type": "invalid_request_error",
                    }
                },
            )
        elif body.get("stream"):
            self._stream(
                reply,
                chat=self.path.endswith("/chat/completions"),
                usage=bool((body.get("stream_options") or {}).get("include_usage")),
            )
        else:
            self._send(200, reply)

    def _stream(self, reply: dict[str, Any], *, chat: bool, usage: bool) -> None:
        """The reply as the API streams it: server-sent events, the connection then closed."""
        events = chat_chunks(reply, include_usage=usage) if chat else response_events(reply)
        data = sse(events, done=chat)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    srv = FakeOpenAI()
    # A short poll interval: shutdown() waits up to one interval for the loop to notice.
    thread = threading.Thread(
        target=srv.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
    )
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()


@pytest.fixture
def client(server: FakeOpenAI) -> Iterator[openai.OpenAI]:
    c = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=10)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def engine(tmp_path) -> Iterator[fadeway.Engine]:
    with fadeway.open(tmp_path / "sdk.db", clock=lambda: 1.7e9) as engine:
        yield engine


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _stored(mem: fadeway.Memory) -> list[Any]:
    return [json.loads(m.body) for m in mem.messages()]


def _estimate(mem: fadeway.Memory) -> int:
    return mem.export().requests[-1].estimate


def _assert_received(server: FakeOpenAI, path: str, decorated: dict[str, Any]) -> None:
    """The provider got the decorated request, field for field (the SDK added nothing)."""
    assert server.bodies(path)[-1] == _json(decorated)


# -- Chat Completions -----------------------------------------------------------------------------

CHAT_PATH = "/v1/chat/completions"


def test_chat_reply_is_stored_and_a_close_count_kept(server, client, engine) -> None:
    mem = engine.memory("chat-text")
    server.replies[CHAT_PATH].append(lambda body, n: chat_completion(chat_text("Bonjour !"), n))
    request = {
        "model": "gpt-4.1",
        "temperature": 0.2,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hello in French."},
        ],
    }
    decorated = mem.decorate(request)
    server.prompt_tokens = round(CLOSE_FACTOR * _estimate(mem))
    completion = client.chat.completions.create(**decorated)
    result = mem.report(decorated, completion)

    _assert_received(server, CHAT_PATH, decorated)
    assert result == fadeway.ReportResult(tool_calls=[], note_taken=False, call_again=False)
    assert _stored(mem) == [request["messages"][1], server.sent[-1]["choices"][0]["message"]]
    assert _stored(mem)[-1] == completion.choices[0].message.model_dump(
        mode="json", exclude_unset=True
    )
    record = mem.export().requests[-1]
    assert record.provider_tokens == completion.usage.prompt_tokens == server.prompt_tokens
    assert record.ratio_kept is True
    assert record.replied is True


def test_chat_tool_loop_stores_nothing_twice(server, client, engine) -> None:
    mem = engine.memory("chat-tools")
    server.replies[CHAT_PATH] += [
        lambda body, n: chat_completion(chat_tool_call("call_w1"), n, finish_reason="tool_calls"),
        lambda body, n: chat_completion(chat_text("18 °C and sunny in Paris."), n),
    ]
    messages: list[Any] = [
        {"role": "developer", "content": "Use the tools."},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    request = {"model": "gpt-4.1", "messages": messages, "tools": [WEATHER_TOOL_CHAT]}

    decorated = mem.decorate(request)
    first = client.chat.completions.create(**decorated)
    result = mem.report(decorated, first)
    _assert_received(server, CHAT_PATH, decorated)
    assert result.tool_calls == [server.sent[-1]["choices"][0]["message"]["tool_calls"][0]]
    assert result.note_taken is False and result.call_again is False

    # The caller's loop: the SDK's message object itself, then the tool's output.
    messages = [
        *decorated["messages"],
        first.choices[0].message,
        {"role": "tool", "tool_call_id": result.tool_calls[0]["id"], "content": "18 °C"},
    ]
    decorated = mem.decorate({**request, "messages": messages})
    second = client.chat.completions.create(**decorated)
    result = mem.report(decorated, second)
    _assert_received(server, CHAT_PATH, decorated)
    assert result.tool_calls == []

    stored = _stored(mem)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert decorated["messages"] == [messages[0], *stored[:3]]
    assert stored[1] == server.sent[0]["choices"][0]["message"]
    assert stored[-1] == server.sent[1]["choices"][0]["message"]
    assert [r.replied for r in mem.export().requests] == [True, True]


def test_chat_parse_with_a_pydantic_response_format(server, client, engine) -> None:
    """Issue 31: `response_format=SomeModel` (the `chat.completions.parse(**request)` idiom)
    passes through decorate as the same class; the SDK turns it into a JSON schema, the reply
    is reported, and the next turn recognises the parsed message as the stored reply."""
    pydantic = pytest.importorskip("pydantic")

    class Weather(pydantic.BaseModel):
        city: str
        celsius: int

    mem = engine.memory("chat-parse")
    server.replies[CHAT_PATH] += [
        lambda body, n: chat_completion(chat_text('{"city": "Paris", "celsius": 18}'), n)
    ] * 2
    request = {
        "model": "gpt-4.1",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "response_format": Weather,
    }
    decorated = mem.decorate(request)
    assert decorated["response_format"] is Weather
    completion = client.chat.completions.parse(**decorated)
    assert completion.choices[0].message.parsed == Weather(city="Paris", celsius=18)
    assert server.bodies(CHAT_PATH)[-1]["response_format"]["type"] == "json_schema"
    plain = engine.memory("chat-parse-plain")
    plain.decorate({k: v for k, v in request.items() if k != "response_format"})
    assert _estimate(mem) > _estimate(plain)  # the schema the model reads is counted
    mem.report(decorated, completion)
    # Stored as the provider sent it (the parse helper sets null fields of its own): the
    # SDK's client-side `parsed` is left out.
    stored, sent = _stored(mem)[1], server.sent[-1]["choices"][0]["message"]
    assert {k: v for k, v in stored.items() if v is not None} == {
        k: v for k, v in sent.items() if v is not None
    }

    messages = [*decorated["messages"], completion.choices[0].message]
    decorated = mem.decorate(
        {**request, "messages": [*messages, {"role": "user", "content": "And Rome?"}]}
    )
    assert decorated["response_format"] is Weather
    client.chat.completions.parse(**decorated)
    assert [m["role"] for m in _stored(mem)] == ["user", "assistant", "user"]


def test_chat_absurd_count_is_recorded_not_kept(server, client, engine) -> None:
    mem = engine.memory("chat-absurd")
    server.replies[CHAT_PATH].append(lambda body, n: chat_completion(chat_text("Hi."), n))
    decorated = mem.decorate(
        {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello there!"}]}
    )
    server.prompt_tokens = ABSURD_FACTOR * _estimate(mem)
    mem.report(decorated, client.chat.completions.create(**decorated))
    record = mem.export().requests[-1]
    assert record.provider_tokens == server.prompt_tokens
    assert record.ratio_kept is False
    assert record.ratio_note and "plausible" in record.ratio_note
    assert mem.correction("gpt-4o-mini") == 1.0  # nothing kept, nothing corrected


# -- Responses ------------------------------------------------------------------------------------

RESPONSES_PATH = "/v1/responses"


def test_responses_reply_is_stored_and_a_close_count_kept(server, client, engine) -> None:
    mem = engine.memory("responses-text")
    server.replies[RESPONSES_PATH].append(
        lambda body, n: response_object([output_message("Bonjour !")], n, body)
    )
    request = {
        "model": "gpt-4.1",
        "instructions": "You are terse.",
        "input": "Say hello in French.",
        "store": False,
    }
    decorated = mem.decorate(request)
    server.prompt_tokens = round(CLOSE_FACTOR * _estimate(mem))
    response = client.responses.create(**decorated)
    result = mem.report(decorated, response)

    _assert_received(server, RESPONSES_PATH, decorated)
    assert decorated["input"] == [{"role": "user", "content": "Say hello in French."}]
    assert result.tool_calls == []
    assert response.output_text == "Bonjour !"
    assert _stored(mem) == [decorated["input"][0], server.sent[-1]["output"][0]]
    assert _stored(mem)[-1] == response.output[0].model_dump(mode="json", exclude_unset=True)
    record = mem.export().requests[-1]
    assert record.provider_tokens == response.usage.input_tokens == server.prompt_tokens
    assert record.ratio_kept is True


def test_responses_function_call_loop_stores_nothing_twice(server, client, engine) -> None:
    mem = engine.memory("responses-tools")
    server.replies[RESPONSES_PATH] += [
        lambda body, n: response_object(output_function_call("call_w1"), n, body),
        lambda body, n: response_object([output_message("18 °C and sunny.")], n, body),
    ]
    request = {
        "model": "gpt-4.1",
        "instructions": "Use the tools.",
        "input": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [WEATHER_TOOL_RESPONSES],
    }

    decorated = mem.decorate(request)
    server.prompt_tokens = ABSURD_FACTOR * _estimate(mem)
    first = client.responses.create(**decorated)
    result = mem.report(decorated, first)
    _assert_received(server, RESPONSES_PATH, decorated)
    function_call = server.sent[0]["output"][1]
    assert result.tool_calls == [function_call]
    assert result.call_again is False
    record = mem.export().requests[-1]
    assert record.provider_tokens == server.prompt_tokens and record.ratio_kept is False

    # The caller's loop: the SDK's output items themselves, then the function's output.
    items = [
        *decorated["input"],
        *first.output,
        {"type": "function_call_output", "call_id": "call_w1", "output": "18 °C"},
    ]
    decorated = mem.decorate({**request, "input": items})
    server.prompt_tokens = round(CLOSE_FACTOR * _estimate(mem))
    second = client.responses.create(**decorated)
    result = mem.report(decorated, second)
    _assert_received(server, RESPONSES_PATH, decorated)
    assert result.tool_calls == []

    stored = _stored(mem)
    assert [m.get("type", "message") for m in stored] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert decorated["input"] == stored[:4]
    assert stored[1:3] == server.sent[0]["output"]
    assert stored[-1] == server.sent[1]["output"][0]
    assert [(r.replied, r.ratio_kept) for r in mem.export().requests] == [
        (True, False),
        (True, True),
    ]


# -- streaming ------------------------------------------------------------------------------------


def test_chat_stream_tool_loop_with_the_callers_own_accumulation(server, client, engine) -> None:
    mem = engine.memory("chat-stream")
    server.replies[CHAT_PATH] += [
        lambda body, n: chat_completion(chat_tool_call("call_w1"), n, finish_reason="tool_calls"),
        lambda body, n: chat_completion(chat_text("18 °C and sunny in Paris."), n),
    ]
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    request = {
        "model": "gpt-4.1",
        "messages": messages,
        "tools": [WEATHER_TOOL_CHAT],
        "stream": True,
        "stream_options": {"include_usage": True},
    }

    decorated = mem.decorate(request)
    server.prompt_tokens = round(CLOSE_FACTOR * _estimate(mem))
    chunks = []
    for chunk in client.chat.completions.create(**decorated):  # shown to the user as it comes
        chunks.append(chunk)
    result = mem.report(decorated, chunks)
    _assert_received(server, CHAT_PATH, decorated)
    sent = server.sent[0]["choices"][0]["message"]
    assert result.tool_calls == sent["tool_calls"]
    record = mem.export().requests[-1]
    assert record.provider_tokens == server.prompt_tokens and record.ratio_kept is True

    # The caller's loop rebuilds the assistant message from the deltas its own way.
    call = result.tool_calls[0]
    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call["id"], "type": "function", "function": call["function"]}],
        },
        {"role": "tool", "tool_call_id": call["id"], "content": "18 °C"},
    ]
    decorated = mem.decorate({**request, "messages": messages})
    stream = client.chat.completions.create(**decorated)
    result = mem.report(decorated, stream)  # the SDK's stream itself, read by report
    assert result.tool_calls == []
    stored = _stored(mem)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[-1]["content"] == "18 °C and sunny in Paris."
    assert stored[1]["tool_calls"] == sent["tool_calls"]


@pytest.mark.parametrize("passes", ["events", "stream", "final completion"])
def test_chat_stream_helper_events_are_the_reply(server, client, engine, passes) -> None:
    """Issue 31: `report` takes what the SDK's `chat.completions.stream()` helper gives: its
    events (the `chunk` events carry the chunks; the derived ones are left aside), the helper's
    stream itself, or its final completion; each is stored as the reply the provider sent."""
    mem = engine.memory("chat-stream-helper")
    server.replies[CHAT_PATH] += [
        lambda body, n: chat_completion(chat_tool_call("call_w1"), n, finish_reason="tool_calls"),
        lambda body, n: chat_completion(chat_text("18 °C and sunny in Paris."), n),
    ]
    request = {
        "model": "gpt-4.1",
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [WEATHER_TOOL_CHAT],
        "stream_options": {"include_usage": True},
    }
    decorated = mem.decorate(request)
    server.prompt_tokens = round(CLOSE_FACTOR * _estimate(mem))
    with client.chat.completions.stream(**decorated) as stream:
        if passes == "stream":
            result = mem.report(decorated, stream)
        else:
            events = list(stream)
            assert {"chunk", "tool_calls.function.arguments.done"} <= {e.type for e in events}
            reported = stream.get_final_completion() if passes == "final completion" else events
            result = mem.report(decorated, reported)
    sent = server.sent[0]["choices"][0]["message"]
    # The SDK's final completion keeps each call's stream `index`, which fadeway stores as given.
    assert [_without_index(c) for c in result.tool_calls] == sent["tool_calls"]
    record = mem.export().requests[-1]
    assert record.provider_tokens == server.prompt_tokens and record.ratio_kept is True

    call = _without_index(result.tool_calls[0])
    messages = [
        *request["messages"],
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": "18 °C"},
    ]
    decorated = mem.decorate({**request, "messages": messages})
    with client.chat.completions.stream(**decorated) as stream:
        mem.report(decorated, list(stream))
    stored = _stored(mem)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert [_without_index(c) for c in stored[1]["tool_calls"]] == sent["tool_calls"]
    assert stored[-1]["content"] == "18 °C and sunny in Paris."


def _without_index(tool_call: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in tool_call.items() if k != "index"}


def test_chat_stream_helper_events_without_their_chunks_say_what_to_pass(
    server, client, engine
) -> None:
    """Only the helper's derived events (no `chunk` event) cannot rebuild the reply: the error
    says what to pass instead, not that they are Responses events."""
    mem = engine.memory("chat-stream-helper-derived")
    server.replies[CHAT_PATH].append(lambda body, n: chat_completion(chat_text("Bonjour !"), n))
    decorated = mem.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]})
    with client.chat.completions.stream(**decorated) as stream:
        derived = [e for e in stream if e.type != "chunk"]
    with pytest.raises(fadeway.errors.InvalidResponseError, match="get_final_completion") as err:
        mem.report(decorated, derived)
    assert "Responses" not in str(err.value)
    assert [m["role"] for m in _stored(mem)] == ["user"]


def test_responses_stream_is_stored_as_the_response(server, client, engine) -> None:
    mem = engine.memory("responses-stream")
    server.replies[RESPONSES_PATH].append(
        lambda body, n: response_object(output_function_call("call_w1"), n, body)
    )
    request = {
        "model": "gpt-4.1",
        "instructions": "Use the tools.",
        "stream": True,
        "input": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [WEATHER_TOOL_RESPONSES],
    }
    decorated = mem.decorate(request)
    server.prompt_tokens = round(CLOSE_FACTOR * _estimate(mem))
    events = list(client.responses.create(**decorated))
    assert events[-1].type == "response.completed"
    result = mem.report(decorated, events)
    assert result.tool_calls == [server.sent[0]["output"][1]]
    assert _stored(mem)[1:] == server.sent[0]["output"]
    assert mem.export().requests[-1].provider_tokens == server.prompt_tokens


# -- async ----------------------------------------------------------------------------------------


def test_async_client_with_async_twins(server, engine) -> None:
    mem = engine.memory("async")
    server.replies[CHAT_PATH] += [lambda body, n: chat_completion(chat_text("Pong."), n)] * 2
    server.replies[RESPONSES_PATH].append(
        lambda body, n: response_object([output_message("Pong.")], n, body)
    )

    async def main() -> None:
        client = openai.AsyncOpenAI(
            base_url=server.base_url, api_key="test", max_retries=0, timeout=10
        )
        try:
            decorated = await mem.adecorate(
                {"model": "gpt-4.1", "messages": [{"role": "user", "content": "Ping?"}]}
            )
            server.prompt_tokens = _estimate(mem)
            completion = await client.chat.completions.create(**decorated)
            result = await mem.areport(decorated, completion)
            assert result.tool_calls == []
            _assert_received(server, CHAT_PATH, decorated)

            streamed = engine.memory("async-stream")
            decorated = await streamed.adecorate(
                {
                    "model": "gpt-4.1",
                    "stream": True,
                    "messages": [{"role": "user", "content": "Ping?"}],
                }
            )
            stream = await client.chat.completions.create(**decorated)
            assert (await streamed.areport(decorated, stream)).tool_calls == []
            assert _stored(streamed)[-1] == {"role": "assistant", "content": "Pong."}

            other = engine.memory("async-responses")
            decorated = await other.adecorate({"model": "gpt-4.1", "input": "Ping?"})
            response = await client.responses.create(**decorated)
            await other.areport(decorated, response)
            _assert_received(server, RESPONSES_PATH, decorated)
            assert _stored(other)[-1] == server.sent[-1]["output"][0]
        finally:
            await client.close()

    asyncio.run(main())
    assert _stored(mem) == [{"role": "user", "content": "Ping?"}, chat_text("Pong.")]
    record = mem.export().requests[-1]
    assert record.provider_tokens == record.estimate and record.ratio_kept is True
