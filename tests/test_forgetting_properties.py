"""The spec's promises about forgetting, as properties over random conversations.

A hypothesis-drawn run of turns (user messages of varied length, sometimes several before the
model answers, caller tool calls, silences from a minute to more than a day) goes through
decorate and report under a low ceiling, in both wire formats, with a scripted model that
answers the note ask or ignores it as the draw says (in Responses, sometimes with a reasoning
item, and with the note call beside a call of the caller's), with call ids unique or, as some
providers give them, numbered from 0 again in every reply. After every call:

- a tool call is never separated from its output, and the turn in progress is never cut;
- traces are never edited, and forgetting never deletes (messages, facts, traces stay);
- episode states only move forward (live → leaving → sealed → forgotten);
- one fade at a time: nothing starts leaving while an earlier fade's episodes are still leaving;
- a fade reaches its landing unless nothing is left to fade, and with no fade in progress the
  view fits under the ceiling;
- a message after 24 hours of silence is answered from a view faded to the landing.

With a note writer instead of the model, its lane run late or its endpoint down as drawn:
every request fits under the ceiling, and once the writer answers every episode that left has
its note.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fadeway
from conftest import Clock
from fadeway.judge import ScriptedJudge
from fadeway.notes.tool import Note, NoteEntry
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
    with_call: bool  # whether a note call comes beside a call of the caller's (Responses)


turns = st.lists(
    st.builds(
        Turn,
        words=st.integers(3, 120),
        silence=st.sampled_from([30.0, 60.0, 600.0, 7200.0, 23 * 3600.0, 25 * 3600.0]),
        tool_calls=st.integers(0, 2),
        answers_ask=st.booleans(),
        users=st.sampled_from([1, 1, 1, 2, 3]),
        with_call=st.booleans(),
    ),
    min_size=5,
    max_size=30,
)


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


def note_arguments(call_id: str) -> str:
    return msgspec.json.encode(
        {
            "notes": [
                {
                    "note": f"Fact from {call_id}",
                    "subject": "user",
                    "object": "project",
                    "milestone": False,
                }
            ]
        }
    ).decode()


class Chat:
    """Chat Completions: requests, replies and outputs as a caller sends and gets them."""

    key = "messages"

    @staticmethod
    def request(history: list[dict]) -> dict:
        return {"model": "gpt-4.1", "messages": history}

    @staticmethod
    def asks(request: dict) -> bool:
        return any(t.get("function", {}).get("name") == "note" for t in request.get("tools") or [])

    @staticmethod
    def reply(
        t: int, step: int, text: bool, note: str | None, calls: list[str], reasoning: bool
    ) -> tuple[dict, list[dict]]:
        """The reply body and the items the caller keeps of it: a note call alone (`note`, its
        id), the caller's calls, or an answer."""
        if note:
            made = [call(note, "note", note_arguments(f"note_{t}"))]
            body = chat_reply(None, tool_calls=made)
        elif calls:
            body = chat_reply(None, tool_calls=[call(c) for c in calls])
        else:
            body = chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(20)))
        return body, [body["choices"][0]["message"]]

    @staticmethod
    def output(call_id: str) -> dict:
        return {"role": "tool", "tool_call_id": call_id, "content": "done"}

    @staticmethod
    def call_ids(result: fadeway.ReportResult) -> list[str]:
        assert all(c["function"]["name"] != "note" for c in result.tool_calls)
        return [c["id"] for c in result.tool_calls]

    @staticmethod
    def made(m: dict) -> dict[str, bool]:
        """The calls a message makes, by id: whether each is a note call."""
        return {c["id"]: c["function"]["name"] == "note" for c in m.get("tool_calls") or []}

    @staticmethod
    def answers(m: dict) -> str | None:
        return m.get("tool_call_id")

    @staticmethod
    def check_calls_answered(messages: list[dict]) -> None:
        """Every tool call has its output right after its step, and every output its call."""
        open_calls: set[str] = set()
        for m in messages:
            if m.get("role") == "tool":
                assert m["tool_call_id"] in open_calls, f"output without its call: {m}"
                open_calls.discard(m["tool_call_id"])
            else:
                assert not open_calls, f"calls {open_calls} separated from their outputs"
                open_calls = {c["id"] for c in m.get("tool_calls") or []}
        assert not open_calls, f"calls {open_calls} left unanswered"


class Responses:
    """The Responses API: items in and out."""

    key = "input"

    @staticmethod
    def request(history: list[dict]) -> dict:
        return {"model": "gpt-4.1", "input": history, "instructions": "Be brief."}

    @staticmethod
    def asks(request: dict) -> bool:
        return any(t.get("name") == "note" for t in request.get("tools") or [])

    @staticmethod
    def reply(
        t: int, step: int, text: bool, note: str | None, calls: list[str], reasoning: bool
    ) -> tuple[dict, list[dict]]:
        """The reply: a reasoning item if drawn, the note call (`note`, its id), the answer or
        the caller's calls (beside the note call when both are drawn)."""
        items: list[dict] = []
        if reasoning:
            items.append({"type": "reasoning", "id": f"rs_{t}_{step}", "summary": []})
        if note:
            items.append(Responses._call(note, "note", note_arguments(f"note_{t}")))
        if text:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{t}_{step}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {
                            "type": "output_text",
                            "annotations": [],
                            "logprobs": [],
                            "text": f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(20)),
                        }
                    ],
                }
            )
        items += [Responses._call(c, "lookup", "{}") for c in calls]
        body = {
            "id": f"resp_{t}_{step}",
            "object": "response",
            "status": "completed",
            "output": items,
            "usage": {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110},
        }
        return body, items

    @staticmethod
    def _call(call_id: str, name: str, arguments: str) -> dict:
        return {
            "type": "function_call",
            "id": f"fc_{call_id}",
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
            "status": "completed",
        }

    @staticmethod
    def output(call_id: str) -> dict:
        return {"type": "function_call_output", "call_id": call_id, "output": "done"}

    @staticmethod
    def call_ids(result: fadeway.ReportResult) -> list[str]:
        assert all(c["name"] != "note" for c in result.tool_calls)
        return [c["call_id"] for c in result.tool_calls]

    @staticmethod
    def made(m: dict) -> dict[str, bool]:
        return {m["call_id"]: m["name"] == "note"} if m.get("type") == "function_call" else {}

    @staticmethod
    def answers(m: dict) -> str | None:
        return m["call_id"] if m.get("type") == "function_call_output" else None

    @staticmethod
    def check_calls_answered(items: list[dict]) -> None:
        """Every function call is answered once, after its reply's calls and before anything
        else (ids may repeat across replies), and every output answers such a call."""
        waiting: set[str] = set()
        for m in items:
            if m.get("type") == "function_call":
                assert m["call_id"] not in waiting, m
                waiting.add(m["call_id"])
            elif m.get("type") == "function_call_output":
                assert m["call_id"] in waiting, m
                waiting.discard(m["call_id"])
            elif m.get("type") != "reasoning":
                assert not waiting, f"calls {waiting} separated from their outputs"
        assert not waiting, f"calls {waiting} left unanswered"


def theirs(items: list[dict], wire: type[Chat] | type[Responses]) -> list[dict]:
    """`items` without fadeway's blocks and its outputs for its note calls: an output answers
    the latest call of its id before it."""
    note: dict[str, bool] = {}
    out = []
    for m in items:
        answered = wire.answers(m)
        if m.get("role") in ("system", "developer") or (answered and note.get(answered)):
            continue
        note.update(wire.made(m))
        out.append(m)
    return out


def check_forward(before: dict[int, str], after: dict[int, str]) -> None:
    for n, state in after.items():
        assert ORDER.index(state) >= ORDER.index(before.get(n, "live")), (n, before.get(n), state)


def user(t: int, words: int) -> dict:
    return {"role": "user", "content": f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(words))}


@pytest.mark.parametrize("wire", [Chat, Responses], ids=["chat", "responses"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=turns, reused_ids=st.booleans())
def test_forgetting_keeps_its_promises_over_random_conversations(wire, script, reused_ids):
    clock, log = Clock(), FadeLog()
    logger = logging.getLogger("fadeway")
    logger.addHandler(log)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    with tempfile.TemporaryDirectory() as tmp:
        engine = fadeway.open(
            Path(tmp) / "f.db",
            clock=clock,
            background=False,
            ceiling=CEILING,
            judge=ScriptedJudge(),
            episode_min_tokens=100,
            episode_max_tokens=400,
            cut_after_tokens=600,
        )
        try:
            run(engine, engine.memory("m"), clock, log, script, wire, reused_ids)
        finally:
            engine.close()
            logger.removeHandler(log)
            logger.setLevel(old_level)


def run(
    engine: fadeway.Engine,
    mem: fadeway.Memory,
    clock: Clock,
    log: FadeLog,
    script: list[Turn],
    wire: type[Chat] | type[Responses],
    reused_ids: bool,
) -> None:
    history: list[dict] = []
    states: dict[int, str] = {}
    traces: list = []
    facts: list = []
    for t, turn in enumerate(script):
        clock.advance(turn.silence)
        history += [user(t * 10 + u, turn.words) for u in range(turn.users)]
        turn_start, calls_made, noted, step = len(history) - 1, 0, False, 0
        while True:
            fades_before, sleeps_before = len(log.fades), log.sleeps
            request = mem.decorate(wire.request(history))
            after = {e.n: e.state for e in mem.episodes()}
            check_forward(states, after)
            # One fade at a time: while an earlier fade's episodes are still leaving, nothing
            # starts leaving and nothing is forgotten.
            if {n for n, s in states.items() if s == "leaving"} & {
                n for n, s in after.items() if s == "leaving"
            }:
                assert not [
                    n
                    for n, s in after.items()
                    if s != states.get(n, "live") and s in ("leaving", "forgotten")
                ]
            states = after
            # A fade reaches its landing, or stops short only with nothing left to fade.
            for landing, projected in log.fades[fades_before:]:
                assert projected <= landing or not {"live", "sealed"} & set(after.values()), (
                    landing,
                    projected,
                    after,
                )
            # With no fade in progress the view fits under the ceiling.
            if "leaving" not in after.values():
                assert mem.measure(request) <= CEILING
            # Sleep comes only with the first call after 24 hours of silence.
            if log.sleeps > sleeps_before:
                assert turn.silence >= DAY and t > 0 and history[-1] is history[turn_start]
            # The turn in progress is never cut: its user message and every step since close
            # the view, in order (past the blocks and note outputs fadeway adds).
            items = request[wire.key]
            wire.check_calls_answered(items)
            shown = theirs(items, wire)
            mine = history[turn_start:]
            assert shown[len(shown) - len(mine) :] == mine
            note = wire.asks(request) and turn.answers_ask and not noted
            calls = []
            if calls_made < turn.tool_calls and (
                not note or (wire is Responses and turn.with_call)
            ):
                calls = [f"call_{int(note)}" if reused_ids else f"call_{t}_{calls_made}"]
                calls_made += 1
            text = not calls and (wire is Responses or not note)
            note_id = ("call_0" if reused_ids else f"note_{t}") if note else None
            reply, kept = wire.reply(t, step, text, note_id, calls, reasoning=turn.with_call)
            noted, step = noted or note, step + 1
            result = mem.report(request, reply)
            assert wire.call_ids(result) == calls
            history += kept
            history += [wire.output(c) for c in calls]
            engine.drain()
            if not calls and not (note and wire is Chat):
                break
        doc = mem.export()
        # Forgetting never deletes, and traces are never edited: what was there stays as it was.
        assert len(doc.messages) == len(history)
        assert doc.traces[: len(traces)] == traces
        assert doc.facts[: len(facts)] == facts
        traces, facts = doc.traces, doc.facts


@dataclass(frozen=True)
class LateTurn:
    words: int  # the user message's length
    silence: float  # seconds since the previous message
    tool_calls: int  # caller tool calls the model makes before its answer
    lane_runs: bool  # whether the lane runs after the turn
    writer_up: bool  # whether the note writer's endpoint answers when it does


late_turns = st.lists(
    st.builds(
        LateTurn,
        words=st.integers(3, 120),
        silence=st.sampled_from([30.0, 60.0, 600.0, 25 * 3600.0]),
        tool_calls=st.integers(0, 2),
        lane_runs=st.booleans(),
        writer_up=st.booleans(),
    ),
    min_size=5,
    max_size=30,
)


class LateWriter(fadeway.NoteWriter):
    """A writer behind an endpoint that refuses while it is down; else one fact a note (few
    facts keep the lane's work small)."""

    name = "late"
    up = True

    async def write(self, ask, messages, *, deadline=None):
        if not self.up:
            raise fadeway.errors.NoteWriterError("the endpoint refused")
        first, last = messages[0].turn, messages[-1].turn
        fact = NoteEntry(f"Turns {first} to {last} were noted.", f"turn {first}", "note", False)
        return Note([fact])


@pytest.mark.parametrize("wire", [Chat, Responses], ids=["chat", "responses"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=late_turns)
def test_with_a_note_writer_every_request_fits_however_late_the_note(wire, script):
    """A note writer answers in the lane, which runs late or finds the writer down, as the
    draw says: every request fits under the ceiling (no turn here is too large for it),
    episode states only move forward, the turn in progress stays whole, nothing is deleted,
    and once the writer answers no episode is left waiting for its note."""
    clock, writer = Clock(), LateWriter()
    with tempfile.TemporaryDirectory() as tmp:
        engine = fadeway.open(
            Path(tmp) / "w.db",
            clock=clock,
            background=False,
            ceiling=CEILING,
            judge=ScriptedJudge(),
            note_writer=writer,
            episode_min_tokens=100,
            episode_max_tokens=400,
            cut_after_tokens=600,
        )
        try:
            mem, history, states = engine.memory("m"), [], {}
            for t, turn in enumerate(script):
                clock.advance(turn.silence)
                history.append(user(t, turn.words))
                turn_start = len(history) - 1
                for step in range(turn.tool_calls + 1):
                    request = mem.decorate(wire.request(history))
                    after = {e.n: e.state for e in mem.episodes()}
                    check_forward(states, after)
                    states = after
                    assert mem.measure(request) <= CEILING
                    assert not wire.asks(request)  # the writer answers; the model is not asked
                    items = request[wire.key]
                    wire.check_calls_answered(items)
                    shown = theirs(items, wire)
                    mine = history[turn_start:]
                    assert shown[len(shown) - len(mine) :] == mine
                    calls = [f"call_{t}_{step}"] if step < turn.tool_calls else []
                    reply, kept = wire.reply(t, step, not calls, None, calls, reasoning=False)
                    mem.report(request, reply)
                    history += kept + [wire.output(c) for c in calls]
                writer.up = turn.writer_up
                if turn.lane_runs:
                    engine.drain()
            # The writer answers: the next call queues its job again (one that failed for good
            # waits to be revived), and the lane runs it: every episode that left has its note.
            writer.up = True
            clock.advance(60)
            history.append(user(len(script), 10))
            assert mem.measure(mem.decorate(wire.request(history))) <= CEILING
            engine.drain()
            doc = mem.export()
            noted = {episode for episode, _ in doc.acks}
            assert {e.n for e in doc.episodes if e.state != "live"} <= noted
            assert len(doc.messages) == len(history)
        finally:
            engine.close()
