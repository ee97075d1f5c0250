"""The trace log mirrored as columns: activations against the reference, and incremental sync."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fadeway
from fadeway.mirror.trace_log import TraceLog
from fadeway.records import EpisodeRecord, TraceRecord
from helpers import NOTE_ASKING
from reference import activation_reference, significance_reference

NOW = 1_767_225_600.0
RELATIVE = 1e-12


def random_log(rng: random.Random, count: int, episodes: int, facts: int) -> list[TraceRecord]:
    return [
        TraceRecord(
            n=n,
            episode=rng.randint(1, episodes),
            fact=None if rng.random() < 0.3 else rng.randint(1, facts),
            kind="fact",
            score=rng.random(),
            counted=rng.random() < 0.7,
            at=NOW - 60 * 525_600 ** rng.random(),
        )
        for n in range(1, count + 1)
    ]


def close(got: np.ndarray, want: list[float]) -> bool:
    return bool(np.all(np.abs(got - np.array(want)) <= RELATIVE * np.abs(np.array(want))))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 3_000), st.booleans())
def test_activations_match_the_reference(seed: int, count: int, by_fact: bool) -> None:
    rng = random.Random(seed)
    traces = random_log(rng, count, episodes=40, facts=60)
    # Some keys have no trace at all; the order of the keys is the caller's.
    keys = rng.sample(range(1, 70), 30)
    merged = {f: f - 1 if f % 3 == 0 else f for f in range(1, 61)}  # restatements merged
    log = TraceLog.of(traces)
    if by_fact:
        args = {"by": "fact", "fact_key": merged.__getitem__}
        key_of = [None if t.fact is None else merged[t.fact] for t in traces]
    else:
        args = {}
        key_of = [t.episode for t in traces]
    groups = [
        [(t.at, t.score) for t, k in zip(traces, key_of, strict=True) if t.counted and k == key]
        for key in keys
    ]
    assert close(log.activation(keys, NOW, **args), activation_reference(groups, NOW))
    assert close(log.significance(keys, **args), significance_reference(groups))


def test_facts_without_a_key_map_count_for_themselves_and_bad_arguments_are_refused() -> None:
    traces = random_log(random.Random(7), 500, episodes=5, facts=9)
    log = TraceLog.of(traces)
    act = log.activation([4, 2], NOW, by="fact")
    assert act.tolist() == log.activation([4, 2], NOW, by="fact", fact_key=lambda f: f).tolist()
    assert act[0] > 0
    assert TraceLog().activation([3, 1], NOW).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="by must be 'episode' or 'fact'"):
        log.activation([1], NOW, by="note")
    with pytest.raises(ValueError, match="it needs by='fact'"):
        log.activation([1], NOW, fact_key=lambda f: f)
    with pytest.raises(ValueError, match="not 0"):
        log.significance([2, 0])


class FakeTransaction:
    """The two reads a sync makes, over a list standing for the store's trace log."""

    def __init__(self, traces: list[TraceRecord]) -> None:
        self.log, self.reads = traces, []

    def trace_count(self) -> int:
        return self.log[-1].n if self.log else 0

    def trace_columns(self, after: int = 0) -> np.ndarray:
        self.reads.append(after)
        return columns_of([t for t in self.log if t.n > after])


def columns_of(traces: list[TraceRecord]) -> np.ndarray:
    """What `Transaction.trace_columns` says of `traces`, from the records."""
    return np.array(
        [(t.episode, t.fact or 0, t.at, t.score if t.counted else 0.0) for t in traces],
        dtype=np.float64,
    ).reshape(-1, 4)


def test_the_stores_trace_columns_are_its_trace_records(tmp_path, clock) -> None:
    from fadeway.judge import ScriptedJudge
    from helpers import converse_with_notes

    with fadeway.open(
        tmp_path / "t.db",
        clock=clock,
        background=False,
        judge=ScriptedJudge(),
        **NOTE_ASKING,
    ) as engine:
        converse_with_notes(
            engine,
            engine.memory("m"),
            clock,
            [[("Dana owns the checkout.", "Dana", "checkout", False)]],
        )
        with engine.store.read("m") as tx:
            traces = tx.traces()
            assert {t.kind for t in traces} == {"encoding", "fact"}
            assert {t.counted for t in traces} == {True, False}
            for after in (0, 1, traces[-1].n // 2, traces[-1].n):
                got = tx.trace_columns(after)
                assert got.dtype == np.float64 and got.shape == (len(traces) - after, 4)
                assert np.array_equal(got, columns_of([t for t in traces if t.n > after]))


def test_sync_reads_only_what_is_new_and_starts_over_when_the_store_shrinks() -> None:
    traces = random_log(random.Random(3), 2_500, episodes=30, facts=40)
    keys = list(range(1, 31))
    log, tx = TraceLog(), FakeTransaction(traces[:1_000])
    log.sync(tx)
    log.sync(tx)  # nothing new: no read
    tx.log = traces  # grows past the first buffer
    log.sync(tx)
    assert tx.reads == [0, 1_000] and len(log) == 2_500
    assert log.activation(keys, NOW).tolist() == TraceLog.of(traces).activation(keys, NOW).tolist()
    tx.log = traces[:10]  # replaced by a shorter log
    log.sync(tx)
    assert tx.reads[-1] == 0 and len(log) == 10
    fresh = TraceLog.of(traces[:10])
    assert log.activation(keys, NOW).tolist() == fresh.activation(keys, NOW).tolist()


def test_the_store_reads_traces_after_a_number(tmp_path, clock) -> None:
    engine = fadeway.open(tmp_path / "traces.db", clock=clock, background=False)
    engine.memory("m").decorate({"messages": [{"role": "user", "content": "hi"}]})
    with engine.store.write("m") as tx:
        tx.insert_episodes(
            [
                EpisodeRecord(
                    n=1,
                    first_seq=0,
                    last_seq=0,
                    first_turn=1,
                    last_turn=1,
                    start_at=0.0,
                    end_at=0.0,
                    tokens=5,
                    cut_at=0.0,
                )
            ]
        )
        tx.append_traces(
            [
                TraceRecord(
                    n=n, episode=1, fact=None, kind="encoding", score=1.0, counted=True, at=float(n)
                )
                for n in range(1, 6)
            ]
        )
    with engine.store.read("m") as tx:
        assert [t.n for t in tx.traces(after=2)] == [3, 4, 5]
        assert [t.n for t in tx.traces()] == [1, 2, 3, 4, 5]
        log = TraceLog()
        log.sync(tx)
        assert len(log) == 5
    engine.close()
