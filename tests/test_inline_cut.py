"""A fade that finds history uncut: the cut is planned between two write transactions, so that
the judge (perhaps a remote model) never runs while the store's write lock is held."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fadeway
from conftest import Clock
from fadeway.decorate import call as decorate_call
from fadeway.errors import JudgeTimeout
from fadeway.judge import ScriptedJudge
from fadeway.mirror.history import History
from fadeway.wire.canonical import plain
from helpers import call, chat_reply, note_call

CEILING = 3_000


class Killed(BaseException):
    """The process dying mid-call (as a signal would end it), which no fallback catches; an
    ordinary error of the judge's falls back to sizes instead."""


class LockProbe(ScriptedJudge):
    """A judge that, on every boundaries call, tries to take the store's write lock from
    another connection; `then` runs once after the first call (another process's write)."""

    def __init__(self, path: Path, then=None, fail: bool = False) -> None:
        super().__init__()
        self.path, self.then, self.fail = path, then, fail
        self.lock_free: list[bool] = []

    async def boundaries(self, units, **kwargs):
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=0)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
            self.lock_free.append(True)
        except sqlite3.OperationalError:
            self.lock_free.append(False)
        finally:
            conn.close()
        if self.fail:
            raise Killed("the judge's process was killed")
        if self.then is not None:
            then, self.then = self.then, None
            then()
        return await super().boundaries(units, **kwargs)


def conversation(turns: int) -> list[dict]:
    out = []
    for t in range(turns):
        out.append(
            {"role": "user", "content": f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(40))}
        )
        out.append(
            {
                "role": "assistant",
                "content": f"Answer {t}: " + " ".join(f"r{t}_{i}" for i in range(30)),
            }
        )
    out.append({"role": "user", "content": "And now?"})
    return out


def open_engine(path: Path, clock, judge, ceiling: int = CEILING) -> fadeway.Engine:
    return fadeway.open(
        path,
        clock=clock,
        background=False,
        ceiling=ceiling,
        judge=judge,
        episode_min_tokens=100,
        episode_max_tokens=400,
        cut_after_tokens=600,
    )


def episodes_of(engine: fadeway.Engine) -> list[tuple[int, int, str]]:
    return [(e.first_seq, e.last_seq, e.state) for e in engine.memory("m").episodes()]


def test_the_cut_a_fade_needs_is_planned_while_the_store_is_unlocked(tmp_path, clock):
    path = tmp_path / "m.db"
    judge = LockProbe(path)
    with open_engine(path, clock, judge) as engine:
        request = engine.memory("m").decorate({"model": "gpt-4.1", "messages": conversation(20)})
        states = [s for _, _, s in episodes_of(engine)]
    assert judge.lock_free == [True]  # one plan, made while any other writer could write
    assert "leaving" in states  # and the fade ran on the history it cut
    assert any(t["function"]["name"] == "note" for t in request["tools"])


def test_planning_between_transactions_decides_as_planning_inside_one(tmp_path, clock):
    def run(name: str, inline: bool):
        path = tmp_path / f"{name}.db"
        judge = LockProbe(path)
        real = decorate_call.forget_and_assemble

        def first_inline(*args, **kwargs):
            return real(*args, **{**kwargs, "inline": inline or kwargs.get("inline", True)})

        with mock.patch.object(decorate_call, "forget_and_assemble", first_inline):
            with open_engine(path, clock, judge) as engine:
                mem = engine.memory("m")
                history = conversation(20)
                requests = [mem.decorate({"model": "gpt-4.1", "messages": history})]
                history.append({"role": "assistant", "content": "Noted."})
                history += conversation(12)[:-1]
                requests.append(mem.decorate({"model": "gpt-4.1", "messages": history}))
                return requests, episodes_of(engine), judge.lock_free

    split_requests, split_episodes, split_free = run("split", inline=False)
    inline_requests, inline_episodes, inline_free = run("inline", inline=True)
    assert split_requests == inline_requests and split_episodes == inline_episodes
    assert split_free and all(split_free) and not any(inline_free)


def test_a_plan_made_stale_by_another_writer_is_made_again(tmp_path, clock):
    path = tmp_path / "m.db"
    others = open_engine(path, clock, ScriptedJudge(), ceiling=10_000_000)  # another process
    history = conversation(20)
    others.memory("m").decorate({"model": "gpt-4.1", "messages": history[:-1]})  # no fade there

    def other_writes():
        others.memory("m").decorate(
            {
                "model": "gpt-4.1",
                "messages": [{"role": "user", "content": "From the other process."}],
            }
        )

    judge = LockProbe(path, then=other_writes)
    cleared = []
    real_clear = History.clear

    def clear(mirror):
        cleared.append(mirror)
        real_clear(mirror)

    with open_engine(path, clock, judge) as engine:
        mem = engine.memory("m")
        with mock.patch.object(History, "clear", clear):
            request = mem.decorate({"model": "gpt-4.1", "messages": history[-1:]})
        episodes = episodes_of(engine)
        stored = [m.body for m in mem.messages()]
        # Each rolled-back attempt's message was taken out of this process's mirror again:
        # never read again whole, and never taken for the other process's message.
        assert not any(mirror is engine.services.mirrors.peek("m") for mirror in cleared)
        fresh = History()
        fresh.extend(mem.messages())
        assert engine.services.mirrors.peek("m") == fresh
    others.close()
    # The message the other process stored changed the history under the first plan: it was
    # planned again from what the store then held, and this decorate's message follows it.
    assert judge.lock_free == [True, True]
    assert len(stored) == len(history) + 1 and b"From the other process." in stored[-2]
    assert [m["content"] for m in request["messages"][-3:-1]] == [
        "From the other process.",
        "And now?",
    ]  # then the note ask
    # The episodes tile the history they cut, in order, and the fade ran on them.
    assert all(a[1] + 1 == b[0] for a, b in zip(episodes, episodes[1:], strict=False))
    assert episodes[0][0] == 0 and "leaving" in {s for _, _, s in episodes}


def test_a_decorate_that_dies_while_planning_writes_nothing(tmp_path, clock):
    path = tmp_path / "m.db"
    judge = LockProbe(path, fail=True)
    with open_engine(path, clock, judge) as engine:
        mem = engine.memory("m")
        with pytest.raises(Killed, match="killed"):
            mem.decorate({"model": "gpt-4.1", "messages": conversation(20)})
        assert mem.messages() == [] and not episodes_of(engine)  # all or nothing
        judge.fail = False
        request = mem.decorate({"model": "gpt-4.1", "messages": conversation(20)})
        assert "leaving" in {s for _, _, s in episodes_of(engine)}
        assert any(t["function"]["name"] == "note" for t in request["tools"])


def test_rolling_the_mirror_back_is_as_if_it_was_never_extended(tmp_path, clock):
    with open_engine(tmp_path / "m.db", clock, ScriptedJudge(), ceiling=10_000_000) as engine:
        mem = engine.memory("m")
        mem.decorate({"messages": [{"role": "user", "content": "Look up LEG-412."}]})
        mem.report(
            {"messages": [{"role": "user", "content": "Look up LEG-412."}]},
            chat_reply(
                None,
                tool_calls=[
                    call("call_1"),
                    note_call("note_1", [("LEG-412 is open", "LEG-412", "open", False)]),
                ],
            ),
        )
        mem.decorate(
            {
                "messages": [
                    {"role": "tool", "tool_call_id": "call_1", "content": "open"},
                    {"role": "user", "content": "Thanks."},
                ]
            }
        )
        rows = mem.messages()
    full = History()
    full.extend(rows)
    assert full.note_calls and full.makers  # what a roll back has to take out
    waits = []
    for count in range(len(rows), -1, -1):
        full.truncate(count)
        fresh = History()
        fresh.extend(rows[:count])
        assert full == fresh, count
        assert full.pending.waiting() == fresh.pending.waiting(), count
        waits.append(bool(full.pending))
    assert any(waits)  # at the count where call_1 waits for its output (the note does not)


@settings(max_examples=20, deadline=None)
@given(st.integers(10, 24), st.sampled_from(["nothing", "a message", "a cut", "a crash"]))
def test_whatever_happens_while_a_cut_is_planned_the_store_stays_whole(turns, meanwhile):
    with tempfile.TemporaryDirectory() as tmp:
        path, clock = Path(tmp) / "m.db", Clock()
        others = open_engine(path, clock, ScriptedJudge(), ceiling=10_000_000)  # no fade there
        prior = conversation(turns)[:-1]
        others.memory("m").decorate({"model": "gpt-4.1", "messages": prior})
        theirs = {"role": "user", "content": "From the other process."}

        def other_writes():
            if meanwhile == "a message":
                others.memory("m").decorate({"model": "gpt-4.1", "messages": [theirs]})
            elif meanwhile == "a cut":
                others.memory("m").cut()

        judge = LockProbe(path, then=other_writes, fail=meanwhile == "a crash")
        ours = {"role": "user", "content": "And now?"}
        with open_engine(path, clock, judge) as engine:
            mem = engine.memory("m")
            try:
                mem.decorate({"model": "gpt-4.1", "messages": [ours]})
            except Killed:
                assert meanwhile == "a crash"
                # All or nothing: not a message, an episode or a request of this decorate.
                assert len(mem.messages()) == len(prior) and not episodes_of(others)
                judge.fail = False
                mem.decorate({"model": "gpt-4.1", "messages": [ours]})
            stored = [plain(m.body)["content"] for m in mem.messages()]
            episodes = episodes_of(engine)
            turn_start = max(i for i, m in enumerate(mem.messages()) if m.side == "user")
        others.close()
        assert judge.lock_free and all(judge.lock_free)
        extra = [theirs["content"]] if meanwhile == "a message" else []
        assert stored == [m["content"] for m in prior] + extra + [ours["content"]]
        # The episodes tile the closed history from its start, never reach the turn in
        # progress, and the fade ran on them.
        assert episodes and episodes[0][0] == 0 and episodes[-1][1] < turn_start
        assert all(a[1] + 1 == b[0] for a, b in zip(episodes, episodes[1:], strict=False))
        assert "leaving" in {s for _, _, s in episodes}


def tool_conversation(turns: int) -> list[dict]:
    """Turns of a question, a tool call, its output and an answer; the last turn is in progress
    with a call answered there."""
    out: list[dict] = []
    for t in range(turns + 1):
        out.append(
            {"role": "user", "content": f"Turn {t}: " + " ".join(f"q{t}_{i}" for i in range(20))}
        )
        out.append({"role": "assistant", "content": None, "tool_calls": [call(f"call_{t}")]})
        out.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{t}",
                "content": " ".join(f"o{t}_{i}" for i in range(30)),
            }
        )
        if t < turns:
            out.append(
                {
                    "role": "assistant",
                    "content": f"Answer {t}: " + " ".join(f"r{t}_{i}" for i in range(10)),
                }
            )
    return out


@pytest.mark.parametrize("error", [JudgeTimeout("too slow"), RuntimeError("judge broke")])
def test_an_inline_cut_with_no_judgment_makes_episodes_near_the_largest_size(
    tmp_path, clock, error
):
    def fail(units):
        raise error

    judge = ScriptedJudge(boundaries=fail)
    with open_engine(tmp_path / "m.db", clock, judge) as engine:
        mem = engine.memory("m")
        mem.decorate({"model": "gpt-4.1", "messages": tool_conversation(24)})
        episodes, units = mem.episodes(), mem.units()
        stored = mem.messages()
        turn_start = max(m.seq for m in stored if m.role == "user")
    assert len(episodes) >= 3
    largest = max(u.tokens for u in units)
    sizes = [e.tokens for e in episodes]
    # Each episode took whole units while the next fit (the last two may be rebalanced): near
    # the largest size (400), where flat scores gave episodes of the smallest (100).
    assert all(s <= 400 for s in sizes) and all(s > 400 - largest for s in sizes[:-2])
    assert sum(sizes[:-1]) / (len(sizes) - 1) > 300
    # Whole units only: every call with its output, and the turn in progress never cut.
    starts = {u.first for u in units}
    assert all(e.first_seq in starts for e in episodes)
    assert episodes[-1].last_seq < turn_start
    for e in episodes:
        inside = stored[e.first_seq : e.last_seq + 1]
        made = {c for m in inside for c in m.calls}
        assert made and made == {m.answers for m in inside if m.answers}
