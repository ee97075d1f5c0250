"""Replay inputs, told apart by their content and checked whole before anything is replayed.

Three kinds (ARCHITECTURE, Contracts: "Time in replay"): JSONL replay lines (`memory_id`,
`at`, `message`), JSONL exports of fadeway itself (one memory per line, as `fadeway export`
writes), and LoCoMo JSON (a list of samples; mapped as `locomo.py` says). A bad file raises a
`ReplayFormatError` (or `InvalidExportError`) naming the file and line; since every file is
checked before the first is replayed, a bad one leaves the store untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ..errors import InvalidExportError, ReplayFormatError
from ..export.files import check_export_file
from ..wire import Format
from .lines import ReplayLine, check_lines, plan, read_replay
from .locomo import locomo_lines, read_locomo

__all__ = ["Batch", "MemoryLines", "check_file", "detect", "read_inputs"]


@dataclass(frozen=True, slots=True)
class MemoryLines:
    """One memory's replay lines, checked, with its wire format and message count."""

    memory_id: str
    format: Format
    lines: list[ReplayLine]
    messages: int  # lines that are stored as history (the rest are instructions)


@dataclass
class Batch:
    """Everything a replay run reads: memories to replay, export files to import."""

    memories: dict[str, MemoryLines] = field(default_factory=dict)
    exports: list[Path] = field(default_factory=list)

    @property
    def messages(self) -> int:
        return sum(m.messages for m in self.memories.values())


def check_file(path: Path) -> None:
    """A `ReplayFormatError` unless `path` is a file that can be read: a directory is named as
    one, since "no such file" would send the user looking for a typo."""
    if path.is_dir():
        raise ReplayFormatError(f"{path} is a directory; name the files in it (as {path}/*.jsonl)")
    if not path.exists():
        raise ReplayFormatError(f"{path}: no such file")
    if not path.is_file():
        raise ReplayFormatError(f"{path} is not a regular file")


def detect(path: Path) -> str:
    """ "replay", "export" or "locomo", from the file's first line (or first character)."""
    number, first = 0, b""
    with open(path, "rb") as fp:
        while not first:  # the first line that is not blank, whole (an export's is long)
            line = fp.readline()
            if not line:
                break
            number, first = number + 1, line.strip()
    if not first:
        raise ReplayFormatError(f"{path}: the file is empty; nothing to replay")
    if first[:1] == b"[":
        return "locomo"
    if first[:1] != b"{":
        raise ReplayFormatError(
            f"{path}:{number}: unknown format: expected JSONL replay lines, "
            "JSONL fadeway exports or LoCoMo JSON (a list of samples)"
        )
    try:
        obj = msgspec.json.decode(first)
    except msgspec.DecodeError as exc:
        raise ReplayFormatError(f"{path}:{number}: not a complete JSON line ({exc})") from None
    if isinstance(obj, dict) and "fadeway_export" in obj:
        return "export"
    if isinstance(obj, dict) and "memory_id" in obj and "message" in obj:
        return "replay"
    keys = ", ".join(sorted(obj)) if isinstance(obj, dict) else type(obj).__name__
    raise ReplayFormatError(
        f"{path}:{number}: unknown format (a line with {keys}): expected "
        'replay lines {"memory_id", "at", "message"}, fadeway exports '
        '{"fadeway_export", ...} or LoCoMo JSON'
    )


def read_inputs(paths: Sequence[str | Path]) -> Batch:
    """Read and check every input; raises on the first bad one, before anything is written."""
    grouped: dict[str, list[ReplayLine]] = {}
    exported: dict[str, str] = {}
    batch = Batch()
    for raw in paths:
        path = Path(raw)
        check_file(path)
        kind = detect(path)
        if kind == "export":
            for memory_id, where in check_export_file(path).items():
                if memory_id in exported:
                    raise InvalidExportError(
                        f"{where}: memory {memory_id!r} is exported twice "
                        f"(also at {exported[memory_id]})"
                    )
                exported[memory_id] = where
            batch.exports.append(path)
            continue
        if kind == "locomo":
            lines = [
                line for sample in read_locomo(path) for _, line in locomo_lines(sample, str(path))
            ]
        else:
            lines = list(read_replay(path))
        for line in lines:
            grouped.setdefault(line.memory_id, []).append(line)
    for memory_id, lines in grouped.items():
        if memory_id in exported:
            raise ReplayFormatError(
                f"{lines[0].where}: memory {memory_id!r} is also imported "
                f"from an export ({exported[memory_id]}); replay one or the "
                "other"
            )
        fmt = check_lines(lines)
        messages = sum(len(step.lines) for step in plan(lines, fmt))
        batch.memories[memory_id] = MemoryLines(memory_id, fmt, lines, messages)
    return batch
