"""fadeway: a memory for LLM agents that forgets the way people do, and keeps what matters.

    engine = fadeway.open("memories.db")
    mem = engine.memory("conv-42")
    request = mem.decorate({"model": "gpt-4.1", "messages": [...]})
    response = client.chat.completions.create(**request)
    mem.report(request, response)

The names below are the public API (see docs/api.md); `fadeway.errors` holds the exception
tree. Every other module is internal and may change without notice.
"""

from __future__ import annotations

from typing import Any

from . import errors
from ._version import __version__
from .decorate.call import Prepared
from .embed import Embedder, EndpointEmbedder, HashingEmbedder
from .engine import Engine, open
from .export.document import dumps, loads, read_jsonl, write_jsonl
from .judge import Judge, LLMJudge, OfflineJudge, ScriptedJudge
from .memory import Memory
from .notes.writers import LLMNoteWriter, NoteWriter, OfflineNoteWriter
from .records import (
    EpisodeView,
    HeldFact,
    MemoryExport,
    MemoryInfo,
    MessageRecord,
    ReportResult,
    SearchHit,
    Unit,
)
from .usage import UsageSummary

__all__ = [
    "Embedder",
    "EndpointEmbedder",
    "Engine",
    "EpisodeView",
    "HashingEmbedder",
    "HeldFact",
    "Judge",
    "LLMJudge",
    "LLMNoteWriter",
    "Memory",
    "MemoryExport",
    "MemoryInfo",
    "MessageRecord",
    "NoteWriter",
    "OfflineJudge",
    "OfflineNoteWriter",
    "Prepared",
    "ReportResult",
    "ScriptedJudge",
    "SearchHit",
    "SentenceTransformerEmbedder",
    "Unit",
    "UsageSummary",
    "__version__",
    "dumps",
    "errors",
    "loads",
    "open",
    "read_jsonl",
    "write_jsonl",
]


def __getattr__(name: str) -> Any:
    # The local model's embedder is imported on first use: `import fadeway` stays free of it.
    if name == "SentenceTransformerEmbedder":
        from .embed import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder
    raise AttributeError(f"module 'fadeway' has no attribute {name!r}")
