"""Episodes: the cut policy, encoding traces, and a real conversation replayed end to end."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

import fadeway
from fadeway.judge import Boundaries, ScriptedJudge
from fadeway.replay.runner import replay
from helpers import chat_reply, shared_data


def by_length(units):
    """A deterministic script: long units read as starts of a concept."""
    first = [float(len(u.text) % 17) for u in units]
    return Boundaries(first, [0.0] * len(units))


def _talk(mem, turns, *, words=60, start=0):
    for t in range(start, start + turns):
        text = f"topic {t % 5} " + " ".join(f"word{t}x{i}" for i in range(words))
        req = mem.decorate({"model": "gpt-4.1", "messages": [{"role": "user", "content": text}]})
        mem.report(
            req, chat_reply(f"noted {t}: " + " ".join(f"reply{t}y{i}" for i in range(words)))
        )


def _check_episodes(mem):
    """Episodes cover the closed history from the start, once, in order, and are encoded once."""
    episodes = mem.episodes()
    messages = mem.messages()
    assert episodes, "nothing was cut"
    assert episodes[0].first_seq == 0
    for a, b in zip(episodes, episodes[1:], strict=False):
        assert b.first_seq == a.last_seq + 1 and b.n == a.n + 1
    in_progress = max(m.turn for m in messages)
    first_open = min(m.seq for m in messages if m.turn == in_progress)
    assert episodes[-1].last_seq < first_open, "an episode reaches into the turn in progress"
    for e in episodes:
        assert e.state == "live"
        assert [(t.kind, t.score, t.counted) for t in e.traces] == [("encoding", 1.0, True)]
        assert e.traces[0].at == messages[e.last_seq].at == e.end_at
        assert e.tokens == sum(m.tokens for m in messages[e.first_seq : e.last_seq + 1])
        assert e.units[0].first == e.first_seq and e.units[-1].last == e.last_seq
    return episodes, first_open


@pytest.fixture
def scripted(tmp_path, clock):
    eng = fadeway.open(
        tmp_path / "e.db",
        clock=clock,
        background=False,
        judge=ScriptedJudge(boundaries=by_length),
        episode_min_tokens=200,
        episode_max_tokens=600,
        cut_after_tokens=1500,
    )
    yield eng
    eng.close()


def test_a_reply_queues_a_cut_once_enough_closed_history_built_up(scripted):
    mem = scripted.memory("m")
    _talk(mem, 3)  # about 3 × 250 tokens: under cut_after_tokens
    with scripted.store.read("m") as tx:
        assert tx.pending_job("cut") is None
    _talk(mem, 6, start=3)
    with scripted.store.read("m") as tx:
        jobs = tx.jobs()
    assert [j.kind for j in jobs if j.kind == "cut"] == ["cut"]  # one cut, not one per reply
    assert mem.episodes() == []  # the lane has not run yet
    scripted.drain()
    episodes, _ = _check_episodes(mem)
    for e in episodes:
        assert e.tokens <= 600 or len(e.units) == 1
    assert scripted.judge.calls and scripted.judge.calls[0][0] == "boundaries"


def test_cutting_is_incremental_and_never_touches_the_turn_in_progress(scripted):
    mem = scripted.memory("m")
    _talk(mem, 8)
    scripted.drain()
    before = mem.episodes()
    _talk(mem, 8, start=8)
    scripted.drain()
    after, _ = _check_episodes(mem)
    assert after[: len(before)] == before  # earlier episodes never change
    assert len(after) > len(before)
    made = mem.cut()  # everything closed, now
    final, first_open = _check_episodes(mem)
    assert len(final) == len(after) + made
    assert final[-1].last_seq == first_open - 1


def test_an_oversized_unit_is_an_episode_of_its_own(scripted):
    mem = scripted.memory("m")
    _talk(mem, 2)
    _talk(mem, 1, words=900, start=2)  # one unit far over max_tokens
    _talk(mem, 2, start=3)
    mem.cut()
    episodes, _ = _check_episodes(mem)
    big = [e for e in episodes if e.tokens > 600]
    assert big and all(len(e.units) == 1 for e in big)


def test_episodes_and_traces_are_exported_and_imported(scripted, tmp_path, clock):
    mem = scripted.memory("m")
    _talk(mem, 10)
    mem.cut()
    doc = mem.export()
    assert len(doc.episodes) == len(mem.episodes()) and len(doc.traces) == len(doc.episodes)
    with fadeway.open(tmp_path / "copy.db", clock=clock, background=False) as other:
        other.import_memory(doc)
        assert fadeway.dumps(other.memory("m").export()) == fadeway.dumps(doc)


LOCOMO = shared_data("locomo/locomo10.json")


@pytest.mark.skipif(LOCOMO is None, reason="LoCoMo is not in shared/data (it is never bundled)")
def test_locomo_conversation_replayed_with_the_offline_judge(tmp_path):
    from fadeway.replay.locomo import locomo_lines, read_locomo

    sample = read_locomo(LOCOMO)[0]
    with fadeway.open(tmp_path / "locomo.db", background=False) as engine:  # default settings
        mem = engine.memory(sample["sample_id"])
        lines = [line for _, line in locomo_lines(sample)]
        assert replay(mem, lines) == len(lines)
        engine.drain()
        episodes, _ = _check_episodes(mem)
        assert len(mem.messages()) == len(lines)
        sizes = [e.tokens for e in episodes]
        assert max(sizes) <= 4_000 or all(len(e.units) == 1 for e in episodes if e.tokens > 4_000)
        # Each message kept its LoCoMo time: sessions start at their own dates.
        assert mem.messages()[0].at == lines[0].at
        mem.cut()
        _check_episodes(mem)


WORKER = textwrap.dedent("""
    import sys
    import fadeway
    from fadeway.judge import Boundaries, ScriptedJudge

    def by_length(units):
        return Boundaries([float(len(u.text) % 17) for u in units], [0.0] * len(units))

    delay = float(sys.argv[2])
    engine = fadeway.open(sys.argv[1], background=False, lane_lease_seconds=0.5,
                          judge=ScriptedJudge(boundaries=by_length, delay=delay),
                          episode_min_tokens=200, episode_max_tokens=600, cut_after_tokens=1500)
    engine.drain()
    engine.close()
""")


def test_a_worker_killed_mid_job_leaves_the_lane_resumable(tmp_path, clock):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    paths = [tmp_path / "killed.db", tmp_path / "clean.db"]
    for path in paths:
        with fadeway.open(
            path,
            clock=clock,
            background=False,
            episode_min_tokens=200,
            episode_max_tokens=600,
            cut_after_tokens=1500,
        ) as eng:
            _talk(eng.memory("m"), 12)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    worker = subprocess.Popen([sys.executable, str(script), str(paths[0]), "30"], env=env)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # wait until the worker holds the lane mid-job
            with sqlite3.connect(paths[0]) as conn:
                if conn.execute("SELECT owner FROM lanes WHERE owner IS NOT NULL").fetchone():
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the worker never took the lane")
        worker.send_signal(signal.SIGKILL)
    finally:
        worker.wait()
    assert worker.returncode == -signal.SIGKILL
    with fadeway.open(paths[0], background=False) as eng:
        assert eng.store.memories_with_pending_jobs() == ["m"]  # nothing applied, nothing lost
    subprocess.run([sys.executable, str(script), str(paths[0]), "0"], env=env, check=True)
    subprocess.run([sys.executable, str(script), str(paths[1]), "0"], env=env, check=True)
    docs = []
    for path in paths:
        with fadeway.open(path, background=False) as eng:
            assert eng.store.memories_with_pending_jobs() == []
            docs.append(fadeway.dumps(eng.memory("m").export()))
    assert docs[0] == docs[1]
    assert b'"episodes":[]' not in docs[0]
