"""The memory's knowledge graph (MECHANISM: "The note ask and sealing").

Each fact is one edge between its subject and object entities. The same entity under different
names becomes one node: a name is matched by its normal form against every name already used,
then by embedding similarity to each entity's canonical name, confirmed by the judge; every
surface name stays recorded as an alias. A restated fact merges with the one already held (the
held fact stands for both; both notes and times stay recorded), and a newer fact that
contradicts a held one retires it (kept, marked retired with the time and the fact that retired
it). Candidate pairs come from the graph (facts sharing an entity) and BM25 over held facts;
the judge decides.

`plan_graph` decides a note's additions (slow: judge and embedder calls, from a snapshot of
`graph.held.Graph`) and `GraphJob` runs it in the lane, after the note is taken.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from .. import _constants as C
from .._core import Bm25Index
from ..embed.base import Embedder
from ..judge.base import FactText, Judge
from ..judge.offline import names_linked
from ..records import AliasRecord, EdgeRecord, EntityRecord, FactRecord, JobRecord, RetirementRecord
from ..store import Store, Transaction
from .held import Graph, LinkedNames, normalise_name

__all__ = ["GraphJob", "GraphUpdate", "entity_candidate", "plan_graph"]

log = logging.getLogger("fadeway.graph")


@dataclass
class GraphUpdate:
    """What one note adds to the graph."""

    entities: list[EntityRecord] = field(default_factory=list)
    aliases: list[AliasRecord] = field(default_factory=list)
    edges: list[EdgeRecord] = field(default_factory=list)
    retirements: list[RetirementRecord] = field(default_factory=list)
    entity_vectors: list[tuple[int, bytes]] = field(default_factory=list)


async def plan_graph(
    judge: Judge,
    embedder: Embedder,
    graph: Graph,
    facts: Sequence[FactRecord],
    new: Sequence[FactRecord],
    entity_vectors: dict[int, np.ndarray],
    *,
    deadline: float | None = None,
) -> GraphUpdate:
    """Resolve the entities of `new` facts, then merge or retire against held `facts`.

    `entity_vectors` holds each known entity's canonical-name vector by `embedder`.
    """
    update = GraphUpdate()
    by_norm = await _resolve_entities(
        judge, embedder, graph, new, entity_vectors, update, deadline=deadline
    )
    await _relate(judge, graph, facts, new, by_norm, update, deadline=deadline)
    return update


async def _resolve_entities(
    judge: Judge,
    embedder: Embedder,
    graph: Graph,
    new: Sequence[FactRecord],
    entity_vectors: dict[int, np.ndarray],
    update: GraphUpdate,
    *,
    deadline: float | None,
) -> dict[str, int]:
    """Each name of the `new` facts as an entity: a known one by its normal form, else one the
    judge confirms, else a new entity (into `update`, with its vector and its aliases). Returns
    every normal form's entity."""
    by_norm = dict(graph.by_norm)
    known_names = {a.name for a in graph.aliases}
    next_entity = max(graph.entities, default=0) + 1
    names: dict[str, float] = {}
    for f in new:
        for name in (f.subject, f.object):
            names.setdefault(name, f.at)
    unknown = [name for name in names if normalise_name(name) not in by_norm]
    vectors = await embedder.embed(unknown, deadline=deadline) if unknown else None
    confirmed = await _confirm_entities(
        judge, graph, unknown, vectors, entity_vectors, deadline=deadline
    )
    for i, name in enumerate(unknown):
        norm = normalise_name(name)
        if norm in by_norm:
            continue  # an earlier name of this note had the same normal form
        entity = confirmed.get(name)
        if entity is None:
            entity = next_entity
            next_entity += 1
            update.entities.append(EntityRecord(n=entity, name=name, at=names[name]))
            assert vectors is not None
            update.entity_vectors.append((entity, vectors[i].astype(np.float32).tobytes()))
        by_norm[norm] = entity
    for name, at in names.items():
        if name not in known_names:
            norm = normalise_name(name)
            update.aliases.append(AliasRecord(norm=norm, entity=by_norm[norm], name=name, at=at))
    return by_norm


async def _relate(
    judge: Judge,
    graph: Graph,
    facts: Sequence[FactRecord],
    new: Sequence[FactRecord],
    by_norm: dict[str, int],
    update: GraphUpdate,
    *,
    deadline: float | None,
) -> None:
    """Each of the `new` facts as an edge (into `update`): merged into a held fact the judge
    finds it restates, or retiring the held facts it contradicts."""
    entity_name = {e.n: e.name for e in (*graph.entities.values(), *update.entities)}

    def fact_text(f: FactRecord) -> FactText:
        s, o = by_norm[normalise_name(f.subject)], by_norm[normalise_name(f.object)]
        return FactText(f.text, entity_name[s], entity_name[o])

    held = [f for f in facts if f.n in graph.edges and graph.is_current(f.n)]
    pairs = _relate_candidates(graph, held, new, by_norm)
    texts = [(fact_text(n), fact_text(h)) for n, h in pairs]
    answered = await judge.relate(texts, deadline=deadline) if pairs else []
    # No answer is "unrelated": nothing merges and nothing retires on a guess.
    relations = [r if r is not None else "unrelated" for r in answered]
    retired = set(graph.retired)
    for f in new:
        found = [(h, r) for (n, h), r in zip(pairs, relations, strict=True) if n.n == f.n]
        same = next((h for h, r in found if r == "same"), None)
        s, o = by_norm[normalise_name(f.subject)], by_norm[normalise_name(f.object)]
        update.edges.append(
            EdgeRecord(fact=f.n, subject=s, object=o, merged_into=same.n if same else None, at=f.at)
        )
        if same is not None:
            continue
        for h, r in found:
            if r != "contradicts":
                continue
            # The newer fact retires the older. A held fact is newer than `f` only when this
            # job ran late (it was parked, and retried after later notes' graph jobs).
            old, by = (f, h) if h.n > f.n else (h, f)
            if old.n not in retired:
                retired.add(old.n)
                update.retirements.append(RetirementRecord(fact=old.n, by=by.n, at=by.at))


async def _confirm_entities(
    judge: Judge,
    graph: Graph,
    unknown: Sequence[str],
    vectors: np.ndarray | None,
    entity_vectors: dict[int, np.ndarray],
    *,
    deadline: float | None,
) -> dict[str, int]:
    """Unknown names the judge confirms as an existing entity, found by embedding similarity."""
    if not unknown or vectors is None or not entity_vectors:
        return {}
    ids = np.fromiter(entity_vectors, dtype=np.int64, count=len(entity_vectors))
    matrix = np.stack([entity_vectors[int(i)] for i in ids])
    cos = vectors @ matrix.T
    asks: list[tuple[str, int]] = []
    linked = LinkedNames(graph.entities[int(e)].name for e in ids)
    for i, name in enumerate(unknown):
        # Every entity the gate passes, the closest first; a linked name may be far by cosine.
        passing = set(np.flatnonzero(cos[i] >= C.ENTITY_CANDIDATE_THRESHOLD).tolist())
        passing |= {j for j in linked.near(name) if entity_candidate(name, linked[j], cos[i, j])}
        best = sorted(passing, key=lambda j: (-cos[i, j], j))[: C.ENTITY_CANDIDATES]
        asks.extend((name, int(ids[j])) for j in best)
    if not asks:
        return {}
    answers = await judge.same_entity(
        [(name, graph.entities[e].name) for name, e in asks], deadline=deadline
    )
    out: dict[str, int] = {}
    for (name, entity), yes in zip(asks, answers, strict=True):
        if yes is True:  # no answer (None) is not a confirmation: the name stays its own entity
            out.setdefault(name, entity)
    return out


def entity_candidate(name: str, canonical: str, cosine: float) -> bool:
    """Whether a new name goes to the judge as maybe the entity named `canonical`: their
    embeddings' cosine is ENTITY_CANDIDATE_THRESHOLD or above, or their letters link them
    (`names_linked`: a shared word, an acronym). With the default hashing embedder "Dana" and
    "Dana Whitfield" are at 0.58, "turtle" and "turtles" under 0.6, "NYC" and "New York City"
    near 0: the embedding alone let half the names of one thing (on the LoCoMo tuning labels)
    never reach the judge. A lower threshold lets in names that only look alike."""
    return cosine >= C.ENTITY_CANDIDATE_THRESHOLD or names_linked(name, canonical)


def _relate_candidates(
    graph: Graph, held: Sequence[FactRecord], new: Sequence[FactRecord], by_norm: dict[str, int]
) -> list[tuple[FactRecord, FactRecord]]:
    """(new, held) pairs to judge: for each new fact, the held facts sharing an entity with it
    and its best BM25 hits among all held facts, at most RELATE_CANDIDATES, those most like it
    by BM25 first, the newer first where they tie. (Taken in the graph's order, an entity that
    many facts touch, such as a speaker, gave its oldest facts, and the fact a new one restates
    or contradicts was never among them.)"""
    if not held:
        return []
    by_n = {f.n: f for f in held}
    index = Bm25Index(C.BM25_K1, C.BM25_B)
    index.add(np.fromiter(by_n, dtype=np.int64, count=len(by_n)), [f.text for f in held])
    pairs: list[tuple[FactRecord, FactRecord]] = []
    for f in new:
        chosen: dict[int, None] = {}
        for name in (f.subject, f.object):
            for n in graph.touching(by_norm[normalise_name(name)]):
                if n in by_n:
                    chosen.setdefault(n, None)
        ids, _ = index.search(f.text, C.RELATE_BM25_HITS)
        chosen.update(dict.fromkeys(ids.tolist()))
        ns = np.fromiter(chosen, dtype=np.int64, count=len(chosen))
        scores = index.scores(f.text, ns)
        best = np.lexsort((-ns, -scores))[: C.RELATE_CANDIDATES]  # by score, then newest
        pairs.extend((f, by_n[int(n)]) for n in ns[best])
    return pairs


class GraphJob:
    """The lane job that takes a note's facts into the graph: resolve entities, merge
    restatements, retire (`JobKind.GRAPH`)."""

    def __init__(self, store: Store, judge: Judge, embedder: Embedder) -> None:
        self.store, self.judge, self.embedder = store, judge, embedder

    async def prepare(self, memory_id: str, job: JobRecord) -> Any:
        note = msgspec.json.decode(job.payload)["note"]
        embedder = self.embedder
        with self.store.read(memory_id) as tx:
            graph = Graph.read(tx)
            facts = tx.facts()
            stored = tx.vectors("entity", embedder.name)
        new = [f for f in facts if f.note == note and f.n not in graph.edges]
        if not new:
            return note, len(graph.entities), None
        vectors = {n: np.frombuffer(v, dtype=np.float32) for n, v in stored}
        update = await plan_graph(
            self.judge,
            embedder,
            graph,
            facts,
            new,
            vectors,
            deadline=time.monotonic() + C.LANE_JUDGE_DEADLINE,
        )
        return note, len(graph.entities), update

    def apply(self, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        note, entities_seen, update = prepared
        if update is None:
            return True
        edges = {e.fact for e in tx.edges()}
        if any(e.fact in edges for e in update.edges):
            return True  # applied already (a rerun after a crash between apply and done)
        if len(tx.entities()) != entities_seen:
            return False  # the graph moved since the snapshot: plan again
        tx.insert_graph(update.entities, update.aliases, update.edges, update.retirements)
        tx.insert_vectors("entity", self.embedder.name, update.entity_vectors)
        log.info(
            "memory %r: note %d: %d new entities, %d aliases, %d merged, %d retired",
            tx.memory_id,
            note,
            len(update.entities),
            len(update.aliases),
            sum(e.merged_into is not None for e in update.edges),
            len(update.retirements),
        )
        return True
