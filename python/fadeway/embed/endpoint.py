"""Embeddings from an OpenAI-compatible endpoint: `POST {base_url}/embeddings`
(ARCHITECTURE: "Embeddings and search").

Texts go in batches of `batch_size`, concurrently up to the endpoint's bound; each answer is
checked (one vector per input, every index once, one length, finite numbers), put back in input
order by `index`, and normalised. The dimension is given or learned from the first answer; an
answer of another dimension is an `EmbedderMismatchError`, never a silently mixed index.

Every answered request is recorded with `usage.record` (kind "embed"): the tokens the endpoint
reports in `usage.prompt_tokens` (else `total_tokens`), else fadeway's own count of the inputs.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from .. import tokens, usage
from ..errors import EmbedderMismatchError, EndpointError, EndpointResponseError
from ..http import Endpoint
from .base import Embedder, l2_normalise, texts_list

__all__ = ["EMBED_BATCH_SIZE", "ENV_PREFIX", "EndpointEmbedder"]

#: Texts per request (OpenAI accepts up to 2,048; smaller batches spread over the connections).
EMBED_BATCH_SIZE = 128
#: The environment prefix: FADEWAY_EMBEDDINGS_BASE_URL, _MODEL and _API_KEY.
ENV_PREFIX = "FADEWAY_EMBEDDINGS"
#: What `embed([])` sends to learn the dimension when it is not known yet.
_PROBE_TEXT = "dimension probe"


class _Item(msgspec.Struct):
    index: int
    embedding: list[float] | str  # a str is base64 of little-endian float32 (encoding_format)


class _Answer(msgspec.Struct):
    data: list[_Item]
    usage: Any = None  # OpenAI's {"prompt_tokens", "total_tokens"}; read leniently


class EndpointEmbedder(Embedder):
    """Vectors from `endpoint` for `model`; `name` is `"openai:<model>"`."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        model: str | None = None,
        dim: int | None = None,
        batch_size: int = EMBED_BATCH_SIZE,
        path: str = "embeddings",
    ) -> None:
        model = model or endpoint.model
        if not model:
            raise EndpointError(
                f"no embedding model for {endpoint.base_url}: pass model= or set {ENV_PREFIX}_MODEL"
            )
        if dim is not None and dim < 1:
            raise ValueError(f"dim must be positive or None (learned), got {dim}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.endpoint = endpoint
        self.model = model
        self.batch_size = batch_size
        self.path = path
        self.name = f"openai:{model}"
        self._dim = dim

    @classmethod
    def from_env(
        cls,
        *,
        model: str | None = None,
        dim: int | None = None,
        batch_size: int = EMBED_BATCH_SIZE,
        environ: Mapping[str, str] | None = None,
        **endpoint_settings: Any,
    ) -> EndpointEmbedder:
        """From FADEWAY_EMBEDDINGS_BASE_URL, _MODEL (unless `model` is given) and _API_KEY."""
        endpoint = Endpoint.from_env(ENV_PREFIX, environ=environ, **endpoint_settings)
        return cls(endpoint, model=model, dim=dim, batch_size=batch_size)

    @property
    def dim(self) -> int:
        """The vectors' length; before the first answer, known only if given (`dim=`)."""
        if self._dim is None:
            raise EndpointError(
                f"the dimension of {self.name} is not known before its first "
                "answer: pass dim=, or `await embed([])` to ask the endpoint"
            )
        return self._dim

    def close(self) -> None:
        self.endpoint.close()

    async def embed(
        self, texts: Sequence[str], *, deadline: float | None = None
    ) -> npt.NDArray[np.float32]:
        items = texts_list(texts)
        if not items:
            if self._dim is None:
                await self.embed([_PROBE_TEXT], deadline=deadline)
            return np.zeros((0, self.dim), dtype=np.float32)
        starts = range(0, len(items), self.batch_size)
        tasks = [
            asyncio.ensure_future(self._batch(items[s : s + self.batch_size], s, deadline))
            for s in starts
        ]
        try:
            parts = await asyncio.gather(*tasks)
        except BaseException:
            # One failed batch fails the call: stop the others rather than leave them running.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    async def _batch(
        self, batch: list[str], start: int, deadline: float | None
    ) -> npt.NDArray[np.float32]:
        began = time.perf_counter()
        try:
            answer = await self.endpoint.post_json(
                self.path,
                {"model": self.model, "input": batch},
                deadline=deadline,
                response_type=_Answer,
            )
        except EndpointResponseError:  # answered, so spent, but unreadable
            self._record(batch, None, began)
            raise
        self._record(batch, answer.usage, began)
        where = f"{self.name} (inputs {start}..{start + len(batch) - 1})"
        if len(answer.data) != len(batch):
            raise EndpointResponseError(
                f"{where} answered {len(answer.data)} embeddings for {len(batch)} inputs"
            )
        rows: list[npt.NDArray[np.float64] | None] = [None] * len(batch)
        for item in answer.data:
            if not 0 <= item.index < len(batch):
                raise EndpointResponseError(
                    f"{where} answered index {item.index}; allowed 0..{len(batch) - 1}"
                )
            if rows[item.index] is not None:
                raise EndpointResponseError(f"{where} answered index {item.index} twice")
            rows[item.index] = _vector(item.embedding, where)
        lengths = {len(row) for row in rows if row is not None}
        if len(lengths) != 1 or 0 in lengths:
            raise EndpointResponseError(
                f"{where} answered vectors of lengths {sorted(lengths)}; "
                "expected one positive length"
            )
        matrix = np.stack(rows)  # type: ignore[arg-type]  # every row was set above
        if not np.isfinite(matrix).all():
            raise EndpointResponseError(f"{where} answered non-finite numbers (NaN or infinity)")
        self._check_dim(matrix.shape[1])
        out = l2_normalise(matrix)
        if not np.isfinite(out).all():
            raise EndpointResponseError(f"{where} answered numbers too large to normalise")
        return out

    def _record(self, batch: list[str], reported: Any, began: float) -> None:
        """Record one answered request: the tokens the endpoint reported, else our count."""
        used = reported if isinstance(reported, dict) else {}
        tokens_in = next(
            (n for key in ("prompt_tokens", "total_tokens") if _count(n := used.get(key))), None
        )
        if tokens_in is None:
            tokens_in = sum(tokens.count_texts(tokens.encoding_for_model(self.model), batch))
        usage.record("embed", self.model, tokens_in, 0, time.perf_counter() - began)

    def _check_dim(self, dim: int) -> None:
        # No await between the read and the write: concurrent batches agree on the first answer.
        if self._dim is None:
            self._dim = dim
        elif dim != self._dim:
            raise EmbedderMismatchError(
                f"{self.name} answered {dim}-dimensional vectors, but "
                f"its dimension is {self._dim}; did the model behind "
                f"{self.endpoint.base_url} change?"
            )


def _count(value: Any) -> bool:
    """Whether `value` is a token count (a non-negative int, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _vector(embedding: list[float] | str, where: str) -> npt.NDArray[np.float64]:
    if isinstance(embedding, str):
        try:
            raw = base64.b64decode(embedding, validate=True)
        except ValueError as exc:
            raise EndpointResponseError(
                f"{where} answered an embedding that is neither a list of numbers nor base64: {exc}"
            ) from None
        if len(raw) % 4:
            raise EndpointResponseError(
                f"{where} answered base64 of {len(raw)} bytes, not a whole number of float32 values"
            )
        return np.frombuffer(raw, dtype="<f4").astype(np.float64)
    return np.asarray(embedding, dtype=np.float64)
