"""The `fadeway` command line: replay, memories, inspect, usage, lane retry, recall, export,
import, demo, serve.

Every subcommand takes `--db URL` (default `fadeway.db` in the working directory, or
`$FADEWAY_DB`). Exit codes: 0 done, 1 failed while running, 2 bad input (nothing was written
for it), 130 interrupted (run the same command again to resume).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from datetime import datetime
from typing import Any

from .. import _constants as C
from .._blas import one_thread_for_process
from .._version import __version__
from ..errors import (
    FadewayError,
    ImportConflictError,
    InvalidExportError,
    InvalidMemoryIdError,
    MemoryNotFoundError,
    ReplayFormatError,
    UsageError,
)
from ..store.postgres import shown_url
from . import commands

__all__ = ["main"]

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


def _default_db() -> str:
    return os.environ.get("FADEWAY_DB", "fadeway.db")


def _seconds(text: str) -> float:
    """ISO 8601 with a zone, or Unix seconds."""
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise argparse.ArgumentTypeError(f"{text!r} is not a moment: give a finite number")
        return seconds
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
    """A positive integer. argparse names the option; the text says what it wanted (a
    ValueError would read "invalid _positive value", naming this function)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return value


# -- replay -----------------------------------------------------------------------------------


# -- inspect, export, import, demo ------------------------------------------------------------


# -- the parser -------------------------------------------------------------------------------


def _add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=_default_db(),
        metavar="URL",
        help="the store: a path, sqlite:///path or postgresql://user@host/db (default: "
        f"$FADEWAY_DB or fadeway.db; now {shown_url(_default_db())})".replace("%", "%%"),
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
    _add_prices(parser)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    _add_limits(parser)


def _add_prices(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prices",
        default=os.environ.get("FADEWAY_PRICES") or None,
        metavar="FILE",
        help='a TOML file of dollars per million tokens by model: ["gpt-4.1-mini"] with '
        "input = 0.40 and output = 1.60 (output may be left out), and cached_input = 0.10 "
        "for input the provider served from its prompt cache; adds the model calls' cost "
        "(default: FADEWAY_PRICES)",
    )


def _add_limits(parser: argparse.ArgumentParser) -> None:
    """The engine's size limits a recorded conversation or an export may need raised."""
    parser.add_argument(
        "--max-message-bytes",
        type=_positive,
        default=None,
        metavar="B",
        help="the largest message or item taken, in bytes of its JSON (default: 1 MiB)",
    )
    parser.add_argument(
        "--max-request-messages",
        type=_positive,
        default=None,
        metavar="N",
        help="the most messages a request or reply may hold (default: 50,000)",
    )
    parser.add_argument(
        "--max-note-facts",
        type=_positive,
        default=None,
        metavar="N",
        help="the most entries a note may hold (default: 200)",
    )
    parser.add_argument(
        "--max-note-bytes",
        type=_positive,
        default=None,
        metavar="B",
        help="the largest note's arguments, in bytes (default: 64 KiB)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fadeway",
        description="A memory for LLM agents that forgets; the command line.",
        epilog="Exit codes: 0 done, 1 failed, 2 bad input (nothing written for it), 130 "
        "interrupted (run again to resume).",
    )
    parser.add_argument("--version", action="version", version=f"fadeway {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _add_replay,
        _add_memories,
        _add_inspect,
        _add_usage,
        _add_lane,
        _add_recall,
        _add_export,
        _add_import,
        _add_demo,
        _add_serve,
        _add_worker,
        _add_eval,
    ):
        add(sub)
    return parser


Commands = Any  # argparse's private _SubParsersAction


def _add_replay(sub: Commands) -> None:
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
    replay.set_defaults(run=commands.replay)


def _add_memories(sub: Commands) -> None:
    memories = sub.add_parser(
        "memories",
        help="list the store's memories",
        description="Every memory of the store, by id: its messages, turns and episodes, and "
        "when its last message was stored.",
    )
    _add_db(memories)
    memories.add_argument("--json", action="store_true", help="print JSON for scripts")
    memories.set_defaults(run=commands.memories)


def _add_inspect(sub: Commands) -> None:
    inspect = sub.add_parser(
        "inspect",
        help="show one memory: episodes, facts block, graph",
        description="Episodes with state, turns, time span, size, "
        "activation and significance; the facts block as "
        "the model sees it; the graph's counts. With --html FILE, all that and more "
        "(activation over time, graph neighbourhoods, each turn's recall block, model "
        "calls) as one offline HTML page.",
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
    output = inspect.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print JSON for scripts")
    output.add_argument(
        "--html",
        metavar="FILE",
        help="write a self-contained HTML page instead (activation over time, states, facts "
        "block, graph neighbourhoods, each turn's recall block, model calls; opens offline)",
    )
    inspect.set_defaults(run=commands.inspect)


def _add_usage(sub: Commands) -> None:
    usage = sub.add_parser(
        "usage",
        help="what one memory's own model calls cost",
        description="The memory's judge, note-writer and embedding calls by kind and model: "
        "calls, tokens in (and of those, cached by the provider), tokens out, seconds, and a "
        "total; with --prices, the cost.",
    )
    usage.add_argument("memory", metavar="MEMORY")
    _add_db(usage)
    _add_prices(usage)
    usage.add_argument("--json", action="store_true", help="print JSON for scripts")
    usage.set_defaults(run=commands.usage)


def _add_lane(sub: Commands) -> None:
    lane = sub.add_parser(
        "lane",
        help="the memory's background lane: retry its parked jobs",
        description="Work on a memory's ordered lane of background jobs.",
    )
    actions = lane.add_subparsers(dest="action", required=True, metavar="ACTION")
    retry = actions.add_parser(
        "retry",
        help="queue the memory's parked jobs again now",
        description="Queue again, now, every lane job of MEMORY that ran out of attempts and "
        "was parked (`fadeway inspect` lists them), each in its place. A process with the "
        "store open and its background worker running then runs them, with its judge.",
    )
    retry.add_argument("memory", metavar="MEMORY")
    _add_db(retry)
    retry.add_argument("--json", action="store_true", help="print JSON for scripts")
    retry.set_defaults(run=commands.lane_retry)


def _add_recall(sub: Commands) -> None:
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
    recall.add_argument(
        "--at",
        type=_seconds,
        metavar="TIME",
        help="when the message is said (ISO 8601 with zone, or Unix seconds; default now): "
        "the days it names from there, such as yesterday, are read from this time",
    )
    recall.add_argument("--json", action="store_true", help="print JSON for scripts")
    recall.set_defaults(run=commands.recall)


def _add_export(sub: Commands) -> None:
    export = sub.add_parser(
        "export",
        help="write memories as JSONL, one per line",
        description="Write memories as JSONL exports, one memory at a time.",
    )
    export.add_argument("memory", nargs="?", metavar="MEMORY")
    export.add_argument("--all", action="store_true", help="every memory of the store")
    _add_db(export)
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    export.set_defaults(run=commands.export)


def _add_import(sub: Commands) -> None:
    imp = sub.add_parser(
        "import",
        help="restore memories from a JSONL export",
        description="Restore memories from a JSONL export, line by line. The "
        "whole file is checked first; a memory already stored "
        "exactly so is skipped.",
    )
    imp.add_argument("file", metavar="FILE")
    _add_db(imp)
    _add_limits(imp)
    imp.set_defaults(run=commands.import_)


def _add_demo(sub: Commands) -> None:
    demo = sub.add_parser(
        "demo",
        help="replay the bundled sample conversation and inspect it",
        description="Replay the bundled launch-week sample into --db (no key, "
        "no network) and print its inspect view.",
    )
    _add_replay_options(demo, demo=True)
    demo.set_defaults(run=commands.demo)


def _port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (0 to 65535)")
    return value


def _add_serve(sub: Commands) -> None:
    serve = sub.add_parser(
        "serve",
        help="an OpenAI-compatible proxy that gives every call its memory",
        description="Serve POST /v1/chat/completions and /v1/responses (streaming included): "
        "each request is decorated with its memory, forwarded to --upstream with the "
        "caller's own Authorization header, and its reply reported. Other endpoints pass "
        "through unchanged. Needs the serve extra: pip install 'fadeway[serve]'.",
    )
    serve.add_argument(
        "--upstream",
        required=True,
        metavar="URL",
        help="the provider's API root, e.g. https://api.openai.com/v1",
    )
    _add_db(serve)
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--port", type=_port, default=8080, help="port to listen on (default: %(default)s)"
    )
    serve.add_argument(
        "--memory-from",
        default="header",
        metavar="header|user|metadata:KEY",
        help=f"where a request names its memory: the {C.SERVE_MEMORY_HEADER} header "
        "(default; header:NAME for another), the request's user field, or its metadata's KEY",
    )
    serve.add_argument(
        "--ceiling",
        type=_positive,
        default=C.DEFAULT_CEILING,
        metavar="T",
        help="context window assumed, in tokens (default: %(default)s)",
    )
    _add_models(
        serve,
        "who writes the notes: none (default: the model behind --upstream, asked through the "
        "note ask and tool in its own requests), the offline extractive writer, or a model at "
        "an OpenAI-compatible API root (key from FADEWAY_NOTE_WRITER_API_KEY, else "
        "FADEWAY_JUDGE_API_KEY); with a writer the upstream model is never asked",
    )
    serve.set_defaults(run=commands.serve)


def _add_models(parser: argparse.ArgumentParser, note_writer_help: str) -> None:
    """The memory's own models, for a process that runs an engine: --judge, --judge-model and
    --note-writer (none by default: the decorated model writes its notes)."""
    parser.add_argument(
        "--judge",
        default="offline",
        metavar="offline|URL",
        help="the judgment model: offline (default; no network), or an OpenAI-compatible API "
        "root (key from FADEWAY_JUDGE_API_KEY)",
    )
    parser.add_argument(
        "--judge-model",
        default=None,
        metavar="M",
        help="the model behind --judge URL and --note-writer URL (default: FADEWAY_JUDGE_MODEL)",
    )
    parser.add_argument(
        "--note-writer", default="none", metavar="none|offline|URL", help=note_writer_help
    )


def _add_worker(sub: Commands) -> None:
    worker = sub.add_parser(
        "worker",
        help="run the background lanes of every memory of a store",
        description="Run the memories' lanes (cuts, scores, the graph, notes, embeddings, "
        "the prepared walks) for every memory of --db until interrupted: jobs queued by any "
        "process on any machine, one job of a memory at a time, in order, whichever worker "
        "holds its lane. Apps then open their engines with background=False. Give the same "
        "judge and note writer as the apps.",
    )
    _add_db(worker)
    worker.add_argument(
        "--concurrency",
        type=_positive,
        default=C.LANE_THREADS,
        metavar="N",
        help="lanes run at once, each on a thread (default: %(default)s)",
    )
    _add_models(
        worker,
        "who writes the notes the apps' engines leave to the lane: none (default: the "
        "decorated model), offline, or a model at an OpenAI-compatible API root",
    )
    worker.set_defaults(run=commands.worker)


def _add_eval(sub: Commands) -> None:
    run = sub.add_parser(
        "eval",
        help="question answering on LoCoMo or LongMemEval, three ways on your own model",
        description="Replay each conversation of the benchmark through decorate/report, then "
        "ask each question as the next user message three ways on the same answerer: "
        "fadeway's decorated request, the full context (oldest turns dropped to fit --window) "
        "and BM25 over the turns at fadeway's token budget; grade the answers by the "
        "benchmark's protocol and write report.md and report.json in --out. Killed, the same "
        "command resumes it. With --no-answer, no model is asked: the evidence each context "
        "carries is counted instead. The data is read from --data; nothing is bundled.",
    )
    run.add_argument("benchmark", choices=("locomo", "longmemeval"))
    run.add_argument(
        "--data", required=True, metavar="PATH", help="locomo10.json or a LongMemEval file"
    )
    run.add_argument(
        "--answerer",
        metavar="URL",
        help="the answering model's OpenAI-compatible API root (default: "
        "FADEWAY_ANSWERER_BASE_URL; key from FADEWAY_ANSWERER_API_KEY)",
    )
    run.add_argument(
        "--answerer-model", metavar="M", help="its model (default: FADEWAY_ANSWERER_MODEL)"
    )
    run.add_argument(
        "--grader",
        metavar="URL",
        help="the grading model's API root (default: FADEWAY_GRADER_BASE_URL, else the "
        "answerer's; key from FADEWAY_GRADER_API_KEY)",
    )
    run.add_argument(
        "--grader-model",
        metavar="M",
        help="its model (default: FADEWAY_GRADER_MODEL, else the answerer's)",
    )
    run.add_argument(
        "--no-answer",
        action="store_true",
        help="ask no model: count the evidence turns each context carries (strict count)",
    )
    run.add_argument("--out", metavar="DIR", help="where the run lives (default: eval-BENCHMARK)")
    run.add_argument(
        "--ceiling",
        type=_positive,
        default=C.EVAL_CEILING,
        metavar="T",
        help="fadeway's context window, in tokens (default: %(default)s, below a LoCoMo "
        "conversation's ~26k so that the memory must forget)",
    )
    run.add_argument(
        "--window",
        type=_positive,
        default=C.EVAL_WINDOW,
        metavar="T",
        help="the answerer's window, the full context's limit (default: %(default)s)",
    )
    run.add_argument(
        "--embedder",
        default=None,
        metavar="SPEC",
        help="what facts and passages are embedded with: hashing (default; offline), an "
        "OpenAI-compatible API root, or local:PATH",
    )
    _add_models(
        run,
        "who writes the memory's notes: offline (default) or a model at an OpenAI-compatible "
        "API root",
    )
    run.set_defaults(note_writer="offline")
    run.add_argument(
        "--concurrency",
        type=_positive,
        default=4,
        metavar="N",
        help="questions asked at once (default: %(default)s)",
    )
    run.add_argument(
        "--workers",
        type=_positive,
        default=1,
        metavar="N",
        help="processes replaying conversations (default: %(default)s)",
    )
    run.add_argument(
        "--seed", type=int, default=0, metavar="N", help="the answerer's and grader's seed"
    )
    run.add_argument(
        "--only",
        action="append",
        metavar="ID",
        help="only this conversation (a LoCoMo sample_id, a LongMemEval question_id); repeatable",
    )
    run.add_argument(
        "--questions",
        type=_positive,
        default=None,
        metavar="N",
        help="at most the first N questions of each conversation",
    )
    run.add_argument("--json", action="store_true", help="print the report as JSON")
    run.set_defaults(run=commands.eval_)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    one_thread_for_process()
    try:
        return args.run(args)
    except KeyboardInterrupt:
        commands.say("fadeway: interrupted; run the same command again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0
    except (FadewayError, OSError) as exc:
        commands.say(f"fadeway {args.command}: {exc}", file=sys.stderr)
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
