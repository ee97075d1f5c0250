"""The note tool: its definition validates against the official OpenAI schema in both wire
formats, its arguments are read strictly and never raise, and its calls are found in (and taken
out of) a reply."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from fadeway.notes.tool import (
    NOTE_NOT_READ,
    NOTE_PARAMETERS,
    NOTE_TOOL_NAME,
    NOTED,
    Note,
    NoteEntry,
    find_note_calls,
    is_note_call,
    note_output,
    note_tool,
    parse_note_arguments,
    without_note_calls,
)
from fadeway.wire import Format, parse_response
from helpers import OPENAPI_RELATIVE, Schemas, call, chat_reply, shared_data

CHAT, RESPONSES = Format.CHAT_COMPLETIONS, Format.RESPONSES
GOOD = {
    "notes": [
        {
            "note": "Pricing page copy v3 was approved by the user.",
            "subject": "user",
            "object": "pricing page copy v3",
            "milestone": True,
        },
        {
            "note": "The pricing page launches on 2026-03-14.",
            "subject": "pricing page",
            "object": "launch date",
            "milestone": False,
        },
    ]
}


@pytest.fixture(scope="module")
def schemas() -> Schemas:
    path = shared_data(str(OPENAPI_RELATIVE))
    if path is None:
        pytest.skip(
            "the OpenAI OpenAPI document is absent: set FADEWAY_SHARED_DATA to the "
            "shared/data directory holding openai-openapi/openapi.json"
        )
    return Schemas(json.loads(path.read_text(encoding="utf-8")))


# --- the tool definition ------------------------------------------------------------------------


def test_chat_tool_validates(schemas: Schemas) -> None:
    tool = note_tool(CHAT)
    assert tool["function"]["name"] == NOTE_TOOL_NAME == "note"
    schemas.check("ChatCompletionTool", tool)
    schemas.check(
        "CreateChatCompletionRequest",
        {
            "model": "gpt-4.1",
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [call("call_1", "note", json.dumps(GOOD))],
                },
                note_output(CHAT, "call_1", True),
                note_output(CHAT, "call_2", False),
            ],
            "tools": [{"type": "function", "function": {"name": "lookup"}}, tool],
        },
    )


def test_responses_tool_validates(schemas: Schemas) -> None:
    tool = note_tool(RESPONSES)
    assert tool["name"] == "note" and tool["strict"] is True
    schemas.check("FunctionTool", tool)
    schemas.check(
        "CreateResponse",
        {
            "model": "gpt-4.1",
            "input": [
                {"role": "user", "content": "hi"},
                {
                    "type": "function_call",
                    "call_id": "call_1",
                    "name": "note",
                    "arguments": json.dumps(GOOD),
                },
                note_output(RESPONSES, "call_1", True),
            ],
            "tools": [tool],
        },
    )


def test_the_validator_is_not_vacuous(schemas: Schemas) -> None:
    assert schemas.errors("ChatCompletionTool", {"type": "function", "function": {}})
    assert schemas.errors("FunctionTool", {"type": "function", "parameters": {}})


def test_parameters_are_a_strict_mode_json_schema() -> None:
    Draft202012Validator.check_schema(NOTE_PARAMETERS)

    def objects(schema: Any):
        if isinstance(schema, dict):
            if schema.get("type") == "object":
                yield schema
            for value in schema.values():
                yield from objects(value)

    found = list(objects(NOTE_PARAMETERS))
    assert len(found) == 2
    for schema in found:  # what OpenAI's strict mode requires of every object
        assert schema["additionalProperties"] is False
        assert sorted(schema["required"]) == sorted(schema["properties"])
    assert list(found[1]["properties"]) == ["note", "subject", "object", "milestone"]


# --- parsing the arguments ----------------------------------------------------------------------


def test_parse_a_good_note() -> None:
    note = parse_note_arguments(json.dumps(GOOD))
    assert note == Note(
        [
            NoteEntry(
                "Pricing page copy v3 was approved by the user.",
                "user",
                "pricing page copy v3",
                True,
            ),
            NoteEntry(
                "The pricing page launches on 2026-03-14.", "pricing page", "launch date", False
            ),
        ]
    )
    assert note.facts == note.notes


def test_an_empty_note_is_valid_and_holds_no_facts() -> None:
    note = parse_note_arguments(
        '{"notes": [{"note": "", "subject": "", "object": "", "milestone": false}]}'
    )
    assert note is not None and len(note.notes) == 1 and note.facts == []
    assert parse_note_arguments('{"notes": []}') == Note([])


def test_extra_keys_are_tolerated() -> None:
    extra = {"notes": [{**GOOD["notes"][0], "turn": 12}], "comment": "x"}
    assert parse_note_arguments(json.dumps(extra)) == Note([NoteEntry(**GOOD["notes"][0])])


def _entry(**changes: Any) -> dict[str, Any]:
    entry = dict(GOOD["notes"][0])
    for key, value in changes.items():
        if value is ...:
            del entry[key]
        else:
            entry[key] = value
    return entry


MALFORMED = [
    "",
    " ",
    "null",
    "[]",
    "{}",
    "notes",
    '{"notes": ',
    "{'notes': []}",
    '"{\\"notes\\": []}"',
    json.dumps({"notes": None}),
    json.dumps({"notes": {}}),
    json.dumps({"notes": [None]}),
    json.dumps({"notes": ["Dana owns checkout."]}),
    json.dumps({"note": GOOD["notes"]}),
    json.dumps({"notes": [_entry(note=...)]}),
    json.dumps({"notes": [_entry(subject=...)]}),
    json.dumps({"notes": [_entry(object=...)]}),
    json.dumps({"notes": [_entry(milestone=...)]}),
    json.dumps({"notes": [_entry(milestone="true")]}),
    json.dumps({"notes": [_entry(milestone=1)]}),
    json.dumps({"notes": [_entry(milestone=None)]}),
    json.dumps({"notes": [_entry(note=None)]}),
    json.dumps({"notes": [_entry(note=3)]}),
    json.dumps({"notes": [_entry(subject=["user"])]}),
    json.dumps({"notes": [_entry(), _entry(object={"name": "x"})]}),
    json.dumps(GOOD) + " trailing",
    "\ud800",
    '{"notes": "\ud800"}',
    "[" * 100_000,
]


@pytest.mark.parametrize("arguments", MALFORMED)
def test_malformed_arguments_give_none_and_a_log_line(
    arguments: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="fadeway.notes"):
        assert parse_note_arguments(arguments) is None
    assert [r.name for r in caplog.records] == ["fadeway.notes"]


@pytest.mark.parametrize("value", [None, 3, GOOD, [GOOD]])
def test_arguments_that_are_not_a_string_give_none(value: Any) -> None:
    assert parse_note_arguments(value) is None


@given(st.text())
def test_arbitrary_strings_never_raise(text: str) -> None:
    note = parse_note_arguments(text)
    assert note is None or isinstance(note, Note)


@given(st.binary())
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    parse_note_arguments(data)  # type: ignore[arg-type]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
field_values = st.one_of(
    st.text(max_size=5),
    st.booleans(),
    st.none(),
    st.integers(),
    st.lists(st.text(max_size=2), max_size=1),
)


@st.composite
def near_notes(draw: st.DrawFn) -> Any:
    """Documents close to a note: each field may be missing or of the wrong type; no extras."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    entries = []
    for _ in range(draw(st.integers(0, 3))):
        entry = {}
        for key, good in (
            ("note", st.text(max_size=5)),
            ("subject", st.text(max_size=5)),
            ("object", st.text(max_size=5)),
            ("milestone", st.booleans()),
        ):
            choice = draw(st.integers(0, 5))
            if choice == 0:
                continue
            entry[key] = draw(field_values) if choice == 1 else draw(good)
        entries.append(entry if draw(st.integers(0, 9)) else draw(json_values))
    return {"notes": entries} if draw(st.integers(0, 9)) else {"notes": draw(json_values)}


@given(near_notes())
def test_parsing_agrees_with_the_tool_schema(document: Any) -> None:
    """Without extra keys, a document parses exactly when the tool's own schema accepts it,
    unless it holds facts and none of them names an entity (a letter or digit on one side)."""
    valid = Draft202012Validator(NOTE_PARAMETERS).is_valid(document)
    if valid:
        facts = [e for e in document["notes"] if e["note"].strip()]
        named = [e for e in facts if any(c.isalnum() for c in e["subject"] + e["object"])]
        valid = not facts or bool(named)
    assert (parse_note_arguments(json.dumps(document)) is not None) == valid


# --- finding note calls in a reply --------------------------------------------------------------


def test_chat_note_calls_are_found_and_removed() -> None:
    note = call("call_n", "note", json.dumps(GOOD))
    lookup = call("call_l", "lookup", '{"q": "x"}')
    custom = {"id": "call_c", "type": "custom", "custom": {"name": "note", "input": "x"}}
    reply = parse_response(CHAT, chat_reply(None, tool_calls=[lookup, note, custom]))
    assert find_note_calls(CHAT, reply.items) == [("call_n", json.dumps(GOOD))]
    assert without_note_calls(CHAT, reply.tool_calls) == [lookup, custom]
    only = parse_response(CHAT, chat_reply(None, tool_calls=[note]))
    assert without_note_calls(CHAT, only.tool_calls) == []
    assert find_note_calls(CHAT, parse_response(CHAT, chat_reply("hi")).items) == []


def test_chat_note_calls_are_found_in_a_history() -> None:
    history = [
        {"role": "user", "content": "hi", "tool_calls": [call("u", "note")]},  # not an assistant
        {"role": "assistant", "content": None, "tool_calls": [call("a1", "note", "{}")]},
        {"role": "tool", "tool_call_id": "a1", "content": NOTED},
        {"role": "assistant", "content": "ok", "tool_calls": None},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a2", "type": "function", "function": {"name": "note", "arguments": GOOD}},
                {"type": "function", "function": {"name": "note", "arguments": "{}"}},  # no id
            ],
        },
    ]
    assert find_note_calls(CHAT, history) == [
        ("a1", "{}"),
        ("a2", json.dumps(GOOD, separators=(",", ":"))),
    ]


def test_responses_note_calls_are_found_and_removed() -> None:
    note = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_n",
        "name": "note",
        "arguments": json.dumps(GOOD),
        "status": "completed",
    }
    lookup = {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_l",
        "name": "lookup",
        "arguments": "{}",
        "status": "completed",
    }
    spaced = {
        "type": "function_call",
        "id": "fc_3",
        "call_id": "call_s",
        "name": "note",
        "namespace": "crm",
        "arguments": "{}",
        "status": "completed",
    }
    response = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            note,
            lookup,
            spaced,
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Working on it.", "annotations": []}],
            },
        ],
    }
    reply = parse_response(RESPONSES, response)
    assert find_note_calls(RESPONSES, reply.items) == [("call_n", json.dumps(GOOD))]
    assert without_note_calls(RESPONSES, reply.tool_calls) == [lookup, spaced]
    assert not is_note_call(RESPONSES, spaced) and is_note_call(RESPONSES, note)
    assert not is_note_call(CHAT, note) and not is_note_call(RESPONSES, "note")


def test_note_outputs() -> None:
    assert note_output(CHAT, "call_1", True) == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": NOTED,
    }
    assert note_output(RESPONSES, "call_1", False) == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": NOTE_NOT_READ,
    }
    assert NOTED == "Noted."
    assert "could not be read" in NOTE_NOT_READ and "again" in NOTE_NOT_READ


def test_a_note_entry_needs_an_entity_to_be_a_fact(caplog):
    """A blank side takes the other side's entity; an entry that names none (blank, or
    punctuation only) is left out with a log line, so no nameless entity joins such facts."""
    note = parse_note_arguments(
        json.dumps(
            {
                "notes": [
                    {"note": "Dana resigned.", "subject": "Dana", "object": "", "milestone": True},
                    {"note": "It rained.", "subject": " ", "object": "...", "milestone": False},
                    {"note": "Q2 ends.", "subject": "", "object": "Q2", "milestone": False},
                    {"note": "", "subject": "A", "object": "B", "milestone": False},
                    {
                        "note": "Ben owns tax.",
                        "subject": "Ben",
                        "object": "tax table",
                        "milestone": False,
                    },
                ]
            }
        )
    )
    with caplog.at_level("WARNING", logger="fadeway.notes"):
        facts = note.facts
    assert [(f.note, f.subject, f.object, f.milestone) for f in facts] == [
        ("Dana resigned.", "Dana", "Dana", True),
        ("Q2 ends.", "Q2", "Q2", False),
        ("Ben owns tax.", "Ben", "tax table", False),
    ]
    assert "1 note entries name no entity" in caplog.text and "It rained." in caplog.text
    # A note whose every fact names no entity keeps nothing: it is not read, the ask stands.
    assert (
        parse_note_arguments(
            json.dumps(
                {
                    "notes": [
                        {"note": "It rained.", "subject": "", "object": "-", "milestone": False}
                    ]
                }
            )
        )
        is None
    )
    assert parse_note_arguments(
        '{"notes": [{"note": "", "subject": "", "object": "", "milestone": false}]}'
    ) == Note([NoteEntry("", "", "", False)])  # nothing to keep, said as such: a note
