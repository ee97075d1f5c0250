"""A real HTTP server on 127.0.0.1 that plays an OpenAI-compatible endpoint for tests.

Each request takes the next scripted `Reply` (or the result of a scripted callable); with the
script empty, the `fallback` callable answers when one is set, else `POST .../embeddings`
answers deterministic vectors (hashing embeddings of each input, `dim` wide) listed in reverse
order, so clients must reorder by `index`. Every request is
recorded with its arrival times, path, headers and decoded body.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from fadeway import _core


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client closing its pooled keep-alive connection is normal, not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class Reply:
    """One scripted answer. `body` as bytes is sent verbatim, anything else as JSON."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    hang: bool = False  # never answer (until the server closes)
    drop: bool = False  # close the connection without an answer


@dataclass
class Recorded:
    at: float  # time.monotonic() at arrival
    wall: float  # time.time() at arrival
    path: str
    headers: dict[str, str]
    body: Any


Script = Reply | Callable[[Recorded], Reply]


def embeddings_reply(request: Recorded, dim: int) -> Reply:
    """An OpenAI embeddings answer for `request`: hashing vectors, listed in reverse order."""
    inputs = request.body["input"]
    vectors = _core.hash_embed(inputs, dim)
    data = [
        {"object": "embedding", "index": i, "embedding": vectors[i].tolist()}
        for i in reversed(range(len(inputs)))
    ]
    return Reply(body={"object": "list", "data": data, "model": request.body["model"]})


class OpenAIServer:
    """Start with `with OpenAIServer() as server:`; `server.url` is the API root (`.../v1`)."""

    def __init__(self, dim: int = 16, fallback: Callable[[Recorded], Reply] | None = None) -> None:
        self.dim = dim
        self.fallback = fallback
        self.requests: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._script: deque[Script] = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 10  # a keep-alive connection left open ends on its own
            # Headers and body go out as two writes; without TCP_NODELAY, Nagle's algorithm
            # holds the body until the client's delayed ACK (40 ms on every answer).
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                owner._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    def script(self, *replies: Script) -> None:
        """Queue answers for the next requests, in order."""
        with self._lock:
            self._script.extend(replies)

    def _next(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            scripted = self._script.popleft() if self._script else None
        if scripted is None:
            if self.fallback is not None:
                return self.fallback(request)
            if request.path.endswith("/embeddings"):
                return embeddings_reply(request, self.dim)
            return Reply(404, {"error": {"message": f"no route {request.path}"}})
        return scripted(request) if callable(scripted) else scripted

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length", "0"))
        raw = handler.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw
        request = Recorded(
            time.monotonic(),
            time.time(),
            handler.path,
            {k.lower(): v for k, v in handler.headers.items()},
            body,
        )
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._answer(handler, self._next(request))
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.drop:
            handler.close_connection = True
            return
        if reply.hang:
            self._stop.wait()
            handler.close_connection = True
            return
        if reply.delay:
            self._stop.wait(reply.delay)
        data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        handler.send_response(reply.status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
