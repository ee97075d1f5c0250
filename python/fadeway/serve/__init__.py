"""`fadeway serve`: an OpenAI-compatible proxy that puts a memory around every Chat Completions
and Responses call (design: docs/design/serve.md). Needs the `serve` extra (Starlette, uvicorn):
importing `fadeway.serve.app` without them raises ImportError; this package itself imports
neither."""

from __future__ import annotations

from .ids import MemoryIdSource

__all__ = ["MemoryIdSource"]
