"""The proxy (`fadeway serve`): an OpenAI-compatible HTTP server in front of an upstream, which
decorates each Chat Completions and Responses request with its memory, forwards it with the
caller's own key, and reports the reply (design: docs/design/serve.md).

Starlette on uvicorn serves; one `httpx.AsyncClient` calls the upstream. The engine's async
twins (`adecorate`, `areport`) run the memory's calls off the event loop. One memory's requests
run one at a time (decorate, upstream call, report), so each reply is reported against the
request it answers; requests of different memories run side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import weakref
from collections.abc import AsyncIterator, Mapping
from functools import partial
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import _constants as C
from ..engine import Engine
from ..errors import FadewayError, InvalidMemoryIdError, InvalidRequestError
from ..memory import Memory
from ..records import ReportResult
from ..wire import Format
from .hiding import NoteFilter, without_notes
from .ids import MemoryIdSource
from .sse import Event, EventSplitter, encode_event

__all__ = ["create_app"]

log = logging.getLogger("fadeway.serve")

#: Headers that belong to one connection, not to the request or answer they carry, and those
#: the proxy sets itself (httpx frames the body and asks for the encodings it can decode).
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)
#: Besides those, the upstream's answer loses its encoding: httpx hands the body over decoded.
_NOT_RELAYED = _HOP_BY_HOP | {"content-encoding"}

_FORMATS = {"chat/completions": Format.CHAT_COMPLETIONS, "responses": Format.RESPONSES}
_HISTORY_KEY = {Format.CHAT_COMPLETIONS: "messages", Format.RESPONSES: "input"}


def openai_error(
    status: int, message: str, *, kind: str, param: str | None = None, code: str | None = None
) -> JSONResponse:
    """An error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`."""
    error = {"message": message, "type": kind, "param": param, "code": code}
    return JSONResponse({"error": error}, status_code=status)


def _code(exc: BaseException) -> str:
    """`HistoryConflictError` -> "history_conflict": the error's class, as OpenAI names codes."""
    name = type(exc).__name__.removesuffix("Error")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class _Proxy:
    """The routes' state: the engine, the upstream, where memory ids come from, and the lock of
    each memory with a request in flight."""

    def __init__(self, engine: Engine, upstream: str, memory_from: MemoryIdSource) -> None:
        self.engine = engine
        self.upstream = upstream.rstrip("/")
        self.memory_from = memory_from
        self.client: httpx.AsyncClient | None = None
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._tasks: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(C.SERVE_READ_TIMEOUT, connect=C.SERVE_CONNECT_TIMEOUT),
            limits=httpx.Limits(max_connections=C.SERVE_MAX_CONNECTIONS),
            follow_redirects=False,
        )
        try:
            yield
        finally:
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.client.aclose()

    # -- what goes up, what comes down ---------------------------------------------------------

    def _url(self, request: Request) -> str:
        """The upstream URL for a request to the proxy: its path under `/v1` joined to the
        upstream's API root, with its query."""
        path = request.url.path
        path = path[3:] if path == "/v1" or path.startswith("/v1/") else path
        query = f"?{request.url.query}" if request.url.query else ""
        return f"{self.upstream}{path}{query}"

    def _headers_up(self, request: Request) -> dict[str, str]:
        """The caller's headers (its Authorization among them), but the connection's and the
        memory id's."""
        drop = _HOP_BY_HOP | {self.memory_from.key.lower()}
        return {k: v for k, v in request.headers.items() if k.lower() not in drop}

    @staticmethod
    def _headers_down(upstream: httpx.Response) -> dict[str, str]:
        return {k: v for k, v in upstream.headers.items() if k.lower() not in _NOT_RELAYED}

    def _relayed(self, upstream: httpx.Response, content: bytes) -> Response:
        return Response(content, upstream.status_code, headers=self._headers_down(upstream))

    def _lock(self, memory_id: str) -> asyncio.Lock:
        lock = self._locks.get(memory_id)
        if lock is None:
            lock = self._locks[memory_id] = asyncio.Lock()
        return lock

    # -- the routes ------------------------------------------------------------------------------

    async def passthrough(self, request: Request) -> Response:
        """Any other endpoint (`/v1/models`, ...): forwarded as it came, answered as it went."""
        assert self.client is not None
        try:
            upstream = await self.client.request(
                request.method,
                self._url(request),
                content=await request.body(),
                headers=self._headers_up(request),
            )
        except httpx.HTTPError as exc:
            return self._unreachable(exc)
        return self._relayed(upstream, upstream.content)

    async def with_memory(self, request: Request, *, fmt: Format) -> Response:
        """POST /v1/chat/completions and /v1/responses: decorate, forward, report."""
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return openai_error(
                400, "the request body is not a JSON object", kind="invalid_request_error"
            )
        memory_id = self.memory_from.find(request.headers, body)
        if memory_id is None:
            return openai_error(
                400,
                f"this fadeway proxy reads each request's memory id from {self.memory_from}, "
                "and the request has none: set it to the conversation's id",
                kind="invalid_request_error",
                param=self.memory_from.param,
                code="missing_memory_id",
            )
        key = _HISTORY_KEY[fmt]
        if key not in body:
            return openai_error(
                400,
                f"a request to {request.url.path} carries its history in {key!r}",
                kind="invalid_request_error",
                param=key,
                code="missing_required_parameter",
            )
        try:
            mem = self.engine.memory(memory_id)
        except InvalidMemoryIdError as exc:
            return openai_error(
                400,
                str(exc),
                kind="invalid_request_error",
                param=self.memory_from.param,
                code="invalid_memory_id",
            )
        lock = self._lock(memory_id)
        await lock.acquire()
        released = False
        try:
            decorated = await self._decorate(mem, body)
            if isinstance(decorated, Response):
                return decorated
            call = _Call(self, mem, fmt, body, self._url(request), self._headers_up(request))
            if body.get("stream"):
                released = True  # the stream releases it once its reply is reported
                return await call.stream(decorated, lock)
            return await call.complete(decorated)
        finally:
            if not released:
                lock.release()

    async def _decorate(self, mem: Memory, body: dict[str, Any]) -> dict[str, Any] | Response:
        try:
            return await mem.adecorate(body)
        except InvalidRequestError as exc:
            log.info("memory %r: request refused: %s", mem.memory_id, exc)
            return openai_error(400, str(exc), kind="invalid_request_error", code=_code(exc))
        except FadewayError as exc:
            log.exception("memory %r: decorate failed", mem.memory_id)
            return openai_error(500, f"fadeway: {exc}", kind="server_error", code=_code(exc))

    async def report(self, mem: Memory, decorated: dict[str, Any], reply: Any) -> ReportResult:
        """`areport`; a reply it cannot store is logged (the client gets it all the same)."""
        try:
            return await mem.areport(decorated, reply)
        except FadewayError as exc:
            log.warning("memory %r: the reply was not stored: %s", mem.memory_id, exc)
            return ReportResult(tool_calls=[])

    def _unreachable(self, exc: httpx.HTTPError) -> Response:
        log.warning("the upstream %s did not answer: %s", self.upstream, type(exc).__name__)
        return openai_error(
            502,
            f"the upstream {self.upstream} did not answer ({type(exc).__name__})",
            kind="upstream_error",
            code="upstream_unreachable",
        )

    def later(self, coro: Any) -> None:
        """Run `coro` on its own, held until it ends (the server waits for it on shutdown)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class _Call:
    """One request with a memory, through its rounds: the reply, and the calls made again while
    the reply held only the note (`call_again`)."""

    def __init__(
        self,
        proxy: _Proxy,
        mem: Memory,
        fmt: Format,
        body: dict[str, Any],
        url: str,
        headers: Mapping[str, str],
    ) -> None:
        self.proxy, self.mem, self.fmt, self.body = proxy, mem, fmt, body
        self.url, self.headers = url, dict(headers)
        assert proxy.client is not None
        self.client = proxy.client

    async def again(self) -> dict[str, Any] | Response:
        """The request for the call again: nothing new, so the memory's view, with fadeway's
        answer to its note call (the instructions are the memory's latest)."""
        return await self.proxy._decorate(self.mem, {**self.body, _HISTORY_KEY[self.fmt]: []})

    def _request(self, decorated: dict[str, Any]) -> httpx.Request:
        content = json.dumps(decorated, ensure_ascii=False).encode()
        headers = {**self.headers, "content-type": "application/json"}
        return self.client.build_request("POST", self.url, content=content, headers=headers)

    async def complete(self, decorated: dict[str, Any]) -> Response:
        for round_ in range(C.SERVE_NOTE_ROUNDS + 1):
            try:
                upstream = await self.client.send(self._request(decorated))
            except httpx.HTTPError as exc:
                return self.proxy._unreachable(exc)
            if not upstream.is_success:
                log.info(
                    "memory %r: upstream answered %d", self.mem.memory_id, upstream.status_code
                )
                return self.proxy._relayed(upstream, upstream.content)
            try:
                reply = upstream.json()
            except ValueError:
                log.warning("memory %r: the upstream's answer is not JSON", self.mem.memory_id)
                return self.proxy._relayed(upstream, upstream.content)
            result = await self.proxy.report(self.mem, decorated, reply)
            if not result.call_again or round_ == C.SERVE_NOTE_ROUNDS:
                break
            again = await self.again()
            if isinstance(again, Response):
                return again
            decorated = again
        shown = without_notes(self.fmt, reply)
        content = upstream.content if shown is reply else json.dumps(shown).encode()
        return self.proxy._relayed(upstream, content)

    async def stream(self, decorated: dict[str, Any], lock: asyncio.Lock) -> Response:
        """Open the upstream's stream; an answer that is no stream is relayed (and a refusal
        is not reported), else its events are relayed as they come."""
        try:
            upstream = await self.client.send(self._request(decorated), stream=True)
        except httpx.HTTPError as exc:
            lock.release()
            return self.proxy._unreachable(exc)
        if not upstream.is_success or not _is_event_stream(upstream):
            try:
                content = await upstream.aread()
            finally:
                await upstream.aclose()
            if upstream.is_success:
                with contextlib.suppress(ValueError):
                    await self.proxy.report(self.mem, decorated, json.loads(content))
            lock.release()
            return self.proxy._relayed(upstream, content)
        return StreamingResponse(
            self._relay(decorated, upstream, lock),
            upstream.status_code,
            headers=self.proxy._headers_down(upstream),
        )

    async def _relay(
        self, decorated: dict[str, Any], upstream: httpx.Response, lock: asyncio.Lock
    ) -> AsyncIterator[bytes]:
        """The events of each round's stream, as they come, the note's taken out. The stream's
        ending events (a finish reason, the usage chunk and `[DONE]`, or the terminal response)
        are held back until its reply is reported: a client that read a stream to its end finds
        the reply stored; and when the reply held only the note, the proxy calls again and
        streams that reply in their place."""
        events: list[Any] = []
        finished = False
        try:
            for round_ in range(C.SERVE_NOTE_ROUNDS + 1):
                notes = NoteFilter(self.fmt)
                held: list[bytes] = []
                events = []
                splitter = EventSplitter()
                async for piece in upstream.aiter_bytes():
                    for event in splitter.feed(piece):
                        out = self._shown(event, notes, events)
                        if out is None:
                            continue
                        if _ends(self.fmt, event):
                            held.append(out)
                        else:
                            yield out
                rest = splitter.rest()
                if rest is not None:
                    out = self._shown(rest, notes, events)
                    if out is not None:
                        held.append(out)
                await upstream.aclose()
                result = await self.proxy.report(self.mem, decorated, events)
                events = []
                if not result.call_again or round_ == C.SERVE_NOTE_ROUNDS:
                    for out in held:
                        yield out
                    break
                again = await self.again()
                if isinstance(again, Response):  # the stream ends as it was
                    for out in held:
                        yield out
                    break
                decorated = again
                upstream = await self.client.send(self._request(decorated), stream=True)
                if not upstream.is_success or not _is_event_stream(upstream):
                    await upstream.aclose()
                    log.warning(
                        "memory %r: the call again after a note answered %d",
                        self.mem.memory_id,
                        upstream.status_code,
                    )
                    for out in held:
                        yield out
                    break
            finished = True
        finally:
            if finished:
                lock.release()
            else:  # the client left, or the upstream failed: what came is reported as cut off
                self.proxy.later(self._cut_off(decorated, upstream, events, lock))

    async def _cut_off(
        self,
        decorated: dict[str, Any],
        upstream: httpx.Response,
        events: list[Any],
        lock: asyncio.Lock,
    ) -> None:
        try:
            await upstream.aclose()
            if events:
                await self.proxy.report(self.mem, decorated, events)
        finally:
            lock.release()

    @staticmethod
    def _shown(event: Event, notes: NoteFilter, events: list[Any]) -> bytes | None:
        """The bytes the client gets for `event` (None: none), after keeping its data for
        `report`."""
        if event.data is None:
            return event.raw
        events.append(event.data)
        shown = notes.apply(event.data)
        if shown is None:
            return None
        return event.raw if shown is event.data else encode_event(event, shown)


def _is_event_stream(upstream: httpx.Response) -> bool:
    return upstream.headers.get("content-type", "").startswith("text/event-stream")


def _ends(fmt: Format, event: Event) -> bool:
    """Whether `event` is one of a stream's ending events: a finish reason, the usage chunk or
    `[DONE]` (Chat Completions), the terminal response (Responses)."""
    if event.done:
        return True
    data = event.data
    if not isinstance(data, dict):
        return False
    if fmt is Format.RESPONSES:
        return data.get("type") in ("response.completed", "response.incomplete")
    choices = data.get("choices")
    if not choices:
        return "usage" in data
    return any(isinstance(c, dict) and c.get("finish_reason") for c in choices)


def create_app(
    engine: Engine, upstream: str, *, memory_from: MemoryIdSource | None = None
) -> Starlette:
    """The proxy as an ASGI app: `engine` holds the memories, `upstream` is the provider's API
    root (`https://api.openai.com/v1`), `memory_from` where each request names its memory (the
    `X-Fadeway-Memory` header by default)."""
    url = httpx.URL(upstream)
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"upstream {upstream!r} must be an http:// or https:// URL")
    proxy = _Proxy(engine, upstream, memory_from or MemoryIdSource())
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    routes = [
        *(
            Route(f"/v1/{path}", partial(proxy.with_memory, fmt=fmt), methods=["POST"])
            for path, fmt in _FORMATS.items()
        ),
        Route("/{path:path}", proxy.passthrough, methods=methods),
    ]
    return Starlette(routes=routes, lifespan=proxy.lifespan)
