"""Opening the store `--db` names, for the command line: a file that is no store, or a URL of
another kind, is the user's bad input (exit 2, nothing written), told apart from a store that
fails while in use (exit 1). A PostgreSQL URL is shown without its password."""

from __future__ import annotations

import sqlite3
from typing import Any

from ..engine import Engine
from ..engine import open as open_engine
from ..errors import SchemaVersionError, StoreError, UsageError
from ..store.postgres import POSTGRES_SCHEMES, shown_url

__all__ = ["open_store"]

#: SQLite's failures that say the file named is no store this process can open: not a
#: database, not openable (a directory, a missing folder), damaged, or not ours to read. A busy
#: lock, a full disk or an I/O error is a failure while running, not bad input.
_NOT_A_STORE = {
    "SQLITE_NOTADB",
    "SQLITE_CANTOPEN",
    "SQLITE_CORRUPT",
    "SQLITE_PERM",
    "SQLITE_AUTH",
}


def open_store(db: str, **settings: Any) -> Engine:
    """`fadeway.open(db, **settings)`, with a store that cannot be one raised as a
    `UsageError` naming `--db`."""
    if db.startswith(POSTGRES_SCHEMES):
        try:
            return open_engine(db, **settings)
        except SchemaVersionError as exc:
            raise UsageError(f"--db {shown_url(db)}: {exc}") from None
    if "://" in db and not db.startswith("sqlite:///"):
        scheme = db.split("://", 1)[0]
        raise UsageError(
            f"--db {db}: unsupported store URL scheme {scheme!r}; give a file path, "
            "sqlite:///path or postgresql://..."
        )
    try:
        return open_engine(db, **settings)
    except SchemaVersionError as exc:
        raise UsageError(f"--db {db}: {exc}") from None
    except StoreError as exc:
        cause = exc.__cause__
        if isinstance(cause, sqlite3.Error) and cause.sqlite_errorname in _NOT_A_STORE:
            raise UsageError(f"--db {db}: not a fadeway store ({cause})") from None
        raise
