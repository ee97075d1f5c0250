"""Token counting through the binding, next to tiktoken over the same ranks.

Run: python -m pytest benches/bench_tokens.py --benchmark-enable
Goal: at least 150 MB/s per thread on English text, and under 1 µs to count a 130-byte passage;
`benches/compare_tokens.py` prints MB/s and ratios in one table and writes
`benches/RESULTS-tokens.md`. The text is `compare_tokens.chat_text` (generated, ~3 MB); every
benchmark checks its counts against tiktoken's before it times anything.
"""

from __future__ import annotations

import pytest
from compare_tokens import BIG_TEXT_BYTES, chat_text, passages

import reference
from fadeway import _core

pytest.importorskip("tiktoken")

ENCODINGS = reference.ENCODING_NAMES


@pytest.fixture(scope="module")
def text() -> str:
    return chat_text(BIG_TEXT_BYTES)


@pytest.fixture(scope="module")
def parts(text: str) -> list[str]:
    return passages(text)


def _per_item(benchmark, items: int, size: int) -> None:
    """Record ns per item and MB/s next to pytest-benchmark's per-call figures."""
    if benchmark.stats is not None:
        best = benchmark.stats.stats.min
        benchmark.extra_info["ns per item"] = round(best / items * 1e9)
        benchmark.extra_info["MB/s"] = round(size / best / 1e6, 1)


@pytest.mark.benchmark(group="tokens: 3 MB of chat text, one call")
@pytest.mark.parametrize("name", ENCODINGS)
def test_count_tokens_text(benchmark, name: str, text: str) -> None:
    expected = len(reference.tiktoken_encoding(name).encode_ordinary(text))
    assert _core.count_tokens(name, text) == expected
    assert benchmark(_core.count_tokens, name, text) == expected
    _per_item(benchmark, 1, len(text.encode()))


@pytest.mark.benchmark(group="tokens: 3 MB of chat text, one call")
@pytest.mark.parametrize("name", ENCODINGS)
def test_tiktoken_text(benchmark, name: str, text: str) -> None:
    encoding = reference.tiktoken_encoding(name)
    expected = _core.count_tokens(name, text)
    tokens = benchmark.pedantic(encoding.encode_ordinary, args=(text,), rounds=3, iterations=1)
    assert len(tokens) == expected
    _per_item(benchmark, 1, len(text.encode()))


@pytest.mark.benchmark(group="tokens: 130-byte passages of the same text")
@pytest.mark.parametrize("name", ENCODINGS)
def test_count_tokens_passages(benchmark, name: str, parts: list[str]) -> None:
    encoding = reference.tiktoken_encoding(name)
    expected = [len(encoding.encode_ordinary(p)) for p in parts]
    assert [_core.count_tokens(name, p) for p in parts] == expected
    counts = benchmark(lambda: [_core.count_tokens(name, p) for p in parts])
    assert counts == expected
    _per_item(benchmark, len(parts), sum(len(p.encode()) for p in parts))


@pytest.mark.benchmark(group="tokens: 130-byte passages of the same text")
@pytest.mark.parametrize("name", ENCODINGS)
def test_count_tokens_many_passages(benchmark, name: str, parts: list[str]) -> None:
    encoding = reference.tiktoken_encoding(name)
    expected = [len(encoding.encode_ordinary(p)) for p in parts]
    assert _core.count_tokens_many(name, parts).tolist() == expected
    counts = benchmark(_core.count_tokens_many, name, parts)
    assert counts.tolist() == expected
    _per_item(benchmark, len(parts), sum(len(p.encode()) for p in parts))


@pytest.mark.benchmark(group="tokens: 130-byte passages of the same text")
@pytest.mark.parametrize("name", ENCODINGS)
def test_tiktoken_passages(benchmark, name: str, parts: list[str]) -> None:
    encoding = reference.tiktoken_encoding(name)
    expected = [_core.count_tokens(name, p) for p in parts]
    counts = benchmark.pedantic(
        lambda: [len(encoding.encode_ordinary(p)) for p in parts], rounds=3, iterations=1
    )
    assert counts == expected
    _per_item(benchmark, len(parts), sum(len(p.encode()) for p in parts))


@pytest.mark.benchmark(group="tokens: one passage, again and again (call overhead)")
@pytest.mark.parametrize("name", ENCODINGS)
def test_count_tokens_one_passage(benchmark, name: str, parts: list[str]) -> None:
    passage = parts[len(parts) // 2]
    expected = len(reference.tiktoken_encoding(name).encode_ordinary(passage))
    assert benchmark(_core.count_tokens, name, passage) == expected
