"""Decorated requests are requests the provider accepts: they validate against the official
OpenAI OpenAPI document (`CreateChatCompletionRequest`, `CreateResponse`).

The document is read from `shared/data/openai-openapi/openapi.json` beside the repository (or
under `$FADEWAY_SHARED_DATA`); the tests skip when it is absent.

One relaxation of the document, and why: its `oneOf`s overlap where the API itself does not mind.
A Responses user message with a list of parts, `{"role": "user", "content": [{"type":
"input_text", ...}]}`, matches both `EasyInputMessage` and `InputMessage` (the `discriminator`
on `type` cannot tell them apart: both say "message"), so a strict `oneOf` rejects every such
message the API accepts. `oneOf` is therefore checked as "at least one branch matches", which
still rejects anything no branch allows (see `test_the_validator_rejects_invalid_requests`).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fadeway
from helpers import Schemas, openapi_path
from strategies import chat_conversations, responses_conversations

CHAT = "CreateChatCompletionRequest"
RESPONSES = "CreateResponse"
EXAMPLES = 50

_settings = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.fixture(scope="module")
def schemas() -> Schemas:
    path = openapi_path()
    if path is None:
        pytest.skip(
            "the OpenAI OpenAPI document is absent: set FADEWAY_SHARED_DATA to the "
            "shared/data directory holding openai-openapi/openapi.json"
        )
    return Schemas(json.loads(path.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    # One store for the module; each example uses a fresh memory id.
    with fadeway.open(
        tmp_path_factory.mktemp("schema") / "schema.db", clock=lambda: 1.7e9, synchronous="OFF"
    ) as engine:
        yield engine


_ids = itertools.count()


def _fresh(engine: fadeway.Engine) -> fadeway.Memory:
    return engine.memory(f"schema-{next(_ids)}")


def _history_key(request: dict[str, Any]) -> str:
    return "messages" if "messages" in request else "input"


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _check_decorated(request: dict[str, Any], decorated: dict[str, Any]) -> None:
    """Every field but the history unchanged; the history is instructions + the whole view."""
    key = _history_key(request)
    assert {k: v for k, v in decorated.items() if k != key} == {
        k: v for k, v in request.items() if k != key
    }
    sent = request[key]
    if isinstance(sent, str):
        sent = [{"role": "user", "content": sent}]
    # Nothing is forgotten yet in a short fresh conversation: the view is everything sent.
    assert _plain(decorated[key]) == _plain(sent)


@_settings
@given(request=chat_conversations())
def test_decorated_chat_request_validates(
    schemas: Schemas, engine: fadeway.Engine, request: dict[str, Any]
) -> None:
    schemas.check(CHAT, request)  # the strategy draws valid requests
    decorated = _fresh(engine).decorate(request)
    schemas.check(CHAT, decorated)
    _check_decorated(request, decorated)


@_settings
@given(request=responses_conversations())
def test_decorated_responses_request_validates(
    schemas: Schemas, engine: fadeway.Engine, request: dict[str, Any]
) -> None:
    schemas.check(RESPONSES, request)
    decorated = _fresh(engine).decorate(request)
    schemas.check(RESPONSES, decorated)
    _check_decorated(request, decorated)


def _user_cuts(history: list[dict[str, Any]]) -> list[int]:
    """Positions of user messages after the first history message: clean places to cut."""
    first = next(
        (
            i
            for i, m in enumerate(history)
            if m.get("role") not in ("system", "developer")
            or m.get("type") not in (None, "message")
        ),
        len(history),
    )
    return [i for i, m in enumerate(history) if i > first and m.get("role") == "user"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), chat=st.booleans())
def test_decorating_twice_still_validates(
    schemas: Schemas, engine: fadeway.Engine, data: st.DataObject, chat: bool
) -> None:
    """The full history, then the history and what is new since: both decorated requests are
    valid, and the second stores only the new messages."""
    if chat:
        name, request = CHAT, data.draw(chat_conversations(max_turns=4))
    else:
        name, request = (
            RESPONSES,
            data.draw(responses_conversations(max_turns=4, string_input=False)),
        )
    key = _history_key(request)
    whole = request[key]
    cuts = _user_cuts(whole)
    cut = data.draw(st.sampled_from(cuts)) if cuts else len(whole)
    mem = _fresh(engine)
    first = mem.decorate({**request, key: whole[:cut]})
    schemas.check(name, first)
    stored = len(mem.messages())
    second = mem.decorate(request)
    schemas.check(name, second)
    _check_decorated(request, second)
    assert len(mem.messages()) == stored + len(whole) - cut


@pytest.mark.parametrize("text", ["What's the weather in Paris?", "", "héllo 👋 世界\n\x00"])
@pytest.mark.parametrize("instructions", [None, "You are terse."])
def test_responses_string_input_validates(
    schemas: Schemas, engine: fadeway.Engine, text: str, instructions: str | None
) -> None:
    request: dict[str, Any] = {"model": "gpt-4.1", "input": text}
    if instructions is not None:
        request["instructions"] = instructions
    decorated = _fresh(engine).decorate(request)
    schemas.check(RESPONSES, decorated)
    assert decorated["input"] == [{"role": "user", "content": text}]
    assert decorated.get("instructions") == instructions


@pytest.mark.parametrize(
    ("name", "request_"),
    [
        (CHAT, {"model": "gpt-4.1", "messages": [{"role": "wizard", "content": "hi"}]}),
        (CHAT, {"model": "gpt-4.1", "messages": []}),
        (CHAT, {"model": "gpt-4.1", "messages": [{"role": "tool", "content": "18°C"}]}),
        (CHAT, {"messages": [{"role": "user", "content": "hi"}]}),
        (RESPONSES, {"model": "gpt-4.1", "input": [{"type": "function_call", "call_id": "c1"}]}),
        (
            RESPONSES,
            {"model": "gpt-4.1", "input": [{"role": "user", "content": [{"type": "text"}]}]},
        ),
        (RESPONSES, {"model": "gpt-4.1", "input": 3}),
    ],
)
def test_the_validator_rejects_invalid_requests(
    schemas: Schemas, name: str, request_: dict[str, Any]
) -> None:
    """The relaxed oneOf still rejects what no branch allows: the tests above are not vacuous."""
    assert schemas.errors(name, request_)
