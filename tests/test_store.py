"""The store: SQLite's settings at open, schema versioning, and transactions (on both stores
where marked `both_stores`; PostgreSQL's own in test_postgres.py)."""

from __future__ import annotations

import sqlite3
import threading

import msgspec
import pytest

import fadeway
from fadeway.errors import SchemaVersionError
from fadeway.records import RequestRecord
from fadeway.store import SQLiteStore, open_store
from fadeway.store.schema import SCHEMA_VERSION
from helpers import episode_record, message_record


def test_settings_at_open(tmp_path):
    store = SQLiteStore(tmp_path / "a.db")
    try:
        assert store.settings() == {
            "journal_mode": "wal",
            "synchronous": "FULL",
            "foreign_keys": True,
            "busy_timeout_ms": 30_000,
            "mmap_bytes": 1 << 30,
            "schema_version": SCHEMA_VERSION,
        }
    finally:
        store.close()


def test_every_thread_gets_the_same_settings(tmp_path):
    store = SQLiteStore(tmp_path / "a.db", synchronous="normal")
    seen = []
    t = threading.Thread(target=lambda: seen.append(store.settings()))
    t.start()
    t.join()
    assert seen[0]["synchronous"] == "NORMAL" and seen[0]["foreign_keys"] is True
    store.close()


def test_unknown_synchronous_is_refused(tmp_path):
    with pytest.raises(ValueError, match="synchronous must be one of"):
        SQLiteStore(tmp_path / "a.db", synchronous="sometimes")


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "a.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE fadeway_schema SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaVersionError, match="upgrade fadeway"):
        SQLiteStore(path)


@pytest.mark.both_stores
def test_reopening_keeps_the_data_and_the_version(db, clock):
    path = db
    with fadeway.open(path, clock=clock) as eng:
        eng.memory("m").decorate({"messages": [{"role": "user", "content": "hi"}]})
    with fadeway.open(path, clock=clock) as eng:
        assert [m.body for m in eng.memory("m").messages()] == [b'{"role":"user","content":"hi"}']
        assert eng.store.settings()["schema_version"] == SCHEMA_VERSION


@pytest.mark.both_stores
def test_write_rolls_back_on_error(db, clock):
    store = open_store(db)
    with pytest.raises(RuntimeError):
        with store.write("m") as tx:
            tx.create_memory("chat_completions", 0.0)
            raise RuntimeError("boom")
    with store.read("m") as tx:
        assert tx.memory() is None
    store.close()


@pytest.mark.both_stores
def test_recall_blocks_come_with_their_finals_and_their_own_text_only_until_then(db):
    from fadeway.records import BlockText, RecallRecord

    store = open_store(db)
    with store.write("m") as tx:
        tx.create_memory("chat_completions", 0.0)
        for turn in (1, 2, 3):
            tx.insert_recall(
                RecallRecord(
                    turn=turn,
                    seq=turn * 2,
                    at=0.0,
                    text=f"block {turn}",
                    tokens=turn,
                    facts=[turn],
                    passages=[],
                )
            )
        tx.insert_block_text("recall_finals", BlockText(turn=1, at=5.0, text="final 1", tokens=9))
        tx.insert_block_text("recall_finals", BlockText(turn=2, at=6.0, text=None, tokens=0))
    with store.write("other") as tx:  # another memory's block of the same turn
        tx.create_memory("chat_completions", 0.0)
        tx.insert_recall(
            RecallRecord(turn=3, seq=6, at=0.0, text="other", tokens=1, facts=[], passages=[])
        )
        tx.insert_block_text("recall_finals", BlockText(turn=3, at=7.0, text="x", tokens=1))
    with store.read("m") as tx:
        blocks = tx.recall_blocks()
        later = tx.recall_blocks(2)
    store.close()
    assert [(b.turn, b.seq, b.text, b.tokens) for b in blocks] == [
        (1, 2, None, 1),
        (2, 4, None, 2),
        (3, 6, "block 3", 3),  # no final yet: its own text
    ]
    assert [b.final for b in blocks] == [
        BlockText(turn=1, at=5.0, text="final 1", tokens=9),
        BlockText(turn=2, at=6.0, text=None, tokens=0),  # removed
        None,
    ]
    assert later == blocks[1:]


REQUEST = RequestRecord(
    n=1,
    at=2.0,
    model="gpt-4.1",
    encoding="o200k_base",
    estimate=100,
    view_len=2,
    view_last=b"d",
    history_through=2,
)


@pytest.mark.both_stores
def test_a_transaction_reads_its_memory_once_and_sees_its_own_writes(db, monkeypatch):
    """The memory's record is read once a transaction (a round trip to PostgreSQL each time a
    call asked; there, with the statements that open it), and read again after any write to
    it; so are its version, its message count, its count of episode changes and its latest
    request."""
    from fadeway.store.queries import MemoryQueries

    store = open_store(db)
    reads = []
    real = MemoryQueries._read_memory
    monkeypatch.setattr(MemoryQueries, "_read_memory", lambda tx: reads.append(1) or real(tx))
    with store.write("m") as tx:
        assert tx.memory() is None
        tx.create_memory("chat_completions", 0.0)
        assert tx.memory().decorated_through == 0
        assert tx.memory() == tx.memory()
        tx.set_decorated_through(3)
        tx.set_instructions(b"{}")
        assert tx.memory().decorated_through == 3 and tx.memory().instructions == b"{}"
        tx.set_facts_block("facts")
        tx.set_facts_order("[1]")
        assert (tx.memory().facts_block, tx.memory().facts_order) == ("facts", "[1]")
        assert (tx.message_count(), tx.episode_changes()) == (0, 0)
        tx.insert_messages([message_record(0), message_record(1)])
        tx.insert_episodes([episode_record(1)])
        assert (tx.message_count(), tx.episode_changes()) == (2, 1)
        assert tx.latest_request() is None
        tx.insert_request(REQUEST)
        assert tx.latest_request() == REQUEST
        tx.record_report(1, 90, True, None, True)
        assert tx.latest_request().provider_tokens == 90
    # The first read of the record came with the transaction's opening on PostgreSQL.
    assert len(reads) == (3 if db.startswith("postgresql") else 4)
    with store.read("m") as tx:
        assert tx.memory().facts_order == "[1]"
        assert (tx.message_count(), tx.episode_changes(), tx.version()) == (2, 1, 1)
        assert tx.latest_request() == msgspec.structs.replace(
            REQUEST, provider_tokens=90, ratio_kept=True, replied=True
        )
    with store.write("m") as tx:
        assert tx.version() == 1
        tx.bump_version()
        assert tx.version() == 2  # read again: it changed it
    store.close()


def test_write_takes_the_write_lock_at_begin(tmp_path):
    """BEGIN IMMEDIATE: a second writer waits for the first instead of failing mid-way."""
    path = tmp_path / "a.db"
    store = SQLiteStore(path)
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    with store.write("m"):
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
    other.execute("BEGIN IMMEDIATE")
    other.execute("ROLLBACK")
    other.close()
    store.close()


def test_a_queued_writer_gets_the_lock_once_the_other_commits(tmp_path):
    """A writer behind another connection's write transaction waits for it (trying again, not
    through SQLite's busy handler), writes once it commits, and keeps its busy timeout."""
    path = tmp_path / "a.db"
    store = SQLiteStore(path, busy_timeout_ms=10_000)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    waiting, done = threading.Event(), []

    def write() -> None:
        waiting.set()
        with store.write("m") as tx:
            tx.create_memory("chat_completions", 0.0)
        done.append(True)

    writer = threading.Thread(target=write)
    writer.start()
    waiting.wait()
    writer.join(timeout=0.3)
    assert writer.is_alive() and not done  # queued behind the other transaction
    other.execute("COMMIT")
    writer.join(timeout=10)
    assert done == [True]
    with store.read("m") as tx:
        assert tx.memory() is not None
    assert store.settings()["busy_timeout_ms"] == 10_000
    other.close()
    store.close()


def test_a_threads_writer_waits_its_turn_in_the_process_not_at_sqlites_lock(tmp_path, monkeypatch):
    """Threads of one store take turns before SQLite's lock: one behind another's write
    transaction tries BEGIN only once that commits (each polling SQLite, a lane's 16 threads
    behind a long transaction would wake thousands of times a second)."""
    from fadeway.store import sqlite as backend

    store = SQLiteStore(tmp_path / "a.db")
    committed, began_after_commit = threading.Event(), []
    real = backend._begin_writing

    def begin(conn, *timeouts):
        if threading.current_thread().name == "second":
            began_after_commit.append(committed.is_set())
        real(conn, *timeouts)

    def write() -> None:
        with store.write("m") as tx:
            tx.set_decorated_through(1)

    monkeypatch.setattr(backend, "_begin_writing", begin)
    second = threading.Thread(target=write, name="second")
    with store.write("m") as tx:
        tx.create_memory("chat_completions", 0.0)
        second.start()
        second.join(timeout=0.3)
        assert second.is_alive() and began_after_commit == []
        committed.set()
    second.join(timeout=10)
    assert began_after_commit == [True]
    with store.read("m") as tx:
        assert tx.memory().decorated_through == 1
    store.close()


def test_a_writer_held_up_past_the_busy_timeout_fails_and_writes_nothing(tmp_path):
    from fadeway.errors import StoreError

    path = tmp_path / "a.db"
    store = SQLiteStore(path, busy_timeout_ms=200)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(StoreError, match="locked"):
        with store.write("m") as tx:
            tx.create_memory("chat_completions", 0.0)
    other.execute("ROLLBACK")
    with store.read("m") as tx:
        assert tx.memory() is None
    assert store.settings()["busy_timeout_ms"] == 200
    other.close()
    store.close()


def test_sqlite_url_form(tmp_path, clock):
    with fadeway.open(f"sqlite:///{tmp_path / 'b.db'}", clock=clock) as eng:
        eng.memory("m").decorate({"messages": [{"role": "user", "content": "hi"}]})
    assert (tmp_path / "b.db").exists()


def test_unknown_url_scheme(tmp_path):
    with pytest.raises(ValueError, match="unsupported store URL scheme 'redis'"):
        fadeway.open("redis://localhost/0")


@pytest.mark.both_stores
def test_a_write_knows_what_it_changed_though_its_statements_have_not_answered(db):
    """On PostgreSQL a write's statements go to the server with its next query or its COMMIT
    (pipeline mode), so what they changed is counted from their answers when asked: the
    memory's version counts a transaction that changed a row and not one whose statements
    changed none, and jobs queued again are counted by their rows, on both stores."""
    store = open_store(db)
    try:
        with store.write("m") as tx:
            tx.create_memory("chat_completions", 0.0)
            jobs = [tx.enqueue("score", b"{}", 1.0) for _ in range(3)]
            for n in jobs[:2]:
                tx.park_job(n, "unreachable", None)
        with store.read("m") as tx:
            version = tx.version()
        with store.write("m") as tx:
            tx.set_decorated_through(0)  # the value it holds: a row matched all the same
            tx.revive_jobs(kind="graph")  # none of that kind: changes nothing
        with store.read("m") as tx:
            assert tx.version() == version + 1
        with store.write("m") as tx:
            assert tx.revive_jobs(kind="graph") == 0
            tx.set_decorated_through(0)
            tx.finish_job(99, "done")  # no such job: matches no row
            assert tx.wrote()  # the first matched a row, though nothing has answered yet
        with store.read("m") as tx:
            assert tx.version() == version + 2
        with store.write("m") as tx:
            tx.finish_job(99, "done")
            assert not tx.wrote()
        with store.read("m") as tx:
            assert tx.version() == version + 2  # nothing changed: not counted
        with store.write("m") as tx:
            assert tx.revive_jobs() == 2
        with store.read("m") as tx:
            assert tx.version() == version + 3
            assert [j.state for j in tx.jobs()] == ["pending"] * 3
    finally:
        store.close()


@pytest.mark.both_stores
def test_the_oldest_pending_job_is_as_the_transaction_last_wrote_its_jobs(db):
    """A transaction's oldest pending job and last job number (on PostgreSQL read as it opens,
    with the memory's record) follow what the transaction itself does to its jobs: queued,
    finished, parked, revived; a job of a kind is looked up on its own."""
    store = open_store(db)
    try:
        with store.write("m") as tx:
            tx.create_memory("chat_completions", 0.0)
            assert tx.pending_job() is None
            first = tx.enqueue("score", b"{}", 1.0)
            second = tx.enqueue("graph", b"{}", 1.0)
            assert tx.pending_job().n == first
        with store.read("m") as tx:
            assert tx.pending_job().n == first
            assert tx.pending_job("graph").n == second
        with store.write("m") as tx:
            assert tx.pending_job().n == first
            tx.finish_job(first, "done")
            assert tx.pending_job().n == second
            tx.park_job(second, "unreachable", None)
            assert tx.pending_job() is None
        with store.write("m") as tx:
            assert tx.pending_job() is None
            tx.revive_jobs()
            assert tx.pending_job().n == second
            tx.record_attempt(second, "again")
            assert tx.pending_job().attempts == 1
            assert tx.enqueue("walk", b"{}", 2.0) == second + 1  # numbered past the last
            assert tx.last_job() == second + 1
        with store.read("m") as tx:
            job = tx.pending_job()
            assert (job.n, job.kind, job.attempts) == (second, "graph", 1)
    finally:
        store.close()


@pytest.mark.both_stores
def test_the_databases_own_errors_are_store_errors_and_write_nothing(db, clock):
    """A full disk or an I/O error reaches the caller as a `StoreError` (a FadewayError, as
    every error fadeway raises), after a roll back: the retried call stores the turn once."""
    from unittest import mock

    from fadeway.errors import StoreError

    if "://" in db:
        import psycopg

        from fadeway.store import postgres as backend

        transaction, error = backend._PostgresTransaction, psycopg.errors.DiskFull
    else:
        from fadeway.store import sqlite as backend

        transaction, error = backend._SQLiteTransaction, sqlite3.OperationalError
    engine = fadeway.open(db, clock=clock)
    mem = engine.memory("m")
    request = {"messages": [{"role": "user", "content": "hi"}]}
    real = transaction.insert_messages

    def full(self, rows):
        real(self, rows)
        raise error("database or disk is full")

    with mock.patch.object(transaction, "insert_messages", full):
        with pytest.raises(StoreError, match="the write failed and was rolled back: database"):
            mem.decorate(request)
    assert mem.messages() == []
    mem.decorate(request)
    assert len(mem.messages()) == 1
    engine.close()


@pytest.mark.parametrize("url", [":memory:", "sqlite:///:memory:"])
def test_an_in_memory_store_works_end_to_end_and_writes_nothing(tmp_path, clock, url, monkeypatch):
    """Issue 31: what tests want. An engine on ":memory:" decorates, reports, runs its lane in
    background threads, seals a note, searches, exports and imports, with no file written; two
    engines on ":memory:" are two stores."""
    from conftest import open_small
    from helpers import converse_with_notes

    monkeypatch.chdir(tmp_path)
    vault = [("The vault code is 4417.", "vault", "code 4417", False)]
    with open_small(url, clock, background=True) as eng, open_small(url, clock) as other:
        mem = eng.memory("m")
        converse_with_notes(eng, mem, clock, [vault])
        assert eng.data_dir is None
        assert "The vault code is 4417." in [h.text for h in mem.search("vault code")]
        assert mem.search("w3_39", kind="passage", k=3)
        assert other.memory_ids() == []
        doc = mem.export()
        other.import_memory(fadeway.dumps(doc))
        assert fadeway.dumps(other.memory("m").export()) == fadeway.dumps(doc)
        assert eng.memory_ids() == other.memory_ids() == ["m"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.both_stores
def test_a_lane_is_claimed_when_free_its_own_or_its_lease_ended_and_held_otherwise(db):
    """A free lane, or one its owner holds, is taken in one statement; one another owner holds
    under a live lease is refused, unless that owner is gone; an ended lease is taken."""
    store = open_store(db)
    with store.write("m") as tx:
        tx.create_memory("chat_completions", 0.0)
    statements = []

    class Counted:
        def __init__(self, conn):
            self._conn = conn

        def execute(self, *args):
            statements.append(args[0])
            return self._conn.execute(*args)

        def __getattr__(self, name):
            return getattr(self._conn, name)

    def claim(owner, now, until, gone=None):
        with store.write("m") as tx:
            tx.bookkeeping = True  # as the lane claims: the memory's version stays
            tx._conn, statements[:] = Counted(tx._conn), []
            return tx.claim_lane(owner, now, until, gone=gone)

    assert claim("a", 0.0, 10.0)  # no lane row yet: made
    assert claim("a", 5.0, 15.0) and len(statements) == 1  # its own: renewed in one statement
    assert not claim("b", 6.0, 16.0)  # a's lease runs to 15
    assert claim("b", 6.0, 16.0, gone=lambda holder: holder == "a")  # a is gone
    with store.write("m") as tx:
        tx.release_lane("b")
    assert claim("c", 7.0, 17.0) and len(statements) == 1  # free: one statement
    assert claim("d", 17.0, 27.0) and len(statements) == 1  # c's lease ended at 17
    store.close()
