"""One question, three ways: build each way's context, have the answerer answer from it and the
grader grade the answer (or, without a key, count the evidence each context carries), and
journal each way's result as it is done.

The grader sees the question, the gold answer and the answer, never a context. The answerer is
asked with temperature 0 and the run's seed, the same request for every way but the context.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EndpointResponseError
from ..http import Endpoint
from .contexts import (
    WAYS,
    Context,
    Retriever,
    fadeway_context,
    full_context,
    measure,
    request_messages,
    retrieval_context,
)
from .datasets import Conversation, Question
from .evidence import surfaced, turn_key
from .grading import grade_request, read_grade
from .journal import Journal

__all__ = ["ANSWER_MAX_TOKENS", "Asker", "Models"]

#: The most tokens an answer may take (answers are asked for in a few words).
ANSWER_MAX_TOKENS = 200


@dataclass(frozen=True, slots=True)
class Models:
    """The answerer and the grader (both absent when only the evidence is counted)."""

    answerer: Endpoint | None = None
    grader: Endpoint | None = None
    seed: int = 0


class Asker:
    """Asks the questions of one benchmark run; safe to call from several threads."""

    def __init__(
        self,
        benchmark: str,
        stores: Mapping[str, Path],
        settings: dict[str, Any],
        journal: Journal,
        models: Models,
        *,
        window: int,
        model: str,
    ) -> None:
        self.benchmark = benchmark
        self.stores = stores
        self.settings = settings
        self.journal = journal
        self.models = models
        self.window = window
        self.model = model
        self._retrievers: dict[str, Retriever] = {}
        self._lock = threading.Lock()

    @property
    def counting(self) -> bool:
        """Whether this run counts evidence instead of answering (`--no-answer`)."""
        return self.models.answerer is None

    def wanted(self, question: Question) -> bool:
        """Whether the question is asked at all: counting needs evidence to count (an
        abstention question has none to find, as in LongMemEval's own retrieval count)."""
        return not self.counting or (bool(question.evidence) and not question.abstention)

    def todo(self, question: Question) -> list[str]:
        """The ways this question still lacks in the journal."""
        return [w for w in WAYS if not self.journal.has(question.key, w)]

    def ask(self, conversation: Conversation, question: Question) -> None:
        """Every way the journal lacks for `question`, each journaled when done."""
        ways = self.todo(question)
        if not ways:
            return
        started = time.perf_counter()
        mine = fadeway_context(self.stores[question.memory_id], self.settings, question, self.model)
        built = {"fadeway": (mine, time.perf_counter() - started)}
        retriever = self._retriever(conversation)  # built once a conversation, not timed
        if "full" in ways:
            started = time.perf_counter()
            built["full"] = (
                full_context(retriever, question, self.window),
                time.perf_counter() - started,
            )
        if "retrieval" in ways:
            started = time.perf_counter()
            built["retrieval"] = (
                retrieval_context(retriever, question, mine.tokens),
                time.perf_counter() - started,
            )
        for way in ways:
            context, seconds = built[way]
            if self.counting:
                entry = self._count(conversation, question, way, context, mine)
            else:
                entry = self._answer(question, way, context, seconds)
            self.journal.write(entry)

    def _retriever(self, conversation: Conversation) -> Retriever:
        with self._lock:
            found = self._retrievers.get(conversation.memory_id)
            if found is None:
                found = self._retrievers[conversation.memory_id] = Retriever(conversation)
            return found

    def _base(self, question: Question, way: str, context: Context) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "key": question.key,
            "way": way,
            "category": question.category,
            "abstention": question.abstention,
            "question": question.text,
            "gold": question.gold,
            "context_tokens": context.tokens,
        }
        if way == "fadeway":
            entry["decorate_seconds"] = context.decorate_seconds
            entry["spend"] = [
                {
                    "kind": u.kind,
                    "model": u.model,
                    "calls": u.calls,
                    "tokens_in": u.tokens_in,
                    "tokens_out": u.tokens_out,
                }
                for u in context.spend
            ]
        return entry

    # -- answering ---------------------------------------------------------------------------

    def _answer(
        self, question: Question, way: str, context: Context, context_seconds: float
    ) -> dict[str, Any]:
        answerer, grader = self.models.answerer, self.models.grader
        assert answerer is not None and grader is not None
        body: dict[str, Any] = {
            "messages": request_messages(question, context),
            "temperature": 0,
            "seed": self.models.seed,
            "max_tokens": ANSWER_MAX_TOKENS,
        }
        if answerer.model:
            body = {"model": answerer.model, **body}
        started = time.perf_counter()
        reply = answerer.post_json_sync("chat/completions", body)
        answered = time.perf_counter() - started
        answer = _content(reply, answerer.base_url)
        judged = grader.post_json_sync(
            "chat/completions",
            grade_request(
                self.benchmark, question, answer, model=grader.model, seed=self.models.seed
            ),
        )
        grade = read_grade(self.benchmark, _content(judged, grader.base_url))
        usage = reply.get("usage") if isinstance(reply, dict) else None
        prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        entry = self._base(question, way, context)
        entry.update(
            answer=answer,
            correct=grade.correct,
            grade=grade.raw,
            input_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
            question_seconds=(context.decorate_seconds if way == "fadeway" else context_seconds)
            + answered,
        )
        return entry

    # -- counting ----------------------------------------------------------------------------

    def _count(
        self,
        conversation: Conversation,
        question: Question,
        way: str,
        context: Context,
        mine: Context,
    ) -> dict[str, Any]:
        keys = {i: turn_key(conversation.turns[i].own) for i in question.evidence}
        entry = self._base(question, way, context)
        entry.update(evidence=len(keys), carried=len(surfaced(context.text, keys, keys)))
        if way == "fadeway":
            entry.update(
                block_carried=len(surfaced(context.block, keys, keys)),
                block_tokens=_block_tokens(context.block),
            )
        elif way == "retrieval":
            at_block = retrieval_context(
                self._retriever(conversation), question, _block_tokens(mine.block)
            )
            entry.update(
                block_carried=len(surfaced(at_block.text, keys, keys)),
                block_tokens=at_block.tokens,
            )
        return entry


def _block_tokens(block: str | None) -> int:
    return measure([{"role": "system", "content": block}])[0] if block else 0


def _content(reply: Any, where: str) -> str:
    """The text of a chat completion's first choice ("" when it holds none)."""
    try:
        content = reply["choices"][0]["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise EndpointResponseError(
            f"{where} answered no chat completion: {reply!r:.200}"
        ) from None
    return content if isinstance(content, str) else ""
