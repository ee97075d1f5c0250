"""Passages: sealed conversation cut into searchable pieces (MECHANISM: "The note ask and
sealing": "Its messages are cut into passages and indexed for recall").

A message becomes one passage when it fits, and overlapping windows when it is long (a long
answer, a tool output); a tool call's message carries its outputs (`passages_of`). Each passage
carries who said it ("Caroline: ...", from the message's `name`, else its role: ARCHITECTURE
measured that this helps BM25 on LoCoMo), its turn, its time, and its episode, whose facts it
recalls. The lane writes them once an episode seals, or once it leaves the view for a note
writer's note (`PassagesJob`).

fadeway's own note calls, and their outputs, are not passages: what a note says is in the graph,
and recall shows it as facts, dated and grouped, not as a tool call's JSON.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

import msgspec

from .. import _constants as C
from ..neutralise import fold
from ..notes.tool import message_without_notes, note_call_ids
from ..records import EpisodeRecord, JobKind, JobRecord, MessageRecord, PassageRecord
from ..store import Transaction
from ..wire import text_of

__all__ = ["windows", "passages_of", "PassagesJob"]

log = logging.getLogger("fadeway.passages")


def windows(
    text: str, size: int = C.PASSAGE_MAX_CHARS, overlap: int = C.PASSAGE_OVERLAP_CHARS
) -> list[str]:
    """`text` whole when it fits in `size` characters, else windows of at most `size` that
    overlap by about `overlap`, each cut at whitespace where there is some."""
    if size <= overlap or overlap < 0:
        raise ValueError(f"window size {size} must exceed the overlap {overlap} (>= 0)")
    text = text.strip()
    if len(text) <= size:
        return [text] if text else []
    out: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            cut = text.rfind(" ", start + size // 2, end)
            end = cut if cut > start else end
        out.append(text[start:end].strip())
        if end >= len(text):
            break
        nxt = text.find(" ", max(start + 1, end - overlap), end)
        start = nxt + 1 if nxt >= 0 else end
    return [w for w in out if w]


# Names that would read as a role of its own in an excerpt's header ("Turn 3 · Assistant").
_ROLE_WORDS = frozenset(
    {"user", "assistant", "system", "developer", "tool", "function", "model", "ai", "bot", "human"}
)
# What would split a header's fields or close its bracket, or break its line.
_HEADER_JUNK = re.compile(r"[\u00b7\u2022\u2027\u22c5\[\]\s]+")


def _who(body: dict[str, Any], role: str) -> str:
    """Who said a message: its `name` (one line, without what would end a header's field),
    else its role; a name that spells a role is not taken, so that a user named "assistant"
    is not recalled as the assistant speaking."""
    name = body.get("name")
    if not isinstance(name, str):
        return role
    name = _HEADER_JUNK.sub(" ", name).strip()
    letters = "".join(ch for ch in fold(name) if ch.isalnum())
    return role if not name or letters in _ROLE_WORDS else name


def _speaks(body: Any) -> bool:
    """Whether a message's `name` is who said it: a Responses call item's is its function's."""
    return isinstance(body, dict) and body.get("type") != "function_call"


def _text(body: Any) -> str:
    if _speaks(body):
        body = {k: v for k, v in body.items() if k != "name"}  # said once, as `who`
    return " ".join(t for t in text_of(body) if t.strip())


def passages_of(
    episode: EpisodeRecord, messages: Sequence[MessageRecord], first_n: int
) -> list[PassageRecord]:
    """The passages of an episode's messages, numbered from `first_n`. A tool call and its
    output are one passage, the call's, its output after an arrow: as an episode never
    separates them, an excerpt never shows a call without what it returned, nor an output
    without what asked for it."""
    out: list[PassageRecord] = []
    calling = {c for m in messages for c in m.calls}
    outputs = {
        m.answers: _text(msgspec.json.decode(m.body))
        for m in messages
        if m.answers is not None and m.answers in calling
    }
    for m in messages:
        if m.answers in outputs:
            continue  # its call's passage carries it (a note's output: no passage at all)
        body = msgspec.json.decode(m.body)
        who = _who(body, m.role) if _speaks(body) else m.role
        if ids := note_call_ids(m.calls, m.body):
            body = message_without_notes(body)
            if body is None:
                continue
        answered = (outputs.get(c, "") for c in m.calls if c not in ids)
        text = " → ".join(t for t in (_text(body), *answered) if t.strip())
        for part, window in enumerate(windows(text)):
            out.append(
                PassageRecord(
                    n=first_n + len(out),
                    episode=episode.n,
                    seq=m.seq,
                    part=part,
                    turn=m.turn,
                    at=m.at,
                    role=who,
                    text=f"{who}: {window}",
                )
            )
    return out


class PassagesJob:
    """The lane job that cuts every sealed (or forgotten) episode that has no passages yet into
    passages (`JobKind.PASSAGES`); with `{"leaving": true}`, the leaving ones too (a note
    writer's: out of view while their note is pending, and searched meanwhile)."""

    async def prepare(self, memory_id: str, job: JobRecord) -> Any:
        return None  # nothing slow: the cut is read and written in apply

    def apply(self, tx: Transaction, job: JobRecord, prepared: Any) -> bool:
        states = {"sealed", "forgotten"}
        if msgspec.json.decode(job.payload).get("leaving") is True:
            states.add("leaving")
        done = tx.passaged_episodes()
        todo = [e for e in tx.episodes() if e.state in states and e.n not in done]
        n = tx.passage_count() + 1
        rows: list[PassageRecord] = []
        for e in todo:
            rows.extend(passages_of(e, tx.messages(e.first_seq, e.last_seq + 1), n + len(rows)))
        tx.insert_passages(rows)
        if rows:
            tx.enqueue(JobKind.EMBED, b"{}", job.created_at)
            log.info(
                "memory %r: %d passages for episodes %s",
                tx.memory_id,
                len(rows),
                [e.n for e in todo],
            )
        return True
