"""Replay throughput of `fadeway replay` on all ten LoCoMo conversations (~5,900 turns).

Each row is one fresh store replayed by the CLI in a subprocess, timed whole (interpreter start,
checking the input, spawning workers, the replay, the lanes, the summary): messages/s is the
conversation's turns over that wall time. Peak memory is `ru_maxrss` of the children, i.e. the
largest single process (the parent or one worker), not their sum. Before a row is reported, the
store is checked: every turn stored once, and the summary equal to the store's counts.

    python benches/replay_locomo.py            # writes benches/RESULTS-replay.md
    python benches/replay_locomo.py --scaling [--rounds 3]  # 1, 2 and 4 workers at 8,000
                # tokens, SQLite and PostgreSQL, each row run `rounds` times, taken in turn:
                # a section of RESULTS-replay.md

With `--scaling` each store is fresh per row: a SQLite file, or a new database on the server of
$FADEWAY_TEST_POSTGRES, else on a throwaway cluster (`tests/pg.py`) of the machine's PostgreSQL.
The new section goes first; the runs before stay below it, the last one's notes with it.

LoCoMo is read from shared/data (or $FADEWAY_SHARED_DATA); it is never copied here.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import fadeway  # noqa: E402
from helpers import shared_data  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS-replay.md")
#: (workers, ceiling or None for the default 200,000 tokens)
ROWS = [(1, None), (2, None), (1, 8_000), (2, 8_000)]
GOAL_SECONDS = 60.0


def _run_one(locomo: Path, db: Path | str, workers: int, ceiling: int | None) -> dict:
    """Replay in a child of a fresh Python, so `RUSAGE_CHILDREN` holds this row alone."""
    args = [
        sys.executable,
        "-m",
        "fadeway",
        "replay",
        str(locomo),
        "--db",
        str(db),
        "--workers",
        str(workers),
        "--json",
    ]
    if ceiling is not None:
        args += ["--ceiling", str(ceiling)]
    probe = (
        "import json, resource, subprocess, sys, time\n"
        f"args = {args!r}\n"
        "start = time.perf_counter()\n"
        "run = subprocess.run(args, capture_output=True, text=True)\n"
        "wall = time.perf_counter() - start\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "if run.returncode: sys.exit(run.stderr)\n"
        "print(json.dumps({'wall': wall, 'peak_kb': peak, 'summary': json.loads(run.stdout)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _check(db: Path | str, summary: dict, turns: int) -> None:
    rows = {r["memory_id"]: r for r in summary["memories"]}
    assert len(rows) == 10 and sum(r["messages"] for r in rows.values()) == turns, rows
    with fadeway.open(db, background=False) as engine:
        for memory_id, row in rows.items():
            doc = engine.memory(memory_id).export()
            states = [e.state for e in doc.episodes]
            assert (
                row["messages"],
                row["episodes"],
                row["facts"],
                row["sealed"],
                row["forgotten"],
            ) == (
                len(doc.messages),
                len(states),
                len(doc.facts),
                states.count("sealed"),
                states.count("forgotten"),
            )
            assert row["new"] == row["messages"]


#: (workers) of the scaling rows, at SCALING_CEILING, on each store.
SCALING_WORKERS = (1, 2, 4)
SCALING_CEILING = 8_000
SCALING_MARKER = "<!-- scaling -->"


def _scaling(locomo: Path, turns: int, rounds: int = 1) -> str:
    """Replay over 1, 2 and 4 workers on a fresh SQLite file and a fresh PostgreSQL database,
    `rounds` times, the rows of a store taken in turn each round (so that the VM's slow spells
    fall on every row alike); each row's wall time is its median, and the speed-up is read
    from the medians and, round by round, from runs minutes apart."""
    import pg

    cores = os.cpu_count() or 1  # a worker past the cores shares one
    lines = [
        SCALING_MARKER,
        "## Workers on one store (issue 30)",
        "",
        f"`python benches/replay_locomo.py --scaling --rounds {rounds}`, "
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs: the ten conversations at "
        f"{SCALING_CEILING:,} tokens, a fresh store per run; {rounds} "
        f"{'round' if rounds == 1 else 'rounds'}, each running the rows of a store in turn. "
        "Wall time: the median of the row's runs; speed-up: "
        "against 1 worker on the same store, from the medians, and its range over the rounds "
        "(each round's runs against that round's 1 worker); per core: messages/s over the "
        "cores the workers can use (one each, at most all).",
        "",
        "| store | workers | wall time | runs | messages/s | messages/s per core | speed-up "
        "| by round |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    with contextlib.ExitStack() as stack:
        why = pg.why_no_cluster() if not os.environ.get(pg.ENV_URL) else None
        server = None if why else stack.enter_context(pg.server())
        for store in ("SQLite", "PostgreSQL"):
            if store == "PostgreSQL" and server is None:
                lines.append(f"| PostgreSQL | - | not run: {why} | | | | | |")
                continue
            walls: dict[int, list[float]] = {w: [] for w in SCALING_WORKERS}
            for _ in range(rounds):
                for workers in SCALING_WORKERS:
                    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as row:
                        db: Path | str = (
                            Path(tmp) / "locomo.db"
                            if store == "SQLite"
                            else row.enter_context(pg.fresh_database(server))
                        )
                        got = _run_one(locomo, db, workers, SCALING_CEILING)
                        _check(db, got["summary"], turns)
                    walls[workers].append(got["wall"])
                    print(f"{store}, {workers} worker(s): {got['wall']:.1f} s", flush=True)
            one = statistics.median(walls[1])
            for workers, runs in walls.items():
                wall = statistics.median(runs)
                by_round = [a / b for a, b in zip(walls[1], runs, strict=True)]
                lines.append(
                    f"| {store} | {workers} | {wall:.1f} s | "
                    f"{' / '.join(f'{r:.1f}' for r in runs)} | {turns / wall:.0f} "
                    f"| {turns / wall / min(workers, cores):.0f} | {one / wall:.2f}x "
                    f"| {min(by_round):.2f}-{max(by_round):.2f}x |"
                )
    return "\n".join(lines) + "\n"


def _with_scaling(text: str, section: str) -> str:
    """`text` with `section` where its scaling section was, the runs before kept below it (the
    last one's heading now "The run before", its notes as they were)."""
    kept, _, before = text.partition(SCALING_MARKER)
    head, _, rest = before.strip("\n").partition("\n")
    if head.startswith("## Workers on one store"):  # the last run's own heading and date line
        intro, _, rest = rest.strip("\n").partition("\n")
        date = re.search(r"\d{4}-\d{2}-\d{2}", intro)
        head = f"## The run before ({date.group(0)})" if date else "## The run before"
    earlier = f"\n{head}\n\n{rest.strip(chr(10))}\n" if before.strip() else ""
    return kept.rstrip("\n") + "\n\n" + section + earlier


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print, do not write RESULTS")
    parser.add_argument(
        "--scaling", action="store_true", help="workers on SQLite and PostgreSQL (a section)"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="with --scaling: runs of each row, taken in turn"
    )
    args = parser.parse_args()
    locomo = shared_data("locomo/locomo10.json")
    if locomo is None:
        print("LoCoMo not found under shared/data; nothing to measure", file=sys.stderr)
        return 1
    samples = json.loads(locomo.read_bytes())
    turns = sum(
        len(v)
        for s in samples
        for k, v in s["conversation"].items()
        if k.startswith("session_") and isinstance(v, list)
    )
    if args.scaling:
        section = _scaling(locomo, turns, max(1, args.rounds))
        if not args.no_write:
            RESULTS.write_text(_with_scaling(RESULTS.read_text(), section))
        print(section)
        return 0
    lines = [
        "# Replay throughput: all ten LoCoMo conversations",
        "",
        f"`python benches/replay_locomo.py`, {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}. {turns} turns, offline "
        "judge and offline note writer, a fresh SQLite store per row. Wall time is the "
        "whole `fadeway replay` process; peak memory is the largest single process "
        f"(parent or worker). Goal: under {GOAL_SECONDS:.0f} s at the default ceiling.",
        "",
        "| workers | ceiling | wall time | messages/s | peak memory | episodes | facts | "
        "sealed | forgotten |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for workers, ceiling in ROWS:
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "locomo.db"
            got = _run_one(locomo, db, workers, ceiling)
            _check(db, got["summary"], turns)
        rows = got["summary"]["memories"]
        total = {k: sum(r[k] for r in rows) for k in ("episodes", "facts", "sealed", "forgotten")}
        line = (
            f"| {workers} | {ceiling or '200,000 (default)'} | {got['wall']:.1f} s | "
            f"{turns / got['wall']:.0f} | {got['peak_kb'] / 1024:.0f} MB | "
            f"{total['episodes']} | {total['facts']} | {total['sealed']} | "
            f"{total['forgotten']} |"
        )
        print(line, flush=True)
        lines.append(line)
    text = "\n".join(lines) + "\n"
    if not args.no_write:
        RESULTS.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
