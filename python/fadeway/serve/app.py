"""The proxy (`fadeway serve`): an OpenAI-compatible HTTP server in front of an upstream, which
decorates each Chat Completions and Responses request with its memory, forwards it with the
caller's own key, and reports the reply (design: docs/design/serve.md).

Starlette on uvicorn serves; one `httpx.AsyncClient` calls the upstream. The memory's async
calls (`aprepare`, `acommit`, `areport`) run off the event loop: a request is decorated, sent,
and stored only once the upstream accepted it, so a refused request leaves nothing. One
memory's requests run one at a time (decorate, upstream call, report), so each reply is
reported against the request it answers; requests of different memories run side by side.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import weakref
from collections.abc import AsyncIterator, Coroutine
from functools import partial
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .. import _constants as C
from ..decorate.call import Prepared
from ..engine import Engine
from ..errors import FadewayError, InvalidMemoryIdError, InvalidRequestError
from ..memory import Memory
from ..records import ReportResult, check_memory_id
from ..wire import Format
from .answers import (
    HOP_BY_HOP,
    error_code,
    headers_down,
    openai_error,
    relayed_body,
    unreachable,
)
from .calls import HISTORY_KEY, MemoryCall, MemoryStream
from .ids import MemoryIdSource

__all__ = ["create_app"]

log = logging.getLogger("fadeway.serve")

_FORMATS = {"chat/completions": Format.CHAT_COMPLETIONS, "responses": Format.RESPONSES}


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

    # -- what goes up --------------------------------------------------------------------------

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
        drop = HOP_BY_HOP
        if self.memory_from.kind == "header":
            drop = drop | {self.memory_from.key.lower()}
        return {k: v for k, v in request.headers.items() if k.lower() not in drop}

    def _lock(self, memory_id: str) -> asyncio.Lock:
        lock = self._locks.get(memory_id)
        if lock is None:
            lock = self._locks[memory_id] = asyncio.Lock()
        return lock

    # -- the routes ------------------------------------------------------------------------------

    async def passthrough(self, request: Request) -> Response:
        """Any other endpoint (`/v1/models`, `/v1/audio/speech`, a file's content, ...):
        forwarded as it came, its answer relayed as it arrives (a streamed or large answer is
        never held whole). The request's body is read first: it goes up with its length."""
        assert self.client is not None
        sent = self.client.build_request(
            request.method,
            self._url(request),
            content=await request.body(),
            headers=self._headers_up(request),
        )
        try:
            upstream = await self.client.send(sent, stream=True)
        except httpx.HTTPError as exc:
            return unreachable(self.upstream, exc)
        return StreamingResponse(
            relayed_body(upstream), upstream.status_code, headers=headers_down(upstream)
        )

    async def with_memory(self, request: Request, *, fmt: Format) -> Response:
        """POST /v1/chat/completions and /v1/responses: decorate, forward, report."""
        assert self.client is not None
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
        refused = self._refusal(request, fmt, body)
        if refused is not None:
            return refused
        memory_id = self.memory_from.find(request.headers, body)
        assert memory_id is not None
        mem = self.engine.memory(memory_id)
        lock = self._lock(memory_id)
        await lock.acquire()
        streaming = None
        try:
            prepared = await self.prepare(mem, body)
            if isinstance(prepared, Response):
                return prepared
            target = (self._url(request), self._headers_up(request))
            call = MemoryCall(self, self.client, mem, fmt, body, target)
            if body.get("stream"):
                answer = await call.stream(prepared, lock)
                if isinstance(answer, MemoryStream):
                    streaming = answer  # it releases the lock once its reply is reported
                return answer
            return await call.complete(prepared)
        finally:
            if streaming is None:
                lock.release()

    def _refusal(self, request: Request, fmt: Format, body: Any) -> Response | None:
        """The 400 for a request the proxy cannot serve, before anything is stored."""
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
        try:
            check_memory_id(memory_id)
        except InvalidMemoryIdError as exc:
            return openai_error(
                400,
                str(exc),
                kind="invalid_request_error",
                param=self.memory_from.param,
                code="invalid_memory_id",
            )
        key = HISTORY_KEY[fmt]
        if key not in body:
            return openai_error(
                400,
                f"a request to {request.url.path} carries its history in {key!r}",
                kind="invalid_request_error",
                param=key,
                code="missing_required_parameter",
            )
        return None

    # -- the hooks of a call (`calls.Hooks`) ------------------------------------------------------

    async def prepare(self, mem: Memory, body: dict[str, Any]) -> Prepared | Response:
        """`aprepare`; what it refuses is a 400 in OpenAI's shape, a failure a 500."""
        try:
            return await mem.aprepare(body)
        except InvalidRequestError as exc:
            log.info("memory %r: request refused: %s", mem.memory_id, exc)
            return openai_error(400, str(exc), kind="invalid_request_error", code=error_code(exc))
        except FadewayError as exc:
            log.exception("memory %r: decorate failed", mem.memory_id)
            return openai_error(500, f"fadeway: {exc}", kind="server_error", code=error_code(exc))

    async def commit(self, mem: Memory, prepared: Prepared) -> dict[str, Any] | None:
        """`acommit`: the request as stored; None when it could not be (logged: the client
        gets the upstream's answer all the same, and its reply is not stored)."""
        try:
            return await mem.acommit(prepared)
        except FadewayError:
            log.exception("memory %r: the request was not stored", mem.memory_id)
            return None

    async def discard(self, mem: Memory, prepared: Prepared) -> None:
        """`adiscard`; a failure to store what its recall spent is logged."""
        try:
            await mem.adiscard(prepared)
        except FadewayError as exc:
            log.warning(
                "memory %r: the usage of a refused request was not stored: %s", mem.memory_id, exc
            )

    async def report(self, mem: Memory, decorated: dict[str, Any], reply: Any) -> ReportResult:
        """`areport`; a reply it cannot store is logged (the client gets it all the same)."""
        try:
            return await mem.areport(decorated, reply)
        except FadewayError as exc:
            log.warning("memory %r: the reply was not stored: %s", mem.memory_id, exc)
            return ReportResult(tool_calls=[])

    def later(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run `coro` on its own, held until it ends (the server waits for it on shutdown)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


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
