"""A client for OpenAI-compatible HTTP endpoints: the embeddings endpoint now, the LLM judge later
(ARCHITECTURE: "Embeddings and search"; STYLE: "Provider I/O").

`Endpoint` POSTs JSON and returns the decoded answer. It pools connections, bounds how many calls
are in flight, retries 408, 429, 5xx and network errors with capped exponential backoff and jitter
(a `Retry-After` or `retry-after-ms` header, capped, takes the place of the backoff), and bounds
every call by an absolute deadline (a `time.monotonic()` value, as the judges take): attempts,
queueing and waits all end by it, and a retry whose wait would pass it gives up at once with
`EndpointTimeout` instead of sleeping first. Other 4xx answers are not retried and raise
`EndpointError` with the server's message. The API key goes only into the Authorization header:
it is never logged, never in a repr, and redacted from any server message that echoes it.

One backoff per endpoint: the wait after a 429 or 503 (the server's `Retry-After`, else the
backoff) holds every call to the same base URL until it passes, from any `Endpoint` instance,
thread or event loop of the process. An attempt waits out the hold after taking its slot (so
calls queued behind the slot do not rush in when it ends), and a call whose deadline falls
before the hold ends raises `EndpointTimeout` at once.

Design: the `httpx.AsyncClient` and its semaphore live on a private event loop in a daemon thread
that the endpoint starts on first use; callers on any loop (or none) submit calls to it. fadeway
runs async work with `asyncio.run` per job in several lane threads, and an httpx client is bound to
the loop that opened its connections. Tried and lost: a client per caller loop leaks open sockets
when `asyncio.run` closes that loop (the pool never gets `aclose`d there), and a client per call
loses connection reuse and any bound on concurrency across lanes. One loop thread keeps one pool
and one concurrency bound for the whole process, and gives a sync twin for free.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import logging
import math
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any, Self, TypeVar, overload

import httpx
import msgspec

from . import _constants as C
from ._version import __version__
from .errors import EndpointError, EndpointResponseError, EndpointTimeout

__all__ = ["Endpoint", "retry_after_seconds"]

log = logging.getLogger("fadeway.http")
T = TypeVar("T")

#: Statuses whose wait holds every call to the endpoint: the server is saying it is overloaded.
_HOLD_STATUSES = frozenset({429, 503})
#: base URL -> the `time.monotonic()` before which no call to it may be sent.
_holds: dict[str, float] = {}
_holds_lock = threading.Lock()


def _hold(base_url: str, until: float) -> None:
    """Hold every call to `base_url` until `until` (a later hold already set stands)."""
    with _holds_lock:
        if _holds.get(base_url, 0.0) < until:
            _holds[base_url] = until


def _held_until(base_url: str) -> float:
    """When the hold on `base_url` ends (a time already past when there is none)."""
    with _holds_lock:
        until = _holds.get(base_url, 0.0)
        if until and until <= time.monotonic():
            del _holds[base_url]
        return until


class _DeadlinePassed(Exception):
    """Internal: the call's deadline passed during an attempt."""


class _AttemptFailed(Exception):
    """Internal: an attempt got no answer (network error or the attempt's own timeout)."""


class _LoopThread:
    """An event loop in a daemon thread that owns one httpx client and one semaphore."""

    def __init__(self, make_client: Callable[[], httpx.AsyncClient], max_concurrency: int) -> None:
        self.closing = False
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="fadeway-http", daemon=True)
        self.thread.start()
        self.client: httpx.AsyncClient = self.submit(_call(make_client)).result()
        self.semaphore: asyncio.Semaphore = self.submit(
            _call(asyncio.Semaphore, max_concurrency)
        ).result()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
            self.loop.run_until_complete(self._shutdown())
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()

    async def _shutdown(self) -> None:
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        client = getattr(self, "client", None)
        if client is not None:
            await client.aclose()

    def close(self) -> None:
        """Stop the loop (its thread then cancels calls in flight and closes the client)."""
        self.closing = True
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # already closed
            return
        if threading.current_thread() is not self.thread:
            self.thread.join(C.HTTP_CLOSE_TIMEOUT)


async def _call(fn: Callable[..., T], *args: Any) -> T:
    """Run `fn` on the loop thread (what it makes binds to that loop)."""
    return fn(*args)


class Endpoint:
    """An OpenAI-compatible HTTP endpoint: `await endpoint.post_json("embeddings", {...})`.

    `base_url` is the API root (e.g. `https://api.openai.com/v1`); paths are joined under it.
    `model` is kept for the caller (the embedder or judge puts it in its payloads). Close the
    endpoint when done (`close`, `aclose`, or use it as a context manager); one left open is
    closed when it is garbage-collected or at exit.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = C.HTTP_REQUEST_TIMEOUT,
        connect_timeout: float = C.HTTP_CONNECT_TIMEOUT,
        max_concurrency: int = C.HTTP_MAX_CONCURRENCY,
        max_attempts: int = C.HTTP_MAX_ATTEMPTS,
        backoff_initial: float = C.HTTP_BACKOFF_INITIAL,
        backoff_max: float = C.HTTP_BACKOFF_MAX,
        retry_after_max: float = C.HTTP_RETRY_AFTER_MAX,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        url = httpx.URL(base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"endpoint base URL {base_url!r} must be an http:// or https:// URL")
        if max_concurrency < 1 or max_attempts < 1:
            raise ValueError(
                f"max_concurrency ({max_concurrency}) and max_attempts "
                f"({max_attempts}) must be at least 1"
            )
        if (
            min(timeout, connect_timeout) <= 0
            or min(backoff_initial, backoff_max, retry_after_max) < 0
        ):
            raise ValueError("timeouts must be positive and backoff/retry-after caps not negative")
        self.base_url = str(base_url).rstrip("/")
        self.model = model
        self._api_key = api_key or None
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_concurrency = max_concurrency
        self.max_attempts = max_attempts
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.retry_after_max = retry_after_max
        self._headers = dict(headers or {})
        self._lock = threading.Lock()
        self._runner: _LoopThread | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._closed = False

    @classmethod
    def from_env(
        cls, prefix: str, *, environ: Mapping[str, str] | None = None, **settings: Any
    ) -> Endpoint:
        """An endpoint from `{prefix}_BASE_URL`, `{prefix}_MODEL` and `{prefix}_API_KEY`.

        `prefix` is e.g. `FADEWAY_EMBEDDINGS` or `FADEWAY_JUDGE`; the base URL is required, the
        model and key are optional (a local server may need neither). `settings` go to `__init__`.
        """
        env = os.environ if environ is None else environ
        base_url = env.get(f"{prefix}_BASE_URL", "").strip()
        if not base_url:
            raise EndpointError(
                f"{prefix}_BASE_URL is not set; set it to the endpoint's API root, "
                "e.g. https://api.openai.com/v1"
            )
        return cls(
            base_url,
            model=env.get(f"{prefix}_MODEL", "").strip() or None,
            api_key=env.get(f"{prefix}_API_KEY", "").strip() or None,
            **settings,
        )

    def __repr__(self) -> str:
        key = ", api_key=<set>" if self._api_key else ""
        return f"Endpoint({self.base_url!r}, model={self.model!r}{key})"

    # -- lifecycle --------------------------------------------------------------------------

    def _ensure_runner(self) -> _LoopThread:
        with self._lock:
            if self._closed:
                raise EndpointError(f"endpoint {self.base_url} is closed", retryable=True)
            if self._runner is None:
                self._runner = _LoopThread(self._make_client, self.max_concurrency)
                self._finalizer = weakref.finalize(self, self._runner.close)
            return self._runner

    def _make_client(self) -> httpx.AsyncClient:
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "User-Agent": f"fadeway/{__version__}",
            **self._headers,
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        limits = httpx.Limits(
            max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency
        )
        return httpx.AsyncClient(
            headers=headers,
            limits=limits,
            follow_redirects=False,
            timeout=httpx.Timeout(self.timeout, connect=self.connect_timeout),
        )

    def close(self) -> None:
        """Close the connections and stop the endpoint's thread; calls in flight fail."""
        with self._lock:
            self._closed = True
            runner, self._runner = self._runner, None
            finalizer, self._finalizer = self._finalizer, None
        if finalizer is not None:
            finalizer.detach()
        if runner is not None:
            runner.close()

    async def aclose(self) -> None:
        """`close` from async code, without blocking the caller's loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- calls ------------------------------------------------------------------------------

    @overload
    async def post_json(
        self, path: str, payload: Any, *, deadline: float | None = None, response_type: type[T]
    ) -> T: ...
    @overload
    async def post_json(
        self, path: str, payload: Any, *, deadline: float | None = None, response_type: Any = Any
    ) -> Any: ...

    async def post_json(
        self, path: str, payload: Any, *, deadline: float | None = None, response_type: Any = Any
    ) -> Any:
        """POST `payload` as JSON to `path` under the base URL; return the decoded answer.

        `response_type` (a msgspec-decodable type) validates the answer's shape. Raises
        `EndpointTimeout` past `deadline`, `EndpointResponseError` for an unreadable answer and
        `EndpointError` for a refused call or one that failed on every attempt.
        """
        future = self._submit(path, payload, deadline, response_type)
        return await asyncio.wrap_future(future)

    @overload
    def post_json_sync(
        self, path: str, payload: Any, *, deadline: float | None = None, response_type: type[T]
    ) -> T: ...
    @overload
    def post_json_sync(
        self, path: str, payload: Any, *, deadline: float | None = None, response_type: Any = Any
    ) -> Any: ...

    def post_json_sync(
        self, path: str, payload: Any, *, deadline: float | None = None, response_type: Any = Any
    ) -> Any:
        """The blocking twin of `post_json`."""
        return self._submit(path, payload, deadline, response_type).result()

    def _submit(
        self, path: str, payload: Any, deadline: float | None, response_type: Any
    ) -> concurrent.futures.Future[Any]:
        body = msgspec.json.encode(payload)
        runner = self._ensure_runner()
        return runner.submit(self._post(runner, self._url(path), body, deadline, response_type))

    def _url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    async def _post(
        self, runner: _LoopThread, url: str, body: bytes, deadline: float | None, response_type: Any
    ) -> Any:
        try:
            return await self._post_attempts(runner, url, body, deadline, response_type)
        except asyncio.CancelledError:
            if runner.closing:
                raise EndpointError(
                    f"POST {url}: the endpoint was closed during the call", retryable=True
                ) from None
            raise

    async def _post_attempts(
        self, runner: _LoopThread, url: str, body: bytes, deadline: float | None, response_type: Any
    ) -> Any:
        for attempt in range(1, self.max_attempts + 1):
            status: int | None = None
            try:
                response = await self._attempt(runner, url, body, deadline)
            except _DeadlinePassed:
                raise EndpointTimeout(
                    f"POST {url} did not finish by its deadline "
                    f"(attempt {attempt} of {self.max_attempts})"
                ) from None
            except _AttemptFailed as exc:
                reason = str(exc)
                wait = self._backoff(attempt)
            else:
                status = response.status_code
                if response.is_success:
                    return self._decode(url, response, response_type)
                message = self._server_message(response)
                if status not in C.HTTP_RETRY_STATUSES and status < 500:
                    raise EndpointError(
                        f"POST {url} was refused with HTTP {status}: {message}", status=status
                    )
                reason = f"HTTP {status}: {message}"
                asked = retry_after_seconds(response.headers)
                wait = self._backoff(attempt) if asked is None else min(asked, self.retry_after_max)
                if status in _HOLD_STATUSES:
                    _hold(self.base_url, time.monotonic() + wait)
            if attempt == self.max_attempts:
                raise EndpointError(
                    f"POST {url} failed on all {attempt} attempts; the last: {reason}",
                    status=status,
                    retryable=True,
                )
            if deadline is not None and time.monotonic() + wait >= deadline:
                raise EndpointTimeout(
                    f"POST {url} failed ({reason}) and its retry in {wait:.2f}s "
                    "would pass the deadline",
                    status=status,
                )
            log.warning(
                "POST %s: %s; retrying in %.2fs (attempt %d of %d)",
                url,
                reason,
                wait,
                attempt + 1,
                self.max_attempts,
            )
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def _attempt(
        self, runner: _LoopThread, url: str, body: bytes, deadline: float | None
    ) -> httpx.Response:
        """One attempt: wait for a slot (bounded by the deadline) and out the endpoint's hold,
        then send (bounded by both)."""
        try:
            async with asyncio.timeout(_remaining(deadline)):
                await runner.semaphore.acquire()
        except TimeoutError:
            raise _DeadlinePassed from None
        try:
            await self._wait_out_hold(url, deadline)
            remaining = _remaining(deadline)
            by_deadline = remaining is not None and remaining < self.timeout
            try:
                async with asyncio.timeout(remaining if by_deadline else self.timeout):
                    return await runner.client.post(url, content=body)
            except TimeoutError:
                if by_deadline:
                    raise _DeadlinePassed from None
                raise _AttemptFailed(f"no answer within {self.timeout:g}s") from None
            except httpx.TransportError as exc:
                raise _AttemptFailed(
                    self._redact(f"{type(exc).__name__}: {exc}".rstrip(": "))
                ) from exc
        finally:
            runner.semaphore.release()

    async def _wait_out_hold(self, url: str, deadline: float | None) -> None:
        """Sleep until no hold is on the endpoint (one may be extended meanwhile); raise
        `EndpointTimeout` at once when the hold ends past `deadline`."""
        while (until := _held_until(self.base_url)) > (now := time.monotonic()):
            if deadline is not None and until >= deadline:
                raise EndpointTimeout(
                    f"POST {url}: the endpoint asked every call to wait {until - now:.2f}s more "
                    "(Retry-After or backoff after a 429/503), past this call's deadline"
                )
            await asyncio.sleep(until - now)

    def _backoff(self, attempt: int) -> float:
        wait = min(self.backoff_max, self.backoff_initial * 2 ** (attempt - 1))
        return wait * (1.0 - C.HTTP_BACKOFF_JITTER * random.random())

    def _decode(self, url: str, response: httpx.Response, response_type: Any) -> Any:
        try:
            return msgspec.json.decode(response.content, type=response_type)
        except msgspec.ValidationError as exc:
            raise EndpointResponseError(
                f"POST {url} answered JSON of an unexpected shape: {exc}",
                status=response.status_code,
            ) from None
        except msgspec.DecodeError as exc:
            raise EndpointResponseError(
                f"POST {url} answered malformed JSON: {exc}", status=response.status_code
            ) from None

    def _server_message(self, response: httpx.Response) -> str:
        """The server's own words: OpenAI's `error.message`, else the body's text, cut short."""
        try:
            doc = msgspec.json.decode(response.content)
        except msgspec.DecodeError:
            doc = None
        text: str | None = None
        if isinstance(doc, dict):
            error = doc.get("error")
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                text = error["message"]
            elif isinstance(error, str):
                text = error
            elif isinstance(doc.get("message"), str):
                text = doc["message"]
            elif isinstance(doc.get("detail"), str):
                text = doc["detail"]
        if text is None:
            text = response.content.decode("utf-8", "replace").strip()
        text = text[: C.HTTP_ERROR_TEXT_CHARS] or response.reason_phrase or "(empty body)"
        return self._redact(text)

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "<api key>") if self._api_key else text


def _remaining(deadline: float | None) -> float | None:
    """Seconds left before `deadline` (never negative), or None for no deadline."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait a server asks for: `retry-after-ms`, or `Retry-After` in seconds or an HTTP date.

    None when neither header is present or readable; a date in the past gives 0.
    """
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(0.0, value)
    text = headers.get("retry-after")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        value = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, value) if math.isfinite(value) else None
