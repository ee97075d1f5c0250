"""Valid answers to the LLM judge's and note writer's requests, read from the requests themselves:
the judgment from the schema's name, the ids from the prompt's numbered lines. For scripted
servers (tests/openai_server.py) that must answer every judgment, however it was batched."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from fadeway.blocks import NOTE_CONTEXT_HEADER
from openai_server import Recorded, Reply

#: Where each judgment's numbered items start in its user text (ids are read after it).
_ITEMS_AFTER = {
    "boundaries": "Units to score:\n",
    "relate": "Pairs:\n",
    "same_entity": "Pairs:\n",
    "levels": "\n\nFacts:\n",
    "distill": "\n\nRecalled items:\n",
}


def judgment(body: dict) -> tuple[str, str]:
    """(judgment name, "json_schema" or "tool") of a judge request."""
    if "response_format" in body:
        return body["response_format"]["json_schema"]["name"], "json_schema"
    return body["tools"][0]["function"]["name"], "tool"


def user_text(body: dict) -> str:
    return body["messages"][-1]["content"]


def ids_in(text: str) -> list[int]:
    return [int(i) for i in re.findall(r"^\[(\d+)\]", text, re.MULTILINE)]


def about_sections(text: str) -> tuple[str, str]:
    """An `about` request's user text as (its facts' lines, its episodes' blocks). The facts
    come last, one line each, so the last "Facts:" heading is theirs whatever an episode says."""
    episodes, facts = text.removeprefix("Episodes:\n").rsplit("\n\nFacts:\n", 1)
    return facts, episodes


def asked_ids(body: dict) -> Any:
    """The ids a judge request asks about: a list, or for `about` (fact ids, episode ids)."""
    name, _ = judgment(body)
    text = user_text(body)
    if name == "about":
        facts, episodes = about_sections(text)
        return ids_in(facts), ids_in(episodes)
    section = text.split(_ITEMS_AFTER[name], 1)[1]
    if name == "boundaries":
        section = section.split("\n\nContext after:", 1)[0]
    return ids_in(section)


def default_item(name: str, key: Any) -> Any:
    """A valid answer item for `key` (an id, or a (fact, episode) pair); None leaves it out,
    as answers that list what counts only do (an unrelated pair, two names of two things)."""
    if name == "boundaries":
        return [key, (key % 5) / 5, ((key + 2) % 5) / 5]
    if name == "about":
        return [key[0], key[1], 0.75]
    if name in ("relate", "same_entity"):
        return None
    if name == "levels":
        return [key, 2]
    return key  # distill: the ids kept


def items_for(body: dict, item: Callable[[str, Any], Any] = default_item) -> dict:
    """The whole valid answer object for a judge request (items that are None left out)."""
    name, _ = judgment(body)
    ids = asked_ids(body)
    keys = [(f, e) for f in ids[0] for e in ids[1]] if name == "about" else ids
    key = {
        "boundaries": "units",
        "about": "about",
        "relate": "pairs",
        "same_entity": "pairs",
        "levels": "facts",
        "distill": "facts",
    }[name]
    return {key: [x for k in keys if (x := item(name, k)) is not None]}


def completion(
    *,
    content: str | None = None,
    tool: tuple[str, str] | None = None,
    usage: tuple[int, int] | None = (120, 30),
    cached: Any = None,
) -> dict:
    """A chat.completion body holding `content` or one tool call (name, arguments); `cached`,
    when given, is what its usage says of the prompt tokens served from the prompt cache
    (`prompt_tokens_details.cached_tokens`)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool is not None:
        message["tool_calls"] = [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": tool[0], "arguments": tool[1]},
            }
        ]
    body: dict[str, Any] = {
        "id": "chatcmpl-t",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        }
        if cached is not None:
            body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached, "audio_tokens": 0}
    return body


def answer(body: dict, obj: Any) -> Reply:
    """`obj` as the request asked for it: content for json_schema, a tool call for tool mode."""
    name, mode = judgment(body)
    text = obj if isinstance(obj, str) else json.dumps(obj)
    if mode == "json_schema":
        return Reply(body=completion(content=text))
    return Reply(body=completion(tool=(name, text)))


def valid(request: Recorded) -> Reply:
    """A valid answer to any judge request."""
    return answer(request.body, items_for(request.body))


def note_answer(request: Recorded) -> Reply:
    """A note call for a note writer request: one fact per leaving user message (its first
    sentence, the speaker as subject). The context before the leaving turns is not one."""
    facts = []
    for m in request.body["messages"][:-1]:
        text = m["content"]
        if m["role"] == "system" and text.startswith(NOTE_CONTEXT_HEADER):
            continue
        speaker, _, said = text.partition(": ")
        if not said:
            speaker, said = m["role"], text
        sentence = said.split(". ")[0].strip()[:200]
        if sentence:
            facts.append(
                {
                    "note": f"{speaker} said: {sentence}",
                    "subject": speaker,
                    "object": sentence.split()[-1].strip(".,!?") or "it",
                    "milestone": False,
                }
            )
    arguments = json.dumps(
        {"notes": facts[:8] or [{"note": "", "subject": "", "object": "", "milestone": False}]}
    )
    return Reply(body=completion(tool=("note", arguments)))


def everything(request: Recorded) -> Reply:
    """Answers every request of an engine run with the LLM judge and note writer."""
    body = request.body
    if request.path.endswith("/embeddings"):
        raise AssertionError("no embeddings expected")
    if any(t.get("function", {}).get("name") == "note" for t in body.get("tools", [])):
        return note_answer(request)
    return valid(request)
