"""Fact traces: every time facts are written, each new fact is judged against every episode
still remembered, and each answer is stored as a trace (MECHANISM: "Encoding and traces").

Runs in the lane. Only a yes counts; the raw score is kept as given; the trace's time is when
the facts were written. A pair the judge left without an answer gets no trace: a trace records
an answer, and none was given (it is logged by the judge).

What the judge reads of an episode is what the memory holds of it now. An episode in view, and
each episode the note itself acknowledged (the facts come from their messages, and which of
them a fact is about is the judgment), is its messages' text. A sealed or forgotten episode of
an earlier note is out of view: it is the facts that stand for it, each as the held fact it
stands as (`facts_block.facts_of`, as the facts block shows them), through
`judge.base.remembered_text`; one with none left (its note had no facts, or all are retired) is
its text. Reading the messages of every sealed episode again for each note was most of what the
judge read at a small ceiling (93% of `about`'s reads, replaying the bundled sample at 6,000
tokens; benches/RESULTS-judge-cost.md).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from .. import _constants as C
from ..episodes.traces import episode_text
from ..index.indexes import Indexes
from ..judge.base import Judge, remembered_text
from ..records import EpisodeRecord, JobRecord, TraceRecord
from ..store import Store, Transaction
from .facts_block import facts_of

__all__ = ["ScoreJob"]

#: The states of an episode out of view, which the judge reads as its facts.
OUT_OF_VIEW = ("sealed", "forgotten")


class ScoreJob:
    """The lane job that judges a note's facts against every episode still remembered
    (`JobKind.SCORE`)."""

    def __init__(self, store: Store, indexes: Indexes, judge: Judge) -> None:
        self.store, self.indexes, self.judge = store, indexes, judge

    async def prepare(self, memory_id: str, job: JobRecord) -> Any:
        payload = msgspec.json.decode(job.payload)
        note = payload["note"]
        # The episodes remembered when the facts were written (a job queued before the payload
        # held them: those remembered now).
        remembered = payload.get("remembered")
        judged = None if remembered is None else {n for a, b in remembered for n in range(a, b + 1)}
        index = self.indexes.get(memory_id)
        with self.store.read(memory_id) as tx:
            index.sync(tx)
            known = index.cache
            facts = tx.facts(note=note)
            episodes = [
                e
                for e in tx.episodes()
                if (e.state != "forgotten" if judged is None else e.n in judged)
            ]
            if not facts or not episodes:
                return note, []
            own = {e for f in facts for e in known.fact_episodes.get(f.n, ())}
            held = facts_of(
                [e for e in episodes if e.n not in own],
                known.facts,
                known.episode_facts,
                states=OUT_OF_VIEW,
                graph=known.graph,
                awaiting=known.awaiting,
            )
            texts = [_read_as(tx, e, [f.text for f in held.get(e.n, ())]) for e in episodes]
        answers = await self.judge.about(
            [f.text for f in facts], texts, deadline=time.monotonic() + C.LANE_JUDGE_DEADLINE
        )
        return note, [
            (f.n, e.n, a.yes, a.score)
            for f, row in zip(facts, answers, strict=True)
            for e, a in zip(episodes, row, strict=True)
            if a is not None
        ]

    def apply(self, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        note, answers = prepared
        if tx.note_traced(note):
            return True  # already scored (a rerun after a crash between apply and done)
        n = tx.trace_count()
        tx.append_traces(
            [
                TraceRecord(
                    n=n + i,
                    episode=episode,
                    fact=fact,
                    kind="fact",
                    score=score,
                    counted=yes,
                    at=job.created_at,
                )
                for i, (fact, episode, yes, score) in enumerate(answers, 1)
            ]
        )
        return True


def _read_as(tx: Transaction, episode: EpisodeRecord, held: list[str]) -> str:
    """What the judge reads of `episode`: the facts `held` for it, else its messages."""
    if held:
        return remembered_text(held)
    return episode_text([m.body for m in tx.messages(episode.first_seq, episode.last_seq + 1)])
