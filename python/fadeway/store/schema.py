"""The versioned schema. Each migration moves the schema up by one version; never edit one that
has shipped, add the next. The SQL is kept portable (no SQLite-only syntax in tables and queries)
so that PostgreSQL can share it behind the same interface.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

MIGRATIONS: list[list[str]] = [
    # 1: memories, messages and decorated requests.
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
]

SCHEMA_VERSION = len(MIGRATIONS)
