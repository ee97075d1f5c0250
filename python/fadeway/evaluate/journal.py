"""The run's record on disk, so a run killed midway continues where it stopped.

`run.json` holds the settings a run started with; a later run in the same directory must name
the same ones (else it would mix two runs' answers). `answers.jsonl` holds one line per
question and way, appended and synced as each is graded; a line torn by a kill is dropped when
the journal is opened again, and its question is asked again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..errors import UsageError

__all__ = ["Journal", "check_settings"]


def check_settings(path: Path, settings: Mapping[str, Any]) -> None:
    """Write `settings` to `path`, or check they are those written there by an earlier run."""
    if path.exists():
        try:
            earlier = msgspec.json.decode(path.read_bytes())
        except msgspec.DecodeError:
            raise UsageError(f"{path} is not a run's settings; use another --out") from None
        changed = sorted(
            k for k in set(earlier) | set(settings) if earlier.get(k) != settings.get(k)
        )
        if changed:
            shown = ", ".join(
                f"{k} ({earlier.get(k)!r} then, {settings.get(k)!r} now)" for k in changed
            )
            raise UsageError(
                f"{path.parent} holds a run with other settings: {shown}; resume it with the "
                "same ones, or give another --out"
            )
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_bytes(msgspec.json.format(msgspec.json.encode(dict(settings))) + b"\n")
    os.replace(temporary, path)


class Journal:
    """Entries keyed by (question key, way), appended one a line and synced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.entries: dict[tuple[str, str], dict[str, Any]] = {}
        if path.exists():
            self._read()

    def _read(self) -> None:
        raw = self.path.read_bytes()
        good = 0
        for line in raw.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # torn by a kill mid-write
            try:
                entry = msgspec.json.decode(line)
            except msgspec.DecodeError:
                break
            self.entries[(entry["key"], entry["way"])] = entry
            good += len(line)
        if good < len(raw):
            with open(self.path, "r+b") as fp:
                fp.truncate(good)

    def has(self, key: str, way: str) -> bool:
        return (key, way) in self.entries

    def write(self, entry: dict[str, Any]) -> None:
        """Append `entry` (it has "key" and "way") and sync it to disk."""
        line = msgspec.json.encode(entry) + b"\n"
        with self._lock:
            with open(self.path, "ab") as fp:
                fp.write(line)
                fp.flush()
                os.fsync(fp.fileno())
            self.entries[(entry["key"], entry["way"])] = entry
