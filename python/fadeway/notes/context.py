"""What a note writer reads beside the leaving turns (issue 29): the caller's latest
instructions, the canonical names the memory's graph holds for the entities those turns
mention, and the facts held about them, most relevant first, within NOTE_CONTEXT_TOKENS.

The live model answers the note ask with all of it in view (its instructions, the facts block);
a note writer answering in the lane sees only what this gives it, and the ask tells it to name
each entity by "the name your earlier facts already use".

- **Mentioned entities** are found by the graph's own name lookups, never by another matcher:
  a run of the turns' words whose normal form (`normalise_name`) is a name a fact has used
  names its entity; then a capitalised word of the turns that links to an entity's canonical
  name (`LinkedNames`: a shared word, an acronym) names it less surely ("Dana" for "Dana
  Whitfield"). Names come in that order, each in order of first mention.
- **Held facts** are the current facts (not merged into another, not retired) with a mentioned
  entity as subject or object: first those whose entities were named surely, then by how well
  their words match the turns (BM25), then newest first.
- **The budget** is filled in order: the instructions (cut at a word to at most
  NOTE_CONTEXT_INSTRUCTIONS_TOKENS), the names, the facts, each while the whole message fits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from .. import _constants as C
from .. import blocks, tokens
from .._core import Bm25Index, tokenize
from ..graph.held import Graph, LinkedNames, normalise_name
from ..records import FactRecord
from ..store import Transaction
from ..wire import text_of
from ..wire.canonical import plain
from .writers import NoteContext
from .writers.base import WIRE_ROLES, LeavingMessage

__all__ = [
    "caller_instructions",
    "context_tokens",
    "held_facts",
    "mentioned_entities",
    "note_context",
]

#: How surely a mention names an entity: a name the graph has recorded, or a linked word.
_NAMED, _LINKED = 2, 1

_WORD = re.compile(r"\S+\s*")
_CAPITALISED = re.compile(r"\b[A-Z][\w&'-]*")
_CUT = " …"


def note_context(tx: Transaction, messages: Sequence[LeavingMessage]) -> NoteContext:
    """The context a note writer reads beside the leaving `messages` of `tx`'s memory."""
    memory = tx.memory()
    instructions = caller_instructions(memory.instructions if memory else None)
    graph = Graph.read(tx)
    text = "\n".join(_said(m) for m in messages)
    mentioned = mentioned_entities(graph, text)
    names = [graph.entities[e].name for e in mentioned]
    facts = held_facts(graph, tx.facts(), mentioned, text)
    # Each name and fact takes a token at least: no more of them can fit.
    lines = [blocks.fact_line(f) for f in facts[: C.NOTE_CONTEXT_TOKENS]]
    return _fit(_cut(instructions), names[: C.NOTE_CONTEXT_TOKENS], lines)


def caller_instructions(stored: bytes | None) -> str:
    """The text of the caller's latest instructions as a memory keeps them (`{"instructions":
    the Responses field, "messages": the leading system/developer messages}`), in order."""
    if stored is None:
        return ""
    saved = plain(stored)
    field = saved.get("instructions")
    parts = [field] if isinstance(field, str) else [*_texts(field or [])]
    parts += _texts(saved.get("messages") or [])
    return "\n\n".join(p.strip() for p in parts if p.strip())


def _texts(values: Sequence[object]) -> list[str]:
    return ["\n".join(text_of(v)) for v in values]


def _said(message: LeavingMessage) -> str:
    """A message's text with its speaker, when the speaker is a name and not a wire role."""
    return message.text if message.role in WIRE_ROLES else f"{message.role}: {message.text}"


def mentioned_entities(graph: Graph, text: str) -> dict[int, int]:
    """The entities `text` mentions, in order of first mention: a name the graph has recorded
    (weight 2) before a capitalised word that links to a canonical name (weight 1)."""
    words = normalise_name(text).split()
    lengths = sorted({len(a.norm.split()) for a in graph.aliases})
    mentioned: dict[int, int] = {}
    for i in range(len(words)):
        for n in lengths:
            if i + n > len(words):
                break
            entity = graph.by_norm.get(" ".join(words[i : i + n]))
            if entity is not None:
                mentioned.setdefault(entity, _NAMED)
    ids = list(graph.entities)
    linked = LinkedNames(graph.entities[e].name for e in ids)
    for word in dict.fromkeys(m.group() for m in _CAPITALISED.finditer(text)):
        if tokenize(word):  # a stopword ("The", "I") links nothing
            for j in sorted(linked.near(word)):
                mentioned.setdefault(ids[j], _LINKED)
    return mentioned


def held_facts(
    graph: Graph, facts: Sequence[FactRecord], mentioned: dict[int, int], text: str
) -> list[blocks.BlockFact]:
    """The current facts about the `mentioned` entities, most relevant to `text` first: by the
    surest mention of their entities, then BM25 over their words, then newest first."""
    by_n = {f.n: f for f in facts}
    held = {
        n: sum(mentioned.get(x, 0) for x in {graph.edges[n].subject, graph.edges[n].object})
        for e in mentioned
        for n in graph.touching(e)
        if n in by_n and graph.is_current(n)
    }
    if not held:
        return []
    index = Bm25Index(C.BM25_K1, C.BM25_B)
    index.add(np.fromiter(held, dtype=np.int64, count=len(held)), [by_n[n].text for n in held])
    ids, scores = index.search(text, len(held))
    score = dict(zip(ids.tolist(), scores.tolist(), strict=True))
    order = sorted(held, key=lambda n: (-held[n], -score.get(n, 0.0), -n))
    return [blocks.BlockFact(by_n[n].text, *graph.names(by_n[n])) for n in order]


def context_tokens(context: NoteContext) -> int:
    """The context's size as the message that carries it (0 when it holds nothing)."""
    text = context.text
    if text is None:
        return 0
    return sum(tokens.count_texts(tokens.encoding_for_model(None), [text])) + C.TOKENS_PER_MESSAGE


def _cut(instructions: str) -> str:
    """`instructions`, cut at a word (marked "…") so that they alone take at most
    NOTE_CONTEXT_INSTRUCTIONS_TOKENS of the context."""
    limit = min(C.NOTE_CONTEXT_INSTRUCTIONS_TOKENS, C.NOTE_CONTEXT_TOKENS)
    if context_tokens(NoteContext(instructions)) <= limit:
        return instructions
    words = _WORD.findall(instructions)
    low, high = 0, len(words)  # words[:low] fits; words[:high] does not
    while high - low > 1:
        mid = (low + high) // 2
        fits = context_tokens(NoteContext("".join(words[:mid]).rstrip() + _CUT)) <= limit
        low, high = (mid, high) if fits else (low, mid)
    return "".join(words[:low]).rstrip() + _CUT if low else ""


def _fit(instructions: str, names: Sequence[str], facts: Sequence[str]) -> NoteContext:
    """The context with as many names, then facts, as keep it within NOTE_CONTEXT_TOKENS."""
    items = [*names, *facts][: C.NOTE_CONTEXT_TOKENS]  # as above: no more can fit

    def kept(k: int) -> NoteContext:
        return NoteContext(
            instructions, tuple(items[: min(k, len(names))]), tuple(items[len(names) : k])
        )

    def fits(k: int) -> bool:
        return context_tokens(kept(k)) <= C.NOTE_CONTEXT_TOKENS

    if fits(len(items)):
        return kept(len(items))
    low, high = 0, len(items)  # kept(low) fits (the instructions were cut to); kept(high) not
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return kept(low)
