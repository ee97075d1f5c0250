"""How often a decorated request stands over the ceiling when a note writer answers the asks in
the lane (an engine opened with `note_writer=`): the bundled launch-week sample replayed with the
offline writer, its notes landing late, every decorated request measured.

    python benches/ceiling_note_writer.py [--ceiling 6000] [--out FILE]

Two lanes: the engine's background worker, racing the replay (the writer's notes land a few
turns late), and a lane that never runs until the replay ends (a writer whose endpoint is down).
Each request's size is its estimate (`RequestRecord.estimate`); a replay reports no provider
counts, so the estimate is uncorrected and compared with the ceiling directly. The background
row varies from run to run with how far the worker falls behind.
"""

from __future__ import annotations

import argparse
import tempfile
from importlib import resources
from pathlib import Path

import fadeway
from fadeway.replay.lines import read_replay
from fadeway.replay.runner import replay

RESULTS = Path(__file__).with_name("RESULTS-ceiling-note-writer.md")
LANES = {"background worker": True, "no lane until the end": False}


def estimates(ceiling: int, background: bool) -> list[int]:
    """Every decorated request's estimate, replaying launch-week at `ceiling`."""
    sample = resources.files("fadeway") / "samples" / "launch-week.jsonl"
    lines = list(read_replay(str(sample)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.db"
        with fadeway.open(
            path, background=background, ceiling=ceiling, note_writer="offline"
        ) as engine:
            mem = engine.memory(lines[0].memory_id)
            replay(mem, lines)
            engine.drain()
            return [r.estimate for r in mem.export().requests]


def row(lane: str, ceiling: int, sizes: list[int]) -> str:
    over = [s for s in sizes if s > ceiling]
    return f"| {lane} | {len(sizes):,} | {len(over):,} | {max(sizes):,} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ceiling", type=int, default=6_000)
    parser.add_argument("--out", type=Path, help=f"write the results here (e.g. {RESULTS})")
    args = parser.parse_args()
    rows = [row(lane, args.ceiling, estimates(args.ceiling, bg)) for lane, bg in LANES.items()]
    text = "\n".join(
        [
            f"Ceiling {args.ceiling:,} tokens, launch-week, offline judge and note writer.",
            "",
            "| lane | requests | over the ceiling | largest |",
            "| --- | --- | --- | --- |",
            *rows,
        ]
    )
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
