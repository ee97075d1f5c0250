"""Embedding a memory's documents in the lane: facts, passages and entities get their vectors
from the engine's embedder, stored beside them (ARCHITECTURE: "Embeddings and search")."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .. import _constants as C
from ..embed.base import Embedder
from ..records import JobRecord
from ..store import Store, Transaction
from .search import KINDS, documents

__all__ = ["EmbedJob"]


class EmbedJob:
    """The lane job that embeds the facts, passages and entities that have no vector by the
    engine's embedder yet (after an import, all of them: vectors are not exported;
    `JobKind.EMBED`)."""

    def __init__(self, store: Store, embedder: Embedder) -> None:
        self.store, self.embedder = store, embedder

    async def prepare(self, memory_id: str, job: JobRecord) -> Any:
        embedder = self.embedder
        todo: dict[str, list[tuple[int, str]]] = {}
        with self.store.read(memory_id) as tx:
            for kind in (*KINDS, "entity"):
                have = tx.vector_ns(kind, embedder.name)
                todo[kind] = [(n, t) for n, t in documents(tx, kind) if n not in have]
        out: dict[str, list[tuple[int, bytes]]] = {}
        deadline = time.monotonic() + C.LANE_JUDGE_DEADLINE
        for kind, docs in todo.items():
            rows: list[tuple[int, bytes]] = []
            for i in range(0, len(docs), C.EMBED_BATCH):
                batch = docs[i : i + C.EMBED_BATCH]
                vectors = await embedder.embed([t for _, t in batch], deadline=deadline)
                rows.extend(
                    (n, v.astype(np.float32).tobytes())
                    for (n, _), v in zip(batch, vectors, strict=True)
                )
            out[kind] = rows
        return embedder.name, out

    def apply(self, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        name, rows = prepared
        for kind, kind_rows in rows.items():
            tx.insert_vectors(kind, name, kind_rows)
        return True
