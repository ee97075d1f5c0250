"""The command line: `fadeway demo` replays the bundled sample and inspects it; replay lines."""

from __future__ import annotations

import os
import subprocess
import sys

import msgspec
import pytest

import fadeway
from fadeway.errors import ReplayFormatError
from fadeway.replay.lines import plan, read_replay


def test_demo_replays_the_sample_once_and_inspects_it(tmp_path):
    db = tmp_path / "demo.db"
    run = [sys.executable, "-m", "fadeway", "demo", "--db", str(db)]
    first = subprocess.run(run, capture_output=True, text=True, check=True)
    assert "launch-week" in first.stdout
    assert "memory 'launch-week' (chat_completions): 999 messages in 293 turns" in first.stdout
    assert "facts block (as the model sees it):" in first.stdout
    with fadeway.open(db, background=False) as engine:
        doc = engine.memory("launch-week").export()
    states = {e.state for e in doc.episodes}
    assert {"sealed", "forgotten"} <= states and doc.facts and doc.facts_block
    assert doc.facts_block in first.stdout
    second = subprocess.run(run, capture_output=True, text=True, check=True)
    total = next(line for line in second.stdout.splitlines() if line.startswith("total"))
    assert total.split()[3:5] == ["999", "0"]  # nothing added the second time
    with fadeway.open(db, background=False) as engine:
        assert engine.memory("launch-week").export() == doc
    # `fadeway recall` shows the block the next decorate would add, and stores nothing.
    question = "What happened with the Irish VAT rate?"
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "fadeway",
            "recall",
            "launch-week",
            question,
            "--db",
            str(db),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result = msgspec.json.decode(shown.stdout)
    assert result["block"].startswith("[assistant_recent_memories]")
    assert "Irish" in result["block"]
    assert set(result["timings_ms"]) == {"read", "parts", "embed", "search", "walk", "block"}
    with fadeway.open(db, background=False) as engine:
        assert engine.memory("launch-week").export() == doc
    missing = subprocess.run(
        [sys.executable, "-m", "fadeway", "recall", "nobody", question, "--db", str(db)],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "no memory 'nobody'" in missing.stderr
    messages = doc.messages
    assert [m.source for m in messages].count("reply") > 0
    # Each message keeps its own timestamp from the sample.
    lines = [line for line in read_replay(fadeway_sample())]
    assert [m.at for m in messages] == [line.at for line in lines]
    assert msgspec.json.decode(messages[0].message) == lines[0].message


_REPLAY_SLICE = """
import sys
import fadeway
from fadeway import dumps
from fadeway.notes.writers import OfflineNoteWriter
from fadeway.replay.lines import read_replay
from fadeway.replay.runner import replay

lines = list(read_replay(sys.argv[1]))[:300]
with fadeway.open(sys.argv[2], background=False, ceiling=4000) as engine:
    memory = engine.memory(lines[0].memory_id)
    replay(memory, lines, note_writer=OfflineNoteWriter())
    engine.drain()
    sys.stdout.buffer.write(dumps(memory.export()))
"""


def test_a_replay_exports_the_same_bytes_whatever_the_hash_seed(tmp_path):
    """String hashing differs between processes; a replay must not hang on it (a recall block's
    group names once did, and through the block's size every later fade)."""
    exports = []
    for seed in ("1", "2"):
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                _REPLAY_SLICE,
                str(fadeway_sample()),
                str(tmp_path / f"seed{seed}.db"),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        )
        exports.append(run.stdout)
    # The slice recalls, and seals (a forgotten episode was sealed first).
    assert '"recalls":[{' in exports[0] and '"state":"forgotten"' in exports[0]
    assert exports[0] == exports[1]


def fadeway_sample():
    from importlib import resources

    return resources.files("fadeway") / "samples" / "launch-week.jsonl"


def test_replay_lines_name_the_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"memory_id": "m", "at": 0, "message": {"role": "user", "content": "x"}}\n'
        '{"memory_id": "m", "at": "yesterday", "message": {}}\n'
    )
    lines = read_replay(path)
    next(lines)
    try:
        next(lines)
    except ReplayFormatError as exc:
        assert f"{path}:2" in str(exc) and "ISO 8601" in str(exc)
    else:
        raise AssertionError("a bad timestamp was accepted")


def _line(role, at, **more):
    from fadeway.replay.lines import ReplayLine

    return ReplayLine("m", at, {"role": role, "content": f"{role} at {at}", **more}, f"f:{at}")


def test_plan_reports_replies_and_carries_instructions_to_the_next_decorate():
    lines = [
        _line("system", 0),
        _line("user", 1),
        _line("assistant", 2),
        _line("assistant", 3),
        _line("developer", 4),
        _line("user", 5),
    ]
    steps = plan(lines)
    assert [(s.kind, [line.at for line in s.lines]) for s in steps] == [
        ("decorate", [1]),
        ("report", [2]),
        ("decorate", [3]),
        ("decorate", [5]),
    ]
    assert [len(s.instructions) for s in steps] == [1, 0, 0, 1]
    try:
        plan([_line("user", 1), _line("system", 2)])
    except ReplayFormatError as exc:
        assert "f:2" in str(exc)
    else:
        raise AssertionError("trailing instructions were accepted")


def test_replay_sends_the_whole_history_when_a_message_repeats(tmp_path):
    """A lone repeat of the first message could be read as a resent history: it is stored."""
    from fadeway.replay.lines import ReplayLine
    from fadeway.replay.runner import replay_memory

    def line(role, at, text):
        return ReplayLine("m", at, {"role": role, "content": text}, f"f:{at}")

    lines = [
        line("user", 1, "hi"),
        line("assistant", 2, "hello"),
        line("user", 3, "hi"),
        line("assistant", 4, "hello"),
        line("assistant", 5, "hello"),
    ]
    with fadeway.open(tmp_path / "r.db", background=False) as engine:
        done = replay_memory(engine, "m", lines)
        assert (done.skipped, done.stored) == (0, 5)
        stored = engine.memory("m").messages()
        assert [(m.role, m.at) for m in stored] == [
            (line.message["role"], line.at) for line in lines
        ]
        assert replay_memory(engine, "m", lines).stored == 0
        assert len(engine.memory("m").messages()) == 5


def test_inspect_says_why_the_facts_block_is_empty(tmp_path):
    from fadeway.cli.inspection import render

    view = {
        "memory_id": "m",
        "format": "chat_completions",
        "messages": 4,
        "turns": 2,
        "first_at": 0.0,
        "last_at": 60.0,
        "at": 60.0,
        "episodes": [],
        "lane": {"pending": 0, "parked": []},
        "graph": {
            "entities": 0,
            "aliases": 0,
            "facts": 3,
            "notes": 1,
            "merged": 0,
            "retired": 0,
            "passages": 2,
        },
        "facts_block": None,
    }
    forgotten = render({**view, "states": {"live": 1, "forgotten": 2}})
    assert forgotten.endswith(
        "(empty: no episode is sealed now; the forgotten ones' facts left "
        "the block, and recall brings them back)"
    )
    assert render({**view, "states": {"live": 3}}).endswith("(empty: no episode has sealed yet)")
    assert render({**view, "states": {"sealed": 1, "forgotten": 2}}).endswith(
        "(empty: the notes of the sealed episodes hold no facts)"
    )


def test_what_the_terminal_would_obey_is_printed_escaped(tmp_path, capsys):
    """Memory ids and stored text are untrusted: printed raw, an escape sequence would retitle
    the window, clear the screen or colour what follows."""
    from fadeway.cli.main import main

    hostile = "evil\x1b]0;PWNED\x07\x1b[2J\x9b31m\u202ereversed"
    path = tmp_path / "esc.jsonl"
    lines = [
        {
            "memory_id": hostile,
            "at": 1_767_225_600 + 60 * i,
            "message": {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"note \x1b[1;31mFAKE PROMPT$ {i}",
            },
        }
        for i in range(4)
    ]
    path.write_bytes(b"\n".join(msgspec.json.encode(line) for line in lines))
    db = str(tmp_path / "esc.db")
    for argv in (
        ["replay", str(path), "--db", db],
        ["replay", str(path), "--db", db, "--json"],
        ["inspect", hostile, "--db", db],
        ["inspect", hostile, "--db", db, "--json"],
    ):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert not any(ch in out for ch in "\x1b\x07\x9b\u202e"), argv
        assert "PWNED" in out and ("\\u001b" in out or "\\x1b" in out), argv  # shown, escaped
        if "--json" in argv:
            json_text = out.strip()
            assert msgspec.json.decode(json_text)  # still JSON


def test_a_command_that_only_reads_refuses_a_missing_store_and_creates_none(tmp_path, capsys):
    from fadeway.cli.main import main

    db = tmp_path / "missing.db"
    for argv in (["inspect", "m"], ["usage", "m"], ["recall", "m", "hello"], ["export", "m"]):
        assert main([*argv, "--db", str(db)]) == 2
        assert f"no store at {db}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def _store_with_usage(db) -> None:
    from fadeway.usage import UsageRecord

    def call(kind, model, tokens_in, tokens_out, seconds, cached=0):
        return UsageRecord(
            kind=kind,
            model=model,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            seconds=seconds,
            tokens_cached=cached,
        )

    with fadeway.open(db, background=False) as engine:
        engine.memory("m").decorate(
            {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}
        )
        with engine.store.write("m") as tx:
            tx.insert_usage(
                [
                    call("judge:about", "gpt-4.1-mini", 1_200_000, 30_000, 12.5, 400_000),
                    call("embed", "text-embedding-3-small", 500_000, 0, 3.0),
                    call("judge:about", "gpt-4.1-mini", 800_000, 20_000, 7.5, 100_000),
                    call("note", "local-llama", 1_000, 200, 1.0),
                ],
                0.0,
            )


PRICES = """
["gpt-4.1-mini"]
input = 0.40
output = 1.60
cached_input = 0.10

["text-embedding-3-small"]
input = 0.02
"""


def test_usage_shows_calls_tokens_and_cost_by_kind_and_model(tmp_path, capsys):
    from fadeway.cli.main import main

    db = str(tmp_path / "u.db")
    _store_with_usage(db)
    assert main(["usage", "m", "--db", db]) == 0
    rows = {line.split()[0]: line.split()[1:] for line in capsys.readouterr().out.splitlines()}
    # tokens in, of those cached by the provider, tokens out
    assert rows["judge:about"] == ["gpt-4.1-mini", "2", "2,000,000", "500,000", "50,000", "20.0"]
    assert rows["embed"] == ["text-embedding-3-small", "1", "500,000", "0", "0", "3.0"]
    assert rows["total"] == ["4", "2,501,000", "500,000", "50,200", "24.0"]
    assert "cost" not in rows["kind"]

    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES)
    assert main(["usage", "m", "--db", db, "--prices", str(prices)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    # 1.5M in at $0.40, 0.5M cached at $0.10, 50k out at $1.60
    assert rows["judge:about"][-1] == "$0.7300"
    assert rows["embed"][-1] == "$0.0100"
    assert rows["note"][-1] == "—"  # no price for local-llama
    assert rows["total"][-1] == "$0.7400"
    assert "no price for local-llama" in out

    assert main(["usage", "m", "--db", db, "--prices", str(prices), "--json"]) == 0
    view = msgspec.json.decode(capsys.readouterr().out)
    costs = {(r["kind"], r["model"]): r["cost"] for r in view["rows"]}
    assert costs[("note", "local-llama")] is None
    assert abs(costs[("judge:about", "gpt-4.1-mini")] - 0.73) < 1e-9
    assert abs(view["total"]["cost"] - 0.74) < 1e-9 and view["total"]["calls"] == 4
    assert view["unpriced"] == ["local-llama"]
    assert view["total"]["tokens_cached"] == 500_000

    # Without a cached price, the cached tokens cost what the other input tokens cost.
    prices.write_text(PRICES.replace("cached_input = 0.10\n", ""))
    assert main(["usage", "m", "--db", db, "--prices", str(prices), "--json"]) == 0
    view = msgspec.json.decode(capsys.readouterr().out)
    costs = {(r["kind"], r["model"]): r["cost"] for r in view["rows"]}
    assert abs(costs[("judge:about", "gpt-4.1-mini")] - 0.88) < 1e-9  # 2M in at $0.40

    assert main(["usage", "nobody", "--db", db]) == 2
    assert "no memory 'nobody'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("x = [\n", "not TOML"),
        ("[gpt-4.1]\ninput = 1\n", 'quote a model name that holds dots: ["gpt-4.1"]'),
        ('["m"]\ninput = -1\n', "'m' input must be a finite number not below 0"),
        ('["m"]\ninput = "cheap"\n', "'m' input must be a number of dollars per million"),
        ('["m"]\noutput = 2\n', "'m' has no input price"),
        ('["m"]\ninput = 1\ncached = 0.5\n', "unknown keys ['cached']"),
        ('["m"]\ninput = 1\ncached_input = -0.5\n', "'m' cached_input must be a finite number"),
        ("m = 0.4\n", "'m' must be a table"),
    ],
)
def test_a_malformed_prices_file_is_a_clear_error(tmp_path, text, says):
    db = tmp_path / "u.db"
    _store_with_usage(db)
    prices = tmp_path / "prices.toml"
    prices.write_text(text)
    run = subprocess.run(
        [sys.executable, "-m", "fadeway", "usage", "m", "--db", str(db), "--prices", str(prices)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert says in run.stderr and f"--prices {prices}" in run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
