"""The PostgreSQL store's own behaviour: its SQL translation, its URL shown without a password,
the per-memory advisory lock, read snapshots, its schema and migrations, and its errors. What it
shares with SQLite is tested on both stores (tests marked `both_stores`)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import fadeway
import pg
from fadeway.errors import SchemaVersionError, StoreError
from fadeway.store import open_store
from fadeway.store.postgres import lock_key, shown_url, to_pyformat
from fadeway.store.schema import MIGRATIONS, SCHEMA_VERSION, for_postgres
from helpers import chat_reply, message_record, talk


def talk_once(mem, history, text):
    history.append({"role": "user", "content": text})
    request = mem.decorate({"model": "gpt-4.1", "messages": history})
    reply = chat_reply(f"About {text}")
    mem.report(request, reply)
    history.append(reply["choices"][0]["message"])


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
            tx.insert_messages([message_record(tx.message_count())])

    with store.write("a") as held:
        held.insert_messages([message_record(0)])
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


def _round_trips(store, monkeypatch) -> list[int]:
    """Round trips of each transaction `store` opens from now on (in libpq's trace of its
    connection, each turn from what the client sent to what the server answered: in pipeline
    mode a fetch waits on a Flush, not a Sync, so the server's ReadyForQuery messages do not
    count them), the pool's own check left out."""
    import contextlib
    import itertools
    import tempfile

    counts: list[int] = []
    real = store._connection

    @contextlib.contextmanager
    def traced(doing):
        with real(doing) as conn, tempfile.TemporaryFile() as log:
            conn.pgconn.trace(log.fileno())
            try:
                yield conn
            finally:
                conn.pgconn.untrace()
                log.seek(0)
                sides = [line.split("\t")[1] for line in log.read().decode().splitlines()]
                counts.append(sum(a == "F" and b == "B" for a, b in itertools.pairwise(sides)))

    monkeypatch.setattr(store, "_connection", traced)
    return counts


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_a_transaction_opens_in_one_round_trip(store, monkeypatch):
    """BEGIN, the batch's asynchronous commit, the memory's lock and its row-level setting go
    to the server together, with what nearly every transaction reads first (the memory's
    record, its version, its count of episode changes, its message count, its oldest pending
    job), and a write's
    statements whose rows are not read go with the next query, or with the version's and the
    COMMIT: a write that changes nothing takes two round trips (open, commit), a read of those
    two (open, roll back), and a write of one statement with a count read after it three (five
    before writes were pipelined: the write, the count and the version's each one)."""
    counts = _round_trips(store, monkeypatch)
    with store.write("a") as tx:
        pass
    with store.read("a") as tx:
        assert tx.memory() is not None  # the setting holds: row-level security lets it read
        assert (tx.message_count(), tx.episode_changes(), tx.version()) == (0, 0, 1)
        assert tx.pending_job() is None  # the lane's first look: read with the opening
    with store.write("a") as tx:
        assert tx.message_count() == 0
        tx.insert_messages([message_record(0)])  # sent with the count read after it
        assert tx.message_count() == 1  # read again: it wrote messages
    with store.read("a") as tx:
        assert (tx.message_count(), tx.memory().decorated_through) == (1, 0)
        assert tx.version() == 2  # the write counted in the version
    assert counts == [2, 2, 3, 2]


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_the_graphs_tables_are_read_in_one_round_trip(store, monkeypatch):
    """A sync's reads of the graph's tables go to the server before any is read back
    (`graph_rows`, in a pipelined transaction): one round trip for six tables, where reading
    them one by one takes six."""
    tables = {t: 0 for t in ("facts", "entities", "edges", "retirements", "episodes", "acks")}
    counts = _round_trips(store, monkeypatch)
    with store.read("a") as tx:
        together = tx.graph_rows(tables)
    with store.read("a") as tx:
        apart = [tx.facts(), tx.entities(), tx.edges(), tx.retirements(), tx.episodes()]
        apart.append(tx.acks())
    assert together.retirements == [] and apart == [[]] * 6
    assert counts == [3, 8]  # open, the reads, roll back


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_a_turn_of_a_quiet_memory_makes_few_round_trips(db, clock, monkeypatch):
    """What every transaction reads first comes with its opening, a lane is claimed in one
    statement, a write's statements go with its next query, and a job is numbered from the
    opening read: a decorate, its report and the lane after them, on a memory with nothing to
    forget, wait on the server 21 times (28 before writes were pipelined; 16 statements of
    their own, 27 before 2026-12-04), each a round trip to a remote server. The ceiling sits a
    little above, so that a change that adds one fails here."""
    with fadeway.open(db, clock=clock, background=False) as eng:
        mem, history = eng.memory("m"), []
        for t in range(4):
            talk_once(mem, history, f"Turn {t}: how is the refund line review going?")
            eng.drain()
        counts = _round_trips(eng.services.store, monkeypatch)
        talk_once(mem, history, "And the legal review?")
        eng.drain()
    assert sum(counts) <= 22, counts


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_a_connection_back_within_the_idle_window_is_lent_unchecked(store, monkeypatch):
    """The pool checks a connection (a round trip) only when it has been idle for
    POSTGRES_CHECK_IDLE_SECONDS or more; one the server dropped meanwhile fails one call with a
    StoreError, and the next call gets another."""
    import psycopg

    from fadeway import _constants as C

    checked = []
    pool = type(store._pool)
    real = pool.check_connection
    monkeypatch.setattr(
        pool, "check_connection", staticmethod(lambda c: (checked.append(c), real(c)))
    )
    for _ in range(2 * C.POSTGRES_POOL_SIZE):  # every connection the pool holds back once
        with store.read("a") as tx:
            tx.memory()
    before = len(checked)
    for _ in range(3):
        with store.read("a") as tx:
            tx.memory()
    assert len(checked) == before  # back within the window: no check
    monkeypatch.setattr(C, "POSTGRES_CHECK_IDLE_SECONDS", 0.0)
    for _ in range(3):
        with store.read("a") as tx:
            tx.memory()
    assert len(checked) == before + 3  # idle past the window: checked each time

    monkeypatch.setattr(C, "POSTGRES_CHECK_IDLE_SECONDS", 3600.0)
    with psycopg.connect(store._url, autocommit=True) as killer:  # as a restart would
        killer.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    time.sleep(0.2)
    with pytest.raises(StoreError, match="the read failed"):
        with store.read("a") as tx:
            tx.memory()
    for _ in range(2 * C.POSTGRES_POOL_SIZE):  # the others are checked, and replaced
        with store.read("a") as tx:
            assert tx.memory() is not None


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_a_read_is_one_snapshot(store):
    with store.read("a") as snapshot:
        assert snapshot.message_count() == 0
        with store.write("a") as tx:
            tx.insert_messages([message_record(0)])
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
def test_a_read_that_has_its_rows_does_not_fail_for_its_lost_roll_back(store, db):
    """The server ends a read's connection after the caller has read what it wanted: the read
    ends without an error (its ROLLBACK, sent with the pipeline's closing sync, meets the lost
    connection; the server rolled it back already), and the next call gets a fresh one."""
    import psycopg

    with store.read("a") as tx:
        seen = tx.message_count()
        (pid,) = tx._conn.execute("SELECT pg_backend_pid()").fetchone()
        with psycopg.connect(db, autocommit=True) as killer:
            killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with store.read("a") as tx:
        assert tx.message_count() == seen


@pytest.mark.postgres
def test_a_server_restart_fails_the_call_it_cuts_and_the_next_one_works(clock, monkeypatch):
    """A real restart (a cluster of the test's own, stopped and started again with pg_ctl): the
    call that meets the stopped server raises a StoreError naming the cause and writes nothing;
    once the server is back, the same engine's next call works on a new connection."""
    why = pg.why_no_cluster()
    if why:
        pytest.skip(why)
    from fadeway import _constants as C

    # Lend the pooled connection unchecked, as a call within a second of the last one is, so
    # that the call meets the stopped server however long pg_ctl takes to stop it.
    monkeypatch.setattr(C, "POSTGRES_CHECK_IDLE_SECONDS", 3600.0)
    root = Path(tempfile.mkdtemp(prefix="fadeway-pg-"))
    try:
        url = pg.start(root)
        engine = fadeway.open(url, clock=clock, background=False)
        try:
            mem = engine.memory("m")
            history: list = []
            talk_once(mem, history, "before the restart")
            pg.halt(root)
            history.append({"role": "user", "content": "during the restart"})
            with pytest.raises(StoreError, match="rolled back: .*closed the connection"):
                mem.decorate({"model": "gpt-4.1", "messages": history})
            pg.restart(root, url)
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
            mem.report(request, chat_reply("After the restart"))
            said = [json.loads(m.body)["content"] for m in mem.messages()]
            assert said == [
                "before the restart",
                "About before the restart",
                "during the restart",
                "After the restart",
            ]
        finally:
            engine.close()
    finally:
        pg.stop(root)


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_fadeway_db_names_a_postgres_store_for_the_command_line(db):
    """`FADEWAY_DB=postgresql://...` is the store of every command given no `--db`."""
    import subprocess

    sample = Path(fadeway.__file__).parent / "samples" / "quickstart.jsonl"
    env = {**os.environ, "FADEWAY_DB": db}

    def cli(*args: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "fadeway", *args],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout

    cli("replay", str(sample))
    [listed] = json.loads(cli("memories", "--json"))["memories"]
    assert (listed["memory_id"], listed["messages"]) == ("quickstart", 16)
    with fadeway.open(db, background=False) as engine:
        assert len(engine.memory("quickstart").messages()) == 16


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
            tx.insert_messages([message_record(0), message_record(1)])
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


# -- wake-ups: LISTEN/NOTIFY ------------------------------------------------------------------


def _until(predicate, seconds: float):
    """`predicate()` once it is truthy, polled for up to `seconds` (else its last value)."""
    deadline = time.monotonic() + seconds
    while not (found := predicate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def _listeners(db: str) -> list[int]:
    """The backends of the workers' listeners that are listening (their pids)."""
    import psycopg

    from fadeway.store.postgres import LISTENER_NAME

    with psycopg.connect(db, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
            "AND query LIKE 'LISTEN%%'",
            (LISTENER_NAME,),
        ).fetchall()
    return [pid for (pid,) in rows]


def _drained(engine, memory_id: str, seconds: float) -> list:
    """Waits up to `seconds` for the memory's lane to run dry: its jobs (none pending)."""

    def jobs():
        with engine.store.read(memory_id) as tx:
            return tx.jobs()

    _until(lambda: not engine.store.memories_with_pending_jobs(), seconds)
    return jobs()


@pytest.fixture
def idle_poll_a_minute(monkeypatch):
    """An idle worker polls once a minute: within a test, only a notification wakes it."""
    from fadeway import _constants as C

    monkeypatch.setattr(C, "LANE_IDLE_POLL_SECONDS", 60.0)


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_a_worker_runs_the_jobs_another_engine_queues_at_once(db, clock, idle_poll_a_minute):
    """An app (background=False) queues jobs; a worker engine idling on a minute's poll runs
    them within seconds: the app's commits notified it."""
    from conftest import open_small

    with open_small(db, clock, background=True) as worker, open_small(db, clock) as app:
        assert _until(lambda: _listeners(db), 10)
        time.sleep(0.5)  # the worker's first look found nothing: it waits out its poll now
        talk(app, "m", clock, 12)
        jobs = _drained(worker, "m", 10)
        assert jobs and [j.state for j in jobs] == ["done"] * len(jobs)
        with app.store.read("m") as tx:
            assert tx.episodes()  # a cut ran, in the worker


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_queued_jobs_notify_at_commit_with_no_payload_and_not_on_rollback(db, store):
    import psycopg

    wake, stop = threading.Event(), threading.Event()
    thread = store.listen_for_jobs(wake, stop)
    assert thread is not None
    try:
        with psycopg.connect(db, autocommit=True) as spy:
            spy.execute("LISTEN fadeway_jobs")
            assert wake.wait(10)  # set once listening, for what was queued before
            wake.clear()
            with pytest.raises(RuntimeError):
                with store.write("a") as tx:
                    tx.enqueue("cut", b"", 0.0)
                    raise RuntimeError("rolled back")
            assert not wake.wait(1.0)
            assert list(spy.notifies(timeout=0.2)) == []
            with store.write("a") as tx:
                tx.enqueue("cut", b"", 0.0)
                tx.enqueue("cut", b"", 0.0)
                assert not wake.wait(0.5)  # not before the commit
            assert wake.wait(5)
            sent = list(spy.notifies(timeout=1.0))
            assert [(n.channel, n.payload) for n in sent] == [("fadeway_jobs", "")]  # no id
        with store.read("a") as tx:
            assert [j.state for j in tx.jobs()] == ["pending", "pending"]
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_closing_a_worker_stops_its_listener_at_once(db, clock, idle_poll_a_minute):
    engine = fadeway.open(db, clock=clock, background=True)
    try:
        assert len(_until(lambda: _listeners(db), 10)) == 1
    finally:
        start = time.monotonic()
        engine.close()
        took = time.monotonic() - start
    assert took < 2.0
    assert _until(lambda: not _listeners(db), 5)


@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.postgres
def test_a_listener_whose_connection_is_killed_listens_again(
    db, clock, idle_poll_a_minute, monkeypatch, caplog
):
    """The server ends the listener's connection (as a restart would): a warning, a new
    connection, and jobs queued after it still wake the worker."""
    import psycopg

    from conftest import open_small
    from fadeway import _constants as C

    monkeypatch.setattr(C, "LANE_LISTEN_RETRY_SECONDS", 0.2)
    with open_small(db, clock, background=True) as worker, open_small(db, clock) as app:
        [first] = _until(lambda: _listeners(db), 10)
        with caplog.at_level("WARNING", logger="fadeway.store"):
            with psycopg.connect(db, autocommit=True) as killer:
                killer.execute("SELECT pg_terminate_backend(%s)", (first,))
            again = _until(lambda: [p for p in _listeners(db) if p != first], 10)
        assert len(again) == 1
        assert "listening for queued jobs failed" in caplog.text
        time.sleep(0.5)  # the wake-up of the new connection is spent
        talk(app, "m", clock, 12)
        jobs = _drained(worker, "m", 10)
        assert jobs and [j.state for j in jobs] == ["done"] * len(jobs)
