"""Token estimation of whole requests (MECHANISM: "The ceiling and the landing").

Counts come from the Rust BPE (`fadeway._core`); this module decides what is counted: every
message's text with the per-message overhead providers add, tool definitions, and the request
fields the model reads (tool_choice, response formats).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import _constants as C
from ._core import count_tokens_many
from .wire import READ_FIELDS, Entry, ParsedRequest, entry, is_schema_class, text_of
from .wire.canonical import encode_json, to_plain

__all__ = [
    "encoding_for_model",
    "count_texts",
    "entry_tokens",
    "fixed_request_tokens",
    "request_estimate",
    "measure_parsed",
]

# Models that use cl100k_base; every other model (GPT-4o, 4.1, o-series, GPT-5, and models of
# other providers, whose ratio corrects the rest) is estimated with o200k_base.
_CL100K_PREFIXES = (
    "gpt-4-",
    "gpt-3.5",
    "text-embedding-ada",
    "text-embedding-3",
    "davinci-002",
    "babbage-002",
)
#: The request fields besides instructions and tools that the model reads, counted as JSON.
_READ_FIELDS = tuple(f for f in READ_FIELDS if f not in ("instructions", "tools"))


def encoding_for_model(model: str | None) -> str:
    """The BPE encoding that estimates `model`."""
    if model and (model == "gpt-4" or model.startswith(_CL100K_PREFIXES)):
        return "cl100k_base"
    return "o200k_base"


def count_texts(encoding: str, texts: Sequence[str]) -> list[int]:
    """Token counts of `texts` (one Rust call, the GIL released)."""
    if not texts:
        return []
    return count_tokens_many(encoding, list(texts)).tolist()


def entry_tokens(encoding: str, entries: Sequence[Entry]) -> list[int]:
    """The size estimate of each entry: its text, media and per-message overhead."""
    flat = [t for e in entries for t in e.texts]
    counts = count_texts(encoding, flat)
    out, i = [], 0
    for e in entries:
        n = len(e.texts)
        out.append(e.fixed_tokens + sum(counts[i : i + n]))
        i += n
    return out


def fixed_request_tokens(parsed: ParsedRequest, encoding: str) -> int:
    """Tokens of everything in a request but its history: instructions, tools, read fields.

    This is the part forgetting cannot shrink (with, in later stages, the facts block and the
    note ask), plus the reply priming.
    """
    texts: list[str] = []
    fixed = C.TOKENS_REPLY_PRIMING
    for message in parsed.instructions:
        texts.extend(text_of(to_plain(message, "an instruction message")))
        fixed += C.TOKENS_PER_MESSAGE
    request = parsed.request
    if isinstance(request.get("instructions"), str):
        texts.append(request["instructions"])
        fixed += C.TOKENS_PER_MESSAGE
    tools = request.get("tools")
    if isinstance(tools, list) and tools:
        texts.append(encode_json(tools).decode())
        fixed += C.TOKENS_PER_TOOL * len(tools)
    for key in _READ_FIELDS:
        value = request.get(key)
        if is_schema_class(value):
            texts.extend(_schema_text(value))
        elif value is not None and not isinstance(value, (int, float, bool)):
            texts.append(encode_json(value).decode())
    return fixed + sum(count_texts(encoding, texts))


def _schema_text(cls: type) -> list[str]:
    """The JSON schema the SDK sends for a `response_format` class (a pydantic model's
    `model_json_schema()`), or nothing for a class that has none: the provider's count
    corrects what this leaves out (the SDK's strict-mode wrapping)."""
    schema = getattr(cls, "model_json_schema", None)
    return [encode_json(schema()).decode()] if callable(schema) else []


def request_estimate(parsed: ParsedRequest, history_tokens: int, encoding: str) -> int:
    """Our raw estimate of a whole request whose history weighs `history_tokens`."""
    return fixed_request_tokens(parsed, encoding) + history_tokens


def measure_parsed(parsed: ParsedRequest) -> int:
    """Our raw estimate of a whole request as sent, its history counted message by message
    (nothing is stored, so every call an output answers counts as known)."""
    encoding = encoding_for_model(parsed.model)
    entries = [
        entry(parsed.format, m, f"message {i}", lambda _call: True)
        for i, m in enumerate(parsed.history)
    ]
    return request_estimate(parsed, sum(entry_tokens(encoding, entries)), encoding)
