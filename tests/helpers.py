"""Small builders of provider messages and responses shared by the tests."""

from __future__ import annotations


def chat_reply(content: str | None = "ok", *, tool_calls: list | None = None,
               prompt_tokens: int | None = None) -> dict:
    """A chat.completion body as the provider sends it."""
    message = {"role": "assistant", "content": content, "refusal": None}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4.1",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    if prompt_tokens is not None:
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": 1,
                         "total_tokens": prompt_tokens + 1}
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
