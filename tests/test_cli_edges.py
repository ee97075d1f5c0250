"""The command line at its edges: what a new user mistypes or tries first gets a clear answer
(the option named, the right exit code, nothing written), and output a script reads stays clean."""

from __future__ import annotations

import json
import logging
import socket
from importlib import resources

import msgspec
import pytest

import fadeway
from fadeway.cli.main import main


def _store(db, memory_id: str = "m") -> None:
    with fadeway.open(db, background=False) as engine:
        engine.memory(memory_id).decorate(
            {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}, at=100.0
        )


def _sample() -> str:
    return str(resources.files("fadeway") / "samples" / "launch-week.jsonl")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["demo", "--ceiling", "abc"], "argument --ceiling: 'abc' is not a positive integer"),
        (["demo", "--ceiling", "0"], "argument --ceiling: 0 is not a positive integer"),
        (["demo", "--workers", "two"], "argument --workers: 'two' is not a positive integer"),
        (["inspect", "m", "--at", "soon"], "argument --at: 'soon' is not ISO 8601"),
        (["inspect", "m", "--at", "nan"], "argument --at: 'nan' is not a moment"),
    ],
)
def test_a_bad_option_value_names_the_option_and_what_is_wanted(argv, says, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "_positive" not in err and "invalid" not in err


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"fadeway {fadeway.__version__}"


def test_recall_refuses_an_empty_message(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    _store(db)
    for message in ("", "  \n"):
        assert main(["recall", "m", message, "--db", db]) == 2
        out, err = capsys.readouterr()
        assert out == "" and "MESSAGE is empty" in err


def test_replay_of_a_directory_says_it_is_a_directory(tmp_path, capsys):
    folder = tmp_path / "inputs"
    folder.mkdir()
    assert main(["replay", str(folder), "--db", str(tmp_path / "r.db")]) == 2
    err = capsys.readouterr().err
    assert f"{folder} is a directory" in err and "no such file" not in err
    assert main(["replay", str(tmp_path / "nothing.jsonl"), "--db", str(tmp_path / "r.db")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not (tmp_path / "r.db").exists()


def test_import_of_a_replay_file_says_what_the_file_is(tmp_path, capsys):
    db = tmp_path / "i.db"
    assert main(["import", _sample(), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "looks like a replay file" in err and "not a fadeway export" in err
    assert "fadeway replay" in err and "not a complete JSON line" not in err
    assert not db.exists()
    folder = tmp_path / "exports"
    folder.mkdir()
    assert main(["import", str(folder), "--db", str(db)]) == 2
    assert f"{folder} is a directory" in capsys.readouterr().err


def test_export_into_a_missing_directory_names_the_path_given(tmp_path, capsys):
    db = str(tmp_path / "e.db")
    _store(db)
    target = tmp_path / "missing" / "x.jsonl"
    assert main(["export", "m", "--db", db, "-o", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"-o {target}: the directory {target.parent} does not exist" in err
    assert ".x.jsonl." not in err  # no temporary file named
    assert not target.parent.exists()


@pytest.mark.parametrize(
    "command", ["inspect", "usage", "recall", "export", "memories", "lane", "demo"]
)
def test_a_file_that_is_not_a_store_is_bad_input(tmp_path, capsys, command):
    db = tmp_path / "notsqlite.db"
    db.write_bytes(b"this is not SQLite, just some text a user pointed --db at\n" * 20)
    argv = {
        "inspect": ["inspect", "m"],
        "usage": ["usage", "m"],
        "recall": ["recall", "m", "hello"],
        "export": ["export", "m"],
        "memories": ["memories"],
        "lane": ["lane", "retry", "m"],
        "demo": ["demo"],
    }[command]
    original = db.read_bytes()
    assert main([*argv, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"--db {db}: not a fadeway store" in err and "file is not a database" in err
    assert db.read_bytes() == original and list(tmp_path.iterdir()) == [db]  # nothing written


def test_replay_and_import_into_a_file_that_is_not_a_store_are_bad_input(tmp_path, capsys):
    db = tmp_path / "notsqlite.db"
    db.write_bytes(b"not a database at all\n" * 50)
    lines = tmp_path / "lines.jsonl"
    lines.write_text(
        json.dumps({"memory_id": "m", "at": 0, "message": {"role": "user", "content": "hi"}})
    )
    assert main(["replay", str(lines), "--db", str(db)]) == 2
    assert "not a fadeway store" in capsys.readouterr().err
    good = tmp_path / "good.db"
    _store(good)
    export = tmp_path / "m.jsonl"
    assert main(["export", "m", "--db", str(good), "-o", str(export)]) == 0
    assert main(["import", str(export), "--db", str(db)]) == 2
    assert "not a fadeway store" in capsys.readouterr().err


def test_a_store_url_of_another_kind_is_bad_input(tmp_path, capsys):
    assert main(["inspect", "m", "--db", "redis://localhost/x"]) == 2
    assert "unsupported store URL scheme 'redis'" in capsys.readouterr().err


def test_an_unreachable_postgres_server_is_one_line_without_the_password(capsys):
    """`--db postgresql://...` with nothing listening: a failure to run (exit 1, nothing
    written), said in one line naming the URL without its password and what to check."""
    pytest.importorskip("psycopg")
    with socket.socket() as s:  # a port nothing listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://fadeway:s3cret@127.0.0.1:{port}/memories"
    assert main(["memories", "--db", url]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "s3cret" not in err
    assert f"postgresql://fadeway:***@127.0.0.1:{port}/memories" in err
    assert "Connection refused" in err and "check that the server runs" in err


def test_demo_json_prints_only_json(tmp_path, capsys):
    db = str(tmp_path / "demo.db")
    assert main(["demo", "--json", "--db", db, "--ceiling", "32000"]) == 0
    out = capsys.readouterr().out
    doc = msgspec.json.decode(out)  # the whole of stdout is one JSON document
    assert doc["memories"][0]["memory_id"] == "launch-week"
    assert doc["memories"][0]["messages"] == 999
    view = doc["inspect"]
    assert view["memory_id"] == "launch-week" and view["messages"] == 999
    assert view["at"] == view["last_at"]  # activation as of the last message, as the text shows
    assert view["facts_block"]


def test_log_lines_are_written_above_the_progress_bar(tmp_path, monkeypatch):
    """A warning logged while the bar is drawn goes through tqdm, which clears the bar, writes
    the line and draws the bar again, instead of cutting through it."""
    import tqdm

    import fadeway.cli.batch as batch

    written: list[str] = []
    monkeypatch.setattr(tqdm.tqdm, "write", classmethod(lambda cls, s, **kw: written.append(s)))
    replay_memory = batch.replay_memory

    def logging_replay(*args, **kwargs):
        logging.getLogger("fadeway.replay").warning("a warning during the replay")
        return replay_memory(*args, **kwargs)

    monkeypatch.setattr(batch, "replay_memory", logging_replay)
    lines = tmp_path / "lines.jsonl"
    lines.write_text(
        json.dumps({"memory_id": "m", "at": 0, "message": {"role": "user", "content": "hi"}})
    )
    assert main(["replay", str(lines), "--db", str(tmp_path / "r.db")]) == 0
    assert "a warning during the replay" in written


def test_a_workers_log_records_are_handled_by_the_parents_loggers(monkeypatch):
    """Workers send their log records with their progress; the parent's handlers write them
    (above the bar), and progress counts still advance the bar."""
    import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    import fadeway.cli.batch as batch

    written: list[str] = []

    monkeypatch.setattr(tqdm.tqdm, "write", classmethod(lambda cls, s, **kw: written.append(s)))
    advanced: list[int] = []
    record = logging.LogRecord(
        "fadeway.lane", logging.WARNING, __file__, 1, "from a worker", (), None
    )
    with logging_redirect_tqdm():
        batch._forward(record, advanced.append)
        batch._forward(7, advanced.append)
    assert written == ["from a worker"] and advanced == [7]


def test_memories_lists_the_store_with_counts_and_last_activity(tmp_path, capsys):
    db = str(tmp_path / "m.db")
    assert main(["memories", "--db", db]) == 2  # a store that is not there: none is created
    assert f"no store at {db}" in capsys.readouterr().err
    _store(db, "zeta")
    _store(db, "alpha\x1b[2J")
    with fadeway.open(db, background=False) as engine:
        engine.memory("zeta").decorate(
            {"model": "gpt-4.1", "messages": [{"role": "user", "content": "again"}]}, at=160.0
        )
    assert main(["memories", "--db", db]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == [
        "messages",
        "turns",
        "episodes",
        "last",
        "message",
        "(UTC)",
        "memory",
    ]
    assert lines[1].split() == ["1", "1", "0", "1970-01-01", "00:01", "alpha\\u001b[2J"]
    assert lines[2].split() == ["2", "2", "0", "1970-01-01", "00:02", "zeta"]
    assert lines[3] == "2 memories" and "\x1b" not in out
    assert main(["memories", "--db", db, "--json"]) == 0
    doc = msgspec.json.decode(capsys.readouterr().out)
    assert [(m["memory_id"], m["messages"], m["last_at"]) for m in doc["memories"]] == [
        ("alpha\x1b[2J", 1, 100.0),
        ("zeta", 2, 160.0),
    ]


def test_counts_of_one_are_singular(tmp_path, capsys):
    db = str(tmp_path / "one.db")
    _store(db)
    assert main(["memories", "--db", db]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 memory"
    export = tmp_path / "m.jsonl"
    assert main(["export", "m", "--db", db, "-o", str(export)]) == 0
    assert "exported 1 memory to" in capsys.readouterr().err
    assert main(["import", str(export), "--db", str(tmp_path / "copy.db")]) == 0
    assert "imported 1 memory into" in capsys.readouterr().out
    assert main(["inspect", "m", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "1 message in 1 turn," in out
    assert "graph: 0 entities, 0 aliases, 0 facts from 0 notes" in out
    lines = tmp_path / "lines.jsonl"
    lines.write_text(
        json.dumps({"memory_id": "m", "at": 0, "message": {"role": "user", "content": "hi"}})
    )
    assert main(["replay", str(lines), "--db", str(tmp_path / "r.db")]) == 0
    assert "total (1 memory)" in capsys.readouterr().out


def test_replay_and_import_take_the_size_limits_from_the_command_line(tmp_path, capsys):
    """A recorded conversation with a message over the default 1 MiB is refused naming the
    setting; --max-message-bytes raises it for replay, and for the import of its export."""
    big = "x" * (1_200_000)
    lines = [
        {"memory_id": "m", "at": 100.0 + i, "message": message}
        for i, message in enumerate(
            [
                {"role": "user", "content": big},
                {"role": "assistant", "content": "Read it."},
            ]
        )
    ]
    recorded = tmp_path / "big.jsonl"
    recorded.write_text("".join(json.dumps(line) + "\n" for line in lines))
    refused = str(tmp_path / "refused.db")
    assert main(["replay", str(recorded), "--db", refused]) != 0
    assert "max_message_bytes" in capsys.readouterr().err
    db = str(tmp_path / "taken.db")
    limit = ["--max-message-bytes", "2000000"]
    assert main(["replay", str(recorded), "--db", db, *limit]) == 0
    with fadeway.open(db, background=False, max_message_bytes=2_000_000) as engine:
        assert json.loads(engine.memory("m").messages()[0].body)["content"] == big
    exported = str(tmp_path / "m.jsonl")
    assert main(["export", "m", "--db", db, "-o", exported]) == 0
    capsys.readouterr()
    assert main(["import", exported, "--db", str(tmp_path / "copy.db")]) != 0
    assert "max_message_bytes" in capsys.readouterr().err
    assert main(["import", exported, "--db", str(tmp_path / "copy2.db"), *limit]) == 0


def test_an_export_with_a_large_note_imports_with_the_note_limits_raised(tmp_path, capsys):
    """A note of more entries than the importing engine's max_note_facts is refused naming the
    setting; --max-note-facts (and --max-note-bytes) raise the limits for the import."""
    from conftest import Clock, open_small
    from helpers import converse_with_notes

    entries = [(f"Fact number {i} holds.", "user", f"topic {i}", False) for i in range(30)]
    source = tmp_path / "source.db"
    with open_small(source, Clock(), max_note_facts=50) as engine:
        converse_with_notes(engine, engine.memory("m"), Clock(), [entries], settle=False)
    exported = str(tmp_path / "m.jsonl")
    assert main(["export", "m", "--db", str(source), "-o", exported]) == 0
    small = ["--max-note-facts", "10"]
    capsys.readouterr()
    assert main(["import", exported, "--db", str(tmp_path / "a.db"), *small]) == 2
    assert "max_note_facts" in capsys.readouterr().err
    assert main(["import", exported, "--db", str(tmp_path / "b.db"), "--max-note-bytes", "64"]) == 2
    assert "max_note_bytes" in capsys.readouterr().err
    raised = ["--max-note-facts", "40", "--max-note-bytes", "100000"]
    assert main(["import", exported, "--db", str(tmp_path / "c.db"), *raised]) == 0


def test_recall_at_a_time_reads_the_days_named_from_it(tmp_path, capsys):
    """`fadeway recall --at TIME`: "yesterday" is the day before TIME, and the block quotes
    what was said that day first, though the message has no other word to search by."""
    from datetime import UTC, datetime, timedelta

    db = str(tmp_path / "r.db")
    sample = str(resources.files("fadeway") / "samples" / "launch-week.jsonl")
    assert main(["replay", sample, "--db", db, "--ceiling", "6000"]) == 0
    with fadeway.open(db, background=False) as engine:
        said = {p.n: p.at for p in engine.memory("launch-week").export().passages}
    days = sorted({datetime.fromtimestamp(at, UTC).date() for at in said.values()})
    assert len(days) >= 3  # sealed history over several days
    for day in days[1], days[-2]:
        at = datetime.combine(day + timedelta(days=1), datetime.min.time(), UTC) + timedelta(
            hours=12
        )
        capsys.readouterr()
        argv = ["recall", "launch-week", "What did we do yesterday?", "--db", db, "--json"]
        assert main([*argv, "--at", at.isoformat()]) == 0
        quoted = json.loads(capsys.readouterr().out)["passages"]
        assert quoted and datetime.fromtimestamp(said[quoted[0]], UTC).date() == day
