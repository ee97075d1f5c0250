"""What the proxy answers: errors in OpenAI's shape, and the upstream's answers relayed with the
headers that belong to them (not those of one connection)."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator

import httpx
from starlette.responses import JSONResponse, Response

__all__ = [
    "HOP_BY_HOP",
    "error_code",
    "headers_down",
    "openai_error",
    "relayed",
    "relayed_body",
    "unreachable",
]

log = logging.getLogger("fadeway.serve")

#: Headers that belong to one connection, not to the request or answer they carry, and those
#: the proxy sets itself (httpx frames the body and asks for the encodings it can decode).
HOP_BY_HOP = frozenset(
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
_NOT_RELAYED = HOP_BY_HOP | {"content-encoding"}


def openai_error(
    status: int, message: str, *, kind: str, param: str | None = None, code: str | None = None
) -> JSONResponse:
    """An error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`."""
    error = {"message": message, "type": kind, "param": param, "code": code}
    return JSONResponse({"error": error}, status_code=status)


def error_code(exc: BaseException) -> str:
    """`HistoryConflictError` -> "history_conflict": the error's class, as OpenAI names codes."""
    name = type(exc).__name__.removesuffix("Error")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def headers_down(upstream: httpx.Response) -> dict[str, str]:
    """The upstream's headers the client gets (`Retry-After`, `x-request-id`, ...)."""
    return {k: v for k, v in upstream.headers.items() if k.lower() not in _NOT_RELAYED}


def relayed(upstream: httpx.Response, content: bytes) -> Response:
    """The upstream's answer, its status and headers, with `content` as its body."""
    return Response(content, upstream.status_code, headers=headers_down(upstream))


def unreachable(url: str, exc: httpx.HTTPError) -> Response:
    """A 502 for an upstream that did not answer (refused the connection, timed out)."""
    log.warning("the upstream %s did not answer: %s", url, type(exc).__name__)
    return openai_error(
        502,
        f"the upstream {url} did not answer ({type(exc).__name__})",
        kind="upstream_error",
        code="upstream_unreachable",
    )


async def relayed_body(upstream: httpx.Response) -> AsyncIterator[bytes]:
    """The upstream's body as it arrives; its connection closed however the relay ends (the
    client may leave midway)."""
    try:
        async for chunk in upstream.aiter_bytes():
            yield chunk
    finally:
        await upstream.aclose()
