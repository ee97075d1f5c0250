"""The embedder interface (ARCHITECTURE: "Embeddings and search").

An embedder turns texts into float32 rows of unit length, one per text, all of its `dim`. Its
`name` is stored with the vectors it made (`"hashing-512"`, `"openai:text-embedding-3-small"`),
so an index built by one embedder is never searched with another's vectors. Its `min_similarity`
is the cosine below which recall counts a nearest neighbour as no hit.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .. import _constants as C

__all__ = ["Embedder", "l2_normalise", "texts_list"]


class Embedder(abc.ABC):
    """Texts in, unit-length float32 rows out. `embed([])` gives shape (0, dim)."""

    #: A stable identifier of the vectors this embedder makes, stored with them.
    name: str

    @property
    @abc.abstractmethod
    def dim(self) -> int:
        """The length of every vector this embedder makes."""

    @property
    def min_similarity(self) -> float:
        """The cosine below which recall counts a nearest neighbour as no hit (a vector search
        always returns its k nearest). Models differ in their scale of cosines: this one,
        `DENSE_MIN_SIMILARITY`, was tuned with all-MiniLM-L6-v2; a subclass for a model whose
        scale differs overrides it."""
        return C.DENSE_MIN_SIMILARITY

    @abc.abstractmethod
    async def embed(
        self, texts: Sequence[str], *, deadline: float | None = None
    ) -> npt.NDArray[np.float32]:
        """Embed `texts`: float32 (len(texts), dim), C-contiguous, rows L2-normalised.

        `deadline` is an absolute `time.monotonic()` value, or None for no limit.
        """

    def embed_sync(
        self, texts: Sequence[str], *, deadline: float | None = None
    ) -> npt.NDArray[np.float32]:
        """The blocking twin of `embed` (works under a running event loop too)."""
        from .._aio import run_sync

        return run_sync(self.embed(texts, deadline=deadline))

    def close(self) -> None:  # noqa: B027, RUF100 - an optional hook
        """Release what the embedder holds (connections, a model). Safe to call twice."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def texts_list(texts: Sequence[str]) -> list[str]:
    """`texts` as a list of strings; one bare string is refused (it would embed its letters)."""
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string: wrap it in a list")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}; every text must be a str")
    return items


def l2_normalise(rows: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length in float64, returned as C-contiguous float32; zero rows stay 0."""
    rows64 = np.asarray(rows, dtype=np.float64)
    norms = np.linalg.norm(rows64, axis=1, keepdims=True)
    np.divide(rows64, norms, out=rows64, where=norms > 0)
    return np.ascontiguousarray(rows64, dtype=np.float32)
