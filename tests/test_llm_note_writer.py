"""The LLM note writer against a local OpenAI-compatible server (the note ask and tool, forced;
arguments read as a live model's; one retry, then a clear error), and a LoCoMo conversation
replayed with the LLM judge and the LLM note writer against a server that answers everything."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator

import pytest

import fadeway
from fadeway import _constants as C
from fadeway import blocks, tokens, usage
from fadeway.blocks import NOTE_CONTEXT_HEADER
from fadeway.errors import EndpointError, NoteWriterError
from fadeway.http import Endpoint
from fadeway.judge import LLMJudge
from fadeway.notes.writers import (
    NO_CONTEXT,
    LeavingMessage,
    LLMNoteWriter,
    NoteContext,
    NoteWriter,
)
from helpers import shared_data
from judge_answers import completion, everything
from openai_server import OpenAIServer, Reply

MODEL = "writer-model"
TURNS = [
    LeavingMessage(12, "user", "Export the pricing table for finance."),
    LeavingMessage(12, "assistant", "Dana took the checkout migration (FIN-77)."),
    LeavingMessage(13, "tool", '{"id": "LEG-412", "status": "approved"}'),
    LeavingMessage(13, "tool", "paid 131", tool="query_metrics"),
    LeavingMessage(13, "Caroline", "I went to the support group."),
]
NOTE = {
    "notes": [
        {
            "note": "Dana owns the checkout migration FIN-77.",
            "subject": "Dana",
            "object": "FIN-77",
            "milestone": False,
        }
    ]
}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as s:
        yield s


@pytest.fixture
def writer(server) -> Iterator[LLMNoteWriter]:
    w = LLMNoteWriter(Endpoint(server.url, backoff_initial=0.01), model=MODEL)
    yield w
    w.close()


def note_reply(arguments) -> Reply:
    return Reply(
        body=completion(
            tool=("note", arguments if isinstance(arguments, str) else json.dumps(arguments))
        )
    )


def write(writer, ask="the ask", messages=TURNS):
    return asyncio.run(writer.write(ask, messages))


def test_the_ask_and_the_note_tool_go_as_the_live_model_gets_them(server, writer):
    server.script(note_reply(NOTE))
    ask = blocks.note_ask(12, 13)
    with usage.collecting() as used:
        note = write(writer, ask)
    assert [(e.note, e.subject, e.object) for e in note.facts] == [
        ("Dana owns the checkout migration FIN-77.", "Dana", "FIN-77")
    ]
    body = server.requests[0].body
    assert body["model"] == MODEL
    assert body["messages"] == [
        {"role": "user", "content": "Export the pricing table for finance."},
        {"role": "assistant", "content": "Dana took the checkout migration (FIN-77)."},
        {"role": "assistant", "content": '[tool output] {"id": "LEG-412", "status": "approved"}'},
        {"role": "assistant", "content": "[query_metrics output] paid 131"},
        {"role": "user", "content": "Caroline: I went to the support group."},
        {"role": "system", "content": ask},
    ]
    assert body["tools"] == [fadeway.notes.tool.note_tool(fadeway.wire.Format.CHAT_COMPLETIONS)]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "note"}}
    assert [(u.kind, u.model, u.tokens_in, u.tokens_out) for u in used] == [
        ("note", MODEL, 120, 30)
    ]


def test_a_notes_prompt_tokens_served_from_the_cache_are_recorded(server, writer):
    arguments = json.dumps(NOTE)
    server.script(Reply(body=completion(tool=("note", arguments), cached=64)))
    with usage.collecting() as used:
        write(writer)
    assert [(u.kind, u.tokens_in, u.tokens_cached) for u in used] == [("note", 120, 64)]


def test_a_malformed_note_is_asked_again_once(server, writer, caplog):
    server.script(note_reply('{"notes": [{"note": 5}]'), note_reply(NOTE))
    with caplog.at_level(logging.WARNING):
        assert write(writer).facts[0].object == "FIN-77"
    assert len(server.requests) == 2
    assert "could not be read" in caplog.text  # parse_note_arguments, as for a live model


def test_content_instead_of_the_note_call_is_not_a_note(server, writer):
    server.script(
        Reply(body=completion(content=json.dumps(NOTE))),
        Reply(body=completion(content="Sure! Here are the facts.")),
    )
    with pytest.raises(
        NoteWriterError,
        match=r"no readable note call in 2 attempts \(the "
        r"last: the answer holds no note call\); the ask "
        "stays pending",
    ):
        write(writer)


def test_arguments_sent_as_an_object_are_read_the_same(server, writer):
    body = completion(tool=("note", "x"))
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = NOTE
    server.script(Reply(body=body))
    assert write(writer).facts[0].subject == "Dana"


def test_an_endpoint_failure_is_raised(server, writer):
    server.script(*[Reply(500, {"error": {"message": "down"}})] * 4)
    with pytest.raises(EndpointError, match="failed on all 4 attempts"):
        write(writer)


def test_from_env_falls_back_to_the_judge_and_keeps_the_key_with_its_url():
    judge_env = {
        "FADEWAY_JUDGE_BASE_URL": "http://127.0.0.1:9/v1",
        "FADEWAY_JUDGE_MODEL": "judge-m",
        "FADEWAY_JUDGE_API_KEY": "sk-judge",
    }
    w = LLMNoteWriter.from_env(environ=judge_env)
    assert (w.endpoint.base_url, w.model, w.endpoint._api_key) == (
        "http://127.0.0.1:9/v1",
        "judge-m",
        "sk-judge",
    )
    w = LLMNoteWriter.from_env(environ={**judge_env, "FADEWAY_NOTE_WRITER_MODEL": "big"})
    assert (w.model, w.endpoint._api_key) == ("big", "sk-judge")
    w = LLMNoteWriter.from_env(
        environ={**judge_env, "FADEWAY_NOTE_WRITER_BASE_URL": "http://127.0.0.2/v1"}
    )
    assert (w.endpoint.base_url, w.model, w.endpoint._api_key) == (
        "http://127.0.0.2/v1",
        "judge-m",
        None,
    )  # the judge's key stays with the judge's URL
    assert w.name == "llm:judge-m"
    with pytest.raises(EndpointError, match="FADEWAY_NOTE_WRITER_BASE_URL"):
        LLMNoteWriter.from_env(environ={})


def test_a_memory_takes_the_writers_note_as_a_models(server, tmp_path):
    server.script(*[everything] * 2000)
    clock = [1_700_000_000.0]
    writer = LLMNoteWriter(Endpoint(server.url), model=MODEL)
    with fadeway.open(
        tmp_path / "m.db",
        ceiling=2_500,
        clock=lambda: clock[0],
        background=False,
        judge=LLMJudge(Endpoint(server.url), model="j"),
        episode_min_tokens=100,
        episode_max_tokens=600,
    ) as engine:
        mem = engine.memory("m")
        history: list = []
        took = False
        for t in range(12):
            clock[0] += 60
            history.append(
                {
                    "role": "user",
                    "content": f"Dana: Ticket T-{t} is about topic {t}. " + "words " * 200,
                }
            )
            request = mem.decorate({"model": "gpt-4.1", "messages": history})
            reply = {"role": "assistant", "content": f"Noted topic {t}."}
            mem.report(request, {"choices": [{"index": 0, "message": reply}]})
            history.append(reply)
            took |= mem.answer_ask(writer, at=clock[0])
            engine.drain()
        doc = mem.export()
        summary = {(u.kind, u.model) for u in mem.usage()}
    writer.close()
    assert took and doc.notes
    assert all(n.source == f"note-writer:llm:{MODEL}" for n in doc.notes)
    assert ("note", MODEL) in summary and ("judge:about", "j") in summary


# -- the context beside the leaving turns -----------------------------------------------------


def test_the_context_goes_first_as_one_system_message(server, writer):
    server.script(note_reply(NOTE))
    context = NoteContext("You plan trips.", ("Dana Whitfield",), ("- Dana leads. [Dana]",))
    asyncio.run(writer.write("the ask", TURNS[:1], context=context))
    assert server.requests[0].body["messages"] == [
        {"role": "system", "content": context.text},
        {"role": "user", "content": "Export the pricing table for finance."},
        {"role": "system", "content": "the ask"},
    ]


class _HeldWriter(NoteWriter):
    """Answers an ask with fixed facts, as an earlier model's note would have."""

    name = "held"

    def __init__(self, facts: list[tuple[str, str, str]]) -> None:
        self.facts = facts

    async def write(self, ask, messages, *, context=NO_CONTEXT, deadline=None):
        return fadeway.notes.tool.Note(
            notes=[fadeway.notes.tool.NoteEntry(n, s, o, False) for n, s, o in self.facts]
        )


DANA_FACTS = [
    (
        "Dana Whitfield leads the Lisbon office budget review.",
        "Dana Whitfield",
        "Lisbon office budget review",
    ),
    ("Dana Whitfield approved vendor contract VC-88.", "Dana Whitfield", "VC-88"),
]
#: Many more facts about her than a context holds, none about the Lisbon office budget review.
MANY_FACTS = [
    (
        f"Dana Whitfield signed purchase order PO-{i} for {item} supplies.",
        "Dana Whitfield",
        f"PO-{i}",
    )
    for i, item in enumerate(
        "paper toner cable chair desk lamp badge router headset monitor".split() * 20
    )
]
FIRST_INSTRUCTIONS = "You are the scheduling assistant of Harbor & Vale Studio."
LATEST_INSTRUCTIONS = "You are the travel desk of Harbor & Vale Studio.\nConfirm dates in ISO 8601."


def _note_request(server, tmp_path, mention: str, held: list, other: list) -> dict:
    """The writer's request for the second note of memory "m", whose first note (answered by
    `held`) put Dana Whitfield in its graph, while the turns say `mention`; memory "other" of
    the same engine holds the `other` facts."""
    clock = [1_700_000_000.0]
    server.script(*[note_reply(NOTE)] * 4)
    writer = LLMNoteWriter(Endpoint(server.url), model=MODEL)
    with fadeway.open(
        tmp_path / "m.db",
        ceiling=2_500,
        clock=lambda: clock[0],
        background=False,
        episode_min_tokens=100,
        episode_max_tokens=600,
        # `held` may be one note of more facts than a note holds by default (MANY_FACTS fills
        # the graph past the context's budget in one note).
        max_note_facts=max(C.MAX_NOTE_FACTS, len(held), len(other)),
    ) as engine:
        took = {"other": False, "m": False}
        histories: dict[str, list] = {"other": [], "m": []}
        for t in range(40):
            for memory_id in ("other", "m"):
                mem, history = engine.memory(memory_id), histories[memory_id]
                clock[0] += 60
                said = f"{mention} moved the Lisbon office budget review to slot {t}. "
                history.append({"role": "user", "content": said + "words " * 200})
                system = LATEST_INSTRUCTIONS if took[memory_id] else FIRST_INSTRUCTIONS
                messages = [{"role": "system", "content": system}, *history]
                request = mem.decorate({"model": "gpt-4.1", "messages": messages})
                reply = {"role": "assistant", "content": f"Noted slot {t}."}
                mem.report(request, {"choices": [{"index": 0, "message": reply}]})
                history.append(reply)
                if memory_id == "other" or not took["m"]:
                    facts = other if memory_id == "other" else held
                    took[memory_id] |= mem.answer_ask(_HeldWriter(facts), at=clock[0])
                elif mem.answer_ask(writer, at=clock[0]):
                    writer.close()
                    return server.requests[0].body
                engine.drain()
    raise AssertionError("the writer was never asked")


def _context_of(body: dict) -> str:
    first = body["messages"][0]
    assert first["role"] == "system" and first["content"].startswith(NOTE_CONTEXT_HEADER)
    return first["content"]


@pytest.mark.parametrize("mention", ["Dana Whitfield", "Dana"])
def test_the_writer_reads_the_canonical_names_held_facts_and_latest_instructions(
    server, tmp_path, mention
):
    other = [("Dana Okafor runs the Porto warehouse.", "Dana Okafor", "Porto warehouse")]
    body = _note_request(server, tmp_path, mention, DANA_FACTS, other)
    context = _context_of(body)
    lines = context.split("\n")
    assert "- Dana Whitfield" in lines
    assert (
        "- Dana Whitfield leads the Lisbon office budget review. "
        "[Dana Whitfield, Lisbon office budget review]" in lines
    )
    assert "- Dana Whitfield approved vendor contract VC-88. [Dana Whitfield, VC-88]" in lines
    assert "> You are the travel desk of Harbor & Vale Studio." in lines
    assert "> Confirm dates in ISO 8601." in lines
    assert "scheduling assistant" not in context  # the latest instructions, not the first
    # Memories are isolated: the other memory's Dana is never shown.
    assert "Okafor" not in json.dumps(body) and "Porto" not in json.dumps(body)
    # The leaving turns follow, whole, and the ask ends the request.
    turns = [m["content"] for m in body["messages"][1:-1]]
    assert any(t.startswith(f"{mention} moved the Lisbon office") for t in turns)
    assert all(m["role"] != "system" for m in body["messages"][1:-1])
    assert body["messages"][-1]["content"].startswith("History from turn")


def test_the_context_keeps_the_most_relevant_facts_within_its_budget(server, tmp_path):
    body = _note_request(server, tmp_path, "Dana", [*MANY_FACTS, *DANA_FACTS], [])
    context = _context_of(body)
    size = tokens.count_texts(tokens.encoding_for_model(None), [context])[0]
    assert size + C.TOKENS_PER_MESSAGE <= C.NOTE_CONTEXT_TOKENS
    shown = [line for line in context.split("\n") if line.startswith("- Dana Whitfield ")]
    assert 10 < len(shown) < len(MANY_FACTS)  # the budget, not the facts, ended the list
    # The fact the leaving turns speak of comes first; the rest follow it.
    assert shown[0].startswith("- Dana Whitfield leads the Lisbon office budget review.")
    assert "- Dana Whitfield" in context.split("\n")  # the name before any fact


# -- the full replay of one LoCoMo conversation -----------------------------------------------

LOCOMO = shared_data("locomo/locomo10.json")
#: Sessions of the conversation replayed (the first few keep the test well under 30 s).
LOCOMO_SESSIONS = 99  # every session: the whole conversation


@pytest.mark.skipif(
    LOCOMO is None,
    reason="LoCoMo (shared/data/locomo/locomo10.json) is not available; it is never bundled",
)
def test_locomo_replay_with_the_llm_judge_and_note_writer(server, tmp_path):
    from fadeway.replay.locomo import locomo_lines, read_locomo
    from fadeway.replay.runner import replay_memory

    sample = read_locomo(LOCOMO)[0]
    lines = [
        line for dia, line in locomo_lines(sample) if int(dia.split(":")[0][1:]) <= LOCOMO_SESSIONS
    ]
    server.script(*[everything] * 20_000)
    judge = LLMJudge(Endpoint(server.url), model="judge-m")
    writer = LLMNoteWriter(Endpoint(server.url), model="writer-m")
    with fadeway.open(
        tmp_path / "locomo.db", ceiling=2_000, background=False, judge=judge, synchronous="NORMAL"
    ) as engine:
        done = replay_memory(engine, sample["sample_id"], lines, note_writer=writer)
        engine.drain()
        mem = engine.memory(sample["sample_id"])
        doc = mem.export()
        used = {u.kind: u for u in mem.usage()}
    writer.close()
    assert done.stored == len(lines) == len(doc.messages)
    assert doc.notes and all(n.source == "note-writer:llm:writer-m" for n in doc.notes)
    assert doc.facts and {"sealed", "forgotten"} & {e.state for e in doc.episodes}
    assert [t for t in doc.traces if t.kind == "fact" and t.counted]
    assert used["note"].calls == len(doc.notes) and used["note"].model == "writer-m"
    assert {"judge:boundaries", "judge:about", "judge:levels"} <= set(used)
    assert all(u.tokens_in > 0 for u in used.values())
    # Every request the server saw was a judgment or a note ask, all answered.
    kinds = {
        r.body["tools"][0]["function"]["name"]
        if "tools" in r.body
        else r.body["response_format"]["json_schema"]["name"]
        for r in server.requests
    }
    assert "note" in kinds and "about" in kinds
