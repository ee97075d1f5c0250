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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

from .replay import ReplayFormatError, ReplayLine

__all__ = ["TURN_SECONDS", "read_locomo", "locomo_lines", "session_start", "dia_ids"]

#: Seconds between consecutive turns of a session.
TURN_SECONDS = 30.0
_SESSION = re.compile(r"session_(\d+)$")


def session_start(text: str) -> float:
    """Unix seconds of a LoCoMo session date such as "1:56 pm on 8 May, 2023" (read as UTC)."""
    try:
        parsed = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    except ValueError:
        raise ReplayFormatError(f"not a LoCoMo session date: {text!r}") from None
    return parsed.replace(tzinfo=timezone.utc).timestamp()


def _sessions(conversation: dict[str, Any]) -> list[int]:
    numbers = [int(m.group(1)) for key in conversation if (m := _SESSION.match(key))]
    return sorted(numbers)


def locomo_lines(sample: dict[str, Any]) -> Iterator[tuple[str, ReplayLine]]:
    """(dia_id, replay line) for every turn of one LoCoMo sample, in order."""
    conv = sample["conversation"]
    roles = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
    memory_id = sample["sample_id"]
    for number in _sessions(conv):
        start = session_start(conv[f"session_{number}_date_time"])
        for i, turn in enumerate(conv[f"session_{number}"]):
            content = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                content += f" [image: {turn['blip_caption']}]"
            message = {"role": roles[turn["speaker"]], "content": content}
            yield turn["dia_id"], ReplayLine(memory_id, start + i * TURN_SECONDS, message)


def read_locomo(path: str | Path) -> list[dict[str, Any]]:
    """The samples of a LoCoMo file (locomo10.json)."""
    with open(path, "rb") as fp:
        data = msgspec.json.decode(fp.read())
    if not isinstance(data, list) or not all(
            isinstance(s, dict) and "conversation" in s and "sample_id" in s for s in data):
        raise ReplayFormatError(f"{path}: not a LoCoMo file (a list of samples with "
                                "sample_id and conversation)")
    return data


def dia_ids(sample: dict[str, Any]) -> list[str]:
    """The dia_ids of a sample's turns, in replay order."""
    return [dia for dia, _ in locomo_lines(sample)]
