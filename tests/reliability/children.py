"""What the child processes of the reliability suite run: live use, a replay and an import
(killed by `test_kill`), and concurrent callers (`test_concurrency`), each writing an
acknowledgement line to a file after every call returns. A line is written whole by
one `os.write` on a file opened for appending; the parent ignores a last line without its
newline (the child was killed while writing it)."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import os
import random
import threading
import time
from typing import Any

import msgspec

import fadeway
from fadeway import _constants as C
from fadeway.cli import commands
from fadeway.cli.batch import ReplaySettings, run_batch
from fadeway.cli.main import main as cli_main
from fadeway.replay.sources import read_inputs

#: The live memory, and the model named in its requests.
LIVE_MEMORY = "live"
MODEL = "gpt-4.1"
#: A small ceiling, so that within a few dozen turns episodes are cut and leave, and the lane
#: has work for the kill to land in.
CEILING = 3_000
#: A restarted run waits out the lane lease its killed predecessor held (issue 33, item 7: a
#: restart does not take its own dead lease at once; `test_kill.test_a_restart_takes_its_own_
#: dead_lease_at_once`). The harness is about what is stored, not that wait, so it shortens
#: the lease from replay's 3 s and the 30 s of live use and `fadeway import`.
LEASE_SECONDS = 0.5

# Words with one, two, three and four bytes of UTF-8, quotes and escapes: stored byte-exact.
_WORDS = ["plan", "naïve", "Grüße", "東京", "🎉", '"quoted"', "back\\slash", "tab\there", "ok"]


def user_message(turn: int) -> dict[str, Any]:
    rng = random.Random(turn)
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 60)))
    return {"role": "user", "content": f"Turn {turn}: {words}"}


def reply_message(turn: int) -> dict[str, Any]:
    rng = random.Random(-1 - turn)
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 80)))
    return {"role": "assistant", "content": f"Answer {turn}: {words}", "refusal": None}


def stored_form(message: dict[str, Any]) -> bytes:
    """The bytes a message is stored as: its JSON, compact, in the order it was sent."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


class Acks:
    """The acknowledgement file, written a whole line at a time."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def __call__(self, *fields: object) -> None:
        os.write(self.fd, (json.dumps(fields) + "\n").encode())


def read_acks(path: str) -> list[list[Any]]:
    """The whole lines of an acknowledgement file."""
    try:
        with open(path, "rb") as fp:
            data = fp.read()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in data.split(b"\n")[:-1]]


def _ready() -> None:
    """Quiet fadeway's warnings (a request over the small ceiling while a note is asked is
    expected here; errors still show), and load what the first call of a process loads (the
    token encoding: a tenth of a second), so that the kills land in the work, not in that."""
    logging.getLogger("fadeway").setLevel(logging.ERROR)
    with fadeway.open(":memory:", background=False) as engine:
        engine.memory("warm").decorate({"model": MODEL, "messages": [user_message(0)]})


def live(db: str, acks_path: str, turns: int) -> None:
    """Talk with one memory until it holds `turns` user messages, the lane running in the
    background: after a restart, the next turn is the first one the store lacks."""
    _ready()
    ack = Acks(acks_path)
    with fadeway.open(
        db, ceiling=CEILING, lane_lease_seconds=LEASE_SECONDS, lane_retry_seconds=0.05
    ) as engine:
        memory = engine.memory(LIVE_MEMORY)
        turn = sum(m.role == "user" for m in memory.messages())
        ack("started", turn)
        for t in range(turn, turns):
            request = memory.decorate({"model": MODEL, "messages": [user_message(t)]})
            ack("user", t)
            memory.report(request, {"choices": [{"index": 0, "message": reply_message(t)}]})
            ack("reply", t)


def replay(db: str, acks_path: str, lines: str) -> None:
    """`fadeway replay` of the file `lines` (one memory), acknowledging each step's messages
    (the count at a resume first)."""
    _ready()
    ack = Acks(acks_path)
    C.REPLAY_LANE_LEASE_SECONDS = LEASE_SECONDS
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        ack("stored", done)

    ack("started", 0)
    run_batch(read_inputs([lines]), ReplaySettings(db, CEILING), advance=advance)
    ack("done", done)


def import_(db: str, acks_path: str, export: str) -> None:
    """`fadeway import` of the export file `export` (its engine with the short lease)."""
    _ready()
    commands.open_engine = functools.partial(fadeway.open, lane_lease_seconds=LEASE_SECONDS)
    ack = Acks(acks_path)
    ack("started", 0)
    with contextlib.redirect_stdout(io.StringIO()):
        code = cli_main(["import", export, "--db", db])
    ack("done", code)


def hold_lane(db: str, acks_path: str, seconds: float) -> None:
    """Hold the live memory's lane, a job pending, as a lane worker does while it runs a job,
    for `seconds` of lease; wait to be killed."""
    from fadeway.lane.worker import _owner

    ack = Acks(acks_path)
    with fadeway.open(db, background=False) as engine:
        memory = engine.memory(LIVE_MEMORY)
        request = memory.decorate({"model": MODEL, "messages": [user_message(0)]})
        memory.report(request, {"choices": [{"index": 0, "message": reply_message(0)}]})
        engine.drain()
        memory.reindex()  # a job for the lane
        with engine.store.write(LIVE_MEMORY) as tx:
            now = time.time()
            assert tx.claim_lane(_owner(), now, now + seconds)
        ack("holding", seconds)
        time.sleep(600)


# -- concurrent callers (test_concurrency) ---------------------------------------------------

#: The one memory every caller talks to.
SHARED_MEMORY = "shared"
#: Settings that give the lanes work while the calls go on: small episodes, cut often.
BUSY_LANE = {
    "ceiling": CEILING,
    "episode_min_tokens": 100,
    "episode_max_tokens": 400,
    "cut_after_tokens": 600,
}


def caller_message(who: str, k: int) -> dict[str, Any]:
    return {"role": "user", "content": f"{who} says {k}: {user_message(k)['content']}"}


def caller_reply(who: str, k: int) -> dict[str, Any]:
    return {"role": "assistant", "content": f"To {who}, {k}: done.", "refusal": None}


def run_callers(engine: fadeway.Engine, ack: Acks, name: str, threads: int, calls: int) -> None:
    """`threads` threads, started together, each decorating its own user messages one at a
    time on the shared memory and reporting a reply to each; acknowledged with the monotonic
    time the decorate was called and returned, and what each report returned."""
    memory = engine.memory(SHARED_MEMORY)
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def caller(i: int) -> None:
        who = f"{name}.{i}"
        try:
            barrier.wait()
            for k in range(calls):
                called = time.monotonic()
                request = memory.decorate({"model": MODEL, "messages": [caller_message(who, k)]})
                ack("user", who, k, called, time.monotonic())
                reply = {"choices": [{"index": 0, "message": caller_reply(who, k)}]}
                result = memory.report(request, reply)
                ack("reply", who, k, msgspec.to_builtins(result))
        except BaseException as exc:  # reported by the caller of run_callers
            errors.append(exc)
            barrier.abort()

    running = [threading.Thread(target=caller, args=(i,)) for i in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    if errors:
        raise errors[0]


def callers(db: str, acks_path: str, name: str, threads: int, calls: int) -> None:
    """`run_callers` in a process of its own, with its own engine and background lane."""
    _ready()
    with fadeway.open(db, lane_lease_seconds=LEASE_SECONDS, **BUSY_LANE) as engine:
        run_callers(engine, Acks(acks_path), name, threads, calls)
