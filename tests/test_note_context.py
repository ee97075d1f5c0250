"""The context a note writer reads beside the leaving turns, as a memory's store gives it: the
caller's latest instructions in either wire format, cut to their share of the budget; nothing
at all for a memory that holds neither instructions nor entities. (What an LLM writer sends, with
names and held facts, is tested in test_llm_note_writer.py.)"""

from __future__ import annotations

import fadeway
from fadeway import _constants as C
from fadeway import tokens
from fadeway.notes.context import context_tokens, note_context
from fadeway.notes.writers import LeavingMessage

TURNS = [LeavingMessage(1, "user", "Dana Whitfield booked the Lisbon trip.")]


def _context(tmp_path, request: dict):
    with fadeway.open(tmp_path / "c.db", background=False) as engine:
        engine.memory("m").decorate(request)
        with engine.store.read("m") as tx:
            return note_context(tx, TURNS)


def test_a_long_system_prompt_is_cut_at_a_word_to_its_share(tmp_path):
    prompt = " ".join(f"Rule {i}: confirm every booking twice." for i in range(400))
    request = {
        "model": "gpt-4.1",
        "messages": [{"role": "system", "content": prompt}, {"role": "user", "content": "Hi"}],
    }
    context = _context(tmp_path, request)
    assert context.instructions.startswith("Rule 0: confirm every booking twice. Rule 1:")
    assert context.instructions.endswith(" …")
    assert context.instructions[:-2] == prompt[: len(context.instructions) - 2]
    assert prompt[len(context.instructions) - 2] == " "  # cut at a word
    size = context_tokens(fadeway.notes.writers.NoteContext(context.instructions))
    assert C.NOTE_CONTEXT_INSTRUCTIONS_TOKENS - 20 < size <= C.NOTE_CONTEXT_INSTRUCTIONS_TOKENS
    assert context.names == () and context.facts == ()  # an empty graph


def test_responses_instructions_and_developer_messages_are_read_in_order(tmp_path):
    request = {
        "model": "gpt-4.1",
        "instructions": "You are the travel desk.",
        "input": [
            {"role": "developer", "content": [{"type": "input_text", "text": "Use ISO dates."}]},
            {"role": "user", "content": "Hi"},
        ],
    }
    context = _context(tmp_path, request)
    assert context.instructions == "You are the travel desk.\n\nUse ISO dates."
    text = context.text
    assert text is not None and "> You are the travel desk.\n>\n> Use ISO dates." in text
    counted = tokens.count_texts(tokens.encoding_for_model(None), [text])[0]
    assert context_tokens(context) == counted + C.TOKENS_PER_MESSAGE


def test_a_memory_with_no_instructions_and_no_graph_gives_no_context(tmp_path):
    context = _context(
        tmp_path, {"model": "gpt-4.1", "messages": [{"role": "user", "content": "Hi"}]}
    )
    assert context == fadeway.notes.writers.NO_CONTEXT and context.text is None
    assert context_tokens(context) == 0
