"""Distill (MECHANISM: "Recall"): when the next message arrives, a turn's recall block is reread
against the conversation around it, keeping the facts that were relevant and not already said,
and rewritten to those or removed. Prepared in the lane after the reply (Contracts: "Cache
stability"); `recall.turns.blocks_in_view` applies it.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from .. import _constants as C
from .. import blocks
from ..judge.base import FactText, Judge
from ..records import BlockText, JobRecord
from ..store import Store, Transaction
from .block import block_tokens, excerpts_of, shown_text
from .grouping import group_facts
from .snapshot import Snapshot

__all__ = ["DistillJob"]


class DistillJob:
    """The lane job that rereads a turn's recall block against the turn (its message and
    reply): keep the facts and excerpts that were relevant and not already said, and rewrite
    the block to those (None: removed; `JobKind.DISTILL`). Applied when the next message
    arrives (`recall.turns.blocks_in_view` fixes the turn's final text)."""

    def __init__(self, store: Store, judge: Judge) -> None:
        self.store, self.judge = store, judge

    def stale(self, tx: Transaction, job: JobRecord) -> bool:
        """Whether the turn's text is fixed already (the next message came): never read."""
        turn = msgspec.json.decode(job.payload)["turn"]
        return any(r.turn == turn for r in tx.block_texts("recall_finals", turn))

    async def prepare(self, memory_id: str, job: JobRecord) -> Any:
        payload = msgspec.json.decode(job.payload)
        turn, conversation = payload["turn"], payload["conversation"]
        with self.store.read(memory_id) as tx:
            found = [r for r in tx.recalls(turn) if r.turn == turn]
            if not found:
                return None  # nothing to distill
            snap = Snapshot(tx)
            passages = tx.passages_at(found[0].passages)
        record = found[0]
        facts = [n for n in record.facts if n in snap.facts]
        items = [snap.fact_text(n) for n in facts]
        # An excerpt as the block showed it (a long passage windowed by the message): what
        # the turn read, and what a judge rereads (whole passages of an agent's turns were
        # most of what distill read).
        message = conversation.partition("\n")[0]
        for p in passages:
            shown = shown_text(p, message)
            items.append(
                FactText(p.text if p.text.endswith(shown) else f"{p.role}: {shown}", p.role, "")
            )
        keep = await self.judge.distill(
            items, conversation, deadline=time.monotonic() + C.LANE_JUDGE_DEADLINE
        )
        keep = [k is not False for k in keep]  # no answer (None) keeps the item
        if all(keep):
            return turn, record.text, record.tokens  # the block as it was, not regrouped
        kept_facts = [n for n, k in zip(facts, keep, strict=False) if k]
        kept_passages = [p for p, k in zip(passages, keep[len(facts) :], strict=True) if k]
        # Only what was kept: a kept fact of a kept excerpt's episode stands under it, the rest
        # in the groups. (Excerpts once took their episode's first facts, kept or not, and the
        # rewrite grew the block it was to shrink: 124 of 149 on a LoCoMo conversation.)
        excerpts, under = excerpts_of(
            snap, kept_passages, {n: i for i, n in enumerate(kept_facts)}, query=conversation
        )
        placed = set(under)
        grouped = [n for n in kept_facts if n not in placed]
        text = blocks.recall_block(group_facts(snap, grouped), [], excerpts)
        return turn, text, block_tokens(text)

    def apply(self, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        if prepared is not None:
            turn, text, size = prepared
            tx.insert_block_text(
                "distills", BlockText(turn=turn, at=job.created_at, text=text, tokens=size)
            )
        return True
