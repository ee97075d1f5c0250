"""Stores: where memories live. SQLite is the embedded default."""

from __future__ import annotations

import os

from .base import Store, Transaction
from .sqlite import SQLiteStore

__all__ = ["Store", "Transaction", "SQLiteStore", "open_store"]


def open_store(url: str | os.PathLike[str], *, synchronous: str = "FULL") -> Store:
    """Open a store from a path or URL: a file path or `sqlite:///path` for SQLite, either
    of them ":memory:" for a store in memory."""
    text = os.fspath(url)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise ValueError(
            f"unsupported store URL scheme {scheme!r}; expected a file path or sqlite:///path"
        )
    return SQLiteStore(text, synchronous=synchronous)
