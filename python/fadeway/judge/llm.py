"""The LLM judge: every judgment of the spec asked of a model behind any OpenAI-compatible chat
completions endpoint (ARCHITECTURE: "The judgment model and the note writer"; the prompts are in
`prompts.py`).

Each judgment batches its items into few calls (units in windows with context, facts x episodes
in chunks, pairs and facts in lists), run concurrently up to `max_concurrency`. Each call asks for
structured output: a strict `json_schema` response format, or a forced tool call whose parameters
are the same schema. In "auto" mode a 400 that names the response format switches the judge to
tool calls for the rest of its life. An answer is read from the message content or from its tool
call, whichever holds it (some servers answer one when asked for the other).

Answers are read strictly. An answer that does not parse, breaks the schema (a score outside 0..1,
an unknown level) or names an id it was not given is discarded whole: when a model mixes up its
ids, none of its answers can be trusted. A readable answer that leaves ids out keeps what it gave.
What is missing is asked again once, alone; what is still missing after that is "no answer"
(None, logged at WARNING), never made up. Every answered call is recorded with `usage.record`.

Errors: past the deadline, `JudgeTimeout`. An endpoint that refuses or keeps failing raises its
`EndpointError` (lane jobs retry; decorate's inline uses fall back). An unreadable HTTP body is a
malformed answer like any other.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from .. import _constants as C
from .. import usage
from ..errors import EndpointError, EndpointResponseError, EndpointTimeout, JudgeTimeout
from ..http import Endpoint
from . import prompts as P
from .base import Answer, Boundaries, FactText, Judge, Relation, UnitText

__all__ = ["LLMJudge", "BatchSizes", "ChatCompletion", "ENV_PREFIX", "Structured"]

log = logging.getLogger("fadeway.judge")

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: The environment prefix: FADEWAY_JUDGE_BASE_URL, _MODEL and _API_KEY.
ENV_PREFIX = "FADEWAY_JUDGE"
#: Where a long text is cut.
ELISION = "\n[…]\n"

Structured = Literal["auto", "json_schema", "tool"]


@dataclass(frozen=True, slots=True)
class BatchSizes:
    """Items per call of each judgment. `about_pairs` bounds facts x episodes per call (each pair
    is a line of the answer); `about_episode_chars` bounds the episodes' text per call."""

    boundaries: int = C.LLM_JUDGE_BATCH_UNITS
    about_pairs: int = C.LLM_JUDGE_BATCH_ABOUT_PAIRS
    about_episode_chars: int = C.LLM_JUDGE_ABOUT_EPISODE_CHARS
    relate: int = C.LLM_JUDGE_BATCH_PAIRS
    same_entity: int = C.LLM_JUDGE_BATCH_NAMES
    levels: int = C.LLM_JUDGE_BATCH_FACTS
    distill: int = C.LLM_JUDGE_BATCH_FACTS

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) < 1:
                raise ValueError(
                    f"batch size {f.name} must be at least 1, not {getattr(self, f.name)}"
                )


# -- the answers' shapes ------------------------------------------------------------------------

Score = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]


class _BoundaryItem(msgspec.Struct):
    id: int
    first: Score
    last: Score


class _AboutItem(msgspec.Struct):
    fact: int
    episode: int
    about: bool
    score: Score


class _RelateItem(msgspec.Struct):
    id: int
    relation: Literal["same", "contradicts", "unrelated"]


class _SameItem(msgspec.Struct):
    id: int
    same: bool


class _LevelItem(msgspec.Struct):
    id: int
    level: Literal[0, 1, 2, 3]


class _DistillItem(msgspec.Struct):
    id: int
    keep: bool


class _Function(msgspec.Struct):
    name: str = ""
    arguments: Any = None  # a JSON string; some servers send the object itself


class _ToolCall(msgspec.Struct):
    function: _Function | None = None


class _Message(msgspec.Struct):
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(msgspec.Struct):
    message: _Message | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class ChatCompletion(msgspec.Struct):
    """What fadeway reads of a chat completion (unknown fields ignored; the note writer too)."""

    choices: list[_Choice] = []
    usage: _Usage | None = None

    @property
    def message(self) -> _Message | None:
        """The first choice's message."""
        return self.choices[0].message if self.choices else None

    @property
    def tokens(self) -> tuple[int, int]:
        """(prompt, completion) tokens as the endpoint reported them; 0 when it did not."""
        used = self.usage or _Usage()
        return used.prompt_tokens or 0, used.completion_tokens or 0


def clip(text: str, limit: int) -> str:
    """`text` within `limit` characters: its head and tail around an elision mark."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(ELISION))
    return text[: keep - keep // 3] + ELISION + text[len(text) - keep // 3 :]


def _one_line(text: str, limit: int = C.LLM_JUDGE_ITEM_CHARS) -> str:
    return clip(" ".join(text.split()), limit)


def _unit_line(unit: UnitText, i: int | None) -> str:
    head = f"[{i}] " if i is not None else "- "
    return f"{head}{unit.role}: {_one_line(unit.text, C.LLM_JUDGE_UNIT_CHARS)}"


def _fact(fact: FactText) -> str:
    """A fact as a prompt shows it: its sentence, then its two entities in brackets."""
    entities = (
        f" [{_one_line(fact.subject)}; {_one_line(fact.object)}]"
        if fact.subject or fact.object
        else ""
    )
    return f"{_one_line(fact.text)}{entities}"


def _json_object(text: Any) -> Any:
    """The JSON an answer holds: a string (fenced in ``` or not) decoded, an object as it is."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str) or not text.strip():
        return None
    body = text.strip()
    # A fenced answer is still one JSON value: some local servers wrap even schema-bound output.
    if body.startswith("```") and body.endswith("```"):
        body = body[3:-3].removeprefix("json").strip()
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None


class LLMJudge(Judge):
    """The judgments asked of `model` at `endpoint` (an OpenAI-compatible API root)."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        model: str | None = None,
        structured: Structured = "auto",
        batch: BatchSizes | None = None,
        max_concurrency: int = C.LLM_JUDGE_CONCURRENCY,
        temperature: float | None = 0.0,
        extra: Mapping[str, Any] | None = None,
        path: str = "chat/completions",
    ) -> None:
        model = model or endpoint.model
        if not model:
            raise EndpointError(
                f"no judge model for {endpoint.base_url}: pass model= or set {ENV_PREFIX}_MODEL"
            )
        if structured not in ("auto", "json_schema", "tool"):
            raise ValueError(
                f"structured must be 'auto', 'json_schema' or 'tool', not {structured!r}"
            )
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
        self.endpoint = endpoint
        self.model = model
        self.name = f"llm:{model}"
        self.structured: Structured = structured
        self.batch = batch or BatchSizes()
        self.max_concurrency = max_concurrency
        self.temperature = temperature
        self.extra = dict(extra or {})
        self.path = path
        # "tool" once an "auto" judge has seen the endpoint refuse response_format.
        self._mode: Literal["json_schema", "tool"] = (
            "tool" if structured == "tool" else "json_schema"
        )

    @classmethod
    def from_env(
        cls,
        *,
        model: str | None = None,
        environ: Mapping[str, str] | None = None,
        structured: Structured = "auto",
        batch: BatchSizes | None = None,
        max_concurrency: int = C.LLM_JUDGE_CONCURRENCY,
        **endpoint_settings: Any,
    ) -> LLMJudge:
        """From FADEWAY_JUDGE_BASE_URL, _MODEL (unless `model` is given) and _API_KEY."""
        env = os.environ if environ is None else environ
        endpoint = Endpoint.from_env(ENV_PREFIX, environ=env, **endpoint_settings)
        return cls(
            endpoint,
            model=model,
            structured=structured,
            batch=batch,
            max_concurrency=max_concurrency,
        )

    def __repr__(self) -> str:
        return f"LLMJudge({self.endpoint!r}, model={self.model!r}, mode={self._mode!r})"

    def close(self) -> None:
        self.endpoint.close()

    @property
    def mode(self) -> str:
        """How answers are asked for now: "json_schema" or "tool"."""
        return self._mode

    # -- judgments ------------------------------------------------------------------------------

    async def boundaries(
        self,
        units: Sequence[UnitText],
        *,
        before: Sequence[UnitText] = (),
        after: Sequence[UnitText] = (),
        deadline: float | None = None,
    ) -> Boundaries:
        every = [*before, *units, *after]
        lo, size, ctx = len(before), self.batch.boundaries, C.LLM_JUDGE_CONTEXT_UNITS

        def window(a: int, b: int) -> Callable[[], Awaitable[dict[int, tuple[float, float]]]]:
            def render(ids: Sequence[int]) -> tuple[str, set[int]]:
                shown = set(ids)
                lines = [
                    _unit_line(every[lo + a + i - 1], i if i in shown else None)
                    for i in range(1, b - a + 1)
                ]
                prior = [_unit_line(u, None) for u in every[max(0, lo + a - ctx) : lo + a]]
                later = [_unit_line(u, None) for u in every[lo + b : lo + b + ctx]]
                return P.BOUNDARIES.user.format(
                    before="\n".join(prior) or "(none)",
                    units="\n".join(lines),
                    after="\n".join(later) or "(none)",
                ), shown

            def read(item: _BoundaryItem) -> tuple[int, tuple[float, float]]:
                return item.id, (item.first, item.last)

            return lambda: self._judge(
                P.BOUNDARIES, _BoundaryItem, list(range(1, b - a + 1)), render, read, deadline
            )

        starts = range(0, len(units), size)
        found = await self._gather([window(a, min(a + size, len(units))) for a in starts])
        scores = [
            got.get(i - a)
            for a, got in zip(starts, found, strict=True)
            for i in range(a + 1, min(a + size, len(units)) + 1)
        ]
        return Boundaries(
            [s[0] if s else None for s in scores], [s[1] if s else None for s in scores]
        )

    async def about(
        self, facts: Sequence[str], episodes: Sequence[str], *, deadline: float | None = None
    ) -> list[list[Answer | None]]:
        if not facts or not episodes:
            return [[] for _ in facts]
        texts = [clip(e, C.LLM_JUDGE_EPISODE_CHARS) for e in episodes]
        groups: list[list[int]] = [[]]
        for e, text in enumerate(texts):
            if groups[-1] and (
                sum(len(texts[x]) for x in groups[-1]) + len(text) > self.batch.about_episode_chars
            ):
                groups.append([])
            groups[-1].append(e)
        jobs, spans = [], []
        for group in groups:
            per_call = max(1, self.batch.about_pairs // len(group))
            for f0 in range(0, len(facts), per_call):
                fs = list(range(f0, min(f0 + per_call, len(facts))))
                spans.append((fs, group))
                jobs.append(self._about_call(facts, texts, fs, group, deadline))
        found = await self._gather(jobs)
        out: list[list[Answer | None]] = [[None] * len(episodes) for _ in facts]
        for (fs, group), got in zip(spans, found, strict=True):
            for (fi, ei), answer in got.items():
                out[fs[fi - 1]][group[ei - 1]] = answer
        return out

    def _about_call(
        self,
        facts: Sequence[str],
        texts: Sequence[str],
        fs: list[int],
        group: list[int],
        deadline: float | None,
    ) -> Callable[[], Awaitable[dict[tuple[int, int], Answer]]]:
        def render(pairs: Sequence[tuple[int, int]]) -> tuple[str, set[tuple[int, int]]]:
            f_ids = sorted({f for f, _ in pairs})
            e_ids = sorted({e for _, e in pairs})
            text = P.ABOUT.user.format(
                facts="\n".join(f"[{f}] {_one_line(facts[fs[f - 1]])}" for f in f_ids),
                episodes="\n\n".join(f"[{e}]\n{texts[group[e - 1]]}" for e in e_ids),
            )
            return text, set(itertools.product(f_ids, e_ids))

        def read(item: _AboutItem) -> tuple[tuple[int, int], Answer]:
            return (item.fact, item.episode), Answer(item.about, item.score)

        keys = list(itertools.product(range(1, len(fs) + 1), range(1, len(group) + 1)))
        return lambda: self._judge(P.ABOUT, _AboutItem, keys, render, read, deadline)

    async def relate(
        self, pairs: Sequence[tuple[FactText, FactText]], *, deadline: float | None = None
    ) -> list[Relation | None]:
        return await self._listed(
            P.RELATE,
            _RelateItem,
            pairs,
            self.batch.relate,
            lambda items: {
                "pairs": "\n\n".join(
                    f"[{i}]\nnew: {_fact(new)}\nheld: {_fact(held)}" for i, (new, held) in items
                )
            },
            lambda item: item.relation,
            deadline,
        )

    async def same_entity(
        self, pairs: Sequence[tuple[str, str]], *, deadline: float | None = None
    ) -> list[bool | None]:
        return await self._listed(
            P.SAME_ENTITY,
            _SameItem,
            pairs,
            self.batch.same_entity,
            lambda items: {
                "pairs": "\n".join(
                    f"[{i}] {msgspec.json.encode(_one_line(a)).decode()} | "
                    f"{msgspec.json.encode(_one_line(b)).decode()}"
                    for i, (a, b) in items
                )
            },
            lambda item: item.same,
            deadline,
        )

    async def levels(
        self, facts: Sequence[FactText], dialogue: str, *, deadline: float | None = None
    ) -> list[int | None]:
        recent = dialogue[-C.LLM_JUDGE_DIALOGUE_CHARS :]
        return await self._listed(
            P.LEVELS,
            _LevelItem,
            facts,
            self.batch.levels,
            lambda items: {
                "dialogue": recent,
                "facts": "\n".join(f"[{i}] {_fact(f)}" for i, f in items),
            },
            lambda item: item.level,
            deadline,
        )

    async def distill(
        self, facts: Sequence[FactText], conversation: str, *, deadline: float | None = None
    ) -> list[bool | None]:
        exchange = clip(conversation, C.LLM_JUDGE_DIALOGUE_CHARS)
        return await self._listed(
            P.DISTILL,
            _DistillItem,
            facts,
            self.batch.distill,
            lambda items: {
                "conversation": exchange,
                "items": "\n".join(f"[{i}] {_one_line(f.text)}" for i, f in items),
            },
            lambda item: item.keep,
            deadline,
        )

    # -- the machinery ----------------------------------------------------------------------------

    async def _listed(
        self,
        prompt: P.Prompt,
        item_type: type,
        items: Sequence[Any],
        size: int,
        fields: Callable[[list[tuple[int, Any]]], dict[str, str]],
        value: Callable[[Any], V],
        deadline: float | None,
    ) -> list[V | None]:
        """A judgment of a plain list of items, `size` per call, ids 1.. within each call."""

        def call(chunk: Sequence[Any]) -> Callable[[], Awaitable[dict[int, V]]]:
            def render(ids: Sequence[int]) -> tuple[str, set[int]]:
                return prompt.user.format(**fields([(i, chunk[i - 1]) for i in ids])), set(ids)

            return lambda: self._judge(
                prompt,
                item_type,
                list(range(1, len(chunk) + 1)),
                render,
                lambda item: (item.id, value(item)),
                deadline,
            )

        chunks = [items[a : a + size] for a in range(0, len(items), size)]
        found = await self._gather([call(c) for c in chunks])
        return [
            got.get(i)
            for chunk, got in zip(chunks, found, strict=True)
            for i in range(1, len(chunk) + 1)
        ]

    async def _gather(self, jobs: Sequence[Callable[[], Awaitable[V]]]) -> list[V]:
        """Run the calls, at most `max_concurrency` at once; one failure stops the others."""
        if len(jobs) == 1:
            return [await jobs[0]()]
        slots = asyncio.Semaphore(self.max_concurrency)

        async def bounded(job: Callable[[], Awaitable[V]]) -> V:
            async with slots:
                return await job()

        tasks = [asyncio.ensure_future(bounded(job)) for job in jobs]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _judge(
        self,
        prompt: P.Prompt,
        item_type: type,
        keys: list[K],
        render: Callable[[Sequence[K]], tuple[str, set[K]]],
        read: Callable[[Any], tuple[K, V]],
        deadline: float | None,
    ) -> dict[K, V]:
        """Ask about `keys`; ask once more about those the answer left out; the rest: no answer."""
        got: dict[K, V] = {}
        missing = keys
        for attempt in (1, 2):
            user, given = render(missing)
            if attempt == 2:
                user += P.RETRY_NOTE
            answer = await self._ask(prompt, user, deadline)
            found = self._read(prompt, item_type, answer, given, read)
            got.update((k, v) for k, v in found.items() if k in missing)
            missing = [k for k in missing if k not in got]
            if not missing:
                return got
        log.warning(
            "judge:%s (%s): no answer for %d of %d items after a retry; they count as no answer",
            prompt.name,
            self.model,
            len(missing),
            len(keys),
        )
        return got

    def _read(
        self,
        prompt: P.Prompt,
        item_type: type,
        answer: Any,
        given: set[K],
        read: Callable[[Any], tuple[K, V]],
    ) -> dict[K, V]:
        """The answer's items, all or nothing: empty when it breaks the schema or names an id
        it was not given (or one twice)."""
        if not isinstance(answer, dict) or not isinstance(answer.get(prompt.key), list):
            log.warning(
                "judge:%s: the answer is not a JSON object with a %r list; it is discarded",
                prompt.name,
                prompt.key,
            )
            return {}
        try:
            items = msgspec.convert(answer[prompt.key], list[item_type])  # type: ignore[valid-type]
        except msgspec.ValidationError as exc:
            log.warning(
                "judge:%s: the answer breaks its schema (%s); it is discarded", prompt.name, exc
            )
            return {}
        out: dict[K, V] = {}
        for item in items:
            key, value = read(item)
            if key not in given or key in out:
                log.warning(
                    "judge:%s: the answer names %s %r, %s; it is discarded",
                    prompt.name,
                    "id",
                    key,
                    "not one it was given" if key not in given else "twice",
                )
                return {}
            out[key] = value
        return out

    async def _ask(self, prompt: P.Prompt, user: str, deadline: float | None) -> Any:
        """One call; the JSON object it answered, or None when the answer was unreadable."""
        mode = self._mode
        start = time.perf_counter()
        try:
            completion = await self.endpoint.post_json(
                self.path,
                self._payload(prompt, user, mode),
                deadline=deadline,
                response_type=ChatCompletion,
            )
        except EndpointTimeout as exc:
            raise JudgeTimeout(
                f"judge:{prompt.name} ({self.model}) did not answer by its deadline: {exc}"
            ) from exc
        except EndpointResponseError as exc:
            usage.record(f"judge:{prompt.name}", self.model, 0, 0, time.perf_counter() - start)
            log.warning("judge:%s: %s", prompt.name, exc)
            return None
        except EndpointError as exc:
            if (
                self.structured == "auto"
                and mode == "json_schema"
                and exc.status == 400
                and "response_format" in str(exc).lower()
            ):
                log.warning(
                    "judge (%s): the endpoint refused response_format (%s); asking for "
                    "a tool call from now on",
                    self.model,
                    exc,
                )
                self._mode = "tool"
                return await self._ask(prompt, user, deadline)
            raise
        usage.record(
            f"judge:{prompt.name}", self.model, *completion.tokens, time.perf_counter() - start
        )
        return self._answer_of(completion, mode)

    def _payload(self, prompt: P.Prompt, user: str, mode: str) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": user},
            ],
        }
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        if mode == "json_schema":
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": prompt.name, "schema": prompt.schema, "strict": True},
            }
        else:
            payload["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": prompt.name,
                        "description": P.TOOL_DESCRIPTION,
                        "parameters": prompt.schema,
                        "strict": True,
                    },
                }
            ]
            payload["tool_choice"] = {"type": "function", "function": {"name": prompt.name}}
        payload.update(self.extra)
        return payload

    @staticmethod
    def _answer_of(completion: ChatCompletion, mode: str) -> Any:
        """The answer's JSON, from the content or a tool call: the one asked for first."""
        message = completion.message
        if message is None:
            return None
        calls = [c.function.arguments for c in message.tool_calls or () if c.function]
        places = [message.content, *calls] if mode == "json_schema" else [*calls, message.content]
        for place in places:
            doc = _json_object(place)
            if isinstance(doc, dict):
                return doc
        return None
