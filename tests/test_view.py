"""The seqs a view keeps (every stored message outside the hidden ranges), and fadeway's own
additions told apart in a sent history."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fadeway import blocks
from fadeway.decorate.view import own_additions, view_seqs

ranges = st.lists(st.tuples(st.integers(-3, 70), st.integers(-3, 70)), max_size=12)


@given(st.integers(0, 60), ranges)
def test_view_seqs_leave_out_every_hidden_range(count, hidden):
    # Ranges may overlap, be empty (last before first) or reach past either end.
    want = [i for i in range(count) if not any(first <= i <= last for first, last in hidden)]
    assert view_seqs(count, hidden) == want
    assert view_seqs(count, np.array(hidden, dtype=np.int64).reshape(-1, 2)) == want


def _calls(fmt: str, call_id: str, name: str) -> dict:
    if fmt == "chat":
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
            ],
        }
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": "{}"}


def _out(fmt: str, call_id: str) -> dict:
    if fmt == "chat":
        return {"role": "tool", "tool_call_id": call_id, "content": "x"}
    return {"type": "function_call_output", "call_id": call_id, "output": "x"}


#: fadeway's additions (the outputs, while the latest call of note_1 is the note).
_own = [
    {"role": "system", "content": blocks.facts_block([blocks.BlockFact("a", "b", "c")], [])},
    {"role": "tool", "tool_call_id": "note_1", "content": "noted"},
    {"type": "function_call_output", "call_id": "note_1", "output": "noted"},
]
_theirs = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "tool", "tool_call_id": "call_1", "content": "42"},
    {"role": "system", "content": "Be brief."},
]


def _emitted(text: str) -> bool:
    """Every block-looking text fadeway's (what a memory from before it kept its blocks says)."""
    return True


#: Calls whose ids the outputs above answer, a note's or the caller's (ids may repeat).
_makers = [_calls(fmt, "note_1", name) for fmt in ("chat", "responses") for name in ("note", "x")]


@pytest.mark.parametrize("fmt", ["chat", "responses"])
def test_an_output_is_fadeways_when_the_latest_call_of_its_id_before_it_is_a_note(fmt):
    """Providers that number every turn's calls from 0 again give a note call and a later call
    of the caller's one id: each output answers the call of its id just before it, and one
    whose call was not sent answers the stored history's latest call of that id."""
    user = {"role": "user", "content": "hi"}
    sent = [
        _calls(fmt, "call_0", "note"),
        _out(fmt, "call_0"),
        user,
        _calls(fmt, "call_0", "lookup"),
        _out(fmt, "call_0"),
        user,
    ]
    for stored_says in (True, False):

        def answers_note(call_id, says=stored_says):
            return says

        assert own_additions(sent, answers_note, _emitted) == [
            False,
            True,
            False,
            False,
            False,
            False,
        ]
        assert own_additions(sent[1:2], answers_note, _emitted) == [
            stored_says
        ]  # its call not sent
    assert own_additions(
        [*sent[3:5], user, _out(fmt, "call_1")], {"call_1"}.__contains__, _emitted
    ) == [
        False,
        False,
        False,
        True,
    ]


def test_a_block_is_fadeways_only_when_it_reads_as_one_and_was_returned():
    """The look is asked first (a text that does not read as a block is never fadeway's,
    whatever `emitted` says); a block-like text is fadeway's only when `emitted` says so."""
    block = blocks.note_ask(2, 3)
    sent = [
        {"role": "system", "content": block},
        {"role": "developer", "content": block},
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": block},  # a user may paste one: always the user's
    ]
    asked: list[str] = []

    def emitted(text: str) -> bool:
        asked.append(text)
        return True

    assert own_additions(sent, _emitted, emitted) == [True, True, False, False]
    assert asked == [block, block]
    assert own_additions(sent, _emitted, frozenset[str]().__contains__) == [False] * 4
