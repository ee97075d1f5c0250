"""Fact traces: every time facts are written, each new fact is judged against every episode
still remembered, and each answer is stored as a trace (MECHANISM: "Encoding and traces").

Runs in the lane. Only a yes counts; the raw score is kept as given; the trace's time is when
the facts were written. A pair the judge left without an answer gets no trace: a trace records
an answer, and none was given (it is logged by the judge).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from .. import _constants as C
from ..judge.base import Judge
from ..records import JobRecord, TraceRecord
from ..store import Store, Transaction
from ..wire import text_of

__all__ = ["ScoreJob", "episode_text", "number_runs"]


def episode_text(bodies: list[bytes]) -> str:
    """An episode as the judge reads it: its messages' text, a blank line apart."""
    return "\n\n".join(" ".join(text_of(msgspec.json.decode(b))) for b in bodies)


def number_runs(numbers: list[int]) -> list[list[int]]:
    """Ascending `numbers` as runs `[first, last]` of consecutive ones."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return runs


class ScoreJob:
    """The lane job that judges a note's facts against every episode still remembered
    (`JobKind.SCORE`)."""

    def __init__(self, store: Store, judge: Judge) -> None:
        self.store, self.judge = store, judge

    async def prepare(self, memory_id: str, job: JobRecord) -> Any:
        payload = msgspec.json.decode(job.payload)
        note = payload["note"]
        # The episodes remembered when the facts were written (a job queued before the payload
        # held them: those remembered now).
        remembered = payload.get("remembered")
        judged = None if remembered is None else {n for a, b in remembered for n in range(a, b + 1)}
        with self.store.read(memory_id) as tx:
            facts = tx.facts(note=note)
            episodes = [
                e
                for e in tx.episodes()
                if (e.state != "forgotten" if judged is None else e.n in judged)
            ]
            texts = [
                episode_text([m.body for m in tx.messages(e.first_seq, e.last_seq + 1)])
                for e in episodes
            ]
        if not facts or not episodes:
            return note, []
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
