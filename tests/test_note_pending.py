"""The ceiling while a note writer's note is pending (issue 29): the lane answers the ask later,
or its writer is down, and every request still fits under the ceiling; nothing is lost, and
the notes land once the writer answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec
import pytest

from conftest import SMALL_CEILING as CEILING
from conftest import open_small
from fadeway.errors import NoteWriterError
from fadeway.notes.tool import Note, NoteEntry
from fadeway.notes.writers import NoteWriter
from helpers import call, chat_reply

TURNS = 200


class _Writer(NoteWriter):
    """A note writer that refuses while its endpoint is down, else notes one fact naming the
    turns it was asked about (the first and last leaving turn), as few facts keep the graph's
    work small."""

    name = "scripted"

    def __init__(self) -> None:
        self.up = True
        self.notes = 0

    async def write(self, ask, messages, *, deadline=None) -> Note:
        if not self.up:
            raise NoteWriterError("the endpoint refused")
        self.notes += 1
        first, last = messages[0].turn, messages[-1].turn
        fact = f"Turns {first} to {last} were noted as note {self.notes}."
        return Note([NoteEntry(fact, f"turn {first}", f"turn {last}", False)])


def _user(t: int) -> dict:
    return {"role": "user", "content": f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(40))}


def _reply(t: int) -> dict:
    return chat_reply(f"answer {t} " + " ".join(f"r{t}_{i}" for i in range(30)))


#: When the lane runs after turn t, and whether the writer's endpoint answers then.
Schedule = Callable[[int], tuple[bool, bool]]

SCHEDULES: dict[str, Schedule] = {
    "drained promptly": lambda t: (True, True),
    "stepped every 9 turns": lambda t: (t % 9 == 8, True),
    "writer down for 150 turns": lambda t: (True, t >= 150),
}


@pytest.mark.parametrize("schedule", list(SCHEDULES.values()), ids=list(SCHEDULES))
def test_a_request_with_a_pending_note_never_exceeds_the_ceiling(tmp_path, clock, schedule):
    """A 200-turn conversation with a note writer whose notes come late: every request fits
    under the ceiling, pending note or not; every message stays stored; once the writer
    answers, every episode that left has its note and the facts stand in the facts block."""
    writer = _Writer()
    eng = open_small(tmp_path / "p.db", clock, note_writer=writer)
    mem = eng.memory("m")
    history: list = []
    sizes, pending, shown = [], 0, []
    for t in range(TURNS):
        clock.advance(60)
        history.append(_user(t))
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        sizes.append(mem.measure(req))
        shown.append("were noted as note" in str(req["messages"][0]["content"]))
        pending += any(e.state == "leaving" for e in mem.episodes())
        mem.report(req, _reply(t))
        history.append(_reply(t)["choices"][0]["message"])
        drains, writer.up = schedule(t)
        if drains:
            eng.drain()
    over = [(t, size) for t, size in enumerate(sizes) if size > CEILING]
    assert not over, f"requests over the {CEILING}-token ceiling: {over}"
    assert pending >= 20, "the notes were never pending long enough to test anything"
    writer.up = True
    eng.drain()
    clock.advance(60)
    history.append(_user(TURNS))
    req = mem.decorate({"model": "gpt-4.1", "messages": history})
    assert mem.measure(req) <= CEILING
    eng.drain()  # the note of what this request's own fade sent leaving
    doc = mem.export()
    assert len(doc.messages) == len(history)  # nothing deleted
    acked = {episode for episode, _ in doc.acks}
    left = {e.n for e in doc.episodes if e.state != "live"}
    assert left and left <= acked, "every episode that left has its note (leaving: to seal)"
    # A fade that sends turns leaving may forget every sealed episode with them, and a lane
    # stepped every 9 turns seals late, so not every request has facts in its block.
    assert sum(shown[-40:]) >= 10, "the notes' facts stand in the facts block"
    eng.close()


def test_a_writer_that_stays_down_leaves_one_note_job_waiting(tmp_path, clock):
    """While the writer refuses, each call's note job supersedes the parked one (a note job
    carries nothing): one job waits at a time, not one a call, and once the writer answers
    the next call's job takes the note."""
    writer = _Writer()
    writer.up = False
    eng = open_small(tmp_path / "d.db", clock, note_writer=writer)
    mem = eng.memory("m")
    history: list = []
    waiting, parked = [], 0
    for t in range(60):
        clock.advance(60)
        history.append(_user(t))
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        mem.report(req, _reply(t))
        history.append(_reply(t)["choices"][0]["message"])
        eng.drain()
        with eng.store.read("m") as tx:
            jobs = [j for j in tx.jobs() if j.kind == "note"]
        waiting.append(sum(j.state != "done" for j in jobs))
        parked = max(parked, sum(j.state == "failed" for j in jobs))
    superseded = [j for j in jobs if j.state == "done" and (j.error or "").startswith("supersed")]
    assert max(waiting) == 1 and parked == 1, waiting
    assert len(superseded) >= 10, "the writer was never asked often enough to test anything"
    assert "the endpoint refused" in superseded[-1].error  # the cause stays readable
    writer.up = True
    clock.advance(60)
    history.append(_user(60))
    mem.decorate({"model": "gpt-4.1", "messages": history})
    eng.drain()
    assert writer.notes >= 1
    doc = mem.export()
    left = {e.n for e in doc.episodes if e.state != "live"}
    assert left and left <= {episode for episode, _ in doc.acks}, "every one that left is noted"
    eng.close()


def test_the_writers_pending_turns_leave_the_view_and_come_back_as_facts(tmp_path, clock):
    """While the writer's note is pending its turns are out of view (the writer reads them
    from the store); when it lands they seal and their fact takes their place."""
    writer = _Writer()
    eng = open_small(tmp_path / "v.db", clock, note_writer=writer)
    mem = eng.memory("m")
    history: list = []
    for t in range(40):
        clock.advance(60)
        history.append(_user(t))
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        if any(e.state == "leaving" for e in mem.episodes()):
            break
        mem.report(req, _reply(t))
        history.append(_reply(t)["choices"][0]["message"])
    else:
        pytest.fail("nothing ever faded")
    leaving = [e for e in mem.episodes() if e.state == "leaving"]
    sent = "\n".join(str(m.get("content")) for m in req["messages"])
    assert "Recorded facts" not in sent
    stored = mem.messages()
    for e in leaving:
        for m in stored[e.first_seq : e.last_seq + 1]:
            text = msgspec.json.decode(m.body)["content"]
            assert text not in sent, f"episode {e.n} is still in view"
    assert not any(t.get("function", {}).get("name") == "note" for t in req.get("tools") or [])
    mem.report(req, _reply(t))
    history.append(_reply(t)["choices"][0]["message"])
    eng.drain()
    clock.advance(60)
    history.append(_user(t + 1))
    req = mem.decorate({"model": "gpt-4.1", "messages": history})
    assert {e.n: e.state for e in mem.episodes() if e.n in {x.n for x in leaving}} == {
        e.n: "sealed" for e in leaving
    }
    assert f"Turns {leaving[0].first_turn} to" in req["messages"][0]["content"]
    eng.close()


def test_the_writers_pending_turns_are_searched_while_out_of_view(tmp_path, clock):
    """With the writer down, its note stays pending and the leaving turns stay out of view;
    they are cut into passages all the same, so recall finds them meanwhile."""
    writer = _Writer()
    writer.up = False
    eng = open_small(tmp_path / "s.db", clock, note_writer=writer)
    mem = eng.memory("m")
    history: list = []
    for t in range(40):
        clock.advance(60)
        history.append(_user(t))
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        mem.report(req, _reply(t))
        history.append(_reply(t)["choices"][0]["message"])
        eng.drain()
        if any(e.state == "leaving" for e in mem.episodes()):
            break
    else:
        pytest.fail("nothing ever faded")
    leaving = [e for e in mem.episodes() if e.state == "leaving"]
    assert writer.notes == 0
    turn = leaving[0].first_turn
    hits = mem.search(f"w{turn}_7 w{turn}_8", kind="passage", k=3)
    assert hits and f"w{turn}_7" in hits[0].text
    assert {e.state for e in mem.episodes() if e.n == leaving[0].n} == {"leaving"}
    eng.close()


def test_a_request_over_the_ceiling_is_logged_once_with_its_figures(tmp_path, clock, caplog):
    """A turn in progress larger than the ceiling cannot fit, whatever forgetting does: the
    first request over it logs why, with its size and what was in view; the turn's next calls,
    over for the same reason, log nothing more."""
    eng = open_small(tmp_path / "o.db", clock, note_writer=_Writer())
    mem = eng.memory("m")
    huge = {"role": "user", "content": " ".join(f"word{i}" for i in range(4 * CEILING))}
    history: list = [huge]
    caplog.set_level(logging.WARNING, logger="fadeway")
    sizes = []
    for step in range(3):
        clock.advance(30)
        req = mem.decorate({"model": "gpt-4.1", "messages": history})
        sizes.append(mem.measure(req))
        reply = chat_reply(None, tool_calls=[call(f"c{step}")])
        mem.report(req, reply)
        history += [
            reply["choices"][0]["message"],
            {"role": "tool", "tool_call_id": f"c{step}", "content": "done"},
        ]
    assert all(size > CEILING for size in sizes)
    warned = [r.message for r in caplog.records if "over the" in r.message]
    assert len(warned) == 1, warned
    [line] = warned
    assert f"stands at {sizes[0]} tokens, over the {CEILING}-token ceiling" in line
    assert "the turn in progress alone does not fit" in line
    assert "in view 1 messages of turns 1 to 1" in line
    eng.close()
