"""Note writers: who answers a note ask when the live model cannot (MECHANISM: "The note ask and
sealing"; ARCHITECTURE: "Who answers a note ask").

In live use only the decorated model answers the ask. In batch replay of recorded conversations
the recorded replies cannot, so a note writer answers it as a separate step, and its facts go
through exactly the same path as a model's note, with their provenance marked. The offline
writer is extractive: each fact is a sentence of the leaving turns themselves, with its subject
and object taken from the sentence, identifiers and numbers verbatim.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Sequence
from dataclasses import dataclass

from . import _constants as C
from .notes import Note, NoteEntry

__all__ = ["LeavingMessage", "NoteWriter", "OfflineNoteWriter"]


@dataclass(frozen=True, slots=True)
class LeavingMessage:
    """A message of the turns that are leaving, as a note writer reads it."""

    turn: int
    role: str  # user / assistant / tool / system / developer, or the speaker's name
    text: str


class NoteWriter(abc.ABC):
    """Answers a note ask with a note, from the leaving turns."""

    name: str = "note-writer"

    @abc.abstractmethod
    async def write(self, ask: str, messages: Sequence[LeavingMessage], *,
                    deadline: float | None = None) -> Note:
        """The note for `ask` (the note ask's text), given the leaving turns' messages."""


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n+")
_SPEAKER = re.compile(r"^([A-Z][\w.-]{0,30}):\s+")
# Named things: capitalised phrases, identifiers with digits or dashes, numbers with units.
_ENTITY = re.compile(
    r"\b\d[\d,.:/-]*\d\b(?:\s?%)?|\b\d\b|[A-Z][\w-]*\d[\w-]*|\b\w+-\d+\b"
    r"|(?:[A-Z][\w'-]+)(?:\s+(?:of|the|de|and|&)?\s*[A-Z][\w'-]+)*")
_MILESTONE = re.compile(
    r"\b(?:agreed|approved|decided|chose|chosen|rejected|done|finished|completed|shipped|"
    r"launched|merged|blocked|next|will|plan(?:s|ned)?|deadline|due)\b", re.IGNORECASE)
_STOP_ENTITIES = frozenset({"I", "I'm", "I've", "I'll", "It", "It's", "The", "This", "That",
                            "Yes", "No", "Ok", "OK", "Okay", "Hi", "Hey", "Hello", "Thanks",
                            "Thank", "Wow", "Oh", "So", "And", "But", "We", "You", "My", "Our",
                            "He", "She", "They", "What", "How", "Great", "Sure", "Good"})


_NOUN_PHRASE = re.compile(
    r"\b(?:the|a|an|this|that|my|your|our|their|his|her|its)\s+((?:[\w'-]+\s+){0,3}?[\w'-]+)"
    r"(?=\s*(?:[.,;:!?)]|$|\s(?:so|and|but|before|after|to|for|with|because|when|while|is|are|"
    r"was|were|on|in|at|by|of)\b))", re.IGNORECASE)


def _object(subject: str, entities: list[str], sentence: str) -> str | None:
    """The fact's object: an identifier or number if the sentence has one (kept verbatim), else
    its last other named thing, else its first noun phrase."""
    others = [e for e in entities if e != subject]
    with_digits = [e for e in others if any(ch.isdigit() for ch in e)]
    if with_digits:
        return with_digits[-1] if len(with_digits) == 1 else with_digits[0]
    if others:
        return others[-1]
    phrase = _NOUN_PHRASE.search(sentence)
    return phrase.group(1) if phrase and phrase.group(1) != subject else None


def _entities(sentence: str) -> list[str]:
    found = []
    for m in _ENTITY.finditer(sentence):
        text = m.group(0).strip(" .,;:!?\"'()[]")
        if text and text not in _STOP_ENTITIES and text not in found:
            found.append(text)
    return found


def _score(sentence: str, entities: list[str]) -> float:
    digits = sum(ch.isdigit() for ch in sentence)
    return len(entities) * 2.0 + min(digits, 8) * 0.5 + (3.0 if _MILESTONE.search(sentence) else 0)


class OfflineNoteWriter(NoteWriter):
    """Extractive, triple-shaped facts from the leaving turns' own sentences (no network)."""

    name = "offline"

    def __init__(self, max_facts: int = C.NOTE_WRITER_MAX_FACTS) -> None:
        self.max_facts = max_facts

    async def write(self, ask: str, messages: Sequence[LeavingMessage], *,
                    deadline: float | None = None) -> Note:
        candidates: list[tuple[float, int, NoteEntry]] = []
        order = 0
        for message in messages:
            text = " ".join(message.text.split())
            speaker = _SPEAKER.match(text)
            who = speaker.group(1) if speaker else message.role
            if speaker:
                text = text[speaker.end():]
            for raw in _SENTENCE.split(text):
                sentence = raw.strip()
                if len(sentence) < C.NOTE_WRITER_MIN_CHARS:
                    continue
                entities = _entities(sentence)
                if not entities:
                    continue
                # The subject is the entity the sentence opens with, else who said it.
                subject = entities[0] if sentence.startswith(entities[0]) else who
                obj = _object(subject, entities, sentence)
                if obj is None:
                    continue
                milestone = bool(_MILESTONE.search(sentence))
                note = sentence if subject != who or speaker is None else f"{who}: {sentence}"
                candidates.append((_score(sentence, entities), order,
                                   NoteEntry(note=note[:C.NOTE_WRITER_MAX_CHARS],
                                             subject=subject, object=obj,
                                             milestone=milestone)))
                order += 1
        if not candidates:
            return Note(notes=[NoteEntry(note="", subject="", object="", milestone=False)])
        best = sorted(candidates, key=lambda c: (-c[0], c[1]))[:self.max_facts]
        return Note(notes=[entry for _, _, entry in sorted(best, key=lambda c: c[1])])
