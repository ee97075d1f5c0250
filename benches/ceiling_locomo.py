"""How often a decorated request stands over the ceiling: all ten LoCoMo conversations replayed
through `fadeway replay` (offline judge and note writer), every decorated request measured.

    python benches/ceiling_locomo.py [--ceilings 8000] [--out benches/RESULTS-ceiling.md]

Each decorate records its request's size estimate (`RequestRecord.estimate`, what `mem.measure`
gives for the request); a replay reports no provider counts, so the estimate is uncorrected
and the ceiling is compared with it directly. A request over the ceiling is one a provider
whose window is the ceiling would refuse. The spec lets one kind stand over: the request that
starts a fade still holds the leaving turns (with the new message and its recall block, which
the room leaves out), and so does every request while the leaving turns wait for their note.
In a replay the offline note writer answers right after each reply, so those are few.

LoCoMo is read from shared/data (or $FADEWAY_SHARED_DATA); it is never copied here.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import fadeway  # noqa: E402
from helpers import shared_data  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS-ceiling.md")


def measure(locomo: Path, ceiling: int) -> dict[str, list[int]]:
    """The estimate of every decorated request, by memory, of a fresh replay at `ceiling`."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ceiling.db"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "fadeway",
                "replay",
                str(locomo),
                "--db",
                str(db),
                "--ceiling",
                str(ceiling),
                "--workers",
                "2",
                "--json",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        with fadeway.open(db, background=False) as engine:
            return {
                memory_id: [r.estimate for r in engine.memory(memory_id).export().requests]
                for memory_id in engine.memory_ids()
            }


def row(ceiling: int, estimates: dict[str, list[int]]) -> str:
    sizes = [e for es in estimates.values() for e in es]
    over = [e for e in sizes if e > ceiling]
    worst = max(over, default=ceiling) / ceiling - 1
    mean = sum(e / ceiling - 1 for e in over) / len(over) if over else 0.0
    return (
        f"| {ceiling:,} | {len(sizes):,} | {len(over):,} ({len(over) / len(sizes):.1%}) | "
        f"{mean:+.1%} | {worst:+.1%} | {max(sizes):,} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ceilings", type=int, nargs="+", default=[8_000])
    parser.add_argument("--out", type=Path, help=f"write the results here (e.g. {RESULTS})")
    args = parser.parse_args()
    locomo = shared_data("locomo/locomo10.json")
    if locomo is None:
        print("LoCoMo not found under shared/data; nothing to measure", file=sys.stderr)
        return 1
    lines = [
        "# Requests over the ceiling: all ten LoCoMo conversations",
        "",
        f"`python benches/ceiling_locomo.py`, {time.strftime('%Y-%m-%d')}: each "
        "conversation replayed by `fadeway replay` with the offline judge and note writer, "
        "every decorated request's size estimate against the ceiling (see the script's "
        "docstring).",
        "",
        "| ceiling | requests | over the ceiling | mean excess of those | worst | largest |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for ceiling in args.ceilings:
        start = time.perf_counter()
        lines.append(row(ceiling, measure(locomo, ceiling)))
        print(f"ceiling {ceiling:,}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
