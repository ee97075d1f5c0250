"""kill -9 during live use, replay and import (issue 33, "The suite"): a child process drives
fadeway on a SQLite store, acknowledging each call after it returns; the parent kills it
(SIGKILL) at random moments drawn from a seeded generator, restarts it, and checks after every
kill that each acknowledged message is stored byte-exact, exactly once and in order, and that
`PRAGMA integrity_check` is ok. A replay or import run to completion after its kills must
export exactly what an uninterrupted run exports, and every memory must take a further decorate.

Children are forked from a server that has imported fadeway already (multiprocessing's
forkserver), so a restart costs milliseconds, not an interpreter's start.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import sqlite3
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import msgspec
import pytest

import fadeway
from fadeway.export.document import write_jsonl

from . import children
from .children import read_acks, reply_message, stored_form, user_message
from .tiers import TIERS, figure, scaled

SAMPLE = Path(fadeway.__file__).parent / "samples" / "launch-week.jsonl"
#: Lines of the bundled sample replayed: enough for episodes to leave and notes to be taken
#: under the children's ceiling.
REPLAY_LINES = 80
#: Turns of the live conversation.
LIVE_TURNS = 30
#: Copies of the replayed memory in the export file imported.
IMPORT_COPIES = 4
#: Kills aimed at in one run to completion (the mean delay is the run's time over this).
KILLS_PER_RUN = 10
#: An import resumes by skipping the memories it finished, and most of its work is the last
#: ones and the lane: its kills are drawn over the whole of its work, not a share of it.
IMPORT_KILLS_PER_RUN = 5

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(["fadeway", "reliability.children"])


def integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        (result,) = conn.execute("PRAGMA integrity_check").fetchone()
    conn.close()
    return result


def stored_bodies(db: Path, memory_id: str) -> list[bytes]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT seq, body FROM messages WHERE memory_id = ? ORDER BY seq", (memory_id,)
        ).fetchall()
    except sqlite3.OperationalError:  # killed before the schema was made
        rows = []
    finally:
        conn.close()
    assert [seq for seq, _ in rows] == list(range(len(rows))), "stored seqs have a gap"
    return [bytes(body) for _, body in rows]


def exports(db: Path) -> dict[str, bytes]:
    with fadeway.open(db, background=False) as engine:
        return {i: fadeway.dumps(engine.memory(i).export()) for i in engine.memory_ids()}


def goes_on(db: Path, memory_id: str) -> None:
    """A further decorate and report of the memory work, and store what they were given."""
    with fadeway.open(db, background=False, ceiling=children.CEILING) as engine:
        memory = engine.memory(memory_id)
        before = len(memory.messages())
        message = {"role": "user", "content": "And one more thing, after the kills: ünïcödé."}
        request = memory.decorate({"model": children.MODEL, "messages": [message]})
        memory.report(request, {"choices": [{"index": 0, "message": reply_message(999)}]})
        bodies = [m.body for m in memory.messages()[before:]]
        engine.drain()
    assert bodies == [stored_form(message), stored_form(reply_message(999))]
    assert integrity(db) == "ok"


def started(child: multiprocessing.process.BaseProcess, acks: str, before: int) -> None:
    """Wait until the child acknowledges its start (its engine open, its work begun): the
    `before + 1`th "started" line of `acks`."""
    deadline = time.monotonic() + 60
    while sum(kind == "started" for kind, _ in read_acks(acks)) <= before:
        assert child.exitcode is None, f"the child ended (exit {child.exitcode}) before starting"
        assert time.monotonic() < deadline, "the child did not start within a minute"
        time.sleep(0.002)


class Killer:
    """Runs children to completion, killing each run a few times at random moments of its work
    (from a seeded generator) until `wanted` kills are made in all, with `check` after every
    kill. A child's work is timed from its "started" acknowledgement."""

    def __init__(self, seed: int, wanted: int) -> None:
        self.rng, self.wanted, self.kills = random.Random(seed), wanted, 0
        self.checked = 0  # acknowledged messages (memories, for import) checked after kills

    def run(
        self,
        target: Callable[..., None],
        args: tuple,
        mean_delay: float,
        check: Callable[[], int],
        kills: int,
    ) -> None:
        """Run `target(db, acks, ...)` in a child until it completes, killing it `kills` times
        (fewer when the wanted total is reached first), each kill `mean_delay` seconds into its
        work on average."""
        stop = min(self.wanted, self.kills + kills)
        acks = args[1]
        while True:
            before = sum(kind == "started" for kind, _ in read_acks(acks))
            child = _context.Process(target=target, args=args, daemon=True)
            child.start()
            if self.kills < stop:
                started(child, acks, before)
                child.join(self.rng.uniform(0, 2 * mean_delay))
                if child.exitcode is None:
                    os.kill(child.pid, signal.SIGKILL)
            child.join(300)
            if child.exitcode == -signal.SIGKILL:
                self.kills += 1
                self.checked += check()
                continue
            assert child.exitcode == 0, f"the child failed (exit {child.exitcode}); see stderr"
            return


def timed(target: Callable[..., None], args: tuple) -> float:
    """Run `target(db, acks, ...)` in a child uninterrupted; the wall time of its work."""
    child = _context.Process(target=target, args=args, daemon=True)
    child.start()
    started(child, args[1], 0)
    start = time.monotonic()
    child.join(300)
    assert child.exitcode == 0, "the uninterrupted child failed; see stderr"
    return time.monotonic() - start


# -- live use ------------------------------------------------------------------------------


def check_live(db: Path, acks: Path) -> int:
    """Every acknowledged message stored byte-exact, nothing stored that was not sent, nothing
    twice, and in the order sent."""
    assert integrity(db) == "ok"
    known = {}
    for t in range(LIVE_TURNS):
        known[stored_form(user_message(t))] = (t, 0)
        known[stored_form(reply_message(t))] = (t, 1)
    stored = []
    for body in stored_bodies(db, children.LIVE_MEMORY):
        assert body in known, f"a stored message was never sent: {body[:80]!r}"
        stored.append(known[body])
    assert stored == sorted(set(stored)), "a message was stored twice or out of order"
    acked = {
        (t, 0 if kind == "user" else 1) for kind, t in read_acks(str(acks)) if kind != "started"
    }
    lost = acked - set(stored)
    assert not lost, f"acknowledged messages lost: {sorted(lost)}"
    return len(acked)


@pytest.mark.parametrize("tier", TIERS)
def test_live_use(tmp_path, tier):
    reference = tmp_path / "reference.db"
    seconds = timed(children.live, (str(reference), str(tmp_path / "ref.acks"), LIVE_TURNS))
    killer = Killer(3301, scaled(tier, 20, 400))
    rounds = 0
    while killer.kills < killer.wanted:
        rounds += 1
        db, acks = tmp_path / f"live{rounds}.db", tmp_path / f"live{rounds}.acks"
        killer.run(
            children.live,
            (str(db), str(acks), LIVE_TURNS),
            seconds / KILLS_PER_RUN,
            partial(check_live, db, acks),
            KILLS_PER_RUN,
        )
        check_live(db, acks)
        assert len(stored_bodies(db, children.LIVE_MEMORY)) >= LIVE_TURNS + 1
        goes_on(db, children.LIVE_MEMORY)
        for path in (db, acks):
            path.unlink()
    figure(
        f"live use: kills: {killer.kills} in {rounds} conversations of {LIVE_TURNS} turns; "
        f"after the kills {killer.checked} acknowledged messages checked, lost: 0, duplicated "
        "or reordered: 0; integrity_check: ok"
    )


# -- replay --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def replay_lines(tmp_path_factory) -> tuple[Path, list[bytes]]:
    """The first REPLAY_LINES lines of the bundled sample, and each message as stored."""
    path = tmp_path_factory.mktemp("replay") / "lines.jsonl"
    lines = SAMPLE.read_bytes().splitlines(keepends=True)[:REPLAY_LINES]
    path.write_bytes(b"".join(lines))
    return path, [stored_form(json.loads(line)["message"]) for line in lines]


@pytest.fixture(scope="module")
def replayed(replay_lines, tmp_path_factory) -> tuple[dict[str, bytes], float]:
    """An uninterrupted replay's exports, and its wall time."""
    root = tmp_path_factory.mktemp("uninterrupted")
    db = root / "replay.db"
    seconds = timed(children.replay, (str(db), str(root / "acks"), str(replay_lines[0])))
    return exports(db), seconds


def check_replay(db: Path, acks: Path, messages: list[bytes]) -> int:
    """The store holds a prefix of the lines' messages, byte-exact, at least as long as the
    acknowledged count."""
    assert integrity(db) == "ok"
    stored = stored_bodies(db, "launch-week")
    assert stored == messages[: len(stored)], "a stored message differs from its line"
    acked = max((n for kind, n in read_acks(str(acks)) if kind == "stored"), default=0)
    assert len(stored) >= acked, f"{acked} messages acknowledged, {len(stored)} stored"
    return acked


@pytest.mark.parametrize("tier", TIERS)
def test_replay(tmp_path, tier, replay_lines, replayed):
    path, messages = replay_lines
    expected, seconds = replayed
    killer = Killer(3302, scaled(tier, 20, 400))
    runs = 0
    while killer.kills < killer.wanted:
        runs += 1
        db, acks = tmp_path / f"replay{runs}.db", tmp_path / f"replay{runs}.acks"
        killer.run(
            children.replay,
            (str(db), str(acks), str(path)),
            seconds / KILLS_PER_RUN,
            partial(check_replay, db, acks, messages),
            KILLS_PER_RUN,
        )
        check_replay(db, acks, messages)
        assert exports(db) == expected, "the replay resumed after kills exports otherwise"
        goes_on(db, "launch-week")
    figure(
        f"replay: kills: {killer.kills} in {runs} runs of {REPLAY_LINES} lines; after the "
        f"kills {killer.checked} acknowledged messages checked, lost: 0; integrity_check: ok; "
        "exports identical to an uninterrupted run: yes"
    )


# -- import --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def export_file(replayed, tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    """An export file of IMPORT_COPIES copies of the replayed memory, and each as exported."""
    (doc,) = (fadeway.loads(v) for v in replayed[0].values())
    docs = [msgspec.structs.replace(doc, memory_id=f"copy-{i}") for i in range(IMPORT_COPIES)]
    path = tmp_path_factory.mktemp("import") / "export.jsonl"
    with open(path, "wb") as fp:
        write_jsonl(docs, fp)
    return path, {d.memory_id: fadeway.dumps(d) for d in docs}


def check_import(db: Path, expected: dict[str, bytes], acks: Path) -> int:
    """Each memory is there whole, as exported, or not at all; all of them once acknowledged."""
    assert integrity(db) == "ok"
    found = exports(db)
    for memory_id, doc in found.items():
        assert doc == expected[memory_id], f"memory {memory_id!r} imported otherwise"
    if any(kind == "done" for kind, _ in read_acks(str(acks))):
        assert found.keys() == expected.keys()
    return len(found)


@pytest.mark.parametrize("tier", TIERS)
def test_import(tmp_path, tier, export_file):
    path, expected = export_file
    seconds = timed(children.import_, (str(tmp_path / "ref.db"), str(tmp_path / "ref"), str(path)))
    assert exports(tmp_path / "ref.db") == expected
    killer = Killer(3303, scaled(tier, 10, 200))
    runs = 0
    while killer.kills < killer.wanted:
        runs += 1
        db, acks = tmp_path / f"import{runs}.db", tmp_path / f"import{runs}.acks"
        killer.run(
            children.import_,
            (str(db), str(acks), str(path)),
            seconds / 2,
            partial(check_import, db, expected, acks),
            IMPORT_KILLS_PER_RUN,
        )
        check_import(db, expected, acks)
        assert exports(db) == expected
        goes_on(db, "copy-0")
    figure(
        f"import: kills: {killer.kills} in {runs} imports of {IMPORT_COPIES} memories; after "
        f"the kills {killer.checked} memories found, each whole as exported (none partial); "
        "integrity_check: ok; exports identical to an uninterrupted run: yes"
    )


# -- a dead worker's lease -----------------------------------------------------------------

#: The lease the killed worker held, and how soon its restart must run the lane.
DEAD_LEASE_SECONDS = 2.0
RESTART_SECONDS = 0.5


def test_a_restart_takes_its_own_dead_lease_at_once(tmp_path):
    db, acks = tmp_path / "lease.db", tmp_path / "lease.acks"
    child = _context.Process(
        target=children.hold_lane, args=(str(db), str(acks), DEAD_LEASE_SECONDS), daemon=True
    )
    child.start()
    deadline = time.monotonic() + 60
    while not read_acks(str(acks)) and time.monotonic() < deadline:
        assert child.is_alive()
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    with fadeway.open(db, background=False) as engine:
        start = time.monotonic()
        engine.run_lane(children.LIVE_MEMORY)
        waited = time.monotonic() - start
    figure(f"a restart waited {waited:.2f} s for the lane lease of its killed worker")
    assert waited < RESTART_SECONDS
