"""Reading LoCoMo conversations as replay lines (ARCHITECTURE, Contracts: "Time in replay").

LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM Agents",
ACL 2024) is CC BY-NC 4.0: it is read from where the user keeps it, never bundled. Mapping:
speaker_a is `user` and speaker_b `assistant`; content is "<speaker>: <text>", with
" [image: <blip_caption>]" when a photo was shared; each session's turns are 30 s apart from
its `session_N_date_time`; the memory id is the `sample_id`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from ..errors import ReplayFormatError
from .lines import ReplayLine

__all__ = ["TURN_SECONDS", "read_json", "read_locomo", "locomo_lines", "session_start", "dia_ids"]

#: Seconds between consecutive turns of a session.
TURN_SECONDS = 30.0
_SESSION = re.compile(r"session_(\d+)$")


def session_start(text: str) -> float:
    """Unix seconds of a LoCoMo session date such as "1:56 pm on 8 May, 2023" (read as UTC)."""
    try:
        parsed = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        raise ReplayFormatError(f"not a LoCoMo session date: {text!r}") from None
    return parsed.replace(tzinfo=UTC).timestamp()


def _sessions(conversation: dict[str, Any]) -> list[int]:
    numbers = [int(m.group(1)) for key in conversation if (m := _SESSION.match(key))]
    return sorted(numbers)


def locomo_lines(sample: dict[str, Any], source: str = "") -> Iterator[tuple[str, ReplayLine]]:
    """(dia_id, replay line) for every turn of one LoCoMo sample, in order.

    `source` (the file) prefixes each line's place, "<file>: conv-26 session 3 turn 4 (D3:4)",
    and every error about the sample."""
    label = f"{source}: " if source else ""
    try:
        conv = sample["conversation"]
        memory_id = sample["sample_id"]
        roles = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
    except (KeyError, TypeError) as exc:
        raise ReplayFormatError(
            f"{label}sample {sample.get('sample_id', '?')!r} lacks "
            f"{exc}: a LoCoMo sample has sample_id and a conversation with "
            "speaker_a and speaker_b"
        ) from None
    if not isinstance(memory_id, str) or not memory_id:
        raise ReplayFormatError(
            f"{label}a LoCoMo sample_id must be a non-empty string, not {memory_id!r}"
        )
    for number in _sessions(conv):
        place = f"{label}{memory_id} session {number}"
        try:
            start = session_start(conv[f"session_{number}_date_time"])
        except KeyError:
            raise ReplayFormatError(
                f"{place} has no session_{number}_date_time, the time its turns are replayed at"
            ) from None
        except ReplayFormatError as exc:
            raise ReplayFormatError(f"{place}: {exc}") from None
        for i, turn in enumerate(conv[f"session_{number}"]):
            where = f"{place} turn {i + 1}"
            try:
                content = f"{turn['speaker']}: {turn['text']}"
                role = roles[turn["speaker"]]
                dia_id = turn["dia_id"]
            except (KeyError, TypeError) as exc:
                raise ReplayFormatError(
                    f"{where}: a turn needs speaker (speaker_a or speaker_b), "
                    f"text and dia_id; {exc} is missing or wrong"
                ) from None
            if turn.get("blip_caption"):
                content += f" [image: {turn['blip_caption']}]"
            message = {"role": role, "content": content}
            yield (
                dia_id,
                ReplayLine(memory_id, start + i * TURN_SECONDS, message, f"{where} ({dia_id})"),
            )


def read_json(path: str | Path) -> Any:
    """The JSON document in the file `path`; a `ReplayFormatError` naming the file and the line
    where it stops being JSON."""
    with open(path, "rb") as fp:
        raw = fp.read()
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise ReplayFormatError(
            f"{path}:{_line_of(raw, str(exc))}: not complete JSON ({exc})"
        ) from None


def read_locomo(path: str | Path) -> list[dict[str, Any]]:
    """The samples of a LoCoMo file (locomo10.json)."""
    data = read_json(path)
    if not isinstance(data, list) or not all(
        isinstance(s, dict) and "conversation" in s and "sample_id" in s for s in data
    ):
        raise ReplayFormatError(
            f"{path}: not a LoCoMo file (a list of samples with sample_id and conversation)"
        )
    return data


def _line_of(raw: bytes, error: str) -> int:
    """The line of the byte offset msgspec names in a decode error ("... (byte 1234)")."""
    found = re.search(r"byte (\d+)", error)
    offset = int(found.group(1)) if found else len(raw)
    return raw.count(b"\n", 0, offset) + 1


def dia_ids(sample: dict[str, Any]) -> list[str]:
    """The dia_ids of a sample's turns, in replay order."""
    return [dia for dia, _ in locomo_lines(sample)]
