"""The LLM judge: every judgment of the spec asked of a model behind any OpenAI-compatible chat
completions endpoint (ARCHITECTURE: "The judgment model and the note writer"; the prompts are in
`prompts.py`).

Each judgment batches its items into few calls (units in windows with context, facts x episodes
in chunks, pairs and facts in lists), run concurrently up to `max_concurrency`. `about` sends each
distinct fact and episode once per call, asks for the yeses only (a pair left out is a no, score
0.0), and judges an episode longer than a call's room in pieces (never cut short): the fact is
about the episode if it is about any piece, with the best piece's score. Each call asks for
structured output: a strict `json_schema` response format, or a forced tool call whose parameters
are the same schema. In "auto" mode a 400 that names the response format switches the judge to
tool calls for the rest of its life. An answer is read from the message content or from its tool
call, whichever holds it (some servers answer one when asked for the other).

Answers are read strictly. An answer that does not parse, breaks the schema (a score outside 0..1,
an unknown level) or names an id it was not given is discarded whole: when a model mixes up its
ids, none of its answers can be trusted. Every judgment asks for what counts only (the units
that open or close a concept, the yeses of `about` and `same_entity`, the relations of `relate`
other than "unrelated", the levels above 0, the items distill keeps): what a readable answer
leaves out is the answer that costs nothing to leave out, so a model writes only what changes
something (issue 29). A unit a boundaries answer leaves out ranks below every unit it lists,
and among the others in the offline judge's order.
A discarded answer is asked again once; after a second, its items have "no answer" (None,
logged at WARNING), never made up. Every answered call is recorded with `usage.record`.

Errors: past the deadline, `JudgeTimeout`. An endpoint that refuses or keeps failing raises its
`EndpointError` (lane jobs retry; decorate's inline uses fall back). An unreadable HTTP body is a
malformed answer like any other.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeVar

import msgspec

from .. import _constants as C
from ..errors import EndpointError
from ..http import Endpoint
from . import cohesion
from . import prompts as P
from .answers import AboutItem, BoundaryItem, LevelItem, RelateItem
from .asking import StrictAnswers, Structured
from .base import Answer, Boundaries, FactText, Judge, Relation, UnitText
from .offline import may_have_drawn_on

__all__ = ["LLMJudge", "BatchSizes", "ENV_PREFIX", "Structured"]

log = logging.getLogger("fadeway.judge")

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: The environment prefix: FADEWAY_JUDGE_BASE_URL, _MODEL and _API_KEY.
ENV_PREFIX = "FADEWAY_JUDGE"


@dataclass(frozen=True, slots=True)
class BatchSizes:
    """Items per call of each judgment. For `about`: `about_facts` facts a call, with as many
    episodes as `about_pairs` (facts x episodes a call) and `about_episode_chars` (the
    episodes' text a call, the room: a longer episode is judged in pieces of at most that)
    allow."""

    boundaries: int = C.LLM_JUDGE_BATCH_UNITS
    about_facts: int = C.LLM_JUDGE_BATCH_FACTS
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


#: A unit the model's boundaries answer left out (it lists those that open or close a concept).
_UNLISTED = (-1.0, -1.0)


def _ranked_below(
    scores: list[tuple[float, float] | None], every: Sequence[UnitText], lo: int
) -> list[tuple[float, float] | None]:
    """`scores` (of the units from `every[lo]` on) with each unit the model left out scored
    below any it listed, and among themselves in the offline judge's order (its cohesion of
    `every`, context included, times LLM_JUDGE_UNLISTED_BOUNDARY): the units where a model sees
    no concept open or close still rank, so that a stretch no listed unit can cut is cut where
    cohesion breaks most, not where sizes alone would put it (at its smallest episode)."""
    first, last = cohesion.boundary_scores([u.text for u in every])
    scale = C.LLM_JUDGE_UNLISTED_BOUNDARY
    return [
        (scale * float(first[lo + j]), scale * float(last[lo + j])) if s is _UNLISTED else s
        for j, s in enumerate(scores)
    ]


class LLMJudge(StrictAnswers, Judge):
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
                    P.unit_line(every[lo + a + i - 1], i if i in shown else None)
                    for i in range(1, b - a + 1)
                ]
                prior = [P.unit_line(u, None) for u in every[max(0, lo + a - ctx) : lo + a]]
                later = [P.unit_line(u, None) for u in every[lo + b : lo + b + ctx]]
                return P.BOUNDARIES.user.format(
                    before="\n".join(prior) or "(none)",
                    units="\n".join(lines),
                    after="\n".join(later) or "(none)",
                ), shown

            def read(item: BoundaryItem) -> tuple[int, tuple[float, float]]:
                if item.first == item.last == 0:  # said of a unit it need not have listed
                    return item.id, _UNLISTED
                return item.id, (item.first, item.last)

            return lambda: self._judge(
                P.BOUNDARIES,
                BoundaryItem,
                list(range(1, b - a + 1)),
                render,
                read,
                deadline,
                _UNLISTED,
            )

        starts = range(0, len(units), size)
        found = await self._gather([window(a, min(a + size, len(units))) for a in starts])
        scores = [
            got.get(i - a)
            for a, got in zip(starts, found, strict=True)
            for i in range(a + 1, min(a + size, len(units)) + 1)
        ]
        if any(s is _UNLISTED for s in scores):
            scores = _ranked_below(scores, every, lo)
        return Boundaries(
            [s[0] if s else None for s in scores], [s[1] if s else None for s in scores]
        )

    async def about(
        self, facts: Sequence[str], episodes: Sequence[str], *, deadline: float | None = None
    ) -> list[list[Answer | None]]:
        if not facts or not episodes:
            return [[] for _ in facts]
        # Each distinct text once; an episode longer than a call's room in pieces, none dropped.
        fact_of = {f: i for i, f in enumerate(dict.fromkeys(P.one_line(f) for f in facts))}
        episode_of = {e: i for i, e in enumerate(dict.fromkeys(episodes))}
        room = self.batch.about_episode_chars
        pieces = [(e, piece) for text, e in episode_of.items() for piece in P.pieces(text, room)]
        per_call = min(self.batch.about_facts, self.batch.about_pairs)
        texts = list(fact_of)
        jobs, spans = [], []
        for f0 in range(0, len(texts), per_call):
            fs = list(range(f0, min(f0 + per_call, len(texts))))
            # Every piece once per chunk of facts, as many to a call as the room and pairs allow.
            width = max(1, self.batch.about_pairs // len(fs))
            groups: list[list[int]] = [[]]
            for p, (_, piece) in enumerate(pieces):
                size = sum(len(pieces[x][1]) for x in groups[-1]) + len(piece)
                if groups[-1] and (size > room or len(groups[-1]) >= width):
                    groups.append([])
                groups[-1].append(p)
            for group in groups:
                spans.append((fs, group))
                jobs.append(self._about_call(texts, pieces, fs, group, deadline))
        found = await self._gather(jobs)
        # An episode's answer is its pieces' best: a yes from any piece (its best score), else
        # no answer if a piece had none, else a no.
        yes: dict[tuple[int, int], float] = {}
        unanswered: set[tuple[int, int]] = set()
        for (fs, group), got in zip(spans, found, strict=True):
            for fi, f in enumerate(fs, 1):
                for pi, p in enumerate(group, 1):
                    key, answer = (f, pieces[p][0]), got.get((fi, pi))
                    if answer is None:
                        unanswered.add(key)
                    elif answer.yes:
                        yes[key] = max(yes.get(key, 0.0), answer.score)
        no = Answer(False, 0.0)
        out: list[list[Answer | None]] = []
        for fact in facts:
            f = fact_of[P.one_line(fact)]
            row: list[Answer | None] = []
            for episode in episodes:
                key = (f, episode_of[episode])
                row.append(
                    Answer(True, yes[key]) if key in yes else None if key in unanswered else no
                )
            out.append(row)
        return out

    def _about_call(
        self,
        facts: Sequence[str],
        pieces: Sequence[tuple[int, str]],
        fs: list[int],
        group: list[int],
        deadline: float | None,
    ) -> Callable[[], Awaitable[dict[tuple[int, int], Answer]]]:
        def render(pairs: Sequence[tuple[int, int]]) -> tuple[str, set[tuple[int, int]]]:
            f_ids = sorted({f for f, _ in pairs})
            e_ids = sorted({e for _, e in pairs})
            text = P.ABOUT.user.format(
                facts="\n".join(f"[{f}] {facts[fs[f - 1]]}" for f in f_ids),
                episodes="\n\n".join(f"[{e}]\n{pieces[group[e - 1]][1]}" for e in e_ids),
            )
            return text, set(itertools.product(f_ids, e_ids))

        def read(item: AboutItem) -> tuple[tuple[int, int], Answer]:
            return (item.fact, item.episode), Answer(True, item.score)

        keys = list(itertools.product(range(1, len(fs) + 1), range(1, len(group) + 1)))
        return lambda: self._judge(
            P.ABOUT, AboutItem, keys, render, read, deadline, unnamed=Answer(False, 0.0)
        )

    async def relate(
        self, pairs: Sequence[tuple[FactText, FactText]], *, deadline: float | None = None
    ) -> list[Relation | None]:
        return await self._listed(
            P.RELATE,
            RelateItem,
            pairs,
            self.batch.relate,
            _relate_fields,
            lambda item: (item.id, item.relation),
            deadline,
            unnamed="unrelated",
        )

    async def same_entity(
        self, pairs: Sequence[tuple[str, str]], *, deadline: float | None = None
    ) -> list[bool | None]:
        return await self._listed(
            P.SAME_ENTITY,
            int,
            pairs,
            self.batch.same_entity,
            lambda items: {
                "pairs": "\n".join(
                    f"[{i}] {msgspec.json.encode(P.one_line(a)).decode()} | "
                    f"{msgspec.json.encode(P.one_line(b)).decode()}"
                    for i, (a, b) in items
                )
            },
            lambda n: (n, True),
            deadline,
            unnamed=False,
        )

    async def levels(
        self, facts: Sequence[FactText], dialogue: str, *, deadline: float | None = None
    ) -> list[int | None]:
        recent = dialogue[-C.LLM_JUDGE_DIALOGUE_CHARS :]
        return await self._listed(
            P.LEVELS,
            LevelItem,
            facts,
            self.batch.levels,
            lambda items: {
                "dialogue": recent,
                "facts": "\n".join(f"[{i}] {P.walk_line(f)}" for i, f in items),
            },
            lambda item: (item.id, item.level),
            deadline,
            unnamed=0,
        )

    async def distill(
        self, facts: Sequence[FactText], conversation: str, *, deadline: float | None = None
    ) -> list[bool | None]:
        """Asks only about the items what followed the message names something of
        (`may_have_drawn_on`); the rest are dropped unasked, as a turn that said nothing of
        them did not draw on them (distill read the whole block: 43% of what a selective
        model read in the cost bench)."""
        exchange = P.clip(conversation, C.LLM_JUDGE_DIALOGUE_CHARS)
        asked = [
            i for i, m in enumerate(may_have_drawn_on([f.text for f in facts], conversation)) if m
        ]
        kept: list[bool | None] = [False] * len(facts)
        if not asked:
            return kept
        answers = await self._listed(
            P.DISTILL,
            int,
            [facts[i] for i in asked],
            self.batch.distill,
            lambda items: {
                "conversation": exchange,
                "items": "\n".join(f"[{i}] {P.one_line(f.text)}" for i, f in items),
            },
            lambda n: (n, True),
            deadline,
            unnamed=False,
        )
        for i, answer in zip(asked, answers, strict=True):
            kept[i] = answer
        return kept


def _relate_fields(items: list[tuple[int, tuple[FactText, FactText]]]) -> dict[str, str]:
    """A relate prompt's fields: each fact once ("Fk"), the pairs naming them."""
    label: dict[str, str] = {}
    for _, pair in items:
        for fact in pair:
            label.setdefault(P.fact_line(fact), f"F{len(label) + 1}")
    return {
        "facts": "\n".join(f"{k}: {line}" for line, k in label.items()),
        "pairs": "\n".join(
            f"[{i}] new {label[P.fact_line(new)]}, held {label[P.fact_line(held)]}"
            for i, (new, held) in items
        ),
    }
