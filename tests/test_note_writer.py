"""The offline note writer: extractive, triple-shaped facts from the leaving turns' own text."""

from __future__ import annotations

import asyncio
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fadeway.notes.writers import NO_CONTEXT, LeavingMessage, OfflineNoteWriter

TURNS = [
    LeavingMessage(12, "user", "Export the pricing table so finance can check the annual prices."),
    LeavingMessage(
        12,
        "assistant",
        "Dana took the checkout migration; she wants the tax rate "
        "table before she starts. Ticket FIN-77 is open.",
    ),
    LeavingMessage(13, "user", "We agreed to launch the pricing page on 2026-03-14 at 09:00."),
    LeavingMessage(13, "tool", '{"id": "LEG-412", "status": "approved", "reviewer": "Legal"}'),
    LeavingMessage(14, "user", "ok thanks"),
]


def write(messages):
    return asyncio.run(OfflineNoteWriter().write("ask", messages))


def test_facts_are_sentences_of_the_turns_with_their_entities_verbatim():
    note = write(TURNS)
    texts = " ".join(m.text for m in TURNS)
    assert note.notes, "nothing was extracted"
    for entry in note.notes:
        sentence = (
            entry.note.split(": ", 1)[-1]
            if entry.note.startswith(("user:", "tool:"))
            else entry.note
        )
        if entry.note == "LEG-412: status approved, reviewer Legal.":
            continue  # the tool's JSON record, read as a sentence (its values verbatim)
        assert sentence in texts
        assert entry.object in entry.note
        assert entry.subject and entry.object and entry.subject != entry.object
    objects = {e.object for e in note.notes}
    assert "2026-03-14" in " ".join(e.note for e in note.notes)
    # Identifiers stay verbatim, as the object or as the subject a record is about.
    assert {"FIN-77", "LEG-412"} & (objects | {e.subject for e in note.notes})
    launch = next(e for e in note.notes if "2026-03-14" in e.note)
    assert launch.milestone  # "agreed": a point of alignment
    assert not any("ok thanks" in e.note for e in note.notes)


def test_markdown_lines_and_json_records_read_as_sentences():
    answer = (
        "Launch recap:\n- **Signups: 412** on launch day, against 158.\n"
        "- Lucía Fernández accepted, starts **18 May**.\n"
        'write_doc {"title": "Q2 OKRs", "content": "O1 Ship checkout v2 by June.\\n'
        'O2 Keep 95% of the 1,846 Team seats.\\nO3 Hire one SRE by May."}'
    )
    records = (
        '[{"id": "OPS-312", "status": "in_progress", "due": "2026-04-17"}, '
        '{"id": "OPS-314", "status": "open", "owner": "Jonas", "nested": {"x": 1}}]'
    )
    note = write([LeavingMessage(3, "assistant", answer), LeavingMessage(3, "tool", records)])
    texts = [e.note for e in note.notes]
    assert "Signups: 412 on launch day, against 158." in texts  # bullet and emphasis gone
    assert "Lucía Fernández accepted, starts 18 May." in texts
    assert "OPS-312: status in_progress, due 2026-04-17." in texts
    assert "OPS-314: status open, owner Jonas." in texts  # nested data left out
    assert not any("{" in t or "**" in t or "write_doc" in t or "O2" in t for t in texts)
    assert len(texts) == len(set(texts))


def test_nothing_worth_keeping_is_one_empty_entry():
    note = write([LeavingMessage(1, "user", "ok"), LeavingMessage(1, "assistant", "sure thing")])
    assert [(e.note, e.milestone) for e in note.notes] == [("", False)]
    assert note.facts == []


def test_a_speaker_prefix_becomes_the_subject():
    note = write(
        [
            LeavingMessage(
                3,
                "user",
                "Caroline: I went to the LGBTQ support group on 7 May 2023 and it was so powerful.",
            )
        ]
    )
    assert note.notes[0].subject == "Caroline"
    assert note.notes[0].note.startswith("Caroline: ")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=6))
def test_any_text_gives_a_valid_deterministic_note(texts):
    messages = [LeavingMessage(i, "user", t) for i, t in enumerate(texts)]
    first, second = write(messages), write(messages)
    assert first == second
    assert 1 <= len(first.notes) <= OfflineNoteWriter().max_facts


class _RefusingWriter(OfflineNoteWriter):
    """A writer whose model never answers (as an LLM writer whose endpoint is down)."""

    name = "refusing"

    async def write(self, ask, messages, *, context=NO_CONTEXT, deadline=None):
        from fadeway.errors import NoteWriterError

        raise NoteWriterError("the model gave no note")


def test_replay_goes_on_when_the_note_writer_fails_and_the_ask_stays(tmp_path, caplog):
    from importlib import resources

    import fadeway
    from fadeway.replay.lines import read_replay
    from fadeway.replay.runner import replay

    sample = resources.files("fadeway") / "samples" / "quickstart.jsonl"
    lines = list(read_replay(str(sample)))
    with (
        fadeway.open(
            tmp_path / "r.db",
            background=False,
            ceiling=400,
            episode_min_tokens=50,
            episode_max_tokens=200,
        ) as engine,
        caplog.at_level("WARNING", logger="fadeway"),
    ):
        mem = engine.memory(lines[0].memory_id)
        replay(mem, lines, note_writer=_RefusingWriter())
        engine.drain()
        export = mem.export()
    assert len(export.messages) == len(lines)
    assert "the note writer did not answer" in caplog.text
    assert not export.notes and any(e.state == "leaving" for e in export.episodes)


class _WriterBeforeContext(OfflineNoteWriter):
    """A user's writer written before `write` took the context."""

    name = "before-context"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def write(self, ask, messages, *, deadline=None):  # no `context`
        self.calls += 1
        return await super().write(ask, messages, deadline=deadline)


def test_a_writer_without_the_context_argument_still_answers_the_ask(tmp_path):
    from importlib import resources

    import fadeway
    from fadeway.replay.lines import read_replay
    from fadeway.replay.runner import replay

    sample = resources.files("fadeway") / "samples" / "quickstart.jsonl"
    lines = list(read_replay(str(sample)))
    writer = _WriterBeforeContext()
    with fadeway.open(
        tmp_path / "r.db",
        background=False,
        ceiling=400,
        episode_min_tokens=50,
        episode_max_tokens=200,
    ) as engine:
        mem = engine.memory(lines[0].memory_id)
        replay(mem, lines, note_writer=writer)
        engine.drain()
        export = mem.export()
    assert writer.calls > 0
    assert any(n.source == "note-writer:before-context" for n in export.notes)


def test_a_capitalised_first_word_is_a_name_only_when_the_turns_say_so():
    note = write(
        [
            LeavingMessage(
                5,
                "user",
                "Caroline: Yeah, I went to the adoption council meeting with Mel last Friday.",
            ),
            LeavingMessage(5, "assistant", "Melanie: Glad it went well, I know Mel was nervous."),
            LeavingMessage(6, "user", "Caroline: Mel said the agency called on 3 June."),
            LeavingMessage(
                6, "assistant", "Melanie: Last Friday was the pottery class at Clay Works."
            ),
            LeavingMessage(7, "user", "Caroline: Biking sounds like a great way to spend the day."),
        ]
    )
    by_text = {e.note: e for e in note.notes}
    subjects = {e.subject for e in note.notes}
    # Openers that name nothing are never subjects; the speaker stands in for them.
    assert not subjects & {"Yeah", "Glad", "Last", "Last Friday", "Biking"}
    # "Mel" opens a sentence and is capitalised inside others: a name, so the subject.
    mel = next(e for e in note.notes if "agency called" in e.note)
    assert mel.subject == "Mel" and mel.object.startswith("3")
    # "Last" leaves the opening phrase; "Friday" is still a named thing.
    pottery = next(e for e in note.notes if "pottery class" in e.note)
    assert pottery.subject == "Melanie" and pottery.object in {"Friday", "Clay Works"}
    # A sentence that names nothing and is not said of the speaker is no fact.
    assert not any("Biking" in text for text in by_text)


def test_a_capital_where_a_clause_opens_after_a_colon_is_no_name():
    """A record's prose field reads "text: Added the date ...": after a colon a clause opens,
    so its capital says nothing of the word, and "Added" stays what the turns make it, a word
    that opens sentences, never a subject."""
    output = [{"from": "priya.raman", "text": "Added the Oct 14 date to the v4 FAQ today."}]
    note = write(
        [
            LeavingMessage(3, "tool", json.dumps(output), "read_slack"),
            LeavingMessage(
                4,
                "assistant",
                "Added to the decisions log as an internal gate: if LEG-427 isn't approved by "
                "Monday 13 April at 12:00, the Tuesday launch slips.",
            ),
        ]
    )
    gate = next(e for e in note.notes if "internal gate" in e.note)
    assert (gate.subject, gate.object) == ("LEG-427", "13 April")
    assert "Added" not in {e.subject for e in note.notes} | {e.object for e in note.notes}


def test_a_name_spoken_to_is_not_the_object_and_first_person_sentences_stay():
    note = write(
        [
            LeavingMessage(2, "assistant", "Melanie: Wow, Caroline, that sounds awesome!"),
            LeavingMessage(2, "user", "Caroline: I finally finished my first abstract painting."),
            LeavingMessage(3, "user", "Caroline: Thanks Melanie, that means a lot to me."),
        ]
    )
    assert all(e.object not in {"Caroline", "Melanie"} for e in note.notes)
    painting = next(e for e in note.notes if "abstract painting" in e.note)
    assert painting.subject == "Caroline" and painting.object == "first abstract painting"
    assert painting.note == "Caroline: I finally finished my first abstract painting."


# -- an agent's transcript: speakers that are only wire roles ---------------------------------

AGENT = [
    LeavingMessage(4, "user", "Where do the launch numbers stand, and who owns OPS-312?"),
    LeavingMessage(
        4, "tool", '{"signups": 412, "paid": 131, "annual_pct": 42.7}', tool="query_metrics"
    ),
    LeavingMessage(
        4,
        "tool",
        '[{"id": "evt_7Qm2", "title": "Eng standup", "start": "2026-04-08T09:30:00+01:00"}]',
        tool="calendar_events",
    ),
    LeavingMessage(
        4,
        "assistant",
        "Paid: 131 (114 Team, 17 Business), against an average of 41.\n"
        "The longest delay was 39 minutes, from 13:52 to 14:33 UTC.\n"
        "Sent to Jonas and Ben: accept Datadog at $19,200 a year.\n"
        "It peaked at 388Mi against the 512Mi limit on Friday.",
    ),
    LeavingMessage(5, "assistant", "Yes: I booked the refund of INV-20958 with Priya."),
    LeavingMessage(5, "user", "I moved the Q2 budget review to 16 April at 10:00."),
    LeavingMessage(6, "assistant", "The Q2 headcount plan marks REQ-031 as filled."),
    LeavingMessage(6, "assistant", "Lucía starts 18 May on £92k."),
]


def test_a_wire_role_is_never_the_subject():
    note = write(AGENT)
    by_object = {e.object: e for e in note.notes}
    # A label names what its line is about; an opening noun phrase, what its sentence is about.
    # A bare number is no object ("131" would join every fact that holds 131).
    paid = next(e for e in note.notes if e.note.startswith("Paid: 131"))
    assert (paid.subject, paid.object) == ("Paid", "Team")
    assert by_object["39 minutes"].subject == "longest delay"
    # Past an opening verb and a day, the first named thing: never "assistant". An amount keeps
    # its currency, and a date its month: "19,200" or "18" alone would join unrelated facts.
    assert by_object["$19,200"].subject == "Jonas and Ben"
    assert by_object["18 May"].subject == "Lucía"
    # A sentence that names only a quantity and a day is about its noun phrase, written as
    # said: no role's label before it.
    peak = by_object["388Mi"]
    assert (peak.subject, peak.note) == (
        "512Mi limit",
        "It peaked at 388Mi against the 512Mi limit on Friday.",
    )
    # A tool's record without a naming field is about the tool, its number after its field;
    # one with an id, about the id (kept whole, as its timestamp is).
    metrics = next(e for e in note.notes if "412" in e.note)
    assert (metrics.subject, metrics.object, metrics.note) == (
        "query_metrics",
        "signups 412",
        "query_metrics: signups 412, paid 131, annual pct 42.7.",
    )
    standup = next(e for e in note.notes if "Eng standup" in e.note)
    assert standup.subject == "evt_7Qm2"
    # "Yes:" opens one of the assistant's two messages: no speaker's name, and no label.
    refund = next(e for e in note.notes if "INV-20958" in e.note)
    assert (refund.subject, refund.object, refund.note) == (
        "INV-20958",
        "Priya",
        "Yes: I booked the refund of INV-20958 with Priya.",
    )
    # What the user says of themselves is about what it names, not about "user".
    review = next(e for e in note.notes if "budget review" in e.note)
    assert (review.subject, review.object) == ("Q2 budget review", "16 April")
    assert review.note == "I moved the Q2 budget review to 16 April at 10:00."
    assert not any(e.subject in {"assistant", "user", "tool"} for e in note.notes)
    assert not any(e.note.startswith(("assistant:", "user:")) for e in note.notes)
    # A question tells no fact.
    assert not any(e.note.endswith("?") for e in note.notes)
    # The object is never a part of the subject.
    plan = next(e for e in note.notes if "headcount" in e.note)
    assert (plan.subject, plan.object) == ("Q2 headcount plan", "REQ-031")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant", "tool", "Caroline"]),
            st.text(st.characters(codec="utf-8"), max_size=160)
            | st.sampled_from([t.text for t in AGENT + TURNS]),
        ),
        max_size=6,
    )
)
def test_every_subject_and_object_is_written_in_its_note_and_apart(said):
    messages = [
        LeavingMessage(i, role, text, tool="lookup" if role == "tool" else "")
        for i, (role, text) in enumerate(said)
    ]
    for entry in write(messages).notes:
        assert entry.subject in entry.note and entry.object in entry.note
        assert entry.object not in entry.subject or not entry.note  # "": nothing kept


def test_leaving_messages_name_the_tool_each_output_answers():
    from fadeway.notes.writers import leaving_messages
    from fadeway.records import MessageRecord
    from fadeway.wire import Format

    CHAT, RESPONSES = Format.CHAT_COMPLETIONS, Format.RESPONSES

    def record(seq, role, body, answers=None):
        return MessageRecord(
            seq=seq,
            turn=1,
            at=0.0,
            role=role,
            kind="message",
            side="assistant",
            source="request",
            tokens=1,
            digest=b"",
            answers=answers,
            body=json.dumps(body).encode(),
        )

    chat = [
        record(
            0,
            "assistant",
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read_doc", "arguments": "{}"},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "query_metrics", "arguments": "{}"},
                    },
                ],
            },
        ),
        record(1, "tool", {"role": "tool", "tool_call_id": "c2", "content": "paid 131"}, "c2"),
        record(2, "tool", {"role": "tool", "tool_call_id": "c9", "content": "gone"}, "c9"),
    ]
    responses = [
        record(
            0,
            "assistant",
            {
                "type": "function_call",
                "call_id": "r1",
                "name": "calendar_events",
                "arguments": "{}",
            },
        ),
        record(
            1,
            "tool",
            {"type": "function_call_output", "call_id": "r1", "output": "Eng standup"},
            "r1",
        ),
    ]
    assert [(m.role, m.tool, m.text) for m in leaving_messages(chat, CHAT)[1:]] == [
        ("tool", "query_metrics", "paid 131"),
        ("tool", "", "gone"),
    ]  # its call left earlier
    assert leaving_messages(responses, RESPONSES)[1].tool == "calendar_events"
    assert leaving_messages(chat, CHAT)[0].tool == ""


def test_each_speaker_of_a_group_chat_is_the_subject_of_what_they_say_of_themselves():
    """Several names open one role's messages (a group chat mapped to "user"): each is a
    speaker, also for a message's later sentences, which carry no prefix of their own."""
    note = write(
        [
            LeavingMessage(
                1, "user", "Alice: The offsite moved to Lisbon. I booked the venue there."
            ),
            LeavingMessage(1, "user", "Bob: The flights are with TAP. I paid the 400 EUR deposit."),
            LeavingMessage(2, "user", "Alice: I will send the agenda to Priya."),
            LeavingMessage(2, "user", "Bob: I asked Dana about the hotel in Alfama."),
        ]
    )
    by_text = {e.note: e for e in note.notes}
    assert by_text["Alice: I booked the venue there."].subject == "Alice"
    assert by_text["Bob: I paid the 400 EUR deposit."].subject == "Bob"
    assert not any(e.subject == "user" for e in note.notes)
