"""Decorate reads a memory's facts, graph and acknowledgements from a cache kept in step with the
store (`MemoryCache`), not from the store whole on every call: the same facts, and the cache
rolled back with the transaction that moved it."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fadeway
from fadeway.forgetting.facts_block import facts_of
from fadeway.graph.held import Graph
from fadeway.mirror.facts import MemoryCache
from fadeway.records import (
    EdgeRecord,
    EntityRecord,
    EpisodeRecord,
    FactRecord,
    GraphRows,
    JobKind,
    JobRecord,
    RetirementRecord,
)
from helpers import NOTE_ASKING, chat_reply
from reference import facts_of_reference

STATES = ("live", "leaving", "sealed", "forgotten")


class Lists:
    """The reads a cache's sync makes, over lists standing for the store."""

    def __init__(self, facts, acks, edges, retirements, entities, awaiting=None):
        self._facts, self._acks, self._edges = facts, acks, edges
        self._retirements, self._entities = retirements, entities
        self._awaiting = awaiting  # the note of the oldest pending graph job

    def pending_job(self, kind=None):
        if self._awaiting is None or kind != JobKind.GRAPH:
            return None
        return JobRecord(n=1, kind=kind, payload=b'{"note": %d}' % self._awaiting, created_at=0.0)

    def facts(self, after=0):
        return [f for f in self._facts if f.n > after]

    def acks(self, after_note=0):
        return [a for a in self._acks if a[1] > after_note]

    def edges(self, after=0):
        return [e for e in self._edges if e.fact > after]

    def entities(self, after=0):
        return [e for e in self._entities if e.n > after]

    def retirements(self):
        return list(self._retirements)

    def episodes(self, after=0):
        return []

    def graph_rows(self, past):
        read = {
            table: getattr(self, table)(*([] if table == "retirements" else [n]))
            for table, n in past.items()
        }
        return GraphRows(**read)


@st.composite
def memories(draw):
    """Episodes in any state, notes acknowledging some of them, facts in the notes, and a graph
    that merges some facts into earlier ones and retires others."""
    episodes = [
        EpisodeRecord(
            n=n,
            first_seq=n,
            last_seq=n,
            first_turn=n,
            last_turn=n,
            start_at=0.0,
            end_at=0.0,
            tokens=1,
            cut_at=0.0,
            state=draw(st.sampled_from(STATES)),
        )
        for n in range(1, draw(st.integers(0, 8)) + 1)
    ]
    notes = draw(st.integers(0, 6))
    acks = sorted(
        {
            (e, note)
            for note in range(1, notes + 1)
            for e in draw(st.lists(st.integers(1, max(1, len(episodes))), max_size=3))
        },
        key=lambda a: (a[1], a[0]),
    )
    facts, n = [], 0
    for note in range(1, notes + 1):
        for _ in range(draw(st.integers(0, 3))):
            n += 1
            facts.append(
                FactRecord(
                    n=n,
                    note=note,
                    text=f"fact {n}",
                    subject="s",
                    object="o",
                    milestone=False,
                    at=0.0,
                )
            )
    edges = [
        EdgeRecord(
            fact=f.n,
            subject=1,
            object=1,
            at=0.0,
            merged_into=draw(st.none() | st.integers(1, f.n - 1)) if f.n > 1 else None,
        )
        for f in facts
    ]
    held = [e.fact for e in edges if e.merged_into is None]
    retired = draw(st.lists(st.sampled_from(held), unique=True)) if held else []
    retirements = [RetirementRecord(fact=f, by=f, at=0.0) for f in retired]
    return episodes, facts, acks, edges, retirements


@settings(max_examples=300, deadline=None)
@given(
    memories(),
    st.lists(st.sampled_from(STATES), min_size=1, unique=True),
    st.booleans(),
    st.none() | st.integers(1, 7),
)
def test_facts_of_from_the_cache_are_the_stores(memory, states, with_graph, awaiting):
    """With the graph, facts are held facts, retired ones and those of notes whose graph job
    is pending (from `awaiting` on) left out."""
    episodes, facts, acks, edges, retirements = memory
    entities = [EntityRecord(n=1, name="one", at=0.0)]
    cache = MemoryCache()
    cache.sync(Lists(facts, acks, edges, retirements, entities, awaiting))
    assert cache.awaiting == awaiting
    graph = Graph(entities, [], edges, retirements) if with_graph else None
    got = facts_of(
        episodes,
        cache.facts,
        cache.episode_facts,
        tuple(states),
        graph=cache.graph if with_graph else None,
        awaiting=cache.awaiting,
    )
    want = facts_of_reference(episodes, facts, acks, tuple(states), graph, awaiting)
    # An episode whose notes hold no fact may be left out, or given none.
    assert {e: fs for e, fs in got.items() if fs} == {e: fs for e, fs in want.items() if fs}


def _note(call_id, text):
    return {
        "id": call_id,
        "type": "function",
        "function": {
            "name": "note",
            "arguments": (
                f'{{"notes": [{{"note": "{text}", "subject": "LEG-412", "object": "legal", '
                '"milestone": false}]}'
            ),
        },
    }


@pytest.fixture
def engine(tmp_path, clock):
    eng = fadeway.open(tmp_path / "m.db", clock=clock, background=False, **NOTE_ASKING)
    yield eng
    eng.close()


def test_decorate_keeps_its_cache_in_step_and_rolls_it_back(engine, clock):
    mem = engine.memory("m")
    history: list = []
    for t in range(40):
        clock.advance(60)
        history.append(
            {"role": "user", "content": f"Turn {t}: " + " ".join(f"w{t}_{i}" for i in range(40))}
        )
        request = mem.decorate({"model": "gpt-4.1", "messages": history})
        if any(tool["function"]["name"] == "note" for tool in request.get("tools", [])):
            reply = chat_reply(
                f"answer {t}", tool_calls=[_note(f"note_{t}", f"LEG-412 went to legal at turn {t}")]
            )
        else:
            reply = chat_reply(f"Answer {t}: " + " ".join(f"r{t}_{i}" for i in range(30)))
        mem.report(request, reply)
        history.append(reply["choices"][0]["message"])
        engine.drain()
    # The cache is brought up to the store by decorate (a note taken by report waits for it).
    mem.decorate({"model": "gpt-4.1", "messages": history})
    cache = engine.services.mirrors.peek("m").cache
    with engine.store.read("m") as tx:
        fresh = MemoryCache()
        fresh.sync(tx)
        assert tx.facts() and fresh.graph.edges, "no note was ever taken into the graph"
    assert cache.facts == fresh.facts and cache.acks == fresh.acks
    assert cache.episode_facts == fresh.episode_facts
    assert cache.graph.edges == fresh.graph.edges and cache.graph.retired == fresh.graph.retired
    # A write that rolls back after the cache read what it wrote: the cache starts over.
    mark = engine.services.mirrors.peek("m").mark()
    with pytest.raises(RuntimeError):
        with engine.store.write("m") as tx:
            note = tx.notes()[-1]
            tx.insert_note(
                note.__class__(
                    n=note.n + 1, at=note.at, call_id=None, source="test", arguments="{}"
                ),
                [
                    FactRecord(
                        n=tx.fact_count() + 1,
                        note=note.n + 1,
                        text="rolled back",
                        subject="a",
                        object="b",
                        milestone=False,
                        at=0.0,
                    )
                ],
                [],
            )
            cache.sync(tx)
            assert any(f.text == "rolled back" for f in cache.facts.values())
            raise RuntimeError("the write failed")
    engine.services.mirrors.peek("m").roll_back(mark)
    assert engine.services.mirrors.peek("m").cache is not cache
    with engine.store.read("m") as tx:
        engine.services.mirrors.peek("m").cache.sync(tx)
    assert engine.services.mirrors.peek("m").cache.facts == fresh.facts


def _restatements_reference(graph, facts):
    """Each held fact -> its newest statement, the fact itself or one merged into it, read from
    the graph whole (as recall read it on every call before the cache kept it)."""
    latest = {}
    for fact, edge in graph.edges.items():
        if edge.merged_into is None or fact not in facts:
            continue
        root = graph.root(fact)
        best = latest.get(root, root)
        if best not in facts or (facts[fact].at, fact) > (facts[best].at, best):
            latest[root] = fact
    return latest


def _merged_reference(graph):
    merged = {}
    for fact in sorted(graph.edges):
        if graph.edges[fact].merged_into is not None:
            merged.setdefault(graph.root(fact), []).append(fact)
    return merged


@settings(max_examples=200, deadline=None)
@given(memories(), st.integers(0, 20))
def test_the_caches_read_of_the_graph_follow_every_sync(memory, cut):
    """What the cache keeps per graph (each fact's latest restatement, the facts merged into
    each) is read again once a sync brings new facts or edges, never a graph's before."""
    _, facts, acks, edges, retirements = memory
    facts = [msgspec.structs.replace(f, at=float(f.n % 3)) for f in facts]  # ties, and order
    cache = MemoryCache()
    entities = [EntityRecord(n=1, name="s", at=0.0)]
    for upto in (cut, len(facts)):
        seen = {f.n for f in facts[:upto]}
        cache.sync(
            Lists(
                facts[:upto],
                [a for a in acks if a[1] <= max((f.note for f in facts[:upto]), default=0)],
                [e for e in edges if e.fact in seen],
                [r for r in retirements if r.fact in seen],
                entities,
            )
        )
        graph, held = cache.graph, cache.facts
        assert cache.restatements(graph, held) == _restatements_reference(graph, held)
        assert cache.merged(graph) == _merged_reference(graph)
        assert cache.restatements(graph, held) is cache.restatements(graph, held)  # kept
