"""Recognising what a sent history already holds (ARCHITECTURE: "Recognising what is stored").

The sent history is aligned with the stored history by position: where its first n messages
equal the n stored ones, the rest is new; where it does not start with the stored history, it
is taken as only the new messages. A sent history that contradicts the stored one (an edited
earlier message) is refused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any

import msgspec

from .. import _constants as C
from ..errors import HistoryConflictError
from ..mirror.history import History
from ..notes.tool import map_note_arguments, message_without_notes
from ..wire import text_of
from ..wire.canonical import digest_of, encode_json, plain, sorted_plain, to_plain
from ..wire.limits import Limits

__all__ = ["align", "digests_of_sent"]


#: Fields of a Chat Completions reply that hold the model's reasoning (DeepSeek, vLLM,
#: OpenRouter): callers and frameworks that keep only role, content and calls leave them out.
_REASONING_FIELDS = frozenset({"reasoning_content", "reasoning", "reasoning_details", "thinking"})


def _essence(message: Any) -> tuple:
    """What makes a reply the same reply: role, kind, texts and call ids, nothing cosmetic nor
    the reasoning beside its text. Texts are read in sorted key order: a call rebuilt with its
    `name` before its `arguments` is the same call."""
    if not isinstance(message, dict):
        return ()
    calls = [c.get("id") for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    said = {k: v for k, v in message.items() if k not in _REASONING_FIELDS}
    return (
        message.get("role"),
        message.get("type") or "message",
        tuple(map(_json_text, text_of(sorted_plain(said)))),
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


def _without_empty_content(message: Any) -> Any:
    """A Chat Completions assistant message with tool calls, without its content when that is
    "", None or absent, which mean the same there (a streamed reply joins "" where the SDK
    object has None); None for any other message."""
    if (
        isinstance(message, dict)
        and message.get("role") == "assistant"
        and message.get("tool_calls")
        and message.get("content") in ("", None)
    ):
        return {k: v for k, v in message.items() if k != "content"}
    return None


def _same_but_notes(sent: Any, stored: Any) -> bool:
    """Whether `sent` is `stored` but for the arguments of their note calls, as a view that
    showed a note call too large for it as a stub (`notes.note_stub`) is sent back."""
    blank = partial(map_note_arguments, change=lambda _: "")
    mine, theirs = blank(sent), blank(stored)
    return mine is not sent and theirs is not stored and digest_of(mine) == digest_of(theirs)


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


def digests_of_sent(
    sent: Sequence[Any], history: History, view: Sequence[int], limits: Limits
) -> list[bytes]:
    """The digest of each sent message, as `digest_of` gives it, each message within
    max_message_bytes (checked on its JSON as sent, before anything else reads it whole). A
    message whose JSON as sent is byte for byte the stored body at its place (in the stored
    history, or in the last view) has that message's digest: encoding it costs a fraction of
    canonicalising and hashing it, and a caller that resends the whole history resends mostly
    such messages."""
    out = []
    for i, m in enumerate(sent):
        places = [j for j in (i, view[i] if i < len(view) else -1) if 0 <= j < len(history)]
        try:
            body = encode_json(m)
        except (TypeError, msgspec.EncodeError, ValueError, RecursionError):
            body = None  # digest_of says what is wrong with it
        digest = None
        if body is not None:
            limits.check_body(body, f"message {i}")
            digest = next((history.digests[j] for j in places if history.bodies[j] == body), None)
        out.append(digest if digest is not None else digest_of(m, f"message {i}"))
    return out


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
    if len(history) == 0 or not sent:
        return 0
    alignment = _Alignment(sent, sent_digests, history)
    for seqs in (range(len(history)), view):
        if not seqs:
            continue
        k = alignment.head(seqs, decorated_through)
        if k == _NEW:
            break
        if k is not None:
            return k
    k, _ = alignment.matched(range(decorated_through, len(history)), 0, 0)
    return k


#: `_Alignment.head`'s answer for a short run equal to the stored head, sent after the history
#: moved on: new messages, not a resent history.
_NEW = -1


class _Alignment:
    """A sent history against the stored one, message by message."""

    def __init__(self, sent: Sequence[Any], digests: Sequence[bytes], history: History) -> None:
        self.sent, self.digests, self.history = sent, digests, history

    def same(self, i: int, j: int) -> bool:
        """Whether sent message `i` stands for stored message `j`."""
        history = self.history
        if self.digests[i] == history.digests[j]:
            return True
        quiet = _without_empty_content(self.sent[i])
        if quiet is not None and self._quiet_equal(quiet, j):
            return True
        noted = j in history.note_calls
        if history.sources[j] != "reply" and not noted:
            return False
        mine = to_plain(self.sent[i], "message")
        stored = plain(history.bodies[j])
        if noted and _same_but_notes(mine, stored):  # the view's stub of a long note call
            return True
        if history.sources[j] != "reply":
            return False
        return _alike(mine, stored) or (noted and _alike(mine, message_without_notes(stored)))

    def _quiet_equal(self, quiet: Any, j: int) -> bool:
        """Whether stored message `j`, its empty content beside tool calls left out as it is
        in `quiet`, has the same canonical JSON. Both sides are compared here rather than
        stored digests changed, so stores written before keep their digests."""
        stored = _without_empty_content(plain(self.history.bodies[j]))
        return stored is not None and digest_of(quiet) == digest_of(stored)

    def may_be_missing(self, j: int) -> bool:
        """A stored item a rebuilt history may leave out: a reasoning item (a client without its
        encrypted content cannot send it back, nor does a `store: false` view hold it), or a
        reply item that held only note calls."""
        history = self.history
        if history.row_kinds[j] == "reasoning":
            return True
        return (
            j in history.note_calls
            and history.sources[j] == "reply"
            and message_without_notes(plain(history.bodies[j])) is None
        )

    def matched(self, seqs: Sequence[int], k: int, j: int) -> tuple[int, int]:
        """Sent from `k` on against `seqs` from `j` on, as far as they agree: where each
        stopped."""
        sent = self.sent
        while k < len(sent) and j < len(seqs):
            if self.same(k, seqs[j]):
                k, j = k + 1, j + 1
            elif self.may_be_missing(seqs[j]):
                j += 1
            else:
                break
        if k == len(sent):
            while j < len(seqs) and self.may_be_missing(seqs[j]):
                j += 1
        return k, j

    def head(self, seqs: Sequence[int], decorated_through: int) -> int | None:
        """How many sent messages the stored `seqs` (the history, or the last view) hold when
        the sent history starts with them; None when it does not start with them, `_NEW` when
        it is a short run equal to their head sent after the history moved on."""
        first = 0  # a view may open with items the sent history leaves out
        while (
            first + 1 < len(seqs)
            and not self.same(0, seqs[first])
            and self.may_be_missing(seqs[first])
        ):
            first += 1
        if not self.same(0, seqs[first]):
            self._refuse_an_edited_first(seqs, first)
            return None
        k, j = self.matched(seqs, 1, first + 1)
        if k < len(self.sent) and j < len(seqs):
            raise HistoryConflictError(
                f"message {k} of the sent history differs from stored message {seqs[j]}; a "
                "history that starts like the stored one must continue it unchanged (earlier "
                "messages cannot be edited). To send only new messages, leave out what was "
                "sent before."
            )
        return k if j == len(seqs) or j >= decorated_through else _NEW

    def _refuse_an_edited_first(self, seqs: Sequence[int], first: int) -> None:
        """A sent history whose first message differs from the stored one's, though the next
        ones are the stored ones, is an edit of it."""
        evidence = C.ALIGN_EDIT_EVIDENCE
        if min(len(seqs) - first, len(self.sent)) > evidence and all(
            self.same(k, seqs[first + k]) for k in range(1, evidence + 1)
        ):
            raise HistoryConflictError(
                f"message 0 of the sent history differs from stored message {seqs[first]}, "
                "though the messages after it are the stored ones: earlier messages cannot be "
                "edited. To send only new messages, leave out what was sent before."
            )
