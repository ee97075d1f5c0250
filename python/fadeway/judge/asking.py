"""Asking a model for strict JSON answers (the LLM judge's machinery; see `llm`).

Each call asks for structured output: a strict `json_schema` response format, or a forced tool
call whose parameters are the same schema. In "auto" mode a 400 that names the response format
switches to tool calls for the rest of the judge's life. An answer is read from the message
content or from its tool call, whichever holds it. Answers are read strictly: one that does not
parse, breaks the schema or names an id it was not given is discarded whole and asked once more;
after a second, its items have "no answer" (None, logged), never made up. Every answer lists what
counts only (the units that open or close a concept, the yeses of `about` and `same_entity`, the
relations of `relate`, the levels above 0, the items distill keeps), so a readable one misses
nothing: what it leaves out is the answer that costs nothing to leave out. Every answered call
is recorded with `usage.record`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any, Literal, TypeVar

import msgspec

from .. import usage
from ..errors import EndpointError, EndpointResponseError, EndpointTimeout, JudgeTimeout
from ..http import Endpoint
from . import prompts as P
from .answers import ChatCompletion, json_object

__all__ = ["StrictAnswers", "Structured"]

log = logging.getLogger("fadeway.judge")

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Structured = Literal["auto", "json_schema", "tool"]


class StrictAnswers:
    """Calls to `model` at `endpoint` for answers of a prompt's schema, at most
    `max_concurrency` at once (the LLM judge mixes this in and sets these fields)."""

    endpoint: Endpoint
    model: str
    structured: Structured
    max_concurrency: int
    temperature: float | None
    extra: dict[str, Any]
    path: str
    _mode: Literal["json_schema", "tool"]

    async def _listed(
        self,
        prompt: P.Prompt,
        item_type: type,
        items: Sequence[Any],
        size: int,
        fields: Callable[[list[tuple[int, Any]]], dict[str, str]],
        read: Callable[[Any], tuple[int, V]],
        deadline: float | None,
        unnamed: V,
    ) -> list[V | None]:
        """A judgment of a plain list of items, `size` per call, ids 1.. within each call: an
        answer item of `item_type` (a struct, or a bare id) is `read` as (id, answer); what an
        answer leaves out is `unnamed` (see `_judge`)."""

        def call(chunk: Sequence[Any]) -> Callable[[], Awaitable[dict[int, V]]]:
            def render(ids: Sequence[int]) -> tuple[str, set[int]]:
                return prompt.user.format(**fields([(i, chunk[i - 1]) for i in ids])), set(ids)

            return lambda: self._judge(
                prompt,
                item_type,
                list(range(1, len(chunk) + 1)),
                render,
                read,
                deadline,
                unnamed,
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
        unnamed: V,
    ) -> dict[K, V]:
        """Ask about `keys`: a readable answer answers every one of them, those it leaves out
        being `unnamed` (every answer lists what counts only); a discarded one is asked once
        more; after a second, the keys have no answer (absent from the result)."""
        for attempt in (1, 2):
            user, given = render(keys)
            if attempt == 2:
                user += P.RETRY_NOTE
            answer = await self._ask(prompt, user, deadline)
            found = self._read(prompt, item_type, answer, given, read)
            if found is not None:
                return {k: found.get(k, unnamed) for k in given}
        log.warning(
            "judge:%s (%s): no answer for %d items after a retry; they count as no answer",
            prompt.name,
            self.model,
            len(keys),
        )
        return {}

    def _read(
        self,
        prompt: P.Prompt,
        item_type: type,
        answer: Any,
        given: set[K],
        read: Callable[[Any], tuple[K, V]],
    ) -> dict[K, V] | None:
        """The answer's items, all or nothing: None (discarded) when it breaks the schema or
        names an id it was not given (or one twice)."""
        if not isinstance(answer, dict) or not isinstance(answer.get(prompt.key), list):
            log.warning(
                "judge:%s: the answer is not a JSON object with a %r list; it is discarded",
                prompt.name,
                prompt.key,
            )
            return None
        try:
            items = msgspec.convert(answer[prompt.key], list[item_type])  # type: ignore[valid-type]
        except msgspec.ValidationError as exc:
            log.warning(
                "judge:%s: the answer breaks its schema (%s); it is discarded", prompt.name, exc
            )
            return None
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
                return None
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
            f"judge:{prompt.name}",
            self.model,
            *completion.tokens,
            time.perf_counter() - start,
            completion.cached,
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
            doc = json_object(place)
            if isinstance(doc, dict):
                return doc
        return None
