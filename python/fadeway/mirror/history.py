"""Messages, turns and units of a memory's history (MECHANISM: "Episodes"), and the alignment
rule that recognises what a sent history already holds (ARCHITECTURE: "Recognising what is
stored").
"""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import HistoryConflictError
from ..notes.tool import find_note_calls, is_note_call
from ..records import MessageRecord, Unit
from ..wire import Format, Side, text_of
from ..wire.canonical import digest_of, encode_json, plain, to_plain
from ..wire.responses import CLIENT_CALL_TYPES
from .episode_table import EpisodeTable
from .facts import MemoryCache
from .trace_log import TraceLog

__all__ = ["History", "align", "digests_of_sent", "opens_unit", "units", "next_turns"]


class PendingCalls:
    """Calls waiting for their outputs, which providers require right after the reply that
    made them: each Chat Completions tool call on its own, each Responses call item the caller
    runs as one call (a `local_shell_call` names itself by two ids, either answers it). Items the
    caller may answer or not (an MCP approval request, a tool search) and fadeway's own note
    calls wait for nothing; an answer to them is still taken once."""

    def __init__(self) -> None:
        self._by_id: dict[str, tuple[str, str]] = {}  # id -> (the call's first id, where made)
        self._optional: set[str] = set()  # ids of items that may be answered, once, or not

    def __bool__(self) -> bool:
        return bool(self._by_id)

    def copy(self) -> PendingCalls:
        out = PendingCalls()
        out._by_id, out._optional = dict(self._by_id), set(self._optional)
        return out

    def made(self, kind: str, calls: Sequence[str], where: str, own: Container[str]) -> None:
        """A message (`kind` "message") or Responses item made `calls`, none of them `own`."""
        groups: list[tuple[str, ...]]
        if kind == "message":
            groups = [(c,) for c in calls if c not in own]
        elif kind in CLIENT_CALL_TYPES and not any(c in own for c in calls):
            groups = [tuple(calls)]
        else:  # an MCP approval request, a tool search: an answer is allowed, not required
            groups = []
            self._optional.update(c for c in calls if c not in own)
        for group in groups:
            for call_id in group:
                self._by_id[call_id] = (group[0], where)

    def answer(self, call_id: str) -> bool:
        """An output answers `call_id`; whether its call was waiting (or allowed an answer)."""
        hit = self._by_id.get(call_id)
        if hit is None:
            if call_id in self._optional:
                self._optional.discard(call_id)
                return True
            return False
        for other in [c for c, (first, _) in self._by_id.items() if first == hit[0]]:
            del self._by_id[other]
        return True

    def waiting(self) -> dict[str, str]:
        """Each waiting call (by its first id) and where it was made."""
        return {first: where for first, where in self._by_id.values()}


@dataclass
class History:
    """The stored history of one memory, mirrored in memory and kept in step with the store.

    Messages are append-only, so the mirror only ever grows; `sync` reads just the new tail.
    """

    digests: list[bytes] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    sides: list[str] = field(default_factory=list)
    ats: list[float] = field(default_factory=list)
    body_bytes: int = 0  # the bodies' total size, which an engine's mirrors share a budget of
    #: The messages that make note calls: seq → the ids of its note calls. Some providers number
    #: calls from 0 again every turn, so an id alone does not tell which call it is.
    note_calls: dict[int, tuple[str, ...]] = field(default_factory=dict)
    turn: int = 0  # the turn of the last stored message
    turn_start: int = 0  # seq of the first message of that turn: the turn in progress
    makers: dict[str, int] = field(default_factory=dict)  # call id → seq of its latest call
    row_calls: list[tuple[str, ...]] = field(default_factory=list)  # the calls each message makes
    row_answers: list[str | None] = field(default_factory=list)  # the call each output answers
    row_kinds: list[str] = field(default_factory=list)  # "message", or the Responses item type
    user_seqs: list[int] = field(default_factory=list)  # the user messages, in order
    #: The calls of the turn in progress that wait for their outputs, kept as messages come.
    pending: PendingCalls = field(default_factory=PendingCalls, repr=False, compare=False)
    #: The memory's trace log as columns, synced by whoever reads it (the fade, the facts order).
    trace_log: TraceLog = field(default_factory=TraceLog, repr=False, compare=False)
    #: The memory's episodes as records and columns, synced by whoever reads them.
    episodes: EpisodeTable = field(default_factory=EpisodeTable, repr=False, compare=False)
    #: The memory's facts, graph and acknowledgements, synced by decorate.
    cache: MemoryCache = field(default_factory=MemoryCache, repr=False, compare=False)
    #: Held by whoever reads or extends this mirror (one decorate or report at a time).
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.digests)

    def clear(self) -> None:
        for part in (
            self.digests,
            self.sources,
            self.bodies,
            self.tokens,
            self.turns,
            self.sides,
            self.ats,
            self.note_calls,
            self.makers,
            self.row_calls,
            self.row_answers,
            self.row_kinds,
            self.user_seqs,
        ):
            part.clear()
        self.pending = PendingCalls()
        self.turn = self.turn_start = self.body_bytes = 0

    def truncate(self, count: int) -> None:
        """Drop the messages from seq `count` on, as if they had never been extended."""
        if count >= len(self):
            return
        self.body_bytes -= sum(map(len, self.bodies[count:]))
        for part in (
            self.digests,
            self.sources,
            self.bodies,
            self.tokens,
            self.turns,
            self.sides,
            self.ats,
            self.row_calls,
            self.row_answers,
            self.row_kinds,
        ):
            del part[count:]
        for seq in [s for s in self.note_calls if s >= count]:
            del self.note_calls[seq]
        if any(seq >= count for seq in self.makers.values()):
            self.makers = {c: s for s, calls in enumerate(self.row_calls) for c in calls}
        del self.user_seqs[bisect.bisect_left(self.user_seqs, count) :]
        self.turn = self.turns[-1] if count else 0
        start = count
        while start and self.turns[start - 1] == self.turn:
            start -= 1
        self.turn_start = start
        self.pending = PendingCalls()
        for seq in range(start, count):
            self._pend(seq)

    def mark(self) -> tuple[int, int, int, tuple[int, ...]]:
        """Where the mirrors stand, to `roll_back` to after a write that rolled back."""
        return len(self), self.trace_log.last, self.episodes.changes, self.cache.position()

    def roll_back(self, mark: tuple[int, int, int, tuple[int, ...]]) -> None:
        """Bring the mirrors back to `mark`: the messages appended since are dropped, and a
        mirror of the trace log, the episodes or the facts that read past it is read again
        whole."""
        count, last, changes, position = mark
        self.truncate(count)
        if self.trace_log.last != last:
            self.trace_log.clear()
        if self.episodes.changes != changes:
            self.episodes.clear()
        if self.cache.position() != position:
            self.cache = MemoryCache()

    def reset(self) -> None:
        """Forget everything mirrored (after a write transaction that failed, whose rows the
        mirrors may hold): the next sync reads the store again."""
        self.clear()
        self.trace_log.clear()
        self.episodes.clear()
        self.cache = MemoryCache()

    def extend(self, rows: Iterable[MessageRecord]) -> None:
        for r in rows:
            self.digests.append(r.digest)
            self.sources.append(r.source)
            self.bodies.append(r.body)
            self.body_bytes += len(r.body)
            self.tokens.append(r.tokens)
            self.turns.append(r.turn)
            self.sides.append(r.side)
            self.ats.append(r.at)
            self.makers.update(dict.fromkeys(r.calls, r.seq))
            self.row_calls.append(r.calls)
            self.row_answers.append(r.answers)
            self.row_kinds.append(r.kind)
            if r.side == Side.USER:
                self.user_seqs.append(r.seq)
            if ids := note_call_ids(r.calls, r.body):
                self.note_calls[r.seq] = ids
            if r.turn != self.turn:
                self.turn, self.turn_start = r.turn, r.seq
            self._pend(r.seq)

    def _pend(self, seq: int) -> None:
        """Bring `pending` up to date with stored message `seq`."""
        answered = self.row_answers[seq]
        if self.sides[seq] == Side.USER:
            self.pending = PendingCalls()
        elif answered is not None:
            self.pending.answer(answered)
        elif self.row_calls[seq]:
            self.pending.made(
                self.row_kinds[seq],
                self.row_calls[seq],
                f"made in stored message {seq}",
                self.note_calls.get(seq, ()),
            )

    def answers_note(self, call_id: str) -> bool:
        """Whether an output for `call_id` answers a note call: the latest stored call so named."""
        return call_id in self.note_calls.get(self.makers.get(call_id, -1), ())

    def sync(self, stored_count: int, fetch: Any) -> None:
        """Bring the mirror up to `stored_count` messages; `fetch(start)` returns the rows."""
        if stored_count < len(self):  # the store was replaced under us: start over
            self.clear()
        if stored_count > len(self):
            self.extend(fetch(len(self)))


def note_call_ids(calls: Sequence[str], body: bytes) -> tuple[str, ...]:
    """Ids of the note calls a stored message (making `calls`, as JSON `body`) makes, in either
    wire format; a message without a call or the word "note" is not decoded."""
    if not calls or b'"note"' not in body:
        return ()
    message = plain(body)
    fmt = Format.RESPONSES if message.get("type") == "function_call" else Format.CHAT_COMPLETIONS
    return tuple(call_id for call_id, _ in find_note_calls(fmt, [message]))


#: Fields of a Chat Completions reply that hold the model's reasoning (DeepSeek, vLLM,
#: OpenRouter): callers and frameworks that keep only role, content and calls leave them out.
_REASONING_FIELDS = frozenset({"reasoning_content", "reasoning", "reasoning_details", "thinking"})


def _essence(message: Any) -> tuple:
    """What makes a reply the same reply: role, kind, texts and call ids, nothing cosmetic nor
    the reasoning beside its text."""
    if not isinstance(message, dict):
        return ()
    calls = [c.get("id") for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    said = {k: v for k, v in message.items() if k not in _REASONING_FIELDS}
    return (
        message.get("role"),
        message.get("type") or "message",
        tuple(map(_json_text, text_of(said))),
        tuple(calls),
        message.get("call_id"),
    )


def _alike(sent: Any, stored: Any) -> bool:
    """Whether a sent message stands for a stored reply (`_essence`). A reasoning item, whose
    summary may be empty, is also told by its id or its encrypted content, the first that both
    carry (some clients send reasoning back without its id)."""
    if _essence(sent) != _essence(stored):
        return False
    if isinstance(sent, dict) and sent.get("type") == "reasoning":
        for key in ("id", "encrypted_content"):
            mine, theirs = sent.get(key), stored.get(key)
            if mine is not None and theirs is not None:
                return bool(mine == theirs)
    return True


def _json_text(text: str) -> str:
    """A text that is a JSON object or array (a call's arguments), as compact canonical JSON:
    frameworks re-serialise arguments with other spacing or key order."""
    if not text.startswith(("{", "[")):
        return text
    try:
        return json.dumps(
            json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
    except ValueError:
        return text


def digests_of_sent(sent: Sequence[Any], history: History, view: Sequence[int]) -> list[bytes]:
    """The digest of each sent message, as `digest_of` gives it. A message whose JSON as sent is
    byte for byte the stored body at its place (in the stored history, or in the last view) has
    that message's digest: encoding it costs a fraction of canonicalising and hashing it, and a
    caller that resends the whole history resends mostly such messages."""
    out = []
    for i, m in enumerate(sent):
        places = [j for j in (i, view[i] if i < len(view) else -1) if 0 <= j < len(history)]
        digest = None
        if places:
            try:
                body = encode_json(m)
            except (TypeError, msgspec.EncodeError, ValueError):
                body = None  # digest_of says what is wrong with it
            digest = next((history.digests[j] for j in places if history.bodies[j] == body), None)
        out.append(digest if digest is not None else digest_of(m, f"message {i}"))
    return out


def _without_note_calls(message: Any) -> dict[str, Any] | None:
    """A stored reply as a caller rebuilding it from `report`'s tool calls sends it: without
    fadeway's note calls. None when nothing else is left (a Responses note call item, or a Chat
    reply that held only the note)."""
    if not isinstance(message, dict):
        return message
    if message.get("type") == "function_call":
        return None if is_note_call(Format.RESPONSES, message) else message
    calls = [
        c for c in message.get("tool_calls") or [] if not is_note_call(Format.CHAT_COMPLETIONS, c)
    ]
    rest = {**message, "tool_calls": calls}
    if not calls and not text_of(rest):  # the note's name and arguments are texts too
        return None
    return rest


#: Messages after a differing first one that, all equal to the stored ones, show a resent
#: history with its first message edited (a delta holds new messages, not stored ones).
_EDIT_EVIDENCE = 2


def align(
    sent: Sequence[Any],
    sent_digests: Sequence[bytes],
    history: History,
    decorated_through: int,
    view: Sequence[int] = (),
) -> int:
    """How many leading messages of `sent` are already stored; the rest are new.

    The sent history is aligned with the stored one by position. When it starts with the stored
    history (or with the view the last decorate returned, whose sealed turns had left), the rest
    is new. When it does not, it is only the new messages, less an echo of the replies `report`
    stored since the last decorate. A reply the caller rebuilt by hand (same role, text and
    calls) counts as the stored reply, and so does one rebuilt from `report`'s tool calls, which
    leave out the note's: a stored reply item that held only note calls may be missing. A sent
    history that starts like the stored one and then departs from it is an edited history, and
    an error.
    """
    n_stored = len(history)
    if n_stored == 0 or not sent:
        return 0
    noted = history.note_calls

    def same(i: int, j: int) -> bool:
        if sent_digests[i] == history.digests[j]:
            return True
        if history.sources[j] != "reply":
            return False
        mine = to_plain(sent[i], "message")
        stored = plain(history.bodies[j])
        return _alike(mine, stored) or (j in noted and _alike(mine, _without_note_calls(stored)))

    def may_be_missing(j: int) -> bool:
        """A stored item a rebuilt history may leave out: a reasoning item (a client without its
        encrypted content cannot send it back, nor does a `store: false` view hold it), or a
        reply item that held only note calls."""
        if history.row_kinds[j] == "reasoning":
            return True
        return (
            j in noted
            and history.sources[j] == "reply"
            and _without_note_calls(plain(history.bodies[j])) is None
        )

    def matched(seqs: Sequence[int], k: int, j: int) -> tuple[int, int]:
        """Sent from `k` on against `seqs` from `j` on, as far as they agree: where each
        stopped."""
        while k < len(sent) and j < len(seqs):
            if same(k, seqs[j]):
                k, j = k + 1, j + 1
            elif may_be_missing(seqs[j]):
                j += 1
            else:
                break
        if k == len(sent):
            while j < len(seqs) and may_be_missing(seqs[j]):
                j += 1
        return k, j

    for seqs in (range(n_stored), view):
        if not seqs:
            continue
        first = 0  # a view may open with items the sent history leaves out
        while first + 1 < len(seqs) and not same(0, seqs[first]) and may_be_missing(seqs[first]):
            first += 1
        if not same(0, seqs[first]):
            if min(len(seqs) - first, len(sent)) > _EDIT_EVIDENCE and all(
                same(k, seqs[first + k]) for k in range(1, _EDIT_EVIDENCE + 1)
            ):
                raise HistoryConflictError(
                    f"message 0 of the sent history differs from stored message {seqs[first]}, "
                    "though the messages after it are the stored ones: earlier messages "
                    "cannot be edited. To send only new messages, leave out what was sent "
                    "before."
                )
            continue
        k, j = matched(seqs, 1, first + 1)
        if k < len(sent) and j < len(seqs):
            raise HistoryConflictError(
                f"message {k} of the sent history differs from stored message {seqs[j]}; a "
                "history that starts like the stored one must continue it unchanged (earlier "
                "messages cannot be edited). To send only new messages, leave out what was "
                "sent before."
            )
        if j == len(seqs) or j >= decorated_through:
            return k
        # A short run equal to the stored head, sent after the history moved on: new messages.
        break
    k, _ = matched(range(decorated_through, n_stored), 0, 0)
    return k


def next_turns(turn: int, sides: Iterable[Side]) -> list[int]:
    """Turn numbers for new messages after `turn`: each user message starts the next turn."""
    out = []
    for side in sides:
        if side is Side.USER:
            turn += 1
        out.append(turn)
    return out


def opens_unit(side: str, before: str | None) -> bool:
    """Whether a message on `side`, after one on `before` (None: it is the first), starts a
    unit: every user (or mid-history system) message, and the first item of an assistant step
    (after a user message, a system message or an output). Sides compare as `Side` values."""
    return (
        before is None
        or side in (Side.USER, Side.SYSTEM)
        or (side == Side.ASSISTANT and before in (Side.USER, Side.SYSTEM, Side.OUTPUT))
    )


def units(messages: Sequence[MessageRecord]) -> list[Unit]:
    """Cut stored messages into units: a user (or mid-history system) message alone, or an
    assistant step (consecutive assistant messages, calls and reasoning) with the outputs after it.

    An output always lands in the unit of the call it answers: should anything stand between
    them, the units from the call to the output become one, so no cut can separate them.
    """
    groups: list[list[MessageRecord]] = []
    unit_of_call: dict[str, int] = {}
    for i, m in enumerate(messages):
        if opens_unit(m.side, messages[i - 1].side if i else None):
            groups.append([])
        groups[-1].append(m)
        for call in m.calls:
            unit_of_call[call] = len(groups) - 1
        home = unit_of_call.get(m.answers) if m.answers is not None else None
        if home is not None and home < len(groups) - 1:
            merged = [r for g in groups[home:] for r in g]
            del groups[home:]
            groups.append(merged)
            for call, g in unit_of_call.items():
                if g > home:
                    unit_of_call[call] = home
    return [Unit(g[0].seq, g[-1].seq, g[0].turn, sum(r.tokens for r in g)) for g in groups]
