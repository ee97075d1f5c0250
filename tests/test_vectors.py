"""The per-memory vector index: exact hits first, growth, save/load round trips, and stored
files that are missing, corrupt or of another embedder."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from fadeway._constants import VECTOR_EXACT_MAX as EXACT_MAX
from fadeway.errors import EmbedderMismatchError
from fadeway.index.vectors import FORMAT_VERSION, VectorIndex

DIM = 32
NAME = "hashing-32"


def unit_rows(n: int, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def filled(n: int = 200, **settings) -> tuple[VectorIndex, np.ndarray, np.ndarray]:
    index = VectorIndex(DIM, NAME, **settings)
    ids = np.arange(n, dtype=np.int64) * 7 + 3  # ids need not be dense
    rows = unit_rows(n)
    index.add(ids, rows)
    return index, ids, rows


def test_each_vector_finds_its_own_id_first():
    index, ids, rows = filled()
    found, similarity = index.search(rows, 5)
    assert found.shape == similarity.shape == (len(ids), 5)
    assert found.dtype == np.int64 and similarity.dtype == np.float64
    np.testing.assert_array_equal(found[:, 0], ids)
    np.testing.assert_allclose(similarity[:, 0], 1.0, atol=1e-5)
    assert (np.diff(similarity, axis=1) <= 1e-6).all()  # most similar first


def test_one_query_gives_flat_arrays_with_cosine_similarities():
    index = VectorIndex(2, "toy")
    index.add([10, 20, 30], [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    found, similarity = index.search(np.array([2.0, 0.0]), 3)  # unnormalised query: cosine still
    assert found.tolist() == [10, 20, 30]
    np.testing.assert_allclose(similarity, [1.0, 0.0, -1.0], atol=1e-6)


def test_k_beyond_the_count_and_an_empty_index():
    empty = VectorIndex(DIM, NAME)
    found, similarity = empty.search(unit_rows(1)[0], 10)
    assert found.shape == similarity.shape == (0,)
    found, _ = empty.search(unit_rows(3), 10)
    assert found.shape == (3, 0)
    index, ids, rows = filled(4)
    found, _ = index.search(rows[0], 10)
    assert sorted(found.tolist()) == sorted(ids.tolist())
    assert index.search(rows[0], 0)[0].shape == (0,)


def test_len_contains_and_replacing_a_vector():
    index, ids, rows = filled(10)
    assert len(index) == 10 and index.max_id == int(ids.max())
    assert int(ids[3]) in index and 4 not in index and np.int64(ids[5]) in index
    index.add(ids[:1], rows[9:10])  # same id, new vector: replaced, not added
    assert len(index) == 10
    found, _ = index.search(rows[9], 2)
    assert set(found.tolist()) == {int(ids[0]), int(ids[9])}


def test_growth_beyond_the_initial_capacity():
    index = VectorIndex(DIM, NAME, capacity=8)
    rows = unit_rows(100, seed=1)
    for start in range(0, 100, 7):
        index.add(np.arange(start, min(start + 7, 100)), rows[start : start + 7])
    assert len(index) == 100 and index.capacity >= 100
    np.testing.assert_array_equal(index.search(rows, 1)[0][:, 0], np.arange(100))


@pytest.mark.parametrize(
    ("ids", "vectors", "match"),
    [
        ([1, 2], np.zeros((3, DIM)), r"vectors must be \(2, 32\)"),
        ([1], np.zeros((1, DIM + 1)), r"vectors must be \(1, 32\)"),
        ([-1], np.ones((1, DIM)), "non-negative"),
        ([5, 5], np.ones((2, DIM)), "distinct"),
        ([1], np.full((1, DIM), np.nan), "finite"),
    ],
)
def test_bad_adds_are_refused(ids, vectors, match):
    index = VectorIndex(DIM, NAME)
    with pytest.raises(ValueError, match=match):
        index.add(ids, vectors)
    assert len(index) == 0


def test_a_query_of_another_dimension_is_refused():
    index, _, _ = filled(3)
    with pytest.raises(ValueError, match=r"query must be \(32,\)"):
        index.search(np.ones(DIM + 1), 1)


def test_save_and_load_round_trip(tmp_path):
    index, ids, _ = filled()
    queries = unit_rows(20, seed=5)
    before = index.search(queries, 10)
    path = tmp_path / "deep" / "dir" / "passages.hnsw"
    index.save(path)
    loaded = VectorIndex.load(path, NAME, DIM)
    assert loaded is not None
    assert len(loaded) == len(index) and loaded.max_id == index.max_id
    after = loaded.search(queries, 10)
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    meta = json.loads((tmp_path / "deep" / "dir" / "passages.hnsw.json").read_text())
    assert meta["format"] == FORMAT_VERSION
    assert (meta["embedder"], meta["dim"], meta["count"], meta["max_id"]) == (
        NAME,
        DIM,
        len(ids),
        int(ids.max()),
    )
    assert sorted(p.name for p in path.parent.iterdir()) == ["passages.hnsw", "passages.hnsw.json"]
    loaded.add([10_000], unit_rows(1, seed=9))  # a loaded index keeps growing
    assert 10_000 in loaded


def test_saving_again_replaces_the_files(tmp_path):
    index, _, _ = filled(20)
    path = tmp_path / "i.hnsw"
    index.save(path)
    index.add([999], unit_rows(1, seed=3))
    index.save(path)
    loaded = VectorIndex.load(path, NAME, DIM)
    assert loaded is not None and 999 in loaded and len(loaded) == 21


@pytest.mark.parametrize(("name", "dim"), [("openai:text-embedding-3-small", DIM), (NAME, DIM * 2)])
def test_another_embedder_or_dimension_is_a_mismatch(tmp_path, name, dim):
    index, _, _ = filled(10)
    index.save(tmp_path / "i.hnsw")
    with pytest.raises(
        EmbedderMismatchError, match=f"built by embedder '{NAME}' with dimension {DIM}"
    ):
        VectorIndex.load(tmp_path / "i.hnsw", name, dim)


def test_missing_files_load_as_none(tmp_path):
    assert VectorIndex.load(tmp_path / "nothing.hnsw", NAME, DIM) is None
    index, _, _ = filled(10)
    index.save(tmp_path / "i.hnsw")
    (tmp_path / "i.hnsw").unlink()
    assert VectorIndex.load(tmp_path / "i.hnsw", NAME, DIM) is None


def test_a_corrupted_index_file_is_detected(tmp_path, caplog):
    index, _, _ = filled(50)
    path = tmp_path / "i.hnsw"
    index.save(path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="fadeway.vectors"):
        assert VectorIndex.load(path, NAME, DIM) is None
    assert "checksum" in caplog.text


def test_a_truncated_index_file_is_detected(tmp_path):
    index, _, _ = filled(50)
    path = tmp_path / "i.hnsw"
    index.save(path)
    path.write_bytes(path.read_bytes()[:100])
    assert VectorIndex.load(path, NAME, DIM) is None


def test_an_index_newer_than_its_sidecar_is_stale(tmp_path):
    # A crash between the two writes of a save leaves a new index beside an old sidecar.
    index, _, _ = filled(10)
    path = tmp_path / "i.hnsw"
    index.save(path)
    old_sidecar = (tmp_path / "i.hnsw.json").read_bytes()
    index.add([5000], unit_rows(1, seed=4))
    index.save(path)
    (tmp_path / "i.hnsw.json").write_bytes(old_sidecar)
    assert VectorIndex.load(path, NAME, DIM) is None


@pytest.mark.parametrize(
    "sidecar", [b"{not json", b"[]", b'{"format": 999}', b'{"format": 1, "embedder": "hashing-32"}']
)
def test_an_unreadable_sidecar_is_stale(tmp_path, sidecar):
    index, _, _ = filled(10)
    index.save(tmp_path / "i.hnsw")
    (tmp_path / "i.hnsw.json").write_bytes(sidecar)
    assert VectorIndex.load(tmp_path / "i.hnsw", NAME, DIM) is None


def test_the_same_adds_build_the_same_index():
    a, _, _ = filled(300)
    b, _, _ = filled(300)
    queries = unit_rows(30, seed=8)
    np.testing.assert_array_equal(a.search(queries, 10)[0], b.search(queries, 10)[0])


def test_a_small_index_answers_exactly_ties_by_id():
    index, ids, rows = filled(EXACT_MAX - 2)
    index.add(np.array([5, 6]), np.stack([rows[40], rows[40]]))  # two more equal to one held
    assert len(index) == EXACT_MAX
    stored = dict(zip(ids.tolist(), rows, strict=True))
    stored[5] = stored[6] = rows[40]
    keys = np.array(sorted(stored))
    matrix = np.stack([stored[i] for i in keys])
    queries = np.vstack([unit_rows(50, seed=9), rows[40:41]])
    got_ids, got_sim = index.search(queries, 12)
    for q, found, sim in zip(queries, got_ids, got_sim, strict=True):
        cos = matrix @ q
        want = keys[np.lexsort((keys, -cos))[:12]]
        np.testing.assert_array_equal(found, want)
        np.testing.assert_allclose(sim, cos[np.searchsorted(keys, want)], atol=1e-6)
    assert got_ids[-1][:3].tolist() == [5, 6, ids[40]]  # the same vector three times, by id


def test_a_small_index_reloaded_mid_way_answers_as_one_never_saved(tmp_path):
    # hnswlib restarts its random levels at a load, so the two grow different graphs (random
    # vectors of 512 dimensions: approximate searches of them disagree on 26 queries in 200);
    # the search of a small index must not depend on the graph.
    dim, name, n, half = 512, "hashing-512", EXACT_MAX - 24, 450
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(n, dim)).astype(np.float32)
    ids = np.arange(n, dtype=np.int64)
    never = VectorIndex(dim, name)
    never.add(ids[:half], rows[:half])
    never.add(ids[half:], rows[half:])
    saved = VectorIndex(dim, name)
    saved.add(ids[:half], rows[:half])
    saved.save(tmp_path / "v.hnsw")
    loaded = VectorIndex.load(tmp_path / "v.hnsw", name, dim)
    assert loaded is not None
    loaded.add(ids[half:], rows[half:])
    queries = rng.normal(size=(200, dim)).astype(np.float32)
    for a, b in zip(never.search(queries, 20), loaded.search(queries, 20), strict=True):
        np.testing.assert_array_equal(a, b)
