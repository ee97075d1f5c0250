"""The seqs a view keeps: every stored message outside the hidden ranges."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from fadeway.view import view_seqs

ranges = st.lists(st.tuples(st.integers(-3, 70), st.integers(-3, 70)), max_size=12)


@given(st.integers(0, 60), ranges)
def test_view_seqs_leave_out_every_hidden_range(count, hidden):
    # Ranges may overlap, be empty (last before first) or reach past either end.
    want = [i for i in range(count) if not any(first <= i <= last for first, last in hidden)]
    assert view_seqs(count, hidden) == want
    assert view_seqs(count, np.array(hidden, dtype=np.int64).reshape(-1, 2)) == want
