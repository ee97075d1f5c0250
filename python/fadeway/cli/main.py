"""The `fadeway` command line: replay, inspect, recall, export, import, demo.

Every subcommand takes `--db URL` (default `fadeway.db` in the working directory, or
`$FADEWAY_DB`). Exit codes: 0 done, 1 failed while running, 2 bad input (nothing was written
for it), 130 interrupted (run the same command again to resume).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import IO

from .. import _constants as C
from ..engine import Engine
from ..engine import open as open_engine
from ..errors import (
    FadewayError,
    ImportConflictError,
    InvalidExportError,
    InvalidMemoryIdError,
    MemoryNotFoundError,
    ReplayFormatError,
    UsageError,
)
from ..export.document import write_jsonl
from ..export.files import check_export_file
from ..replay.sources import read_inputs
from .batch import MemorySummary, ReplaySettings, run_batch
from .inspection import inspect_memory, render

__all__ = ["main"]

#: The bundled sample `fadeway demo` replays, and the ceiling it replays it under (small, so
#: that episodes leave, notes are taken and the facts block fills within the sample).
DEMO_SAMPLE = "launch-week.jsonl"
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
#: Summaries list each memory up to this many; beyond, only the totals.
_SUMMARY_ROWS = 20


def _default_db() -> str:
    return os.environ.get("FADEWAY_DB", "fadeway.db")


def _model_spec(value: str, option: str) -> str | None:
    """`offline`, `none` (the note writer only) or an OpenAI-compatible endpoint URL."""
    if value == "offline" or value.startswith(("http://", "https://")):
        return value
    if value == "none" and option == "--note-writer":
        return None
    allowed = (
        "offline, none or an http(s) URL"
        if option == "--note-writer"
        else ("offline or an http(s) URL")
    )
    raise UsageError(f"{option} {value!r}: allowed is {allowed}")


def _seconds(text: str) -> float:
    """ISO 8601 with a zone, or Unix seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not ISO 8601 (with a zone) nor Unix seconds"
        ) from None
    if parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone (add Z or +00:00)")
    return parsed.timestamp()


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {value}")
    return value


# Control characters (but line feed and tab) and the bidirectional overrides, shown escaped:
# memory ids and stored text are untrusted, and printed raw they could move the cursor, retitle
# the window or reorder what the reader sees. The escape is JSON's, so JSON output stays JSON.
_UNSAFE = {
    c: f"\\u{c:04x}"
    for c in [
        *range(0x20),
        0x7F,
        *range(0x80, 0xA0),
        0x061C,
        *range(0x200E, 0x2010),
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    ]
    if chr(c) not in "\n\t"
}


def _print(*values: object, file: IO[str] | None = None) -> None:
    """`print`, with what could command a terminal escaped."""
    print(*(str(v).translate(_UNSAFE) for v in values), file=file)


def _open_existing(db: str) -> Engine:
    """The store at `db` for a command that only reads: one that is not there is an error,
    not a new empty file."""
    path = db[len("sqlite:///") :] if db.startswith("sqlite:///") else db
    if (
        path not in ("", ":memory:")
        and "://" not in path
        and not path.startswith("file:")
        and not Path(path).exists()
    ):
        raise FileNotFoundError(f"no store at {path}")
    return open_engine(db, background=False)


# -- replay -----------------------------------------------------------------------------------


def _summary_table(rows: list[MemorySummary], elapsed: float, new: int) -> str:
    head = (
        f"{'memory':<24} {'messages':>9} {'new':>7} {'episodes':>9} {'facts':>7} "
        f"{'sealed':>7} {'forgotten':>9}"
    )
    lines = [head, "-" * len(head)]

    def line(name: str, r: list[int]) -> str:
        return f"{name[:24]:<24} {r[0]:>9} {r[1]:>7} {r[2]:>9} {r[3]:>7} {r[4]:>7} {r[5]:>9}"

    for s in rows[:_SUMMARY_ROWS]:
        lines.append(
            line(s.memory_id, [s.messages, s.new, s.episodes, s.facts, s.sealed, s.forgotten])
        )
    if len(rows) > _SUMMARY_ROWS:
        lines.append(f"… and {len(rows) - _SUMMARY_ROWS} more memories")
    totals = [
        sum(getattr(s, f) for s in rows)
        for f in ("messages", "new", "episodes", "facts", "sealed", "forgotten")
    ]
    lines += [
        "-" * len(head),
        line(f"total ({len(rows)} memories)", totals),
        f"elapsed {elapsed:.1f} s, {new / elapsed if elapsed > 0 else 0:.0f} new messages/s",
    ]
    return "\n".join(lines)


def _run_replay(args: argparse.Namespace, paths: list[str], *, quiet: bool = False) -> int:
    judge = _model_spec(args.judge, "--judge")
    writer = _model_spec(args.note_writer, "--note-writer")
    urls = [v for v in (judge, writer) if v is not None and v != "offline"]
    if args.judge_model is not None and not urls:
        raise UsageError(
            "--judge-model names the model behind --judge URL or --note-writer "
            "URL; give one of them"
        )
    assert judge is not None
    settings = ReplaySettings(
        args.db, args.ceiling, writer, judge=judge, judge_model=args.judge_model
    )
    start = time.monotonic()
    batch = read_inputs(paths)
    from tqdm import tqdm  # only replay draws a bar

    with tqdm(
        total=batch.messages,
        unit="msg",
        desc="replay",
        disable=quiet or None,
        file=sys.stderr,
        dynamic_ncols=True,
    ) as bar:
        rows = run_batch(batch, settings, workers=args.workers, advance=bar.update)
    elapsed = time.monotonic() - start
    new = sum(r.new for r in rows)
    if getattr(args, "json", False):
        _print(
            json.dumps(
                {"memories": [dataclasses.asdict(r) for r in rows], "elapsed": elapsed}, indent=2
            )
        )
    elif not quiet:
        _print(_summary_table(rows, elapsed, new))
    return 0


def _replay(args: argparse.Namespace) -> int:
    return _run_replay(args, args.files)


# -- inspect, export, import, demo ------------------------------------------------------------


def _inspect(args: argparse.Namespace) -> int:
    with _open_existing(args.db) as engine:
        view = inspect_memory(engine, args.memory, args.at if args.at is not None else time.time())
    if args.json:
        _print(json.dumps(view, indent=2, ensure_ascii=False))
    else:
        _print(render(view))
    return 0


def _recall(args: argparse.Namespace) -> int:
    from ..recall.turns import preview

    with _open_existing(args.db) as engine:
        result = preview(engine.services, args.memory, args.message)
    timings = {stage: round(seconds * 1e3, 3) for stage, seconds in result.timings.items()}
    if args.json:
        _print(
            json.dumps(
                {
                    "block": result.block,
                    "facts": result.facts,
                    "passages": result.passages,
                    "walk": result.walk,
                    "timings_ms": timings,
                },
                indent=2,
                ensure_ascii=False,
            )
        )
        return 0
    _print(result.block if result.block is not None else "(no recall block: nothing was found)")
    _print()
    _print(
        f"walk: {result.walk}; "
        + ", ".join(f"{stage} {ms:.2f} ms" for stage, ms in timings.items())
        + f"; total {sum(timings.values()):.2f} ms"
    )
    return 0


def _export(args: argparse.Namespace) -> int:
    if args.all == (args.memory is not None):
        raise UsageError("name one MEMORY or give --all")
    with _open_existing(args.db) as engine:
        ids = engine.memory_ids() if args.all else [args.memory]
        if not args.all and args.memory not in ids:
            raise UsageError(f"the store holds no memory {args.memory!r}")
        docs = (engine.memory(memory_id).export() for memory_id in ids)  # one at a time
        if args.output in (None, "-"):
            write_jsonl(docs, sys.stdout.buffer)
            sys.stdout.flush()
            return 0
        target = Path(args.output)
        # Written beside the target and renamed at the end: never a half-written file.
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
        try:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; an export is a plain file
            with os.fdopen(fd, "wb") as fp:
                n = write_jsonl(docs, fp)
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
    _print(f"exported {n} memories to {target}", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace) -> int:
    check_export_file(args.file)
    with open_engine(args.db, background=False) as engine:
        imported, skipped = engine.import_file(args.file)
        engine.drain()  # embeds the imported facts and passages for search
    _print(
        f"imported {len(imported)} memories into {args.db}"
        + (f"; {len(skipped)} already there, unchanged" if skipped else "")
    )
    return 0


def _demo(args: argparse.Namespace) -> int:
    sample = resources.files("fadeway") / "samples" / DEMO_SAMPLE
    with resources.as_file(sample) as path:
        _run_replay(args, [str(path)])
    with open_engine(args.db, background=False) as engine:
        memory_id = "launch-week"
        with engine.store.read(memory_id) as tx:
            count = tx.message_count()
            last = tx.messages(count - 1, count)[0].at
        view = inspect_memory(engine, memory_id, last)
    _print()
    _print(render(view))
    _print(
        f"\n(activation as of the last message; `fadeway inspect {memory_id} --db {args.db}` "
        "shows it now, `--at TIME` at any moment)"
    )
    return 0


# -- the parser -------------------------------------------------------------------------------


def _add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=_default_db(),
        metavar="URL",
        help="the store: a path or sqlite:///path (default: $FADEWAY_DB or "
        "fadeway.db; now %(default)s)",
    )


def _add_replay_options(parser: argparse.ArgumentParser, *, demo: bool = False) -> None:
    _add_db(parser)
    parser.add_argument(
        "--workers",
        type=_positive,
        default=1,
        metavar="N",
        help="worker processes; memories replay in parallel (default: 1)",
    )
    parser.add_argument(
        "--ceiling",
        type=_positive,
        default=C.DEMO_CEILING if demo else None,
        metavar="T",
        help="context window assumed, in tokens (default: "
        + ("%(default)s" if demo else "200000")
        + ")",
    )
    parser.add_argument(
        "--judge",
        default="offline",
        metavar="offline|URL",
        help="the judgment model: offline (default; no network), or an "
        "OpenAI-compatible API root such as https://api.openai.com/v1 "
        "(key from FADEWAY_JUDGE_API_KEY)",
    )
    parser.add_argument(
        "--judge-model",
        default=None,
        metavar="M",
        help="the model behind --judge URL and --note-writer URL (default: FADEWAY_JUDGE_MODEL)",
    )
    parser.add_argument(
        "--note-writer",
        default="offline",
        metavar="offline|none|URL",
        help="who answers note asks the recorded replies cannot: the offline "
        "extractive writer (default), none, or a model at an "
        "OpenAI-compatible API root (key from FADEWAY_NOTE_WRITER_API_KEY, "
        "else FADEWAY_JUDGE_API_KEY)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fadeway",
        description="A memory for LLM agents that forgets; the command line.",
        epilog="Exit codes: 0 done, 1 failed, 2 bad input (nothing written for it), 130 "
        "interrupted (run again to resume).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    replay = sub.add_parser(
        "replay",
        help="replay recorded conversations through decorate/report",
        description="Replay conversations through decorate/report, each message at its own "
        "time. FILE is JSONL replay lines ({memory_id, at, message}), JSONL "
        "fadeway exports (imported), or LoCoMo JSON; the kind is told by content. "
        "Every file is checked before anything is written. Running it again adds "
        "nothing; an interrupted run resumes where it stopped.",
    )
    replay.add_argument("files", nargs="+", metavar="FILE")
    _add_replay_options(replay)
    replay.set_defaults(run=_replay)

    inspect = sub.add_parser(
        "inspect",
        help="show one memory: episodes, facts block, graph",
        description="Episodes with state, turns, time span, size, "
        "activation and significance; the facts block as "
        "the model sees it; the graph's counts.",
    )
    inspect.add_argument("memory", metavar="MEMORY")
    _add_db(inspect)
    inspect.add_argument(
        "--at",
        type=_seconds,
        metavar="TIME",
        help="compute activation at this moment (ISO 8601 with zone, or Unix "
        "seconds; default now); states and the facts block are the "
        "current, stored ones",
    )
    inspect.add_argument("--json", action="store_true", help="print JSON for scripts")
    inspect.set_defaults(run=_inspect)

    recall = sub.add_parser(
        "recall",
        help="the recall block the next decorate would add",
        description="Print the recall block the next decorate would add "
        "before MESSAGE as the memory's next user message, "
        "with the time each stage took. Nothing is stored.",
    )
    recall.add_argument("memory", metavar="MEMORY")
    recall.add_argument("message", metavar="MESSAGE")
    _add_db(recall)
    recall.add_argument("--json", action="store_true", help="print JSON for scripts")
    recall.set_defaults(run=_recall)

    export = sub.add_parser(
        "export",
        help="write memories as JSONL, one per line",
        description="Write memories as JSONL exports, one memory at a time.",
    )
    export.add_argument("memory", nargs="?", metavar="MEMORY")
    export.add_argument("--all", action="store_true", help="every memory of the store")
    _add_db(export)
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    export.set_defaults(run=_export)

    imp = sub.add_parser(
        "import",
        help="restore memories from a JSONL export",
        description="Restore memories from a JSONL export, line by line. The "
        "whole file is checked first; a memory already stored "
        "exactly so is skipped.",
    )
    imp.add_argument("file", metavar="FILE")
    _add_db(imp)
    imp.set_defaults(run=_import)

    demo = sub.add_parser(
        "demo",
        help="replay the bundled sample conversation and inspect it",
        description="Replay the bundled launch-week sample into --db (no key, "
        "no network) and print its inspect view.",
    )
    _add_replay_options(demo, demo=True)
    demo.set_defaults(run=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except KeyboardInterrupt:
        _print("fadeway: interrupted; run the same command again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0
    except (FadewayError, OSError) as exc:
        _print(f"fadeway {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT if _is_input_error(exc) else EXIT_FAILED


def _is_input_error(exc: BaseException) -> bool:
    """Errors found before anything was written: bad files, bad options, unknown memories."""
    return isinstance(
        exc,
        (
            ReplayFormatError,
            InvalidExportError,
            ImportConflictError,
            UsageError,
            MemoryNotFoundError,
            InvalidMemoryIdError,
            FileNotFoundError,
        ),
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
