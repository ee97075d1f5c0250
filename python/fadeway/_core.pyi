"""Type stubs for the Rust extension `fadeway._core`."""

import numpy as np
import numpy.typing as npt

__version__: str

def count_tokens(encoding_name: str, text: str) -> int: ...
def count_tokens_many(encoding_name: str, texts: list[str]) -> npt.NDArray[np.int64]: ...
def encode_tokens(encoding_name: str, text: str) -> list[int]: ...
def token_bytes(encoding_name: str) -> list[bytes]: ...
def hash_embed(texts: list[str], dim: int) -> npt.NDArray[np.float32]: ...
def split_episodes(
    sizes: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], min_size: int, max_size: int
) -> npt.NDArray[np.int64]: ...
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
    activation: npt.NDArray[np.float64], tie: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]: ...
def fade(
    activation: npt.NDArray[np.float64],
    tie: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    view: int,
    landing: int,
) -> npt.NDArray[np.int64]: ...
