"""The offline judge: deterministic heuristics, no network, no key. The embedded default.

Boundaries come from lexical and embedding cohesion between the units before and after each gap
(TextTiling-like; see `fadeway.judge.cohesion`), computed over the units with their context. Whether
a fact is about an episode is the cosine of their hashing embeddings against a threshold.
Fact relations come from what a contradiction is (a denied word, another value for the same
slot, a value taken back; see "Relating two facts") and entity confirmations from how names are
made (`same_entity_offline`). Both are measured against hand labels by
`benches/offline_judgments.py`, with the history of what was tried in
`benches/RESULTS-offline-judgments.md`.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import _constants as C
from .._core import hash_embed, tokenize
from . import cohesion
from .base import REMEMBERED, Answer, Boundaries, FactText, Judge, Relation, UnitText

__all__ = [
    "OfflineJudge",
    "names_linked",
    "relate_offline",
    "same_entity_offline",
    "levels_offline",
    "distill_offline",
]


class OfflineJudge(Judge):
    """Judgments from similarity alone; what every user runs first."""

    name = "offline"
    ready = True

    async def boundaries(
        self,
        units: Sequence[UnitText],
        *,
        before: Sequence[UnitText] = (),
        after: Sequence[UnitText] = (),
        deadline: float | None = None,
    ) -> Boundaries:
        texts = [u.text for u in (*before, *units, *after)]
        first, last = cohesion.boundary_scores(texts)
        lo, hi = len(before), len(before) + len(units)
        return Boundaries(first[lo:hi].tolist(), last[lo:hi].tolist())

    async def about(
        self, facts: Sequence[str], episodes: Sequence[str], *, deadline: float | None = None
    ) -> list[list[Answer | None]]:
        if not facts or not episodes:
            return [[] for _ in facts]
        # An episode holds several messages ("\n\n" between them), or, out of view, several
        # facts; a fact is about the episode as much as it is about its closest message (or
        # fact), so one topic of many still counts.
        chunks, owner = [], []
        for i, text in enumerate(episodes):
            for chunk in [c for c in text.split("\n\n") if c != REMEMBERED] or [""]:
                chunks.append(chunk)
                owner.append(i)
        dim = C.ABOUT_EMBED_DIM
        cos = hash_embed(list(facts), dim) @ hash_embed(chunks, dim).T
        best = np.full((len(facts), len(episodes)), -1.0)
        np.maximum.at(best.T, np.asarray(owner), cos.T)
        best = np.clip(best, -1.0, 1.0)
        return [[Answer(bool(c >= C.ABOUT_THRESHOLD), float(c)) for c in row] for row in best]

    async def relate(
        self, pairs: Sequence[tuple[FactText, FactText]], *, deadline: float | None = None
    ) -> list[Relation | None]:
        return [relate_offline(new, held) for new, held in pairs]

    async def same_entity(
        self, pairs: Sequence[tuple[str, str]], *, deadline: float | None = None
    ) -> list[bool | None]:
        return [same_entity_offline(a, b) for a, b in pairs]

    async def levels(
        self, facts: Sequence[FactText], dialogue: str, *, deadline: float | None = None
    ) -> list[int | None]:
        return list(levels_offline(facts, dialogue))

    async def distill(
        self, facts: Sequence[FactText], conversation: str, *, deadline: float | None = None
    ) -> list[bool | None]:
        return list(distill_offline(facts, conversation))


def _name_key(name: str) -> str:
    return " ".join(tokenize(name, stopwords=False, stem=True))


def relate_offline(new: FactText, held: FactText) -> Relation:
    """Same, contradicts or unrelated (see "Relating two facts" below). Only facts about a shared
    subject (or between the same two entities) can relate; a different subject with the same
    object is left unrelated (it may be a replaced owner, or two people who both did
    something: that needs a model)."""
    pair = {_name_key(new.subject), _name_key(new.object)}
    same_pair = pair == {_name_key(held.subject), _name_key(held.object)}
    if not same_pair and _name_key(new.subject) != _name_key(held.subject):
        return "unrelated"
    return _relate_texts(new.text, held.text, same_pair=same_pair)


def same_entity_offline(a: str, b: str) -> bool:
    """Whether two names name one entity, from how names are made (no model):

    - the same words, in any order, stopwords, a leading determiner and a possessive dropped,
      plurals stemmed: "copy v3 of the pricing page" is "pricing page copy v3", "Biscuit's" is
      "Biscuit", "my dance studio" is "dance studio";
    - the same letters once spaces and marks go: "spiderman" is "Spider-Man", "checkout_v2"
      is "checkout v2";
    - a proper name and its first or last words: "Dana" is "Dana Whitfield", "Wolves" is
      "Minnesota Wolves" (every word capitalised: "Harry Potter" is not "Harry Potter
      conference");
    - an acronym and the initials of a name of several words: "NYC" is "New York City";
    - a description of two words or more and the same words ending a longer one: "climbing
      club" is "Lisbon climbing club" (but not "pricing page" and "pricing page copy v3", where
      the shorter name is the longer one's start).

    Left out (benches/RESULTS-offline-judgments.md): a single word as the head of a longer name
    ("shelter" and "homeless shelter") would confirm other places that share a head ("dog
    shelter"); a nickname as a prefix ("Jo", "Joanna") would confirm "Chris" and "Christmas".
    """
    wa, wb = _name_words(a), _name_words(b)
    if not wa or not wb:
        return False
    if _content(wa) == _content(wb) or "".join(wa) == "".join(wb):
        return True
    short, long = sorted((a, b), key=lambda n: (len(_name_words(n)), len(n)))
    return (
        _name_part(short, long)
        or _acronym(short, long)
        or _head_of(_name_words(short), _name_words(long), short)
    )


def names_linked(a: str, b: str) -> bool:
    """Whether two names are linked by their letters alone, so that any judge should be asked
    about them: they share a word (plurals stemmed, stopwords dropped), spell the same letters
    ("spiderman", "Spider-Man"), or one is the other's acronym ("NYC", "New York City")."""
    ta, tb = set(tokenize(a)) - {"s"}, set(tokenize(b)) - {"s"}
    if ta & tb:
        return True
    wa, wb = _name_words(a), _name_words(b)
    if wa and "".join(wa) == "".join(wb):
        return True
    short, long = sorted((a, b), key=len)
    return _acronym(short, long)


_DETERMINER_WORDS = frozenset("the a an my your our their his her its this that".split())


def _name_words(name: str) -> list[str]:
    """A name's words as compared: lower case, plurals stemmed, a possessive's "s" and leading
    determiners dropped."""
    words = [w for w in tokenize(name, stopwords=False, stem=True) if w != "s"]
    while words and words[0] in _DETERMINER_WORDS:
        words = words[1:]
    return words


def _content(words: Sequence[str]) -> frozenset[str]:
    """A name's words without stopwords ("of", "the"), in any order."""
    return frozenset(w for w in words if tokenize(w)) or frozenset(words)


def _proper(name: str) -> list[str] | None:
    """The words of a proper name ("Dana Whitfield", "Harbor & Vale Studio", "priya.raman"),
    or None: every word capitalised (or a handle's parts), "&" allowed."""
    if re.fullmatch(r"[a-z]+[._][a-z]+", name):
        return re.split(r"[._]", name)
    words = [w for w in name.split() if w != "&"]
    if words and words[0].lower() in ("the", "a", "an"):
        words = words[1:]
    if not words or not all(w[:1].isupper() for w in words):
        return None
    return [_POSSESSIVE_END.sub("", w).lower() for w in words]


_POSSESSIVE_END = re.compile(r"['\u2019]s$")


def _name_part(short: str, long: str) -> bool:
    """A proper name and its first or last words ("Dana" / "Dana Whitfield")."""
    ps, pl = _proper(short), _proper(long)
    if ps is None or pl is None or len(ps) >= len(pl) or len(pl) > 4:
        return False
    return pl[: len(ps)] == ps or pl[-len(ps) :] == ps


def _acronym(short: str, long: str) -> bool:
    """An acronym ("NYC", "GoT", "C&F") and the initials of a longer name's words, with or
    without its small words ("of", "the")."""
    letters = re.sub(r"[^A-Za-z]", "", short).lower()
    if " " in short.strip() or not 2 <= len(letters) <= 6 or short.islower():
        return False
    words = [w for w in re.split(r"[\s:&+/-]+", long) if w]
    if len(words) < 2:
        return False
    initials = "".join(w[0] for w in words).lower()
    content = "".join(w[0] for w in words if w.lower() not in _SMALL_WORDS).lower()
    return letters in (initials, content)


_SMALL_WORDS = frozenset("of the and a an for in on at to".split())


def _head_of(short: list[str], long: list[str], text: str) -> bool:
    """A description of two words or more that ends a longer name, whose last words it is
    ("climbing club" / "Lisbon climbing club"); a proper name has its own rule, and a name
    with a preposition ends with what it is said of ("copy v3 of the pricing page" is a copy,
    not the pricing page)."""
    return (
        len(short) >= 2
        and long[-len(short) :] == short
        and not _SMALL_WORDS & set(long)
        and _proper(text) is None
    )


def _fact_vectors(facts: Sequence[FactText]) -> np.ndarray:
    return hash_embed([f"{f.text} {f.subject} {f.object}" for f in facts], C.RELATE_EMBED_DIM)


@functools.lru_cache(maxsize=64)
def _text_vector(text: str) -> np.ndarray:
    """A dialogue's vector, kept: a walk asks about the same dialogue at every step."""
    return hash_embed([text], C.RELATE_EMBED_DIM)[0]


def _similarities(facts: Sequence[FactText], text: str) -> np.ndarray:
    """Hashing cosine of each fact (sentence and entities) with `text`."""
    return np.clip(_fact_vectors(facts) @ _text_vector(text), 0.0, 1.0)


def levels_offline(facts: Sequence[FactText], dialogue: str) -> list[int]:
    """Levels from the hashing cosine of each fact with the dialogue's last lines, against the
    LEVEL_THRESHOLDS. The newest message (the dialogue's last line) weighs most: a fact's
    cosine is the better of its cosine with that line and LEVEL_RECENT_WEIGHT of its cosine
    with the last LEVEL_DIALOGUE_CHARS. The name of an entity most of the facts judged
    together are about (in a conversation of two people, every fact is about one of them)
    makes no fact relevant: a fact is about the newest message only when it shares another of
    its content words, and the earlier dialogue is compared without such names.

    (The window at full weight let the lines before a new question outvote it, and a shared
    name alone made every fact about its person relevant: on the LoCoMo tuning split, facts
    about the talk before a question, or about someone it named, filled the block.)"""
    if not facts:
        return []
    recent = dialogue[-C.LEVEL_DIALOGUE_CHARS :]
    newest = recent.rstrip().rsplit("\n", 1)[-1]
    texts = [f"{f.text} {f.subject} {f.object}" for f in facts]
    common = _common_names(facts)
    about_newest = hash_embed(texts, C.RELATE_EMBED_DIM) @ _text_vector(newest)
    if distinctive := _content_words(newest) - _content_words(" ".join(common)):
        shares = [bool(distinctive & _content_words(t)) for t in texts]
        about_newest = np.where(shares, about_newest, 0.0)
    plain = hash_embed([_without(t, common) for t in texts], C.RELATE_EMBED_DIM)
    about_recent = plain @ _text_vector(_without(recent, common))
    cos = np.clip(np.maximum(about_newest, C.LEVEL_RECENT_WEIGHT * about_recent), 0.0, 1.0)
    return [sum(bool(c >= t) for t in C.LEVEL_THRESHOLDS) for c in cos.tolist()]


def _without(text: str, words: frozenset[str]) -> str:
    return " ".join(w for w in tokenize(text) if w not in words)


def _common_names(facts: Sequence[FactText]) -> frozenset[str]:
    """Words of the entities that more than LEVEL_COMMON_SHARE of `facts` are about (`_common`)."""
    return _common([frozenset(tokenize(f"{f.subject} {f.object}")) for f in facts])


def distill_offline(facts: Sequence[FactText], conversation: str) -> list[bool]:
    """Keep a fact the turn drew on: the conversation bears on it (cosine at DISTILL_RELEVANT
    or above), what followed the message (the conversation's lines after its first) carries
    what the fact adds to the message (half of its content words the message lacks, two at
    most, leaving out words most of the facts share), and the conversation does not already
    say it (DISTILL_SAID of its words appear in it).

    (A fact recalled for the message shares its words by construction, so the conversation
    alone bore on nearly every one: on the LoCoMo tuning conversations distill kept 96% of what
    recall showed, and the blocks of earlier turns took most of a request.)"""
    if not facts:
        return []
    cos = _similarities(facts, conversation)
    said = set(tokenize(conversation))
    drawn_on = may_have_drawn_on([f.text for f in facts], conversation)
    keep = []
    for fact, c, drawn in zip(facts, cos.tolist(), drawn_on, strict=True):
        tokens = set(tokenize(fact.text))
        covered = len(tokens & said) / len(tokens) if tokens else 1.0
        keep.append(bool(c >= C.DISTILL_RELEVANT and drawn and covered < C.DISTILL_SAID))
    return keep


def may_have_drawn_on(texts: Sequence[str], conversation: str) -> list[bool]:
    """Whether what followed the message (the conversation's lines after its first) carries
    what each text adds to the message: half of its content words the message lacks, two at
    most, leaving out words most of the texts share, speakers' names and words of thanks. A
    turn that drew on an item says something of its own of it. `distill_offline` keeps only
    such items; the LLM judge asks about no other (`LLMJudge.distill`: one shared word asked
    about 60% of an agent's block, tool outputs sharing a word with most items)."""
    message, _, after = conversation.partition("\n")
    asked, followed = _content_words(message), _content_words(after)
    words = [_content_words(t) for t in texts]
    idle = asked | _common(words) | _speakers([*conversation.splitlines(), *texts]) | _PHATIC
    return [len((adds := w - idle) & followed) >= min(2, (len(adds) + 1) // 2) > 0 for w in words]


def _common(words: Sequence[frozenset[str]]) -> frozenset[str]:
    """Words in more than LEVEL_COMMON_SHARE of `words` (sets), when there are
    LEVEL_COMMON_MIN or more of them."""
    if len(words) < C.LEVEL_COMMON_MIN:
        return frozenset()
    counts = Counter(w for ws in words for w in ws)
    return frozenset(w for w, c in counts.items() if c > C.LEVEL_COMMON_SHARE * len(words))


# -- Relating two facts ------------------------------------------------------------------------
#
# A newer fact *contradicts* a held one when both cannot be true now, and it says so in a way
# words show: it denies what the held one affirms (or the reverse), or it gives another value
# for the same slot (a date, an amount, a count of the same thing), or it corrects a value the
# held one gives ("$25, not $24"; "was $6.1k"). Everything else about a shared subject is
# *unrelated* unless it restates the held fact (*same*). A wrong retirement hides a true fact
# from the model, so each rule errs towards unrelated.
#
# Tried and lost, on the labelled tuning sets (benches/RESULTS-offline-judgments.md):
# - any difference in the parity of negation words (the old rule): "I won't give up - your notes
#   keep me going" against "Your notes really keep me going" retired a restatement. A negation
#   now counts only through the word it negates, found affirmed in the other fact; and only
#   when the two facts otherwise say the same (a denied word found anywhere in the other, or in
#   its clause, retired dozens of unrelated facts over the LoCoMo tuning conversations).
# - any differing number (the old rule): "discussed at turn 13" against "... turn 16", a second
#   tournament against a first, two events on two dates. Numbers are compared only as values of
#   one kind (a date with a date, a count of a noun with a count of that noun), a number after a
#   reference word ("turn", "step", "#") is a label, and past events are occurrences.

_NEGATORS = frozenset("not no never nothing nobody none neither nor without cannot hardly".split())
# Words passed over on the way from a negation to the word it negates.
_LIGHT = frozenset(
    """
    a an the my your our their his her its this that these those any much many more enough some
    i me you he she it we they him us them anyone anything someone something one
    be been being am is are was were have has had do does did will would can could should may
    might must shall get got gets getting gonna going go to able let let's longer anymore
    really actually even ever quite yet just also too very so that's there
    on in at for of with about from by into up out over
    """.split()
)
_FUNCTION = (
    _LIGHT
    | _NEGATORS
    | frozenset(
        """
    and or but if when while because as than then since until after before though although
    what which who whom whose where why how all each every both either other such own same
    here now still again once only well back down off away around instead per vs versus
    """.split()
    )
)
# A generic statement ("every time I'm at practice") is not contradicted by one occasion.
_HABITUAL = frozenset("every always whenever usually often sometimes each".split())
# Words that say a value changed ("is now due", "moved to", "no longer").
_UPDATE = re.compile(
    r"\b(?:now|moved|changed|instead|no longer|anymore|rescheduled|postponed|pushed|"
    r"delayed|corrected|updated|revised|slipped|becomes|became|replaced|replacing)\b",
    re.IGNORECASE,
)
# Words before a value that the newer fact takes back ("not $24", "was ~$6.1k").
_TAKEN_BACK = re.compile(
    r"\b(?:not|no longer|instead of|rather than|was|were|from|previously|formerly)\s+"
    r"(?:about\s+|around\s+|the\s+)?~?$",
    re.IGNORECASE,
)
_WORD_OR_MARK = re.compile(r"[a-z]+(?:'[a-z]+)?|[^\sa-z]")


def _stem(word: str) -> str:
    """A crude stem for matching one word across two facts: "volunteering", "volunteered" and
    "volunteers" are "volunteer"."""
    word = word.lower().removesuffix("'s")
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    return word.removesuffix("e")


def _is_negation(token: str) -> bool:
    return token in _NEGATORS or token.endswith("n't")


def _negated_words(text: str) -> frozenset[str]:
    """The word each negation negates: the first word after it that is not a light word,
    within its clause ("I haven't been able to swim" -> "swim"). A word the same
    fact also affirms ("Jonas hire, Keiko no hire") is no denial of it."""
    tokens = _WORD_OR_MARK.findall(text.lower().replace("\u2019", "'"))
    negated, affirmed = set(), set()
    for i, token in enumerate(tokens):
        if not _is_negation(token):
            continue
        for j in range(i + 1, min(i + 6, len(tokens))):
            if not tokens[j][0].isalpha():
                break  # the clause ends
            if tokens[j] not in _LIGHT and not _is_negation(tokens[j]):
                negated.add(j)
                break
    for j, token in enumerate(tokens):
        if token[0].isalpha() and j not in negated:
            affirmed.add(_stem(token))
    return frozenset(_stem(tokens[j]) for j in negated) - affirmed


@functools.lru_cache(maxsize=8192)  # a walk judges the same facts step after step
def _content_words(text: str) -> frozenset[str]:
    tokens = _WORD_OR_MARK.findall(text.lower().replace("\u2019", "'"))
    return frozenset(
        _stem(t) for t in tokens if t[0].isalpha() and t not in _FUNCTION and not _is_negation(t)
    )


def _reversed(a: str, b: str) -> bool:
    """Whether one fact denies a word the other affirms, the two saying otherwise the same
    (RELATE_NEGATION_OVERLAP of their words shared: "is no longer blocked on the tax table"
    against "is blocked on the tax table"), neither of every occasion ("every time I'm at
    practice" is not denied by "I miss not being at practice")."""
    words = set(_WORD_OR_MARK.findall(a.lower())) | set(_WORD_OR_MARK.findall(b.lower()))
    if words & _HABITUAL:
        return False
    neg_a, neg_b = _negated_words(a), _negated_words(b)
    words_a, words_b = _content_words(a), _content_words(b)
    if not ((neg_a - neg_b) & (words_b - neg_b) or (neg_b - neg_a) & (words_a - neg_a)):
        return False
    return len(words_a & words_b) >= C.RELATE_NEGATION_OVERLAP * len(words_a | words_b)


@dataclass(frozen=True, slots=True)
class _Value:
    """A value a fact gives: its kind (date, timestamp, time, amount, percent, count, number,
    label), its
    unit (a currency, the noun counted, the reference word of a label) and its amount."""

    kind: str
    unit: str
    amount: float
    start: int
    end: int


_MONTH_NUMBER = {
    name: i
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH_WORD = "(?:" + "|".join(sorted(_MONTH_NUMBER, key=len, reverse=True)) + ")"
_NUMBER_WORD = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
    )
}
# Words after which a number names a thing rather than measures one: "turn 13", "step 2".
_REFERENCE = (
    "turn|step|item|line|page|section|chapter|part|version|issue|ticket|session|episode|"
    "message|round|room|gate|level|slide|row|table|figure|no\\.|number|#"
)
_VALUE = re.compile(
    r"(?P<iso>\b(?P<iy>\d{4})-(?P<im>\d\d)-(?P<id>\d\d)(?:T[\d:.]+(?:Z|[+-]\d\d:?\d\d)?)?)"
    rf"|(?P<dm>\b(?P<dd>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<dmm>{_MONTH_WORD})\b\.?(?:,?\s+(?P<dy>\d{{4}}))?)"
    rf"|(?P<md>\b(?P<mdm>{_MONTH_WORD})\.?\s+(?P<mdd>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?P<mdy>\d{{4}}))?)"
    r"|(?P<amount>(?P<cur>[$£€¥])\s?~?(?P<an>\d+(?:,\d{3})*(?:\.\d+)?)\s?(?P<mag>[kKmM]|bn)?\b)"
    r"|(?P<pct>\b(?P<pn>\d+(?:\.\d+)?)\s?%)"
    r"|(?P<time>\b(?P<th>\d{1,2}):(?P<tm>\d\d)\b)"
    rf"|(?P<label>(?:\b|(?<=\s))(?P<ref>{_REFERENCE})\s?#?(?P<ln>\d+)\b)"
    r"|(?P<count>(?<![\w.$£€¥-])(?P<cn>\d+(?:,\d{3})*(?:\.\d+)?|"
    + "|".join(_NUMBER_WORD)
    + r")\s+(?P<noun>[a-z][a-z-]{2,}))"
    r"|(?P<num>(?<![\w.$£€¥-])\d+(?:,\d{3})*(?:\.\d+)?(?![\w%]|\.\d))",
    re.IGNORECASE,
)
_MAGNITUDE = {"k": 1e3, "m": 1e6, "bn": 1e9}


def _number(text: str) -> float:
    text = text.lower()
    return float(_NUMBER_WORD[text]) if text in _NUMBER_WORD else float(text.replace(",", ""))


def _values(text: str) -> list[_Value]:
    """The values a fact gives, in order (identifiers such as "ENG-2271" give none)."""
    out = []
    for m in _VALUE.finditer(text):
        g, span = m.groupdict(), (m.start(), m.end())
        if g["iso"]:
            kind = "timestamp" if "T" in g["iso"] else "date"
            day = int(g["iy"]) * 10_000 + int(g["im"]) * 100 + int(g["id"])
            value = _Value(kind, "", day, *span)
        elif g["dm"] or g["md"]:
            month = _MONTH_NUMBER[(g["dmm"] or g["mdm"]).lower()]
            year = int(g["dy"] or g["mdy"] or 0)
            value = _Value(
                "date", "", year * 10_000 + month * 100 + int(g["dd"] or g["mdd"]), *span
            )
        elif g["amount"]:
            scale = _MAGNITUDE.get((g["mag"] or "").lower(), 1.0)
            value = _Value("amount", g["cur"], _number(g["an"]) * scale, *span)
        elif g["pct"]:
            value = _Value("percent", "", float(g["pn"]), *span)
        elif g["time"]:
            value = _Value("time", "", int(g["th"]) * 60 + int(g["tm"]), *span)
        elif g["label"]:
            value = _Value("label", g["ref"].lower(), float(g["ln"]), *span)
        elif g["count"]:
            noun = g["noun"].lower()
            if noun in _FUNCTION:  # "2 of them", "3 and": a number, not a count of a noun
                value = _Value("number", "", _number(g["cn"]), m.start(), m.start("noun"))
            else:
                value = _Value("count", _stem(noun), _number(g["cn"]), *span)
        else:
            value = _Value("number", "", _number(g["num"]), *span)
        out.append(value)
    return out


def _close(v: _Value, w: _Value) -> bool:
    """The same value: an amount or a share within 1% ("$36.6k" and "$36,612", rounded the
    way people round), a date on the same day of the same year when both give one (year *
    10,000 + month * 100 + day, the year 0 when not given), anything else exactly."""
    if v.kind in ("amount", "percent"):
        return abs(v.amount - w.amount) <= 0.01 * max(abs(v.amount), abs(w.amount))
    if v.kind in ("date", "timestamp") and min(v.amount, w.amount) < 10_000:
        return v.amount % 10_000 == w.amount % 10_000
    return v.amount == w.amount


def _matches(v: _Value, w: _Value) -> bool:
    return v.kind == w.kind and v.unit == w.unit and _close(v, w)


def _same_values(a: Sequence[_Value], b: Sequence[_Value]) -> bool:
    return all(any(_matches(v, w) for w in b) for v in a) and all(
        any(_matches(w, v) for v in a) for w in b
    )


def _values_differ(a: Sequence[_Value], b: Sequence[_Value]) -> bool:
    """Whether each fact gives a value of one kind the other lacks: a date for a date, an
    amount for an amount in the same currency, a count of the same noun. A label ("turn 13")
    or a timestamp names a thing or a moment, and a bare number could measure anything, so
    none of them counts. A value added beside the held ones ("$25, was $24") changes nothing
    the held fact says: one of the held fact's values must be gone too."""

    def unmatched(xs: Sequence[_Value], ys: Sequence[_Value]) -> set[tuple[str, str]]:
        return {
            (v.kind, v.unit)
            for v in xs
            if v.kind not in ("label", "number", "timestamp")
            and any(w.kind == v.kind and w.unit == v.unit for w in ys)
            and not any(_matches(v, w) for w in ys)
        }

    return bool(unmatched(a, b) & unmatched(b, a))


def _takes_back(new: str, held: str) -> bool:
    """Whether the newer fact takes back a value the held one gives, and gives another in its
    place: "Business is $25 per seat/month, not $24" against "Business at $24"."""
    new_values, held_values = _values(new), _values(held)
    for v in new_values:
        if v.kind in ("label", "number") or not _TAKEN_BACK.search(new[: v.start]):
            continue
        asserted = [w for w in held_values if not _TAKEN_BACK.search(held[: w.start])]
        if any(_matches(v, w) for w in asserted) and any(
            w.kind == v.kind and w.unit == v.unit and not _close(w, v) for w in new_values
        ):
            return True
    return False


# A past action ("went", "visited") not told as a state ("is scheduled"): what happened once.
_PAST_ACTION = re.compile(
    r"(?<!\bis )(?<!\bare )(?<!\bwas )(?<!\bwere )(?<!\bbe )(?<!\bbeen )(?<!\bhas )(?<!\bhave )"
    r"\b(?:[a-z]{3,}ed|went|did|got|took|made|saw|ran|won|lost|met|bought|came|gave|found|left|"
    r"told|said|wrote|built|spent|sold|kept|felt|heard|began|brought|sent|paid)\b",
    re.IGNORECASE,
)


# A name made of letters and digits ("ENG-2290", "m6i.large", "v4.1"); not a quantity with
# its unit ("512Mi", "10am").
_IDENTIFIER = re.compile(
    r"(?<![\w.-])(?=[\w.-]*[A-Za-z])(?=[\w.-]*\d)(?!\d+[A-Za-z]{1,3}\b)[\w.-]*\w"
)


def _identifiers(text: str) -> frozenset[str]:
    return frozenset(m.group(0).lower() for m in _IDENTIFIER.finditer(text))


def _masked(text: str, values: Sequence[_Value]) -> str:
    for v in reversed(values):
        text = text[: v.start] + " " + text[v.end :]
    return text


def _value_changed(new: str, held: str) -> bool:
    """Whether the newer fact gives another value for the same slot: the two say the same
    thing once their values are masked (more loosely when the newer says the value changed:
    "is now due"), and neither tells of something that happened once (two trips on two dates
    are two trips)."""
    new_values, held_values = _values(new), _values(held)
    if not _values_differ(new_values, held_values):
        return False
    ids_new, ids_held = _identifiers(new), _identifiers(held)
    if ids_new and ids_held and ids_new != ids_held:
        return False  # two rows, two tickets, two versions: other things, not other values
    update = _UPDATE.search(new) is not None
    if not update and (_PAST_ACTION.search(new) or _PAST_ACTION.search(held)):
        return False
    vectors = hash_embed([_masked(new, new_values), _masked(held, held_values)], C.RELATE_EMBED_DIM)
    cos = float(vectors[0] @ vectors[1])
    return cos >= (C.RELATE_UPDATE_THRESHOLD if update else C.RELATE_VALUE_THRESHOLD)


def _relate_texts(new: str, held: str, *, same_pair: bool) -> Relation:
    """Contradicts, same or unrelated, for two facts about one subject."""
    if _reversed(new, held) or _takes_back(new, held) or _value_changed(new, held):
        return "contradicts"
    if not _same_values(_values(new), _values(held)):
        return "unrelated"
    if _negated_words(new) != _negated_words(held) or _identifiers(new) != _identifiers(held):
        return "unrelated"  # not the same claim, or not about the same ticket, row or version
    if tokenize(new) == tokenize(held):
        return "same"
    # Tried: any fact about the same subject at a lower cosine (0.7: precision .88 on the LoCoMo
    # tuning labels, 0.6: .76); records of one tool that differ only in an id read as "same".
    if not same_pair:
        return "unrelated"
    vectors = hash_embed([new, held], C.RELATE_EMBED_DIM)
    return "same" if float(vectors[0] @ vectors[1]) >= C.RELATE_SAME_THRESHOLD else "unrelated"


#: Words of talk about talk (thanks, greetings, encouragement): a reply that shares only these
#: with an item drew on nothing of it.
_PHATIC = frozenset(
    _stem(w)
    for w in (
        "thanks thank appreciate support supportive awesome great amazing glad hope sure good "
        "nice cool wow yeah yes hey hi hello bye goodbye definitely really love happy proud "
        "keep going gonna wanna totally absolutely congrats congratulations luck inspiring "
        "means mean lot"
    ).split()
)
_LABEL = re.compile(r"^\s*([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}):\s")


def _speakers(lines: Sequence[str]) -> frozenset[str]:
    """The words of the names that label lines ("Gina: ..."): who speaks is no content."""
    return frozenset(
        w for line in lines if (m := _LABEL.match(line)) for w in _content_words(m.group(1))
    )
