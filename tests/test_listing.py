"""What a store and a memory list for their users: `engine.memories()` (every memory with its
counts and last activity) and `mem.facts()` (the facts the knowledge graph holds now)."""

from __future__ import annotations

import asyncio

import fadeway
from helpers import converse_with_notes
from test_graph import FIRST, SECOND


def _say(mem, clock, *texts: str) -> None:
    history = []
    for text in texts:
        clock.advance(60)
        history.append({"role": "user", "content": text})
        mem.decorate({"model": "gpt-4.1", "messages": history})


def test_facts_lists_the_held_facts_under_canonical_names(small, clock):
    mem = small.memory("pricing")
    converse_with_notes(small, mem, clock, [FIRST, SECOND])
    written = {f.text: f for f in mem.export().facts}
    held = mem.facts()
    assert all(isinstance(f, fadeway.HeldFact) for f in held)
    # Oldest first; the launch date moved (the older fact retired), two restatements merged
    # into the facts they restate, and the unrelated fact taken in as written.
    assert [f.text for f in held] == [
        FIRST[0][0],
        FIRST[2][0],
        SECOND[1][0],
        SECOND[3][0],
    ]
    assert [f.n for f in held] == sorted(f.n for f in held)
    by_text = {f.text: f for f in held}
    restated = by_text[FIRST[0][0]]
    assert (restated.subject, restated.object) == ("pricing page copy v3", "refund line")
    assert restated.at == written[FIRST[0][0]].at
    assert restated.restated_at == written[SECOND[2][0]].at > restated.at
    approved = by_text[FIRST[2][0]]
    assert (approved.subject, approved.object, approved.milestone) == (
        "user",
        "pricing page copy v3",
        True,
    )
    assert by_text[SECOND[1][0]].restated_at is None
    assert by_text[SECOND[3][0]].at == written[SECOND[3][0]].at
    assert FIRST[1][0] not in by_text  # retired by the later launch date: not held
    assert asyncio.run(mem.afacts()) == held


def test_facts_and_memories_keep_memories_apart(small, clock):
    pricing = small.memory("pricing")
    converse_with_notes(small, pricing, clock, [FIRST])
    other = small.memory("other")
    converse_with_notes(small, other, clock, [SECOND[3:]])
    assert [f.text for f in other.facts()] == [SECOND[3][0]]
    assert {f.text for f in pricing.facts()} == {text for text, *_ in FIRST}
    assert small.memory("never-written").facts() == []


def test_memories_lists_every_memory_by_id_with_its_counts(tmp_path, clock):
    with fadeway.open(tmp_path / "m.db", clock=clock, background=False) as engine:
        assert engine.memories() == []
        _say(engine.memory("zeta"), clock, "one", "two", "three")
        _say(engine.memory("alpha"), clock, "only")
        later = clock()
        listed = engine.memories()
        assert [m.memory_id for m in listed] == ["alpha", "zeta"]  # by id
        alpha, zeta = listed
        assert isinstance(alpha, fadeway.MemoryInfo)
        assert (alpha.messages, alpha.turns, alpha.episodes) == (1, 1, 0)
        assert (zeta.messages, zeta.turns) == (3, 3)
        assert alpha.last_at == later and zeta.last_at == later - 60
        assert zeta.created_at == later - 180 and zeta.format == "chat_completions"
        assert asyncio.run(engine.amemories()) == listed


def test_memories_counts_episodes_as_the_memory_holds_them(small, clock):
    mem = small.memory("pricing")
    converse_with_notes(small, mem, clock, [FIRST])
    [info] = small.memories()
    messages = mem.messages()
    assert info.messages == len(messages) and info.last_at == messages[-1].at
    assert info.turns == messages[-1].turn
    assert info.episodes == len(mem.episodes()) > 0
