"""Where derived files live on disk: the indexes of each memory, beside an SQLite file
(ARCHITECTURE: "Contracts": indexes are caches, persisted beside an SQLite file).

A memory id is any non-empty string a caller chose (`../../etc/passwd`, NUL, slashes, any
length, any Unicode), so it never becomes a path itself: its directory is named by the SHA-256 of
its UTF-8 bytes, under a two-character fan-out directory so that no one directory holds
millions of entries.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..errors import InvalidMemoryIdError

__all__ = ["INDEX_DIR_SUFFIX", "data_dir_for", "index_dir"]

#: `memories.db` keeps its indexes in `memories.db.indexes/`.
INDEX_DIR_SUFFIX = ".indexes"


def index_dir(data_dir: str | os.PathLike[str], memory_id: str) -> Path:
    """The directory of `memory_id`'s indexes: `data_dir/<h[:2]>/<h>`, h = sha256(id) in hex.

    Distinct ids get distinct directories (up to SHA-256 collisions), the same id always the
    same one, and the result is always inside `data_dir`. Nothing is created.
    """
    if not isinstance(memory_id, str) or not memory_id:
        raise InvalidMemoryIdError(f"memory id must be a non-empty str, got {memory_id!r:.80}")
    # surrogatepass: a str holding lone surrogates still encodes, and still injectively.
    digest = hashlib.sha256(memory_id.encode("utf-8", "surrogatepass")).hexdigest()
    base = Path(data_dir)
    result = base / digest[:2] / digest
    # Holds by construction (hex names only); checked because a path escape would be a breach.
    if result.relative_to(base).parts != (digest[:2], digest):
        raise AssertionError(f"index directory {result} escapes {base}")
    return result


def data_dir_for(db_path: str | os.PathLike[str]) -> Path | None:
    """The directory beside an SQLite file where its indexes live (`<db>.indexes`).

    None when there is no file to sit beside: `":memory:"`, `""` (a temporary database), an
    in-memory `file:` URI, or a server URL (PostgreSQL rebuilds its indexes in memory).
    """
    text = os.fspath(db_path)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif "://" in text:
        return None
    if text in ("", ":memory:"):
        return None
    if text.startswith("file:"):
        path, _, query = text[len("file:") :].partition("?")
        if "mode=memory" in query.split("&") or path in ("", ":memory:"):
            return None
        text = path
    db = Path(text).absolute()
    return db.with_name(db.name + INDEX_DIR_SUFFIX)
