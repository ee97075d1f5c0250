"""Search over one memory's facts and passages: BM25 by words, hnswlib by meaning, fused by
reciprocal rank (ARCHITECTURE: "Embeddings and search").

Indexes are caches (Contracts): the store holds the texts and the vectors; a `MemoryIndex`
catches up with it incrementally (facts and passages are append-only, so only what is new is
added) and is saved in the memory's own directory beside an SQLite file
(`paths.index_dir`: named by a hash of the memory id, never by the id). Files that are missing,
corrupt, or made for another store are rebuilt from the store. Vectors are made in the lane by
`EmbedJob` and stored; an index never embeds documents itself, only the query.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from .. import _constants as C
from .._aio import run_sync
from .._core import Bm25Index, rrf
from ..embed.base import Embedder
from ..errors import EndpointError
from ..mirror.facts import MemoryCache
from ..records import FactRecord, Marks, SearchHit
from ..store import Store, Transaction
from .vectors import VectorIndex, write_atomic

__all__ = ["KINDS", "Hit", "MemoryIndex", "documents", "fuse", "fused", "search_memory"]

log = logging.getLogger("fadeway.search")

#: What a memory's indexes hold: its facts and its passages.
KINDS = ("fact", "passage")
_STATE = "state.json"
_STATE_FORMAT = 3  # 2: with the documents' fingerprints; 3: and each word index's digest


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result: a fact or passage number and its fused score, best first."""

    n: int
    score: float


def fingerprint(tx: Transaction, kind: str, through: int) -> str:
    """A digest of the `kind` documents a saved index was built from, read at a few places (1,
    2, 4, ... and `through`): a saved index belongs to a store only when they are the same, so
    that an index left beside a replaced store (an import of another run, with the same memory
    id and creation time) is rebuilt, not trusted."""
    at = sorted(
        {*(1 << k for k in range(max(through, 1).bit_length()) if 1 << k <= through), through} - {0}
    )
    if kind == "fact":
        docs = [(f.n, _fact_text(f)) for f in tx.facts_at(at)]
    else:
        docs = [(p.n, p.text) for p in tx.passages_at(at)]
    return _digest(json.dumps(docs).encode())


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _word_index(kind: str) -> Bm25Index:
    """An empty word index of `kind` documents with fadeway's settings (a saved one built with
    others is rebuilt): the passages' leaves out of a query the words in most of them
    (`BM25_MAX_DF`)."""
    max_df = C.BM25_MAX_DF if kind == "passage" else 1.0
    return Bm25Index(C.BM25_K1, C.BM25_B, C.BM25_STOPWORDS, max_df=max_df)


def _fact_text(fact: FactRecord) -> str:
    """A fact as it is searched: its sentence and its two entities as written."""
    return f"{fact.text} [{fact.subject}, {fact.object}]"


def documents(tx: Transaction, kind: str, after: int = 0) -> list[tuple[int, str]]:
    """(n, text) of the memory's `kind` documents numbered above `after`, in order.

    A fact is searched by its sentence and its two entities as written; an entity (embedded
    for entity resolution, not searched here) by its canonical name."""
    if kind == "fact":
        return [(f.n, _fact_text(f)) for f in tx.facts(after)]
    if kind == "passage":
        return [(p.n, p.text) for p in tx.passages(after)]
    if kind == "entity":
        return [(e.n, e.name) for e in tx.entities(after)]
    raise ValueError(f"unknown search kind {kind!r}; expected one of {KINDS}")


class MemoryIndex:
    """The BM25 and vector indexes of one memory, kept in step with the store."""

    def __init__(self, memory_id: str, directory: Path | None, embedder: Embedder) -> None:
        self.memory_id = memory_id
        self.directory = directory
        self.embedder = embedder
        self._lock = threading.Lock()
        self._identity: float | None = None  # the memory's created_at, when opened
        self._prints: dict[str, str] = {}  # each kind's `fingerprint` at its `through`
        self.words: dict[str, Bm25Index] = {}
        self.through: dict[str, int] = {}
        self.meaning: dict[str, VectorIndex] = {}
        #: What recall reads of the memory (facts, graph, turns), kept in step with the store.
        self.cache = MemoryCache()
        #: Which indexes came from disk rather than a rebuild (for inspection and tests).
        self.loaded: set[str] = set()
        self._dirty = False
        self._saved_at = 0.0

    @property
    def nbytes(self) -> int:
        """About the memory its vector indexes take (the largest part of a memory's indexes).
        Read without the index's lock, by the engine choosing which indexes stay open."""
        return sum(index.nbytes for index in list(self.meaning.values()))

    # -- keeping in step --------------------------------------------------------------------

    def sync(self, tx: Transaction) -> None:
        """Add what the store holds and the indexes do not (only what is new since the last
        sync; the first sync also checks saved files against the store). Saved to disk at most
        every INDEX_SAVE_SECONDS, and on `save` (the engine saves at close)."""
        memory = tx.memory()
        if memory is None:
            return
        with self._lock:
            opening = self._identity != memory.created_at
            if opening:
                self._open(tx, memory.created_at)
            marks = tx.marks(self.embedder.name)  # what to read: only the tables that grew
            for kind in KINDS:
                documents_mark, vectors_mark = _marks_of(marks, kind)
                self._dirty |= self._sync_words(tx, kind, check=opening, mark=documents_mark)
                self._dirty |= self._sync_meaning(tx, kind, check=opening, mark=vectors_mark)
            self.cache.sync(tx, marks)
            if self._dirty and time.monotonic() - self._saved_at >= C.INDEX_SAVE_SECONDS:
                self._save()

    def save(self) -> None:
        """Save the indexes now if they changed since they were last saved."""
        with self._lock:
            if self._dirty:
                self._save()

    def _open(self, tx: Transaction, created_at: float) -> None:
        """Start from the saved indexes when they belong to this memory, else empty. An
        endpoint embedder whose dimension is not known yet is asked for it first; should that
        fail, the index stays unopened and the next sync tries again."""
        dim = self._dim()
        self._identity = created_at
        self._prints = {}
        self.words = {k: _word_index(k) for k in KINDS}
        self.through = dict.fromkeys(KINDS, 0)
        self.meaning = {k: VectorIndex(dim, self.embedder.name) for k in KINDS}
        self.cache = MemoryCache()
        self.loaded = set()
        self._dirty, self._saved_at = False, time.monotonic()
        state = self._read_state()
        if state is None or state.get("created_at") != created_at:
            return
        assert self.directory is not None
        for kind in KINDS:
            through, saved = int(state["through"][kind]), state["prints"].get(kind)
            if through and saved != fingerprint(tx, kind, through):
                log.warning(
                    "memory %r: the saved %s indexes were built from other documents "
                    "(a replaced store?); rebuilding them",
                    self.memory_id,
                    kind,
                )
                continue
            if saved is not None:
                self._prints[kind] = saved
            try:
                data = (self.directory / f"{kind}.bm25").read_bytes()
                saved_with = state.get("words", {}).get(kind)  # format 2 names none
                if saved_with is not None and _digest(data) != saved_with:
                    # Another process saved its own (older) file between this state's files.
                    raise ValueError("not the file this state was saved with")
                words = Bm25Index.from_bytes(data)
            except (OSError, ValueError) as exc:
                log.warning(
                    "memory %r: %s word index unreadable (%s); rebuilding it",
                    self.memory_id,
                    kind,
                    exc,
                )
            else:
                wanted = _word_index(kind).params
                if words.params == wanted:
                    self.words[kind], self.through[kind] = words, int(state["through"][kind])
                    self.loaded.add(f"{kind}.bm25")
                else:  # saved by an older fadeway: expected once after an upgrade, not a fault
                    log.info(
                        "memory %r: %s word index saved with settings %s, now %s; rebuilding it",
                        self.memory_id,
                        kind,
                        words.params,
                        wanted,
                    )
            meaning = VectorIndex.load(
                self.directory / f"{kind}.hnsw", self.embedder.name, self.embedder.dim
            )
            if meaning is not None:
                self.meaning[kind] = meaning
                self.loaded.add(f"{kind}.hnsw")

    def _dim(self) -> int:
        """The embedder's dimension, asked of the endpoint (an empty request) when an endpoint
        embedder was opened without `dim=`."""
        try:
            return self.embedder.dim
        except EndpointError:
            deadline = time.monotonic() + C.RECALL_DEADLINE
            return int(run_sync(self.embedder.embed([], deadline=deadline)).shape[1])

    def _sync_words(self, tx: Transaction, kind: str, *, check: bool, mark: int | None) -> bool:
        """Index the `kind` documents past those indexed; `mark` is the highest the store
        holds (None: unknown, read to see)."""
        if check and self.through[kind] > _top(tx, kind):
            return self._rebuild_words(tx, kind)  # saved for a longer history: not ours
        if not check and mark is not None and mark <= self.through[kind]:
            return False
        docs = documents(tx, kind, self.through[kind])
        if not docs:
            return False
        ids = np.fromiter((n for n, _ in docs), dtype=np.int64, count=len(docs))
        if any(n in self.words[kind] for n in ids.tolist()):
            return self._rebuild_words(tx, kind)
        self.words[kind].add(ids, [t for _, t in docs])
        self.through[kind] = int(ids[-1])
        self._prints[kind] = fingerprint(tx, kind, self.through[kind])
        return True

    def _rebuild_words(self, tx: Transaction, kind: str) -> bool:
        log.warning(
            "memory %r: %s word index disagrees with the store; rebuilding it", self.memory_id, kind
        )
        self.words[kind], self.through[kind] = _word_index(kind), 0
        self.loaded.discard(f"{kind}.bm25")
        self._sync_words(tx, kind, check=False, mark=None)
        return True

    def _sync_meaning(self, tx: Transaction, kind: str, *, check: bool, mark: int | None) -> bool:
        """Add the `kind` vectors past those held; `mark` is the highest the store holds."""
        index = self.meaning[kind]
        if check:  # every stored vector, against what the saved index holds
            stored = tx.vector_ns(kind, self.embedder.name)
            if len(index) > len(stored) or (len(index) and index.max_id not in stored):
                log.warning(
                    "memory %r: %s vector index disagrees with the store; rebuilding it",
                    self.memory_id,
                    kind,
                )
                index = self.meaning[kind] = VectorIndex(self.embedder.dim, self.embedder.name)
                self.loaded.discard(f"{kind}.hnsw")
            missing = sorted(n for n in stored if n not in index)
            if not missing:
                return False
            wanted = set(missing)
            rows = [
                (n, v)
                for n, v in tx.vectors(kind, self.embedder.name, missing[0] - 1)
                if n in wanted
            ]
        else:  # vectors are written in order of n: what is new lies above the largest held
            after = index.max_id if len(index) else 0
            if mark is not None and mark <= after:
                return False
            rows = tx.vectors(kind, self.embedder.name, after)
            rows = [(n, v) for n, v in rows if n not in index]
            if not rows:
                return False
        index.add(
            np.fromiter((n for n, _ in rows), dtype=np.int64, count=len(rows)),
            np.stack([np.frombuffer(v, dtype=np.float32) for _, v in rows]),
        )
        return True

    def drop(self) -> None:
        """Forget the indexes, in memory and on disk; the next sync rebuilds them from the store."""
        with self._lock:
            self._identity = None
            if self.directory is None or not self.directory.is_dir():
                return
            for path in self.directory.iterdir():
                if path.name.split(".")[0] in (*KINDS, "state"):
                    path.unlink(missing_ok=True)

    # -- persistence ------------------------------------------------------------------------

    def _read_state(self) -> dict[str, Any] | None:
        if self.directory is None:
            return None
        try:
            state = json.loads((self.directory / _STATE).read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(state, dict) or state.get("format") not in (2, _STATE_FORMAT):
            return None
        return state

    def _save(self) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        words = {}
        for kind in KINDS:
            data = self.words[kind].to_bytes()
            write_atomic(self.directory / f"{kind}.bm25", data)
            words[kind] = _digest(data)
            self.meaning[kind].save(self.directory / f"{kind}.hnsw")
        # Written last: a crash before it leaves the old state, whose `through` is at most
        # what the new files hold, so the next open catches up (or rebuilds) from the store.
        # Each file is atomic, the set is not: another process may save between them, so the
        # state names the word files it goes with (a vector index checks itself against the
        # store).
        write_atomic(
            self.directory / _STATE,
            json.dumps(
                {
                    "format": _STATE_FORMAT,
                    "created_at": self._identity,
                    "through": self.through,
                    "prints": self._prints,
                    "words": words,
                }
            ).encode(),
        )
        self._dirty, self._saved_at = False, time.monotonic()

    # -- searching --------------------------------------------------------------------------

    def by_words(self, kind: str, query: str, k: int) -> list[int]:
        if kind not in self.words:
            return []
        ids, _ = self.words[kind].search(query, k)
        return ids.tolist()

    def ranked_by_words(self, kind: str, query: str, ids: Sequence[int]) -> list[int]:
        """`ids` by how well they match `query`'s words, best first: ties, and those it does
        not match, in their order."""
        if kind not in self.words or not ids:
            return list(ids)
        scores = self.words[kind].scores(query, np.asarray(ids, dtype=np.int64))
        return [ids[i] for i in np.argsort(-scores, kind="stable").tolist()]

    def by_meaning(
        self, kind: str, vector: np.ndarray, k: int, min_similarity: float = -1.0
    ) -> list[int]:
        if kind not in self.meaning:
            return []
        ids, similarity = self.meaning[kind].search(vector, k)
        return ids[similarity >= min_similarity].tolist()

    def by_meaning_batch(
        self, kind: str, vectors: np.ndarray, k: int, min_similarity: float = -1.0
    ) -> list[list[int]]:
        """`by_meaning` for each row of `vectors`, in one call to the index."""
        if kind not in self.meaning or not len(vectors):
            return [[] for _ in range(len(vectors))]
        ids, similarity = self.meaning[kind].search(np.atleast_2d(vectors), k)
        return [
            row[sim >= min_similarity].tolist() for row, sim in zip(ids, similarity, strict=True)
        ]

    def search(
        self, kind: str, query: str, k: int, *, vector: np.ndarray | None = None
    ) -> list[Hit]:
        """The `k` best `kind` documents for `query`: BM25 and (given the query's `vector`)
        nearest neighbours, fused by reciprocal rank."""
        if kind not in self.words:
            return []  # never synced: the memory holds nothing yet
        return fuse(
            [
                self.by_words(kind, query, k),
                self.by_meaning(kind, vector, k) if vector is not None else [],
            ],
            k,
        )


def fuse(
    lists: Sequence[Sequence[int]], k: int, weights: Sequence[float] | None = None
) -> list[Hit]:
    """Reciprocal rank fusion of ranked id lists (Rust), best first, at most `k`."""
    ids, scores = _rrf(lists, k, weights)
    return [Hit(n, s) for n, s in zip(ids.tolist(), scores.tolist(), strict=True)]


def fused(lists: Sequence[Sequence[int]], k: int) -> list[int]:
    """`fuse`'s ids alone (recall's searches want no scores)."""
    return _rrf(lists, k, None)[0].tolist()


def _rrf(
    lists: Sequence[Sequence[int]], k: int, weights: Sequence[float] | None
) -> tuple[np.ndarray, np.ndarray]:
    sizes = itertools.accumulate(map(len, lists), initial=0)
    offsets = np.fromiter(sizes, dtype=np.int64, count=len(lists) + 1)
    flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(offsets[-1]))
    w = np.ones(len(lists)) if weights is None else np.asarray(weights, dtype=np.float64)
    return rrf(offsets, flat, w, float(C.RRF_K), k)


def _marks_of(marks: Marks, kind: str) -> tuple[int, int]:
    """The highest `kind` document and vector the store holds."""
    if kind == "fact":
        return marks.facts, marks.fact_vectors
    return marks.passages, marks.passage_vectors


def _top(tx: Transaction, kind: str) -> int:
    if kind == "fact":
        return tx.fact_count()
    return tx.passage_count()


def search_memory(
    store: Store,
    index: MemoryIndex,
    embedder: Embedder,
    query: str,
    *,
    kind: str = "fact",
    k: int = 10,
) -> list[SearchHit]:
    """The `k` best facts or passages of `index`'s memory for `query`, by words and by meaning
    (`embedder`), fused by reciprocal rank. The indexes catch up with the store first."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, not {type(query).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be a non-negative int, not {k!r}")
    with store.read(index.memory_id) as tx:
        index.sync(tx)
        hits = index.search(kind, query, k, vector=embedder.embed_sync([query])[0])
        wanted = {h.n for h in hits}
        if kind == "fact":
            retired = {r.fact for r in tx.retirements()}
            rows = {
                f.n: SearchHit(
                    kind=kind,
                    n=f.n,
                    score=0.0,
                    text=f.text,
                    at=f.at,
                    turn=None,
                    retired=f.n in retired,
                )
                for f in tx.facts()
                if f.n in wanted
            }
        else:
            first = min(wanted, default=1)
            rows = {
                p.n: SearchHit(kind=kind, n=p.n, score=0.0, text=p.text, at=p.at, turn=p.turn)
                for p in tx.passages(first - 1)
                if p.n in wanted
            }
    return [msgspec.structs.replace(rows[h.n], score=h.score) for h in hits if h.n in rows]
