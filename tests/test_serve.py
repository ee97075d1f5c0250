"""`fadeway serve`, the proxy, end to end: the real `openai` SDK (sync and async, streaming and
not) pointed at the proxy by `base_url`, the proxy running on uvicorn on a free loopback port,
in front of a scripted upstream on 127.0.0.1 that plays the provider and records what it got.

The tests check what the upstream received (the decorated request: the note tool while a note
is asked, the facts block once notes are in; the caller's key, never the memory header), what
the client saw (never fadeway's note call), and what the memory stored (the conversation as the
client holds it, plus the replies that held only a note).
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import openai
import pytest

import fadeway
from conftest import Clock, open_small
from fadeway.blocks import FACTS_HEADER
from fadeway.cli.main import main
from streaming import chat_chunks, response_events, sse
from test_openai_sdk import (
    WEATHER_TOOL_CHAT,
    WEATHER_TOOL_RESPONSES,
    chat_completion,
    output_message,
    response_object,
)

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")

from fadeway.serve import MemoryIdSource  # noqa: E402
from fadeway.serve.app import create_app  # noqa: E402

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
KEY = "sk-caller-own-key"
HEADER = "X-Fadeway-Memory"
#: A fact the scripted model writes in every note; the facts block shows it once taken.
FACT = "The user is planning a trip to Lisbon"
SYSTEM = "You are a travel agent. Be brief."

Answer = Callable[[dict[str, Any]], tuple[int, Any]]


# -- the scripted upstream ---------------------------------------------------------------------


class Upstream(ThreadingHTTPServer):
    """Plays the provider: each POST is answered by the next scripted answer of its path, else
    by the scripted model (`chat_model`, `responses_model`); `stream: true` gets the answer as
    server-sent events, one write each. Records (method, path, headers, body) of each request."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _UpstreamHandler)
        self.received: list[tuple[str, str, dict[str, str], Any]] = []
        self.script: dict[str, list[Answer]] = {CHAT: [], RESPONSES: []}
        self.sent: list[Any] = []
        self.lock = threading.Lock()
        #: When set, a stream holds its events after the first until the gate opens.
        self.gate: threading.Event | None = None
        #: When set, a stream ends after this many events with an error event, as a provider
        #: that fails mid-stream does.
        self.fail_after: int | None = None
        #: When a file's content sent its second part (time.monotonic()).
        self.second_sent: float | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [body for _, p, _, body in self.received if p == path]

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        with self.lock:
            queue = self.script.get(path)
            if queue:
                return queue.pop(0)(body)
        # No usage: a provider count far from fadeway's estimate would be its correction.
        if path == CHAT:
            return 200, _without_usage(chat_model(body))
        if path == RESPONSES:
            return 200, _without_usage(responses_model(body))
        return 404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}}

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The proxy closing a stream its client left is the point of a test, not a failure.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _error_event(chat: bool) -> bytes:
    """The event a provider sends when it fails mid-stream."""
    if chat:
        error = {"error": {"message": "The server had an error", "type": "server_error"}}
        return f"data: {json.dumps(error)}\n\n".encode()
    error = {"type": "error", "code": "server_error", "message": "The server had an error"}
    return sse([error], done=False)


class _UpstreamHandler(BaseHTTPRequestHandler):
    server: Upstream
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def _record(self, body: Any) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.server.lock:
            self.server.received.append((self.command, self.path, headers, body))

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self._record(None)
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": "gpt-4.1", "object": "model"}]})
        elif self.path == "/v1/files/file-1/content":  # a large body, sent in two writes
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self._chunk(b"first part;")
            if self.server.gate is not None:
                self.server.gate.wait(10)
            with self.server.lock:
                self.server.second_sent = time.monotonic()
            self._chunk(b"second part")
            self.wfile.write(b"0\r\n\r\n")
        else:
            self._send(404, {"error": {"message": "no such thing", "type": "not_found"}})

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self._record(body)
        status, answer = self.server.answer(self.path, body)
        if status == 200:
            with self.server.lock:
                self.server.sent.append(answer)
        if status != 200 or not body.get("stream"):
            self._send(status, answer)
            return
        chat = self.path == CHAT
        events = chat_chunks(answer) if chat else response_events(answer)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for n, event in enumerate(events):  # each its own write, relayed as they come
            if n == 1 and self.server.gate is not None:
                self.server.gate.wait(10)
            if n == self.server.fail_after:
                self._chunk(_error_event(chat))
                self.wfile.write(b"0\r\n\r\n")
                return
            # Chat Completions events carry no `event:` line, Responses events do.
            self._chunk(
                f"data: {json.dumps(event)}\n\n".encode() if chat else sse([event], done=False)
            )
        if chat:
            self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == 429:
            self.send_header("Retry-After", "7")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass


def _without_usage(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != "usage"}


def _note_arguments() -> str:
    entry = {"note": FACT, "subject": "user", "object": "Lisbon", "milestone": False}
    return json.dumps({"notes": [entry]})


def chat_model(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted model: a note (only) whenever the note tool is offered; the weather tool
    for a user message that asks about the weather, until its output came; else a text."""
    messages = body["messages"]
    tools = [t["function"]["name"] for t in body.get("tools") or []]
    n = len(messages)
    if "note" in tools:
        call = {
            "id": f"note_{n}",
            "type": "function",
            "function": {"name": "note", "arguments": _note_arguments()},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return chat_completion(message, 100, finish_reason="tool_calls")
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    text = messages[last_user]["content"]
    answered = any(m["role"] == "tool" for m in messages[last_user:])
    if "weather" in text and not answered:
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return chat_completion(message, 100, finish_reason="tool_calls")
    reply = f"Answer to: {text.split(':')[0]}"
    return chat_completion({"role": "assistant", "content": reply}, 100)


def responses_model(body: dict[str, Any]) -> dict[str, Any]:
    """`chat_model` for Responses."""
    items = body["input"]
    tools = [t.get("name") for t in body.get("tools") or []]
    n = len(items)
    if "note" in tools:
        call = {
            "type": "function_call",
            "id": f"fc_note_{n}",
            "call_id": f"note_{n}",
            "name": "note",
            "arguments": _note_arguments(),
            "status": "completed",
        }
        return response_object([call], 100, body)
    last_user = max(i for i, m in enumerate(items) if m.get("role") == "user")
    content = items[last_user]["content"]
    text = content if isinstance(content, str) else content[0]["text"]
    answered = any(m.get("type") == "function_call_output" for m in items[last_user:])
    if "weather" in text and not answered:
        call = {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_{n}",
            "name": "get_weather",
            "arguments": '{"city": "Lisbon"}',
            "status": "completed",
        }
        return response_object([call], 100, body)
    return response_object([output_message(f"Answer to: {text.split(':')[0]}")], 100, body)


# -- the proxy ---------------------------------------------------------------------------------


@contextmanager
def running(app: Any) -> Iterator[str]:
    """`app` on uvicorn in a thread, on a port the system chose; yields its API root."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the proxy did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    srv = Upstream()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def small(tmp_path, clock) -> Iterator[fadeway.Engine]:
    """A small ceiling, so a long loop's history leaves and the model is asked for notes."""
    engine = open_small(tmp_path / "serve.db", clock)
    yield engine
    engine.close()


@pytest.fixture
def proxy(small, upstream) -> Iterator[str]:
    with running(create_app(small, upstream.url)) as url:
        yield url


def _client(url: str, memory_id: str | None = "agent", **kwargs: Any) -> openai.OpenAI:
    headers = {HEADER: memory_id} if memory_id is not None else {}
    return openai.OpenAI(
        base_url=url, api_key=KEY, max_retries=0, timeout=30, default_headers=headers, **kwargs
    )


def _async_client(url: str, memory_id: str = "agent") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=url, api_key=KEY, max_retries=0, timeout=30, default_headers={HEADER: memory_id}
    )


# -- the caller's agent loops, as an SDK user writes them ------------------------------------


def _dump(obj: Any) -> dict[str, Any]:
    return obj.model_dump(mode="json", exclude_unset=True)


def _chat_stream_message(chunks: list[Any]) -> dict[str, Any]:
    """The assistant message a caller rebuilds from a stream's chunks."""
    text = ""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(
                    delta.index, {"id": None, "type": "function", "function": {"arguments": ""}}
                )
                call["id"] = delta.id or call["id"]
                if delta.function.name:
                    call["function"]["name"] = delta.function.name
                call["function"]["arguments"] += delta.function.arguments or ""
    assert sorted(calls) == list(range(len(calls))), "call indexes must run 0, 1, ..."
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


async def _chat_call(client: Any, request: dict[str, Any], stream: bool) -> dict[str, Any]:
    """One call through the proxy with the sync client (in a thread) or the async one; the
    assistant message as the caller keeps it."""
    if isinstance(client, openai.AsyncOpenAI):
        if not stream:
            return _dump((await client.chat.completions.create(**request)).choices[0].message)
        chunks = [c async for c in await client.chat.completions.create(**request, stream=True)]
        return _chat_stream_message(chunks)

    def call() -> dict[str, Any]:
        if not stream:
            return _dump(client.chat.completions.create(**request).choices[0].message)
        return _chat_stream_message(list(client.chat.completions.create(**request, stream=True)))

    return await asyncio.to_thread(call)


async def _responses_call(
    client: Any, request: dict[str, Any], stream: bool
) -> list[dict[str, Any]]:
    """One Responses call through the proxy: the output items as the caller keeps them."""

    def output(events: list[Any]) -> list[dict[str, Any]]:
        assert events[-1].type == "response.completed"
        indexes = {e.output_index for e in events if hasattr(e, "output_index")}
        assert indexes == set(range(len(indexes))), "output indexes must run 0, 1, ..."
        return [_dump(item) for item in events[-1].response.output]

    if isinstance(client, openai.AsyncOpenAI):
        if not stream:
            return [_dump(o) for o in (await client.responses.create(**request)).output]
        return output([e async for e in await client.responses.create(**request, stream=True)])

    def call() -> list[dict[str, Any]]:
        if not stream:
            return [_dump(o) for o in client.responses.create(**request).output]
        return output(list(client.responses.create(**request, stream=True)))

    return await asyncio.to_thread(call)


def _user_text(t: int) -> str:
    topic = "what is the weather there" if t % 3 == 0 else "tell me more about it"
    return f"Turn {t}: {topic}. " + " ".join(f"w{t}_{i}" for i in range(30))


async def chat_loop(
    client: Any, engine: fadeway.Engine, clock: Clock, turns: int, stream: bool
) -> list[dict[str, Any]]:
    """The caller's loop: each turn a user message, then the model until it answers without a
    tool call, each tool's output sent back; the whole history sent on every call. Returns the
    history (without the system message)."""
    history: list[dict[str, Any]] = []
    for t in range(turns):
        clock.advance(90)
        history.append({"role": "user", "content": _user_text(t)})
        for _ in range(4):
            request = {
                "model": "gpt-4.1",
                "messages": [{"role": "system", "content": SYSTEM}, *history],
                "tools": [WEATHER_TOOL_CHAT],
            }
            message = await _chat_call(client, request, stream)
            history.append(message)
            calls = message.get("tool_calls") or []
            assert all(c["function"]["name"] == "get_weather" for c in calls), calls
            for c in calls:
                history.append({"role": "tool", "tool_call_id": c["id"], "content": "21 °C"})
            if not calls:
                break
        engine.drain()
    return history


async def responses_loop(
    client: Any, engine: fadeway.Engine, clock: Clock, turns: int, stream: bool
) -> list[dict[str, Any]]:
    """`chat_loop` for Responses: `instructions`, and the output items sent back as input."""
    history: list[dict[str, Any]] = []
    for t in range(turns):
        clock.advance(90)
        history.append({"role": "user", "content": _user_text(t)})
        for _ in range(4):
            request = {
                "model": "gpt-4.1",
                "instructions": SYSTEM,
                "input": history,
                "tools": [WEATHER_TOOL_RESPONSES],
            }
            items = await _responses_call(client, request, stream)
            history += items
            calls = [i for i in items if i["type"] == "function_call"]
            assert all(c["name"] == "get_weather" for c in calls), calls
            for c in calls:
                history.append(
                    {"type": "function_call_output", "call_id": c["call_id"], "output": "21 °C"}
                )
            if not calls:
                break
        engine.drain()
    return history


# -- what to compare -------------------------------------------------------------------------


def _essence(message: dict[str, Any]) -> Any:
    """What a message says: role or type, text, calls (a streamed reply rebuilt by the caller
    differs from the stored one only in empty and missing fields)."""
    if message.get("type") not in (None, "message"):
        return {k: message.get(k) for k in ("type", "call_id", "name", "arguments", "output")}
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content)
    calls = [
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in message.get("tool_calls") or []
    ]
    return (message.get("role"), content or None, calls, message.get("tool_call_id"))


def _is_note_only(message: dict[str, Any]) -> bool:
    if message.get("type") == "function_call":
        return message["name"] == "note"
    calls = message.get("tool_calls") or []
    return bool(calls) and all(c["function"]["name"] == "note" for c in calls)


def _stored(mem: fadeway.Memory) -> list[dict[str, Any]]:
    return [json.loads(m.body) for m in mem.messages()]


def _offers_note(body: dict[str, Any]) -> bool:
    return any((t.get("function") or t).get("name") == "note" for t in body.get("tools") or [])


def _shows_facts(body: dict[str, Any]) -> bool:
    return FACT in json.dumps(body) and FACTS_HEADER in json.dumps(body)


def _check_loop(
    upstream: Upstream, mem: fadeway.Memory, path: str, history: list[dict[str, Any]]
) -> None:
    """What the upstream received and what the memory stored, after an agent loop."""
    bodies = upstream.bodies(path)
    headers = [h for _, p, h, _ in upstream.received if p == path]
    assert all(h["authorization"] == f"Bearer {KEY}" for h in headers)
    assert not any(HEADER.lower() in h for h in headers)
    # The note was asked for, the model's notes were taken, and later requests show them.
    asked = [i for i, b in enumerate(bodies) if _offers_note(b)]
    assert asked, "the small ceiling never made fadeway ask for a note"
    assert any(_shows_facts(b) for b in bodies[asked[0] + 1 :])
    assert not _shows_facts(bodies[0])
    assert FACT in [f.text for f in mem.facts()]
    # The memory holds the conversation as the client holds it, plus the replies that held
    # only the note (the client never saw those), each message once.
    stored = _stored(mem)
    assert [_essence(m) for m in stored if not _is_note_only(m)] == [_essence(m) for m in history]
    assert sum(map(_is_note_only, stored)) >= 1
    states = {e.state for e in mem.episodes()}
    assert "sealed" in states or "forgotten" in states


# -- the tests ---------------------------------------------------------------------------------

#: Turns of the agent loops: the issue's 100 in the sync chat loop, 30 in the other variants (a
#: small ceiling makes 30 enough for two note asks and their seals).
TURNS = {("sync", False): 100}
SHORT_TURNS = 30


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_chat_agent_loop_through_the_proxy(proxy, upstream, small, clock, flavour, stream):
    turns = TURNS.get((flavour, stream), SHORT_TURNS)

    async def run() -> list[dict[str, Any]]:
        if flavour == "sync":
            with _client(proxy) as client:
                return await chat_loop(client, small, clock, turns, stream)
        client = _async_client(proxy)
        try:
            return await chat_loop(client, small, clock, turns, stream)
        finally:
            await client.close()

    history = asyncio.run(run())
    mem = small.memory("agent")
    _check_loop(upstream, mem, CHAT, history)
    if not stream:  # the stored replies are the upstream's messages exactly
        replies = [m for m in _stored(mem) if m["role"] == "assistant" and not _is_note_only(m)]
        assert replies == [m for m in history if m["role"] == "assistant"]
    # Every request went up with the caller's system message first.
    assert all(
        b["messages"][0] == {"role": "system", "content": SYSTEM} for b in upstream.bodies(CHAT)
    )


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_responses_agent_loop_through_the_proxy(proxy, upstream, small, clock, flavour, stream):
    turns = SHORT_TURNS

    async def run() -> list[dict[str, Any]]:
        if flavour == "sync":
            with _client(proxy) as client:
                return await responses_loop(client, small, clock, turns, stream)
        client = _async_client(proxy)
        try:
            return await responses_loop(client, small, clock, turns, stream)
        finally:
            await client.close()

    history = asyncio.run(run())
    mem = small.memory("agent")
    _check_loop(upstream, mem, RESPONSES, history)
    assert all(b["instructions"] == SYSTEM for b in upstream.bodies(RESPONSES))


def _chat_request(text: str, **fields: Any) -> dict[str, Any]:
    return {"model": "gpt-4.1", "messages": [{"role": "user", "content": text}], **fields}


def test_two_memories_through_one_proxy_never_mix(proxy, upstream, small, clock):
    histories: dict[str, list[dict[str, Any]]] = {"alice": [], "bob": []}
    clients = {name: _client(proxy, name) for name in histories}
    try:
        for t in range(6):
            for name, client in clients.items():  # interleaved, one proxy, one engine
                clock.advance(30)
                history = histories[name]
                history.append({"role": "user", "content": f"{name} says {t}"})
                completion = client.chat.completions.create(model="gpt-4.1", messages=history)
                history.append(_dump(completion.choices[0].message))
    finally:
        for client in clients.values():
            client.close()
    for name, other in (("alice", "bob"), ("bob", "alice")):
        assert _stored(small.memory(name)) == histories[name]
        sent = [b for b in upstream.bodies(CHAT) if f"{name} says" in json.dumps(b)]
        assert len(sent) == 6 and not any(f"{other} says" in json.dumps(b) for b in sent)
    assert sorted(small.memory_ids()) == ["alice", "bob"]


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("status", [400, 429, "unreachable"])
def test_a_refused_request_passes_through_and_stores_nothing(
    proxy, upstream, small, status, stream
):
    """The upstream's status and body reach the client as sent, and nothing of the refused
    request is stored, neither on a new memory nor on one with history: the client may then
    send the refused message changed (shortened after a context_length_exceeded, say), which
    the memory takes as new, not as an edited history."""
    refusal = {
        "error": {
            "message": "Rate limit reached" if status == 429 else "Invalid 'temperature'",
            "type": "requests" if status == 429 else "invalid_request_error",
            "param": None,
            "code": "rate_limit_exceeded" if status == 429 else "invalid_value",
        }
    }

    def refuse(body: dict[str, Any]) -> tuple[int, Any]:
        if status == "unreachable":
            raise ConnectionResetError  # the upstream drops the connection
        return status, refusal

    with _client(proxy) as client:
        first = client.chat.completions.create(model="gpt-4.1", messages=[_user("Hello")])
        history = [_user("Hello"), _dump(first.choices[0].message)]
        mem = small.memory("agent")
        before = fadeway.dumps(mem.export())
        for memory in ("agent", "new"):
            upstream.script[CHAT].append(refuse)
            with _client(proxy, memory) as other, pytest.raises(openai.APIStatusError) as refused:
                messages = [*history, _user("Plan my week " * 50)] if memory == "agent" else []
                request = _chat_request("Plan my week", stream=stream)
                request["messages"] = messages or request["messages"]
                reply = other.chat.completions.create(**request)
                list(reply) if stream else None
            if status == "unreachable":
                assert refused.value.status_code == 502
            else:
                assert refused.value.status_code == status
                assert refused.value.body == refusal["error"]
            if status == 429:
                assert refused.value.response.headers["retry-after"] == "7"
        assert fadeway.dumps(mem.export()) == before
        assert "new" not in small.memory_ids()
        # The message sent again, changed: taken as new.
        history.append(_user("Plan my week"))
        completion = client.chat.completions.create(model="gpt-4.1", messages=history)
    assert _stored(mem) == [*history, _dump(completion.choices[0].message)]


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
def test_a_request_that_cannot_be_stored_once_accepted_still_answers(
    proxy, upstream, small, stream, monkeypatch, caplog
):
    """The upstream took the request but the store fails to keep it: the client gets the
    reply all the same (the call was made and paid for), the failure is logged, and nothing
    of the request or its reply is stored."""

    def failing(self: fadeway.Memory, prepared: Any) -> dict[str, Any]:
        raise fadeway.errors.StoreError("the disk is full")

    monkeypatch.setattr(fadeway.Memory, "commit", failing)
    with _client(proxy) as client:
        reply = client.chat.completions.create(**_chat_request("Hello", stream=stream))
        chunks = list(reply) if stream else None
    text = (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        if chunks is not None
        else reply.choices[0].message.content
    )
    assert text == "Answer to: Hello"
    assert "the request was not stored" in caplog.text
    assert "agent" not in small.memory_ids()


@pytest.mark.parametrize("fmt", [CHAT, RESPONSES])
def test_a_request_without_a_memory_id_is_refused_in_openais_shape(proxy, upstream, fmt):
    with _client(proxy, memory_id=None) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            if fmt == CHAT:
                client.chat.completions.create(**_chat_request("Hello"))
            else:
                client.responses.create(model="gpt-4.1", input="Hello")
    error = refused.value.response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert error["param"] == HEADER and error["code"] == "missing_memory_id"
    assert HEADER in error["message"]
    assert upstream.received == []


def test_a_request_fadeway_refuses_gets_a_400_and_never_reaches_the_upstream(
    proxy, upstream, small
):
    with _client(proxy) as client:
        client.chat.completions.create(**_chat_request("Hello"))
        edited = [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "An answer the model never gave"},
            {"role": "user", "content": "And now?"},
        ]
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(model="gpt-4.1", messages=edited)
        with pytest.raises(openai.BadRequestError) as other_format:
            client.responses.create(model="gpt-4.1", input="Hello")
    assert refused.value.response.json()["error"]["code"] == "history_conflict"
    assert other_format.value.response.json()["error"]["code"] == "format_mismatch"
    assert len(upstream.received) == 1


@pytest.mark.parametrize(
    ("source", "fields"),
    [
        ("user", {"user": "carol"}),
        ("metadata:conversation", {"metadata": {"conversation": "carol"}, "store": True}),
    ],
)
def test_the_memory_id_from_the_request_body(small, upstream, source, fields):
    app = create_app(small, upstream.url, memory_from=MemoryIdSource.parse(source))
    with running(app) as url, _client(url, memory_id=None) as client:
        client.chat.completions.create(**_chat_request("Hello", **fields))
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(**_chat_request("Hello"))
    assert [m["content"] for m in _stored(small.memory("carol"))] == ["Hello", "Answer to: Hello"]
    # The field the id came from is the caller's and goes up unchanged.
    assert {k: upstream.bodies(CHAT)[0][k] for k in fields} == fields
    error = refused.value.response.json()["error"]
    assert error["param"] == ("user" if source == "user" else "metadata.conversation")


def test_other_endpoints_pass_through_unchanged(proxy, upstream):
    with _client(proxy, memory_id=None) as client:
        models = client.models.list()
        with pytest.raises(openai.NotFoundError):
            client.embeddings.create(model="text-embedding-3-small", input="hi")
    assert [m.id for m in models.data] == ["gpt-4.1"]
    method, path, headers, _ = upstream.received[0]
    assert (method, path, headers["authorization"]) == ("GET", "/v1/models", f"Bearer {KEY}")
    assert upstream.received[1][1] == "/v1/embeddings"


def test_another_endpoints_answer_reaches_the_client_as_it_comes(proxy, upstream):
    """A file's content (or speech audio) is relayed as it arrives, not held whole: the first
    part reaches the client before the upstream sends the second."""
    upstream.gate = threading.Event()
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "GET", f"{proxy}/files/file-1/content", headers={"Authorization": f"Bearer {KEY}"}
        ) as answer,
    ):
        parts = answer.iter_raw()
        first = next(parts)
        got_first = time.monotonic()
        upstream.gate.set()
        rest = b"".join(parts)
    assert answer.status_code == 200 and first + rest == b"first part;second part"
    assert upstream.second_sent is not None and got_first < upstream.second_sent
    assert upstream.received[0][2]["authorization"] == f"Bearer {KEY}"


def test_a_stream_reaches_the_client_as_it_comes(proxy, upstream, small):
    """The first chunk reaches the client while the upstream still holds the rest back; the
    reply is stored once the stream ended."""
    gate = threading.Event()
    upstream.gate = gate
    with _client(proxy) as client:
        stream = client.chat.completions.create(**_chat_request("Hello"), stream=True)
        first = next(iter(stream))
        assert not gate.is_set()
        gate.set()
        rest = list(stream)
    assert first.choices[0].delta.role == "assistant" and rest
    assert _stored(small.memory("agent"))[-1] == {
        "role": "assistant",
        "content": "Answer to: Hello",
    }


def test_serve_options_are_checked_before_anything_starts(tmp_path, capsys):
    db = str(tmp_path / "never.db")
    for argv in (
        ["serve", "--upstream", "ftp://example.com", "--db", db],
        ["serve", "--upstream", "http://127.0.0.1:9/v1", "--memory-from", "cookie", "--db", db],
    ):
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--upstream 'ftp://example.com'" in err and "--memory-from 'cookie'" in err
    assert not (tmp_path / "never.db").exists()


@pytest.mark.parametrize(
    ("given", "expected"),
    [([], None), (["--note-writer", "offline"], "offline"), (["--note-writer", "none"], None)],
)
def test_serve_passes_its_note_writer_to_the_engine(tmp_path, monkeypatch, given, expected):
    """`--note-writer`: none (the upstream model writes its notes), offline or a URL, as
    `fadeway.open` takes it."""
    from fadeway.cli import commands
    from fadeway.errors import UsageError

    seen: dict = {}

    def opened(db, **settings):
        seen.update(settings)
        raise UsageError("stopped before serving")

    monkeypatch.setattr(commands, "open_store", opened)
    argv = ["serve", "--upstream", "http://127.0.0.1:9/v1", "--db", str(tmp_path / "x.db")]
    assert main([*argv, *given]) == 2
    assert seen["note_writer"] == expected


def test_a_bad_note_writer_is_refused_before_anything_starts(tmp_path, capsys):
    db = tmp_path / "never.db"
    argv = ["serve", "--upstream", "http://127.0.0.1:9/v1", "--db", str(db)]
    assert main([*argv, "--note-writer", "gpt-4"]) == 2
    assert (
        "--note-writer 'gpt-4': allowed is offline, none or an http(s) URL"
        in capsys.readouterr().err
    )
    assert not db.exists()


def test_a_client_that_leaves_mid_stream_frees_its_memory(proxy, upstream, small):
    """What came before the client left is reported as a stream cut off, and the memory's next
    request is served (its lock was released)."""
    gate = threading.Event()
    upstream.gate = gate
    with _client(proxy) as client:
        stream = client.chat.completions.create(**_chat_request("Hello"), stream=True)
        next(iter(stream))
        stream.close()
        gate.set()
        upstream.gate = None
        completion = client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "Again"}]
        )
    assert completion.choices[0].message.content == "Answer to: Again"
    # Where the proxy learns the client left depends on when uvicorn saw the connection
    # close: at once (what came, the role chunk, is a cut stream with no text: no reply to
    # store), after some text (stored as a cut stream: its text, no finish), or only after the
    # stream's last event (the whole reply). Either way the memory serves its next request.
    stored = _stored(small.memory("agent"))
    assert stored[0] == {"role": "user", "content": "Hello"}
    assert stored[-2:] == [
        {"role": "user", "content": "Again"},
        {"role": "assistant", "content": "Answer to: Again"},
    ]
    cut = stored[1:-2]
    assert cut == [] or (
        len(cut) == 1
        and cut[0]["role"] == "assistant"
        and "Answer to: Hello".startswith(cut[0]["content"])
    )


def test_a_request_without_its_history_key_is_refused(proxy, upstream):
    with _client(proxy) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            client.post(
                "/chat/completions", body={"model": "gpt-4.1", "input": "Hi"}, cast_to=object
            )
    error = refused.value.response.json()["error"]
    assert (error["param"], error["code"]) == ("messages", "missing_required_parameter")
    assert upstream.received == []


def test_the_serve_command_runs_the_proxy(tmp_path, upstream):
    """`fadeway serve` as a user runs it: the port the system chose is printed, a call through
    it is stored in --db, and Ctrl-C stops it (exit 0)."""
    db = tmp_path / "served.db"
    argv = [sys.executable, "-m", "fadeway", "serve", "--upstream", upstream.url]
    argv += ["--port", "0", "--db", str(db), "--memory-from", "user"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+/v1) -> ", line)
        assert found, line
        deadline = time.monotonic() + 20
        while True:  # the line comes before uvicorn's loop starts; wait for it to answer
            try:
                with _client(found.group(1), memory_id=None) as client:
                    completion = client.chat.completions.create(
                        **_chat_request("Hello", user="dora")
                    )
                break
            except openai.APIConnectionError:
                assert time.monotonic() < deadline, "the proxy never answered"
                time.sleep(0.1)
        assert completion.choices[0].message.content == "Answer to: Hello"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        proc.stderr.close()
    with fadeway.open(db, background=False) as engine:
        assert [m["content"] for m in _stored(engine.memory("dora"))] == [
            "Hello",
            "Answer to: Hello",
        ]


def test_an_upstream_that_does_not_answer_is_a_502(small):
    with socket.socket() as closed:  # a port nothing listens on once this socket is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with running(create_app(small, f"http://127.0.0.1:{port}/v1")) as url:
        with _client(url) as client, pytest.raises(openai.InternalServerError) as failed:
            client.chat.completions.create(**_chat_request("Hello"))
    assert failed.value.status_code == 502
    error = failed.value.response.json()["error"]
    assert (error["type"], error["code"]) == ("upstream_error", "upstream_unreachable")
    # Nothing is stored of a request the upstream did not take.
    assert "agent" not in small.memory_ids()


def _note_and_weather(fmt: str, body: dict[str, Any]) -> tuple[int, Any]:
    """A reply whose first call is fadeway's note and second the caller's weather tool."""
    arguments = _note_arguments()
    if fmt == CHAT:
        calls = [
            {"id": "n1", "type": "function", "function": {"name": "note", "arguments": arguments}},
            {
                "id": "w1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
            },
        ]
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        return 200, chat_completion(message, 100, finish_reason="tool_calls")
    items = [
        {"type": "function_call", "id": "fc_n1", "call_id": "n1", "name": "note"},
        {"type": "function_call", "id": "fc_w1", "call_id": "w1", "name": "get_weather"},
    ]
    items[0]["arguments"], items[1]["arguments"] = arguments, '{"city": "Lisbon"}'
    return 200, response_object([{**i, "status": "completed"} for i in items], 100, body)


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize("fmt", [CHAT, RESPONSES], ids=["chat", "responses"])
def test_a_note_beside_the_callers_call_is_kept_from_the_client(
    proxy, upstream, small, fmt, stream
):
    """The client sees only its own call, at index 0 (the note before it taken out, indexes
    renumbered), and its loop goes on; the stored reply keeps both calls."""
    upstream.script[fmt].append(partial(_note_and_weather, fmt))
    with _client(proxy) as client:
        if fmt == CHAT:
            request = {**_chat_request("Weather in Lisbon?"), "tools": [WEATHER_TOOL_CHAT]}
            if stream:
                chunks = list(client.chat.completions.create(**request, stream=True))
                message = _chat_stream_message(chunks)
                finish = [c.choices[0].finish_reason for c in chunks if c.choices]
                assert finish[-1] == "tool_calls"
            else:
                choice = client.chat.completions.create(**request).choices[0]
                message, finish = _dump(choice.message), [choice.finish_reason]
            assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]
            assert finish[-1] == "tool_calls"
        else:
            request = {"model": "gpt-4.1", "input": "Weather in Lisbon?"}
            request["tools"] = [WEATHER_TOOL_RESPONSES]
            items = asyncio.run(_responses_call(client, request, stream))
            assert [i["name"] for i in items] == ["get_weather"]
    stored = _stored(small.memory("agent"))
    if fmt == CHAT:
        assert [c["id"] for c in stored[-1]["tool_calls"]] == ["n1", "w1"]
    else:
        assert [i["call_id"] for i in stored[-2:]] == ["n1", "w1"]


def test_one_memorys_requests_run_one_at_a_time(proxy, upstream, small):
    """Two requests of one memory at once, each sending only its new message: the second is
    decorated after the first's reply is reported, so both replies are stored, each after its
    own message (decorated together, the first reply would come out of order, unstored)."""

    def slow(body: dict[str, Any]) -> tuple[int, Any]:
        time.sleep(0.3)
        return 200, _without_usage(chat_model(body))

    upstream.script[CHAT] += [slow, slow]

    async def both() -> None:
        client = _async_client(proxy)
        try:
            await asyncio.gather(
                *(client.chat.completions.create(**_chat_request(t)) for t in ("One", "Two"))
            )
        finally:
            await client.close()

    started = time.monotonic()
    asyncio.run(both())
    assert time.monotonic() - started >= 0.6  # one after the other
    stored = [(m["role"], m["content"]) for m in _stored(small.memory("agent"))]
    assert stored in (
        [
            ("user", a),
            ("assistant", f"Answer to: {a}"),
            ("user", b),
            ("assistant", f"Answer to: {b}"),
        ]
        for a, b in (("One", "Two"), ("Two", "One"))
    )


def test_serve_without_its_extra_says_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if the extra were not installed
    argv = ["serve", "--upstream", "http://127.0.0.1:9/v1", "--db", str(tmp_path / "x.db")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "uvicorn is missing" in err and "pip install 'fadeway[serve]'" in err
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("flavour", ["chat", "responses"])
def test_an_error_event_mid_stream_reaches_the_client_and_no_reply_is_stored(
    proxy, upstream, small, flavour
):
    """A provider that fails mid-stream sends an error event: the client gets it (the SDK
    raises it for Chat Completions, yields it for Responses), and the memory stores no reply
    (what came before the error is no answer)."""
    upstream.fail_after = 2
    with _client(proxy) as client:
        if flavour == "chat":
            with pytest.raises(openai.APIError, match="server had an error"):
                list(client.chat.completions.create(**_chat_request("Hello"), stream=True))
        else:
            events = list(client.responses.create(model="gpt-4.1", input="Hello", stream=True))
            assert events[-1].type == "error" and "server had an error" in events[-1].message
            assert not any(e.type == "response.completed" for e in events)
    stored = _stored(small.memory("agent"))
    assert [m.get("role") for m in stored if m.get("role")] == ["user"]
