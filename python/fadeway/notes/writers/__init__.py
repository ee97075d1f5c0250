"""Note writers: who answers a note ask when the live model cannot (MECHANISM: "The note ask and
sealing"; ARCHITECTURE: "Who answers a note ask").

In live use the decorated model answers the ask in its reply, unless the engine was opened with
a note writer (`fadeway.open(note_writer=...)`): then the writer answers it in the lane and the
model is not asked. In batch replay of recorded conversations the recorded replies cannot, so a
note writer answers it as a separate step. Either way its facts go through exactly the same path
as a model's note, with their provenance marked: the offline writer (`offline`, extractive) or a
model over an OpenAI-compatible endpoint (`llm`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ...errors import NoteWriterError
from ...http import Endpoint
from .base import NO_CONTEXT, LeavingMessage, NoteContext, NoteWriter, ask_writer, leaving_messages
from .llm import ENV_PREFIX, JUDGE_ENV_PREFIX, LLMNoteWriter
from .offline import OfflineNoteWriter

__all__ = [
    "NO_CONTEXT",
    "LLMNoteWriter",
    "LeavingMessage",
    "NoteContext",
    "NoteWriter",
    "NoteWriterError",
    "OfflineNoteWriter",
    "leaving_messages",
    "note_writer_from",
    "ask_writer",
]


def note_writer_from(
    spec: NoteWriter | str | None,
    *,
    model: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> NoteWriter | None:
    """The note writer `spec` names: None or "none" (asks stay unanswered), "offline" (the
    extractive writer), an http(s) URL (the LLM writer at that OpenAI-compatible API root;
    model from the argument, else FADEWAY_NOTE_WRITER_MODEL, else FADEWAY_JUDGE_MODEL; key from
    FADEWAY_NOTE_WRITER_API_KEY, else FADEWAY_JUDGE_API_KEY), or a NoteWriter (itself)."""
    if spec is None or spec == "none":
        return None
    if isinstance(spec, NoteWriter):
        return spec
    if spec == "offline":
        return OfflineNoteWriter()
    if isinstance(spec, str) and spec.startswith(("http://", "https://")):
        env = os.environ if environ is None else environ
        model = (
            model
            or env.get(f"{ENV_PREFIX}_MODEL", "").strip()
            or env.get(f"{JUDGE_ENV_PREFIX}_MODEL", "").strip()
            or None
        )
        key = (
            env.get(f"{ENV_PREFIX}_API_KEY", "").strip()
            or env.get(f"{JUDGE_ENV_PREFIX}_API_KEY", "").strip()
            or None
        )
        return LLMNoteWriter(Endpoint(spec, model=model, api_key=key), model=model)
    raise ValueError(
        f"unknown note writer {spec!r}; allowed: 'offline', 'none', or an "
        "http(s):// URL of an OpenAI-compatible API"
    )
