"""`fadeway eval`: replay a benchmark's conversations, ask their questions three ways on one
answerer, grade the answers, and write the table (docs/design/eval.md).

Everything lives in `--out`: `run.json` (the run's settings), `stores/` (one SQLite store per
memory, named by a digest of its id, so a question's throwaway copy is one memory's store),
`answers.jsonl` (the journal), and `report.md` / `report.json`. A killed run, started again with
the same command, resumes the replays after their last stored step and asks only the questions
and ways the journal lacks.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import logging
import multiprocessing
import os
import platform
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec

from .._version import __version__
from ..errors import EndpointError, UsageError
from ..evaluate.asking import ANSWER_MAX_TOKENS, Asker, Models
from ..evaluate.datasets import LOCOMO_CATEGORIES, Conversation, Question, read_benchmark
from ..evaluate.journal import Journal, check_settings
from ..evaluate.report import figures, markdown
from ..http import Endpoint
from ..notes.writers import LLMNoteWriter, note_writer_from
from ..replay.runner import DEFAULT_MODEL, replay_memory
from ..usage import UsageSummary, sum_usage, summarise_usage
from .batch import ReplaySettings, die_with_parent, open_for_replay

__all__ = ["EvalRun", "eval_run_from", "progress_bars", "run_eval", "store_path"]

log = logging.getLogger("fadeway.eval")

#: Attempts at each answerer or grader call: a benchmark run is long, and a question that still
#: fails is only asked again by the next run.
_ATTEMPTS = 8


def store_path(out: Path, memory_id: str) -> Path:
    """The store of one memory: a file named by a digest of its id (ids are untrusted text)."""
    return out / "stores" / f"{hashlib.sha256(memory_id.encode()).hexdigest()[:24]}.db"


@dataclass(frozen=True, slots=True)
class EvalRun:
    """What a run is asked to do (the command line's options)."""

    benchmark: str
    data: Path
    out: Path
    answerer: Endpoint | None  # None: count the evidence instead (--no-answer)
    grader: Endpoint | None
    replay: ReplaySettings  # its db is set per memory
    window: int
    seed: int = 0
    concurrency: int = 4
    workers: int = 1
    only: tuple[str, ...] = ()
    questions: int | None = None  # at most this many of each conversation's questions


# -- replay -----------------------------------------------------------------------------------


def _init_worker(parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    die_with_parent(parent)


def _replay_one(settings: ReplaySettings, conversation: Conversation) -> list[UsageSummary]:
    """Replay one memory into its store (resuming after its last stored step); returns the
    memory's model calls so far."""
    memory_id = conversation.memory_id
    writer = note_writer_from(settings.note_writer, model=settings.judge_model)
    try:
        with open_for_replay(settings) as engine:
            replay_memory(
                engine, memory_id, conversation.lines, model=settings.model, note_writer=writer
            )
            with engine.services.store.read(memory_id) as tx:
                return summarise_usage(tx.usage())
    finally:
        if isinstance(writer, LLMNoteWriter):
            writer.close()  # its endpoint's connections and thread, one memory's worth


def _replay_all(
    run: EvalRun, conversations: Sequence[Conversation], advance: Callable[[int], None]
) -> list[UsageSummary]:
    jobs = [
        (replace(run.replay, db=str(store_path(run.out, c.memory_id))), c)
        for c in sorted(conversations, key=lambda c: -len(c.lines))  # longest first
    ]
    (run.out / "stores").mkdir(parents=True, exist_ok=True)
    used: list[UsageSummary] = []
    if run.workers == 1 or len(jobs) == 1:
        for settings, conversation in jobs:
            used += _replay_one(settings, conversation)
            advance(len(conversation.lines))
        return sum_usage(used)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        min(run.workers, len(jobs)), context, _init_worker, (os.getpid(),)
    ) as pool:
        futures = {pool.submit(_replay_one, s, c): c for s, c in jobs}
        try:
            for future in concurrent.futures.as_completed(futures):
                used += future.result()
                advance(len(futures[future].lines))
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return sum_usage(used)


# -- questions --------------------------------------------------------------------------------


def _ask_all(
    asker: Asker,
    pairs: Sequence[tuple[Conversation, Question]],
    concurrency: int,
    advance: Callable[[int], None],
) -> list[str]:
    """Ask every pair on `concurrency` threads; returns why each failed question failed (an
    endpoint that refused or failed on every attempt: the question is asked again next run)."""
    failed = []
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        futures = {pool.submit(asker.ask, c, q): q for c, q in pairs}
        try:
            for future in concurrent.futures.as_completed(futures):
                question = futures[future]
                try:
                    future.result()
                except EndpointError as exc:
                    log.warning("question %s: %s", question.key, exc)
                    failed.append(f"{question.key}: {exc}")
                advance(1)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return failed


def _categories(benchmark: str, questions: Sequence[Question]) -> list[str]:
    if benchmark == "locomo":
        return list(LOCOMO_CATEGORIES.values())
    return sorted({q.category for q in questions})


def _versions() -> dict[str, str]:
    import httpx
    import numpy

    return {
        "fadeway": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "numpy": numpy.__version__,
        "msgspec": msgspec.__version__,
        "httpx": httpx.__version__,
    }


def _identity(run: EvalRun) -> dict[str, Any]:
    """The settings a resumed run must share with the run it resumes."""
    answerer, grader = run.answerer, run.grader
    return {
        "benchmark": run.benchmark,
        "data sha256": hashlib.sha256(run.data.read_bytes()).hexdigest(),
        "mode": "answers" if answerer is not None else "evidence",
        "ceiling": run.replay.ceiling,
        "window": run.window,
        "judge": run.replay.judge,
        "judge model": run.replay.judge_model,
        "note writer": run.replay.note_writer,
        "embedder": run.replay.embedder,
        "answerer": answerer.base_url if answerer else None,
        "answerer model": answerer.model if answerer else None,
        "grader": grader.base_url if grader else None,
        "grader model": grader.model if grader else None,
        "temperature": 0 if answerer else None,
        "seed": run.seed if answerer else None,
        "answer max tokens": ANSWER_MAX_TOKENS if answerer else None,
        "replay model": run.replay.model,
    }


def run_eval(run: EvalRun, bar: Callable[..., Any]) -> tuple[dict[str, Any], list[str]]:
    """Run (or resume) `run`; returns the report's JSON document and the failed questions.
    `bar(total=, unit=, desc=)` makes a progress bar (a tqdm or a stand-in)."""
    conversations = read_benchmark(run.benchmark, run.data)
    if run.only:
        known = {c.memory_id for c in conversations}
        missing = [m for m in run.only if m not in known]
        if missing:
            raise UsageError(f"--only {', '.join(missing)}: not in {run.data}")
        conversations = [c for c in conversations if c.memory_id in run.only]
    versions = _versions()
    settings = _identity(run)
    check_settings(run.out / "run.json", settings)
    journal = Journal(run.out / "answers.jsonl")
    with bar(total=sum(len(c.lines) for c in conversations), unit="msg", desc="replay") as b:
        replay_spend = _replay_all(run, conversations, b.update)
    models = Models(run.answerer, run.grader, run.seed)
    stores = {c.memory_id: store_path(run.out, c.memory_id) for c in conversations}
    engine_settings = {
        "ceiling": run.replay.ceiling,
        "judge": run.replay.judge,
        "judge_model": run.replay.judge_model,
        "embedder": run.replay.embedder,
        "note_writer": run.replay.note_writer,
        **dict(run.replay.limits),
    }
    asker = Asker(
        run.benchmark,
        stores,
        engine_settings,
        journal,
        models,
        window=run.window,
        model=run.replay.model,
    )
    pairs = [(c, q) for c in conversations for q in c.questions[: run.questions] if asker.wanted(q)]
    pending = [(c, q) for c, q in pairs if asker.todo(q)]
    with bar(total=len(pairs), initial=len(pairs) - len(pending), unit="q", desc="questions") as b:
        failed = _ask_all(asker, pending, run.concurrency, b.update)
    keys = {q.key for _, q in pairs}
    entries = [e for (key, _), e in journal.entries.items() if key in keys]
    doc = figures(
        entries,
        _categories(run.benchmark, [q for _, q in pairs]),
        counting=run.answerer is None,
        replay_spend=replay_spend,
        settings=settings,
        versions=versions,
    )
    doc["questions"] = {"asked": len(pairs), "failed": len(failed)}
    (run.out / "report.json").write_bytes(msgspec.json.format(msgspec.json.encode(doc)) + b"\n")
    (run.out / "report.md").write_text(markdown(doc))
    return doc, failed


# -- the command ------------------------------------------------------------------------------


def _endpoint(url: str | None, model: str | None, prefix: str, concurrency: int) -> Endpoint | None:
    url = url or os.environ.get(f"{prefix}_BASE_URL", "").strip() or None
    if url is None:
        return None
    return Endpoint(
        url,
        model=model or os.environ.get(f"{prefix}_MODEL", "").strip() or None,
        api_key=os.environ.get(f"{prefix}_API_KEY", "").strip() or None,
        max_concurrency=concurrency,
        max_attempts=_ATTEMPTS,
    )


def eval_run_from(args: argparse.Namespace, judge: str, note_writer: str) -> EvalRun:
    """The run the command line names (endpoints from flags, else FADEWAY_ANSWERER_* and
    FADEWAY_GRADER_*; the grader defaults to the answerer's endpoint)."""
    data = Path(args.data)
    if not data.is_file():
        raise UsageError(f"--data {args.data}: no such file")
    answerer = grader = None
    if not args.no_answer:
        answerer = _endpoint(
            args.answerer, args.answerer_model, "FADEWAY_ANSWERER", args.concurrency
        )
        if answerer is None:
            raise UsageError(
                "give --answerer URL (or FADEWAY_ANSWERER_BASE_URL), or --no-answer to count "
                "the evidence each context carries without a model"
            )
        grader = _endpoint(args.grader, args.grader_model, "FADEWAY_GRADER", args.concurrency) or (
            _endpoint(
                answerer.base_url,
                args.grader_model or answerer.model,
                "FADEWAY_ANSWERER",
                args.concurrency,
            )
        )
    out = Path(args.out or f"eval-{args.benchmark}")
    replay_settings = ReplaySettings(
        db="",
        ceiling=args.ceiling,
        note_writer=note_writer,
        model=DEFAULT_MODEL,
        judge=judge,
        judge_model=args.judge_model,
        embedder=args.embedder,
    )
    return EvalRun(
        benchmark=args.benchmark,
        data=data,
        out=out,
        answerer=answerer,
        grader=grader,
        replay=replay_settings,
        window=args.window,
        seed=args.seed,
        concurrency=args.concurrency,
        workers=args.workers,
        only=tuple(args.only or ()),
        questions=args.questions,
    )


def progress_bars() -> Callable[..., Any]:
    """tqdm bars on stderr, drawn on a terminal only."""
    from tqdm import tqdm

    def bar(**kwargs: Any) -> Any:
        return tqdm(disable=None, file=sys.stderr, dynamic_ncols=True, **kwargs)

    return bar
