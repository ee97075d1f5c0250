"""Over-limit input is refused fast and small (issue 33, "The suite"): each input over one of
the engine's limits (python/fadeway/wire/limits.py; nesting deeper than MAX_JSON_DEPTH), at
the sizes the issue found accepted (a 50 MB message, 100,000 messages, a 10,000-fact note),
is refused with a FadewayError naming the limit, before anything is written. Each refusal is
timed (the goal: under 100 ms; asserted only to its order of magnitude, since the machine is
shared) and its peak allocation measured with tracemalloc against a stated bound. (A note over
max_note_facts or max_note_bytes is not refused but not taken: tests/test_limits.py.)"""

from __future__ import annotations

import functools
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

import fadeway
from conftest import Clock
from fadeway import _constants as C
from fadeway import errors
from helpers import chat_reply, note_call

from .tiers import TIERS, figure, scaled

#: The refusal goal of the issue, and what is asserted on a shared machine: only the order of
#: magnitude (a refusal of 50 MB takes 0.1-0.8 s here, making several passes over the input
#: before its size is checked; one that tokenized or stored it would take far longer).
GOAL_SECONDS = 0.100
ASSERTED_SECONDS = 5.0
#: Peak allocation of a refusal: a few copies of the input's JSON (50 MB refusals peak at 1.5
#: to 4.5 times), plus room for the call itself; never a multiple per message or per fact.
PEAK_PER_INPUT_BYTE = 5
PEAK_FLOOR_BYTES = 32 * 2**20

BIG = 50 * 2**20  # the 50 MB message
USER = {"role": "user", "content": "Hello there."}


def nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"a": [value]}
    return value


def _facts(n: int) -> list[tuple[str, str, str, bool]]:
    return [
        (f"Service {i} runs on host h{i}.", f"service {i}", f"host h{i}", False) for i in range(n)
    ]


class Case:
    """An over-limit input: the call it goes to ("decorate", "report" or "import"), the memory
    (a "chat" or a "responses" one), a builder of the input, and the error, matching `names`."""

    def __init__(
        self,
        call: str,
        memory: str,
        build: Callable[[], Any],
        error: type[errors.FadewayError],
        names: str,
    ) -> None:
        self.call, self.memory, self.build, self.error, self.names = (
            call,
            memory,
            build,
            error,
            names,
        )


def _deep_tools(depth: int) -> dict:
    tool = {"type": "function", "function": {"name": "f", "parameters": nested(depth)}}
    return {"messages": [USER], "tools": [tool]}


def _reply_items(n: int) -> dict:
    item = {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}
    return {"id": "r", "object": "response", "status": "completed", "output": [item] * n}


def _big_export() -> bytes:
    """A one-message export whose message was made 50 MB after it was exported."""
    with fadeway.open(":memory:", clock=Clock(), background=False) as engine:
        engine.memory("imported").decorate({"messages": [USER]})
        doc = fadeway.dumps(engine.memory("imported").export())
    return doc.replace(b"Hello there.", b"x" * BIG)


LIMITED = errors.LimitExceededError
CASES = {
    "a 50 MB user message": Case(
        "decorate",
        "chat",
        lambda: {"messages": [USER, {"role": "user", "content": "x" * BIG}]},
        LIMITED,
        "max_message_bytes",
    ),
    "a 50 MB system message": Case(
        "decorate",
        "chat",
        lambda: {"messages": [{"role": "system", "content": "rule " * (BIG // 5)}, USER]},
        LIMITED,
        "max_message_bytes",
    ),
    "50 MB of Responses instructions": Case(
        "decorate",
        "responses",
        lambda: {"instructions": "rule " * (BIG // 5), "input": "hi"},
        LIMITED,
        "max_message_bytes",
    ),
    "a 50 MB Responses input": Case(
        "decorate", "responses", lambda: {"input": "x" * BIG}, LIMITED, "max_message_bytes"
    ),
    "a request of 100,000 messages": Case(
        "decorate",
        "chat",
        lambda: {"messages": [{"role": "user", "content": f"m{i}"} for i in range(100_000)]},
        LIMITED,
        "max_request_messages",
    ),
    "a 50 MB reply": Case(
        "report", "chat", lambda: chat_reply("y" * BIG), LIMITED, "max_message_bytes"
    ),
    "a reply with a 10,000-fact note": Case(
        "report",
        "chat",
        lambda: chat_reply(None, tool_calls=[note_call("n1", _facts(10_000))]),
        LIMITED,
        "max_message_bytes",
    ),
    "a reply of 100,000 items": Case(
        "report", "responses", lambda: _reply_items(100_000), LIMITED, "max_request_messages"
    ),
    "an export holding a 50 MB message": Case(
        "import", "", _big_export, errors.ExportLimitError, "max_message_bytes"
    ),
}

# Twice the limit (refused by `json_depth` on the encoded text) and the 5,000 levels
# (refused when encoding it recurses too deep); `nested(n)` nests 2n levels.
for depth in (C.MAX_JSON_DEPTH, 2_500):
    CASES[f"tools nested {2 * depth:,} deep"] = Case(
        "decorate",
        "chat",
        functools.partial(_deep_tools, depth),
        errors.InvalidRequestError,
        "nested deeper than",
    )


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    """An engine holding a chat and a responses memory, each with a decorated request
    awaiting its reply."""
    with fadeway.open(tmp_path_factory.mktemp("refusals") / "r.db", clock=Clock()) as eng:
        chat = eng.memory("chat")
        chat.report(chat.decorate({"model": "gpt-4.1", "messages": [USER]}), chat_reply("Hi."))
        eng.requests = {  # type: ignore[attr-defined]
            "chat": chat.decorate({"messages": [{"role": "user", "content": "And?"}]}),
            "responses": eng.memory("responses").decorate({"model": "gpt-4.1", "input": "hi"}),
        }
        yield eng


def json_size(value: Any) -> int | None:
    """The bytes of `value` as JSON (None when it nests too deep to encode)."""
    if isinstance(value, bytes):
        return len(value)
    try:
        return len(msgspec.json.encode(value))
    except RecursionError:
        return None


def state(engine: fadeway.Engine) -> list[bytes]:
    return [fadeway.dumps(engine.memory(m).export()) for m in engine.memory_ids()]


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("name", list(CASES))
def test_an_over_limit_input_is_refused_fast_small_and_before_any_write(engine, name, tier):
    case = CASES[name]
    value = case.build()
    size = json_size(value)
    if case.call == "import":
        call = lambda: engine.import_memory(value)  # noqa: E731
    elif case.call == "decorate":
        call = lambda: engine.memory(case.memory).decorate(value)  # noqa: E731
    else:
        request = engine.requests[case.memory]
        call = lambda: engine.memory(case.memory).report(request, value)  # noqa: E731
    before = state(engine)
    seconds = []
    for _ in range(scaled(tier, 1, 10)):
        start = time.perf_counter()
        with pytest.raises(case.error, match=case.names):
            call()
        seconds.append(time.perf_counter() - start)
    tracemalloc.start()
    try:
        with pytest.raises(case.error, match=case.names):
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert state(engine) == before, "something was written"
    bound = PEAK_PER_INPUT_BYTE * (size or 0) + PEAK_FLOOR_BYTES
    shown = "too deep to encode" if size is None else f"{size / 2**20:.1f} MB of JSON"
    figure(
        f"refused {name} ({shown}) in {max(seconds) * 1e3:.0f} ms "
        f"(the worst of {len(seconds)}; goal {GOAL_SECONDS * 1e3:.0f} ms), peak "
        f"{peak / 2**20:.1f} MB (bound {bound / 2**20:.0f} MB)"
    )
    assert max(seconds) < ASSERTED_SECONDS
    assert peak < bound
