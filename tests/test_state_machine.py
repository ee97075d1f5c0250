"""A hypothesis state machine over the three calls and everything around them (issue 33, the
reliability suite): several memories in both wire formats, callers that resend the whole history
or only what is new, replies with tool calls and with the note the ask wants, the clock moving by
seconds or days, the lane drained or left behind, and export and import.

After every step, for every memory: what it stores is the caller's conversation, message for
message; the caller's request is not changed by decorate; no decorated request carries another
memory's words; every fact comes from a note a reply made; and export, import into another
store and export again give the same document.
"""

from __future__ import annotations

import copy
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import fadeway
from conftest import Clock, open_small
from test_forgetting_properties import Chat, Responses

#: The memories, by id (one hostile), and their wire format.
MEMORIES = {"chat": Chat, "responses": Responses, "x'; DROP TABLE messages;--%_": Chat}
CEILING = 2_000
DAY = 86_400.0


def canary(memory_id: str) -> str:
    """A word only `memory_id`'s conversation says."""
    return "canary" + "".join(c for c in memory_id if c.isalnum())[:8] + "q"


class Caller:
    """One memory's caller: its history as the model saw it, and what it sent last."""

    def __init__(self, wire: type[Chat] | type[Responses]) -> None:
        self.wire = wire
        self.history: list[dict] = []
        self.reported = 0  # how much of the history the memory has stored


class Calls(RuleBasedStateMachine):
    """The memories' callers, one engine, and the store's copies made by export and import."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.clock = Clock()
        self.engine = self._open("main.db")
        self.callers = {m: Caller(wire) for m, wire in MEMORIES.items()}
        self.notes: set[str] = set()  # the facts replies noted
        self.ids = itertools.count()
        self.copies = itertools.count()

    def _open(self, name: str) -> fadeway.Engine:
        return open_small(Path(self.tmp.name) / name, self.clock, ceiling=CEILING)

    @initialize()
    def start(self) -> None:
        assert self.engine.memory_ids() == []

    def teardown(self) -> None:
        self.engine.close()
        self.tmp.cleanup()

    # -- rules --------------------------------------------------------------------------------

    @rule(
        memory_id=st.sampled_from(sorted(MEMORIES)),
        turns=st.integers(1, 6),
        words=st.integers(1, 120),
        whole=st.booleans(),
        tool_step=st.booleans(),
        answers_ask=st.booleans(),
    )
    def talk(self, memory_id: str, turns: int, **how: Any) -> None:
        """`turns` turns of one memory, each as `turn` says."""
        for _ in range(turns):
            self.turn(memory_id, **how)

    def turn(
        self, memory_id: str, words: int, whole: bool, tool_step: bool, answers_ask: bool
    ) -> None:
        """A user message, at most one tool step, and the answer; the note when asked for
        (and `answers_ask`)."""
        caller, mem = self.callers[memory_id], self.engine.memory(memory_id)
        wire, t = caller.wire, next(self.ids)
        said = " ".join([canary(memory_id), *(f"w{t}_{i}" for i in range(words))])
        caller.history.append({"role": "user", "content": said})
        calls = [f"call_{t}"] if tool_step else []
        for step in itertools.count():
            sent = caller.history if whole else caller.history[caller.reported :]
            request = wire.request(copy.deepcopy(sent))
            before = copy.deepcopy(request)
            decorated = mem.decorate(request)
            assert request == before, "decorate changed the caller's request"
            text = json.dumps(decorated)
            for other in MEMORIES:
                if other != memory_id:
                    assert canary(other) not in text, f"{other!r}'s words in {memory_id!r}"
            note = f"note_{t}_{step}" if wire.asks(decorated) and answers_ask else None
            # A chat reply that notes makes no other call (its loop calls the model again).
            made, calls = ([], calls) if note and wire is Chat else (calls, [])
            body, kept = wire.reply(t, step, not made, note, made, reasoning=False)
            if note:
                self.notes.add(f"Fact from note_{t}")
            result = mem.report(decorated, body)
            assert result.stored, result
            if result.note_taken:
                event("a note taken")
            assert wire.call_ids(result) == made
            caller.history += kept
            caller.history += [wire.output(c) for c in made]
            caller.reported = len(caller.history) - len(made)
            if not made and not (note and wire is Chat):
                return

    @rule(seconds=st.sampled_from([5.0, 90.0, 3_600.0, DAY + 60.0]))
    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def drain(self) -> None:
        self.engine.drain()
        for memory_id in self.engine.memory_ids():
            states = {e.state for e in self.engine.memory(memory_id).episodes()}
            for state in states - {"live"}:
                event(f"an episode {state}")

    @rule(memory_id=st.sampled_from(sorted(MEMORIES)))
    def export_and_import(self, memory_id: str) -> None:
        """Export, import into another store, export again: the same document."""
        if memory_id not in self.engine.memory_ids():
            return
        doc = self.engine.memory(memory_id).export()
        copy_engine = self._open(f"copy{next(self.copies)}.db")
        try:
            again = copy_engine.import_memory(fadeway.dumps(doc)).export()
        finally:
            copy_engine.close()
        assert fadeway.dumps(again) == fadeway.dumps(doc)

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def stored_is_the_conversation(self) -> None:
        for memory_id, caller in self.callers.items():
            stored = [json.loads(m.body) for m in self.engine.memory(memory_id).messages()]
            assert stored == caller.history[: caller.reported], memory_id

    @invariant()
    def facts_come_from_replies(self) -> None:
        for memory_id in self.engine.memory_ids():
            facts = {f.text for f in self.engine.memory(memory_id).export().facts}
            assert facts <= self.notes, facts - self.notes

    @invariant()
    def memories_stay_apart(self) -> None:
        for memory_id in self.engine.memory_ids():
            doc = fadeway.dumps(self.engine.memory(memory_id).export())
            text = doc if isinstance(doc, str) else doc.decode()
            for other in MEMORIES:
                if other != memory_id:
                    assert canary(other) not in text


Calls.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.filterwarnings("ignore::ResourceWarning")
class TestCalls(Calls.TestCase):
    pass
