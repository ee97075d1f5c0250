"""fadeway: a memory for LLM agents that forgets the way people do, and keeps what matters.

engine = fadeway.open("memories.db")
mem = engine.memory("conv-42")
request = mem.decorate({"model": "gpt-4.1", "messages": [...]})
response = client.chat.completions.create(**request)
mem.report(request, response)
"""

from __future__ import annotations

from . import errors
from ._version import __version__
from .engine import Engine, open
from .export.document import dumps, loads, read_jsonl, write_jsonl
from .memory import Memory
from .records import MemoryExport, MessageRecord, ReportResult, Unit

__all__ = [
    "Engine",
    "Memory",
    "MemoryExport",
    "MessageRecord",
    "ReportResult",
    "Unit",
    "dumps",
    "errors",
    "loads",
    "open",
    "read_jsonl",
    "write_jsonl",
    "__version__",
]
