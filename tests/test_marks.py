"""How far a memory's append-only tables reach (`Transaction.marks`), and the syncs that read a
table only when it grew past what they hold: the same caches and indexes as reading every
table, and no table read when nothing changed."""

from __future__ import annotations

import pytest

import fadeway
from fadeway.mirror.facts import MemoryCache
from fadeway.records import EdgeRecord, FactRecord, Marks, NoteRecord, RetirementRecord
from helpers import NOTE_ASKING, converse_with_notes, talk

NOTES = [
    [
        ("Dana owns the checkout migration.", "Dana", "checkout migration", False),
        ("Legal reviews every refund term.", "legal", "refund term", False),
    ],
    [("Dana moved the checkout migration to May.", "Dana", "checkout migration", False)],
]
#: The reads a sync may skip: every append-only table's, and the look for a pending graph job.
TABLE_READS = (
    *("facts", "entities", "edges", "retirements", "episodes", "acks", "passages"),
    "pending_job",
)


class _Counting:
    """A transaction whose table reads are counted by name."""

    def __init__(self, tx) -> None:
        self._tx, self.reads = tx, []

    def graph_rows(self, past):  # the tables it names, read in one go
        self.reads.extend(past)
        return self._tx.graph_rows(past)

    def __getattr__(self, name):
        if name in (*TABLE_READS, "vectors"):
            self.reads.append(name)
        return getattr(self._tx, name)


def _opened(db, clock):
    return fadeway.open(db, clock=clock, background=False, **NOTE_ASKING)


@pytest.mark.both_stores
def test_marks_are_how_far_each_table_reaches(db, clock):
    with _opened(db, clock) as eng:
        mem = eng.memory("m")
        with eng.store.read("m") as tx:
            empty = dict.fromkeys(Marks.__struct_fields__, 0) | {"graph_job": None}
            assert tx.marks(eng.embedder.name) == Marks(**empty)
        converse_with_notes(eng, mem, clock, NOTES)
        talk(eng, "other", clock, 6)  # another memory's rows never count
        with eng.store.read("m") as tx:
            marks = tx.marks(eng.embedder.name)
            assert marks == Marks(
                facts=max(f.n for f in tx.facts()),
                entities=max(e.n for e in tx.entities()),
                edges=max(e.fact for e in tx.edges()),
                retirements=len(tx.retirements()),
                episodes=max(e.n for e in tx.episodes()),
                acks=max(note for _, note in tx.acks()),
                passages=max(p.n for p in tx.passages()),
                fact_vectors=max(n for n, _ in tx.vectors("fact", eng.embedder.name)),
                passage_vectors=max(n for n, _ in tx.vectors("passage", eng.embedder.name)),
            )
            assert min(marks.facts, marks.entities, marks.passages) > 0
            assert tx.marks("another embedder").fact_vectors == 0
        with eng.store.write("m") as tx:  # graph jobs queued: the oldest pending one is marked
            tx.enqueue("graph", b'{"note": 7}', clock.now)
            tx.enqueue("graph", b'{"note": 8}', clock.now)
        with eng.store.write("other") as tx:  # another memory's jobs never count
            tx.enqueue("graph", b'{"note": 1}', clock.now)
        with eng.store.read("m") as tx:
            assert tx.marks(eng.embedder.name).graph_job == tx.pending_job("graph").payload
            assert tx.marks(eng.embedder.name).graph_job == b'{"note": 7}'


@pytest.mark.both_stores
def test_a_sync_given_the_marks_reads_only_what_grew(db, clock):
    with _opened(db, clock) as eng:
        mem = eng.memory("m")
        converse_with_notes(eng, mem, clock, NOTES[:1])
        marked, plain = MemoryCache(), MemoryCache()
        with eng.store.read("m") as tx:
            marked.sync(tx, tx.marks(eng.embedder.name))
            plain.sync(tx)
            counted = _Counting(tx)
            marked.sync(counted, tx.marks(eng.embedder.name))
            assert counted.reads == []  # nothing changed: no table read
        with eng.store.write("m") as tx:  # a note more: a fact, its edge, a retirement
            fact = tx.fact_count() + 1
            note = max(note for _, note in tx.acks()) + 1
            entity = max(e.n for e in tx.entities())
            tx.insert_note(
                NoteRecord(n=note, at=clock.now, call_id=None, source="model", arguments="{}"),
                [
                    FactRecord(
                        n=fact,
                        note=note,
                        text=NOTES[1][0][0],
                        subject="Dana",
                        object="checkout migration",
                        milestone=False,
                        at=clock.now,
                    )
                ],
                [max(e.n for e in tx.episodes())],
            )
            tx.insert_graph(
                [],
                [],
                [
                    EdgeRecord(
                        fact=fact, subject=entity, object=entity, merged_into=None, at=clock.now
                    )
                ],
                [RetirementRecord(fact=1, by=fact, at=clock.now)],
            )
        with eng.store.read("m") as tx:
            counted = _Counting(tx)
            marked.sync(counted, tx.marks(eng.embedder.name))
            plain.sync(tx)
            assert {"facts", "acks", "edges", "retirements"} <= set(counted.reads)
            assert "passages" not in counted.reads and "entities" not in counted.reads
            assert marked.position() == plain.position()
            assert marked.facts == plain.facts and marked.episodes == plain.episodes
            assert marked.acks == plain.acks and marked.graph.edges == plain.graph.edges
            assert marked.retirements == plain.retirements

        # The memory's indexes, synced by recall with the marks, search what the store holds.
        index = eng.services.indexes.get("m")
        with eng.store.read("m") as tx:
            index.sync(tx)
            assert index.through == {"fact": tx.fact_count(), "passage": tx.passage_count()}
            assert len(index.meaning["fact"]) == len(tx.vectors("fact", eng.embedder.name))
            counted = _Counting(tx)
            index.sync(counted)
            assert counted.reads == []
