"""What the score job (`forgetting.scoring.ScoreJob`) reads of an episode and writes in its
payload: an episode's messages as one text, and episode numbers as runs."""

from __future__ import annotations

import msgspec

from ..wire import text_of

__all__ = ["episode_text", "number_runs"]


def episode_text(bodies: list[bytes]) -> str:
    """An episode in view as the judge reads it: its messages' text, a blank line apart."""
    return "\n\n".join(" ".join(text_of(msgspec.json.decode(b))) for b in bodies)


def number_runs(numbers: list[int]) -> list[list[int]]:
    """Ascending `numbers` as runs `[first, last]` of consecutive ones."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return runs
