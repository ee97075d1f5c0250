"""The LLM note writer: asks a configured model over an OpenAI-compatible endpoint the way the
live model is asked: the leaving turns as the conversation, the note ask after them, and the
note tool, forced; its arguments are read by `notes.tool.parse_note_arguments` exactly as a live
model's are. The context (`NoteContext`: the caller's instructions, the canonical names and the
held facts the live model would have in view) goes first, as one system message."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ... import _constants as C
from ... import usage
from ...errors import EndpointError, NoteWriterError
from ...http import Endpoint
from ...judge.answers import ChatCompletion
from ...wire.base import Format
from ..tool import NOTE_TOOL_NAME, Note, note_tool, parse_note_arguments
from .base import NO_CONTEXT, LeavingMessage, NoteContext, NoteWriter

__all__ = ["ENV_PREFIX", "JUDGE_ENV_PREFIX", "LLMNoteWriter"]

log = logging.getLogger("fadeway.note_writer")


#: The environment prefix of the note writer's endpoint; each setting falls back to the judge's.
ENV_PREFIX = "FADEWAY_NOTE_WRITER"


JUDGE_ENV_PREFIX = "FADEWAY_JUDGE"


def _chat_message(message: LeavingMessage) -> dict[str, str]:
    """A leaving message as the writer's conversation holds it. Tool outputs become assistant
    text named for their tool (their calls are not replayed, and an output without its call is
    refused)."""
    if message.role in ("user", "assistant"):
        return {"role": message.role, "content": message.text}
    if message.role in ("system", "developer"):
        return {"role": "system", "content": message.text}
    if message.role == "tool":
        return {"role": "assistant", "content": f"[{message.tool or 'tool'} output] {message.text}"}
    return {"role": "user", "content": f"{message.role}: {message.text}"}


class LLMNoteWriter(NoteWriter):
    """Answers a note ask with a call to `model` at `endpoint`: the note tool, forced."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        model: str | None = None,
        temperature: float | None = 0.0,
        extra: Mapping[str, Any] | None = None,
        path: str = "chat/completions",
    ) -> None:
        model = model or endpoint.model
        if not model:
            raise EndpointError(
                f"no note writer model for {endpoint.base_url}: pass model= or "
                f"set {ENV_PREFIX}_MODEL (or {JUDGE_ENV_PREFIX}_MODEL)"
            )
        self.endpoint = endpoint
        self.model = model
        self.name = f"llm:{model}"
        self.temperature = temperature
        self.extra = dict(extra or {})
        self.path = path

    @classmethod
    def from_env(
        cls,
        *,
        model: str | None = None,
        environ: Mapping[str, str] | None = None,
        **endpoint_settings: Any,
    ) -> LLMNoteWriter:
        """From FADEWAY_NOTE_WRITER_BASE_URL, _MODEL and _API_KEY, each falling back to
        FADEWAY_JUDGE_*. The key goes with its base URL: a writer at its own URL never sends
        the judge's key there."""
        env = os.environ if environ is None else environ
        own = bool(env.get(f"{ENV_PREFIX}_BASE_URL", "").strip())
        prefix = ENV_PREFIX if own else JUDGE_ENV_PREFIX
        if not env.get(f"{prefix}_BASE_URL", "").strip():
            raise EndpointError(
                f"neither {ENV_PREFIX}_BASE_URL nor {JUDGE_ENV_PREFIX}_BASE_URL "
                "is set; set one to the API root, e.g. https://api.openai.com/v1"
            )
        endpoint = Endpoint.from_env(prefix, environ=env, **endpoint_settings)
        model = (
            model
            or env.get(f"{ENV_PREFIX}_MODEL", "").strip()
            or env.get(f"{JUDGE_ENV_PREFIX}_MODEL", "").strip()
            or None
        )
        return cls(endpoint, model=model)

    def __repr__(self) -> str:
        return f"LLMNoteWriter({self.endpoint!r}, model={self.model!r})"

    def close(self) -> None:
        self.endpoint.close()

    def _payload(
        self, ask: str, messages: Sequence[LeavingMessage], context: NoteContext
    ) -> dict[str, Any]:
        first = context.text
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [
                *([{"role": "system", "content": first}] if first else []),
                *(_chat_message(m) for m in messages),
                {"role": "system", "content": ask},
            ],
            "tools": [note_tool(Format.CHAT_COMPLETIONS)],
            "tool_choice": {"type": "function", "function": {"name": NOTE_TOOL_NAME}},
        }
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        payload.update(self.extra)
        return payload

    async def write(
        self,
        ask: str,
        messages: Sequence[LeavingMessage],
        *,
        context: NoteContext = NO_CONTEXT,
        deadline: float | None = None,
    ) -> Note:
        payload = self._payload(ask, messages, context)
        why = ""
        for attempt in range(1, C.NOTE_WRITER_ATTEMPTS + 1):
            start = time.perf_counter()
            completion = await self.endpoint.post_json(
                self.path, payload, deadline=deadline, response_type=ChatCompletion
            )
            seconds = time.perf_counter() - start
            usage.record("note", self.model, *completion.tokens, seconds, completion.cached)
            note, why = _note_of(completion)
            if note is not None:
                return note
            log.warning(
                "note writer %s: %s (attempt %d of %d)",
                self.name,
                why,
                attempt,
                C.NOTE_WRITER_ATTEMPTS,
            )
        raise NoteWriterError(
            f"note writer {self.name} gave no readable note call in "
            f"{C.NOTE_WRITER_ATTEMPTS} attempts (the last: {why}); the ask "
            "stays pending"
        )


def _note_of(completion: ChatCompletion) -> tuple[Note | None, str]:
    """The note of the answer's one note call, or None and why not."""
    message = completion.message
    calls = [c.function for c in (message.tool_calls or ()) if c.function] if message else []
    notes = [f for f in calls if f.name == NOTE_TOOL_NAME]
    if not notes:
        return None, "the answer holds no note call"
    if len(notes) > 1:
        return None, f"the answer holds {len(notes)} note calls, not one"
    arguments = notes[0].arguments
    if isinstance(arguments, dict | list):  # a server that decoded the arguments for us
        arguments = msgspec.json.encode(arguments).decode()
    note = parse_note_arguments(arguments)
    return (note, "") if note is not None else (None, "its arguments are not a note")
