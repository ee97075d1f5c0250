"""Malformed input for property tests: valid documents (requests, replies, exports) with one
value replaced by a wrong one (issue 33). `mutated` draws the path and the value; `WRONG_VALUES`
are other types, numbers out of any range fadeway writes, what JSON cannot carry, and nesting
deeper than recursion goes."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

__all__ = ["WRONG_VALUES", "Wrong", "json_paths", "mutated", "nested", "replaced"]


def nested(depth: int, kind: str = "dict") -> Any:
    """A JSON value `depth` levels deep: {"a": {"a": ...}} or [[...]]."""
    value: Any = {} if kind == "dict" else []
    for _ in range(depth):
        value = {"a": value} if kind == "dict" else [value]
    return value


class Wrong:
    """A value of the wrong type or range, made fresh each time (a mutation may keep it), and
    shown by its name (a value nested 5,000 deep has no printable repr)."""

    def __init__(self, name: str, make: Any) -> None:
        self.name = name
        self.make = make

    def __repr__(self) -> str:
        return self.name


#: What a careless or hostile caller puts where a valid value was: other types, numbers out of
#: any range fadeway writes, what JSON cannot carry, and nesting deeper than recursion goes.
WRONG_VALUES = (
    Wrong("[]", list),
    Wrong("['system']", lambda: ["system"]),
    Wrong("[1]", lambda: [1]),
    Wrong("-1", lambda: -1),
    Wrong("5", lambda: 5),
    Wrong("2**31", lambda: 2**31),
    Wrong("2**63", lambda: 2**63),
    Wrong("2**70", lambda: 2**70),
    Wrong("-(2**63) - 1", lambda: -(2**63) - 1),
    Wrong("1.5", lambda: 1.5),
    Wrong("1e17", lambda: 1e17),
    Wrong("1e308", lambda: 1e308),
    Wrong("nan", lambda: float("nan")),
    Wrong("-inf", lambda: float("-inf")),
    Wrong("None", lambda: None),
    Wrong("True", lambda: True),
    Wrong("{}", dict),
    Wrong("{'x': 1}", lambda: {"x": 1}),
    Wrong("object()", object),
    Wrong("'\\ud800'", lambda: "\ud800"),
    Wrong("'x\\udfffy'", lambda: "x\udfffy"),
    Wrong("b'x'", lambda: b"x"),
    Wrong("dict nested 5000 deep", lambda: nested(5_000, "dict")),
    Wrong("list nested 5000 deep", lambda: nested(5_000, "list")),
    Wrong("dict nested 500 deep", lambda: nested(500, "dict")),
    Wrong("JSON text nested 5000 deep", lambda: "[" * 5_000 + "]" * 5_000),
)


def json_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path (keys and indexes) of every value inside `value`, itself excluded."""
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return out
    for key, item in items:
        out.append((*prefix, key))
        out.extend(json_paths(item, (*prefix, key)))
    return out


def replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A deep copy of `value` with the value at `path` set to `new`."""
    value = copy.deepcopy(value)
    target = value
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = new
    return value


@st.composite
def mutated(
    draw: st.DrawFn,
    documents: st.SearchStrategy[Any],
    keys: tuple[str, ...] = (),
    wrong: tuple[Wrong, ...] = WRONG_VALUES,
) -> tuple[tuple[Any, ...], Wrong, Any]:
    """(path, wrong value, document): a drawn document with one value replaced by one of
    `wrong`, at any path, or (half the time, when `keys` are given) at one of the top-level
    `keys`."""
    document = draw(documents)
    if keys and draw(st.booleans()):
        path: tuple[Any, ...] = (draw(st.sampled_from(keys)),)
    else:
        path = draw(st.sampled_from(json_paths(document)))
    bad = draw(st.sampled_from(wrong))
    return path, bad, replaced(document, path, bad.make())
