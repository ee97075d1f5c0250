"""Where the proxy reads a request's memory id: a header (`X-Fadeway-Memory`, the default), the
request's `user` field, or one key of its `metadata` (`--memory-from header|user|metadata:KEY`).

The operator chooses one source for the whole proxy: a request whose id could come from several
places would let a client write into a memory the operator meant another field to name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import _constants as C
from ..errors import UsageError

__all__ = ["MemoryIdSource"]


@dataclass(frozen=True, slots=True)
class MemoryIdSource:
    """One place a request names its memory: `kind` "header", "user" or "metadata"; `key` the
    header's name or the metadata key."""

    kind: str = "header"
    key: str = C.SERVE_MEMORY_HEADER

    @classmethod
    def parse(cls, text: str) -> MemoryIdSource:
        """`header`, `header:NAME`, `user` or `metadata:KEY`, as `--memory-from` takes it."""
        kind, _, key = text.partition(":")
        if kind == "header":
            return cls("header", key or C.SERVE_MEMORY_HEADER)
        if kind == "user" and not key:
            return cls("user", "user")
        if kind == "metadata" and key:
            return cls("metadata", key)
        raise UsageError(
            f"--memory-from {text!r}: allowed is header, header:NAME, user or metadata:KEY"
        )

    def __str__(self) -> str:
        if self.kind == "header":
            return f"the {self.key} header"
        if self.kind == "user":
            return "the request's user field"
        return f"the request's metadata.{self.key} field"

    @property
    def param(self) -> str:
        """The name OpenAI's error shape gives the missing parameter (`param`)."""
        return self.key if self.kind != "metadata" else f"metadata.{self.key}"

    def find(self, headers: Mapping[str, str], body: Any) -> str | None:
        """The memory id the request names here, or None (absent, empty or not a string)."""
        value: Any
        if self.kind == "header":
            value = headers.get(self.key)
        elif not isinstance(body, dict):
            value = None
        elif self.kind == "user":
            value = body.get("user")
        else:
            metadata = body.get("metadata")
            value = metadata.get(self.key) if isinstance(metadata, dict) else None
        return value if isinstance(value, str) and value else None
