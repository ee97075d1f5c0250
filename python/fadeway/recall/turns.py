"""Recall blocks and their turns (MECHANISM: "Recall"; Contracts: "Cache stability").

A turn's block is stored with it, just before its user message, and shown there while the turn
is in view. After the reply, the lane prepares a distilled rewrite and the next message's walk.
When the next message arrives the turn's final text is fixed (the rewrite if it is ready, else
the block as it was) and never changes again, so every request repeats the previous request's
prefix up to the previous turn's block.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import _constants as C
from .._services import Services
from ..errors import EmbedderMismatchError, EndpointError, JudgeTimeout, MemoryNotFoundError
from ..mirror.history import History
from ..notes.tool import message_without_notes
from ..records import BlockText, JobKind, RecallBlock, RecallRecord
from ..store import Transaction
from ..wire import is_user_message, text_of
from ..wire.canonical import encode_json, plain
from .block import RecallResult
from .pipeline import recall

log = logging.getLogger("fadeway.recall")

__all__ = [
    "Pending",
    "recall_for",
    "preview",
    "place_recall",
    "store_recall",
    "blocks_in_view",
    "queue_after_reply",
]


@dataclass(frozen=True, slots=True)
class Pending:
    """A recall run for a user message not stored yet (identified by its digest)."""

    digest: bytes
    result: RecallResult


def _text(body: Any) -> str:
    """What a message says, without fadeway's note calls: a dialogue that quoted the note
    just taken made its facts relevant to whatever came next."""
    body = message_without_notes(body)
    return "" if body is None else " ".join(t for t in text_of(body) if t.strip())


def recent_text(history: History, message: str) -> str:
    """The recent conversation ending with `message`: the last messages' text, clipped."""
    start = max(0, len(history) - C.RECALL_RECENT_MESSAGES)
    lines = [_text(plain(history.bodies[i])) for i in range(start, len(history))]
    return "\n".join([*lines, message])[-C.RECALL_RECENT_CHARS :]


def preview(
    services: Services, memory_id: str, message: str, at: float | None = None
) -> RecallResult:
    """The recall the next decorate would run for a user `message` said at `at` (None: the
    clock's time); nothing is written but the memory's index caches. Raises
    MemoryNotFoundError for a memory the store does not hold."""
    with services.store.read(memory_id) as tx:
        if tx.memory() is None:
            raise MemoryNotFoundError(f"the store holds no memory {memory_id!r}")
        history = History()
        history.sync(tx.message_count(), tx.messages)
    return recall(
        services,
        memory_id,
        message,
        recent_text(history, message),
        prepared_turn=history.turn,
        deadline=time.monotonic() + C.RECALL_DEADLINE,
        now=services.now(at),
    )


def recall_for(
    services: Services,
    memory_id: str,
    history: History,
    new: Sequence[Any],
    digests: Sequence[bytes],
    now: float | None = None,
) -> list[Pending]:
    """Run recall for each user message among `new`, the messages of a request not stored yet
    (in order, fadeway's additions stripped; `digests` theirs), said at `now`, before they join
    the history. `history` is the memory's mirror, synced. A message without text gets none.
    The pending recalls come back in the messages' order.

    Each message is recalled as if it had come alone after the ones before it: its recent
    conversation ends with the new messages before it (replies included), the walk prepared for
    its turn is used when there is one, and facts an earlier one's block shows are left out of
    its own. The messages before the last share `RECALL_EARLIER_DEADLINE`; one reached after it
    has passed gets no block (logged). The last, the one the reply answers, always gets its own
    `RECALL_DEADLINE`.
    """
    users = [j for j, message in enumerate(new) if is_user_message(message)]
    texts = [_text(message) for message in new]
    earlier = time.monotonic() + C.RECALL_EARLIER_DEADLINE
    pending: list[Pending] = []
    shown: set[int] = set()
    out_of_time = False
    for k, j in enumerate(users):
        last = k == len(users) - 1
        if not texts[j].strip() or (out_of_time and not last):
            continue
        if not last and time.monotonic() >= earlier:
            out_of_time = True
            log.warning(
                "memory %r: no time left for recall of %d earlier user message(s) of the "
                "request; they get no recall block",
                memory_id,
                len(users) - 1 - k,
            )
            continue
        said = "\n".join(t for t in texts[: j + 1] if t.strip())
        result = _recall_one(
            services,
            memory_id,
            texts[j],
            recent_text(history, said),
            history.turn + k,  # the turn it follows, whose walk is prepared after its reply
            time.monotonic() + C.RECALL_DEADLINE if last else earlier,
            shown,
            now,
        )
        # A recall with no block is kept when hits were held back for the facts block: a seal
        # or fade in this decorate may let them go (`RecallResult.beside`).
        if result is not None and (
            result.block is not None or (result.contents and result.contents.held_back)
        ):
            pending.append(Pending(digests[j], result))
            shown.update(result.facts)
    return pending


def _recall_one(
    services: Services,
    memory_id: str,
    text: str,
    recent: str,
    prepared_turn: int,
    deadline: float,
    shown: set[int],
    now: float | None,
) -> RecallResult | None:
    """One message's recall; None when it failed (logged): the turn goes on without a block
    rather than fail, since the caller's message is stored and answered all the same."""
    try:
        return recall(
            services,
            memory_id,
            text,
            recent,
            prepared_turn=prepared_turn,
            deadline=deadline,
            leave_out=shown,
            now=now,
        )
    except (EndpointError, EmbedderMismatchError, JudgeTimeout, TimeoutError) as exc:
        # mem.search raises the same error, for whoever looks.
        log.error("memory %r: recall failed, the turn gets no recall block: %s", memory_id, exc)
        return None


def place_recall(
    history: History, pending: Sequence[Pending], before: int
) -> dict[int, RecallResult]:
    """The seq of the user message each block stands before, among the user messages stored
    now (from seq `before` on): blocks and messages are matched by digest, in order (a message
    recalled for that was not stored after all gets no place)."""
    out = {}
    k = 0
    for seq in range(before, len(history)):
        if history.sides[seq] != "user":
            continue
        found = next(
            (p for p in range(k, len(pending)) if pending[p].digest == history.digests[seq]),
            None,
        )
        if found is not None:
            out[seq] = pending[found].result  # no block yet may get one beside a new facts block
            k = found + 1
    return out


def store_recall(
    tx: Transaction, history: History, placed: dict[int, RecallResult], now: float
) -> None:
    """Store each block with its turn, just before its user message (`placed`, by the seq of
    that message), as the request showed it."""
    for seq, result in sorted(placed.items()):
        if result.block is not None:
            tx.insert_recall(
                RecallRecord(
                    turn=history.turns[seq],
                    seq=seq,
                    at=now,
                    text=result.block,
                    tokens=result.size,
                    facts=result.facts,
                    passages=result.passages,
                )
            )


def blocks_in_view(
    tx: Transaction,
    history: History,
    seqs: Sequence[int],
    since_turn: int,
    now: float,
    arrived: int,
) -> dict[int, tuple[str, int]]:
    """The recall blocks to show, by the seq of the user message they stand before: a past
    turn's final text, the current turn's block as recalled. First the final text of every
    earlier turn's block that has none yet (from `since_turn` on) is fixed (`_fix_finals`);
    `arrived` is this call's first new seq. One read of the blocks with their finals (their
    distilled rewrites too, when a final is missing) serves both; a block's own text is read
    only while it has no final (the blocks in view and their finals read whole were 22,000
    characters a read on average over the LoCoMo conversations at 8,000 tokens; 3,200 now)."""
    recalls = tx.recall_blocks(since_turn)
    if not recalls:
        return {}
    finals = {r.turn: r.final for r in recalls if r.final is not None}
    finals.update(_fix_finals(tx, history, recalls, finals, now, arrived))
    visible = set(seqs)
    out: dict[int, tuple[str, int]] = {}
    for r in recalls:
        if r.seq not in visible:
            continue
        if r.turn < history.turn and r.turn in finals:
            final = finals[r.turn]
            if final.text is not None:
                out[r.seq] = (final.text, final.tokens)
        elif r.text is not None:  # a turn's final is fixed only once a later turn began
            out[r.seq] = (r.text, r.tokens)
    return out


def _fix_finals(
    tx: Transaction,
    history: History,
    recalls: Sequence[RecallBlock],
    finals: dict[int, BlockText],
    now: float,
    arrived: int,
) -> dict[int, BlockText]:
    """The final texts fixed (and stored) for the earlier turns' `recalls` that `finals` does
    not hold: the distilled rewrite when the lane has prepared it; else removed when the
    turn's next user message came in this call (its first new seq is `arrived`) with no reply
    between them (nothing drew on the block: distill would keep none of it); else the block
    as it was."""
    missing = [r for r in recalls if r.turn < history.turn and r.turn not in finals]
    if not missing:
        return {}
    distills = {b.turn: b for b in tx.block_texts("distills", missing[0].turn)}
    fixed: dict[int, BlockText] = {}
    for r in missing:
        d = distills.get(r.turn)
        if d is not None:
            final = BlockText(turn=r.turn, at=now, text=d.text, tokens=d.tokens)
        elif _unanswered(history, r.seq, arrived):
            final = BlockText(turn=r.turn, at=now, text=None, tokens=0)
        else:  # a block with no final was read with its own text
            final = BlockText(turn=r.turn, at=now, text=r.text, tokens=r.tokens)
        tx.insert_block_text("recall_finals", final)
        fixed[r.turn] = final
    return fixed


def _unanswered(history: History, seq: int, arrived: int) -> bool:
    """Whether the user message at `seq` was followed by another, stored at `arrived` or
    later, with no reply between them."""
    i = bisect.bisect_right(history.user_seqs, seq)
    if i == len(history.user_seqs) or history.user_seqs[i] < arrived:
        return False
    return "assistant" not in history.sides[seq + 1 : history.user_seqs[i]]


def queue_after_reply(tx: Transaction, history: History, now: float) -> bool:
    """After a reply that ends its turn: prepare the next message's walk, and distill the
    blocks the reply answered: the turn's, and those of the user messages right before it
    that no reply came between (sent together, each with its own block). Returns whether
    jobs were queued."""
    start = history.turn_start
    if start >= len(history) or history.sides[start] != "user":
        return False
    if not tx.fact_count() and not tx.passage_count():
        return False  # nothing to walk or distill yet
    user = _text(plain(history.bodies[start]))
    replies = [
        _text(plain(history.bodies[i]))
        for i in range(start + 1, len(history))
        if history.sides[i] == "assistant"
    ]
    dialogue = "\n".join([user, *replies])[-C.RECALL_RECENT_CHARS :]
    turn = history.turns[start]
    tx.enqueue(JobKind.WALK, encode_json({"turn": turn, "dialogue": dialogue}), now)
    # Distill rereads the whole turn: what a tool output said is said too.
    after = "\n".join(
        _text(plain(history.bodies[i]))
        for i in range(start + 1, len(history))
        if history.sides[i] in ("assistant", "output")
    )
    answered = [start]
    while answered[0] and history.sides[answered[0] - 1] == "user":
        answered.insert(0, answered[0] - 1)
    first = history.turns[answered[0]]
    recalled = {r.turn for r in tx.recall_blocks(first) if r.final is None}
    for seq in answered:
        if history.turns[seq] in recalled:
            conversation = _around(_text(plain(history.bodies[seq])), after)
            payload = {"turn": history.turns[seq], "conversation": conversation}
            tx.enqueue(JobKind.DISTILL, encode_json(payload), now)
    return True


def _around(message: str, after: str) -> str:
    """What distill reads of a turn: the message on the first line, what followed it on the
    next (`Judge.distill`). Past DISTILL_CONVERSATION_CHARS, the start of what followed gives
    way, never the message itself."""
    head = " ".join(message.split())[: C.DISTILL_CONVERSATION_CHARS]
    room = C.DISTILL_CONVERSATION_CHARS - len(head) - 1
    return head + ("\n" + after[-room:] if room > 0 and after else "")
