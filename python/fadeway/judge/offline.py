"""The offline judge: deterministic heuristics, no network, no key. The embedded default.

Boundaries come from lexical and embedding cohesion between the units before and after each gap
(TextTiling-like; see `fadeway.judge.cohesion`), computed over the units with their context. Whether
a fact is about an episode is the cosine of their hashing embeddings against a threshold.
Fact relations and entity confirmations come from shared entities, words, numbers and negations.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from .. import _constants as C
from .._core import hash_embed, tokenize
from . import cohesion
from .base import Answer, Boundaries, FactText, Judge, Relation, UnitText

__all__ = [
    "OfflineJudge",
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
        # An episode holds several messages ("\n\n" between them); a fact is about the
        # episode as much as it is about its closest message, so one topic of many still counts.
        chunks, owner = [], []
        for i, text in enumerate(episodes):
            for chunk in text.split("\n\n") or [""]:
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


#: Words that turn a statement around ("isn't" tokenizes to "isn" and "t").
_NEGATIONS = frozenset(
    {"not", "no", "never", "none", "nobody", "nothing", "cannot", "without", "neither", "nor", "t"}
)


def _numbers(tokens: Sequence[str]) -> frozenset[str]:
    return frozenset(t for t in tokens if any(c.isdigit() for c in t))


def _negated(text: str) -> bool:
    return sum(t in _NEGATIONS for t in tokenize(text, stopwords=False, stem=False)) % 2 == 1


def _name_key(name: str) -> str:
    return " ".join(tokenize(name, stopwords=False, stem=True))


def relate_offline(new: FactText, held: FactText) -> Relation:
    """Same, contradicts or unrelated, from the shared entities, hashing similarity, and the
    numbers and negations that differ. Only facts about a shared subject (or between the same
    two entities) can relate; a different subject with the same object is left unrelated
    (it may be a replaced owner, or two people who both did something: that needs a model)."""
    pair = {_name_key(new.subject), _name_key(new.object)}
    same_pair = pair == {_name_key(held.subject), _name_key(held.object)}
    if not same_pair and _name_key(new.subject) != _name_key(held.subject):
        return "unrelated"
    a, b = tokenize(new.text), tokenize(held.text)
    negation_differs = _negated(new.text) != _negated(held.text)
    if a == b and not negation_differs:
        return "same"
    vectors = hash_embed([new.text, held.text], C.RELATE_EMBED_DIM)
    cos = float(vectors[0] @ vectors[1])
    numbers_a, numbers_b = _numbers(a), _numbers(b)
    if cos >= C.RELATE_CONTRADICT_THRESHOLD and (
        negation_differs or (numbers_a and numbers_b and numbers_a != numbers_b)
    ):
        return "contradicts"
    if same_pair and cos >= C.RELATE_SAME_THRESHOLD and numbers_a == numbers_b:
        return "same"
    return "unrelated"


def same_entity_offline(a: str, b: str) -> bool:
    """Two names are one entity when they hold the same words (stopwords dropped, plurals
    stemmed, any order): "copy v3 of the pricing page" is "pricing page copy v3". A name
    contained in another ("pricing page" in "pricing page copy v3") is not confirmed."""
    ta, tb = set(tokenize(a)), set(tokenize(b))
    return bool(ta) and ta == tb


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
    cosine is the better of its cosine with that line and with the last LEVEL_DIALOGUE_CHARS.
    (The window alone let the lines before a new question outvote it: on the LoCoMo tuning
    split, facts about the question ranked below facts about the talk before it.)"""
    if not facts:
        return []
    recent = dialogue[-C.LEVEL_DIALOGUE_CHARS :]
    newest = recent.rstrip().rsplit("\n", 1)[-1]
    vectors = _fact_vectors(facts)
    cos = np.clip(
        np.maximum(vectors @ _text_vector(recent), vectors @ _text_vector(newest)), 0.0, 1.0
    )
    return [sum(bool(c >= t) for t in C.LEVEL_THRESHOLDS) for c in cos.tolist()]


def distill_offline(facts: Sequence[FactText], conversation: str) -> list[bool]:
    """Keep a fact the conversation bears on (cosine at DISTILL_RELEVANT or above) unless it
    already says it (DISTILL_SAID of the fact's words appear in it)."""
    if not facts:
        return []
    cos = _similarities(facts, conversation)
    said = set(tokenize(conversation))
    keep = []
    for fact, c in zip(facts, cos.tolist(), strict=True):
        words = set(tokenize(fact.text))
        covered = len(words & said) / len(words) if words else 1.0
        keep.append(bool(c >= C.DISTILL_RELEVANT and covered < C.DISTILL_SAID))
    return keep
