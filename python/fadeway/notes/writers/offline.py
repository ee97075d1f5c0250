"""The offline note writer: extractive. Each fact is a sentence of the leaving turns themselves,
with its subject and object taken from the sentence, identifiers and values verbatim. No model,
no network: what every user runs first, in batch replay.

An entity is something the conversation names: never a wire role ("assistant", "user"), a day
or a month on its own, a bare number or clock time, a verb that opens an instruction ("Guess
what", "Take a look"), a question's words, or a phrase of words that name nothing ("by the
way"). Measured against hand labels (subject and object of LoCoMo tuning sentences and of the
bundled agent sample) by `benches/offline_judgments.py`; the history of what was tried and what
lost is in `benches/RESULTS-offline-judgments.md`. In short: the old object, the sentence's
last named thing, was often a day or a place said in passing; the first value, name or noun
phrase after the subject matches the annotators far more often. A noun phrase that neither a
determiner nor a preposition opens (a gerund: "started surfing") is still missed: without parts
of speech it cannot be told from a verb."""

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
from .base import NO_CONTEXT, WIRE_ROLES, LeavingMessage, NoteContext, NoteWriter

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
    r"|\b\d[\d,.:/-]*\d\b(?:\s?%)?|\b\d\b(?:\s?%)?|\b[a-z][a-z\d]*_\w*\d\w*(?:\.[a-z]{2,4}\b)?|\b[A-Z][\w-]*\d[\w-]*"
    r"|\b\w[\w-]*-\d+\b|\b(?:[A-Z][\w'-]+)(?:\s+(?:of|the|de|and|&)?\s*[A-Z][\w'-]+)*"
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


_TRAILING = re.compile(
    r"\s+(?:too|also|again|though|anyway|now|still|already|just|only)$", re.IGNORECASE
)

# Words that end a noun phrase (or never start one): function words, and those that tell when.
_FUNCTION_WORDS = frozenset(
    """
    i me you he she it we they him us them myself yourself itself ourselves themselves
    anyone anything someone something everyone everything nobody nothing somebody everybody
    is are was were be been being am has have had do does did will would can could should may
    might must shall 's 're 've 'll 'd 'm gonna wanna
    and or but so because if when while than then as since until unless though although
    to of in on at by for from with about into onto over under through during after before
    without within between among around near like per via against towards toward vs versus
    who whom whose which what where why how that this these those there here
    not no never just really very too also still even only already again ever quite
    yesterday today tonight tomorrow now lately recently soon later earlier ago once
    last next every each ever finally actually usually probably definitely totally literally
    basically honestly seriously especially exactly nearly mostly mainly simply currently
    two three four five six seven eight nine ten eleven twelve twenty thirty hundred
    """.split()
)
# A word that ends a noun phrase by starting what is said of it: a past form ("a dog named
# Bailey", "Rob invited me") or a contraction ("a lot's happened", "the hoodie isn't").
_ENDS_CLAUSE = re.compile(
    r"[a-z]{3,}ed|(?:it|that|there|what|lot|this|he|she)['\u2019]s|gave|got|went|made|took|came|"
    r"said|told|sent|found|left|kept|brought|bought|thought|felt|saw|began|won|lost|paid|ran|"
    r"met|built|wrote|spent|sold|held|led|chose"
)
# Determiners that open a noun phrase, and words that only count its head ("a few", "lots of").
_DETERMINERS = frozenset(
    "the a an this that these those my your our their his her its some another any".split()
)
_QUANTITY_WORDS = frozenset("few several many lots lot bunch couple most all both of".split())
# Nouns that name nothing of their own: "by the way", "a lot", "in the meantime", "a bit".
_EMPTY_NOUNS = frozenset(
    """
    way ways lot lots bit meantime moment moments kind sort rest same thing things stuff one ones
    end while sec second minute time times day days week weeks month months year years point own
    """.split()
)
_PHRASE_WORD = re.compile(r"[\w'\u2019&+/-]*\w|[^\w\s]")


def _noun_phrases(sentence: str, openers: frozenset[str] = frozenset()) -> list[tuple[int, int]]:
    """Spans of the noun phrases a determiner opens ("a Lisbon climbing club", "my first short
    film"), without the determiner, a leading count ("a few", "lots of"), or what follows
    the head: a function word, punctuation, a word of time ("... yesterday", "... last week").
    A phrase that holds a name starts at the name ("a big Lisbon marathon" -> "Lisbon
    marathon"); one of words that name nothing ("the way", "a lot") is left out. `openers`
    adds words that open a phrase too (prepositions: "at work")."""
    tokens = list(_PHRASE_WORD.finditer(sentence))
    out = []
    for i, token in enumerate(tokens):
        if token.group(0).lower() not in _DETERMINERS | openers:
            continue
        words: list[re.Match[str]] = []
        for j in range(i + 1, min(i + 6, len(tokens))):
            text = tokens[j].group(0)
            lower = text.lower()
            if not text[0].isalnum() or lower in _FUNCTION_WORDS or lower in _DETERMINERS:
                break
            if text.isdigit():
                break  # a number is a value, not a word of a phrase ("as of 14:33")
            if words and _verb_before_name(tokens, j):
                break  # "the Q2 headcount plan marks REQ-031"
            if _is_time(text) or lower.endswith("n't") or _ENDS_CLAUSE.fullmatch(lower):
                break
            if not words and lower in _QUANTITY_WORDS:
                continue
            words.append(tokens[j])
        named = [t for t in words if t.group(0)[0].isupper()]
        if named:
            words = words[words.index(named[0]) :]
        if any(t.group(0).lower() not in _EMPTY_NOUNS for t in words):
            out.append((words[0].start(), words[-1].end()))
    return out


def _verb_before_name(tokens: Sequence[re.Match[str]], j: int) -> bool:
    """Whether token `j` is a verb in the present that a name or a value follows ("marks
    REQ-031", "owns OPS-312"): a lower-case word in -s before a capital, a digit or a currency."""
    word = tokens[j].group(0)
    following = tokens[j + 1].group(0) if j + 1 < len(tokens) else ""
    return (
        word[:1].islower()
        and word.endswith("s")
        and not word.endswith("ss")
        and (following[:1].isupper() or following[:1].isdigit() or following[:1] in "$£€¥")
    )


def _value_objects(entities: list[str], sentence: str) -> list[str]:
    """The values among a sentence's named things that make an object, verbatim: identifiers,
    amounts, dates with their month, shares ("40%"), and a number with the noun it counts
    ("40 points", "3 users") or after the field it fills ("signups 412"). A bare number or a
    clock time would join every fact that holds the same number, so it is never one. Where a
    value changed ("from $12 to $14"), the value it changed to comes first."""
    out = []
    for e in entities:
        if not any(ch.isdigit() for ch in e):
            continue
        if _BARE_NUMBER.fullmatch(e):
            if ":" in e:
                continue  # a clock time
            number = re.escape(e)
            counted = re.search(rf"(?<![\w.$£€¥-]){number}\s+([a-z][a-z-]+)\b", sentence)
            field = re.search(rf"\b([a-z][a-z-]+)\s+{number}(?=[,.;]|$)", sentence)
            if counted is not None and _is_noun(counted.group(1)):
                e = f"{e} {counted.group(1)}"  # "40 points"
            elif field is not None and _is_noun(field.group(1)):
                e = f"{field.group(1)} {e}"  # a record's field: "signups 412"
            else:
                continue  # a number that counts nothing named
        out.append(e)
    changed = re.search(r"\bfrom\s+(\S+)\s+to\s+(\S+)", sentence)
    if changed is not None:
        to = changed.group(2).strip(".,;:!?)")
        out.sort(key=lambda e: e != to)
    return out


_BARE_NUMBER = re.compile(r"\d[\d,.:/]*")


def _is_noun(word: str) -> bool:
    """Whether a lower-case word can head a noun phrase: not a function word, a determiner or
    a word of time."""
    return (
        len(word) > 1
        and word not in _FUNCTION_WORDS
        and word not in _DETERMINERS
        and not _is_time(word)
    )


def _object(subject: str, entities: list[str], sentence: str) -> str | None:
    """The fact's object, never the subject nor a part of it ("Q2" of "Q2 headcount plan"),
    never a day or a wire role: a value (see `_value_objects`), else the first other named
    thing, else the first noun phrase (see `_noun_phrases`).

    Tried and lost: the last named thing (the old rule) picked a time or a place said in
    passing ("... last Friday", "Porto, a city on the coast"), and on the LoCoMo
    tuning labels the first one matched the annotator's object more often."""
    others = [
        e
        for e in entities
        if _apart(e, subject) and not _is_time(e) and e.lower() not in WIRE_ROLES
    ]
    # What follows the subject is what the sentence says of it ("On 3 April Ben confirmed Team
    # at $14": "$14", not the date that opens it).
    after = sentence.find(subject) + len(subject) if subject in sentence else 0
    others.sort(key=lambda e: sentence.find(e) < after)
    values = _value_objects(others, sentence)
    if values:
        return values[0]
    names = [e for e in others if not any(ch.isdigit() for ch in e)]
    if names:
        return names[0]
    # A phrase a determiner opens, else one a preposition opens ("at work", "to most
    # reptiles"): the latter is more often an adverbial, so it comes last.
    for openers in (frozenset(), _PREPOSITIONS):
        phrases = [sentence[start:end] for start, end in _noun_phrases(sentence, openers)]
        found = next((p for p in phrases if _apart(p, subject) and p not in WIRE_ROLES), None)
        if found is not None:
            return found
    return None


_PREPOSITIONS = frozenset("to of in on at for from with about into".split())


def _apart(name: str, subject: str) -> bool:
    """Whether `name` is another thing than the subject: neither holds the other."""
    return name not in subject and subject not in name


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


def _is_time(name: str) -> bool:
    """Whether a name only tells when: a day or a month on its own ("Friday's", "Thursdays"),
    not a date ("18 May" is a value)."""
    if not name or any(ch.isdigit() for ch in name):
        return False
    first = name.split()[0].removesuffix("'s").removesuffix("\u2019s")
    return first in _CALENDAR or first.removesuffix("s") in _CALENDAR or first.lower() in _WHEN


_WHEN = frozenset(
    """
    yesterday today tonight tomorrow week weekend month year morning afternoon evening night
    lately recently
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
            opens = True  # a capital where a clause opens says nothing of the word
            for word in sentence.split():
                after_colon = word.endswith(":")
                word = word.strip(".,;:!?\"'()[]")
                if word[:1].islower():
                    common.add(word)
                elif not opens and word[:1].isupper():
                    names.add(word.removesuffix("'s").removesuffix("\u2019s"))
                opens = after_colon
        return cls(frozenset(names), frozenset(common))


def _opening_name(phrase: str, words: _Words) -> str:
    """`phrase`, which opens a sentence, without its leading words that name nothing: a common
    opener, or a word these turns write in lower case and never capitalise inside a sentence."""
    parts = phrase.split()
    while parts:
        first = parts[0]
        if first in _STOP_ENTITIES and len(parts) > 1:
            parts.pop(0)  # "The RCA", even where "The" opens a title inside a sentence
            continue
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
    "Last" of "Last Friday"), as is a verb that opens an instruction ("Guess what", "Tell
    her"). A name spoken to ("Wow, Caroline, ...") is left out too. A short quoted phrase is a
    name ("Delayed invoice PDFs"); a name that opens a noun phrase takes in its head ("a Lisbon
    climbing club", "the Business price"); a possessive is its owner ("Biscuit's" is Biscuit)."""
    found: list[tuple[int, str]] = []
    quoted = [(m.start(1), m.end(1)) for m in _QUOTED.finditer(sentence)]
    found += [(start, sentence[start:end]) for start, end in quoted]
    phrases = _noun_phrases(sentence)
    for m in _ENTITY.finditer(sentence):
        if any(start <= m.start() < end for start, end in quoted):
            continue
        text = m.group(0).strip(" .,;:!?\"'()[]")
        spoken_to = _VOCATIVE.match(sentence, m.end()) and _ADDRESS.search(sentence[: m.start()])
        if spoken_to and not any(ch.isdigit() for ch in text):  # "SUP-1893, opened ..." is not
            continue
        if m.start() <= 1 and text:  # the sentence's first word (past an opening quote)
            if _INSTRUCTION.match(sentence, m.start()):
                continue
            text = _opening_name(text, words)
        head = next((e for s, e in phrases if s <= m.start() < e and m.end() < e), None)
        if head is not None and text:
            text = sentence[sentence.index(text, m.start()) : head]
        text = _POSSESSIVE.sub("", text)
        if text and text not in _STOP_ENTITIES and text not in {t for _, t in found}:
            found.append((m.start(), text))
    return [text for _, text in sorted(found)]


# A short quoted phrase, the name of a title or a label ("Delayed invoice PDFs"); not a quoted
# sentence, which ends with its punctuation inside the quotes.
_QUOTED = re.compile(r"[\"\u201c]([^\"\u201d.!?]{2,60})[\"\u201d]")
# A capitalised word that opens an instruction: a verb, which a name would not be followed by.
_INSTRUCTION = re.compile(
    r"[A-Z][a-z]+\s+(?:what|the|a|an|it|me|him|her|them|us|up|out|my|your|our|this|that|"
    r"these|those|some|any|off|down|back)\b"
)
_POSSESSIVE = re.compile(r"['\u2019]s$")


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
    parts = [f"{k.replace('_', ' ')}{_opening(v)} {v}" for k, v in list(fields.items())[:6]]
    if not parts:
        return []
    return [f"{name}: {', '.join(parts)}." if name else f"{', '.join(parts)}."]


def _opening(value: object) -> str:
    """What follows a record's field name: a colon when the field holds prose ("text: Added
    the date ...", whose capital opens a clause and names nothing: `_Words`), else nothing
    ("status approved")."""
    text = str(value)
    return ":" if text[:1].isupper() and text[1:2].islower() and text.count(" ") >= 2 else ""


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
_LABEL = re.compile(r"(?:The |A |An )?([A-Z][\w&/.-]*(?: [\w&/.()-]+){0,2}):\s")
_COUNT_OPENING = re.compile(r"(\d[\d,.]*)\s+([a-z][a-z-]+)")


def _is_label(text: str, names: frozenset[str]) -> bool:
    """Whether `text` before a colon names what its line is about ("Paid", "Checkout v2", "New
    headline"), not a common opener, a day, what the speaker did ("Updated", "Told Priya"), or
    a name and what it did ("Jonas says hire")."""
    first, *rest = text.split()
    said = first in names and any(w[:1].islower() and not _has_digit(w) for w in rest)
    return (
        first not in _OPENERS | _STOP_ENTITIES | _CALENDAR
        and not first.endswith("ed")
        and not (rest and first in _DID)
        and not said
        and not any(w.lower() in _FUNCTION_WORDS or w.lower() in _DETERMINERS for w in rest)
    )


def _has_digit(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


def _subject(
    sentence: str, entities: list[str], who: str, named: bool, names: frozenset[str]
) -> str | None:
    """Whom or what a sentence is about: the named thing it opens with, else its speaker;
    None when it is about nothing the conversation names.

    A speaker that is only a wire role (an agent's assistant, its user) is no entity of the
    conversation: as every sentence's fallback it would join unrelated facts in the graph, and
    "assistant: ..." in the facts block tells the model nothing. Then the subject is taken from
    the sentence: its line's label, the named thing it opens with, the count it opens with
    ("58 signups"), its opening noun phrase, its first named thing that is neither a number
    nor a day, else its first noun phrase; a sentence with none of them is no fact. A tool (by
    its name) stays the subject of its outputs.
    """
    if named:
        if entities and sentence.startswith(entities[0]):
            return entities[0]
        return _opening_phrase(sentence, _ARTICLES) or who
    words = [e for e in entities if e[:1].isalpha() and not _is_time(e) and e not in WIRE_ROLES]
    label = _LABEL.match(sentence)
    if label is not None and _is_label(label.group(1), names):
        return label.group(1)
    if words and sentence.startswith(words[0]):
        return words[0]
    counted = _COUNT_OPENING.match(sentence)
    if counted and _is_noun(counted.group(2)) and not _ENDS_CLAUSE.fullmatch(counted.group(2)):
        return counted.group(0)  # "58 signups between 10:00 and 11:00 ..."
    if who not in WIRE_ROLES:
        return who
    phrase = _opening_phrase(sentence, _DETERMINERS)
    if phrase is not None:
        return phrase  # "The longest delay was 39 minutes ..."
    if words:
        return words[0]
    # "We agreed to launch the pricing page on 2026-03-14": what it names is the page.
    phrases = _noun_phrases(sentence)
    return sentence[phrases[0][0] : phrases[0][1]] if phrases else None


_ARTICLES = frozenset("the this that these those a an".split())


def _opening_phrase(sentence: str, determiners: frozenset[str]) -> str | None:
    """The noun phrase a sentence opens with, after one of `determiners` ("The longest delay",
    "This necklace"), or None."""
    opening = _PHRASE_WORD.match(sentence)
    if opening is None or opening.group(0).lower() not in determiners:
        return None
    phrases = _noun_phrases(sentence)
    if not phrases or sentence[opening.end() : phrases[0][0]].strip(" ,"):
        return None
    return sentence[phrases[0][0] : phrases[0][1]]


class OfflineNoteWriter(NoteWriter):
    """Extractive, triple-shaped facts from the leaving turns' own sentences (no network). It
    takes the `context` every writer is given and writes from the turns alone: its subjects and
    objects are the turns' own words, never a name the turns do not say."""

    name = "offline"

    def __init__(self, max_facts: int | None = None) -> None:
        self._max_facts = max_facts

    @property
    def max_facts(self) -> int:
        """The most facts a note keeps: NOTE_WRITER_MAX_FACTS unless given."""
        return C.NOTE_WRITER_MAX_FACTS if self._max_facts is None else self._max_facts

    async def write(
        self,
        ask: str,
        messages: Sequence[LeavingMessage],
        *,
        context: NoteContext = NO_CONTEXT,
        deadline: float | None = None,
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
                if sentence.endswith("?"):
                    continue  # a question asks; it tells no fact
                entities = _entities(sentence, words)
                if not entities and not _FIRST_PERSON.search(sentence):
                    continue  # names nothing, and says nothing of the speaker
                subject = _subject(sentence, entities, who, named, words.names)
                obj = _object(subject, entities, sentence) if subject else None
                if subject is None or obj is None:
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
