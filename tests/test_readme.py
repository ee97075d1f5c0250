"""The README's examples run as written, against a provider played on 127.0.0.1."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openai_server import OpenAIServer, Recorded, Reply

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)


def _answer(request: Recorded) -> Reply:
    """A chat completion that answers the last user message in words."""
    asked = request.body["messages"][-1]["content"]
    return Reply(
        body={
            "id": "chatcmpl-readme",
            "object": "chat.completion",
            "created": 0,
            "model": request.body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"Not yet. ({len(asked)})"},
                }
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
        }
    )


@pytest.fixture
def provider(monkeypatch):
    """The OpenAI SDK, pointed at a local server that answers every chat completion."""
    with OpenAIServer() as server:
        server.script(*[_answer] * 20)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-readme")
        yield server


def test_readme_has_examples():
    assert len(BLOCKS) >= 1


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code, tmp_path, monkeypatch, provider, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    sent = [r for r in provider.requests if r.path.endswith("/chat/completions")]
    assert sent, "the example never called the provider"
    # What reached the provider is the decorated request: the caller's messages, in order.
    roles = [m["role"] for m in sent[0].body["messages"]]
    assert roles[0] == "system" and roles[-1] == "user"
    assert "Not yet." in capsys.readouterr().out


def test_readme_opens_with_the_ci_test_command():
    head = TEXT.splitlines()[:6]
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    test_command = next(line for line in head if "pytest" in line)
    assert test_command in ci
    assert any("fadeway demo" in line for line in head)


def test_readme_is_short_and_links_only_inside_the_repository():
    assert len(TEXT.splitlines()) < 250
    for link in re.findall(r"\]\(([^)]+)\)", TEXT):
        assert not link.startswith(("..", "/")), link
        if not link.startswith("http"):
            assert (README.parent / link.split("#")[0]).exists(), link


def _note_bullet() -> str:
    what_it_is = TEXT.split("## What it is", 1)[1].split("\n## ", 1)[0]
    return next(b for b in what_it_is.split("\n- ") if "note" in b)


def test_readme_says_one_thing_about_who_answers_the_note_ask(tmp_path, clock):
    """Without `note_writer=` the model answers the note ask in its reply; with one, the writer
    answers it in the lane and the model is never asked. The README once said the model is
    always asked, and in its settings table that a note writer answers."""
    from conftest import open_small
    from helpers import chat_reply

    bullet = _note_bullet()
    assert "`note_writer=`" in bullet and "lane" in bullet and "not asked" in bullet
    with open_small(tmp_path / "w.db", clock, note_writer="offline") as engine:
        mem, history = engine.memory("m"), []
        for t in range(80):
            clock.advance(60)
            words = " ".join(f"w{t}_{i}" for i in range(40))
            history.append({"role": "user", "content": f"Turn {t}: {words}"})
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
            assert not request.get("tools"), "the model was asked for a note"
            reply = chat_reply(f"answer {t}")
            mem.report(request, reply)
            history.append(reply["choices"][0]["message"])
            engine.drain()
        notes = mem.export().notes
    assert notes and {n.source for n in notes} == {"note-writer:offline"}
