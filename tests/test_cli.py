"""The command line: `fadeway demo` replays the bundled sample, each message at its own time."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime

import msgspec

import fadeway
from fadeway.replay import ReplayFormatError, read_replay


def test_demo_replays_the_sample_once(tmp_path):
    db = tmp_path / "demo.db"
    run = [sys.executable, "-m", "fadeway", "demo", "--db", str(db)]
    first = subprocess.run(run, capture_output=True, text=True, check=True)
    assert "Replayed 16 messages of memory 'quickstart'" in first.stdout
    assert "16 messages in 5 turns" in first.stdout
    assert "episode 1: turns 1–4" in first.stdout
    second = subprocess.run(run, capture_output=True, text=True, check=True)
    assert "already holds memory 'quickstart'" in second.stdout
    with fadeway.open(db) as engine:
        messages = engine.memory("quickstart").messages()
    assert len(messages) == 16
    assert [m.source for m in messages].count("reply") == 8
    # Each message keeps its own timestamp from the sample.
    assert messages[10].at == datetime.fromisoformat("2026-03-04T15:02:30+00:00").timestamp()
    assert msgspec.json.decode(messages[2].body)["tool_call_id"] == "call_tickets_1"


def test_replay_lines_name_the_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"memory_id": "m", "at": 0, "message": {"role": "user", "content": "x"}}\n'
                    '{"memory_id": "m", "at": "yesterday", "message": {}}\n')
    lines = read_replay(path)
    next(lines)
    try:
        next(lines)
    except ReplayFormatError as exc:
        assert f"{path}:2" in str(exc) and "ISO 8601" in str(exc)
    else:
        raise AssertionError("a bad timestamp was accepted")
