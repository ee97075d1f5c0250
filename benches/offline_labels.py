"""The labelled sets of the offline judge and note writer, resolved against their sources.

The label files (`benches/labels/*.json`, see their README) hold references, never LoCoMo text:
a turn by conversation and dia_id, a sentence or a name by its character span in the turn's
text. This module reads LoCoMo (from shared/data, never bundled) and the bundled agent sample,
turns the references back into text, and runs the offline note writer the way a replay does
(each session's turns as the leaving messages), so the bench and the tests measure the facts
it writes. LoCoMo: Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM
Agents", ACL 2024, CC BY-NC 4.0.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from fadeway.graph.held import normalise_name
from fadeway.notes.tool import NoteEntry, call_names
from fadeway.notes.writers import LeavingMessage, OfflineNoteWriter
from fadeway.wire import text_of
from fadeway.wire.base import Format

LABELS = Path(__file__).resolve().parent / "labels"
#: LoCoMo's tuning split (shared/data/README.md): every label is read from these only.
TUNING = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
#: No cap on the facts of a note: every sentence the writer would write is looked at.
ALL_FACTS = 10**9


def load_labels(name: str) -> dict[str, Any]:
    return json.loads((LABELS / name).read_text(encoding="utf-8"))


def squash(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True, slots=True)
class Turn:
    conv: str
    dia: str
    session: int
    speaker: str
    listener: str
    role: str
    text: str
    caption: str

    @property
    def content(self) -> str:
        """The message as a LoCoMo replay stores it (`fadeway.replay.locomo`)."""
        image = f" [image: {self.caption}]" if self.caption else ""
        return f"{self.speaker}: {self.text}{image}"


def _write(messages: Sequence[LeavingMessage]) -> list[NoteEntry]:
    note = asyncio.run(OfflineNoteWriter(max_facts=ALL_FACTS).write("ask", messages))
    return [e for e in note.notes if e.note]


def _entry_for(entries: Sequence[NoteEntry], sentence: str) -> NoteEntry | None:
    """The fact written for `sentence`: the shortest note holding it (a speaker taken as the
    subject is written before it, a photo's caption may follow it)."""
    sentence = squash(sentence)
    holding = [e for e in entries if sentence in e.note]
    return min(holding, key=lambda e: len(e.note), default=None)


class Locomo:
    """The tuning conversations of LoCoMo, by turn, with the offline writer's facts."""

    def __init__(self, samples: Sequence[dict[str, Any]]) -> None:
        self.turns: dict[tuple[str, str], Turn] = {}
        self.sessions: dict[tuple[str, int], list[Turn]] = {}
        for sample in samples:
            if sample["sample_id"] in TUNING:
                self._read(sample)

    @classmethod
    def from_path(cls, path: Path | str) -> Locomo:
        from fadeway.replay.locomo import read_locomo

        return cls(read_locomo(path))

    def _read(self, sample: dict[str, Any]) -> None:
        conv, c = sample["sample_id"], sample["conversation"]
        a, b = c["speaker_a"], c["speaker_b"]
        for key in c:
            found = re.fullmatch(r"session_(\d+)", key)
            if not found:
                continue
            number = int(found.group(1))
            for t in c[key]:
                speaker = t["speaker"]
                turn = Turn(
                    conv,
                    t["dia_id"],
                    number,
                    speaker,
                    b if speaker == a else a,
                    "user" if speaker == a else "assistant",
                    t["text"],
                    t.get("blip_caption") or "",
                )
                self.turns[conv, turn.dia] = turn
                self.sessions.setdefault((conv, number), []).append(turn)

    def text(self, conv: str, dia: str, span: Sequence[int]) -> str:
        return self.turns[conv, dia].text[span[0] : span[1]]

    @functools.cache  # noqa: B019 - one instance per run
    def facts(self, conv: str, session: int) -> list[NoteEntry]:
        """Every fact the offline writer writes from one session's turns."""
        turns = self.sessions[conv, session]
        return _write([LeavingMessage(session, t.role, t.content) for t in turns])

    def fact(self, conv: str, dia: str, span: Sequence[int]) -> NoteEntry | None:
        """The fact written for a sentence, or None when the writer leaves it out."""
        turn = self.turns[conv, dia]
        return _entry_for(self.facts(conv, turn.session), self.text(conv, dia, span))

    def entity(self, conv: str, dia: str, ref: Any) -> str:
        """A labelled entity: "speaker", "listener", or a span of the turn's text."""
        turn = self.turns[conv, dia]
        if ref == "speaker":
            return turn.speaker
        if ref == "listener":
            return turn.listener
        return turn.text[ref[0] : ref[1]]


class Agent:
    """The bundled agent sample (ours: quoted freely), by day, with the offline writer's facts."""

    def __init__(self) -> None:
        sample = resources.files("fadeway") / "samples" / "launch-week.jsonl"
        lines = [json.loads(x) for x in sample.read_text(encoding="utf-8").splitlines() if x]
        names = call_names(Format.CHAT_COMPLETIONS, [x["message"] for x in lines])
        self.days: dict[str, list[LeavingMessage]] = {}
        for i, line in enumerate(lines):
            message = line["message"]
            tool = names.get(message.get("tool_call_id", ""), "")
            text = " ".join(text_of(message))
            day = line["at"][:10]
            self.days.setdefault(day, []).append(LeavingMessage(i, message["role"], text, tool))

    @functools.cache  # noqa: B019 - one instance per run
    def facts(self, day: str) -> list[NoteEntry]:
        return _write(self.days[day])

    def fact(self, day: str, sentence: str) -> NoteEntry | None:
        return _entry_for(self.facts(day), sentence)

    def speaker(self, day: str, sentence: str) -> str:
        """Who says `sentence`: its message's wire role, or for a tool output its tool."""
        words = squash(sentence)[:40]
        for m in self.days[day]:
            if words in squash(m.text.replace("*", "")):
                return m.tool or m.role
        return ""


# -- matching entities -------------------------------------------------------------------------


def norm(name: str) -> str:
    """The graph's normal form: the names it takes for one without asking the judge."""
    return normalise_name(name)


def exact(predicted: str | None, gold: Sequence[str]) -> bool:
    return predicted is not None and norm(predicted) in {norm(g) for g in gold}


def contains(predicted: str | None, gold: Sequence[str]) -> bool:
    """Either holds the other, on word boundaries ("climbing club" and "Lisbon climbing club")."""
    if not predicted or not norm(predicted):
        return False
    p = f" {norm(predicted)} "
    return any(f" {norm(g)} " in p or p in f" {norm(g)} " for g in gold if norm(g))
