"""JSON and JSONL writers and readers of memory exports."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO

import msgspec

from .model import MemoryExport

__all__ = ["dumps", "loads", "write_jsonl", "read_jsonl"]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(MemoryExport)


def dumps(doc: MemoryExport) -> bytes:
    """One export as JSON bytes."""
    return _encoder.encode(doc)


def loads(data: bytes | str) -> MemoryExport:
    """One export from JSON."""
    return _decoder.decode(data)


def write_jsonl(docs: Iterable[MemoryExport], fp: IO[bytes]) -> int:
    """Write exports one per line; returns how many were written."""
    n = 0
    for doc in docs:
        fp.write(_encoder.encode(doc))
        fp.write(b"\n")
        n += 1
    return n


def read_jsonl(fp: IO[bytes]) -> Iterator[MemoryExport]:
    """Read exports written by `write_jsonl`, one at a time."""
    for line in fp:
        if line.strip():
            yield _decoder.decode(line)
