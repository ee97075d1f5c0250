"""Index directories derived from memory ids stay inside the data directory, whatever the id."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fadeway.errors import InvalidMemoryIdError
from fadeway.index.paths import data_dir_for, index_dir

DATA = Path("/srv/fadeway/memories.db.indexes")
NASTY = [
    "../../etc/passwd",
    "/etc/passwd",
    "a/../../b",
    "..",
    ".",
    "nul\x00byte",
    "\\..\\x",
    "x" * 100_000,
    "ü🙂\u202e",
    "\ud800lone surrogate",
    "C:\\Windows",
    "~root",
]


def inside(base: Path, path: Path) -> bool:
    base_real, path_real = os.path.normpath(base), os.path.normpath(path)
    return os.path.commonpath([base_real, path_real]) == base_real and path_real != base_real


@pytest.mark.parametrize("memory_id", NASTY)
def test_nasty_ids_stay_inside(memory_id):
    path = index_dir(DATA, memory_id)
    assert inside(DATA, path)
    assert len(path.relative_to(DATA).parts) == 2
    assert all(len(part) <= 64 for part in path.parts)
    assert "\x00" not in str(path) and ".." not in path.parts


@given(st.text(min_size=1))
def test_any_text_id_stays_inside_and_is_stable(memory_id):
    path = index_dir(DATA, memory_id)
    assert inside(DATA, path)
    assert path == index_dir(DATA, memory_id)
    assert path.name.isalnum() and path.parent.name == path.name[:2]


@given(st.text(min_size=1), st.text(min_size=1))
def test_distinct_ids_get_distinct_directories(a, b):
    assert (index_dir(DATA, a) == index_dir(DATA, b)) == (a == b)


def test_ids_that_differ_only_in_normal_form_stay_apart():
    assert index_dir(DATA, "caf\u00e9") != index_dir(DATA, "cafe\u0301")


def test_a_relative_data_dir_stays_relative_and_inside(tmp_path):
    path = index_dir("rel", "../x")
    assert not path.is_absolute() and inside(Path("rel"), path)
    assert not index_dir(tmp_path, "m").exists()  # nothing is created


@pytest.mark.parametrize("memory_id", ["", None, 7, b"bytes"])
def test_an_invalid_memory_id_is_refused(memory_id):
    with pytest.raises(InvalidMemoryIdError, match="non-empty str"):
        index_dir(DATA, memory_id)


def test_data_dir_sits_beside_the_sqlite_file(tmp_path):
    db = tmp_path / "memories.db"
    assert data_dir_for(db) == tmp_path / "memories.db.indexes"
    assert data_dir_for(f"sqlite:///{db}") == tmp_path / "memories.db.indexes"
    assert data_dir_for(f"file:{db}?mode=rwc") == tmp_path / "memories.db.indexes"
    assert data_dir_for("memories.db") == Path.cwd() / "memories.db.indexes"


@pytest.mark.parametrize(
    "db",
    [
        ":memory:",
        "",
        "sqlite:///:memory:",
        "file::memory:",
        "file:shared?mode=memory&cache=shared",
        "postgresql://db.example/fadeway",
    ],
)
def test_no_data_dir_without_a_file(db):
    assert data_dir_for(db) is None
