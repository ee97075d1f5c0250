"""The PostgreSQL store's own behaviour: its SQL translation, its URL shown without a password,
the per-memory advisory lock, read snapshots, its schema and migrations, and its errors. What it
shares with SQLite is tested on both stores (tests marked `both_stores`)."""

from __future__ import annotations

import sys
import threading
import time

import pytest

import fadeway
from fadeway.errors import SchemaVersionError, StoreError
from fadeway.records import MessageRecord
from fadeway.store import open_store
from fadeway.store.postgres import lock_key, shown_url, to_pyformat
from fadeway.store.schema import MIGRATIONS, SCHEMA_VERSION, for_postgres


def test_placeholders_are_translated_outside_quotes_only():
    assert to_pyformat("SELECT a FROM t WHERE b = ? AND c IN (?, ?)") == (
        "SELECT a FROM t WHERE b = %s AND c IN (%s, %s)"
    )
    assert to_pyformat("SELECT '?', \"a?\" FROM t WHERE x = ?") == (
        "SELECT '?', \"a?\" FROM t WHERE x = %s"
    )
    assert to_pyformat("SELECT 'it''s ?' WHERE y LIKE '5%' AND z = ?") == (
        "SELECT 'it''s ?' WHERE y LIKE '5%%' AND z = %s"
    )
    assert to_pyformat("RAISE EXCEPTION '%', x") == "RAISE EXCEPTION '%%', x"
    with pytest.raises(ValueError, match="unterminated"):
        to_pyformat("SELECT 'open")


def test_the_shown_url_has_no_password():
    assert shown_url("postgresql://u:pw@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert shown_url("postgres://u@h/db") == "postgres://u@h/db"
    assert shown_url("postgresql://h/db?password=pw&sslmode=require") == (
        "postgresql://h/db?password=***&sslmode=require"
    )
    assert shown_url("odd?name.db") == "odd?name.db"  # a file path is left alone


def test_postgres_reads_the_portable_schema_in_its_own_types():
    ddl = for_postgres(MIGRATIONS[0].portable[1])
    assert "memory_id BYTEA NOT NULL" in ddl and "seq BIGINT" in ddl and "body BYTEA" in ddl
    assert 'role TEXT COLLATE "C"' in ddl and "'user', 'system'" in ddl
    assert "INTEGER" not in ddl and "BLOB" not in ddl
    assert for_postgres("UPDATE jobs SET parked = 1 WHERE state = 'failed'") == (
        "UPDATE jobs SET parked = 1 WHERE state = 'failed'"
    )


def test_lock_keys_are_signed_64_bit_and_differ_by_memory():
    keys = {lock_key(m) for m in ("a", "b", "a\x00", "\x00a")}
    assert len(keys) == 4 and all(-(2**63) <= k < 2**63 for k in keys)
    assert lock_key("a") == lock_key("a")


def test_without_psycopg_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreError, match=r"pip install 'fadeway\[postgres\]'"):
        fadeway.open("postgresql://127.0.0.1:1/x")


# -- on a server ------------------------------------------------------------------------------


@pytest.fixture
def store(db):
    """A PostgreSQL store on the test's fresh database, holding memory "a" (no messages)."""
    opened = open_store(db)
    with opened.write("a") as tx:
        tx.create_memory("chat_completions", 0.0)
    yield opened
    opened.close()


def _message(seq: int) -> MessageRecord:
    return MessageRecord(
        seq=seq,
        turn=1,
        at=0.0,
        role="user",
        kind="message",
        side="user",
        source="request",
        tokens=1,
        digest=b"d",
        calls=(),
        answers=None,
        body=b"{}",
    )


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_writers_of_one_memory_queue_and_of_two_memories_do_not(store):
    with store.write("b") as tx:
        tx.create_memory("chat_completions", 0.0)
    waited: dict[str, float] = {}

    def write(mid: str) -> None:
        start = time.monotonic()
        with store.write(mid) as tx:
            waited[mid] = time.monotonic() - start
            tx.insert_messages([_message(tx.message_count())])

    with store.write("a") as held:
        held.insert_messages([_message(0)])
        threads = [threading.Thread(target=write, args=(m,)) for m in ("a", "b")]
        for t in threads:
            t.start()
        threads[1].join(timeout=10)
        assert "b" in waited and waited["b"] < 0.5  # another memory: no wait
        time.sleep(0.3)
        assert "a" not in waited  # the same memory: waits for the holder's commit
    threads[0].join(timeout=10)
    assert waited["a"] >= 0.3
    with store.read("a") as tx:  # the waiter saw the holder's row and wrote after it
        assert [m.seq for m in tx.messages()] == [0, 1]


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_a_read_is_one_snapshot(store):
    with store.read("a") as snapshot:
        assert snapshot.message_count() == 0
        with store.write("a") as tx:
            tx.insert_messages([_message(0)])
        assert snapshot.message_count() == 0 and snapshot.messages() == []
    with store.read("a") as tx:
        assert tx.message_count() == 1


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_a_newer_schema_is_refused_and_an_older_one_migrated(db):
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:  # a database as version 9 left it
        conn.execute("SET fadeway.every_memory = on")
        conn.execute("CREATE TABLE fadeway_schema (version INTEGER NOT NULL)")
        for step in MIGRATIONS[:9]:
            for statement in (*map(for_postgres, step.portable), *step.postgres):
                conn.execute(statement)
        conn.execute("INSERT INTO fadeway_schema VALUES (9)")
        conn.execute(
            "INSERT INTO memories (memory_id, format, created_at) VALUES ('m', 'responses', 1)"
        )
    store = open_store(db)
    try:
        assert store.settings()["schema_version"] == SCHEMA_VERSION
        with store.read("m") as tx:
            memory = tx.memory()
        assert memory is not None and memory.format == "responses" and not memory.blocks_tracked
    finally:
        store.close()
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("UPDATE fadeway_schema SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaVersionError, match="upgrade fadeway"):
        open_store(db)


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_a_connection_lost_mid_write_is_a_store_error_and_the_next_call_works(db, clock):
    """The server ends the connection inside a decorate's transaction: a StoreError, nothing
    of the call written, and the retried call (on a fresh connection) stores the turn once."""
    from unittest import mock

    import psycopg

    from fadeway.store import postgres

    engine = fadeway.open(db, clock=clock, background=False)
    mem = engine.memory("m")
    request = {"messages": [{"role": "user", "content": "hi"}]}
    real = postgres._PostgresTransaction.insert_messages

    def cut(self, rows):
        real(self, rows)
        with psycopg.connect(db, autocommit=True) as killer:
            (pid,) = self._conn.execute("SELECT pg_backend_pid()").fetchone()
            killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
        self._conn.execute("SELECT 1")

    try:
        with mock.patch.object(postgres._PostgresTransaction, "insert_messages", cut):
            with pytest.raises(StoreError, match="the write failed and was rolled back"):
                mem.decorate(request)
        assert mem.messages() == []
        mem.decorate(request)
        assert len(mem.messages()) == 1
    finally:
        engine.close()


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_a_closed_store_refuses_calls(db):
    store = open_store(db)
    store.close()
    with pytest.raises(StoreError, match="is closed"):
        with store.read("m"):
            pass


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_row_level_security_keeps_a_transaction_to_its_memory(db, store):
    """The second guard: a statement that forgot its `memory_id = ?` still sees and writes only
    the transaction's memory (the tests connect as a role that is no superuser, which would
    bypass it), and a connection that names no memory sees nothing."""
    import psycopg

    from fadeway.store.postgres import memory_key

    with store.write("b\x00") as tx:
        tx.create_memory("chat_completions", 0.0)
    for mid in ("a", "b\x00"):
        with store.write(mid) as tx:
            tx.insert_messages([_message(0), _message(1)])
    with store.read("a") as tx:
        assert tx._conn.execute("SELECT memory_id FROM messages").fetchall() == [(b"a",), (b"a",)]
    with pytest.raises(StoreError, match="row-level security"):
        with store.write("a") as tx:
            tx._conn.execute(
                "INSERT INTO memories (memory_id, format, created_at) VALUES (?, ?, 0)",
                (memory_key("c"), "responses"),
            )
    assert sorted(store.memory_ids()) == ["a", "b\x00"]
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (0,)


@pytest.mark.postgres
def test_the_same_conversation_exports_identically_on_both_stores(tmp_path, pg_server):
    """Notes, facts, sealed episodes, passages, recall: what one conversation leaves is the same
    document on SQLite and on PostgreSQL."""
    import pg
    from conftest import Clock, open_small
    from helpers import converse_with_notes

    notes = [[(f"Fact {i} about the launch.", "launch", f"item {i}", False)] for i in range(3)]
    docs = []
    with pg.fresh_database(pg_server) as url:
        for db in (str(tmp_path / "a.db"), url):
            clock = Clock()
            with open_small(db, clock) as engine:
                converse_with_notes(engine, engine.memory("m"), clock, notes)
                docs.append(fadeway.dumps(engine.memory("m").export()))
    assert b'"facts":[{' in docs[0] and b'"state":"sealed"' in docs[0]
    assert docs[1] == docs[0]
