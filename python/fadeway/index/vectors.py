"""The vector index of one memory: hnswlib over cosine similarity (ARCHITECTURE: "Embeddings and
search"; "Contracts": indexes are caches).

The store is the only source of truth; this index is derived from it and saved beside an SQLite
file for speed. `save` writes the hnswlib file and a JSON sidecar (format version, embedder name,
dimension, count, largest id, SHA-256 of the index file), each atomically. `load` gives None when
the files are missing, unreadable or disagree with each other (a crash between the two writes
leaves a new index with an old sidecar: the checksum catches it), so the caller rebuilds from the
store; it raises `EmbedderMismatchError` when the files were made by another embedder or
dimension, because searching them with this embedder's vectors would answer garbage.

The checksum is verified before hnswlib reads the file: hnswlib trusts the sizes it reads, and a
truncated or altered file can crash the process rather than raise.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np
import numpy.typing as npt

from .. import _constants as C
from ..embed.base import l2_normalise
from ..errors import EmbedderMismatchError

__all__ = ["FORMAT_VERSION", "VectorIndex", "write_atomic"]

log = logging.getLogger("fadeway.vectors")

#: The sidecar's format; a sidecar of another version is stale (rebuilt), not an error.
FORMAT_VERSION = 1


class VectorIndex:
    """Ids (non-negative int64) and their vectors, searched by cosine similarity: exactly while
    they are at most C.VECTOR_EXACT_MAX, by hnswlib beyond.

    Thread-safe: one lock around every use of the hnswlib index (whose resize may not run
    alongside a search). `threads` is hnswlib's insertion threads; more than one builds faster
    but a different graph on each run.
    """

    def __init__(
        self,
        dim: int,
        embedder_name: str,
        *,
        capacity: int = C.VECTOR_INITIAL_CAPACITY,
        m: int = C.HNSW_M,
        ef_construction: int = C.HNSW_EF_CONSTRUCTION,
        ef_search: int = C.HNSW_EF_SEARCH,
        seed: int = C.HNSW_SEED,
        threads: int = 1,
        _index: hnswlib.Index | None = None,
    ) -> None:
        if dim < 1:
            raise ValueError(f"dim must be positive, got {dim}")
        self.dim = dim
        self.embedder_name = embedder_name
        self.ef_search = ef_search
        self.threads = threads
        self._lock = threading.RLock()
        if _index is None:
            _index = hnswlib.Index(space="cosine", dim=dim)
            _index.init_index(
                max_elements=max(1, capacity),
                ef_construction=ef_construction,
                M=m,
                random_seed=seed,
            )
        self._index = _index
        self._index.set_ef(ef_search)
        self._ids: set[int] = {int(i) for i in _index.get_ids_list()}
        self._max_id = max(self._ids, default=-1)  # kept up to date by add: read on every sync
        # While the index is small: its ids and unit vectors, for the exact search.
        self._exact_ids: npt.NDArray[np.int64] | None = None
        self._exact_rows: npt.NDArray[np.float32] | None = None
        if len(self._ids) <= C.VECTOR_EXACT_MAX:
            held = np.array(sorted(self._ids), dtype=np.int64)
            self._exact_ids, self._exact_rows = held, self._stored(held)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, id: object) -> bool:
        return id in self._ids

    @property
    def max_id(self) -> int:
        """The largest id held, or -1 when empty."""
        return self._max_id

    @property
    def capacity(self) -> int:
        return int(self._index.get_max_elements())

    @property
    def nbytes(self) -> int:
        """About the memory the vectors take: hnswlib's row of each (the vector, its bottom-layer
        links, its label) and, while the index is small, the exact search's copy."""
        row = 4 * self.dim + 4 * (2 * int(self._index.M) + 1) + 8
        exact = self._exact_rows
        return len(self._ids) * row + (0 if exact is None else exact.nbytes)

    def add(self, ids: npt.ArrayLike, vectors: npt.ArrayLike) -> None:
        """Add (or replace) the vector of each id. `vectors` is (len(ids), dim), finite."""
        ids64 = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
        rows = np.ascontiguousarray(vectors, dtype=np.float32)
        if rows.ndim == 1 and len(ids64) == 1:
            rows = rows.reshape(1, -1)
        if rows.ndim != 2 or rows.shape != (len(ids64), self.dim):
            raise ValueError(
                f"vectors must be ({len(ids64)}, {self.dim}) for {len(ids64)} ids, "
                f"got shape {rows.shape}"
            )
        if len(ids64) == 0:
            return
        if (ids64 < 0).any():
            raise ValueError(f"ids must be non-negative, got {int(ids64.min())}")
        if len(np.unique(ids64)) != len(ids64):
            raise ValueError("ids must be distinct within one add")
        if not np.isfinite(rows).all():
            raise ValueError("vectors must be finite (no NaN or infinity)")
        with self._lock:
            new = sum(1 for i in ids64.tolist() if i not in self._ids)
            needed = len(self._ids) + new
            if needed > self.capacity:
                self._index.resize_index(max(needed, self.capacity * C.VECTOR_GROWTH))
            self._index.add_items(rows, ids64.astype(np.uint64), num_threads=self.threads)
            self._ids.update(ids64.tolist())
            self._max_id = max(self._max_id, int(ids64.max()))
            self._add_exact(ids64)

    def _add_exact(self, ids: npt.NDArray[np.int64]) -> None:
        if self._exact_ids is None or self._exact_rows is None:
            return
        if len(self._ids) > C.VECTOR_EXACT_MAX:
            self._exact_ids = self._exact_rows = None  # hnswlib's from now on
            return
        # hnswlib's own unit vectors, which a loaded index reads back bit for bit.
        unit = self._stored(ids)
        at = {int(n): i for i, n in enumerate(self._exact_ids.tolist())}
        old = np.array([i in at for i in ids.tolist()], dtype=bool)
        self._exact_rows[[at[int(i)] for i in ids[old]]] = unit[old]  # replaced vectors
        self._exact_ids = np.concatenate([self._exact_ids, ids[~old]])
        self._exact_rows = np.concatenate([self._exact_rows, unit[~old]])

    def _stored(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """The vectors hnswlib holds for `ids` (unit length: its cosine space normalises)."""
        if not len(ids):
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = self._index.get_items(ids.astype(np.uint64))
        return np.ascontiguousarray(rows, dtype=np.float32).reshape(len(ids), self.dim)

    def search(
        self, vectors: npt.ArrayLike, k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The `k` nearest ids by cosine similarity, most similar first, and their similarities.

        One vector (dim,) gives 1-D arrays; a batch (b, dim) gives (b, k') arrays, where k' is
        min(k, len(self)): asking for more than the index holds returns all it holds.
        """
        query = np.ascontiguousarray(vectors, dtype=np.float32)
        single = query.ndim == 1
        batch = query.reshape(1, -1) if single else query
        if batch.ndim != 2 or batch.shape[1] != self.dim:
            raise ValueError(f"query must be ({self.dim},) or (b, {self.dim}), got {query.shape}")
        if k < 0:
            raise ValueError(f"k must not be negative, got {k}")
        if not np.isfinite(batch).all():
            raise ValueError("query vectors must be finite (no NaN or infinity)")
        labels: npt.NDArray[np.uint64] | npt.NDArray[np.int64]
        with self._lock:
            count = len(self._ids)
            k = min(k, count)
            if k == 0 or len(batch) == 0:
                labels = np.zeros((len(batch), k), dtype=np.uint64)
                distances = np.zeros((len(batch), k), dtype=np.float32)
            elif self._exact_ids is not None and self._exact_rows is not None:
                labels, distances = _exact(self._exact_ids, self._exact_rows, batch, k)
            else:
                labels, distances = self._knn(batch, k, count)
        ids = labels.astype(np.int64)
        similarity = 1.0 - distances.astype(np.float64)
        return (ids[0], similarity[0]) if single else (ids, similarity)

    def _knn(
        self, batch: npt.NDArray[np.float32], k: int, count: int
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]:
        # hnswlib fails rather than return fewer than k; ef >= k nearly always suffices, and
        # ef = count searches exhaustively enough for a small or oddly shaped graph.
        self._index.set_ef(max(self.ef_search, k))
        try:
            return self._index.knn_query(batch, k=k, num_threads=1)
        except RuntimeError:
            self._index.set_ef(max(self.ef_search, count))
            return self._index.knn_query(batch, k=k, num_threads=1)
        finally:
            self._index.set_ef(self.ef_search)

    # -- persistence ------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the index to `path` and its sidecar to `path` + `.json`, each atomically."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            tmp = _temp_path(target)
            try:
                self._index.save_index(str(tmp))
                with open(tmp, "rb") as f:
                    digest = hashlib.file_digest(f, "sha256").hexdigest()
                    os.fsync(f.fileno())
                os.replace(tmp, target)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            sidecar = {
                "format": FORMAT_VERSION,
                "embedder": self.embedder_name,
                "dim": self.dim,
                "count": len(self._ids),
                "max_id": self.max_id,
                "sha256": digest,
                "space": "cosine",
            }
        write_atomic(_sidecar_path(target), json.dumps(sidecar, indent=1).encode())
        _fsync_dir(target.parent)

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], embedder_name: str, dim: int, **settings: Any
    ) -> VectorIndex | None:
        """The index saved at `path`, or None when it is missing or corrupt (rebuild it then).

        Raises `EmbedderMismatchError` when it was saved for another embedder or dimension.
        `settings` (ef_search, threads) apply to the loaded index.
        """
        target = Path(path)
        meta = _read_sidecar(_sidecar_path(target))
        if meta is None:
            return None
        if meta["embedder"] != embedder_name or meta["dim"] != dim:
            raise EmbedderMismatchError(
                f"vector index {target} was built by embedder {meta['embedder']!r} with "
                f"dimension {meta['dim']}, not {embedder_name!r} with dimension {dim}; rebuild "
                "it from the store with the new embedder, or use the old one"
            )
        try:
            with open(target, "rb") as f:
                digest = hashlib.file_digest(f, "sha256").hexdigest()
        except OSError as exc:
            log.warning("vector index %s is unreadable (%s); it will be rebuilt", target, exc)
            return None
        if digest != meta["sha256"]:
            log.warning(
                "vector index %s does not match its sidecar's checksum; it will be rebuilt", target
            )
            return None
        index = hnswlib.Index(space="cosine", dim=dim)
        try:
            index.load_index(str(target))
        except (RuntimeError, ValueError, OSError) as exc:
            log.warning("vector index %s cannot be read (%s); it will be rebuilt", target, exc)
            return None
        loaded = cls(dim, embedder_name, _index=index, **settings)
        if len(loaded) != meta["count"] or loaded.max_id != meta["max_id"]:
            log.warning(
                "vector index %s holds %d ids (largest %d), its sidecar says %d (%d); "
                "it will be rebuilt",
                target,
                len(loaded),
                loaded.max_id,
                meta["count"],
                meta["max_id"],
            )
            return None
        return loaded


def _exact(
    ids: npt.NDArray[np.int64],
    rows: npt.NDArray[np.float32],
    batch: npt.NDArray[np.float32],
    k: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """The `k` nearest of `rows` to each query by cosine, ties to the lower id, as hnswlib
    answers: ids and cosine distances."""
    distances = (1.0 - l2_normalise(batch) @ rows.T).astype(np.float32)
    order = np.lexsort((np.broadcast_to(ids, distances.shape), distances), axis=1)[:, :k]
    return ids[order], np.take_along_axis(distances, order, axis=1)


def _sidecar_path(target: Path) -> Path:
    return target.with_name(target.name + ".json")


def _temp_path(target: Path) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    return Path(name)


def write_atomic(target: Path, data: bytes) -> None:
    """Write `data` to `target` so that a crash leaves the old file or the new, never a part."""
    tmp = _temp_path(target)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _fsync_dir(directory: Path) -> None:
    # Makes the renames durable; not every platform can open a directory (Windows cannot).
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _read_sidecar(path: Path) -> dict[str, Any] | None:
    """The sidecar's fields, or None (logged) when it is missing, unreadable or of another
    format."""
    try:
        meta = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning(
            "vector index sidecar %s is unreadable (%s); the index will be rebuilt", path, exc
        )
        return None
    fields = {
        "format": int,
        "embedder": str,
        "dim": int,
        "count": int,
        "max_id": int,
        "sha256": str,
    }
    if (
        not isinstance(meta, dict)
        or meta.get("format") != FORMAT_VERSION
        or any(not isinstance(meta.get(k), t) for k, t in fields.items())
    ):
        log.warning(
            "vector index sidecar %s is of another format or incomplete; the index will be rebuilt",
            path,
        )
        return None
    return meta
