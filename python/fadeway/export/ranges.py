"""Checking every number and time of an export against what fadeway could have written (issue
33, item 3): numbers that the store cannot hold, references to records the export does not
hold, and times no clock fadeway runs on could have given are refused before anything is
written, as `InvalidExportError` naming the field.

What fadeway writes, and so what an export may hold:

- a time is finite Unix seconds within `TIME_RANGE` (what `now_of` accepts of a clock);
- a record's number `n` is 1, 2, ... in the order written, per memory: the numbers of a list
  are exactly 1..its length, so a lookup table sized by the largest is sized by the list;
- a reference (a trace's episode and fact, a fact's note, an edge's entities) names a record
  the export holds; a message position lies within its messages, a turn within its turns;
- a count (tokens, attempts, a part or a level) is a whole number from 0 to `MAX_COUNT`;
- a trace's score, as a judge gave it, is finite and no larger than `MAX_COUNT` either way;
- what the store keeps once (a recall block per turn, an alias per name, an edge per fact, a
  digest of a block it returned) is there once, and a rewritten recall block rewrites a recall
  block the export holds; a request's kept token ratio has the count and the estimate it was
  computed from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable
from typing import Any

from .. import _constants as C
from ..errors import InvalidExportError
from ..records import MemoryExport

__all__ = ["check_numbers"]

Check = Callable[[Any, str], None]


def check_numbers(doc: MemoryExport) -> None:
    """Raise `InvalidExportError` naming the first number or time fadeway could not have
    written (see the module docstring)."""
    messages = len(doc.messages)
    for i, m in enumerate(doc.messages):  # a user message opens a turn: one at most per message
        _count(m.turn, f"messages[{i}].turn", i + 1)
    last_turn = doc.messages[-1].turn if doc.messages else 0
    _time(doc.created_at, "created_at")
    _count(doc.decorated_through, "decorated_through", messages)
    episodes = _numbered(doc.episodes, "episodes")
    notes = _numbered(doc.notes, "notes")
    facts = _numbered(doc.facts, "facts")
    entities = _numbered(doc.entities, "entities")
    passages = _numbered(doc.passages, "passages")
    _numbered(doc.traces, "traces")
    _numbered(doc.requests, "requests")
    seq, turn = _below(messages), _below(last_turn + 2)  # a distill is for the next turn
    fact, entity, episode, note = (
        _within(facts),
        _within(entities),
        _within(episodes),
        _within(notes),
    )
    fields: dict[str, tuple[list[Any], dict[str, Check]]] = {
        "messages": (
            doc.messages,
            {"at": _time, "tokens": _count, "source": _one_of("request", "reply")},
        ),
        "requests": (
            doc.requests,
            {
                "at": _time,
                "estimate": _count,
                "view_len": _count,
                "history_through": _below(messages + 1),
                "provider_tokens": _optional(_count),
            },
        ),
        "episodes": (
            doc.episodes,
            {
                "first_turn": turn,
                "last_turn": turn,
                "start_at": _time,
                "end_at": _time,
                "cut_at": _time,
                "tokens": _count,
            },
        ),
        "traces": (
            doc.traces,
            {
                "episode": episode,
                "fact": _optional(fact),
                "kind": _one_of("encoding", "fact"),
                "score": _score,
                "at": _time,
            },
        ),
        "notes": (doc.notes, {"at": _time}),
        "facts": (doc.facts, {"note": note, "at": _time}),
        "entities": (doc.entities, {"at": _time}),
        "aliases": (doc.aliases, {"entity": entity, "at": _time}),
        "edges": (
            doc.edges,
            {
                "fact": fact,
                "subject": entity,
                "object": entity,
                "merged_into": _optional(fact),
                "at": _time,
            },
        ),
        "retirements": (doc.retirements, {"fact": fact, "by": fact, "at": _time}),
        "passages": (
            doc.passages,
            {"episode": episode, "seq": seq, "part": _count, "turn": turn, "at": _time},
        ),
        "recalls": (
            doc.recalls,
            {
                "turn": turn,
                "at": _time,
                "tokens": _count,
                "facts": _each(fact),
                "passages": _each(_within(passages)),
            },
        ),
        "distills": (doc.distills, {"turn": turn, "at": _time, "tokens": _count}),
        "recall_finals": (doc.recall_finals, {"turn": turn, "at": _time, "tokens": _count}),
        "walks": (doc.walks, {"turn": turn, "at": _time, "levels": _each(_level(fact))}),
        "usage": (
            doc.usage,
            {"at": _time, "tokens_in": _count, "tokens_out": _count, "tokens_cached": _count},
        ),
        "jobs": (doc.jobs, {"created_at": _time, "attempts": _count}),
    }
    for name, (records, checks) in fields.items():
        for i, record in enumerate(records):
            for field, check in checks.items():
                check(getattr(record, field), f"{name}[{i}].{field}")
    for i, (acked, by) in enumerate(doc.acks):
        episode(acked, f"acks[{i}] episode")
        note(by, f"acks[{i}] note")
    _check_kept_once(doc)
    for i, r in enumerate(doc.requests):
        if r.ratio_kept and (r.provider_tokens is None or r.estimate < 1):
            raise InvalidExportError(
                f"the export's requests[{i}] kept a token ratio with provider_tokens "
                f"{r.provider_tokens!r} and estimate {r.estimate}; a kept ratio has a count "
                "and an estimate of at least 1"
            )
    for i, u in enumerate(doc.usage):
        if u.tokens_cached > u.tokens_in:
            raise InvalidExportError(
                f"the export's usage[{i}] has {u.tokens_cached} cached tokens of "
                f"{u.tokens_in} read; the cached are some of those read"
            )


def _check_kept_once(doc: MemoryExport) -> None:
    """What the store keeps once per key is there once; rewritten recall blocks rewrite one."""
    keyed: dict[str, tuple[list[Any], Callable[[Any], Any]]] = {
        "acks": (doc.acks, tuple),
        "aliases": (doc.aliases, lambda a: a.name),
        "edges": (doc.edges, lambda e: e.fact),
        "retirements": (doc.retirements, lambda r: r.fact),
        "recalls": (doc.recalls, lambda r: r.turn),
        "distills": (doc.distills, lambda r: r.turn),
        "recall_finals": (doc.recall_finals, lambda r: r.turn),
        "walks": (doc.walks, lambda w: w.turn),
        "emitted": (doc.emitted, str),
    }
    for name, (records, key) in keyed.items():
        seen: set[Any] = set()
        for i, record in enumerate(records):
            if key(record) in seen:
                raise InvalidExportError(
                    f"the export's {name}[{i}] repeats {key(record)!r}, which an earlier one "
                    "has; the store keeps one"
                )
            seen.add(key(record))
    recalled = {r.turn for r in doc.recalls}
    for name, texts in (("distills", doc.distills), ("recall_finals", doc.recall_finals)):
        for i, text in enumerate(texts):
            if text.turn not in recalled:
                raise InvalidExportError(
                    f"the export's {name}[{i}].turn is {text.turn}, a turn with no recall block"
                )


def _is_int(value: Any) -> bool:
    return type(value) is int  # a bool is no number here


def _time(value: Any, where: str) -> None:
    low, high = C.TIME_RANGE
    if not (isinstance(value, float | int) and math.isfinite(value) and low <= value <= high):
        raise InvalidExportError(
            f"the export's {where} is {value!r}, not a time fadeway could have written "
            f"(finite Unix seconds from {low:.0f} to {high:.0f}, years 1 to 9999)"
        )


def _count(value: Any, where: str, top: int = C.MAX_COUNT) -> None:
    if not (_is_int(value) and 0 <= value <= top):
        raise InvalidExportError(
            f"the export's {where} is {value!r}; it is a whole number from 0 to {top}"
        )


def _score(value: Any, where: str) -> None:
    # A judge's score is kept as given (a scripted judge's may be 10): any it could mean is far
    # within MAX_COUNT either way, and a sum of many stays finite for the activation kernel.
    if not (isinstance(value, float | int) and abs(value) <= C.MAX_COUNT):
        raise InvalidExportError(
            f"the export's {where} is {value!r}; a score lies from -{C.MAX_COUNT} to {C.MAX_COUNT}"
        )


def _below(end: int) -> Check:
    """A position or turn in 0..end-1."""

    def check(value: Any, where: str) -> None:
        if not (_is_int(value) and 0 <= value < end):
            raise InvalidExportError(
                f"the export's {where} is {value!r}; it lies from 0 to {end - 1}"
            )

    return check


def _within(numbers: Collection[int]) -> Check:
    """A reference to one of the export's records, by its number."""

    def check(value: Any, where: str) -> None:
        if not (_is_int(value) and value in numbers):
            raise InvalidExportError(
                f"the export's {where} is {value!r}, which names no record the export holds "
                f"(it numbers them 1 to {len(numbers)})"
            )

    return check


def _one_of(*allowed: str) -> Check:
    def check(value: Any, where: str) -> None:
        if value not in allowed:
            raise InvalidExportError(
                f"the export's {where} is {value!r}; it is one of {', '.join(allowed)}"
            )

    return check


def _optional(check: Check) -> Check:
    def optional(value: Any, where: str) -> None:
        if value is not None:
            check(value, where)

    return optional


def _each(check: Check) -> Check:
    def each(values: Iterable[Any], where: str) -> None:
        for i, value in enumerate(values):
            check(value, f"{where}[{i}]")

    return each


def _level(fact: Check) -> Check:
    """A walk's (fact, level) pair."""

    def check(pair: Any, where: str) -> None:
        fact(pair[0], f"{where} fact")
        _count(pair[1], f"{where} level")

    return check


def _numbered(records: list[Any], name: str) -> range:
    """The numbers `n` of a list fadeway numbered: 1..its length, each once."""
    numbers = range(1, len(records) + 1)
    seen: set[int] = set()
    for i, record in enumerate(records):
        n = record.n
        if not (_is_int(n) and n in numbers) or n in seen:
            raise InvalidExportError(
                f"the export's {name}[{i}].n is {n!r}; fadeway numbers its {len(records)} "
                f"{name} 1 to {len(records)}, each once"
            )
        seen.add(n)
    return numbers
