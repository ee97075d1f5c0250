"""The installed version of fadeway (0.0.0 when run from a source tree without metadata)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fadeway")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"
