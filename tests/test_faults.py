"""A failure at any store call leaves nothing behind: the same conversation, with an exception
raised at random reads and writes of decorate, report and the lane (the transaction rolls back,
the caller or the lane tries again), ends in the same store as without one.

What it guards: every write is one transaction, a failed one resets the mirrors (so no rolled
back row is served from memory), and a lane job that failed runs again whole.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fadeway
from conftest import Clock
from fadeway import _constants as C
from fadeway.judge import ScriptedJudge
from fadeway.store.sqlite import _SQLiteTransaction
from helpers import NOTE_ASKING, call, chat_reply


class Fault(Exception):
    """The failure injected."""


class Faults:
    """Raises `Fault` at the given store calls (counted from 1 over a run), while armed."""

    def __init__(self, at: set[int]) -> None:
        self.at, self.calls, self.raised, self.armed = at, 0, 0, False

    def tick(self) -> None:
        if self.armed:
            self.calls += 1
            if self.calls in self.at:
                self.raised += 1
                raise Fault(self.calls)

    def retry(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` again until it goes through, as a caller would after an error."""
        for _ in range(100):
            self.armed = True
            try:
                return fn(*args)
            except Fault:
                continue
            finally:
                self.armed = False
        raise AssertionError("a call failed a hundred times")


@contextlib.contextmanager
def injected(faults: Faults) -> Iterator[None]:
    """Every public method of the SQLite transaction ticks `faults` first; a lane job is never
    given up (the failures are as many as the draw says, and a job may meet several)."""
    names = {
        n
        for cls in _SQLiteTransaction.__mro__[:-1]
        for n, f in vars(cls).items()
        if callable(f) and not n.startswith("_")
    }
    saved = {n: getattr(_SQLiteTransaction, n) for n in names}

    def ticking(method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            faults.tick()
            return method(self, *args, **kwargs)

        return wrapper

    for name, method in saved.items():
        setattr(_SQLiteTransaction, name, ticking(method))
    attempts, C.JOB_MAX_ATTEMPTS = C.JOB_MAX_ATTEMPTS, 1_000
    try:
        yield
    finally:
        C.JOB_MAX_ATTEMPTS = attempts
        for name, method in saved.items():
            setattr(_SQLiteTransaction, name, method)


def note_call(call_id: str) -> dict:
    arguments = {
        "notes": [
            {
                "note": f"Fact from {call_id}.",
                "subject": "user",
                "object": f"topic {call_id}",
                "milestone": False,
            }
        ]
    }
    return call(call_id, "note", msgspec.json.encode(arguments).decode())


def converse(path: Path, script: list[tuple[int, float, int]], faults: Faults) -> bytes:
    """The conversation `script` under a low ceiling; its export."""
    clock = Clock()
    engine = fadeway.open(
        path,
        clock=clock,
        background=False,
        judge=ScriptedJudge(),
        **NOTE_ASKING,
    )
    history: list[dict] = []
    try:
        mem = engine.memory("m")
        for t, (words, silence, tool_calls) in enumerate(script):
            clock.advance(silence)
            history.append(
                {
                    "role": "user",
                    "content": f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(words)),
                }
            )
            made, noted = 0, False
            while True:
                request = faults.retry(mem.decorate, {"model": "gpt-4.1", "messages": history})
                asked = any(tool["function"]["name"] == "note" for tool in request.get("tools", ()))
                if asked and not noted:
                    reply, noted = chat_reply(None, tool_calls=[note_call(f"note_{t}")]), True
                elif made < tool_calls:
                    reply, made = chat_reply(None, tool_calls=[call(f"call_{t}_{made}")]), made + 1
                else:
                    reply = chat_reply(f"answer {t} " + " ".join(f"r{i}" for i in range(20)))
                result = faults.retry(mem.report, request, reply)
                history.append(reply["choices"][0]["message"])
                history += [
                    {"role": "tool", "tool_call_id": c["id"], "content": "done"}
                    for c in result.tool_calls
                ]
                faults.retry(engine.drain)
                if not reply["choices"][0]["message"].get("tool_calls"):
                    break
        return msgspec.json.encode(mem.export())
    finally:
        engine.close()


turns = st.lists(
    st.tuples(st.integers(3, 120), st.sampled_from([30.0, 7200.0, 25 * 3600.0]), st.integers(0, 2)),
    min_size=4,
    max_size=12,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns, st.sets(st.integers(1, 1500), min_size=1, max_size=25))
def test_a_failure_at_any_store_call_changes_nothing_once_the_call_is_retried(script, at):
    with tempfile.TemporaryDirectory() as tmp:
        clean = converse(Path(tmp) / "clean.db", script, Faults(set()))
        faults = Faults(at)
        with injected(faults):
            faulty = converse(Path(tmp) / "faulty.db", script, faults)
    assert faulty == clean, f"{faults.raised} failures raised"
