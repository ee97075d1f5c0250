"""What the answerer reads for a question, three ways: fadeway's decorated request, the full
context, and plain retrieval at fadeway's token budget.

The answerer's prompt is the same for the three ways but for the context: the instructions
(`instructions`: the task and the day the question is asked), then the way's context, then the
question as the user's message. Only the context differs:

- fadeway: the request `decorate` returns for the question as the next user message of its
  memory, on a throwaway copy of the memory's store (so no question changes the memory for the
  next): the facts block, the view with its recall blocks and note calls, the question's recall
  block, the question.
- full: every turn, oldest first, one a line as "[day] text", in one system message; the oldest
  turns are dropped while the request would pass the answerer's window.
- retrieval: BM25 (Okapi, k1 1.2, b 0.75, lowercase words, no stemming or stopwords) over the
  turns, the question as the query, the best turns while they fit in the tokens of fadeway's
  context for that question, shown oldest first in the same form as `full`.

Tokens are counted with the replay model's encoding (o200k_base) over every message's texts.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import blocks, tokens
from .._core import Bm25Index
from ..engine import open as open_engine
from ..usage import UsageSummary
from ..wire import text_of
from .datasets import Conversation, Question, day

__all__ = [
    "WAYS",
    "Context",
    "FULL_HEADER",
    "RETRIEVAL_HEADER",
    "Retriever",
    "copy_store",
    "fadeway_context",
    "full_context",
    "instructions",
    "measure",
    "request_messages",
    "retrieval_context",
]

#: The three ways, in the order they are reported.
WAYS = ("fadeway", "full", "retrieval")

FULL_HEADER = "Our earlier conversation, oldest first:"
RETRIEVAL_HEADER = (
    "The parts of our earlier conversation most related to the question, oldest first:"
)


def instructions(asked_at: float) -> str:
    """The answerer's instructions: the same for every way and every question but its day."""
    return (
        "You are answering the user's question about our earlier conversations, from what this "
        "conversation shows of them. Today is "
        f"{day(asked_at)}. Answer with the answer only, in a few words: no explanation. If what "
        "you were shown does not say, answer that you do not know."
    )


@dataclass
class Context:
    """One way's context for one question: its messages (between the instructions and the
    question), their tokens and text, and what building it took."""

    messages: list[dict[str, Any]]
    tokens: int
    text: str
    block: str | None = None  # fadeway: the question's recall block
    decorate_seconds: float = 0.0  # fadeway: the decorate call alone
    spend: list[UsageSummary] = field(default_factory=list)  # fadeway: the memory's own calls


def request_messages(question: Question, context: Context) -> list[dict[str, Any]]:
    """The answerer's messages: instructions, the context, the question."""
    return [
        {"role": "system", "content": instructions(question.at)},
        *context.messages,
        {"role": "user", "content": question.text},
    ]


def measure(messages: Sequence[dict[str, Any]]) -> tuple[int, str]:
    """The tokens of `messages` (their texts, o200k_base) and their texts joined."""
    texts = ["\n".join(text_of(m)) for m in messages]
    encoding = tokens.encoding_for_model(None)
    return sum(tokens.count_texts(encoding, texts)), "\n".join(texts)


# -- fadeway ----------------------------------------------------------------------------------


def copy_store(db: Path, into: Path) -> Path:
    """A copy of the closed SQLite store `db` (any -wal/-shm beside it, and its `.indexes/`
    directory) in the directory `into`; returns the copy's path."""
    target = into / db.name
    for suffix in ("", "-wal", "-shm"):
        source = db.with_name(db.name + suffix)
        if source.exists():
            shutil.copy2(source, target.with_name(target.name + suffix))
    indexes = db.with_name(db.name + ".indexes")
    if indexes.exists():
        shutil.copytree(indexes, target.with_name(target.name + ".indexes"))
    return target


def fadeway_context(db: Path, settings: dict[str, Any], question: Question, model: str) -> Context:
    """The decorated request for `question` on a throwaway copy of its memory's store `db`,
    opened with `settings` (those the memory was replayed with, and its note writer, so the
    request carries no note ask) and no background threads."""
    with tempfile.TemporaryDirectory(prefix="fadeway-eval-") as tmp:
        copy = copy_store(db, Path(tmp))
        with open_engine(copy, background=False, **settings) as engine:
            memory = engine.memory(question.memory_id)
            # A service has the memory's indexes loaded; a fresh copy loads them on its first
            # search. Searching (a read) first keeps that load out of decorate's time.
            for kind in ("fact", "passage"):
                memory.search(question.text, kind=kind, k=1)
            before = memory.usage()
            started = time.perf_counter()
            request = memory.decorate(
                {"model": model, "messages": [{"role": "user", "content": question.text}]},
                at=question.at,
            )
            seconds = time.perf_counter() - started
            spend = _spent(before, memory.usage())
    messages = request["messages"]
    asked = len(messages) - 1
    if messages[asked] != {"role": "user", "content": question.text}:
        raise RuntimeError(f"decorate did not end the request with question {question.key}")
    previous = messages[asked - 1] if asked else None
    block = (
        previous["content"]
        if previous
        and previous.get("role") in ("system", "developer")
        and isinstance(previous.get("content"), str)
        and previous["content"].startswith(blocks.RECALL_OPEN)
        else None
    )
    context = messages[:asked]
    size, text = measure(context)
    return Context(context, size, text, block, seconds, spend)


def _spent(before: list[UsageSummary], after: list[UsageSummary]) -> list[UsageSummary]:
    """What `after` holds beyond `before`, by kind and model."""
    old = {(u.kind, u.model): u for u in before}
    out = []
    for u in after:
        o = old.get((u.kind, u.model))
        if o is None:
            out.append(u)
        elif u.calls > o.calls:
            out.append(
                UsageSummary(
                    kind=u.kind,
                    model=u.model,
                    calls=u.calls - o.calls,
                    tokens_in=u.tokens_in - o.tokens_in,
                    tokens_out=u.tokens_out - o.tokens_out,
                    seconds=u.seconds - o.seconds,
                )
            )
    return out


# -- the baselines ----------------------------------------------------------------------------


def _line(conversation: Conversation, i: int) -> str:
    turn = conversation.turns[i]
    return f"[{day(turn.at)}] {turn.content}"


def _turns_message(header: str, lines: Sequence[str]) -> dict[str, Any]:
    return {"role": "system", "content": "\n".join([header, *lines])}


def full_context(turns: Retriever, question: Question, window: int) -> Context:
    """Every turn, oldest first, with the oldest dropped while the answerer's whole request
    (instructions, context, question) would pass `window` tokens."""
    encoding = tokens.encoding_for_model(None)
    lines, sizes = turns.lines, turns.sizes
    fixed = sum(
        tokens.count_texts(encoding, [instructions(question.at), question.text, FULL_HEADER])
    )
    start, total = 0, fixed + sum(sizes)
    while start < len(lines) and total > window:
        total -= sizes[start]
        start += 1
    message = _turns_message(FULL_HEADER, lines[start:])
    size, text = measure([message])
    return Context([message], size, text)


class Retriever:
    """One conversation's turns as the baselines show them ("[day] speaker: text", one a line)
    with their tokens, counted once for every question, and BM25 over the turns as replayed."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.index = Bm25Index(stopwords="none", stem=False)
        turns = conversation.turns
        self.index.add(np.arange(len(turns), dtype=np.int64), [t.content for t in turns])
        encoding = tokens.encoding_for_model(None)
        self.lines = [_line(conversation, i) for i in range(len(turns))]
        self.sizes = tokens.count_texts(encoding, [line + "\n" for line in self.lines])

    def ranked(self, query: str) -> list[int]:
        """Turn indexes by score for `query`, best first (ties in turn order)."""
        ids, _ = self.index.search(query, len(self.lines))
        return [int(i) for i in ids]


def retrieval_context(retriever: Retriever, question: Question, budget: int) -> Context:
    """The best turns for the question while the context stays within `budget` tokens (the
    first that does not fit ends it), shown oldest first."""
    encoding = tokens.encoding_for_model(None)
    used = sum(tokens.count_texts(encoding, [RETRIEVAL_HEADER]))
    chosen = []
    for i in retriever.ranked(question.text):
        if used + retriever.sizes[i] > budget:
            break
        chosen.append(i)
        used += retriever.sizes[i]
    message = _turns_message(RETRIEVAL_HEADER, [retriever.lines[i] for i in sorted(chosen)])
    size, text = measure([message])
    return Context([message], size, text)
