"""JSON bodies and canonical digests of messages.

A message is stored as the JSON it was sent as (`body`). Two messages are the same message when
their canonical JSON is equal: key order ignored and null-valued keys ignored, so an SDK
`model_dump()` of a reply equals the reply `report` stored (ARCHITECTURE, "Recognising what is
stored"). Only a digest of the canonical form is kept.

Nesting deeper than `MAX_JSON_DEPTH` is refused here, on the encoded bytes, before any
recursive Python code reads the value (issue 33).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Callable
from typing import Any

import msgspec

from .. import _constants as C
from ..errors import FadewayError, InvalidMessageError, InvalidRequestError

__all__ = [
    "encode_json",
    "body_of",
    "digest_of",
    "digest_of_body",
    "check_depth",
    "json_depth",
    "plain",
    "sorted_plain",
    "to_plain",
]


#: Fields the SDK's parse helpers (`chat.completions.parse`, `responses.parse`) fill on the
#: client side: the reply's text or a call's arguments parsed into the caller's own classes.
#: The provider never sent them, and the text they were parsed from is kept beside them.
_SDK_PARSED = frozenset({"parsed", "parsed_arguments"})


def _dump_model(obj: Any) -> Any:
    # SDK objects (pydantic models) are dumped with only the fields they were given, which is
    # the JSON the provider sent; `model_dump()` of all fields differs from it only by nulls.
    # Without warnings: a parse helper's generic `parsed` field makes pydantic warn about the
    # caller's class in it, which is left out anyway.
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        data = dump(mode="json", exclude_unset=True, warnings=False)
        _drop_parsed(obj, data)
        return data
    raise TypeError(f"{type(obj).__name__} is not JSON")


def _drop_parsed(obj: Any, data: Any) -> None:
    """Remove from `data` (the dump of SDK object `obj`) the fields in `_SDK_PARSED` of every
    model in it that declares them. Only models and their lists are walked, so the walk is as
    deep as the SDK's classes nest, whatever the JSON inside them."""
    if isinstance(obj, (list, tuple)) and isinstance(data, list):
        for item, dumped in zip(obj, data, strict=False):
            _drop_parsed(item, dumped)
        return
    fields = getattr(type(obj), "model_fields", None)
    if not isinstance(fields, dict) or not isinstance(data, dict):
        return
    for key in _SDK_PARSED & fields.keys():
        data.pop(key, None)
    for key, dumped in data.items():
        _drop_parsed(getattr(obj, key, None), dumped)


_encode = msgspec.json.Encoder(enc_hook=_dump_model).encode
#: Encode any JSON-like value (SDK objects included) to JSON bytes, key order kept.
encode_json = _encode
_encode_sorted = msgspec.json.Encoder(enc_hook=_dump_model, order="sorted").encode
_decode = msgspec.json.decode


# A JSON string, escapes included (the unrolled form: one pass in C, no backtracking).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
# Every byte but the brackets, and the brackets as steps up (2) and down (0) from 1.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def json_depth(data: bytes) -> int:
    """How many levels of objects and arrays the JSON text `data` nests (0 for a scalar).

    Strings are removed first, so brackets inside them do not count; then everything but the
    brackets, all in C, and only the brackets are walked in Python. (A walk over every token
    with a regex took 0.3 s and 150 MB on the 1.3 MB of a 10,000-fact note, and 2 s on a
    reply of 100,000 items.) Called only on text with more opening brackets than the limit
    (`check_depth`), which no ordinary message has."""
    brackets = _JSON_STRING.sub(b"", data).translate(_STEPS, _NOT_BRACKETS)
    return max(itertools.accumulate(step - 1 for step in brackets), default=0)


def check_depth(data: bytes, where: str, error: type[FadewayError]) -> None:
    """Raise `error` when the JSON text `data` nests deeper than MAX_JSON_DEPTH."""
    # A text with no more opening brackets than the limit cannot nest deeper: one count in C
    # spares almost every message the scan.
    if data.count(b"[") + data.count(b"{") > C.MAX_JSON_DEPTH and (
        json_depth(data) > C.MAX_JSON_DEPTH
    ):
        raise _too_deep(where, error)


def _too_deep(where: str, error: type[FadewayError]) -> FadewayError:
    return error(
        f"{where} is nested deeper than {C.MAX_JSON_DEPTH} levels of objects and arrays, "
        "fadeway's limit (MAX_JSON_DEPTH)"
    )


def body_of(
    obj: Any,
    where: str,
    error: type[InvalidRequestError] = InvalidMessageError,
    size: Callable[[bytes, str], None] | None = None,
) -> bytes:
    """The JSON of `obj` as sent (key order kept); raises `error` (InvalidMessageError unless
    told) if it is not JSON or nests deeper than MAX_JSON_DEPTH. `size(body, where)` (a limit's
    check) is told the JSON as soon as it is encoded, before the passes that read it whole: a
    body over the limit is refused at the cost of one encoding.

    What JSON cannot carry as given is refused, not changed on the way: bytes (which would be
    stored as base64 text), non-finite numbers (stored as null), and lone surrogates (which
    UTF-8 cannot encode)."""
    try:
        body = _encode(obj)
    except RecursionError:
        raise _too_deep(where, error) from None
    except (TypeError, msgspec.EncodeError, ValueError) as exc:
        raise error(f"{where} is not JSON-serialisable: {exc}") from None
    if size is not None:
        size(body, where)
    check_depth(body, where, error)
    # Decoding is C and a plain message comes back equal; only one that does not is walked.
    odd = None if _plain_equal(body, obj) else _not_json(obj)
    if odd is not None:
        raise error(f"{where} holds {odd}, which JSON cannot carry as it is")
    return body


def _plain_equal(body: bytes, obj: Any) -> bool:
    try:
        return bool(_decode(body) == obj)
    except RecursionError:  # deeper than decoding goes: the walk below tells
        return False


def _not_json(obj: Any) -> str | None:
    """What in plain dicts and lists JSON would not carry unchanged (SDK objects dump as JSON
    of their own): bytes, or a number that is not finite."""
    stack = [obj]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            return "bytes"
        elif isinstance(value, float) and not math.isfinite(value):
            return f"the number {value}"
    return None


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


def _canonical(obj: Any, where: str) -> bytes:
    # Fast path: nulls sit almost always at a message's top level (content, refusal, name), so
    # drop those first and look for any other null in the encoded bytes. A string containing
    # "null" only sends the message down the exact path, never to a wrong answer.
    if isinstance(obj, dict):
        obj = {k: v for k, v in obj.items() if v is not None}
    data = _encode_sorted(obj)
    check_depth(data, where, InvalidMessageError)  # before the recursive _strip_nulls
    if b"null" in data:
        data = _encode_sorted(_strip_nulls(_decode(data)))
    return data


def digest_of(obj: Any, where: str = "message") -> bytes:
    """A 16-byte digest of the canonical JSON of `obj`."""
    try:
        data = _canonical(obj, where)
    except InvalidRequestError:  # too deep: said already
        raise
    except RecursionError:
        raise _too_deep(where, InvalidMessageError) from None
    except (TypeError, msgspec.EncodeError, ValueError) as exc:
        raise InvalidMessageError(f"{where} is not JSON-serialisable: {exc}") from None
    return hashlib.blake2b(data, digest_size=16).digest()


def digest_of_body(body: bytes) -> bytes:
    """The digest of a stored JSON body."""
    return digest_of(_decode(body))


def plain(body: bytes) -> Any:
    """The JSON value of a body, as plain dicts and lists."""
    return _decode(body)


def sorted_plain(obj: Any) -> Any:
    """`obj` (plain JSON values) with every object's keys in sorted order, so that a walk over
    it meets its leaves in an order that does not depend on how the sender ordered keys."""
    return _decode(_encode_sorted(obj))


def to_plain(obj: Any, where: str) -> Any:
    """`obj` (dicts, lists, SDK models) as plain JSON values."""
    return _decode(body_of(obj, where))
