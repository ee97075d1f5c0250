"""One request with a memory, after its decorate: the upstream call, the report, and the calls
made again while the reply held only the note (`call_again`); completed or streamed
(design: docs/design/serve.md, "The note call" and "Streams")."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Coroutine, Mapping
from typing import Any, Protocol

import httpx
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from .. import _constants as C
from ..decorate.call import Prepared
from ..memory import Memory
from ..records import ReportResult
from ..wire import Format
from .answers import headers_down, relayed, unreachable
from .hiding import NoteFilter, without_notes
from .sse import Event, EventSplitter, encode_event

__all__ = ["HISTORY_KEY", "Hooks", "MemoryCall", "MemoryStream"]

log = logging.getLogger("fadeway.serve")

#: Where each format carries its history.
HISTORY_KEY = {Format.CHAT_COMPLETIONS: "messages", Format.RESPONSES: "input"}


class Hooks(Protocol):
    """What a call needs of the proxy: its prepare, commit, discard and report (errors turned
    into answers and log lines), a place to run work past the response, and the upstream's
    root."""

    upstream: str

    async def prepare(self, mem: Memory, body: dict[str, Any]) -> Prepared | Response: ...

    async def commit(self, mem: Memory, prepared: Prepared) -> dict[str, Any] | None: ...

    async def discard(self, mem: Memory, prepared: Prepared) -> None: ...

    async def report(self, mem: Memory, decorated: dict[str, Any], reply: Any) -> ReportResult: ...

    def later(self, coro: Coroutine[Any, Any, None]) -> None: ...


class MemoryCall:
    """One decorated request of memory `mem`, sent to `url` with the caller's `headers`. A
    request is stored (committed) once the upstream accepted it, and discarded when it
    refused it or could not be reached: a refused request leaves nothing in the memory."""

    def __init__(
        self,
        hooks: Hooks,
        client: httpx.AsyncClient,
        mem: Memory,
        fmt: Format,
        body: dict[str, Any],
        target: tuple[str, Mapping[str, str]],
    ) -> None:
        self.hooks, self.client, self.mem, self.fmt, self.body = hooks, client, mem, fmt, body
        self.url, self.headers = target[0], dict(target[1])

    async def again(self) -> Prepared | Response:
        """The request for the call again: nothing new, so the memory's view, with fadeway's
        answer to its note call (the instructions are the memory's latest)."""
        return await self.hooks.prepare(self.mem, {**self.body, HISTORY_KEY[self.fmt]: []})

    async def settle(self, prepared: Prepared, accepted: bool) -> dict[str, Any] | None:
        """Store `prepared` when the upstream `accepted` it, and return the request as stored
        (None: it could not be, logged); drop it otherwise (None)."""
        if accepted:
            return await self.hooks.commit(self.mem, prepared)
        await self.hooks.discard(self.mem, prepared)
        return None

    async def send(self, decorated: dict[str, Any], *, stream: bool) -> httpx.Response | Response:
        """POST `decorated` upstream; a 502 answer when the upstream does not answer."""
        content = json.dumps(decorated, ensure_ascii=False).encode()
        headers = {**self.headers, "content-type": "application/json"}
        request = self.client.build_request("POST", self.url, content=content, headers=headers)
        try:
            return await self.client.send(request, stream=stream)
        except httpx.HTTPError as exc:
            return unreachable(self.hooks.upstream, exc)

    async def complete(self, prepared: Prepared) -> Response:
        """The reply, reported, the note's call taken out; the upstream's refusal as it came."""
        for round_ in range(C.SERVE_NOTE_ROUNDS + 1):
            upstream = await self.send(prepared.request, stream=False)
            accepted = isinstance(upstream, httpx.Response) and upstream.is_success
            stored = await self.settle(prepared, accepted)
            if isinstance(upstream, Response):
                return upstream
            if not accepted:
                log.info(
                    "memory %r: upstream answered %d", self.mem.memory_id, upstream.status_code
                )
                return relayed(upstream, upstream.content)
            try:
                reply = upstream.json()
            except ValueError:
                log.warning("memory %r: the upstream's answer is not JSON", self.mem.memory_id)
                return relayed(upstream, upstream.content)
            # A request that could not be stored (logged) leaves its reply unstored: its report
            # fails and is logged too, and the reply reaches the client all the same.
            result = await self.hooks.report(self.mem, stored or prepared.request, reply)
            if not result.call_again or round_ == C.SERVE_NOTE_ROUNDS:
                break
            again = await self.again()
            if isinstance(again, Response):
                return again
            prepared = again
        assert isinstance(upstream, httpx.Response)  # the loop returned any other answer
        shown = without_notes(self.fmt, reply)
        return relayed(upstream, upstream.content if shown is reply else json.dumps(shown).encode())

    async def stream(self, prepared: Prepared, lock: asyncio.Lock) -> Response:
        """A `MemoryStream` of the upstream's events, which releases `lock` once its reply is
        reported; an answer that is no stream (a refusal, an upstream that ignored `stream`) is
        relayed whole, and `lock` is the caller's to release."""
        upstream = await self.send(prepared.request, stream=True)
        if isinstance(upstream, Response):
            await self.settle(prepared, accepted=False)
            return upstream
        try:
            stored = await self.settle(prepared, upstream.is_success)
        except BaseException:
            await upstream.aclose()
            raise
        # A request that could not be stored once accepted (logged) is reported all the same:
        # the report fails (logged), and the client gets the reply, the note's call taken out.
        decorated = stored or prepared.request
        if not upstream.is_success or not _is_event_stream(upstream):
            try:
                content = await upstream.aread()
            finally:
                await upstream.aclose()
            if upstream.is_success:
                with contextlib.suppress(ValueError):
                    await self.hooks.report(self.mem, decorated, json.loads(content))
            return relayed(upstream, content)
        return MemoryStream(_Relay(self, decorated, upstream, lock), upstream)


class _Relay:
    """The events of each round's stream, and what is left to do once the client is answered:
    release the memory's lock, or, for a stream cut off, report what came first."""

    def __init__(
        self,
        call: MemoryCall,
        decorated: dict[str, Any],
        upstream: httpx.Response,
        lock: asyncio.Lock,
    ) -> None:
        self.call, self.decorated, self.upstream, self.lock = call, decorated, upstream, lock
        self.events: list[Any] = []  # this round's, not reported yet
        self.finished = False
        self.body = self._run()

    async def _run(self) -> AsyncGenerator[bytes, None]:
        """The events as they come, the note's taken out. The ending events (a finish reason,
        the usage chunk and `[DONE]`, or the terminal response) are held back until the reply
        is reported: a client that read a stream to its end finds the reply stored; and when
        the reply held only the note, the proxy calls again and streams that reply in their
        place."""
        call = self.call
        for round_ in range(C.SERVE_NOTE_ROUNDS + 1):
            notes = NoteFilter(call.fmt)
            held: list[bytes] = []
            splitter = EventSplitter()
            async for piece in self.upstream.aiter_bytes():
                for event in splitter.feed(piece):
                    out = self._shown(event, notes)
                    if out is not None and _ends(call.fmt, event):
                        held.append(out)
                    elif out is not None:
                        yield out
            rest = splitter.rest()
            out = self._shown(rest, notes) if rest is not None else None
            if out is not None:
                held.append(out)
            await self.upstream.aclose()
            events, self.events = self.events, []
            result = await call.hooks.report(call.mem, self.decorated, events)
            if result.call_again and round_ < C.SERVE_NOTE_ROUNDS and await self._again():
                continue
            for out in held:
                yield out
            break
        self.finished = True

    async def _again(self) -> bool:
        """Open the call again's stream in place of this round's; False to end the stream as
        it was (a decorate refused, the upstream refused or did not answer: logged)."""
        call = self.call
        prepared = await call.again()
        opened = None if isinstance(prepared, Response) else await self._open(prepared)
        if opened is None:
            log.warning("memory %r: the call again after a note failed", call.mem.memory_id)
            return False
        self.decorated, self.upstream = opened
        return True

    async def _open(self, prepared: Prepared) -> tuple[dict[str, Any], httpx.Response] | None:
        """The call again's request as stored and its stream; None (nothing stored) when the
        upstream refused it, did not answer, or answered with no stream."""
        call = self.call
        upstream = await call.send(prepared.request, stream=True)
        if isinstance(upstream, Response):
            await call.settle(prepared, accepted=False)
            return None
        accepted, stored = upstream.is_success and _is_event_stream(upstream), None
        try:
            stored = await call.settle(prepared, accepted)
        finally:
            if not accepted or stored is None:
                await upstream.aclose()
        return None if stored is None else (stored, upstream)

    def _shown(self, event: Event, notes: NoteFilter) -> bytes | None:
        """The bytes the client gets for `event` (None: none), after keeping its data for
        `report`."""
        if event.data is None:
            return event.raw
        self.events.append(event.data)
        shown = notes.apply(event.data)
        if shown is None:
            return None
        return event.raw if shown is event.data else encode_event(event, shown)

    def settle(self) -> None:
        """Once the response ended: a finished stream releases the lock; one cut off (the
        client left, the upstream failed) reports what came, as a cut stream, then does."""
        if self.finished:
            self.lock.release()
        else:
            self.call.hooks.later(self._cut_off())

    async def _cut_off(self) -> None:
        try:
            await self.body.aclose()  # stops it where it was suspended
            await self.upstream.aclose()
            if self.events:
                await self.call.hooks.report(self.call.mem, self.decorated, self.events)
        finally:
            self.lock.release()


class MemoryStream(StreamingResponse):
    """The relayed stream; once it is sent (or the client left), its relay settles."""

    def __init__(self, relay: _Relay, upstream: httpx.Response) -> None:
        super().__init__(relay.body, upstream.status_code, headers=headers_down(upstream))
        self.relay = relay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.relay.settle()


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
