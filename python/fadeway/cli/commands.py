"""The commands of the `fadeway` command line, one function each (parsing is `main`'s)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import IO, Any, TypeVar

import msgspec

from ..engine import Engine
from ..errors import MemoryNotFoundError, ReplayFormatError, UsageError
from ..export.document import write_jsonl
from ..export.files import check_export_file
from ..replay.sources import check_file, detect, read_inputs
from ..store.postgres import shown_url
from .batch import MemorySummary, ReplaySettings, run_batch
from .inspection import inspect_memory, render
from .page import build_page, gather_page
from .spending import combine, memory_usage, parked_jobs, read_prices, render_usage, usage_view
from .stores import open_store
from .words import counted, when

__all__ = [
    "demo",
    "export",
    "import_",
    "inspect",
    "lane_retry",
    "memories",
    "recall",
    "replay",
    "say",
    "serve",
    "usage",
]


#: The bundled sample `fadeway demo` replays, and the ceiling it replays it under (small, so
#: that episodes leave, notes are taken and the facts block fills within the sample).
DEMO_SAMPLE = "launch-week.jsonl"

T = TypeVar("T")


#: Summaries list each memory up to this many; beyond, only the totals.
_SUMMARY_ROWS = 20


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


def say(*values: object, file: IO[str] | None = None) -> None:
    """`print`, with what could command a terminal escaped."""
    print(*(str(v).translate(_UNSAFE) for v in values), file=file)


def _open_existing(db: str, **settings: Any) -> Engine:
    """The store at `db` for a command that only reads or works on what is there: one that is
    not there is an error, not a new empty file."""
    path = db[len("sqlite:///") :] if db.startswith("sqlite:///") else db
    if (
        path not in ("", ":memory:")
        and "://" not in path
        and not path.startswith("file:")
        and not Path(path).exists()
    ):
        raise FileNotFoundError(f"no store at {path}")
    return open_store(db, **{"background": False, **settings})


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
        lines.append(f"… and {counted(len(rows) - _SUMMARY_ROWS, 'more memory', 'more memories')}")
    totals = [
        sum(getattr(s, f) for s in rows)
        for f in ("messages", "new", "episodes", "facts", "sealed", "forgotten")
    ]
    lines += [
        "-" * len(head),
        line(f"total ({counted(len(rows), 'memory', 'memories')})", totals),
        f"elapsed {elapsed:.1f} s, {new / elapsed if elapsed > 0 else 0:.0f} new messages/s",
    ]
    return "\n".join(lines)


def _run_replay(args: argparse.Namespace, paths: list[str]) -> dict[str, Any]:
    """Replay `paths`; returns the summary as `--json` prints it, and prints it as text
    without `--json` (the caller prints the JSON, whole, as the one thing on stdout)."""
    judge = _model_spec(args.judge, "--judge")
    writer = _model_spec(args.note_writer, "--note-writer")
    urls = [v for v in (judge, writer) if v is not None and v != "offline"]
    if args.judge_model is not None and not urls:
        raise UsageError(
            "--judge-model names the model behind --judge URL or --note-writer "
            "URL; give one of them"
        )
    assert judge is not None
    prices = read_prices(args.prices) if args.prices is not None else None  # before any work
    settings = ReplaySettings(
        args.db,
        args.ceiling,
        writer,
        judge=judge,
        judge_model=args.judge_model,
        limits=tuple(_limits(args).items()),
    )
    start = time.monotonic()
    batch = read_inputs(paths)
    from tqdm import tqdm  # only replay draws a bar
    from tqdm.contrib.logging import logging_redirect_tqdm

    # Log lines (the workers' too, which `run_batch` hands to this process's loggers) are
    # written by tqdm above the bar, which it then draws again, instead of cutting through it.
    with (
        tqdm(
            total=batch.messages,
            unit="msg",
            desc="replay",
            disable=None,  # drawn on a terminal only
            file=sys.stderr,
            dynamic_ncols=True,
        ) as bar,
        logging_redirect_tqdm(),
    ):
        rows = run_batch(batch, settings, workers=args.workers, advance=bar.update)
    elapsed = time.monotonic() - start
    new = sum(r.new for r in rows)
    used = combine(u for r in rows for u in r.usage)
    view = usage_view(used, prices)
    if not args.json:
        say(_summary_table(rows, elapsed, new))
        say("model calls for these memories (this run and earlier ones):")
        say(render_usage(view, indent="  "))
    doc = msgspec.to_builtins({"memories": rows, "usage": used, "elapsed": elapsed})
    if prices is not None:
        doc |= {"cost": view["total"]["cost"], "unpriced": view["unpriced"]}
    return doc


def replay(args: argparse.Namespace) -> int:
    doc = _run_replay(args, args.files)
    if args.json:
        say(json.dumps(doc, indent=2))
    return 0


def inspect(args: argparse.Namespace) -> int:
    at = args.at if args.at is not None else time.time()
    if args.html is not None:
        target = _output_path(args.html, "--html")  # before the store opens
        with _open_existing(args.db) as engine:
            page = build_page(gather_page(engine.store, args.memory, at, plot_end=args.at))
        _write_beside(target, args.html, "--html", lambda fp: fp.write(page.encode()))
        say(f"wrote {target} (memory {args.memory!r})", file=sys.stderr)
        return 0
    with _open_existing(args.db) as engine:
        view = inspect_memory(engine.store, args.memory, at)
    if args.json:
        say(json.dumps(view, indent=2, ensure_ascii=False))
    else:
        say(render(view))
    return 0


def memories(args: argparse.Namespace) -> int:
    with _open_existing(args.db) as engine:
        listed = engine.memories()
    if args.json:
        say(json.dumps({"memories": msgspec.to_builtins(listed)}, indent=2, ensure_ascii=False))
        return 0
    if not listed:
        say(f"the store {shown_url(args.db)} holds no memories")
        return 0
    # The id last and whole: it is what a reader copies into the next command.
    say(f"{'messages':>9} {'turns':>7} {'episodes':>9}  {'last message (UTC)':<18}  memory")
    for m in listed:
        say(f"{m.messages:>9} {m.turns:>7} {m.episodes:>9}  {when(m.last_at):<18}  {m.memory_id}")
    say(counted(len(listed), "memory", "memories"))
    return 0


def usage(args: argparse.Namespace) -> int:
    prices = read_prices(args.prices) if args.prices is not None else None  # before the store
    with _open_existing(args.db) as engine:
        view = usage_view(memory_usage(engine.store, args.memory), prices)
        parked = parked_jobs(engine.store, args.memory)
    if args.json:
        doc = {"memory_id": args.memory, **view, "parked_jobs": parked}
        say(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        say(f"model calls for memory {args.memory!r} (all recorded so far):")
        say(render_usage(view))
        if parked:
            say(
                f"{counted(parked, 'lane job')} failed and {'is' if parked == 1 else 'are'} "
                "parked; their calls are counted above (`fadeway inspect` shows them, "
                "`fadeway lane retry` queues them again)"
            )
    return 0


def lane_retry(args: argparse.Namespace) -> int:
    with _open_existing(args.db) as engine:
        mem = engine.memory(args.memory)
        with engine.store.read(mem.memory_id) as tx:
            if tx.memory() is None:
                raise MemoryNotFoundError(f"the store holds no memory {args.memory!r}")
        revived = mem.retry_jobs()
    if args.json:
        say(json.dumps({"memory_id": args.memory, "queued": revived}))
    elif revived:
        say(
            f"{counted(revived, 'parked job')} of memory {args.memory!r} queued again; a process "
            "with the memory's engine open runs them (its background worker looks every few "
            "seconds)"
        )
    else:
        say(f"memory {args.memory!r} has no parked jobs")
    return 0


def recall(args: argparse.Namespace) -> int:
    from ..recall.turns import preview

    if not args.message.strip():
        raise UsageError(
            "MESSAGE is empty: give the user message to recall for, as the next decorate "
            "would see it"
        )
    with _open_existing(args.db) as engine:
        result = preview(engine.services, args.memory, args.message, args.at)
    timings = {stage: round(seconds * 1e3, 3) for stage, seconds in result.timings.items()}
    if args.json:
        say(
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
    say(result.block if result.block is not None else "(no recall block: nothing was found)")
    say()
    say(
        f"walk: {result.walk}; "
        + ", ".join(f"{stage} {ms:.2f} ms" for stage, ms in timings.items())
        + f"; total {sum(timings.values()):.2f} ms"
    )
    return 0


def _output_path(output: str, option: str = "-o") -> Path:
    """The file `option` names, checked before the store opens: its directory must be there
    (the error names the path given, not the temporary file written beside it)."""
    target = Path(output)
    if target.is_dir():
        raise UsageError(f"{option} {output}: that is a directory; name a file to write")
    if not target.parent.is_dir():
        raise UsageError(f"{option} {output}: the directory {target.parent} does not exist")
    return target


def _write_beside(target: Path, given: str, option: str, write: Callable[[IO[bytes]], T]) -> T:
    """Run `write` on a file beside `target`, then rename it into place: never a half-written
    file. `given` is the path as the user gave it with `option`, for errors."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as exc:
        raise UsageError(
            f"{option} {given}: cannot write in {target.parent}: {exc.strerror or exc}"
        ) from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; this is a plain file
        with os.fdopen(fd, "wb") as fp:
            result = write(fp)
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise
    return result


def export(args: argparse.Namespace) -> int:
    if args.all == (args.memory is not None):
        raise UsageError("name one MEMORY or give --all")
    target = None if args.output in (None, "-") else _output_path(args.output)
    with _open_existing(args.db) as engine:
        ids = engine.memory_ids() if args.all else [args.memory]
        if not args.all and args.memory not in ids:
            raise UsageError(f"the store holds no memory {args.memory!r}")
        docs = (engine.memory(memory_id).export() for memory_id in ids)  # one at a time
        if target is None:
            write_jsonl(docs, sys.stdout.buffer)
            sys.stdout.flush()
            return 0
        n = _write_beside(target, args.output, "-o", lambda fp: write_jsonl(docs, fp))
    say(f"exported {counted(n, 'memory', 'memories')} to {target}", file=sys.stderr)
    return 0


def _refuse_replay_inputs(path: Path, db: str) -> None:
    """A file `fadeway replay` reads is named as one, with the command that reads it (checked
    as an export, its first line would only be "not a fadeway memory export")."""
    try:
        kind = detect(path)
    except ReplayFormatError:
        return  # not a replay input either: the export check says what is wrong with it
    what = {
        "replay": "a replay file (JSONL lines of memory_id, at and message)",
        "locomo": "LoCoMo JSON (a list of samples)",
    }.get(kind)
    if what is not None:
        command = f"fadeway replay {shlex.quote(str(path))} --db {shlex.quote(shown_url(db))}"
        raise UsageError(
            f"{path} looks like {what}, not a fadeway export (as `fadeway export` writes); "
            f"replay it with `{command}`"
        )


def _limits(args: argparse.Namespace) -> dict[str, int]:
    """The engine's size limits the command line set (`--max-message-bytes`, ...)."""
    names = ("max_message_bytes", "max_request_messages", "max_note_facts", "max_note_bytes")
    return {n: v for n in names if (v := getattr(args, n, None)) is not None}


def import_(args: argparse.Namespace) -> int:
    path = Path(args.file)
    check_file(path)
    _refuse_replay_inputs(path, args.db)
    check_export_file(path)
    with open_store(args.db, background=False, **_limits(args)) as engine:
        imported, skipped = engine.import_file(args.file)
        engine.drain()  # embeds the imported facts and passages for search
    say(
        f"imported {counted(len(imported), 'memory', 'memories')} into {shown_url(args.db)}"
        + (f"; {len(skipped)} already there, unchanged" if skipped else "")
    )
    return 0


def demo(args: argparse.Namespace) -> int:
    sample = resources.files("fadeway") / "samples" / DEMO_SAMPLE
    with resources.as_file(sample) as path:
        doc = _run_replay(args, [str(path)])
    with open_store(args.db, background=False) as engine:
        memory_id = "launch-week"
        with engine.store.read(memory_id) as tx:
            count = tx.message_count()
            last = tx.messages(count - 1, count)[0].at
        view = inspect_memory(engine.store, memory_id, last)
    if args.json:  # one document: the replay's summary and the inspect view
        say(json.dumps({**doc, "inspect": view}, indent=2, ensure_ascii=False))
        return 0
    say()
    say(render(view))
    say(
        f"\n(activation as of the last message; `fadeway inspect {memory_id} --db "
        f"{shown_url(args.db)}` shows it now, `--at TIME` at any moment)"
    )
    return 0


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


def _models(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(judge, note writer) from --judge, --note-writer and --judge-model (`_add_models`)."""
    judge = _model_spec(args.judge, "--judge")
    note_writer = _model_spec(args.note_writer, "--note-writer")
    if args.judge_model is not None and {judge, note_writer} <= {None, "offline"}:
        raise UsageError(
            "--judge-model names the model behind --judge URL or --note-writer URL; give one"
        )
    return judge, note_writer


def serve(args: argparse.Namespace) -> int:
    """Run the proxy until interrupted: one engine for the process, its lane in background
    threads."""
    try:
        import uvicorn

        from ..serve.app import create_app
    except ImportError as exc:
        raise UsageError(
            f"fadeway serve needs the serve extra ({exc.name} is missing): "
            "pip install 'fadeway[serve]'"
        ) from None
    from ..serve.ids import MemoryIdSource

    memory_from = MemoryIdSource.parse(args.memory_from)
    if not args.upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream {args.upstream!r}: give an http:// or https:// API root")
    judge, note_writer = _models(args)
    with open_store(
        args.db,
        ceiling=args.ceiling,
        judge=judge,
        judge_model=args.judge_model,
        note_writer=note_writer,
    ) as engine:
        app = create_app(engine, args.upstream, memory_from=memory_from)
        # The socket is bound here, so the line below names the port even when the system
        # chose it (--port 0), before uvicorn serves on it.
        family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((args.host, args.port))
            port = sock.getsockname()[1]
            host = f"[{args.host}]" if family == socket.AF_INET6 else args.host
            say(
                f"fadeway serve: http://{host}:{port}/v1 -> {args.upstream} "
                f"(memory from {memory_from}, store {shown_url(args.db)})",
                file=sys.stderr,
            )
            server = uvicorn.Server(uvicorn.Config(app, log_level="info"))
            # uvicorn stops on Ctrl-C (after the requests in flight), then raises it again for
            # the caller: for a server that is the way to stop, not an interrupted run.
            with contextlib.suppress(KeyboardInterrupt):
                server.run(sockets=[sock])
    return 0


def worker(args: argparse.Namespace) -> int:
    """Run every memory's lane from this process until interrupted (Ctrl-C or SIGTERM stop it
    once the jobs in flight are applied; exit 0)."""
    judge, note_writer = _models(args)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with _open_existing(
            args.db,
            judge=judge,
            judge_model=args.judge_model,
            note_writer=note_writer,
            background=True,
            lane_threads=args.concurrency,
        ):
            say(
                f"fadeway worker: running the lanes of {shown_url(args.db)} on "
                f"{counted(args.concurrency, 'thread')}; Ctrl-C stops it",
                file=sys.stderr,
            )
            with contextlib.suppress(KeyboardInterrupt):
                while not stop.wait(1.0):
                    pass
            say("fadeway worker: stopping after the jobs in flight", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def eval_(args: argparse.Namespace) -> int:
    """Replay a benchmark, ask its questions three ways, and print the table (exit 1 when a
    question failed at an endpoint: running the same command again asks it again)."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    from .evaluation import eval_run_from, progress_bars, run_eval

    judge, note_writer = _models(args)
    if note_writer is None:
        raise UsageError(
            "--note-writer none would leave the notes to the answerer; give offline or a URL"
        )
    assert judge is not None
    run = eval_run_from(args, judge, note_writer)
    try:
        with logging_redirect_tqdm():
            doc, failed = run_eval(run, progress_bars())
    finally:
        for endpoint in {id(e): e for e in (run.answerer, run.grader) if e}.values():
            endpoint.close()
    if args.json:
        say(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        say((run.out / "report.md").read_text())
        say(f"wrote {run.out / 'report.md'} and {run.out / 'report.json'}", file=sys.stderr)
    if failed:
        say(
            f"fadeway eval: {counted(len(failed), 'question')} failed at an endpoint (the first: "
            f"{failed[0]}); run the same command again to ask them again",
            file=sys.stderr,
        )
        return 1
    return 0
