"""The LLM judge's prompts: one per judgment of the spec, as text, with the JSON schema of each
answer (MECHANISM: "Episodes", "Encoding and traces", "The note ask and sealing", "Recall").

Every item a prompt asks about carries a small integer id (1, 2, ...) that the answer must echo;
the judge checks that an answer names exactly the ids it was given. Schemas are strict-mode ready
(every field required, `additionalProperties` false, no numeric bounds: the strict subset of
several servers rejects `minimum`/`maximum`), so one schema serves as a `json_schema` response
format and as a forced tool's parameters. Ranges are asked for in the words and checked on parsing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import _constants as C
from .base import FactText, UnitText

__all__ = [
    "clip",
    "fact_line",
    "walk_line",
    "pieces",
    "one_line",
    "unit_line",
    "Prompt",
    "BOUNDARIES",
    "ABOUT",
    "RELATE",
    "SAME_ENTITY",
    "LEVELS",
    "DISTILL",
    "PROMPTS",
    "TOOL_DESCRIPTION",
    "RETRY_NOTE",
]


@dataclass(frozen=True, slots=True)
class Prompt:
    """One judgment's prompt: the system text, the user text template (`str.format` fields named
    below), and the answer's JSON schema (its one array property is `key`)."""

    name: str  # the judgment, as in "judge:<name>" usage records and the schema's name
    system: str
    user: str
    key: str
    item: dict[str, Any]  # the schema of one answer item

    @property
    def schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {self.key: {"type": "array", "items": self.item}},
            "required": [self.key],
            "additionalProperties": False,
        }


def _item(**properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


_ID = {"type": "integer"}
#: A pair of integers, `[id, level]`, or a triple of numbers, `[id, first, last]` or `[fact,
#: episode, score]`: strict schemas have no tuples, so the length, the ids' being whole and the
#: ranges are asked for in the words and checked on parsing (the array-like structs of
#: `answers`).
_PAIR = {"type": "array", "items": {"type": "integer"}}
_TRIPLE = {"type": "array", "items": {"type": "number"}}

_JSON_ONLY = "Answer with the JSON object only."

#: Fields: {before}, {units}, {after} (lines "[id] role: text"; context lines have no id). The
#: answer lists the units that open or close a concept only: most units do neither, and a score
#: pair each was most of what the judge wrote (issue 29).
BOUNDARIES = Prompt(
    name="boundaries",
    system=(
        "You segment a conversation into concepts: stretches about one subject or task. You "
        "read numbered units in order (a unit is a user message, or an assistant step with its "
        "tool calls and outputs), with unnumbered context around them. List each numbered unit "
        "that opens or closes a concept as [id, first, last], two scores from 0 to 1 (as "
        "[3, 0.9, 0.1]). first: how strongly the "
        "unit opens a new concept (a new subject, task or question, not a follow-up of the one "
        "before). last: how strongly it closes its concept (it wraps up, or the next unit moves "
        "on). Leave out every other unit: a unit not listed neither opens nor closes a concept, "
        "and an empty list means the units are all one concept. List a unit at most once, with "
        "only the ids given. " + _JSON_ONLY
    ),
    user="Context before:\n{before}\n\nUnits to score:\n{units}\n\nContext after:\n{after}",
    key="units",
    item=_TRIPLE,
)

#: Fields: {episodes} (blocks "[id]\ntext"), {facts} (lines "[id] fact"). The answer lists the
#: yeses only: a pair it leaves out is a no (with no score), so it grows with the yeses, not with
#: facts x episodes. An episode longer than a call's room comes as pieces, each with its own id.
#: The episodes come first: they are most of the prompt and the same from one note to the next
#: (every episode still remembered, oldest first), so a provider's prompt cache, which serves a
#: prompt's longest prefix it has seen, serves them; the new facts, which differ, come last.
#: An episode out of view comes as the facts that stand for it (`base.remembered_text`).
ABOUT = Prompt(
    name="about",
    system=(
        "You link facts to the stretches of conversation (episodes) they are about. List each "
        "pair of a numbered fact and a numbered episode where the fact is about the episode "
        "(the episode states it, leads to it, or discusses what it describes) as [fact id, "
        "episode id, score], the score from 0 (barely) to 1 (the episode is where the fact "
        "comes from), as [2, 5, 0.8]. Leave out every "
        "other pair: a pair not listed means the fact is not about that episode, and an empty "
        "list means no fact is about any episode. An episode may be one piece of a longer "
        "one: judge what it shows. An episode out of view is given as the facts remembered of "
        "it: judge it by them. List a pair at most once, with only the ids given. " + _JSON_ONLY
    ),
    user="Episodes:\n{episodes}\n\nFacts:\n{facts}",
    key="about",
    item=_TRIPLE,
)

#: Fields: {facts} (lines "Fk: fact [subject; object]", each fact once), {pairs} (lines
#: "[id] new Fk, held Fm"): a new fact is weighed against several held ones, and each is sent once.
RELATE = Prompt(
    name="relate",
    system=(
        "You keep a knowledge base consistent. Facts are listed once each, with their subject "
        "and object; each numbered pair names a new fact and a fact already held. Answer "
        'relation: "same" when the new fact restates the held one (same meaning, other words '
        'allowed); "contradicts" when the new fact makes the held one no longer true (a '
        "changed value, owner, date, status or decision). List only those pairs, each at most "
        "once: a pair not listed is unrelated (facts that only share an entity or can both be "
        "true), and an empty list means every pair is. " + _JSON_ONLY
    ),
    user="Facts:\n{facts}\n\nPairs:\n{pairs}",
    key="pairs",
    item=_item(id=_ID, relation={"type": "string", "enum": ["same", "contradicts"]}),
)

#: Fields: {pairs} (lines "[id] \"name\" | \"name\"").
SAME_ENTITY = Prompt(
    name="same_entity",
    system=(
        "You resolve entity names from one conversation. List the id (a bare number) of each "
        "numbered pair of names that name the same thing (person, object, project, place, date "
        "or value). "
        "Leave out the pairs that name different things, or where one is only a part, version "
        'or kind of the other ("pricing page" and "pricing page copy v3" are not the same): '
        "a pair not listed is two things, and an empty list means every pair is. " + _JSON_ONLY
    ),
    user="Pairs:\n{pairs}",
    key="pairs",
    item=_ID,
)

#: Fields: {dialogue}, {facts} (lines "[id] fact", then " [subject; object]" when the fact's
#: sentence does not name both: `walk_line`).
LEVELS = Prompt(
    name="levels",
    system=(
        "You choose which remembered facts bear on a conversation now. A fact's level is how "
        "it bears on the recent dialogue, above all its newest message (0: unrelated). "
        "1: related (same topic, not needed). 2: relevant (helps to answer or to continue). "
        "3: central (it is the answer, or needed to act). List only the facts at level 1 or "
        "above, each at most once, as a pair [id, level] (as [4, 2]): a fact not listed is "
        "unrelated, and an empty list means every fact is. " + _JSON_ONLY
    ),
    user="Recent dialogue (newest last):\n{dialogue}\n\nFacts:\n{facts}",
    key="facts",
    item=_PAIR,
)

#: Fields: {conversation}, {items} (lines "[id] text").
DISTILL = Prompt(
    name="distill",
    system=(
        "Before an assistant answered a message, remembered items (facts and conversation "
        "excerpts) were recalled for it. Given the exchange (the message and the reply), list "
        "the id (a bare number) of each numbered item that stays on record with the exchange: "
        "it was relevant "
        "to the exchange and neither the message nor the reply already says it. Leave out the "
        "irrelevant and the already said: an item not listed is dropped, and an empty list "
        "drops every item. " + _JSON_ONLY
    ),
    user="Exchange:\n{conversation}\n\nRecalled items:\n{items}",
    key="facts",
    item=_ID,
)

#: The prompts by judgment name.
PROMPTS = {p.name: p for p in (BOUNDARIES, ABOUT, RELATE, SAME_ENTITY, LEVELS, DISTILL)}

#: What a judgment's forced tool is described as (tool mode).
TOOL_DESCRIPTION = "Give the answer to the judgment asked for, as its arguments."
#: A retry's reminder, put after the user text (the first answer was unreadable or incomplete).
RETRY_NOTE = "\n\nUse only the ids listed above, each at most once, in the JSON shape asked for."


#: Where a long text is cut.
ELISION = "\n[…]\n"


def clip(text: str, limit: int) -> str:
    """`text` within `limit` characters: its head and tail around an elision mark."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(ELISION))
    return text[: keep - keep // 3] + ELISION + text[len(text) - keep // 3 :]


def pieces(text: str, room: int) -> list[str]:
    """`text` in pieces of at most `room` characters, none dropped: cut at paragraph breaks
    (an episode's messages), else at a line break or a space, else anywhere. Pieces are stripped
    of the blank space they were cut at; a text within `room` is one piece, itself."""
    if len(text) <= room:
        return [text]
    out: list[str] = []
    rest = text
    while len(rest) > room:
        head = rest[: room + 1]
        # The last break of the strongest kind that still leaves the piece a quarter full.
        cut = next((at for sep in ("\n\n", "\n", " ") if (at := head.rfind(sep)) > room // 4), room)
        piece, rest = rest[:cut].strip(), rest[cut:].strip()
        if piece:
            out.append(piece)
    if rest:
        out.append(rest)
    return out


def one_line(text: str, limit: int = C.LLM_JUDGE_ITEM_CHARS) -> str:
    return clip(" ".join(text.split()), limit)


def unit_line(unit: UnitText, i: int | None) -> str:
    head = f"[{i}] " if i is not None else "- "
    return f"{head}{unit.role}: {one_line(unit.text, C.LLM_JUDGE_UNIT_CHARS)}"


def fact_line(fact: FactText) -> str:
    """A fact as a prompt shows it: its sentence, then its two entities in brackets."""
    entities = (
        f" [{one_line(fact.subject)}; {one_line(fact.object)}]"
        if fact.subject or fact.object
        else ""
    )
    return f"{one_line(fact.text)}{entities}"


def walk_line(fact: FactText) -> str:
    """A fact as the walk's prompt shows it: `fact_line`, its entities left out when its
    sentence names both (a call sends no text twice: 17-24% of what the walk's facts read in
    the cost bench were names the sentence had just said)."""
    text = one_line(fact.text)
    said = text.casefold()
    if all(one_line(name).casefold() in said for name in (fact.subject, fact.object)):
        return text
    return fact_line(fact)
