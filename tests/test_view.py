"""The seqs a view keeps: every stored message outside the hidden ranges."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from fadeway import blocks
from fadeway.view import last_user_messages, strip_own_additions, view_seqs

ranges = st.lists(st.tuples(st.integers(-3, 70), st.integers(-3, 70)), max_size=12)


@given(st.integers(0, 60), ranges)
def test_view_seqs_leave_out_every_hidden_range(count, hidden):
    # Ranges may overlap, be empty (last before first) or reach past either end.
    want = [i for i in range(count) if not any(first <= i <= last for first, last in hidden)]
    assert view_seqs(count, hidden) == want
    assert view_seqs(count, np.array(hidden, dtype=np.int64).reshape(-1, 2)) == want


_own = [{"role": "system", "content": blocks.facts_block([blocks.BlockFact("a", "b", "c")], [])},
        {"role": "tool", "tool_call_id": "note_1", "content": "noted"},
        {"type": "function_call_output", "call_id": "note_1", "output": "noted"}]
_theirs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
           {"role": "tool", "tool_call_id": "call_1", "content": "42"},
           {"role": "system", "content": "Be brief."}]


@given(st.lists(st.sampled_from(_own + _theirs), max_size=12), st.booleans())
def test_the_last_user_messages_are_the_user_messages_that_end_what_stripping_keeps(
        messages, notes):
    note_calls = {"note_1": 3} if notes else {}
    kept = strip_own_additions(messages, note_calls)
    users = last_user_messages(messages, note_calls)
    tail = len(kept)
    while tail and kept[tail - 1].get("role") == "user":
        tail -= 1
    assert [m for _, m in users] == kept[tail:]
    assert all(messages[i] is m for i, m in users)
    assert [i for i, _ in users] == sorted(i for i, _ in users)
