"""Forgetting and the view of one decorate: seal what was acknowledged, fade to the landing when
the history is over its budget or the turn sleeps, keep the facts block, and build the request
around the view (MECHANISM: "The ceiling and the landing", "The note ask and sealing",
"Forgetting", "Sleep", "What the model sees").

`Memory.decorate` stores the new messages, then runs `Assembly.forget_and_assemble` in the same
write transaction. The decisions are `forgetting`'s; this module reads the store and the memory's
mirrors for them and writes what they decide.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec
import numpy as np

from .. import _constants as C
from .. import blocks, tokens
from .. import wire as formats
from ..episodes.cut import Cut, commit_cut, plan_read_cut, read_cut
from ..forgetting.fade import (
    Fade,
    ask_spans,
    budget,
    fact_tokens,
    facts_block_text,
    facts_of,
    fade_episodes,
    landing,
    next_call_room,
    silence,
    turn_sizes,
    typical_turn,
)
from ..lane.worker import run_sync
from ..mirror.facts import MemoryCache
from ..mirror.history import History
from ..notes import tool as notes
from ..recall.pipeline import RecallResult
from ..recall.turns import blocks_in_view, fix_finals
from ..records import EpisodeRecord, MemoryRecord, MessageRecord
from ..store import Transaction
from ..wire import Format, ParsedRequest
from ..wire.canonical import encode_json, plain
from . import view as view_mod
from .view import block_message, history_view, instruction_role, resolvable, stateless, view_seqs

if TYPE_CHECKING:
    from ..engine import Engine

__all__ = ["Assembly", "Assembled", "Key", "PlanCut", "Planned", "note_arguments"]

log = logging.getLogger("fadeway")


class Key(NamedTuple):
    """What identifies a decorated request when it is reported: our estimate, and the count
    and last digest of the stored messages in its view."""

    estimate: int
    length: int
    last: bytes | None


CutRead = tuple[list[MessageRecord], int, int, list[MessageRecord]]  # what read_cut reads


class Assembled(NamedTuple):
    """A decorated request, what identifies it, whether it queued lane work on the way
    (episodes sealed, or a note for the engine's note writer), and the recall blocks of this
    call's user messages as the request shows them (by seq)."""

    request: dict[str, Any]
    key: Key
    queued: bool
    recalls: dict[int, RecallResult]


class PlanCut(Exception):
    """Raised inside decorate's write transaction when a fade finds history not yet cut: the
    transaction rolls back, the judge (perhaps a remote model) plans the cut while the store's
    write lock is free, and decorate runs again with the plan. A decorate stays one transaction,
    all or nothing."""

    def __init__(self, read: CutRead) -> None:
        super().__init__("history to cut before the fade")
        self.read = read


class Planned(NamedTuple):
    """A cut planned between transactions, and what it was planned from."""

    read: CutRead
    cut: tuple[list[MessageRecord], Cut] | None


def same_read(a: CutRead, b: CutRead) -> bool:
    """Whether two reads of the history to cut hold the same messages (a plan of one is then
    the plan of the other)."""
    return (
        a[1:3] == b[1:3]
        and [m.digest for m in a[0]] == [m.digest for m in b[0]]
        and [m.digest for m in a[3]] == [m.digest for m in b[3]]
    )


def note_ask_tokens(parsed: ParsedRequest, encoding: str, spans: Sequence[tuple[int, int]]) -> int:
    """What the note ask for the turn `spans` (`ask_spans`) adds to `parsed`: its message and
    the note tool (raw tokens)."""
    bare = ParsedRequest(parsed.format, parsed.request, parsed.instructions, [], parsed.model)
    with_tool = replace(bare, request=view_mod.with_note_tool(parsed.format, parsed.request))
    tool = tokens.fixed_request_tokens(with_tool, encoding) - tokens.fixed_request_tokens(
        bare, encoding
    )
    first, *more = spans
    [ask] = tokens.count_texts(encoding, [blocks.note_ask(*first, *more)])
    return tool + C.TOKENS_PER_MESSAGE + ask


def _placed(
    recalled: dict[int, tuple[str, int]], current: dict[int, RecallResult]
) -> dict[int, tuple[str, int]]:
    """The blocks to show by seq (text and size): `recalled` with this call's `current` blocks
    in place of what it held for their seqs."""
    out = {seq: b for seq, b in recalled.items() if seq not in current}
    out.update((seq, (r.block, r.size)) for seq, r in current.items() if r.block is not None)
    return out


def note_arguments(
    history: History, seqs: Collection[int] | None = None
) -> dict[tuple[int, str], str]:
    """Arguments of the note calls in the stored history (those in the messages `seqs` when
    given: a long memory holds many, and most left the view long ago), by message and call id,
    in the order made."""
    out: dict[tuple[int, str], str] = {}
    held = history.note_calls.keys()
    for seq in sorted(held if seqs is None else held & set(seqs)):
        body = plain(history.bodies[seq])
        fmt = Format.RESPONSES if body.get("type") == "function_call" else Format.CHAT_COMPLETIONS
        out.update(((seq, call_id), args) for call_id, args in notes.find_note_calls(fmt, [body]))
    return out


class Assembly:
    """The forgetting and the view of one memory's decorate (hold the mirror's lock)."""

    def __init__(self, engine: Engine, memory_id: str, history: History) -> None:
        self.engine = engine
        self.memory_id = memory_id
        self.history = history

    def forget_and_assemble(
        self,
        tx: Transaction,
        parsed: ParsedRequest,
        memory: MemoryRecord,
        episodes: list[EpisodeRecord],
        encoding: str,
        now: float,
        before: int,
        current: dict[int, RecallResult] | None = None,
        *,
        planned: Planned | None = None,
        inline: bool = True,
    ) -> Assembled:
        """Seal what was acknowledged, fade if the history is over its budget (or the turn
        sleeps), and build the request around the view. `episodes` are as this call found them
        (storing new messages does not change episodes). Also says whether episodes sealed
        (their passages are then queued).

        A fade that finds history uncut uses the `planned` cut when it was planned from the
        same messages, cuts `inline` (the judge runs inside this transaction), or else raises
        `PlanCut` with what to plan the cut from."""
        fmt, mirror = parsed.format, self.history
        ratio = tx.last_kept_ratio(parsed.model) or 1.0
        known = mirror.cache  # facts, the graph and acknowledgements, kept in step
        known.sync(tx)
        acked = {e for e, _ in known.acks}
        facts, graph = known.facts, known.graph
        sealed_before = {e.n for e in episodes if e.state in ("sealed", "forgotten")}
        seal = {
            e.n: "sealed"
            for e in episodes
            if e.state == "leaving" and e.n in acked and e.last_turn < mirror.turn
        }
        if seal:
            tx.set_episode_states(seal)
            episodes = mirror.episodes.sync(tx)
        changed = bool(seal)
        shown = self.shown()
        since = mirror.turns[shown[0]] if shown else mirror.turn
        fix_finals(tx, mirror, since, now)
        current = dict(current or {})  # this call's blocks, stored once the request is built
        recalled = _placed(blocks_in_view(tx, mirror, shown, since), current)
        if not any(e.state == "leaving" for e in episodes):
            sizes = {seq: size for seq, (_, size) in recalled.items()}
            faded = self._fade_if_needed(
                tx,
                parsed,
                shown,
                episodes,
                known,
                encoding,
                ratio,
                now,
                before,
                sizes,
                planned,
                inline,
            )
            if faded:
                episodes, changed = mirror.episodes.sync(tx), True
                shown = self.shown()
                # A fade writes no block: those still in view are the ones read above.
                visible = set(shown)
                recalled = {seq: b for seq, b in recalled.items() if seq in visible}
        if changed or (memory.facts_order is None and facts):
            order = self._facts_order(tx, episodes, known, now)
            block = facts_block_text(facts, order, graph)
            tx.set_facts_order(encode_json(order).decode())
            tx.set_facts_block(block)
        elif memory.facts_block is not None or memory.facts_order is None:
            block = memory.facts_block  # byte for byte as when it last changed
        else:  # a store from before the block's text was kept
            block = facts_block_text(facts, msgspec.json.decode(memory.facts_order), graph)
        if changed and current:
            # Recall ran before this call sealed or faded: its blocks beside the new facts block
            # (and no fact in two of them, as when they were recalled).
            in_block, shown_earlier = set(order), set[int]()
            limit = self.engine.ceiling * C.RECALL_BLOCK_SHARE
            for seq in sorted(current):
                current[seq] = current[seq].beside(in_block, shown_earlier, limit)
                shown_earlier.update(current[seq].facts)
            recalled = _placed(recalled, current)
        newly_sealed = {e.n for e in episodes if e.state == "sealed"} - sealed_before
        if newly_sealed:
            tx.enqueue("passages", b"{}", now)  # the job finds every sealed episode left
        if stateless(fmt, parsed.request):
            shown = resolvable(mirror, shown)  # the request, its size and its key without them
        role = instruction_role(fmt, parsed.instructions)
        accepted = {
            key: notes.parse_note_arguments(args) is not None
            for key, args in note_arguments(self.history, shown).items()
        }
        asking = [e for e in episodes if e.state == "leaving" and e.n not in acked]
        request = parsed.request
        ask = None
        writer = self.engine.note_writer is not None  # it answers in the lane; no ask is sent
        queued = bool(asking) and writer and tx.pending_job("note") is None
        if queued:
            tx.enqueue("note", b"{}", now)
        if asking and not writer and view_mod.note_ask_allowed(request):
            first, *more = ask_spans(asking)
            ask = blocks.note_ask(*first, *more)
            request = view_mod.with_note_tool(fmt, request)
        instructions = [*parsed.instructions, *([block_message(role, block)] if block else [])]
        # Messages of the request beside the stored ones and the blocks: the ask, and fadeway's
        # outputs for its note calls in view.
        visible = set(shown)
        added = [
            *([ask] if ask else []),
            *(
                notes.NOTED if accepted.get((seq, call_id), False) else notes.NOTE_NOT_READ
                for seq, ids in mirror.note_calls.items()
                if seq in visible
                for call_id in ids
            ),
        ]
        fixed = (
            tokens.fixed_request_tokens(
                ParsedRequest(fmt, request, instructions, [], parsed.model), encoding
            )
            + sum(map(mirror.tokens.__getitem__, shown))
            + sum(tokens.count_texts(encoding, added))
            + C.TOKENS_PER_MESSAGE * len(added)
        )
        shown_blocks = sum(size for _, size in recalled.values())
        over = round((fixed + shown_blocks) * ratio) - self.engine.ceiling
        if over > 0 and current:
            current = self._within_ceiling(current, over, ratio)
            recalled = _placed(recalled, current)
        view = history_view(
            fmt,
            mirror,
            shown,
            accepted,
            {seq: block_message(role, text) for seq, (text, _) in recalled.items()},
        )
        if ask:
            view.append(block_message(role, ask))
        estimate = fixed + sum(size for _, size in recalled.values())
        if asking and round(estimate * ratio) > self.engine.ceiling:
            log.warning(
                "memory %r: the request stands at %d tokens, over the %d-token ceiling, "
                "while episodes %s wait for a note (%s); no fade starts until it comes",
                self.memory_id,
                round(estimate * ratio),
                self.engine.ceiling,
                [e.n for e in asking],
                "asked"
                if ask
                else "the note writer answers in the lane"
                if writer
                else "the ask waits for a tool_choice that lets it out",
            )
        key = Key(estimate, len(shown), mirror.digests[shown[-1]] if shown else None)
        out = ParsedRequest(fmt, request, instructions, view, parsed.model)
        return Assembled(formats.assemble(out, view), key, bool(newly_sealed) or queued, current)

    def _within_ceiling(
        self, current: dict[int, RecallResult], over: int, ratio: float
    ) -> dict[int, RecallResult]:
        """This call's recall blocks shrunk by `over` tokens (corrected) in all, so that the
        request fits under the ceiling: the request that takes the history over its budget
        still holds the turns a fade sends leaving, and the room for the next call leaves out
        the new message and its block (spec: "The ceiling and the landing"). The blocks of
        earlier messages give way first; the last message's, which the reply answers, last."""
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
            self.memory_id,
            math.ceil(over / ratio) - short,
            short,
        )
        return out

    def _fade_if_needed(
        self,
        tx: Transaction,
        parsed: ParsedRequest,
        shown: list[int],
        episodes: Sequence[EpisodeRecord],
        known: MemoryCache,
        encoding: str,
        ratio: float,
        now: float,
        before: int,
        block_sizes: dict[int, int],
        planned: Planned | None,
        inline: bool,
    ) -> bool:
        """Run a fade to the landing when the history is over its budget, or the turn sleeps.

        `shown`, `episodes` and `known` are the memory's as this decorate stands (seals
        applied): the seqs in view, the episodes, and the facts, graph and acks. History is cut
        first if it was not yet (`forget_and_assemble` says how).
        """
        mirror, engine = self.history, self.engine
        history_tokens = round(
            (sum(map(mirror.tokens.__getitem__, shown)) + sum(block_sizes.values())) * ratio
        )
        sealed_facts = facts_of(
            episodes, known.facts, known.episode_facts, states=("sealed",), graph=known.graph
        )
        # The block shows each fact once, however many sealed episodes hold it.
        fact_sizes = fact_tokens(
            list({f.n: f for fs in sealed_facts.values() for f in fs}.values()), encoding, ratio
        )
        bare = tokens.fixed_request_tokens(parsed, encoding)
        # The request a fade sends episodes leaving in carries the ask and the note tool. The
        # ask names those episodes' turns: until the fade has picked them it is counted naming
        # one span of turns, as a fade of the oldest episodes asks (or a token more).
        asks = self.engine.note_writer is None and view_mod.note_ask_allowed(parsed.request)
        ask = note_ask_tokens(parsed, encoding, [(mirror.turn, mirror.turn + 1)]) if asks else 0
        fixed = round((bare + ask) * ratio)
        block = sum(fact_sizes.values())
        sizes, steps = turn_sizes(mirror, ratio, block_sizes)
        typical, room = typical_turn(sizes), next_call_room(steps)
        current = round(
            (sum(mirror.tokens[mirror.turn_start :]) + block_sizes.get(mirror.turn_start, 0))
            * ratio
        )
        plan = budget(engine.ceiling, fixed + block, room, typical, current)

        def beside(fixed: int) -> tuple[bool, int]:
            """Whether the current turn fits beside a facts block forgetting could empty: then
            a block too large for it gives way (the fade goes on below the budget, not only the
            landing, which stops at the current turn), keeping what room for the next call it
            can (a large recent step may leave none); else forgetting the block gains nothing.
            And that room."""
            return current <= engine.ceiling - fixed, min(room, engine.ceiling - fixed - current)

        fits, _ = beside(fixed)
        silent = silence(mirror, before)
        sleeping = silent >= C.SLEEP_GAP_SECONDS
        if history_tokens <= plan.budget and not sleeping:
            return False
        if history_tokens <= plan.landing and (not fits or history_tokens <= plan.budget):
            return False  # asleep, but already at the landing: nothing to fade
        # History is cut once, when forgetting first needs it.
        read = read_cut(tx, mirror.turn_start)
        if read is not None:
            if planned is not None and same_read(planned.read, read):
                commit_cut(tx, planned.cut, now)
            elif inline:
                commit_cut(
                    tx,
                    run_sync(
                        plan_read_cut(
                            engine, read, deadline=time.monotonic() + C.INLINE_CUT_DEADLINE
                        )
                    ),
                    now,
                )
            else:
                raise PlanCut(read)
        if sleeping:
            log.info(
                "memory %r: the turn sleeps after %.1f h of silence; fading to the landing",
                self.memory_id,
                silent / 3600,
            )
        mirror.episodes.sync(tx)
        mirror.trace_log.sync(tx)
        acked = {e for e, _ in known.acks}
        holding = {n: [f.n for f in fs] for n, fs in sealed_facts.items()}

        def pick(fixed: int) -> Fade:
            fits, room_left = beside(fixed)
            return fade_episodes(
                mirror.episodes.columns(),
                lambda numbers: mirror.trace_log.activation(numbers, now),
                block_sizes,
                holding,
                fact_sizes,
                ratio,
                history_tokens,
                block,
                lambda b: landing(engine.ceiling, fixed + b, room, typical, current),
                (lambda b: np.maximum(0, engine.ceiling - fixed - b - room_left)) if fits else None,
            )

        for _ in range(C.FADE_ASK_PASSES):
            picked = pick(fixed)
            states = {
                n: ("sealed" if n in acked else "leaving") if live else "forgotten"
                for n, live in zip(picked.numbers.tolist(), picked.live.tolist(), strict=True)
            }
            leaving = [n for n, state in states.items() if state == "leaving"]
            if not asks or not leaving:
                break
            # Episodes apart make an ask of several spans: pick again with the fixed part it
            # makes (the lower landing picks a longer prefix of the order, whose ask may be
            # longer still, hence a few passes).
            needed = note_ask_tokens(parsed, encoding, ask_spans(mirror.episodes.records(leaving)))
            if needed <= ask:
                break
            ask = needed
            fixed = round((bare + ask) * ratio)
        history_tokens -= picked.history_cut
        block -= picked.block_cut
        plan = budget(engine.ceiling, fixed + block, room, typical, current)
        if states:
            tx.set_episode_states(states)
            log.info(
                "memory %r: fade to the landing (%d tokens), projected view %d tokens%s: %s",
                self.memory_id,
                plan.landing,
                history_tokens,
                ""
                if history_tokens <= min(plan.landing, plan.budget)
                else " (nothing more to fade)",
                ", ".join(f"episode {n} {s}" for n, s in states.items()),
            )
        return bool(states)

    def _facts_order(
        self, tx: Transaction, episodes: Sequence[EpisodeRecord], known: MemoryCache, now: float
    ) -> list[int]:
        """The facts block's facts (those of sealed episodes, each as the held fact it stands
        as, retired ones left out), most active first. A held fact's activation counts the
        traces of the restatements merged into it."""
        shown = {
            f.n
            for fs in facts_of(
                episodes, known.facts, known.episode_facts, states=("sealed",), graph=known.graph
            ).values()
            for f in fs
        }
        if not shown:
            return []
        ns = sorted(shown)
        log = self.history.trace_log
        log.sync(tx)
        act = log.activation(ns, now, by="fact", fact_key=known.graph.root)
        return [
            n for _, n in sorted(zip(act.tolist(), ns, strict=True), key=lambda p: (-p[0], -p[1]))
        ]

    def shown(self) -> list[int]:
        """The seqs of the stored messages in view, by the episodes as last synced."""
        return view_seqs(len(self.history), self.history.episodes.columns().hidden())
