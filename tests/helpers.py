"""Small builders of provider messages and responses shared by the tests."""

from __future__ import annotations


def chat_reply(
    content: str | None = "ok", *, tool_calls: list | None = None, prompt_tokens: int | None = None
) -> dict:
    """A chat.completion body as the provider sends it."""
    message = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4.1",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }
    if prompt_tokens is not None:
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 1,
            "total_tokens": prompt_tokens + 1,
        }
    return body


def call(call_id: str, name: str = "lookup", arguments: str = "{}") -> dict:
    """One Chat Completions tool call."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def shared_data(relative: str):
    """A file under shared/data (beside the repository, or under $FADEWAY_SHARED_DATA), or None."""
    import os
    from pathlib import Path

    roots = []
    if os.environ.get("FADEWAY_SHARED_DATA"):
        roots.append(Path(os.environ["FADEWAY_SHARED_DATA"]))
    roots.append(Path(__file__).resolve().parents[2] / "shared" / "data")
    return next((root / relative for root in roots if (root / relative).exists()), None)


# -- the official OpenAI schema ------------------------------------------------------------------

import json  # noqa: E402
import os  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import msgspec  # noqa: E402
from jsonschema import Draft202012Validator, validators  # noqa: E402
from referencing import Registry, Resource  # noqa: E402
from referencing.jsonschema import DRAFT202012  # noqa: E402

from fadeway.records import EpisodeRecord, MessageRecord  # noqa: E402

OPENAPI_RELATIVE = Path("openai-openapi/openapi.json")
#: Where the whole document is registered; schemas are referenced by pointer under it.
OPENAPI_URI = "https://fadeway.test/openai-openapi.json"


def openapi_path() -> Path | None:
    """The official OpenAI OpenAPI document under shared/data, or None."""
    candidates = []
    if os.environ.get("FADEWAY_SHARED_DATA"):
        candidates.append(Path(os.environ["FADEWAY_SHARED_DATA"]) / OPENAPI_RELATIVE)
    candidates.append(Path(__file__).resolve().parents[2] / "shared/data" / OPENAPI_RELATIVE)
    return next((p for p in candidates if p.is_file()), None)


def _unless_nullable(keyword: str) -> Any:
    """OpenAPI 3.0's `nullable: true` (which parts of the document still use, on the fields a
    stream chunk sends as null): a null passes `type` and `enum` where the schema allows it."""
    check = Draft202012Validator.VALIDATORS[keyword]

    def validate(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Any:
        if instance is None and schema.get("nullable") is True:
            return
        yield from check(validator, value, instance, schema)

    return validate


# OpenAPI's overlapping oneOf read as anyOf (see test_openapi_schema's docstring), and its
# `nullable` honoured.
_OpenAPIValidator = validators.extend(
    Draft202012Validator,
    {
        "oneOf": Draft202012Validator.VALIDATORS["anyOf"],
        "type": _unless_nullable("type"),
        "enum": _unless_nullable("enum"),
    },
)


class Schemas:
    """Validators for the named component schemas of one registered OpenAPI document."""

    def __init__(self, document: dict[str, Any]) -> None:
        resource = Resource.from_contents(document, default_specification=DRAFT202012)
        self._registry = Registry().with_resource(OPENAPI_URI, resource)
        self._validators: dict[str, Any] = {}

    def validator(self, name: str) -> Any:
        if name not in self._validators:
            self._validators[name] = _OpenAPIValidator(
                {"$ref": f"{OPENAPI_URI}#/components/schemas/{name}"}, registry=self._registry
            )
        return self._validators[name]

    def errors(self, name: str, instance: Any) -> list[str]:
        # The JSON the SDK would send: SDK objects dumped, tuples as lists.
        sent = json.loads(json.dumps(instance, default=lambda o: o.model_dump(mode="json")))
        return [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
            for e in self.validator(name).iter_errors(sent)
        ]

    def check(self, name: str, instance: Any) -> None:
        errors = self.errors(name, instance)
        assert not errors, f"not a valid {name}:\n" + "\n".join(errors)


def note_call(call_id: str, entries: list[tuple[str, str, str, bool]]) -> dict:
    """A Chat Completions call of the note tool holding (note, subject, object, milestone)s."""
    import json

    notes = [{"note": n, "subject": s, "object": o, "milestone": m} for n, s, o, m in entries]
    return call(call_id, "note", json.dumps({"notes": notes}))


#: Engine settings under which `converse_with_notes` is soon asked for notes: a small ceiling,
#: small episodes, history cut early.
NOTE_ASKING = {
    "ceiling": 3_000,
    "episode_min_tokens": 100,
    "episode_max_tokens": 400,
    "cut_after_tokens": 600,
}


def converse_with_notes(
    engine,
    memory,
    clock,
    notes: list,
    *,
    turns: int = 80,
    words: int = 40,
    settle: bool = True,
    opening: Sequence[str] = (),
) -> list:
    """Talk with `memory` (a small ceiling makes it ask), answering the note asks in order with
    `notes` (lists of note entries), draining the lane after every reply, until every note was
    given and the next call has sealed them (or, without `settle`, until the last was given:
    its episodes are still leaving). The first user messages say the `opening` texts, one
    each. Returns the history as sent."""
    history: list = []
    queue = list(notes)
    for t in range(turns):
        clock.advance(60)
        said = f"{opening[t]} " if t < len(opening) else ""
        text = f"Turn {t}: {said}" + " ".join(f"w{t}_{i}" for i in range(words))
        history.append({"role": "user", "content": text})
        request = memory.decorate({"model": "gpt-4.1", "messages": history})
        asked = any(x.get("function", {}).get("name") == "note" for x in request.get("tools") or [])
        calls = [note_call(f"note_{t}", queue.pop(0))] if asked and queue else None
        reply = chat_reply(f"answer {t}", tool_calls=calls)
        memory.report(request, reply)
        history.append(reply["choices"][0]["message"])
        engine.drain()
        if not queue and (calls is None or not settle):
            return history
    raise AssertionError(f"{len(queue)} notes were never asked for in {turns} turns")


TALK_WORDS = "the checkout migration moved to the new tax table after review".split()


def talk(engine, memory_id: str, clock, turns: int) -> None:
    """`turns` exchanges of about 60 words each: enough closed history to queue lane jobs."""
    mem = engine.memory(memory_id)
    history: list = []
    for i in range(turns):
        text = " ".join(TALK_WORDS[(i + j) % len(TALK_WORDS)] for j in range(60))
        history.append({"role": "user", "content": f"{memory_id} turn {i}: {text}"})
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        reply = chat_reply(f"Noted {i}: {text}")
        mem.report(request, reply)
        history.append(reply["choices"][0]["message"])
        clock.advance(60)


def message_record(seq: int, **fields: Any) -> MessageRecord:
    """A stored user message at `seq` (of one token, at time 0, unless `fields` say otherwise),
    for tests of what stores and reads messages."""
    base = MessageRecord(
        seq=seq,
        turn=1,
        at=0.0,
        role="user",
        kind="message",
        side="user",
        source="request",
        tokens=1,
        digest=b"d",
        calls=(),
        answers=None,
        body=b"{}",
    )
    return msgspec.structs.replace(base, **fields) if fields else base


def episode_record(n: int, state: str = "live", tokens: int = 10) -> EpisodeRecord:
    """Episode `n` of three messages (seqs 3n-3 to 3n-1), turn `n`, for tests of the store."""
    return EpisodeRecord(
        n=n,
        first_seq=3 * (n - 1),
        last_seq=3 * n - 1,
        first_turn=n,
        last_turn=n,
        start_at=float(n),
        end_at=float(n),
        tokens=tokens,
        cut_at=float(n),
        state=state,
    )
