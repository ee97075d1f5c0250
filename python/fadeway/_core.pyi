"""Type stubs for the Rust extension `fadeway._core`."""

from collections.abc import Set
from typing import Literal, Self, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "__version__",
    "activation",
    "significance",
    "activation_log_order",
    "Bm25Index",
    "tokenize",
    "best_window",
    "hash_embed",
    "fade_order",
    "fade",
    "rrf",
    "split_parts",
    "split_episodes",
    "count_tokens",
    "count_tokens_many",
    "encode_tokens",
    "token_bytes",
]
__version__: str

def count_tokens(encoding_name: str, text: str) -> int: ...
def count_tokens_many(encoding_name: str, texts: list[str]) -> npt.NDArray[np.int64]: ...
def encode_tokens(encoding_name: str, text: str) -> list[int]: ...
def token_bytes(encoding_name: str) -> list[bytes]: ...
def hash_embed(texts: list[str], dim: int) -> npt.NDArray[np.float32]: ...
def split_episodes(
    sizes: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], min_size: int, max_size: int
) -> npt.NDArray[np.int64]: ...
def split_parts(
    text: str, min_chars: int, max_chars: int, overlap: int
) -> list[tuple[int, int]]: ...
def activation(
    offsets: npt.NDArray[np.int64],
    at: npt.NDArray[np.float64],
    score: npt.NDArray[np.float64],
    now: float,
) -> npt.NDArray[np.float64]: ...
def significance(
    offsets: npt.NDArray[np.int64], score: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]: ...
def activation_log_order(
    group: npt.NDArray[np.int64],
    at: npt.NDArray[np.float64],
    score: npt.NDArray[np.float64],
    now: float,
    n_groups: int,
) -> npt.NDArray[np.float64]: ...
def fade_order(
    activation: npt.NDArray[np.float64],
    tie: npt.NDArray[np.int64],
    limit: int | None = None,
) -> npt.NDArray[np.int64]: ...
def fade(
    activation: npt.NDArray[np.float64],
    tie: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    view: int,
    landing: int,
) -> npt.NDArray[np.int64]: ...
def rrf(
    offsets: npt.NDArray[np.int64],
    ids: npt.NDArray[np.int64],
    weights: npt.NDArray[np.float64],
    k: float,
    limit: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]: ...
def tokenize(
    text: str, stopwords: bool | Literal["lucene", "english", "none"] = True, stem: bool = True
) -> list[str]: ...
def best_window(
    text: str,
    wanted: Set[str],
    size: int,
    stopwords: bool | Literal["lucene", "english", "none"] = True,
    stem: bool = True,
) -> tuple[int, int]: ...

@final
class Bm25Index:
    def __new__(
        cls,
        k1: float = 1.2,
        b: float = 0.75,
        stopwords: bool | Literal["lucene", "english", "none"] = True,
        stem: bool = True,
        max_df: float = 1.0,
    ) -> Self: ...
    def add(self, ids: npt.NDArray[np.int64], texts: list[str]) -> None: ...
    def remove(self, ids: npt.NDArray[np.int64]) -> int: ...
    def search(
        self, query: str, k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]: ...
    def scores(self, query: str, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]: ...
    def __len__(self) -> int: ...
    def __contains__(self, id: int, /) -> bool: ...
    @property
    def params(self) -> tuple[float, float, Literal["lucene", "english", "none"], bool, float]: ...
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> Bm25Index: ...
