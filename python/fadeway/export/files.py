"""Export files: JSONL files of memory exports, read and checked line by line (one memory in
memory at a time, so a large store streams), and imported into a store."""

from __future__ import annotations

import os
from collections.abc import Iterator

from .._services import Services
from ..errors import ImportConflictError, InvalidExportError
from ..records import MemoryExport
from .checks import check_export, decode_export
from .document import dumps, export_memory
from .restore import restore

__all__ = ["check_export_file", "import_file", "numbered_lines", "read_export_file"]


def numbered_lines(path: str | os.PathLike[str]) -> Iterator[tuple[str, bytes]]:
    """("file:line", line) for each non-blank line of a JSONL file, read one at a time."""
    with open(path, "rb") as fp:
        for number, line in enumerate(fp, 1):
            if line.strip():
                yield f"{path}:{number}", line


def read_export_file(path: str | os.PathLike[str]) -> Iterator[tuple[str, MemoryExport]]:
    """("file:line", export) for each line of a JSONL file of exports, decoded one at a time."""
    for where, line in numbered_lines(path):
        yield where, decode_export(line, f"{where}: ")


def check_export_file(path: str | os.PathLike[str]) -> dict[str, str]:
    """Check every export of a file before anything is imported; returns memory id → its line."""
    seen: dict[str, str] = {}
    for where, doc in read_export_file(path):
        try:
            check_export(doc)
        except InvalidExportError as exc:
            raise InvalidExportError(f"{where}: {exc}") from None
        if doc.memory_id in seen:
            raise InvalidExportError(
                f"{where}: memory {doc.memory_id!r} is exported twice "
                f"(also at {seen[doc.memory_id]})"
            )
        seen[doc.memory_id] = where
    return seen


def import_file(services: Services, path: str | os.PathLike[str]) -> tuple[list[str], list[str]]:
    """Import every export of a checked file, one line at a time: (imported, skipped) ids.

    A memory the store already holds exactly as exported is skipped, so importing a file twice
    adds nothing; one that holds something else is an `ImportConflictError` naming the line.
    Call `check_export_file` first so that a bad line stops the import before it starts.
    """
    imported: list[str] = []
    skipped: list[str] = []
    present = set(services.store.memory_ids())
    same: set[str] = set()
    for where, doc in read_export_file(path) if present else ():  # conflicts first
        if doc.memory_id in present:
            with services.store.read(doc.memory_id) as tx:
                held = export_memory(tx, doc.memory_id)
            if dumps(held) != dumps(doc):
                raise ImportConflictError(
                    f"{where}: memory {doc.memory_id!r} already holds "
                    "something else; import restores into an empty memory"
                )
            same.add(doc.memory_id)
    for _, doc in read_export_file(path):
        if doc.memory_id in same:
            skipped.append(doc.memory_id)
        else:
            restore(services, doc)
            imported.append(doc.memory_id)
    return imported, skipped
