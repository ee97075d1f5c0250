"""Units: a call is never separated from its output, and every user message starts a unit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fadeway.episodes.units import next_turns, units
from fadeway.records import MessageRecord
from fadeway.wire import Side


@st.composite
def histories(draw):
    """Stored histories with calls answered right away or after other messages."""
    rows, open_calls, n_calls = [], [], 0
    for _ in range(draw(st.integers(0, 40))):
        choices = ["user", "system", "assistant", "call"] + (["output"] * 3 if open_calls else [])
        what = draw(st.sampled_from(choices))
        calls, answers = (), None
        if what == "call":
            k = draw(st.integers(1, 3))
            calls = tuple(f"c{n_calls + i}" for i in range(k))
            n_calls += k
            open_calls.extend(calls)
            side = Side.ASSISTANT
        elif what == "output":
            answers = open_calls.pop(draw(st.integers(0, len(open_calls) - 1)))
            side = Side.OUTPUT
        else:
            side = Side(what)
        rows.append((side, calls, answers))
    turns = next_turns(0, (side for side, _, _ in rows))
    return [
        MessageRecord(
            seq=i,
            turn=turns[i],
            at=0.0,
            role="x",
            kind="message",
            side=side.value,
            source="request",
            tokens=i % 7 + 1,
            digest=b"",
            calls=calls,
            answers=answers,
            body=b"{}",
        )
        for i, (side, calls, answers) in enumerate(rows)
    ]


@given(histories())
def test_units_partition_the_history_and_keep_calls_with_outputs(messages):
    us = units(messages)
    covered = [seq for u in us for seq in range(u.first, u.last + 1)]
    assert covered == [m.seq for m in messages]
    unit_of = {seq: i for i, u in enumerate(us) for seq in range(u.first, u.last + 1)}
    call_at = {c: m.seq for m in messages for c in m.calls}
    for m in messages:
        if m.answers is not None:
            assert unit_of[m.seq] == unit_of[call_at[m.answers]]
    for u in us:
        assert u.tokens == sum(m.tokens for m in messages[u.first : u.last + 1])
        assert u.turn == messages[u.first].turn


@given(histories())
def test_a_user_message_always_opens_a_unit_unless_it_sits_between_a_call_and_its_output(messages):
    us = units(messages)
    starts = {u.first for u in us}
    call_at = {c: m.seq for m in messages for c in m.calls}
    bridged = {
        seq
        for m in messages
        if m.answers is not None
        for seq in range(call_at[m.answers], m.seq + 1)
    }
    for m in messages:
        if m.side == "user" and m.seq not in bridged:
            assert m.seq in starts


def test_turns_count_user_messages():
    sides = [Side.ASSISTANT, Side.USER, Side.ASSISTANT, Side.OUTPUT, Side.USER, Side.SYSTEM]
    assert next_turns(0, sides) == [0, 1, 1, 1, 2, 2]
    assert next_turns(5, [Side.USER]) == [6]
