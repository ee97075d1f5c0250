"""The offline note writer: extractive. Each fact is a sentence of the leaving turns themselves,
with its subject and object taken from the sentence, identifiers and numbers verbatim. No model,
no network: what every user runs first, in batch replay."""

from __future__ import annotations

import collections
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ... import _constants as C
from ..tool import Note, NoteEntry
from .base import WIRE_ROLES, LeavingMessage, NoteWriter

__all__ = ["OfflineNoteWriter"]

log = logging.getLogger("fadeway.note_writer")


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n+")
_SPEAKER = re.compile(r"^([A-Z][\w.-]{0,30}):\s+")
_MONTHS = frozenset(
    """
    January February March April May June July August September October November December
    Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec
    """.split()
)
_MONTH = "(?:" + "|".join(sorted(_MONTHS, key=lambda m: (-len(m), m))) + ")"  # longest first
# Named things: timestamps, dates ("18 May", "April 20, 2026"), amounts with their currency
# ("$1,200", "£92k"), quantities with a unit ("512Mi", "10am", "5k"), numbers, identifiers
# with digits (dashed, capitalised or snake_case: "LEG-412", "Q2", "evt_7Qm2"), and capitalised
# phrases, each from a word's start.
_ENTITY = re.compile(
    r"\b\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d)?(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?"
    rf"|\b\d\d?(?:st|nd|rd|th)?\s{_MONTH}\b(?:\s\d{{4}}\b)?"
    rf"|\b{_MONTH}\s\d\d?(?:st|nd|rd|th)?\b(?:,?\s\d{{4}}\b)?"
    r"|(?<![\w$£€¥])[$£€¥]\d(?:[\d,.]*\d)?(?:[kKMB]\b|bn\b)?"
    r"|\b\d(?:[\d,.]*\d)?[kKMB]\b"
    r"|\b\d[\d,.]*(?!st\b|nd\b|rd\b|th\b)[A-Za-z]{2,3}\b"
    r"|\b\d[\d,.:/-]*\d\b(?:\s?%)?|\b\d\b|\b[a-z][a-z\d]*_\w*\d\w*|\b[A-Z][\w-]*\d[\w-]*"
    r"|\b\w+-\d+\b|\b(?:[A-Z][\w'-]+)(?:\s+(?:of|the|de|and|&)?\s*[A-Z][\w'-]+)*"
)
_MILESTONE = re.compile(
    r"\b(?:agreed|approved|decided|chose|chosen|rejected|done|finished|completed|shipped|"
    r"launched|merged|blocked|next|will|plan(?:s|ned)?|deadline|due)\b",
    re.IGNORECASE,
)
_STOP_ENTITIES = frozenset(
    {
        "I",
        "I'm",
        "I've",
        "I'll",
        "I'd",
        "It",
        "It's",
        "The",
        "This",
        "That",
        "That's",
        "Here's",
        "There's",
        "You're",
        "We're",
        "Yes",
        "No",
        "Ok",
        "OK",
        "Okay",
        "Hi",
        "Hey",
        "Hello",
        "Thanks",
        "Thank",
        "Wow",
        "Oh",
        "So",
        "And",
        "But",
        "We",
        "You",
        "My",
        "Our",
        "Your",
        "Their",
        "His",
        "Her",
        "He",
        "She",
        "They",
        "He's",
        "She's",
        "They're",
        "These",
        "Those",
        "What",
        "How",
        "Great",
        "Sure",
        "Good",
    }
)


_NOUN_PHRASE = re.compile(
    r"\b(?:the|a|an|this|that|my|your|our|their|his|her|its)\s+((?:[\w'-]+\s+){0,3}?[\w'-]+)"
    r"(?=\s*(?:[.,;:!?)]|$|\s(?:so|and|but|before|after|to|for|with|because|when|while|is|are|"
    r"was|were|on|in|at|by|of)\b))",
    re.IGNORECASE,
)


_TRAILING = re.compile(
    r"\s+(?:too|also|again|though|anyway|now|still|already|just|only)$", re.IGNORECASE
)


def _object(subject: str, entities: list[str], sentence: str) -> str | None:
    """The fact's object: an identifier or number if the sentence has one (kept verbatim), else
    its last other named thing, else its first noun phrase; never the subject or a part of it
    ("Q2" of "Q2 headcount plan")."""
    others = [e for e in entities if e not in subject]
    with_digits = [e for e in others if any(ch.isdigit() for ch in e)]
    if with_digits:
        return with_digits[-1] if len(with_digits) == 1 else with_digits[0]
    if others:
        return others[-1]
    phrase = _NOUN_PHRASE.search(sentence)
    if phrase is None:
        return None
    text = _TRAILING.sub("", phrase.group(1))
    return text if text not in subject else None


# A name is spoken to when it stands between a greeting or a comma (or the start) and a comma
# or the end of the sentence ("Wow, Caroline, ...", "Thanks Mel!", "Caroline, look").
_ADDRESS = re.compile(r"(?:^|,\s*|\b(?:[Hh]ey|[Hh]i|[Hh]ello|[Tt]hanks|[Tt]hank you|[Dd]ear)\s+)$")
_VOCATIVE = re.compile(r"\s*(?:[,!?]|\.(?:\s|$)|$)")


# Words that open sentences without naming anything: function words, time adverbs,
# interjections. A capitalised opener in one of the word forms below is a common word too
# ("Talking", "Realized", "Really", "Life's", "They're", "Didn't", "Veggies").
_OPENERS = frozenset(
    """
    A An Another Some Many Most Every Both Either Neither Such Other Few Several Lots Plenty
    Me Him Us Them Mine Yours Ours Theirs Who Whom Whose Which Where When Why Whatever
    If Since While After Before Because As For From In On At To With Without About Of Off
    Into Over Under Through During Until Unless Though Although Or Nor Yet Then Than
    Now Today Tonight Tomorrow Yesterday Once Soon Later Lately Recently Sometimes Always
    Never Often Still Even Only Not Too Very Quite Almost Here There Please Let Do Does Did
    Is Are Was Were Be Been Have Has Had Can Could Would Should Will Might Must May Shall
    One Two Three Everyone Everything Someone Something Anyone Anything Nothing Nobody
    Ah Ahh Hmm Huh Ooh Oops Uh Um Whoa Yay Yikes Omg Lol Hah Ha Hooray Cheers Welcome
    Agreed Absolutely Exactly Indeed Right True Fine Alright Perfect Amazing Wonderful
    Thankfully Hopefully Luckily Honestly Actually Anyway Anyways Besides Otherwise
    Last Next Happy Yeah Yep Glad Any All Each Wish Can't Let's Aw Aww Haha Awesome Congrats
    Nice Cool Really Just Also Maybe Well Sounds Love Sorry Check Appreciate Gonna Totally
    Definitely Four Five Six Seven Eight Nine Ten
    """.split()
)
# Past tenses that open an agent's report of what it did ("Sent Elena the resolution").
_DID = frozenset(
    """
    Sent Told Made Got Put Set Left Kept Took Gave Found Said Wrote Ran Met Paid Built Brought
    Bought Thought Felt Heard Meant Saw Went Came Began Chose Held Led Lost Won Spent Sold
    """.split()
)
# Calendar words name a time, not whom a fact is about.
_CALENDAR = _MONTHS | frozenset(
    """
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday Mon Tue Tues Wed Thu Thur Thurs Fri
    Sat Sun UTC GMT
    """.split()
)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|My|me|we|We|our|Our|us)\b")
_WORD_FORM = re.compile(r"(?:ing|ed|ly|ies|['\u2019](?:s|re|ll|d|ve|m|t))$")


@dataclass(frozen=True, slots=True)
class _Words:
    """What the leaving turns tell of their words: those capitalised inside a sentence (and the
    speakers) name something; those written in lower case are common words."""

    names: frozenset[str]
    common: frozenset[str]

    @classmethod
    def of(cls, sentences: Sequence[str], speakers: set[str]) -> _Words:
        names, common = set(speakers), set()
        for sentence in sentences:
            for i, word in enumerate(sentence.split()):
                word = word.strip(".,;:!?\"'()[]")
                if word[:1].islower():
                    common.add(word)
                elif i and word[:1].isupper():
                    names.add(word.removesuffix("'s").removesuffix("\u2019s"))
        return cls(frozenset(names), frozenset(common))


def _opening_name(phrase: str, words: _Words) -> str:
    """`phrase`, which opens a sentence, without its leading words that name nothing: a common
    opener, or a word these turns write in lower case and never capitalise inside a sentence."""
    parts = phrase.split()
    while parts:
        first = parts[0]
        if any(ch.isdigit() for ch in first) or not first[1:].islower() or first in words.names:
            break
        if (
            first not in _STOP_ENTITIES
            and first not in _OPENERS
            and first not in _DID
            and first.lower() not in words.common
            and not _WORD_FORM.search(first)
        ):
            break
        parts.pop(0)
    return " ".join(parts)


def _entities(sentence: str, words: _Words) -> list[str]:
    """The named things of a sentence, in order. Every sentence opens with a capital, so a
    capitalised word there names something only when these turns say so (see `_Words`), or it
    holds a digit or a capital past its first letter; otherwise it is left out ("Yeah", "Glad",
    "Last" of "Last Friday"). A name spoken to ("Wow, Caroline, ...") is left out too."""
    found = []
    for m in _ENTITY.finditer(sentence):
        text = m.group(0).strip(" .,;:!?\"'()[]")
        if _VOCATIVE.match(sentence, m.end()) and _ADDRESS.search(sentence[: m.start()]):
            continue
        if m.start() <= 1 and text:  # the sentence's first word (past an opening quote)
            text = _opening_name(text, words)
        if text and text not in _STOP_ENTITIES and text not in found:
            found.append(text)
    return found


_MARKUP = re.compile(r"\*\*|__|`|^\s*(?:[-*+•]|\d+[.)]|#+)\s+", re.MULTILINE)
_ESCAPED_BREAK = re.compile(r"\\n")
_CALL = re.compile(r"\s*[\w.-]+\s+\{\"")
_DATA = re.compile(r"[{\[]\s*\"|^\s*[{\[]|\w+\s+\{\"|\"\s*[}\]]")


def _sentences(text: str) -> list[str]:
    """The sentences of a message, line by line (a list item is a fact of its own), without
    Markdown emphasis or bullets. A JSON record (a tool output) reads as one sentence per
    record; other data (call arguments, fragments) holds no sentence."""
    stripped = text.strip()
    if stripped[:1] in "{[":
        try:
            return _records(json.loads(stripped))
        except ValueError:
            return []
    out: list[str] = []
    for line in _ESCAPED_BREAK.sub("\n", text).splitlines():
        if _CALL.match(line):
            break  # a tool call's arguments run to the end: none of it is said
        if _DATA.search(line):
            continue
        line = " ".join(_MARKUP.sub("", line).split())
        out += _SENTENCE.split(line)
    return out


_NAME_KEYS = ("id", "name", "title", "key")


def _records(value: Any) -> list[str]:
    """`{"id": "LEG-412", "status": "approved"}` as "LEG-412: status approved." (its short
    scalar fields, the naming one first); a list gives one sentence per record."""
    if isinstance(value, list):
        return [s for item in value[: C.NOTE_WRITER_MAX_FACTS] for s in _records(item)]
    if not isinstance(value, dict):
        return []
    fields = {
        str(k): v
        for k, v in value.items()
        if isinstance(v, (str, int, float))
        and not isinstance(v, bool)
        and len(str(v)) <= 80
        and str(v).strip()
    }
    name = next((str(fields.pop(k)) for k in _NAME_KEYS if k in fields), None)
    parts = [f"{k.replace('_', ' ')} {v}" for k, v in list(fields.items())[:6]]
    if not parts:
        return []
    return [f"{name}: {', '.join(parts)}." if name else f"{', '.join(parts)}."]


def _score(sentence: str, entities: list[str]) -> float:
    digits = sum(ch.isdigit() for ch in sentence)
    return len(entities) * 2.0 + min(digits, 8) * 0.5 + (3.0 if _MILESTONE.search(sentence) else 0)


def _speakers(messages: Sequence[LeavingMessage]) -> dict[str, set[str]]:
    """The speakers each role's messages name before their text ("Caroline: ..."): a
    transcript's convention, where most of the role's messages open so, with one name, or with
    names that each open several (a group chat); not labels that open a line each ("Paid:",
    "Draft:") in an agent's replies."""
    prefixes: dict[str, list[str]] = {}
    for message in messages:
        if message.text.strip():
            match = _SPEAKER.match(message.text.strip())
            prefixes.setdefault(message.role, []).append(match.group(1) if match else "")
    out = {}
    for role, names in prefixes.items():
        named = collections.Counter(name for name in names if name)
        if 2 * named.total() > len(names):
            out[role] = {name for name, count in named.items() if count > 1 or len(named) == 1}
    return out


# A line's label ("Paid: 131 ...", "Checkout v2: at 100% ..."): a word before a colon, with
# a second one that holds a digit or a capital.
_LABEL = re.compile(r"([A-Z][\w&/.-]*(?: [\w&/.-]*[\dA-Z][\w&/.-]*)?):\s")
# A sentence's opening noun phrase, up to the verb after it ("The longest delay was ...").
_SUBJECT_PHRASE = re.compile(
    r"(?:the|a|an|this|that|our|your|their|its|his|her)\s+((?:[\w'-]+\s+){0,2}?[\w'-]+)"
    r"(?=\s+(?:is|are|was|were|has|have|had|will|would|can|could|should|may|might|must|does|"
    r"did|\w+ed|\w+s)\b)",
    re.IGNORECASE,
)


def _is_label(text: str) -> bool:
    """Whether `text` before a colon names what its line is about ("Paid", "Checkout v2"),
    not a common opener, a day, or what the speaker did ("Updated", "Told Priya")."""
    first, *rest = text.split()
    return (
        first not in _OPENERS | _STOP_ENTITIES | _CALENDAR
        and not first.endswith("ed")
        and not (rest and first in _DID)
    )


def _subject(sentence: str, entities: list[str], who: str, named: bool) -> str:
    """Whom or what a sentence is about: the named thing it opens with, else its speaker.

    A speaker that is only a wire role (an agent's assistant, a tool) is no entity of the
    conversation, and as every sentence's fallback it would join unrelated facts in the graph.
    Then the subject is taken from the sentence: its line's label, the named thing it opens
    with, its opening noun phrase, else its first named thing that is neither a number nor a
    day. The speaker stays the subject of what the user says of themselves (first person), of
    a sentence that names nothing else, and of what a tool (by its name) outputs.
    """
    if named:
        return entities[0] if entities and sentence.startswith(entities[0]) else who
    words = [
        e for e in entities if e[:1].isalpha() and e.split()[0].removesuffix("'s") not in _CALENDAR
    ]
    label = _LABEL.match(sentence)
    if label is not None and _is_label(label.group(1)):
        return label.group(1)
    if words and sentence.startswith(words[0]):
        return words[0]
    if who not in WIRE_ROLES or (who == "user" and _FIRST_PERSON.search(sentence)):
        return who
    phrase = _SUBJECT_PHRASE.match(sentence)
    if phrase is not None:
        return _TRAILING.sub("", phrase.group(1))
    return words[0] if words else who


class OfflineNoteWriter(NoteWriter):
    """Extractive, triple-shaped facts from the leaving turns' own sentences (no network)."""

    name = "offline"

    def __init__(self, max_facts: int = C.NOTE_WRITER_MAX_FACTS) -> None:
        self.max_facts = max_facts

    async def write(
        self, ask: str, messages: Sequence[LeavingMessage], *, deadline: float | None = None
    ) -> Note:
        candidates: list[tuple[float, int, NoteEntry]] = []
        order = 0
        said = []  # (who said it, whether a "Name:" prefix named them, its sentences)
        speakers = _speakers(messages)
        for message in messages:
            text = message.text.strip()
            speaker = _SPEAKER.match(text)
            named = speaker is not None and speaker.group(1) in speakers.get(message.role, ())
            who = speaker.group(1) if named and speaker else message.tool or message.role
            if named and speaker:
                text = text[speaker.end() :]
            said.append((who, named, [raw.strip() for raw in _sentences(text)]))
        words = _Words.of(
            [x for _, _, sentences in said for x in sentences],
            {who for who, named, _ in said if named},
        )
        for who, named, sentences in said:
            for sentence in sentences:
                if not C.NOTE_WRITER_MIN_CHARS <= len(sentence) <= C.NOTE_WRITER_MAX_CHARS:
                    continue  # too short to hold a fact, or too long to be one
                entities = _entities(sentence, words)
                if not entities and (sentence.endswith("?") or not _FIRST_PERSON.search(sentence)):
                    continue  # names nothing, and says nothing of the speaker
                subject = _subject(sentence, entities, who, named)
                obj = _object(subject, entities, sentence)
                if obj is None:
                    continue
                milestone = bool(_MILESTONE.search(sentence))
                # A subject the sentence does not write is its speaker, written before it.
                note = sentence if subject != who else f"{who}: {sentence}"
                candidates.append(
                    (
                        _score(sentence, entities),
                        order,
                        NoteEntry(note=note, subject=subject, object=obj, milestone=milestone),
                    )
                )
                order += 1
        if not candidates:
            return Note(notes=[NoteEntry(note="", subject="", object="", milestone=False)])
        # A sentence said twice (asked, then confirmed) is one fact: keep its first candidate.
        first: dict[str, tuple[float, int, NoteEntry]] = {}
        for c in candidates:
            first.setdefault(c[2].note, c)
        candidates = list(first.values())
        best = sorted(candidates, key=lambda c: (-c[0], c[1]))[: self.max_facts]
        return Note(notes=[entry for _, _, entry in sorted(best, key=lambda c: c[1])])
