"""What recall reads of a memory, cached in memory and kept in step with the store."""

from __future__ import annotations

import msgspec

from ..graph.held import Graph
from ..records import (
    EdgeRecord,
    EntityRecord,
    EpisodeRecord,
    FactRecord,
    GraphRows,
    JobKind,
    Marks,
    RetirementRecord,
)
from ..store import Transaction

__all__ = ["MemoryCache"]


class MemoryCache:
    """The append-only parts of a memory that recall reads (facts, the graph's nodes, edges
    and retirements, episodes' turns, acknowledgements), kept in step with the store by reading
    only what is new. Copy on write: a sync that finds something new builds new objects, so a
    snapshot taken before it stays whole."""

    def __init__(self) -> None:
        self.facts: dict[int, FactRecord] = {}
        self.entities: list[EntityRecord] = []
        self.edges: list[EdgeRecord] = []
        self.retirements: list[RetirementRecord] = []
        self.episodes: dict[int, EpisodeRecord] = {}
        self.acks: list[tuple[int, int]] = []
        self.graph = Graph([], [], [], [])
        self.fact_episodes: dict[int, list[int]] = {}
        self.episode_facts: dict[int, list[int]] = {}
        #: The first note whose facts the graph has not taken yet (its `graph` job pending; the
        #: lane runs them in note order), or None.
        self.awaiting: int | None = None
        #: The position at which the stored facts block was found to show what it should.
        self.block_checked: tuple[int | None, ...] | None = None
        self._last_fact = self._last_episode = 0  # the highest numbers read so far
        # `restatements` of one graph and facts (replaced, never changed, by a sync).
        self._restated: tuple[Graph, dict[int, FactRecord], dict[int, int]] | None = None
        self._merged: tuple[Graph, dict[int, list[int]]] | None = None  # `merged` of one graph

    def position(self) -> tuple[int | None, ...]:
        """How far this cache has read (it moves with every sync that finds something new)."""
        return (
            self._last_fact,
            self._last_episode,
            len(self.acks),
            len(self.entities),
            len(self.edges),
            len(self.retirements),
            self.awaiting,
        )

    def sync(self, tx: Transaction, marks: Marks | None = None) -> None:
        """Read what the store holds past what this cache holds. Given the memory's `marks`
        (read in the same transaction), a table with nothing past it is not read: most syncs
        find nothing new in most tables, and on a server each read is a round trip."""

        def grew(table: str, held: int) -> bool:
            return marks is None or getattr(marks, table) > held

        held = {
            "facts": self._last_fact,
            "entities": self.entities[-1].n if self.entities else 0,
            "edges": self.edges[-1].fact if self.edges else 0,
            "episodes": self._last_episode,
            "acks": self.acks[-1][1] if self.acks else 0,
        }
        past = {table: n for table, n in held.items() if grew(table, n)}
        if not (
            marks is not None
            and marks.retirements == len(self.retirements)
            and "entities" not in past
            and "edges" not in past
        ):
            past["retirements"] = 0
        rows = tx.graph_rows(past) if past else GraphRows()  # one round trip for them all
        facts, entities, edges = rows.facts, rows.entities, rows.edges
        episodes, acks = rows.episodes, rows.acks
        retirements = self.retirements if rows.retirements is None else rows.retirements
        if marks is not None:
            job = marks.graph_job
        else:
            job = None if (found := tx.pending_job(JobKind.GRAPH)) is None else found.payload
        self.awaiting = None if job is None else int(msgspec.json.decode(job)["note"])
        if entities or edges or len(retirements) != len(self.retirements):
            self.entities = [*self.entities, *entities]
            self.edges = [*self.edges, *edges]
            self.retirements = retirements
            self.graph = Graph(self.entities, [], self.edges, self.retirements)
        if facts or episodes or acks:
            self.facts = {**self.facts, **{f.n: f for f in facts}}
            self.episodes = {**self.episodes, **{e.n: e for e in episodes}}
            self._last_fact = facts[-1].n if facts else self._last_fact
            self._last_episode = episodes[-1].n if episodes else self._last_episode
            self.acks = [*self.acks, *acks]
            episodes_of_note: dict[int, list[int]] = {}
            for episode, note in self.acks:
                episodes_of_note.setdefault(note, []).append(episode)
            self.fact_episodes = {
                n: episodes_of_note.get(f.note, []) for n, f in self.facts.items()
            }
            self.episode_facts = {}
            for n, eps in self.fact_episodes.items():
                for e in eps:
                    self.episode_facts.setdefault(e, []).append(n)

    def restatements(self, graph: Graph, facts: dict[int, FactRecord]) -> dict[int, int]:
        """Each held fact of `graph` that restatements were merged into -> its latest statement
        (the newest of it and them). Kept while the graph and facts are the ones it was made
        from: every recall reads it, and it reads every edge of the graph."""
        memo = self._restated
        if memo is not None and memo[0] is graph and memo[1] is facts:
            return memo[2]
        latest: dict[int, int] = {}
        for fact, edge in graph.edges.items():
            if edge.merged_into is None or fact not in facts:
                continue
            root = graph.root(fact)
            best = latest.get(root, root)
            if best not in facts or (facts[fact].at, fact) > (facts[best].at, best):
                latest[root] = fact
        self._restated = (graph, facts, latest)
        return latest

    def merged(self, graph: Graph) -> dict[int, list[int]]:
        """Each fact of `graph` that others merged into -> those facts, at any depth (the facts
        whose `graph.root` it is). Kept while the graph is the one it was made from."""
        memo = self._merged
        if memo is not None and memo[0] is graph:
            return memo[1]
        merged: dict[int, list[int]] = {}
        for fact, edge in graph.edges.items():
            if edge.merged_into is not None:
                merged.setdefault(graph.root(fact), []).append(fact)
        self._merged = (graph, merged)
        return merged
