"""Stores: where memories live. SQLite is the embedded default; PostgreSQL (the `postgres`
extra) holds memories that many processes and machines share."""

from __future__ import annotations

import os

from .base import Store, Transaction
from .postgres import POSTGRES_SCHEMES, PostgresStore
from .sqlite import SQLiteStore

__all__ = ["Store", "Transaction", "SQLiteStore", "PostgresStore", "open_store"]


def open_store(url: str | os.PathLike[str], *, synchronous: str = "FULL") -> Store:
    """Open a store from a path or URL: a file path or `sqlite:///path` for SQLite, either
    of them ":memory:" for a store in memory; `postgresql://...` (or `postgres://...`) for a
    database on a PostgreSQL server."""
    text = os.fspath(url)
    if text.startswith(POSTGRES_SCHEMES):
        return PostgresStore(text, synchronous=synchronous)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise ValueError(
            f"unsupported store URL scheme {scheme!r}; expected a file path, sqlite:///path or "
            "postgresql://..."
        )
    return SQLiteStore(text, synchronous=synchronous)
