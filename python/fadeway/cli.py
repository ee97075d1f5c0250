"""The `fadeway` command line."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timezone
from importlib import resources

import msgspec

from . import open as open_engine
from .formats import text_of
from .replay import read_replay, replay

__all__ = ["main"]


def _default_db() -> str:
    return os.environ.get("FADEWAY_DB", "fadeway.db")


def _demo(args: argparse.Namespace) -> int:
    sample = resources.files("fadeway") / "samples" / "quickstart.jsonl"
    with resources.as_file(sample) as path:
        lines = list(read_replay(path))
    with open_engine(args.db) as engine:
        memory_id = lines[0].memory_id
        mem = engine.memory(memory_id)
        if memory_id in engine.memory_ids():
            print(f"{args.db} already holds memory {memory_id!r}; showing it as stored.")
        else:
            n = replay(mem, lines)
            print(f"Replayed {n} messages of memory {memory_id!r} into {args.db}.")
        messages = mem.messages()
        print(f"\n{'seq':>3} {'turn':>4}  {'time (UTC)':<16}  {'role':<9} {'tokens':>6}  text")
        for m in messages:
            when = datetime.fromtimestamp(m.at, timezone.utc).strftime("%Y-%m-%d %H:%M")
            text = " ".join(text_of(msgspec.json.decode(m.body))).replace("\n", " ")
            print(f"{m.seq:>3} {m.turn:>4}  {when:<16}  {m.role:<9} {m.tokens:>6}  "
                  f"{text[:60] + ('…' if len(text) > 60 else '')}")
        units = mem.units()
        print(f"\n{len(messages)} messages in {messages[-1].turn} turns and {len(units)} units, "
              f"{sum(m.tokens for m in messages)} tokens estimated.")
        mem.cut()  # closed history into episodes now (replay is too short to trigger a cut)
        for e in mem.episodes():
            start = datetime.fromtimestamp(e.start_at, timezone.utc).strftime("%Y-%m-%d %H:%M")
            print(f"episode {e.n}: turns {e.first_turn}–{e.last_turn}, messages "
                  f"{e.first_seq}–{e.last_seq}, {len(e.units)} units, {e.tokens} tokens, "
                  f"from {start}, {e.state}, {len(e.traces)} trace(s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fadeway", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="replay the bundled sample conversation and show it")
    demo.add_argument("--db", default=_default_db(), help="store path (default: %(default)s)")
    demo.set_defaults(run=_demo)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
