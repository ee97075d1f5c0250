"""Recall blocks and their turns (MECHANISM: "Recall"; Contracts: "Cache stability").

A turn's block is stored with it, just before its user message, and shown there while the turn
is in view. After the reply, the lane prepares a distilled rewrite and the next message's walk.
When the next message arrives the turn's final text is fixed (the rewrite if it is ready, else
the block as it was) and never changes again, so every request repeats the previous request's
prefix up to the previous turn's block.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _constants as C
from .formats import text_of
from .formats.canonical import encode_json, plain
from .errors import EmbedderMismatchError, EndpointError
from .history import History
from .judge import JudgeTimeout
from .model import BlockText, RecallRecord
from .recall import RecallResult, block_tokens, recall
from .store import Transaction

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger("fadeway.recall")

__all__ = ["Pending", "recall_for", "preview", "store_recall", "fix_finals", "blocks_in_view",
           "queue_after_reply"]


@dataclass(frozen=True, slots=True)
class Pending:
    """A recall run for a user message not stored yet (identified by its digest)."""

    digest: bytes
    result: RecallResult


def is_user_message(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "user" and (
        message.get("type") in (None, "message"))


def _text(body: Any) -> str:
    return " ".join(t for t in text_of(body) if t.strip())


def recent_text(history: History, message: str) -> str:
    """The recent conversation ending with `message`: the last messages' text, clipped."""
    start = max(0, len(history) - C.RECALL_RECENT_MESSAGES)
    lines = [_text(plain(history.bodies[i])) for i in range(start, len(history))]
    return "\n".join([*lines, message])[-C.RECALL_RECENT_CHARS:]


def preview(engine: Engine, memory_id: str, message: str) -> RecallResult:
    """The recall the next decorate would run for a user `message` (nothing is written but the
    memory's index caches). Raises KeyError for a memory the store does not hold."""
    with engine.store.read(memory_id) as tx:
        if tx.memory() is None:
            raise KeyError(memory_id)
        history = History()
        history.sync(tx.message_count(), tx.messages)
    return recall(engine, memory_id, message, recent_text(history, message),
                  prepared_turn=history.turn, deadline=time.monotonic() + C.RECALL_DEADLINE)


def recall_for(engine: Engine, memory_id: str, history: History, message: Any,
               digest: bytes) -> Pending | None:
    """Run recall for the new user `message` (before it joins the history). `history` is the
    memory's mirror, synced; None when the message is already stored or holds no text."""
    if len(history) and history.digests[-1] == digest:
        return None  # the caller resent a stored turn: its block is stored already
    text = _text(message)
    if not text.strip():
        return None
    try:
        result = recall(engine, memory_id, text, recent_text(history, text),
                        prepared_turn=history.turn, deadline=time.monotonic() + C.RECALL_DEADLINE)
    except (EndpointError, EmbedderMismatchError, JudgeTimeout, TimeoutError) as exc:
        # The turn goes on without a block rather than fail: the caller's message is stored
        # and answered. (mem.search raises the same error, for whoever looks.)
        log.error("memory %r: recall failed, the turn gets no recall block: %s", memory_id, exc)
        return None
    return Pending(digest, result)


def store_recall(tx: Transaction, history: History, pending: Pending | None, before: int,
                 now: float) -> None:
    """Store the block with its turn, when its message is the last user message stored now."""
    if pending is None or pending.result.block is None:
        return
    for seq in range(len(history) - 1, before - 1, -1):
        if history.sides[seq] == "user":
            if history.digests[seq] == pending.digest:
                tx.insert_recall(RecallRecord(
                    turn=history.turns[seq], seq=seq, at=now, text=pending.result.block,
                    tokens=block_tokens(pending.result.block), facts=pending.result.facts,
                    passages=pending.result.passages))
            return


def fix_finals(tx: Transaction, history: History, since_turn: int, now: float) -> None:
    """Fix the final text of every earlier turn's block that has none yet (from `since_turn`
    on): the distilled rewrite when the lane has prepared it, else the block as it was."""
    current = history.turn
    recalls = [r for r in tx.recalls(since_turn) if r.turn < current]
    if not recalls:
        return
    finals = {b.turn for b in tx.block_texts("recall_finals", recalls[0].turn)}
    distills = {b.turn: b for b in tx.block_texts("distills", recalls[0].turn)}
    for r in recalls:
        if r.turn in finals:
            continue
        d = distills.get(r.turn)
        final = (BlockText(turn=r.turn, at=now, text=d.text, tokens=d.tokens) if d is not None
                 else BlockText(turn=r.turn, at=now, text=r.text, tokens=r.tokens))
        tx.insert_block_text("recall_finals", final)


def blocks_in_view(tx: Transaction, history: History, seqs: Sequence[int],
                   since_turn: int) -> dict[int, tuple[str, int]]:
    """The recall blocks to show, by the seq of the user message they stand before: a past
    turn's final text, the current turn's block as recalled."""
    visible = set(seqs)
    recalls = [r for r in tx.recalls(since_turn) if r.seq in visible]
    if not recalls:
        return {}
    finals = {b.turn: b for b in tx.block_texts("recall_finals", recalls[0].turn)}
    out: dict[int, tuple[str, int]] = {}
    for r in recalls:
        if r.turn < history.turn and r.turn in finals:
            final = finals[r.turn]
            if final.text is not None:
                out[r.seq] = (final.text, final.tokens)
        else:
            out[r.seq] = (r.text, r.tokens)
    return out


def queue_after_reply(tx: Transaction, history: History, now: float) -> bool:
    """After a reply that ends its turn: prepare the next message's walk, and distill the
    turn's block if it had one. Returns whether jobs were queued."""
    start = history.turn_start
    if start >= len(history) or history.sides[start] != "user":
        return False
    if not tx.fact_count() and not tx.passage_count():
        return False  # nothing to walk or distill yet
    turn = history.turns[start]
    user = _text(plain(history.bodies[start]))
    replies = [_text(plain(history.bodies[i])) for i in range(start + 1, len(history))
               if history.sides[i] == "assistant"]
    conversation = "\n".join([user, *replies])
    tx.enqueue("walk", encode_json(
        {"turn": turn, "dialogue": conversation[-C.RECALL_RECENT_CHARS:]}), now)
    if any(r.turn == turn for r in tx.recalls(turn)):
        tx.enqueue("distill", encode_json(
            {"turn": turn, "conversation": conversation[-C.DISTILL_CONVERSATION_CHARS:]}), now)
    return True
