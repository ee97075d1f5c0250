"""Embedders: texts to unit-length vectors behind one interface (ARCHITECTURE: "Embeddings and
search"). The hashing embedder is the offline default; an OpenAI-compatible endpoint and a local
sentence-transformers model (extra `local`) are the others."""

from __future__ import annotations

import os
from collections.abc import Mapping

from .base import Embedder
from .endpoint import ENV_PREFIX, EndpointEmbedder
from .hashing import HashingEmbedder

__all__ = [
    "Embedder",
    "EndpointEmbedder",
    "HashingEmbedder",
    "SentenceTransformerEmbedder",
    "embedder_from",
]


def __getattr__(name: str) -> object:
    # The local embedder's module is light, but keep `import fadeway.embed` free of it anyway.
    if name == "SentenceTransformerEmbedder":
        from .local import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def embedder_from(
    spec: str | Embedder | None = None,
    *,
    model: str | None = None,
    dim: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> Embedder:
    """The embedder `spec` names.

    - None, `"hashing"` or `"offline"`: the hashing embedder (of `dim`, default EMBED_DIM);
      `"hashing-<dim>"` (its own `name`) also works;
    - an `http://` or `https://` URL: an OpenAI-compatible endpoint at that API root, `model`
      from the argument or FADEWAY_EMBEDDINGS_MODEL, key from FADEWAY_EMBEDDINGS_API_KEY;
    - `"openai:<model>"` (an endpoint embedder's `name`): that model at
      FADEWAY_EMBEDDINGS_BASE_URL;
    - `"local:<path>"`: a sentence-transformers model from a directory or installed package;
    - an `Embedder`: itself.
    """
    if isinstance(spec, Embedder):
        return spec
    if spec is None or spec in ("hashing", "offline"):
        return HashingEmbedder() if dim is None else HashingEmbedder(dim)
    if not isinstance(spec, str):
        raise TypeError(
            f"an embedder spec is a str, an Embedder or None, not {type(spec).__name__}"
        )
    env = os.environ if environ is None else environ
    if spec.startswith("hashing-") and spec[len("hashing-") :].isdigit():
        return HashingEmbedder(int(spec[len("hashing-") :]))
    if spec.startswith(("http://", "https://")):
        from ..http import Endpoint

        endpoint = Endpoint(
            spec,
            model=model or env.get(f"{ENV_PREFIX}_MODEL") or None,
            api_key=env.get(f"{ENV_PREFIX}_API_KEY") or None,
        )
        return EndpointEmbedder(endpoint, dim=dim)
    if spec.startswith("openai:") and len(spec) > len("openai:"):
        return EndpointEmbedder.from_env(model=spec[len("openai:") :], dim=dim, environ=env)
    if spec.startswith("local:") and len(spec) > len("local:"):
        from .local import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(spec[len("local:") :])
    raise ValueError(
        f"unknown embedder {spec!r}; allowed: 'hashing' (or 'offline', None), "
        "'hashing-<dim>', an http(s):// URL, 'openai:<model>', 'local:<path>'"
    )
