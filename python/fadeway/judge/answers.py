"""What an LLM judge reads back: the items of each judgment's answer (their JSON schemas are
`prompts`'), the chat completion they come in, and the JSON an answer holds. Read strictly:
`msgspec` refuses anything off its shape."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

__all__ = [
    "AboutItem",
    "BoundaryItem",
    "ChatCompletion",
    "LevelItem",
    "RelateItem",
    "json_object",
]


Score = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]


class BoundaryItem(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """A unit's two scores, written `[id, first, last]`."""

    id: int
    first: Score
    last: Score


class AboutItem(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """A yes, written `[fact, episode, score]`: the fact is about the episode (the answer lists
    no noes)."""

    fact: int
    episode: int
    score: Score


# The judgments below, and `same_entity` and distill (bare ids), list what counts only (what
# they leave out is "unrelated", level 0, "not the same", "dropped"); an item that says the
# left-out answer anyway ("unrelated", level 0) is read as it says.


class RelateItem(msgspec.Struct):
    id: int
    relation: Literal["same", "contradicts", "unrelated"]


class LevelItem(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """A fact's level, written `[id, level]`. An answer's items are most of what the judge
    writes, and an array is about half the tokens of an object naming its fields; `same_entity`
    and `distill` answers are bare ids (what they list is all they say), and only `relate`'s
    items, whose relation is a word, keep their names."""

    id: int
    level: Literal[0, 1, 2, 3]


class _Function(msgspec.Struct):
    name: str = ""
    arguments: Any = None  # a JSON string; some servers send the object itself


class _ToolCall(msgspec.Struct):
    function: _Function | None = None


class _Message(msgspec.Struct):
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(msgspec.Struct):
    message: _Message | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # OpenAI's {"cached_tokens": n, ...}: prompt tokens served from its prompt cache (billed
    # lower). Read leniently: a server's odd extra must not lose the answer.
    prompt_tokens_details: Any = None


class ChatCompletion(msgspec.Struct):
    """What fadeway reads of a chat completion (unknown fields ignored; the note writer too)."""

    choices: list[_Choice] = []
    usage: _Usage | None = None

    @property
    def message(self) -> _Message | None:
        """The first choice's message."""
        return self.choices[0].message if self.choices else None

    @property
    def tokens(self) -> tuple[int, int]:
        """(prompt, completion) tokens as the endpoint reported them; 0 when it did not."""
        used = self.usage or _Usage()
        return used.prompt_tokens or 0, used.completion_tokens or 0

    @property
    def cached(self) -> int:
        """The prompt tokens the endpoint served from its prompt cache; 0 when it did not say
        (and never more than the prompt tokens it reported)."""
        used = self.usage or _Usage()
        details = used.prompt_tokens_details
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if not isinstance(cached, int) or isinstance(cached, bool):
            return 0
        return max(0, min(cached, used.prompt_tokens or 0))


def json_object(text: Any) -> Any:
    """The JSON an answer holds: a string (fenced in ``` or not) decoded, an object as it is."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str) or not text.strip():
        return None
    body = text.strip()
    # A fenced answer is still one JSON value: some local servers wrap even schema-bound output.
    if body.startswith("```") and body.endswith("```"):
        body = body[3:-3].removeprefix("json").strip()
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
