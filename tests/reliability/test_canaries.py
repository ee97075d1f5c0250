"""Cross-memory canaries (issue 33, "The suite"), on SQLite and on PostgreSQL: memories with
hostile ids (path traversal, NUL, Unicode confusables and normal forms, SQL and LIKE fragments,
ids at the length limit) in one store, each holding its own canary string in messages, notes,
facts, episodes and passages. Every read path of each memory (export, messages and episodes,
fact and passage search, a decorate's facts and recall blocks, `fadeway recall`'s preview,
`fadeway inspect`, usage) shows its own canary and never another's; no file is written outside
the store's index directory; ids fadeway refuses are refused with a FadewayError saying what is
wrong.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

import fadeway
from conftest import Clock, open_small
from fadeway import errors
from fadeway.cli.inspection import inspect_memory
from fadeway.cli.spending import memory_usage, parked_jobs
from fadeway.index.paths import INDEX_DIR_SUFFIX
from fadeway.recall.turns import preview
from helpers import converse_with_notes

from .tiers import TIERS, figure, scaled

#: The canary of memory i: the same length for every i (so an export's token counts hold).
PLACEHOLDER = b"CANARY0000"
CANARY = re.compile(r"CANARY\d{4}")

HOSTILE = [
    "plain",
    "../x",
    "../../../../etc/passwd",
    "/absolute/path",
    "a/b\\c",
    ".",
    "..",
    "nul\x00byte",
    "\x00",
    "admin",
    "\u0430dmin",  # Cyrillic a
    "\uff41\uff44\uff4d\uff49\uff4e",  # fullwidth
    "caf\u00e9",  # NFC
    "cafe\u0301",  # NFD: the same text to a reader, another id
    "A",
    "a",
    "a'; DROP TABLE x;--",
    "' OR '1'='1",
    '"; DELETE FROM messages; --',
    "%",
    "_",
    "a%",
    "%a%",
    "a_",
    "\\",
    "[a-z]*",
    "\u202eevil",  # right-to-left override
    " ",
    "a ",
    "\n",
    "x" * 1024,  # at the limit
    "\U0001f389" * 1024,  # at the limit, in four-byte characters
]

#: Refused ids, and what the error says.
REFUSED: list[tuple[Any, str]] = [
    ("", "must not be empty"),
    ("x" * 10_240, "at most 1024 characters, not 10240"),
    ("a\ud800b", "lone surrogate"),
    (None, "must be a string"),
    (b"bytes", "must be a string"),
    (7, "must be a string"),
]

#: Characters random ids of the long tier are drawn from.
ALPHABET = "%_'\";-/\\.\x00 \t\n*[]aAа\u00e9\u0301\u202e\U0001f389x0"

QUESTION = "What is my secret code word?"


def random_ids(n: int) -> list[str]:
    rng = random.Random(3304)
    ids = {"".join(rng.choices(ALPHABET, k=rng.randint(1, 12))) for _ in range(n)}
    return sorted(ids - set(HOSTILE))


@pytest.fixture(scope="module")
def base_export(tmp_path_factory) -> bytes:
    """A memory with messages, notes, facts, sealed episodes and passages, each carrying the
    placeholder canary."""
    clock = Clock()
    path = tmp_path_factory.mktemp("canary-base") / "base.db"
    with open_small(path, clock) as engine:
        memory = engine.memory("base")
        secret = PLACEHOLDER.decode()
        notes = [
            [(f"The user's code word {j} is {secret}.", "user", f"code word {j} {secret}", False)]
            for j in range(2)
        ]
        opening = [f"My secret is {secret}."] * 3
        converse_with_notes(engine, memory, clock, notes, opening=opening, words=30)
        return fadeway.dumps(memory.export())


def text(value: Any) -> str:
    """All of `value` as text (bytes read as UTF-8), for finding canaries in."""
    plain = msgspec.to_builtins(value, builtin_types=(bytes,))
    return json.dumps(plain, ensure_ascii=False, default=lambda b: b.decode("utf-8", "replace"))


def reads(engine: fadeway.Engine, memory_id: str, at: float) -> dict[str, str]:
    """What each read path shows of a memory."""
    memory = engine.memory(memory_id)
    recalled = preview(engine.services, memory_id, QUESTION)  # what `fadeway recall` shows
    shown = {
        "export": fadeway.dumps(memory.export()).decode(),
        "messages": text(memory.messages()),
        "episodes": text(memory.episodes()),
        "search facts": text(memory.search("code word secret", kind="fact", k=50)),
        "search passages": text(memory.search("my secret is", kind="passage", k=50)),
        "inspect": text(inspect_memory(engine.store, memory_id, at)),
        "recall preview": text([recalled.block, recalled.facts, recalled.passages]),
        "usage": text([memory.usage(), memory_usage(engine.store, memory_id)]),
        "parked jobs": text([memory.parked_jobs(), parked_jobs(engine.store, memory_id)]),
    }
    request = {"model": "gpt-4.1", "messages": [{"role": "user", "content": QUESTION}]}
    shown["decorate (facts and recall blocks)"] = text(memory.decorate(request))
    return shown


@pytest.mark.both_stores
@pytest.mark.parametrize("tier", TIERS)
def test_no_read_path_shows_another_memorys_canary(db, tmp_path, tier, base_export):
    ids = HOSTILE + random_ids(scaled(tier, 0, 300))
    clock = Clock(2_000_000_000.0)
    with fadeway.open(db, clock=clock, background=False) as engine:
        for i, memory_id in enumerate(ids, start=1):
            doc = fadeway.loads(base_export.replace(PLACEHOLDER, f"CANARY{i:04d}".encode()))
            engine.import_memory(msgspec.structs.replace(doc, memory_id=memory_id))
        engine.drain()  # embeds every memory's facts and passages for search
        assert sorted(engine.memory_ids()) == sorted(ids)
        count = 0
        for i, memory_id in enumerate(ids, start=1):
            for path, shown in reads(engine, memory_id, clock()).items():
                count += 1
                seen = set(CANARY.findall(shown))
                assert seen <= {f"CANARY{i:04d}"}, f"{path} of {memory_id!r:.40} shows {seen}"
                if path in (
                    "export",
                    "messages",
                    "search facts",
                    "decorate (facts and recall blocks)",
                ):
                    assert seen, f"{path} of {memory_id!r:.40} lost its own canary"
    name = "" if "://" in db else Path(db).name  # a server's store writes no file here
    outside = [
        p
        for p in tmp_path.rglob("*")
        if p.is_file() and not (name and p.relative_to(tmp_path).parts[0].startswith(name))
    ]
    assert not outside, f"files written outside the store: {outside}"
    if name:  # an SQLite file: each memory's indexes under the hash of its id, beside it
        index = tmp_path / (name + INDEX_DIR_SUFFIX)
        dirs = set()
        for p in index.rglob("*"):
            parts = p.relative_to(index).parts
            assert re.fullmatch("[0-9a-f]{2}", parts[0]), p
            if len(parts) > 1:
                assert re.fullmatch("[0-9a-f]{64}", parts[1]) and parts[1][:2] == parts[0], p
                dirs.add(parts[1])
        assert len(dirs) == len(ids), "a memory's indexes were saved elsewhere or not at all"
    figure(
        f"canaries: {len(ids)} memories with hostile ids in one store, {count} reads on "
        f"{count // len(ids)} read paths; another memory's canary seen: 0; files outside the "
        "store's index directory: 0"
    )


@pytest.mark.parametrize(("memory_id", "says"), REFUSED)
def test_a_refused_id_is_a_fadeway_error_saying_why(tmp_path, base_export, memory_id, says):
    with fadeway.open(tmp_path / "store.db", background=False) as engine:
        with pytest.raises(errors.InvalidMemoryIdError, match=re.escape(says)) as caught:
            engine.memory(memory_id)
        assert isinstance(caught.value, errors.FadewayError)
        doc = msgspec.structs.replace(fadeway.loads(base_export), memory_id=memory_id)
        with pytest.raises(errors.FadewayError, match="memory.id|surrogate"):
            engine.import_memory(doc)
        assert engine.memory_ids() == []
