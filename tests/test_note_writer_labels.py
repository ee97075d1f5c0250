"""The offline note writer's subjects and objects against hand labels (benches/labels/,
benches/offline_judgments.py), with floors a little under what it measures, and what it never
takes for an entity.

The LoCoMo labels are references into shared/data/locomo (CC BY-NC 4.0, never copied here):
without the file those floors are skipped. The agent-sample part quotes the bundled sample and
always runs."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from fadeway.notes.writers import LeavingMessage, OfflineNoteWriter
from fadeway.notes.writers.base import WIRE_ROLES
from helpers import shared_data

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))

import offline_judgments as bench  # noqa: E402
from offline_labels import Agent, Locomo, contains, exact  # noqa: E402


def accuracy(sentences, match, side):
    return sum(
        match(getattr(s.fact, side) if s.fact else None, getattr(s, side)) for s in sentences
    ) / len(sentences)


@pytest.fixture(scope="module")
def agent():
    return Agent()


def test_subjects_and_objects_on_locomo():
    path = shared_data("locomo/locomo10.json")
    if path is None:
        pytest.skip("LoCoMo is not in shared/data ($FADEWAY_SHARED_DATA): its label floors skip")
    _, _, sentences = bench.locomo_sets(Locomo.from_path(path))
    # Measured: subject .91 exact; object .74 exact, .79 contained.
    assert accuracy(sentences, exact, "subject") >= 0.88
    assert accuracy(sentences, exact, "object") >= 0.70
    assert accuracy(sentences, contains, "object") >= 0.75


def test_subjects_and_objects_on_the_agent_sample(agent):
    _, _, sentences = bench.agent_sets(agent)
    # Measured: subject .96 exact, .98 contained; object .65 exact, .76 contained.
    assert accuracy(sentences, exact, "subject") >= 0.9
    assert accuracy(sentences, contains, "subject") >= 0.95
    assert accuracy(sentences, exact, "object") >= 0.6
    assert accuracy(sentences, contains, "object") >= 0.7


def test_no_fact_of_the_agent_sample_is_about_a_role_a_day_or_a_bare_number(agent):
    every = [m.text for messages in agent.days.values() for m in messages]
    notes = {day: agent.facts(day) for day in agent.days}
    lines = bench.entity_audit(notes, {day: every for day in agent.days})
    shares = {line.split(":")[0].lstrip("- "): line for line in lines[1:]}
    assert "a role's label opens 0 " in lines[0]
    assert shares["calendar word"].startswith("- calendar word: 0 ")
    facts = [e for entries in notes.values() for e in entries]
    # No fact's entity is a wire role; a number on its own is rare (was 27% of the facts).
    assert not any(name.lower() in WIRE_ROLES for e in facts for name in (e.subject, e.object))
    bare = sum("bare number" == bench.no_entity(e.object, set(), set()) for e in facts)
    assert bare <= 0.01 * len(facts)


def write(messages):
    return asyncio.run(OfflineNoteWriter().write("ask", messages)).notes


def test_a_weekday_or_a_role_is_never_an_entity():
    notes = write(
        [
            LeavingMessage(1, "user", "Can you check the rollout? Thursdays are busy for us."),
            LeavingMessage(
                1,
                "assistant",
                "The full path: 10% Tuesday 17:00, 50% Wednesday 09:00, 100% this morning.\n"
                "58 signups between 10:00 and 11:00, against an average of 21 on Thursdays.\n"
                "Last Friday I sent the figures to Priya.",
            ),
            LeavingMessage(2, "user", "I moved the budget review to 16 April at 10:00."),
        ]
    )
    names = {name for e in notes for name in (e.subject, e.object)}
    assert not names & {"assistant", "user", "Tuesday", "Wednesday", "Thursdays", "Friday"}
    assert not any(n.isdigit() or ":" in n for n in names)  # "58", "10:00"
    assert not any(e.note.startswith(("assistant:", "user:")) for e in notes)
    by_text = {e.note: e for e in notes}
    assert by_text["The full path: 10% Tuesday 17:00, 50% Wednesday 09:00, 100% this morning."]
    assert (by_text["I moved the budget review to 16 April at 10:00."].subject) == "budget review"
    signups = next(e for e in notes if e.note.startswith("58 signups"))
    assert signups.subject == "58 signups"


def test_an_instruction_a_question_and_a_name_spoken_to_name_nothing():
    notes = write(
        [
            LeavingMessage(1, "user", "Ines: Guess what - I adopted a kitten three days ago!"),
            LeavingMessage(1, "assistant", "Ravi: By the way, I saw a jazz concert."),
            LeavingMessage(2, "user", "Ines: Did you join the Lisbon climbing club?"),
            LeavingMessage(2, "assistant", "Ravi: Take a look at the mug I glazed in class."),
        ]
    )
    names = {name for e in notes for name in (e.subject, e.object)}
    assert not names & {"Guess", "By", "Take", "way"}
    assert not any(e.note.endswith("?") for e in notes)
    kitten = next(e for e in notes if "kitten" in e.note)
    assert (kitten.subject, kitten.object) == ("Ines", "kitten")
    concert = next(e for e in notes if "concert" in e.note)
    assert (concert.subject, concert.object) == ("Ravi", "jazz concert")


def test_a_name_takes_in_the_noun_it_opens_and_a_possessive_its_owner():
    notes = write(
        [
            LeavingMessage(1, "user", "Ines: I went to a Lisbon climbing club yesterday."),
            LeavingMessage(1, "assistant", "Ravi: My sister loves Biscuit's new harness!"),
            LeavingMessage(2, "user", "Ines: Last week I climbed 40 routes in the gym."),
        ]
    )
    objects = {e.object for e in notes}
    assert "Lisbon climbing club" in objects  # not "Lisbon", and not "... yesterday"
    assert "40 routes" in objects  # a count keeps its noun
    assert "Biscuit" in objects and "Biscuit's" not in objects
