"""The spec's promises about forgetting, as properties over random conversations.

A hypothesis-drawn run of turns (user messages of varied length, sometimes several before the
model answers, caller tool calls, silences from a minute to more than a day) goes through
decorate and report under a low ceiling, with a scripted model that answers the note ask or
ignores it as the draw says. After every call:

- a tool call is never separated from its output, and the turn in progress is never cut;
- traces are never edited, and forgetting never deletes (messages, facts, traces stay);
- episode states only move forward (live → leaving → sealed → forgotten);
- one fade at a time: nothing starts leaving while an earlier fade's episodes are still leaving;
- a fade reaches its landing unless nothing is left to fade, and with no fade in progress the
  view fits under the ceiling;
- a message after 24 hours of silence is answered from a view faded to the landing.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fadeway
from fadeway.judge import ScriptedJudge

from conftest import Clock
from helpers import call, chat_reply

ORDER = ["live", "leaving", "sealed", "forgotten"]
CEILING = 3_000
DAY = 24 * 3600


@dataclass(frozen=True)
class Turn:
    words: int  # the user message's length
    silence: float  # seconds since the previous message
    tool_calls: int  # caller tool calls the model makes before its answer
    answers_ask: bool  # whether the model answers a note ask this turn
    users: int  # user messages sent before the model answers (each starts a turn)


turns = st.lists(st.builds(
    Turn,
    words=st.integers(3, 120),
    silence=st.sampled_from([30.0, 60.0, 600.0, 7200.0, 23 * 3600.0, 25 * 3600.0]),
    tool_calls=st.integers(0, 2),
    answers_ask=st.booleans(),
    users=st.sampled_from([1, 1, 1, 2, 3]),
), min_size=5, max_size=30)


class FadeLog(logging.Handler):
    """The fades decorate logs, as (landing, projected view), and how many turns slept."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.fades: list[tuple[int, int]] = []
        self.sleeps = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("memory %r: fade to the landing"):
            self.fades.append((record.args[1], record.args[2]))
        elif record.msg.startswith("memory %r: the turn sleeps"):
            self.sleeps += 1


def note_call(call_id: str) -> dict:
    arguments = {"notes": [{"note": f"Fact from {call_id}", "subject": "user",
                            "object": "project", "milestone": False}]}
    return call(call_id, "note", msgspec.json.encode(arguments).decode())


def asks(request: dict) -> bool:
    return any(t.get("function", {}).get("name") == "note" for t in request.get("tools") or [])


def check_calls_answered(messages: list[dict]) -> None:
    """Every tool call in the request has its output right after its step, and every output
    its call."""
    open_calls: set[str] = set()
    for m in messages:
        if m.get("role") == "tool":
            assert m["tool_call_id"] in open_calls, f"output without its call: {m}"
            open_calls.discard(m["tool_call_id"])
        else:
            assert not open_calls, f"calls {open_calls} separated from their outputs"
            open_calls = {c["id"] for c in m.get("tool_calls") or []}
    assert not open_calls, f"calls {open_calls} left unanswered"


def check_forward(before: dict[int, str], after: dict[int, str]) -> None:
    for n, state in after.items():
        assert ORDER.index(state) >= ORDER.index(before.get(n, "live")), (n, before.get(n), state)


def user(t: int, words: int) -> dict:
    return {"role": "user", "content": f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(words))}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns)
def test_forgetting_keeps_its_promises_over_random_conversations(script):
    clock, log = Clock(), FadeLog()
    logger = logging.getLogger("fadeway")
    logger.addHandler(log)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as tmp:
        engine = fadeway.open(Path(tmp) / "f.db", clock=clock, background=False,
                              ceiling=CEILING, judge=ScriptedJudge(), episode_min_tokens=100,
                              episode_max_tokens=400, cut_after_tokens=600)
        try:
            run(engine, engine.memory("m"), clock, log, script)
        finally:
            engine.close()
            logger.removeHandler(log)
            logger.setLevel(old_level)


def run(engine: fadeway.Engine, mem: fadeway.Memory, clock: Clock, log: FadeLog,
        script: list[Turn]) -> None:
    history: list[dict] = []
    states: dict[int, str] = {}
    traces: list = []
    facts: list = []
    for t, turn in enumerate(script):
        clock.advance(turn.silence)
        history += [user(t * 10 + u, turn.words) for u in range(turn.users)]
        turn_start, calls_made, noted = len(history) - 1, 0, False
        while True:
            fades_before, sleeps_before = len(log.fades), log.sleeps
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
            after = {e.n: e.state for e in mem.episodes()}
            check_forward(states, after)
            # One fade at a time: while an earlier fade's episodes are still leaving, nothing
            # starts leaving and nothing is forgotten.
            if {n for n, s in states.items() if s == "leaving"} & {
                    n for n, s in after.items() if s == "leaving"}:
                assert not [n for n, s in after.items() if s != states.get(n, "live")
                            and s in ("leaving", "forgotten")]
            states = after
            # A fade reaches its landing, or stops short only with nothing left to fade.
            for landing, projected in log.fades[fades_before:]:
                assert projected <= landing or not {"live", "sealed"} & set(after.values()), (
                    landing, projected, after)
            # With no fade in progress the view fits under the ceiling.
            if "leaving" not in after.values():
                assert mem.measure(request) <= CEILING
            # Sleep comes only with the first call after 24 hours of silence.
            if log.sleeps > sleeps_before:
                assert turn.silence >= DAY and t > 0 and history[-1] is history[turn_start]
            # The turn in progress is never cut: its user message and every step since close
            # the view, in order (past the blocks and note outputs fadeway adds).
            messages = request["messages"]
            check_calls_answered(messages)
            shown = [m for m in messages if m.get("role") not in ("system", "developer")
                     and not m.get("tool_call_id", "").startswith("note_")]
            assert shown[len(shown) - (len(history) - turn_start):] == history[turn_start:]
            if asks(request) and turn.answers_ask and not noted:
                reply, noted = chat_reply(None, tool_calls=[note_call(f"note_{t}")]), True
            elif calls_made < turn.tool_calls:
                reply = chat_reply(None, tool_calls=[call(f"call_{t}_{calls_made}")])
                calls_made += 1
            else:
                reply = chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(20)))
            result = mem.report(request, reply)
            assert all(c["function"]["name"] != "note" for c in result.tool_calls)
            history.append(reply["choices"][0]["message"])
            history += [{"role": "tool", "tool_call_id": c["id"], "content": "done"}
                        for c in result.tool_calls]
            engine.drain()
            if not reply["choices"][0]["message"].get("tool_calls"):
                break
        doc = mem.export()
        # Forgetting never deletes, and traces are never edited: what was there stays as it was.
        assert len(doc.messages) == len(history)
        assert doc.traces[: len(traces)] == traces
        assert doc.facts[: len(facts)] == facts
        traces, facts = doc.traces, doc.facts
