"""A memory's episodes mirrored as records and columns, kept in step by the store's count of
episode writes; and the mirrors reset after a write transaction that failed."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fadeway
from fadeway.decorate import call as decorate_call
from fadeway.errors import UnmatchedToolOutputError
from fadeway.forgetting import fade as forgetting
from fadeway.mirror.episode_table import STATES, EpisodeTable
from fadeway.records import EpisodeRecord
from fadeway.store import SQLiteStore, Transaction
from helpers import episode_record


class Counting:
    """A transaction that counts the episodes a sync reads."""

    def __init__(self, tx: Transaction) -> None:
        self.tx, self.read = tx, 0

    def episode_changes(self) -> int:
        return self.tx.episode_changes()

    def episodes_changed(self, after: int) -> list[EpisodeRecord]:
        rows = self.tx.episodes_changed(after)
        self.read += len(rows)
        return rows


def assert_mirrors(table: EpisodeTable, stored: list[EpisodeRecord]) -> None:
    cols = table.columns()
    assert cols.n.tolist() == [e.n for e in stored]
    assert cols.first_seq.tolist() == [e.first_seq for e in stored]
    assert cols.last_seq.tolist() == [e.last_seq for e in stored]
    assert cols.tokens.tolist() == [e.tokens for e in stored]
    assert [STATES[s] for s in cols.state.tolist()] == [e.state for e in stored]


# A writer's step: insert `k` episodes, or move some episodes (by position) to a later state.
steps = st.lists(
    st.tuples(
        st.sampled_from(["ours", "theirs"]),
        st.one_of(
            st.tuples(st.just("insert"), st.integers(1, 4)),
            st.tuples(st.just("move"), st.lists(st.integers(0, 40), max_size=4)),
        ),
    ),
    max_size=25,
)


@settings(max_examples=30, deadline=None)
@given(steps, st.booleans())
def test_the_mirror_holds_what_the_store_holds_reading_only_what_changed(plan, columns_early):
    with tempfile.TemporaryDirectory() as tmp:
        ours, theirs = (SQLiteStore(Path(tmp) / "m.db") for _ in range(2))  # two processes
        with ours.write("m") as tx:
            tx.create_memory("chat_completions", 0.0)
        table, count = EpisodeTable(), 0
        for who, (kind, arg) in plan:
            store = ours if who == "ours" else theirs
            with store.write("m") as tx:
                if kind == "insert":
                    touched = set(range(count + 1, count + arg + 1))
                    tx.insert_episodes([episode_record(n) for n in sorted(touched)])
                    count += arg
                else:
                    now = {e.n: e.state for e in tx.episodes()}
                    touched = {p % count + 1 for p in arg} if count else set()
                    tx.set_episode_states(
                        {n: STATES[min(3, STATES.index(now[n]) + 1)] for n in touched}
                    )
            with ours.read("m") as tx:
                stored = tx.episodes()
                before = tx.episode_changes()
                counting = Counting(tx)
                table.derived["view"], synced = [0], table.changes
                got = table.sync(counting)
                # Only the episodes the writes since the last sync touched are read, and what
                # was derived from the episodes before goes once any write moved their count.
                assert counting.read == len(touched)
                assert ("view" in table.derived) == (synced == before)
                assert got == stored and table.sync(Counting(tx)) == stored
                assert tx.episode_changes() == before
            if columns_early or who == "theirs":
                assert_mirrors(table, stored)
        with ours.read("m") as tx:
            assert_mirrors(table, tx.episodes())
        ours.close()
        theirs.close()


def test_a_store_with_fewer_changes_is_read_again_whole(tmp_path):
    stores = [SQLiteStore(tmp_path / f"{name}.db") for name in ("a", "b")]
    for store, states in zip(stores, (["live", "sealed", "live"], ["forgotten"]), strict=True):
        with store.write("m") as tx:
            tx.create_memory("chat_completions", 0.0)
            for n, state in enumerate(states, start=1):
                tx.insert_episodes([episode_record(n, state)])  # one write each
    table = EpisodeTable()
    with stores[0].read("m") as tx:
        table.sync(tx)
    assert_mirrors(table, [episode_record(1), episode_record(2, "sealed"), episode_record(3)])
    with stores[1].read("m") as tx:  # the file replaced by one that has seen fewer writes
        assert table.sync(tx) == [episode_record(1, "forgotten")]
    assert_mirrors(table, [episode_record(1, "forgotten")])
    for store in stores:
        store.close()


def test_episodes_written_before_the_count_existed_are_read(tmp_path):
    path = tmp_path / "old.db"
    SQLiteStore(path).close()
    # What a store of schema 6 holds: no count of episode changes.
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TABLE emitted")  # and schema 10's record of blocks
    conn.execute("ALTER TABLE memories DROP COLUMN blocks_tracked")
    conn.execute("DROP INDEX episodes_by_change")
    conn.execute("ALTER TABLE episodes DROP COLUMN changed")
    conn.execute("ALTER TABLE memories DROP COLUMN episode_changes")
    conn.execute("DROP INDEX jobs_parked")
    conn.execute("ALTER TABLE jobs DROP COLUMN parked")
    conn.execute("ALTER TABLE jobs DROP COLUMN retry_at")
    conn.execute("ALTER TABLE jobs DROP COLUMN waits")
    conn.execute("DROP INDEX passages_by_time")  # and schema 11's
    conn.execute("ALTER TABLE memories DROP COLUMN version")  # and schema 12's
    conn.execute("ALTER TABLE usage DROP COLUMN tokens_cached")  # and schema 13's
    conn.execute("UPDATE fadeway_schema SET version = 6")
    conn.execute(
        "INSERT INTO memories (memory_id, format, created_at) VALUES ('m', 'chat_completions', 0)"
    )
    for e in (episode_record(1, "sealed"), episode_record(2)):
        conn.execute(
            "INSERT INTO episodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                "m",
                e.n,
                e.first_seq,
                e.last_seq,
                e.first_turn,
                e.last_turn,
                e.start_at,
                e.end_at,
                e.tokens,
                e.cut_at,
                e.state,
            ),
        )
    conn.close()
    store = SQLiteStore(path)
    table = EpisodeTable()
    with store.read("m") as tx:
        assert tx.episode_changes() == 0
        assert table.sync(tx) == [episode_record(1, "sealed"), episode_record(2)]
    with store.write("m") as tx:
        tx.set_episode_states({2: "leaving"})
        assert tx.episode_changes() == 1
        assert table.sync(tx) == [episode_record(1, "sealed"), episode_record(2, "leaving")]
    store.close()


def test_episodes_inserted_out_of_order_are_held_in_order(tmp_path):
    store = SQLiteStore(tmp_path / "m.db")
    table = EpisodeTable()
    with store.write("m") as tx:
        tx.create_memory("chat_completions", 0.0)
        tx.insert_episodes([episode_record(1), episode_record(3)])
        table.sync(tx)
        table.columns()
        tx.insert_episodes([episode_record(2, "sealed")])
        assert table.sync(tx) == [episode_record(1), episode_record(2, "sealed"), episode_record(3)]
    assert_mirrors(table, [episode_record(1), episode_record(2, "sealed"), episode_record(3)])
    store.close()


# -- the fade over the columns -------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(STATES), st.integers(1, 400), st.floats(0, 5)), max_size=30),
    st.dictionaries(st.integers(0, 40), st.lists(st.integers(1, 12), max_size=4)),
    st.dictionaries(st.integers(1, 12), st.integers(1, 300)),
    st.dictionaries(st.integers(0, 90), st.integers(1, 50)),
    st.floats(0.5, 2.0),
    st.integers(0, 20_000),
    st.integers(0, 2_000),
)
def test_the_fade_over_columns_takes_what_each_pick_frees(
    rows, sealed_facts, sizes, blocks, ratio, history, block
):
    records = [
        episode_record(n, state, tokens) for n, (state, tokens, _) in enumerate(rows, start=1)
    ]
    activation = {n: act for n, (_, _, act) in enumerate(rows, start=1)}
    table = EpisodeTable()
    table._apply(records)
    landing = history // 3
    fact_sizes = {f: sizes.get(f, 5) for fs in sealed_facts.values() for f in fs}

    picked = forgetting.fade_episodes(
        table.columns(),
        lambda ns: np.array([activation[n] for n in ns.tolist()]),
        blocks,
        sealed_facts,
        fact_sizes,
        ratio,
        history,
        block,
        lambda b: np.full(len(b), landing),
    )

    # By hand: the walk least active first; a live episode takes its messages and blocks out
    # of the history, and a fact leaves the facts block with the last sealed episode holding it
    # (a note's facts belong to every episode it acknowledged: the block shows each once).
    state = {e.n: e.state for e in records}
    holders = {
        f: {e for e, fs in sealed_facts.items() if f in fs and state.get(e) == "sealed"}
        for f in fact_sizes
    }
    fadeable = [e for e in records if e.state in ("live", "sealed")]
    want, left = [], history
    for e in sorted(fadeable, key=lambda e: (activation[e.n], e.n)):
        if left <= landing:
            break
        want.append(e)
        if e.state == "live":
            left -= round(
                (
                    e.tokens
                    + sum(size for seq, size in blocks.items() if e.first_seq <= seq <= e.last_seq)
                )
                * ratio
            )
    gone = {e.n for e in want}
    freed = sum(fact_sizes[f] for f, held in holders.items() if held and held <= gone)
    assert picked.numbers.tolist() == [e.n for e in want]
    assert picked.live.tolist() == [e.state == "live" for e in want]
    assert picked.history_cut == history - left
    assert picked.block_cut == freed


def test_a_fact_held_by_several_sealed_episodes_leaves_the_block_with_the_last():
    # One note acknowledged episodes 1-3 (its two facts are theirs), another episode 4 alone.
    records = [episode_record(n, "sealed", 100) for n in range(1, 5)]
    table = EpisodeTable()
    table._apply(records)
    sealed_facts = {1: [1, 2], 2: [1, 2], 3: [1, 2], 4: [3]}
    sizes = {1: 40, 2: 60, 3: 30}
    order = forgetting.SharedFacts(4, {1: [0, 1, 2], 2: [0, 1, 2], 3: [3]}, sizes)
    assert order.cut_along(np.array([0, 3, 1, 2])).tolist() == [0, 30, 0, 100]
    assert order.cut_along(np.array([2, 0])).tolist() == [0, 0]  # episode 2 (index 1) stays
    picked = forgetting.fade_episodes(
        table.columns(),
        lambda ns: ns.astype(np.float64),
        {},
        sealed_facts,
        sizes,
        1.0,
        100,
        130,
        lambda b: np.maximum(0, 160 - b),
    )  # landing rises as the block shrinks
    # Forgetting 1 and 2 frees nothing (3 still holds their facts); 3 frees 100 tokens.
    assert picked.numbers.tolist() == [1, 2, 3]
    assert picked.block_cut == 100


# -- a failed write ------------------------------------------------------------------------


def test_a_write_that_fails_after_writing_resets_the_mirrors(tmp_path, clock):
    path = tmp_path / "m.db"
    ours = fadeway.open(path, clock=clock, background=False)
    theirs = fadeway.open(path, clock=clock, background=False)  # another process
    mem = ours.memory("m")
    first = [
        {"role": "user", "content": "Ship the pricing page."},
        {"role": "assistant", "content": "On it."},
    ]
    mem.decorate({"messages": first})
    lost = [{"role": "user", "content": "Rolled back."}]
    with mock.patch.object(decorate_call, "forget_and_assemble", side_effect=RuntimeError("disk")):
        with pytest.raises(RuntimeError, match="disk"):
            mem.decorate({"messages": [*first, *lost]})
    # Meanwhile another process stores a different message in the same place.
    kept = [{"role": "user", "content": "Which plan is the default?"}]
    theirs.memory("m").decorate({"messages": [*first, *kept]})
    sent = mem.decorate({"messages": [*first, *kept]})
    assert [m["content"] for m in sent["messages"]] == [
        "Ship the pricing page.",
        "On it.",
        "Which plan is the default?",
    ]
    assert [m.body for m in mem.messages()] == [m.body for m in theirs.memory("m").messages()]
    ours.close()
    theirs.close()


def test_a_write_refused_before_writing_keeps_the_mirrors(engine):
    mem = engine.memory("m")
    mem.decorate({"messages": [{"role": "user", "content": "hi"}]})
    history = engine.services.mirrors.peek("m")
    with pytest.raises(UnmatchedToolOutputError):
        mem.decorate(
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "tool", "tool_call_id": "nobody", "content": "x"},
                ]
            }
        )
    assert len(history) == 1 and engine.services.mirrors.peek("m") is history
