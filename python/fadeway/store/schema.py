"""The versioned schema. Each migration moves the schema up by one version; never edit one that
has shipped, add the next. Tables and queries are portable SQL, shared by every backend; what
only one backend can say (the triggers that keep logs append-only) sits beside it, in SQLite's
and in PostgreSQL's words. PostgreSQL reads the portable SQL with its own type names
(`for_postgres`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import SchemaVersionError

if TYPE_CHECKING:
    from .queries import Executor

__all__ = ["Migration", "MIGRATIONS", "SCHEMA_VERSION", "for_postgres", "migrate"]

log = logging.getLogger("fadeway.store")


@dataclass(frozen=True)
class Migration:
    portable: list[str]
    sqlite: list[str] = field(default_factory=list)
    postgres: list[str] = field(default_factory=list)


#: PostgreSQL's words for the portable schema's types, applied in order: memory ids as bytes
#: (an id may hold NUL, which PostgreSQL text cannot), 64-bit integers (SQLite's INTEGER is
#: 64-bit, PostgreSQL's 32), bytes as BYTEA, and text compared byte by byte as SQLite does.
_POSTGRES_TYPES = [
    (re.compile(r"\bmemory_id TEXT\b"), "memory_id BYTEA"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bBLOB\b"), "BYTEA"),
    (re.compile(r"\bTEXT\b"), 'TEXT COLLATE "C"'),
]


def for_postgres(statement: str) -> str:
    """A portable statement as PostgreSQL runs it: its type names mapped (upper case only, so
    column names and quoted text are never touched)."""
    for pattern, word in _POSTGRES_TYPES:
        statement = pattern.sub(word, statement)
    return statement


#: The trigger function that refuses a change to an append-only table, with its reason.
_POSTGRES_REFUSE = """CREATE FUNCTION fadeway_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', TG_ARGV[0] USING ERRCODE = 'restrict_violation';
END $$"""


#: The memory a transaction is bound to (`set_config('fadeway.memory_id', <hex of its id>,
#: true)`), and whether it spans every memory (listing ids, migrating): what row-level
#: security lets a transaction see.
_POSTGRES_MEMORY = [
    """CREATE FUNCTION fadeway_memory() RETURNS bytea LANGUAGE sql STABLE AS $$
SELECT decode(COALESCE(current_setting('fadeway.memory_id', true), ''), 'hex') $$""",
    """CREATE FUNCTION fadeway_every_memory() RETURNS boolean LANGUAGE sql STABLE AS $$
SELECT COALESCE(current_setting('fadeway.every_memory', true), '') = 'on' $$""",
]


def _one_memory(*tables: str) -> list[str]:
    """PostgreSQL's row-level security on `tables`, the second guard of isolation: a
    transaction sees and writes the rows of its own memory only (or of every memory, when it
    says it spans them), the tables' owner included."""
    out: list[str] = []
    for table in tables:
        out += [
            f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY {table}_one_memory ON {table} "
            "USING (memory_id = fadeway_memory() OR fadeway_every_memory())",
        ]
    return out


def _migration(
    portable: list[str],
    *,
    append_only: tuple[str | tuple[str, str], ...] = (),
    isolated: tuple[str, ...] = (),
    postgres: tuple[str, ...] = (),
) -> Migration:
    """A migration with the triggers that keep `append_only` tables so on both stores, and
    PostgreSQL's row-level security on the `isolated` tables it creates."""
    sqlite, guards = _append_only(*append_only)
    return Migration(portable, sqlite, [*postgres, *guards, *_one_memory(*isolated)])


def _append_only(*tables: str | tuple[str, str]) -> tuple[list[str], list[str]]:
    """The SQLite and the PostgreSQL triggers that keep `tables` append-only; a (table, column)
    pair may change in that column alone."""
    sqlite: list[str] = []
    postgres: list[str] = []
    for table in tables:
        name, allow = (table, None) if isinstance(table, str) else table
        sqlite += _sqlite_append_only(name, allow=allow)
        postgres += _postgres_append_only(name, allow=allow)
    return sqlite, postgres


def _postgres_append_only(table: str, *, allow: str | None) -> list[str]:
    """PostgreSQL triggers that refuse to delete or truncate rows of `table` or to change them
    (but `allow`)."""
    when = (
        ""
        if allow is None
        else " WHEN ("
        + " OR ".join(f"NEW.{c} IS DISTINCT FROM OLD.{c}" for c in _COLUMNS[table] if c != allow)
        + ")"
    )
    what = f"{table} are never edited" if allow is None else f"{table} change only in {allow}"
    gone = f"{table} are never deleted"
    return [
        f"CREATE TRIGGER {table}_never_edited BEFORE UPDATE ON {table} FOR EACH ROW{when} "
        f"EXECUTE FUNCTION fadeway_refuse('{what}')",
        f"CREATE TRIGGER {table}_never_deleted BEFORE DELETE ON {table} FOR EACH ROW "
        f"EXECUTE FUNCTION fadeway_refuse('{gone}')",
        f"CREATE TRIGGER {table}_never_truncated BEFORE TRUNCATE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION fadeway_refuse('{gone}')",
    ]


def _sqlite_append_only(table: str, *, allow: str | None = None) -> list[str]:
    """SQLite triggers that refuse to delete rows of `table` or to change them (but `allow`)."""
    update = (
        f"BEFORE UPDATE ON {table}"
        if allow is None
        else f"BEFORE UPDATE ON {table} WHEN "
        + " OR ".join(f"NEW.{c} IS NOT OLD.{c}" for c in _COLUMNS[table] if c != allow)
    )
    what = f"{table} are never edited" if allow is None else f"{table} change only in {allow}"
    return [
        f"CREATE TRIGGER {table}_never_edited {update} BEGIN SELECT RAISE(ABORT, '{what}'); END",
        f"CREATE TRIGGER {table}_never_deleted BEFORE DELETE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} are never deleted'); END",
    ]


_COLUMNS = {
    "messages": [],
    "traces": [],
    "notes": [],
    "facts": [],
    "acks": [],
    "entities": [],
    "aliases": [],
    "edges": [],
    "retirements": [],
    "passages": [],
    "vectors": [],
    "recalls": [],
    "distills": [],
    "recall_finals": [],
    "walks": [],
    "usage": [],
    "emitted": [],
    "episodes": [
        "memory_id",
        "n",
        "first_seq",
        "last_seq",
        "first_turn",
        "last_turn",
        "start_at",
        "end_at",
        "tokens",
        "cut_at",
        "state",
    ],
}


def _block_texts(table: str) -> str:
    """A table of rewritten recall blocks, one per turn (NULL text: the block was removed)."""
    return f"""CREATE TABLE {table} (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            turn INTEGER NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            text TEXT,
            tokens INTEGER NOT NULL,
            PRIMARY KEY (memory_id, turn),
            FOREIGN KEY (memory_id, turn) REFERENCES recalls (memory_id, turn)
        )"""


MIGRATIONS: list[Migration] = [
    # 1: memories, messages and decorated requests.
    _migration(
        [
            """CREATE TABLE memories (
            memory_id TEXT PRIMARY KEY,
            format TEXT NOT NULL CHECK (format IN ('chat_completions', 'responses')),
            created_at DOUBLE PRECISION NOT NULL,
            instructions BLOB,
            decorated_through INTEGER NOT NULL DEFAULT 0
        )""",
            """CREATE TABLE messages (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            seq INTEGER NOT NULL CHECK (seq >= 0),
            turn INTEGER NOT NULL CHECK (turn >= 0),
            at DOUBLE PRECISION NOT NULL,
            role TEXT NOT NULL,
            kind TEXT NOT NULL,
            side TEXT NOT NULL CHECK (side IN ('user', 'system', 'assistant', 'output')),
            source TEXT NOT NULL CHECK (source IN ('request', 'reply')),
            tokens INTEGER NOT NULL CHECK (tokens >= 0),
            digest BLOB NOT NULL,
            calls TEXT,
            answers TEXT,
            body BLOB NOT NULL,
            PRIMARY KEY (memory_id, seq)
        )""",
            """CREATE TABLE requests (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            n INTEGER NOT NULL CHECK (n >= 1),
            at DOUBLE PRECISION NOT NULL,
            model TEXT,
            encoding TEXT NOT NULL,
            estimate INTEGER NOT NULL,
            view_len INTEGER NOT NULL,
            view_last BLOB,
            history_through INTEGER NOT NULL,
            provider_tokens INTEGER,
            ratio_kept INTEGER,
            ratio_note TEXT,
            replied INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (memory_id, n)
        )""",
        ],
        isolated=("memories", "messages", "requests"),
        postgres=(_POSTGRES_REFUSE, *_POSTGRES_MEMORY),
    ),
    # 2: episodes, the append-only trace log, and the ordered lane (durable per-memory jobs).
    _migration(
        [
            """CREATE TABLE episodes (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            n INTEGER NOT NULL CHECK (n >= 1),
            first_seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            first_turn INTEGER NOT NULL,
            last_turn INTEGER NOT NULL,
            start_at DOUBLE PRECISION NOT NULL,
            end_at DOUBLE PRECISION NOT NULL,
            tokens INTEGER NOT NULL,
            cut_at DOUBLE PRECISION NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('live', 'leaving', 'sealed', 'forgotten')),
            PRIMARY KEY (memory_id, n),
            CHECK (first_seq <= last_seq)
        )""",
            """CREATE TABLE traces (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            n INTEGER NOT NULL CHECK (n >= 1),
            episode INTEGER NOT NULL,
            fact INTEGER,
            kind TEXT NOT NULL CHECK (kind IN ('encoding', 'fact')),
            score DOUBLE PRECISION NOT NULL,
            counted INTEGER NOT NULL CHECK (counted IN (0, 1)),
            at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (memory_id, n),
            FOREIGN KEY (memory_id, episode) REFERENCES episodes (memory_id, n)
        )""",
            """CREATE TABLE jobs (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            n INTEGER NOT NULL CHECK (n >= 1),
            kind TEXT NOT NULL,
            payload BLOB NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'failed')),
            attempts INTEGER NOT NULL DEFAULT 0,
            error TEXT,
            PRIMARY KEY (memory_id, n)
        )""",
            "CREATE INDEX jobs_pending ON jobs (memory_id, n) WHERE state = 'pending'",
            """CREATE TABLE lanes (
            memory_id TEXT PRIMARY KEY REFERENCES memories (memory_id),
            owner TEXT,
            lease_until DOUBLE PRECISION
        )""",
        ],
        append_only=("messages", "traces", ("episodes", "state")),
        isolated=("episodes", "traces", "jobs", "lanes"),
    ),
    # 3: notes the model wrote, their facts, the episodes each note acknowledged, and the
    # facts block's order (kept between fades and seals so a quiet turn repeats it exactly).
    _migration(
        [
            """CREATE TABLE notes (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            n INTEGER NOT NULL CHECK (n >= 1),
            at DOUBLE PRECISION NOT NULL,
            call_id TEXT,
            source TEXT NOT NULL,
            arguments TEXT NOT NULL,
            PRIMARY KEY (memory_id, n)
        )""",
            """CREATE TABLE facts (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            n INTEGER NOT NULL CHECK (n >= 1),
            note INTEGER NOT NULL,
            text TEXT NOT NULL,
            subject TEXT NOT NULL,
            object TEXT NOT NULL,
            milestone INTEGER NOT NULL CHECK (milestone IN (0, 1)),
            at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (memory_id, n),
            FOREIGN KEY (memory_id, note) REFERENCES notes (memory_id, n)
        )""",
            """CREATE TABLE acks (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            episode INTEGER NOT NULL,
            note INTEGER NOT NULL,
            PRIMARY KEY (memory_id, episode, note),
            FOREIGN KEY (memory_id, episode) REFERENCES episodes (memory_id, n),
            FOREIGN KEY (memory_id, note) REFERENCES notes (memory_id, n)
        )""",
            "ALTER TABLE memories ADD COLUMN facts_order TEXT",
        ],
        append_only=("notes", "facts", "acks"),
        isolated=("notes", "facts", "acks"),
    ),
    # 4: the knowledge graph (entities, their surface names, facts as edges, retirements),
    # passages of sealed conversation, the vectors of facts, passages and entities, and the
    # facts block's text as last rendered. All append-only: a merge is recorded on the newer
    # fact's edge, a retirement as its own row.
    _migration(
        [
            """CREATE TABLE entities (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            n INTEGER NOT NULL CHECK (n >= 1),
            name TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (memory_id, n)
        )""",
            """CREATE TABLE aliases (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            norm TEXT NOT NULL,
            entity INTEGER NOT NULL,
            name TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (memory_id, name),
            FOREIGN KEY (memory_id, entity) REFERENCES entities (memory_id, n)
        )""",
            """CREATE TABLE edges (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            fact INTEGER NOT NULL,
            subject INTEGER NOT NULL,
            object INTEGER NOT NULL,
            merged_into INTEGER,
            at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (memory_id, fact),
            FOREIGN KEY (memory_id, fact) REFERENCES facts (memory_id, n),
            FOREIGN KEY (memory_id, subject) REFERENCES entities (memory_id, n),
            FOREIGN KEY (memory_id, object) REFERENCES entities (memory_id, n)
        )""",
            """CREATE TABLE retirements (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            fact INTEGER NOT NULL,
            by_fact INTEGER NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (memory_id, fact),
            FOREIGN KEY (memory_id, fact) REFERENCES facts (memory_id, n),
            FOREIGN KEY (memory_id, by_fact) REFERENCES facts (memory_id, n)
        )""",
            """CREATE TABLE passages (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            n INTEGER NOT NULL CHECK (n >= 1),
            episode INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            part INTEGER NOT NULL,
            turn INTEGER NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            PRIMARY KEY (memory_id, n),
            FOREIGN KEY (memory_id, episode) REFERENCES episodes (memory_id, n)
        )""",
            """CREATE TABLE vectors (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            kind TEXT NOT NULL CHECK (kind IN ('fact', 'passage', 'entity')),
            embedder TEXT NOT NULL,
            n INTEGER NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (memory_id, kind, embedder, n)
        )""",
            "ALTER TABLE memories ADD COLUMN facts_block TEXT",
        ],
        append_only=("entities", "aliases", "edges", "retirements", "passages", "vectors"),
        isolated=("entities", "aliases", "edges", "retirements", "passages", "vectors"),
    ),
    # 5: recall. The block each user turn got (kept with its turn), its distilled rewrite as
    # the lane prepared it, the final text fixed when the next message arrived (so the turn's
    # block is byte-stable from then on), and the walk the lane prepared after each reply.
    _migration(
        [
            """CREATE TABLE recalls (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            turn INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            text TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            facts TEXT NOT NULL,
            passages TEXT NOT NULL,
            PRIMARY KEY (memory_id, turn)
        )""",
            _block_texts("distills"),
            _block_texts("recall_finals"),
            """CREATE TABLE walks (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            turn INTEGER NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            levels TEXT NOT NULL,
            PRIMARY KEY (memory_id, turn)
        )""",
        ],
        append_only=("recalls", "distills", "recall_finals", "walks"),
        isolated=("recalls", "distills", "recall_finals", "walks"),
    ),
    # 6: what each call to a model (judge or note writer) cost, by the memory it was for.
    _migration(
        [
            """CREATE TABLE usage (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            n INTEGER NOT NULL CHECK (n >= 1),
            at DOUBLE PRECISION NOT NULL,
            kind TEXT NOT NULL,
            model TEXT NOT NULL,
            tokens_in INTEGER NOT NULL,
            tokens_out INTEGER NOT NULL,
            seconds DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (memory_id, n)
        )""",
        ],
        append_only=("usage",),
        isolated=("usage",),
    ),
    # 7: a per-memory count of changes to episodes (each insert or change of state bumps it, and
    # marks the rows it wrote), so a mirror of the episodes reads only what changed since.
    Migration(
        [
            "ALTER TABLE memories ADD COLUMN episode_changes INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE episodes ADD COLUMN changed INTEGER NOT NULL DEFAULT 0",
            "CREATE INDEX episodes_by_change ON episodes (memory_id, changed)",
        ]
    ),
    # 8: when a job that could not reach its judge or embedder may run again (Unix seconds of
    # the real clock; NULL: at once), and how many of its attempts failed so, so an outage is
    # waited out instead of failing the job.
    Migration(
        [
            "ALTER TABLE jobs ADD COLUMN retry_at DOUBLE PRECISION",
            "ALTER TABLE jobs ADD COLUMN waits INTEGER NOT NULL DEFAULT 0",
        ]
    ),
    # 9: a job out of attempts is parked (state 'failed', never deleted) and tried again later:
    # how many times it was parked (its wait doubles each time; `retry_at` is when it may run
    # again). Jobs an older fadeway gave up are parked once, to run again at the next lane run.
    Migration(
        [
            "ALTER TABLE jobs ADD COLUMN parked INTEGER NOT NULL DEFAULT 0",
            "UPDATE jobs SET parked = 1, retry_at = NULL WHERE state = 'failed'",
            "CREATE INDEX jobs_parked ON jobs (memory_id, n) WHERE state = 'failed'",
        ]
    ),
    # 10: the digest of every block text fadeway put in a request it returned (the facts block
    # in each version, each recall block as shown, the note ask), so that a caller's own
    # message that merely looks like a block is told from one fadeway emitted (issue 33, item
    # 4); and whether a memory's blocks are so tracked: not for memories from before this
    # version, whose blocks fadeway still recognises by their look.
    _migration(
        [
            """CREATE TABLE emitted (
            memory_id TEXT NOT NULL REFERENCES memories (memory_id),
            digest BLOB NOT NULL,
            PRIMARY KEY (memory_id, digest)
        )""",
            "ALTER TABLE memories ADD COLUMN blocks_tracked INTEGER NOT NULL DEFAULT 0 "
            "CHECK (blocks_tracked IN (0, 1))",
        ],
        append_only=("emitted",),
        isolated=("emitted",),
    ),
    # 11: passages by the time they were said, for recall's passages of a day a message names.
    Migration(["CREATE INDEX passages_by_time ON passages (memory_id, at)"]),
    # 12: a per-memory count of the write transactions that changed it (the lane's bookkeeping
    # of its jobs and lease aside), so a request decorated and stored later (`Memory.prepare`)
    # is stored only onto the memory it was decorated from.
    Migration(["ALTER TABLE memories ADD COLUMN version INTEGER NOT NULL DEFAULT 0"]),
    # 13: of a model call's tokens read, those its provider served from its prompt cache (billed
    # lower; 0 for calls recorded before, and when the provider does not say).
    Migration(["ALTER TABLE usage ADD COLUMN tokens_cached INTEGER NOT NULL DEFAULT 0"]),
]

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: Executor, statements: Callable[[Migration], Iterable[str]], where: str) -> None:
    """Bring the schema at `conn` (inside a transaction the caller commits) up to
    SCHEMA_VERSION, running each missing migration's `statements`; a newer schema is refused
    (`where` names the store in messages)."""
    conn.execute("CREATE TABLE IF NOT EXISTS fadeway_schema (version INTEGER NOT NULL)")
    row = conn.execute("SELECT version FROM fadeway_schema").fetchone()
    version = row[0] if row else 0
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} has schema version {version}; this fadeway understands up to "
            f"{SCHEMA_VERSION}: upgrade fadeway"
        )
    for step in MIGRATIONS[version:]:
        for statement in statements(step):
            conn.execute(statement)
    if row is None:
        conn.execute("INSERT INTO fadeway_schema (version) VALUES (?)", (SCHEMA_VERSION,))
    elif version != SCHEMA_VERSION:
        conn.execute("UPDATE fadeway_schema SET version = ?", (SCHEMA_VERSION,))
        log.info("migrated %s from schema %d to %d", where, version, SCHEMA_VERSION)
