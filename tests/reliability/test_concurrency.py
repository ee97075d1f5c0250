"""Concurrent callers of one memory (issue 33, "The suite"), on SQLite and on PostgreSQL: 32
threads of one engine and 4 processes with engines of their own decorate and report on one
memory at once, each process's background lane running meanwhile. Nothing acknowledged is lost,
nothing is stored twice, each caller's messages are stored in the order it sent them, and a
message whose decorate returned before another's began is stored before it. A reply to a request
that is no longer the latest is not stored (fadeway's rule); the caller must be told which."""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

import fadeway
import pg
from conftest import STORES

from . import children
from .children import Acks, caller_message, caller_reply, read_acks, stored_form
from .tiers import TIERS, figure, scaled

THREADS = 32
#: Background lane threads of the test's engine (each process has the default too).
LANE_THREADS = 4

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(["fadeway", "reliability.children"])


def converse_at_once(
    tmp_path: Path, db: str, calls: int, processes: int, threads: int
) -> tuple[list, list, int]:
    """Every caller's acknowledgements, the shared memory's stored messages, and how many lane
    jobs ran while they called."""
    fadeway.open(db).close()  # the schema, before the processes race to make it
    others = [
        _context.Process(
            target=children.callers,
            args=(str(db), str(tmp_path / f"p{n}.acks"), f"p{n}", threads, calls),
            daemon=True,
        )
        for n in range(processes)
    ]
    for process in others:
        process.start()
    with fadeway.open(
        db,
        lane_threads=LANE_THREADS,
        lane_lease_seconds=children.LEASE_SECONDS,
        **children.BUSY_LANE,
    ) as engine:
        children.run_callers(engine, Acks(str(tmp_path / "t.acks")), "t", THREADS, calls)
        for process in others:
            process.join(600)
            assert process.exitcode == 0, "a calling process failed; see stderr"
        with engine.store.read(children.SHARED_MEMORY) as tx:  # what the lanes ran meanwhile
            lane = len(tx.jobs("done"))
        engine.drain()
        assert engine.memory(children.SHARED_MEMORY).parked_jobs() == []
        with engine.store.read(children.SHARED_MEMORY) as tx:
            stored = [m.body for m in tx.messages()]
    acks = [a for path in sorted(tmp_path.glob("*.acks")) for a in read_acks(str(path))]
    if "://" not in db:
        with closing(sqlite3.connect(db)) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    return acks, stored, lane


@pytest.fixture(scope="module", params=STORES)
def shared_db(request, tmp_path_factory) -> Iterator[str]:
    """The shared store: an SQLite file, or a fresh database on the tests' PostgreSQL server."""
    if request.param == "sqlite":
        yield str(tmp_path_factory.mktemp("shared") / "shared.db")
        return
    with pg.fresh_database(request.getfixturevalue("pg_server")) as url:
        yield url


@pytest.fixture(scope="module", params=TIERS)
def run(request, shared_db, tmp_path_factory):
    # Both tiers run the 32 threads and 4 processes; the long tier makes its 6,400
    # calls, half of them from 4 processes x 8 threads.
    calls = scaled(request.param, 5, 50)
    processes, threads = 4, scaled(request.param, 2, 8)
    root = tmp_path_factory.mktemp("concurrency")
    acks, stored, lane = converse_at_once(root, shared_db, calls, processes, threads)
    return acks, stored, calls, lane


def test_no_acknowledged_user_message_is_lost_duplicated_or_reordered(run):
    acks, stored, calls, lane = run
    decorated = [a for a in acks if a[0] == "user"]
    callers = {who for _, who, *_ in decorated}
    assert len(callers) == len({a[1] for a in acks})
    assert len(decorated) == len(callers) * calls, "a caller stopped early"
    where = {}
    for seq, body in enumerate(stored):
        assert body not in where, f"stored twice: {body[:60]!r}"
        where[body] = seq
    seqs = {}
    for _, who, k, called, returned in decorated:
        body = stored_form(caller_message(who, k))
        assert body in where, f"{who}'s acknowledged message {k} was lost"
        seqs[who, k] = (where[body], called, returned)
    for who in callers:
        order = [seqs[who, k][0] for k in range(calls)]
        assert order == sorted(order), f"{who}'s messages were stored out of order"
    # A message whose decorate returned before another's was called is stored before it.
    by_call = sorted(seqs.values(), key=lambda s: s[1])
    by_return = sorted(seqs.values(), key=lambda s: s[2])
    latest, i = -1, 0
    for seq, called, _ in by_call:
        while i < len(by_return) and by_return[i][2] < called:
            latest = max(latest, by_return[i][0])
            i += 1
        assert seq > latest, "a message was stored before one acknowledged before it was sent"
    replies = [a for a in acks if a[0] == "reply"]
    sent = {stored_form(caller_reply(who, k)) for _, who, k, _ in replies}
    sent |= {stored_form(caller_message(who, k)) for _, who, k, *_ in decorated}
    assert where.keys() <= sent, "a message was stored that no caller sent"
    kept = sum(stored_form(caller_reply(who, k)) in where for _, who, k, _ in replies)
    figure(
        f"concurrency: {len(callers)} callers ({THREADS} threads and {len(callers) - THREADS} "
        f"in other processes), {len(decorated) + len(replies)} calls; acknowledged user "
        f"messages lost: 0, duplicated: 0, reordered: 0; replies stored: {kept} of "
        f"{len(replies)} (the others answered a request no longer the latest); lane jobs the "
        f"background lanes ran meanwhile: {lane}"
    )


def test_every_reply_not_stored_is_reported_as_such(run):
    acks, stored, _, _ = run
    held = set(stored)
    for _, who, k, result in (a for a in acks if a[0] == "reply"):
        was = stored_form(caller_reply(who, k)) in held
        assert result.get("stored") is was, f"{who}'s reply {k}: stored {was}, told {result}"
        assert (result.get("not_stored") is None) is was, result
