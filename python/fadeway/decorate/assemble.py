"""One decorate's forgetting and request (MECHANISM: "The note ask and sealing", "Forgetting",
"Sleep", "What the model sees"): seal what was acknowledged, fade when the history is over its
budget or the turn sleeps (`forgetting.fade`), keep the facts block, and build the request
around the view, with the recall blocks, the facts block and the note ask.

`decorate.call` stores the new messages, then runs `forget_and_assemble` in the same write
transaction.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import msgspec

from .. import _constants as C
from .. import blocks, tokens, wire
from .._services import Services
from ..forgetting.budget import Decorating
from ..forgetting.facts_block import facts_block_text, facts_order, is_current
from ..forgetting.fade import CutFirst, Planned, fade_if_needed
from ..forgetting.seal import seal
from ..mirror.facts import MemoryCache
from ..mirror.history import History, note_arguments
from ..notes import tool as notes
from ..notes.ask import ask_spans
from ..recall.block import RecallResult, block_limit
from ..recall.turns import blocks_in_view
from ..records import EpisodeRecord, JobKind, MemoryRecord
from ..store import Transaction
from ..wire import ParsedRequest
from ..wire.canonical import digest_of, encode_json, plain
from ..wire.limits import Limits, note_bytes
from .view import block_message, history_view, instruction_role, resolvable, stateless, view_seqs

__all__ = ["Assembled", "Key", "forget_and_assemble", "shown_seqs"]

log = logging.getLogger("fadeway")


class Key(NamedTuple):
    """What identifies a decorated request when it is reported: our estimate, and the count
    and last digest of the stored messages in its view."""

    estimate: int
    length: int
    last: bytes | None


class Assembled(NamedTuple):
    """A decorated request, what identifies it, whether it queued lane work on the way
    (episodes sealed, or a note for the engine's note writer), the recall blocks of this
    call's user messages as the request shows them (by seq), and the text of every block the
    request holds (the facts block, the recall blocks, the note ask)."""

    request: dict[str, Any]
    key: Key
    queued: bool
    recalls: dict[int, RecallResult]
    blocks: list[str]


#: The recall blocks a request shows, by the seq of the user message each stands before:
#: their text and size.
Shown = dict[int, tuple[str, int]]


def shown_seqs(services: Services, mirror: History) -> list[int]:
    """The seqs of the stored messages in view, by the episodes as last synced. For an engine
    with a note writer, leaving episodes are out of view too: the writer reads their turns
    from the store, and no request need carry them while their note is pending."""
    writer = services.note_writer is not None
    key = ("view", len(mirror), writer)
    if (seqs := mirror.episodes.derived.get(key)) is None:
        seqs = view_seqs(len(mirror), mirror.episodes.columns().hidden(leaving=writer))
        mirror.episodes.derived[key] = seqs
    return list(seqs)


def _placed(recalled: Shown, current: dict[int, RecallResult]) -> Shown:
    """The blocks to show: `recalled` with this call's `current` blocks in place of what it
    held for their seqs."""
    out = {seq: b for seq, b in recalled.items() if seq not in current}
    out.update((seq, (r.block, r.size)) for seq, r in current.items() if r.block is not None)
    return out


def forget_and_assemble(
    services: Services,
    tx: Transaction,
    mirror: History,
    call: Decorating,
    memory: MemoryRecord,
    episodes: list[EpisodeRecord],
    current: dict[int, RecallResult],
    *,
    planned: Planned | None = None,
    inline: bool = True,
) -> Assembled | CutFirst:
    """Seal what was acknowledged, fade if the history is over its budget (or the turn
    sleeps), and build the request around the view. `episodes` are as this call found them
    (storing new messages does not change episodes); `current` are the recalls of this call's
    user messages, by seq. A fade that finds history uncut cuts it as `fade_if_needed` says,
    or returns `CutFirst` with what to plan the cut from."""
    known = mirror.cache  # facts, the graph and acknowledgements, kept in step
    known.sync(tx, tx.marks(services.embedder.name))
    acked = {e for e, _ in known.acks}
    sealed_before = {e.n for e in episodes if e.state in ("sealed", "forgotten")}
    leaving_before = {e.n for e in episodes if e.state == "leaving"}
    sealed = seal(tx, mirror, episodes, acked)
    episodes, changed = sealed or episodes, sealed is not None
    shown = shown_seqs(services, mirror)
    since = mirror.turns[shown[0]] if shown else mirror.turn
    current = dict(current)  # this call's blocks, stored once the request is built
    recalled = _placed(blocks_in_view(tx, mirror, shown, since, call.now, call.before), current)
    leaving = any(e.state == "leaving" for e in episodes)
    # One fade at a time, while the leaving turns stand in view for the model to note. Those a
    # note writer answers for are out of view: while its note is pending, a history over its
    # budget fades again rather than outgrow the ceiling (a lane behind, a writer down).
    if not leaving or services.note_writer is not None:
        sizes = {seq: size for seq, (_, size) in recalled.items()}
        faded = fade_if_needed(
            services,
            tx,
            mirror,
            call,
            shown,
            episodes,
            known,
            sizes,
            planned,
            inline,
            sleep=not leaving,
        )
        if isinstance(faded, CutFirst):
            return faded
        if faded:
            episodes, changed = mirror.episodes.sync(tx), True
            shown = shown_seqs(services, mirror)
            # A fade writes no block: those still in view are the ones read above.
            visible = set(shown)
            recalled = {seq: b for seq, b in recalled.items() if seq in visible}
    block, order = _facts_block(tx, mirror, memory, episodes, known, changed, call.now)
    if order is not None and current:  # a changed facts block has its order anew
        current = _beside(current, order or [], services.ceiling)
        recalled = _placed(recalled, current)
    newly_sealed = {e.n for e in episodes if e.state == "sealed"} - sealed_before
    asking = [e for e in episodes if e.state == "leaving" and e.n not in acked]
    # A note writer's leaving turns are out of view while its note is pending: searched
    # meanwhile, as sealed ones are.
    out_of_view = services.note_writer is not None and {e.n for e in asking} - leaving_before
    if newly_sealed or out_of_view:  # the job finds every episode left to cut
        tx.enqueue(JobKind.PASSAGES, b'{"leaving":true}' if out_of_view else b"{}", call.now)
    queued = _queue_note(services, tx, asking, call.now)
    request = _Request(services, mirror, call, shown, block, asking)
    return request.assembled(recalled, current, bool(newly_sealed) or queued)


def _facts_block(
    tx: Transaction,
    mirror: History,
    memory: MemoryRecord,
    episodes: Sequence[EpisodeRecord],
    known: MemoryCache,
    changed: bool,
    now: float,
) -> tuple[str | None, list[int] | None]:
    """The facts block's text, and its order when it changed: computed anew when episodes
    changed state or the graph changed what it should show (and stored), else byte for byte as
    when it last changed."""
    facts, graph = known.facts, known.graph
    if not changed and memory.facts_order is not None and known.block_checked != known.position():
        changed = not is_current(msgspec.json.decode(memory.facts_order), episodes, known)
        if not changed:  # checked again only once the graph or the facts move
            known.block_checked = known.position()
    if changed or (memory.facts_order is None and facts):
        order = facts_order(tx, mirror.trace_log, episodes, known, now)
        block = facts_block_text(facts, order, graph)
        tx.set_facts_order(encode_json(order).decode())
        tx.set_facts_block(block)
        return block, order
    if memory.facts_block is not None or memory.facts_order is None:
        return memory.facts_block, None
    # A store from before the block's text was kept.
    return facts_block_text(facts, msgspec.json.decode(memory.facts_order), graph), None


def _beside(
    current: dict[int, RecallResult], order: Sequence[int], ceiling: int
) -> dict[int, RecallResult]:
    """This call's recall blocks beside a facts block that changed since they ran (and no fact
    in two of them, as when they were recalled)."""
    in_block, shown_earlier = set(order), set[int]()
    limit = block_limit(ceiling)
    out = dict(current)
    for seq in sorted(out):
        out[seq] = out[seq].beside(in_block, shown_earlier, limit)
        shown_earlier.update(out[seq].facts)
    return out


def _queue_note(
    services: Services, tx: Transaction, asking: Sequence[EpisodeRecord], now: float
) -> bool:
    """For an engine with a note writer, which answers in the lane (no ask is sent): queue
    its job when episodes await a note and none is queued. Whether one was.

    The new job supersedes a parked one: a note job carries nothing (it answers whatever
    awaits a note when it runs), so the parked one is finished, not left to pile up one a call
    while the writer stays down; the new job runs at once, as a call after the writer is back
    needs it to."""
    if not asking or services.note_writer is None or tx.pending_job(JobKind.NOTE) is not None:
        return False
    n = tx.enqueue(JobKind.NOTE, b"{}", now)
    for job in tx.jobs("failed"):
        if job.kind == JobKind.NOTE:
            tx.finish_job(job.n, "done", f"superseded by note job {n}: {job.error}")
    return True


class _Request:
    """The request one decorate sends: the caller's request around the view, with the facts
    block after the instructions, the recall blocks before their messages, fadeway's outputs
    for its note calls, and the note ask at the end while episodes await a note."""

    def __init__(
        self,
        services: Services,
        mirror: History,
        call: Decorating,
        shown: list[int],
        block: str | None,
        asking: Sequence[EpisodeRecord],
    ) -> None:
        parsed = call.parsed
        self.services, self.mirror, self.call, self.asking = services, mirror, call, asking
        if stateless(parsed.format, parsed.request):
            shown = resolvable(mirror, shown)  # the request, its size and its key without them
        self.shown = shown
        self.role = instruction_role(parsed.format, parsed.instructions)
        held = note_arguments(mirror, shown)
        limits = services.limits
        too_long = {key for key, args in held.items() if note_bytes(args) > limits.max_note_bytes}
        self.accepted = {
            key: key not in too_long and notes.read_note(args, limits) is not None
            for key, args in held.items()
        }
        self.stubs = _stubbed(mirror, {seq for seq, _ in too_long}, limits)
        self.request, self.ask = parsed.request, None
        writer = services.note_writer is not None  # it answers in the lane; no ask is sent
        if asking and not writer and notes.note_ask_allowed(parsed.request):
            first, *more = ask_spans(asking)
            self.ask = blocks.note_ask(*first, *more)
            self.request = notes.with_note_tool(parsed.format, parsed.request)
        block_messages = [block_message(self.role, block)] if block else []
        self.instructions = [*parsed.instructions, *block_messages]
        self.block = block
        self.fixed = self._fixed()

    def _fixed(self) -> int:
        """Our raw estimate of the request but its recall blocks."""
        call, mirror = self.call, self.mirror
        visible = set(self.shown)
        # Messages of the request beside the stored ones and the blocks: the ask, and fadeway's
        # outputs for its note calls in view.
        added = [
            *([self.ask] if self.ask else []),
            *(
                notes.NOTED if self.accepted.get((seq, call_id), False) else notes.NOTE_NOT_READ
                for seq, ids in mirror.note_calls.items()
                if seq in visible
                for call_id in ids
            ),
        ]
        bare = ParsedRequest(
            call.parsed.format, self.request, self.instructions, [], call.parsed.model
        )
        return (
            tokens.fixed_request_tokens(bare, call.encoding)
            + sum(map(mirror.tokens.__getitem__, self.shown))
            + sum(tokens.count_texts(call.encoding, added))
            + C.TOKENS_PER_MESSAGE * len(added)
        )

    def assembled(
        self, recalled: Shown, current: dict[int, RecallResult], queued: bool
    ) -> Assembled:
        """The request with the recall blocks `recalled` (this call's `current` shrunk to
        keep it under the ceiling)."""
        call, ceiling = self.call, self.services.ceiling
        over = round((self.fixed + sum(s for _, s in recalled.values())) * call.ratio) - ceiling
        if over > 0 and current:
            current = _within_ceiling(call.memory_id, current, over, call.ratio)
            recalled = _placed(recalled, current)
        before = {seq: block_message(self.role, text) for seq, (text, _) in recalled.items()}
        fmt = call.parsed.format
        view = history_view(fmt, self.mirror, self.shown, self.accepted, before, self.stubs)
        if self.ask:
            view.append(block_message(self.role, self.ask))
        estimate = self.fixed + sum(size for _, size in recalled.values())
        if round(estimate * call.ratio) > ceiling:
            self._warn_over(estimate, recalled)
        last = self._last_digest()
        key = Key(estimate, len(self.shown), last)
        out = ParsedRequest(fmt, self.request, self.instructions, view, call.parsed.model)
        texts = [
            *([self.block] if self.block else []),
            *(text for text, _ in recalled.values()),
            *([self.ask] if self.ask else []),
        ]
        return Assembled(wire.assemble(out, view), key, queued, current, texts)

    def _last_digest(self) -> bytes | None:
        """The digest of the view's last stored message as the request shows it (what a report
        finds the request by): a stub's when its note call is shown as one."""
        if not self.shown:
            return None
        seq = self.shown[-1]
        stub = self.stubs.get(seq)
        return digest_of(stub) if stub is not None else self.mirror.digests[seq]

    def _warn_over(self, estimate: int, recalled: Shown) -> None:
        """Log, once a memory for each reason, a request over the ceiling with its figures."""
        mirror, ratio = self.mirror, self.call.ratio
        history = sum(map(mirror.tokens.__getitem__, self.shown))
        blocks_size = sum(size for _, size in recalled.values())
        current = sum(mirror.tokens[mirror.turn_start :]) + sum(
            size for seq, (_, size) in recalled.items() if seq >= mirror.turn_start
        )
        rest = self.fixed - history
        reason, why = self._why_over(round((rest + current) * ratio))
        if reason in mirror.over_ceiling:
            return
        mirror.over_ceiling.add(reason)
        first = mirror.turns[self.shown[0]] if self.shown else mirror.turn
        log.warning(
            "memory %r: a request stands at %d tokens, over the %d-token ceiling, %s: in view "
            "%d messages of turns %d to %d (%d tokens, the turn in progress %d), recall blocks "
            "%d, the instructions, tools, facts block and note ask %d. Logged once for this "
            "memory and reason (%s)",
            self.call.memory_id,
            round(estimate * ratio),
            self.services.ceiling,
            why,
            len(self.shown),
            first,
            mirror.turn,
            round(history * ratio),
            round(current * ratio),
            round(blocks_size * ratio),
            round(rest * ratio),
            reason,
        )

    def _why_over(self, alone: int) -> tuple[str, str]:
        """Why the request stands over the ceiling: a reason's name and its words. `alone` is
        the request with only the turn in progress in view."""
        leaving = [e.n for e in self.asking]
        if self.ask:
            return "asked", f"while episodes {leaving} wait for the model's note (asked)"
        if leaving and self.services.note_writer is None:
            return "held", (
                f"while episodes {leaving} wait for a note (the ask waits for a tool_choice "
                "that lets it out)"
            )
        if alone > self.services.ceiling:
            return "turn", "since the turn in progress alone does not fit beside the fixed part"
        return "forgetting", "which forgetting should have prevented (a bug)"


def _stubbed(mirror: History, seqs: set[int], limits: Limits) -> dict[int, Any]:
    """The stored messages of `seqs` that hold a note call over max_note_bytes, as the view
    shows them: that call's arguments a short stub (`notes.note_stub`). Their stored size is
    the stub's already (`ingest.new_entries`)."""
    out = {}
    for seq in sorted(seqs):
        message = plain(mirror.bodies[seq])
        shown = notes.map_note_arguments(message, partial(notes.note_stub, limits=limits))
        if shown is not message:
            out[seq] = shown
    return out


def _within_ceiling(
    memory_id: str, current: dict[int, RecallResult], over: int, ratio: float
) -> dict[int, RecallResult]:
    """This call's recall blocks shrunk by `over` tokens (corrected) in all, so that the
    request fits under the ceiling: the request that takes the history over its budget still
    holds the turns a fade sends leaving, and the room for the next call leaves out the new
    message and its block (spec: "The ceiling and the landing"). The blocks of earlier messages
    give way first; the last message's, which the reply answers, last."""
    out = dict(current)
    left = math.ceil(over / ratio)
    for seq in sorted(out):
        if left <= 0:
            break
        if out[seq].block is None:
            continue
        size = out[seq].size
        out[seq] = out[seq].within(size - left)
        left -= size - out[seq].size
    short = max(left, 0)
    log.info(
        "memory %r: this call's recall blocks shrunk by %d tokens (%d short) to keep the "
        "request within the ceiling",
        memory_id,
        math.ceil(over / ratio) - short,
        short,
    )
    return out
