"""`fadeway replay`, `inspect`, `export` and `import` end to end, in subprocesses, on LoCoMo
conversations (read from shared/data, never copied into the repository; skipped without it)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

import fadeway
import fadeway.replay.runner
from fadeway.cli.batch import ReplaySettings, run_batch
from fadeway.replay.locomo import locomo_lines, read_locomo
from fadeway.replay.sources import read_inputs
from helpers import shared_data

LOCOMO = shared_data("locomo/locomo10.json")
pytestmark = pytest.mark.skipif(
    LOCOMO is None, reason="LoCoMo (shared/data/locomo/locomo10.json) is not available"
)
#: Small enough that episodes leave and the offline note writer answers asks.
CEILING = "3000"


def fadeway_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    run = subprocess.run(
        [sys.executable, "-m", "fadeway", *map(str, args)], capture_output=True, text=True
    )
    if check and run.returncode != 0:
        raise AssertionError(f"exit {run.returncode}\n{run.stdout}\n{run.stderr}")
    return run


@pytest.fixture(scope="module")
def samples():
    return read_locomo(LOCOMO)


@pytest.fixture(scope="module")
def two_memories(samples, tmp_path_factory):
    """Replay lines of two LoCoMo conversations, cut short: 130 + 110 turns."""
    path = tmp_path_factory.mktemp("inputs") / "two.jsonl"
    with open(path, "w") as fp:
        for sample, turns in ((samples[0], 130), (samples[1], 110)):
            for _, line in list(locomo_lines(sample))[:turns]:
                fp.write(
                    json.dumps(
                        {"memory_id": line.memory_id, "at": line.at, "message": line.message}
                    )
                    + "\n"
                )
    return path


@pytest.fixture(scope="module")
def one_sample(samples, tmp_path_factory):
    """LoCoMo JSON holding one conversation (its first three sessions)."""
    sample = json.loads(json.dumps(samples[1]))
    conversation = sample["conversation"]
    for key in [k for k in conversation if k.startswith("session_")]:
        number = int(key.split("_")[1])
        if number > 3:
            del conversation[key]
    path = tmp_path_factory.mktemp("inputs") / "locomo-one.json"
    path.write_text(json.dumps([sample]))
    return path


def store_counts(db) -> dict[str, dict[str, int]]:
    counts = {}
    with fadeway.open(db, background=False) as engine:
        for memory_id in engine.memory_ids():
            doc = engine.memory(memory_id).export()
            states = [e.state for e in doc.episodes]
            counts[memory_id] = {
                "messages": len(doc.messages),
                "episodes": len(states),
                "facts": len(doc.facts),
                "sealed": states.count("sealed"),
                "forgotten": states.count("forgotten"),
            }
    return counts


def export_all(db) -> bytes:
    return subprocess.run(
        [sys.executable, "-m", "fadeway", "export", "--all", "--db", str(db)],
        capture_output=True,
        check=True,
    ).stdout


def test_locomo_json_replays_and_the_summary_is_the_stores(one_sample, tmp_path):
    db = tmp_path / "locomo.db"
    run = fadeway_cli("replay", one_sample, "--db", db, "--ceiling", CEILING, "--json")
    summary = json.loads(run.stdout)
    (row,) = summary["memories"]
    turns = sum(
        len(v)
        for k, v in json.loads(one_sample.read_text())[0]["conversation"].items()
        if k.startswith("session_") and isinstance(v, list)
    )
    assert row["memory_id"] == "conv-30" and row["messages"] == row["new"] == turns
    assert row["forgotten"] + row["sealed"] > 0 and row["facts"] > 0  # the ceiling was met
    stored = store_counts(db)["conv-30"]
    assert {k: row[k] for k in stored} == stored

    # The table says the same, and a second run adds nothing at all.
    before = export_all(db)
    again = fadeway_cli("replay", one_sample, "--db", db, "--ceiling", CEILING)
    total = next(line for line in again.stdout.splitlines() if line.startswith("total"))
    assert total.split()[3:] == [
        str(stored["messages"]),
        "0",
        str(stored["episodes"]),
        str(stored["facts"]),
        str(stored["sealed"]),
        str(stored["forgotten"]),
    ]
    assert export_all(db) == before


def _messages_stored(db) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_resume_after_sigkill_gives_the_uninterrupted_export(two_memories, tmp_path):
    whole = tmp_path / "whole.db"
    fadeway_cli("replay", two_memories, "--db", whole, "--ceiling", CEILING, "--workers", "2")
    expected = export_all(whole)
    total = sum(c["messages"] for c in store_counts(whole).values())

    db = tmp_path / "killed.db"
    args = [
        sys.executable,
        "-m",
        "fadeway",
        "replay",
        str(two_memories),
        "--db",
        str(db),
        "--ceiling",
        CEILING,
        "--workers",
        "2",
    ]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while _messages_stored(db) < total // 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    time.sleep(0.3)  # the workers die with their parent
    stopped = _messages_stored(db)
    assert 0 < stopped < total, "the replay was not killed midway"
    time.sleep(0.3)
    assert _messages_stored(db) == stopped, "a worker outlived its killed parent"

    resumed = fadeway_cli(
        "replay", two_memories, "--db", db, "--ceiling", CEILING, "--workers", "2", "--json"
    )
    assert sum(r["new"] for r in json.loads(resumed.stdout)["memories"]) == total - stopped
    assert export_all(db) == expected


def test_export_import_and_replaying_an_export(two_memories, tmp_path):
    db = tmp_path / "a.db"
    fadeway_cli("replay", two_memories, "--db", db, "--ceiling", CEILING, "--workers", "2")
    out = tmp_path / "all.jsonl"
    fadeway_cli("export", "--all", "--db", db, "-o", out)
    assert len(out.read_bytes().splitlines()) == 2
    one = fadeway_cli("export", "conv-26", "--db", db).stdout
    assert json.loads(one)["memory_id"] == "conv-26"

    copy = tmp_path / "b.db"
    assert "imported 2 memories" in fadeway_cli("import", out, "--db", copy).stdout
    assert export_all(copy) == out.read_bytes()
    again = fadeway_cli("import", out, "--db", copy).stdout
    assert "imported 0 memories" in again and "2 already there" in again
    assert export_all(copy) == out.read_bytes()

    # replay takes an export file too (told by its content), and imports it.
    third = tmp_path / "c.db"
    summary = json.loads(fadeway_cli("replay", out, "--db", third, "--json").stdout)
    assert sorted(r["memory_id"] for r in summary["memories"]) == ["conv-26", "conv-30"]
    assert export_all(third) == out.read_bytes()

    # A store holding something else under the same id refuses the import, writing nothing.
    other = tmp_path / "other.jsonl"
    other.write_bytes(
        out.read_bytes().splitlines()[0].replace(b'"conv-26"', b'"conv-30"', 1) + b"\n"
    )
    refused = fadeway_cli("import", other, "--db", copy, check=False)
    assert refused.returncode == 2 and f"{other}:1" in refused.stderr


def test_inspect_shows_episodes_facts_block_and_graph(two_memories, tmp_path):
    db = tmp_path / "i.db"
    fadeway_cli("replay", two_memories, "--db", db, "--ceiling", CEILING)
    doc = fadeway.loads(fadeway_cli("export", "conv-26", "--db", db).stdout)
    last = doc.messages[-1].at
    view = json.loads(
        fadeway_cli("inspect", "conv-26", "--db", db, "--at", str(last), "--json").stdout
    )
    assert [e["n"] for e in view["episodes"]] == [e.n for e in doc.episodes]
    assert [e["state"] for e in view["episodes"]] == [e.state for e in doc.episodes]
    assert view["facts_block"] == doc.facts_block and doc.facts_block
    assert view["graph"]["entities"] == len(doc.entities)
    assert view["graph"]["facts"] == len(doc.facts)
    assert view["graph"]["retired"] == len(doc.retirements)
    assert view["messages"] == len(doc.messages)
    # Activation fades with time: a year later every episode is less active.
    later = json.loads(
        fadeway_cli(
            "inspect", "conv-26", "--db", db, "--at", str(last + 365 * 86400), "--json"
        ).stdout
    )
    assert all(
        b["activation"] < a["activation"]
        for a, b in zip(view["episodes"], later["episodes"], strict=True)
    )
    text = fadeway_cli("inspect", "conv-26", "--db", db, "--at", "2023-12-01T00:00:00Z").stdout
    assert "facts block (as the model sees it):" in text and doc.facts_block in text
    assert "activation at 2023-12-01 00:00 UTC" in text

    missing = fadeway_cli("inspect", "nobody", "--db", db, check=False)
    assert missing.returncode == 2 and "no memory 'nobody'" in missing.stderr


LINE = '{{"memory_id": "m", "at": {at}, "message": {message}}}\n'
USER = '{"role": "user", "content": "hello"}'


@pytest.mark.parametrize(
    "name, text, line, words",
    [
        (
            "truncated.jsonl",
            LINE.format(at=0, message=USER) + LINE.format(at=1, message=USER)[:30],
            2,
            "not a complete JSON line",
        ),
        ("unknown.jsonl", '{"id": 1, "text": "hello"}\n', 1, "unknown format"),
        ("unknown.txt", "memory_id,at,message\n", 1, "unknown format"),
        (
            "tool-first.jsonl",
            LINE.format(at=0, message=USER)
            + LINE.format(
                at=1, message='{"role": "tool", "tool_call_id": "call_9", "content": "42"}'
            ),
            2,
            "no earlier assistant call has id 'call_9'",
        ),
        (
            "no-time.jsonl",
            LINE.format(at=0, message=USER)
            + '{"memory_id": "m", "message": {"role": "assistant", "content": "hi"}}\n',
            2,
            "no 'at'",
        ),
    ],
)
def test_bad_input_names_file_and_line_and_writes_nothing(
    tmp_path, two_memories, name, text, line, words
):
    bad = tmp_path / name
    bad.write_text(text)
    db = tmp_path / "bad.db"
    # A good file given first is not replayed either: every file is checked before any is.
    run = fadeway_cli("replay", two_memories, bad, "--db", db, check=False)
    assert run.returncode == 2, run.stderr
    assert f"{bad}:{line}" in run.stderr and words in run.stderr
    assert "Traceback" not in run.stderr
    assert not db.exists() or _messages_stored(db) == 0


def test_replay_with_an_llm_judge_and_note_writer(one_sample, tmp_path):
    """--judge URL and --note-writer URL: the judgments and the notes come from the endpoint
    (a scripted local server answering every request validly), and their usage is stored."""
    from judge_answers import everything
    from openai_server import OpenAIServer

    db = tmp_path / "llm.db"
    with OpenAIServer() as server:
        server.script(*[everything] * 20_000)
        run = fadeway_cli(
            "replay",
            one_sample,
            "--db",
            db,
            "--ceiling",
            "2000",
            "--judge",
            server.url,
            "--note-writer",
            server.url,
            "--judge-model",
            "judge-m",
        )
        kinds = {r.body.get("model") for r in server.requests}
        requests = len(server.requests)
    assert kinds == {"judge-m"}
    with fadeway.open(db, background=False) as engine:
        [memory_id] = engine.memory_ids()
        mem = engine.memory(memory_id)
        doc = mem.export()
        spent = mem.usage()
        usage = {u.kind for u in spent}
    assert doc.notes and all(n.source == "note-writer:llm:judge-m" for n in doc.notes)
    assert "note" in usage and "judge:boundaries" in usage
    # The summary ends with the memory's model calls by kind and model, and their total: every
    # request the endpoint answered (the embedder is offline).
    table = run.stdout.split("model calls for these memories")[1].splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in table[1:] if line.strip()}
    assert rows["note"][:2] == ["judge-m", str(sum(u.calls for u in spent if u.kind == "note"))]
    total_in = sum(u.tokens_in for u in spent)
    assert rows["total"][:2] == [f"{requests:,}", f"{total_in:,}"]
    assert total_in > 0

    # With prices (here from FADEWAY_PRICES), the summary adds the calls' cost; a run that
    # finds everything stored replays nothing and still sums what the memory spent.
    prices = tmp_path / "prices.toml"
    prices.write_text('["judge-m"]\ninput = 0.40\noutput = 1.60\n')
    env = {**os.environ, "FADEWAY_PRICES": str(prices)}
    again = subprocess.run(
        [sys.executable, "-m", "fadeway", "replay", str(one_sample), "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    summary = json.loads(again.stdout)
    assert sum(r["new"] for r in summary["memories"]) == 0
    cost = sum(u.tokens_in * 0.40 + u.tokens_out * 1.60 for u in spent) / 1e6
    assert summary["cost"] == pytest.approx(cost) and cost > 0
    assert summary["unpriced"] == []

    prices.write_text('["judge-m"]\ninput = "cheap"\n')
    for option, value, words in (
        ("--judge", "smoke-signals", "allowed is"),
        ("--note-writer", "ftp://x", "allowed is"),
        ("--prices", str(prices), "must be a number of dollars per million tokens"),
    ):
        run = fadeway_cli(
            "replay", one_sample, "--db", tmp_path / "x.db", option, value, check=False
        )
        assert run.returncode == 2 and words in run.stderr, run.stderr
    assert not (tmp_path / "x.db").exists()


def test_fadeway_db_environment_names_the_default_store(one_sample, tmp_path):
    env = {**os.environ, "FADEWAY_DB": str(tmp_path / "env.db")}
    subprocess.run(
        [sys.executable, "-m", "fadeway", "replay", str(one_sample)],
        env=env,
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    assert "conv-30" in store_counts(tmp_path / "env.db")
    assert not (tmp_path / "fadeway.db").exists()


class _Crash(Exception):
    """A replay stopped where a kill can stop it: after a reply is stored, before its note."""


def test_a_run_stopped_between_a_reply_and_its_note_resumes_to_the_same_store(
    two_memories, tmp_path, monkeypatch
):
    # The reply's lane jobs (the next walk, the distill) are queued and the note ask is
    # pending. The resumed run must take the note before those jobs run, as the uninterrupted
    # run did; it once drained every lane first, and the walk then missed the note's facts.
    def replay(db):
        settings = ReplaySettings(str(db), int(CEILING))
        run_batch(read_inputs([two_memories]), settings, workers=1)

    whole = tmp_path / "whole.db"
    replay(whole)
    answer = fadeway.replay.runner._Runner.answer
    asks = []

    def stop_before_the_second_note(runner, at):
        doc = runner.memory.export()
        acked = {e for e, _ in doc.acks}
        if any(e.state == "leaving" and e.n not in acked for e in doc.episodes):
            asks.append(at)
            if len(asks) == 2:
                raise _Crash
        answer(runner, at)

    db = tmp_path / "stopped.db"
    monkeypatch.setattr(fadeway.replay.runner._Runner, "answer", stop_before_the_second_note)
    with pytest.raises(_Crash):
        replay(db)
    monkeypatch.setattr(fadeway.replay.runner._Runner, "answer", answer)
    with sqlite3.connect(db) as conn:
        pending = [k for (k,) in conn.execute("SELECT kind FROM jobs WHERE state = 'pending'")]
    assert "walk" in pending, "the run did not stop with the reply's jobs pending"
    replay(db)
    assert export_all(db) == export_all(whole)


@pytest.mark.both_stores
def test_replay_spreads_memories_over_workers_on_either_store(two_memories, db, tmp_path):
    """`fadeway replay --workers 2` on a store several processes write at once (issue 30, item
    5): the same memories as one worker replaying into its own SQLite file, byte for byte."""
    alone = tmp_path / "alone.db"
    fadeway_cli("replay", two_memories, "--db", alone, "--ceiling", CEILING, "--workers", "1")
    fadeway_cli("replay", two_memories, "--db", db, "--ceiling", CEILING, "--workers", "2")
    assert export_all(db) == export_all(alone)


def test_a_memory_failing_in_a_spawned_worker_stops_the_run_at_once(samples, tmp_path):
    """With two workers the command's process replays the longer memory and a spawned one the
    shorter: an error of the spawned worker's memory ends the run at once (the longer one is
    left partway), named, with no traceback."""
    long_lines = [line for _, line in locomo_lines(samples[0])]
    short_lines = [line for _, line in locomo_lines(samples[1])][:8]
    both = tmp_path / "both.jsonl"
    held = tmp_path / "held.jsonl"
    for path, lines in ((both, long_lines + short_lines), (held, short_lines[:4])):
        with open(path, "w") as fp:
            for line in lines:
                message = dict(line.message)
                if path == held and line is short_lines[3]:
                    message["content"] = "A message the replayed lines do not hold."
                record = {"memory_id": line.memory_id, "at": line.at, "message": message}
                fp.write(json.dumps(record) + "\n")
    db = tmp_path / "w.db"
    fadeway_cli("replay", held, "--db", db)

    run = fadeway_cli(
        "replay", both, "--db", db, "--ceiling", CEILING, "--workers", "2", check=False
    )
    assert run.returncode != 0
    assert "different message" in run.stderr and samples[1]["sample_id"] in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert 0 < store_counts(db)[samples[0]["sample_id"]]["messages"] < len(long_lines)
