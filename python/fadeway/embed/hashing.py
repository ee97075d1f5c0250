"""The hashing embedder: the offline, deterministic default, over the Rust kernel
`fadeway.hash_embed` (ARCHITECTURE: "Embeddings and search")."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .. import _constants as C
from .._core import hash_embed
from .base import Embedder, texts_list

__all__ = ["HashingEmbedder"]


class HashingEmbedder(Embedder):
    """Signed feature hashing of words, word bigrams and character n-grams, `dim` wide.

    Needs no network and no model; the same text gives the same bits on every machine. A text
    with no letter or digit gets a zero row.
    """

    def __init__(self, dim: int = C.EMBED_DIM) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"hashing embedder dim must be a positive int, got {dim!r}")
        self._dim = dim
        self.name = f"hashing-{dim}"

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def min_similarity(self) -> float:
        return C.RECALL_MIN_SIMILARITY

    async def embed(
        self, texts: Sequence[str], *, deadline: float | None = None
    ) -> npt.NDArray[np.float32]:
        # Microseconds per text in Rust with the GIL released: no deadline can be missed here.
        return self.embed_sync(texts)

    def embed_sync(
        self, texts: Sequence[str], *, deadline: float | None = None
    ) -> npt.NDArray[np.float32]:
        return hash_embed(texts_list(texts), self._dim)
