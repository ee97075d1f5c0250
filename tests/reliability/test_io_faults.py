"""I/O faults at every statement (issue 33, "The suite"): one decorate and one report of a
conversation that forgets, with SQLite's own errors raised at each store call of theirs in
turn: a disk I/O error, a full disk, a busy database. Each must reach the caller as a
`StoreError` naming the cause, leave the store as it was (no partial write), and go through
when the caller tries again, ending in the store an unfaulted run makes.
"""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import fadeway
from fadeway.errors import StoreError
from fadeway.evaluate.contexts import copy_store
from fadeway.store.sqlite import _SQLiteTransaction

from .children import CEILING, MODEL, reply_message, user_message
from .tiers import figure

#: The turns before the one faulted: enough that its decorate fades and its report notes.
TURNS = 14
#: SQLite's messages for the faults injected, as its driver raises them.
CAUSES = ("disk I/O error", "database or disk is full", "database is locked")


@contextmanager
def counted(at: int | None, cause: str) -> Iterator[list[int]]:
    """Every public method of the SQLite transaction counts its calls; the `at`th raises
    `sqlite3.OperationalError(cause)` (none when `at` is None). Yields the count."""
    calls = [0]
    names = {
        n
        for cls in _SQLiteTransaction.__mro__[:-1]
        for n, f in vars(cls).items()
        if callable(f) and not n.startswith("_")
    }
    saved = {n: getattr(_SQLiteTransaction, n) for n in names}

    def wrapped(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            if calls[0] == at:
                raise sqlite3.OperationalError(cause)
            return method(self, *args, **kwargs)

        return call

    for name, method in saved.items():
        setattr(_SQLiteTransaction, name, wrapped(method))
    try:
        yield calls
    finally:
        for name, method in saved.items():
            setattr(_SQLiteTransaction, name, method)


#: The engines' time: fixed, so that a faulted run and an unfaulted one write the same times.
START = 1_767_225_600.0


def _open(db: Path, turn: int = TURNS) -> fadeway.Engine:
    return fadeway.open(
        db, background=False, ceiling=CEILING, note_writer=None, clock=lambda: START + 60 * turn
    )


def _before(db: Path) -> list[dict]:
    """A conversation of TURNS turns, its notes answered by the model; the history as sent."""
    history: list[dict] = []
    with _open(db) as engine:
        memory = engine.memory("m")
        for turn in range(TURNS):
            history.append(user_message(turn))
            at = START + 60 * turn
            request = memory.decorate({"model": MODEL, "messages": history}, at=at)
            memory.report(request, _reply(request, turn), at=at)
            history.append(reply_message(turn))
            engine.drain()
    return history


def _reply(request: dict, turn: int) -> dict:
    """The model's reply: with a note when the request asks for one."""
    message = reply_message(turn)
    if any(t["function"]["name"] == "note" for t in request.get("tools", ())):
        note = {
            "note": f"The user wrote turn {turn}.",
            "subject": "user",
            "object": f"turn {turn}",
            "milestone": False,
        }
        arguments = json.dumps({"notes": [note]})
        function = {"name": "note", "arguments": arguments}
        message = {
            **message,
            "tool_calls": [{"id": f"n{turn}", "type": "function", "function": function}],
        }
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def _turn(db: Path, history: list[dict], what: str, at: int | None, cause: str) -> Outcome:
    """The next turn's decorate and report, the `at`th store call of `what` ("decorate" or
    "report") raising `cause`; after a fault, `what` is tried again unfaulted."""
    sent = [*history, user_message(TURNS)]
    out = Outcome()
    with _open(db) as engine:
        memory = engine.memory("m")

        def decorate() -> dict:
            return memory.decorate({"model": MODEL, "messages": sent})

        def report(request: dict) -> Any:
            return memory.report(request, _reply(request, TURNS))

        if what == "decorate":
            out.before = fadeway.dumps(memory.export())
            with counted(at, cause) as calls:
                try:
                    out.request = decorate()
                except StoreError as exc:
                    out.error = exc
            out.after = fadeway.dumps(memory.export())
            request = decorate() if out.error else out.request
            report(request)
        else:
            request = decorate()
            out.before = fadeway.dumps(memory.export())
            with counted(at, cause) as calls:
                try:
                    report(request)
                except StoreError as exc:
                    out.error = exc
            out.after = fadeway.dumps(memory.export())
            if out.error:
                report(request)
        out.statements = calls[0]
        out.final = fadeway.dumps(memory.export())
    return out


@dataclass
class Outcome:
    before: bytes = b""
    after: bytes = b""
    final: bytes = b""
    statements: int = 0
    error: StoreError | None = None
    request: dict = field(default_factory=dict)


@pytest.mark.parametrize("what", ["decorate", "report"])
def test_an_io_fault_at_any_statement_writes_nothing_names_its_cause_and_a_retry_goes_on(
    what, tmp_path, caplog
):
    caplog.set_level(logging.ERROR, logger="fadeway")  # over the small ceiling is expected
    base = tmp_path / "base.db"
    history = _before(base)
    clean = tmp_path / "clean"
    clean.mkdir()
    unfaulted = _turn(copy_store(base, clean), history, what, None, "")
    faults = 0
    for at in range(1, unfaulted.statements + 1):
        for cause in CAUSES:
            here = tmp_path / f"{at}-{CAUSES.index(cause)}"
            here.mkdir()
            out = _turn(copy_store(base, here), history, what, at, cause)
            where = f"{cause} at statement {at} of {unfaulted.statements} of the {what}"
            assert out.error is not None and cause in str(out.error), where
            assert out.after == out.before, f"{where}: a partial write"
            assert out.final == unfaulted.final, f"{where}: the retry ends elsewhere"
            faults += 1
            shutil.rmtree(here)
    figure(
        f"I/O faults in one {what}: {faults} ({unfaulted.statements} store calls x "
        f"{len(CAUSES)} causes), each a StoreError naming its cause, nothing written, the "
        "retry ending where an unfaulted run ends"
    )
