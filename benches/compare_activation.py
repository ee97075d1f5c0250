"""Activation and the fade: fadeway's Rust kernels against numpy and pure Python, in one run.

    python benches/compare_activation.py [--traces 100000 1000000 10000000]
        [--episodes 100000 1000000] [--out benches/RESULTS-activation.md]

Three measurements (spec "Activation", "Forgetting"; `reference.py` holds the slow twins the
tests use):

- Activation, ns per trace, ~20 traces per episode (1 to 39), ages log-uniform from a minute to a
  year, scores uniform in (0, 1]: `_core.activation` (grouped by episode, CSR) and
  `_core.activation_log_order` (the same traces in log order, i.e. sorted by time, with an episode
  id each), against numpy (`np.add.reduceat` over the weights, and `np.bincount(weights=...)` in
  log order) and pure Python (the literal sum, 10^5 traces only). The memory-bandwidth floor is
  16 bytes a trace (a time and a score read once) at the copy bandwidth of a large numpy copy
  measured in the same run, counted as bytes read plus written, as STREAM does.
- The fade's order, ns per episode: `_core.fade_order` against `np.lexsort` (the same order:
  activation, then the tie key) and `np.argsort` (default and stable; no tie key); and its first
  tenth and hundredth (`limit`, what a fade that stops at the landing asks for) against numpy's
  way to the same prefix (`np.argpartition`, then `np.argsort` of the part) and `np.argpartition`
  alone (unordered).
- A whole fade decision on one memory of 10,000 episodes x 20 traces: activation, order and pick,
  through `_core` and the numpy equivalent; and what a memory's fade runs, from its SQLite store
  (read as after any earlier call: the counts of its episode writes and traces) through its
  mirrors of the episodes and the trace log (`EpisodeTable`, `TraceLog`) to the episodes picked
  (`forgetting.fade_episodes`).

Every implementation's result is checked against fadeway's before anything is timed; each figure
is the best of several calls, spread over rounds that visit every implementation in turn (a
slow spell of a shared machine then falls on all of them). numpy and Python run on one thread.
fadeway uses the machine's threads (2 here) for a grouped call of 2^17 traces or more, for log
order from 2^18 traces (terms on one thread, adds on the other; from 2^21 the terms thread also
hands over the episode ids), and for the pass that keeps a prefix's candidates from 2^20
episodes (2^18 without AVX-512); everything else runs on one.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from fadeway import _core
from fadeway.forgetting import fade as forgetting
from fadeway.mirror.episode_table import EpisodeTable
from fadeway.mirror.trace_log import TraceLog
from fadeway.records import EpisodeRecord, TraceRecord
from fadeway.store import SQLiteStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import reference  # the slow twins live with the tests

SEED = 20261
NOW = 1_767_225_600.0
SECONDS_PER_MINUTE = 60.0
MINUTES_PER_YEAR = 525_600.0
MAX_TRACES_PER_EPISODE = 39  # 1..39: 20 on average
DEFAULT_TRACES = (100_000, 1_000_000, 10_000_000)
DEFAULT_EPISODES = (100_000, 1_000_000)
PYTHON_TRACES = 100_000  # pure Python is timed at this size only
DECISION_EPISODES = 10_000
DECISION_TRACES_PER_EPISODE = 20
MEDIAN_EPISODE_TOKENS = 2_000
BANDWIDTH_BYTES = 320_000_000
BYTES_PER_TRACE = 16
RELATIVE = 1e-12
ROUNDS = 10  # calls of each implementation are spread over this many rounds

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def trace_log(n: int, seed: int = SEED) -> tuple[I64, F64, F64]:
    """(offsets, at, score) for `n` traces in episodes of 1 to 39 traces."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, MAX_TRACES_PER_EPISODE + 1, n // 10 + 2)
    bounds = np.cumsum(sizes)
    sizes = sizes[: int(np.searchsorted(bounds, n)) + 1]
    sizes[-1] -= int(sizes.sum()) - n
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    at = NOW - SECONDS_PER_MINUTE * MINUTES_PER_YEAR ** rng.random(n)
    score = 1.0 - rng.random(n)
    return offsets, at, score


def in_log_order(offsets: I64, at: F64, score: F64) -> tuple[I64, F64, F64]:
    """The same traces as appended: sorted by time, each with its episode id."""
    group = np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))
    order = np.argsort(at, kind="stable")
    return group[order], at[order], score[order]


def weights_numpy(at: F64, score: F64, now: float) -> F64:
    return score / np.sqrt(np.maximum(1.0, (now - at) / SECONDS_PER_MINUTE))


def activation_reduceat(offsets: I64, at: F64, score: F64, now: float) -> F64:
    # Every episode here has a trace; reduceat would misreport an empty one.
    return np.add.reduceat(weights_numpy(at, score, now), offsets[:-1])


def activation_bincount(group: I64, at: F64, score: F64, now: float, n_groups: int) -> F64:
    return np.bincount(group, weights=weights_numpy(at, score, now), minlength=n_groups)


def as_groups(offsets: I64, at: F64, score: F64) -> list[list[tuple[float, float]]]:
    at_list, score_list = at.tolist(), score.tolist()
    return [
        list(zip(at_list[a:b], score_list[a:b], strict=True))
        for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)
    ]


def episode_activations(n: int, seed: int = SEED) -> F64:
    """Activations of `n` episodes of 20 traces each, computed in chunks."""
    rng = np.random.default_rng(seed)
    out = np.empty(n)
    chunk = 50_000
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        at = NOW - SECONDS_PER_MINUTE * MINUTES_PER_YEAR ** rng.random(m * 20)
        out[start : start + m] = (
            weights_numpy(at, 1.0 - rng.random(m * 20), NOW).reshape(m, 20).sum(1)
        )
    return out


def fade_numpy(activation: F64, tie: I64, sizes: I64, view: int, landing: int) -> I64:
    """The fade in numpy: lexsort for the order, cumsum and searchsorted for the pick."""
    if view <= landing:
        return np.empty(0, dtype=np.int64)
    order = np.lexsort((tie, activation))
    taken = np.cumsum(sizes[order])
    picks = int(np.searchsorted(taken, view - landing, side="left")) + 1
    return order[: min(picks, len(order))]


def best_seconds(run: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def best_times(
    runs: dict[str, Callable[[], object]], repeats: dict[str, int] | int, rounds: int = ROUNDS
) -> dict[str, float]:
    """The best time of each run, its calls taken in `rounds` rounds that visit every run in
    turn, so that a slow spell of a shared machine falls on all of them rather than on one."""
    counts = repeats if isinstance(repeats, dict) else dict.fromkeys(runs, repeats)
    best = dict.fromkeys(runs, float("inf"))
    for r in range(rounds):
        for name, run in runs.items():
            share = counts[name] // rounds + (r < counts[name] % rounds)
            if share:
                best[name] = min(best[name], best_seconds(run, share))
    return best


def repeats_for(n: int) -> int:
    return max(30, min(60, 20_000_000 // max(n, 1)))


def copy_bandwidth() -> float:
    """Bytes read plus written per second by one large numpy copy (best of 5)."""
    src = np.ones(BANDWIDTH_BYTES // 8)
    dst = np.empty_like(src)
    seconds = best_seconds(lambda: np.copyto(dst, src), 5)
    return 2 * src.nbytes / seconds


def assert_close(got: F64, want: F64, what: str) -> None:
    assert got.shape == want.shape, what
    assert np.all(np.abs(got - want) <= RELATIVE * np.abs(want)), what


def measure_activation(n: int, bandwidth: float) -> list[tuple[str, ...]]:
    offsets, at, score = trace_log(n)
    groups = len(offsets) - 1
    group, at_log, score_log = in_log_order(offsets, at, score)
    want = _core.activation(offsets, at, score, NOW)
    assert_close(_core.activation_log_order(group, at_log, score_log, NOW, groups), want, "log")
    assert_close(activation_reduceat(offsets, at, score, NOW), want, "reduceat")
    assert_close(activation_bincount(group, at_log, score_log, NOW, groups), want, "bincount")
    runs: dict[str, Callable[[], object]] = {
        "fadeway grouped (Rust)": lambda: _core.activation(offsets, at, score, NOW),
        "fadeway log order (Rust)": lambda: _core.activation_log_order(
            group, at_log, score_log, NOW, groups
        ),
        "numpy np.add.reduceat": lambda: activation_reduceat(offsets, at, score, NOW),
        "numpy np.bincount, log order": lambda: activation_bincount(
            group, at_log, score_log, NOW, groups
        ),
    }
    repeats = {name: repeats_for(n) for name in runs}
    if n <= PYTHON_TRACES:
        py_groups = as_groups(offsets, at, score)
        assert_close(np.array(reference.activation_reference(py_groups, NOW)), want, "python")
        runs["pure Python"] = lambda: reference.activation_reference(py_groups, NOW)
        repeats["pure Python"] = 3
    times = best_times(runs, repeats)
    rust = times["fadeway grouped (Rust)"]
    rows = [
        (f"{n:,}", name, f"{t * 1e3:.2f}", f"{t * 1e9 / n:.2f}", f"{t / rust:.1f}x")
        for name, t in times.items()
    ]
    floor = BYTES_PER_TRACE / bandwidth
    rows.append(
        (
            f"{n:,}",
            f"memory floor ({BYTES_PER_TRACE} B/trace at {bandwidth / 1e9:.1f} GB/s)",
            f"{floor * n * 1e3:.2f}",
            f"{floor * 1e9:.2f}",
            f"{floor * n / rust:.2f}x",
        )
    )
    return rows


def numpy_first(activation: F64, k: int) -> I64:
    """The `k` least active in order, numpy's way: argpartition, then a stable argsort of those
    (the same prefix as fadeway's when no two activations tie at the cut, as here)."""
    first = np.argpartition(activation, k)[:k]
    return first[np.argsort(activation[first], kind="stable")]


def measure_order(n: int) -> list[tuple[str, ...]]:
    activation = episode_activations(n)
    tie = np.arange(n, dtype=np.int64)
    order = _core.fade_order(activation, tie)
    assert np.array_equal(order, np.lexsort((tie, activation)))
    assert np.array_equal(order, np.argsort(activation, kind="stable"))
    rows = []
    whole: dict[str, Callable[[], object]] = {
        "fadeway fade_order (Rust)": lambda: _core.fade_order(activation, tie),
        "numpy lexsort (same order)": lambda: np.lexsort((tie, activation)),
        "numpy argsort": lambda: np.argsort(activation),
        "numpy argsort, stable": lambda: np.argsort(activation, kind="stable"),
    }
    times = best_times(whole, repeats_for(n * 4))
    rust = times["fadeway fade_order (Rust)"]
    rows += [
        (f"{n:,}", "all", name, f"{t * 1e3:.2f}", f"{t * 1e9 / n:.2f}", f"{t / rust:.1f}x")
        for name, t in times.items()
    ]
    for share, k in (("a tenth", n // 10), ("a hundredth", n // 100)):
        assert np.array_equal(_core.fade_order(activation, tie, k), order[:k])
        assert np.array_equal(numpy_first(activation, k), order[:k])
        first: dict[str, Callable[[], object]] = {
            "fadeway fade_order, limit (Rust)": lambda k=k: _core.fade_order(activation, tie, k),
            "numpy argpartition + argsort": lambda k=k: numpy_first(activation, k),
            "numpy argpartition (unordered)": lambda k=k: np.argpartition(activation, k),
        }
        times = best_times(first, repeats_for(n * 4))
        rust = times["fadeway fade_order, limit (Rust)"]
        rows += [
            (f"{n:,}", share, name, f"{t * 1e3:.2f}", f"{t * 1e9 / n:.2f}", f"{t / rust:.1f}x")
            for name, t in times.items()
        ]
    return rows


def decision_memory(seed: int = SEED) -> tuple[I64, F64, F64, I64, I64, int, int]:
    """One memory: 10,000 episodes of 20 traces, token sizes, a view and its landing."""
    rng = np.random.default_rng(seed)
    n = DECISION_EPISODES * DECISION_TRACES_PER_EPISODE
    offsets = np.arange(0, n + 1, DECISION_TRACES_PER_EPISODE, dtype=np.int64)
    at = NOW - SECONDS_PER_MINUTE * MINUTES_PER_YEAR ** rng.random(n)
    score = 1.0 - rng.random(n)
    tie = np.arange(DECISION_EPISODES, dtype=np.int64)
    sizes = np.maximum(
        np.rint(rng.lognormal(np.log(MEDIAN_EPISODE_TOKENS), 0.8, DECISION_EPISODES)), 1
    )
    sizes = sizes.astype(np.int64)
    view = int(sizes.sum())
    return offsets, at, score, tie, sizes, view, view // 2


def memory_store(path: Path, offsets: I64, at: F64, score: F64, sizes: I64) -> SQLiteStore:
    """A SQLite store at `path` holding one memory with these episodes and their traces,
    written in log order."""
    store = SQLiteStore(path, synchronous="OFF")
    group = np.repeat(np.arange(len(sizes)), np.diff(offsets))
    log_order = np.argsort(at, kind="stable")
    with store.write("bench") as tx:
        tx.create_memory("chat_completions", 0.0)
        tx.insert_episodes(
            [
                EpisodeRecord(
                    n=i + 1,
                    first_seq=i,
                    last_seq=i,
                    first_turn=i,
                    last_turn=i,
                    start_at=0.0,
                    end_at=0.0,
                    tokens=int(size),
                    cut_at=0.0,
                )
                for i, size in enumerate(sizes.tolist())
            ]
        )
        tx.append_traces(
            [
                TraceRecord(
                    n=n,
                    episode=int(group[i]) + 1,
                    fact=None,
                    kind="fact",
                    score=float(score[i]),
                    counted=True,
                    at=float(at[i]),
                )
                for n, i in enumerate(log_order.tolist(), start=1)
            ]
        )
    return store


def measure_decision() -> list[tuple[str, ...]]:
    offsets, at, score, tie, sizes, view, landing = decision_memory()

    def rust() -> I64:
        return _core.fade(_core.activation(offsets, at, score, NOW), tie, sizes, view, landing)

    def numpy() -> I64:
        return fade_numpy(activation_reduceat(offsets, at, score, NOW), tie, sizes, view, landing)

    # What a decorate's fade runs on a memory (`Assembly._fade_if_needed`): bring its mirrors of
    # the episodes and the trace log up to the store (one read of each count, as after any
    # earlier call), then activation by episode number, the order and the walk down it. All
    # episodes are live here, so the facts block stays and the landing with it.
    episodes, log = EpisodeTable(), TraceLog()
    with tempfile.TemporaryDirectory(prefix="fadeway-bench-") as tmp:
        store = memory_store(Path(tmp) / "bench.db", offsets, at, score, sizes)

        def memory() -> I64:
            with store.read("bench") as tx:
                episodes.sync(tx)
                log.sync(tx)
            fade = forgetting.fade_episodes(
                episodes.columns(),
                lambda numbers: log.activation(numbers, NOW),
                {},
                {},
                {},
                1.0,
                view,
                0,
                lambda block: forgetting.landing(view, block, 0, 0, 0),
            )
            return fade.numbers - 1

        picked = rust()
        assert np.array_equal(picked, numpy())
        assert np.array_equal(memory(), picked)
        runs = {
            "fadeway (Rust)": rust,
            "fadeway, on a memory (store and mirrors)": memory,
            "numpy": numpy,
        }
        times = best_times(
            runs,
            {"fadeway (Rust)": 200, "fadeway, on a memory (store and mirrors)": 50, "numpy": 50},
        )
        store.close()
    base = times["fadeway (Rust)"]
    label = f"{DECISION_EPISODES:,} x {DECISION_TRACES_PER_EPISODE}"
    return [
        (label, name, f"{len(picked):,}", f"{t * 1e3:.3f}", f"{t / base:.1f}x")
        for name, t in times.items()
    ]


def goals(
    activation_rows: list[tuple[str, ...]],
    order_rows: list[tuple[str, ...]],
    decision_rows: list[tuple[str, ...]],
) -> str:
    """The issue's goals, each with the worst figure of this run and whether it was met."""

    def worst(rows: list[tuple[str, ...]], name: str, column: int) -> float:
        return max(float(r[column]) for r in rows if name in r[1:3])

    def ratio(rows: list[tuple[str, ...]], name: str, column: int = 4) -> float:
        return min(float(r[column].rstrip("x")) for r in rows if name in r[1:3])

    whole = [r for r in order_rows if r[1] == "all"]
    tenth = [r for r in order_rows if r[1] == "a tenth"]

    checks = [
        (
            "activation grouped <= 1 ns per trace",
            worst(activation_rows, "fadeway grouped (Rust)", 3),
            1.0,
            "ns",
        ),
        (
            "activation log order <= 2 ns per trace",
            worst(activation_rows, "fadeway log order (Rust)", 3),
            2.0,
            "ns",
        ),
        (
            "grouped >= 7x numpy np.add.reduceat (lowest ratio)",
            -ratio(activation_rows, "numpy np.add.reduceat"),
            -7.0,
            "x",
        ),
        (
            "fade order, all of it, <= 2 ns per episode",
            worst(whole, "fadeway fade_order (Rust)", 4),
            2.0,
            "ns",
        ),
        (
            "fade order, all of it, >= 10x numpy argsort (lowest ratio)",
            -ratio(whole, "numpy argsort", 5),
            -10.0,
            "x",
        ),
        (
            "fade order, a tenth, <= 2 ns per episode (of all)",
            worst(tenth, "fadeway fade_order, limit (Rust)", 4),
            2.0,
            "ns",
        ),
        (
            "fade order, a tenth, >= 10x numpy argpartition + argsort (lowest ratio)",
            -ratio(tenth, "numpy argpartition + argsort", 5),
            -10.0,
            "x",
        ),
        (
            "fade order, a tenth, >= 10x numpy argsort of all (lowest ratio)",
            -min(
                float(w[4]) / float(t[4])
                for w in whole
                for t in tenth
                if w[0] == t[0] and w[2] == "numpy argsort" and t[2].startswith("fadeway")
            ),
            -10.0,
            "x",
        ),
        ("whole fade decision < 1 ms", worst(decision_rows, "fadeway (Rust)", 3), 1.0, "ms"),
        (
            "whole fade decision on a memory < 1 ms",
            worst(decision_rows, "fadeway, on a memory (store and mirrors)", 3),
            1.0,
            "ms",
        ),
    ]
    lines = [
        f"- {goal}: {abs(value):.2f} {unit}, {'met' if value <= bound else 'not met'}"
        for goal, value, bound, unit in checks
    ]
    return "\n".join([*lines, seven_times(activation_rows)])


def seven_times(activation_rows: list[tuple[str, ...]]) -> str:
    """What 7x numpy's `reduceat` asks of grouped activation at each size, beside this run's
    memory floor: where numpy is fast, the ratio asks for less time than reading the layout."""
    numpy_ns = {r[0]: float(r[3]) for r in activation_rows if r[1] == "numpy np.add.reduceat"}
    floor = next(float(r[3]) for r in activation_rows if r[1].startswith("memory floor"))
    asked = " / ".join(f"{ns / 7:.2f}" for ns in numpy_ns.values())
    sizes = " / ".join(numpy_ns)
    return (
        f"- 7x numpy np.add.reduceat asks for {asked} ns per trace at {sizes} traces; "
        f"this run's memory floor is {floor:.2f} ns"
    )


def markdown_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def cpu_name() -> str:
    """The CPU's model name as the kernel reports it: the kernels and numpy's sorts differ
    by vendor (numpy's AVX-512 sorts, for one, run on Intel but not on AMD's Zen 4)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def numpy_simd() -> str:
    """The SIMD extensions numpy found on this CPU, the ones its kernels may dispatch to."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:
        return "SIMD unknown"
    found = [
        k for k in ("AVX2", "AVX512F", "AVX512_SKX", "AVX512_ICL", "AVX512_SPR") if features.get(k)
    ]
    return "SIMD " + (" ".join(found) or "baseline")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--traces", type=int, nargs="+", default=list(DEFAULT_TRACES))
    parser.add_argument("--episodes", type=int, nargs="+", default=list(DEFAULT_EPISODES))
    parser.add_argument("--out", type=Path, help="also write the tables to this markdown file")
    args = parser.parse_args()

    bandwidth = copy_bandwidth()
    activation_rows = [row for n in args.traces for row in measure_activation(n, bandwidth)]
    order_rows = [row for n in args.episodes for row in measure_order(n)]
    decision_rows = measure_decision()
    verdicts = goals(activation_rows, order_rows, decision_rows)
    tables = (
        "Activation (ns per trace):\n\n"
        + markdown_table(
            ("traces", "implementation", "ms / call", "ns / trace", "time vs Rust grouped"),
            activation_rows,
        )
        + "\n\nThe fade's order, all of it or its first episodes (ns per episode of all; the "
        "ratios compare the same share):\n\n"
        + markdown_table(
            ("episodes", "first", "implementation", "ms / call", "ns / episode", "time vs Rust"),
            order_rows,
        )
        + "\n\nA whole fade decision (activation, order, pick) on one memory:\n\n"
        + markdown_table(
            ("episodes x traces", "implementation", "picked", "ms / call", "time vs Rust"),
            decision_rows,
        )
    )
    print(tables)
    print(verdicts)
    if args.out:
        today = datetime.date.today().isoformat()
        args.out.write_text(
            "# Activation and the fade: measured\n\n"
            f"Command: `python benches/compare_activation.py --out {args.out}`  \n"
            f"Date: {today}; Python {platform.python_version()}, numpy {np.__version__} "
            f"({numpy_simd()}), {platform.machine()} ({cpu_name()}), 2 cores, shared with "
            "other work (load average "
            f"{os.getloadavg()[0]:.1f}); fadeway on two threads for grouped and log-order "
            "activation from 2^17 and 2^18 traces and for a prefix's keeping pass from 2^20 "
            "episodes, "
            "on one otherwise.  \n"
            "Workloads: see the docstring of `benches/compare_activation.py`. Every result was "
            "checked against fadeway's before timing; figures are the best of 30-200 calls, taken "
            f"in {ROUNDS} rounds that visit every implementation in turn.\n\n"
            f"{tables}\n\n"
            f"Against the issue's goals, in this run:\n\n{verdicts}\n\n"
            "The extension is built for baseline x86-64 and picks at run time (through pulp, "
            "without `unsafe`) the best code the CPU runs: AVX-512 on this machine, AVX2 + FMA or "
            "SSE2 elsewhere, with the same bits on every path (the fade's prefix keeps its "
            "candidates with AVX-512's compress where the CPU has it); numpy dispatches to the "
            "extensions named above. On a shared machine repeated runs vary by "
            "10-30%; the ratios above come from one run. The two-thread figures are bimodal on "
            "this VM: in spells of a tenth of a second to several seconds the second thread "
            "gets no core of its own, and 10^6 in log order, for one, measures 2.5-3.3 ns "
            "instead of 1.5-1.9 (log order from 2^18 traces computes the terms on one thread "
            "and adds them on the other; from 2^21 the terms thread also hands over the "
            "episode ids). What was tried on the Rust side, what "
            "it measured and where the time goes is the design log at the top of "
            "`rust/core/src/activation.rs` and `rust/core/src/fade.rs`.\n"
        )


if __name__ == "__main__":
    sys.exit(main())
