"""BM25 through the binding: indexing 100k synthetic passages, and queries against them.

Run: python -m pytest benches/bench_bm25.py --benchmark-enable
Goal: rebuild 100k passages well under a second; a query in well under a millisecond.
Passages are 40-80 words drawn from a Zipf-like vocabulary of 20k words (with stopwords and
plurals), so posting lists have the long-tailed lengths of real text. The recall case
(`test_bm25_recall_queries`) is what recall does: passages of 8-40 words, queries of 5-30 words
drawn from the same distribution (so most hold a few very common words), top 20.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import reference
from fadeway import _core

K1 = 1.2
B = 0.75
PASSAGES = 100_000
VOCABULARY = 20_000
QUERIES = ["w17 w3000s the w250", "w5 w6 w7", "w19999 w12345s", "w42"]


@functools.cache
def corpus(n: int = PASSAGES) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(5)
    words = np.array(
        ["the", "of", "and", "is"]
        + [f"w{j}" + ("s" if j % 3 == 0 else "") for j in range(VOCABULARY)]
    )
    # Zipf-like: the rank of a word is drawn with probability ~ 1 / rank.
    ranks = (rng.zipf(1.3, size=n * 80) - 1) % len(words)
    lengths = rng.integers(40, 81, size=n)
    texts, at = [], 0
    for length in lengths:
        texts.append(" ".join(words[ranks[at : at + length]]))
        at += length
    return np.arange(n, dtype=np.int64) * 7 + 3, texts


def zipf_words(rng: np.random.Generator, count: int) -> np.ndarray:
    words = np.array(
        ["the", "of", "and", "is"]
        + [f"w{j}" + ("s" if j % 3 == 0 else "") for j in range(VOCABULARY)]
    )
    # Zipf-like: the rank of a word is drawn with probability ~ 1 / rank^1.3.
    return words[(rng.zipf(1.3, size=count) - 1) % len(words)]


@functools.cache
def recall_corpus(n: int) -> tuple[np.ndarray, list[str], list[str]]:
    """`n` passages of 8-40 words and `RECALL_QUERIES` queries of 5-30 words, one vocabulary."""
    rng = np.random.default_rng(11)
    drawn = zipf_words(rng, n * 40)
    lengths = rng.integers(8, 41, size=n)
    texts, at = [], 0
    for length in lengths:
        texts.append(" ".join(drawn[at : at + length]))
        at += length
    asked = zipf_words(rng, RECALL_QUERIES * 30)
    queries = [
        " ".join(asked[j * 30 : j * 30 + length])
        for j, length in enumerate(rng.integers(5, 31, size=RECALL_QUERIES))
    ]
    return np.arange(n, dtype=np.int64) * 7 + 3, texts, queries


def build(ids: np.ndarray, texts: list[str]) -> _core.Bm25Index:
    index = _core.Bm25Index(K1, B)
    index.add(ids, texts)
    return index


@functools.cache
def built() -> _core.Bm25Index:
    return build(*corpus())


def test_bm25_index_100k(benchmark) -> None:
    ids, texts = corpus()
    index = build(ids, texts)
    assert len(index) == PASSAGES
    result = benchmark.pedantic(build, args=(ids, texts), rounds=5, iterations=1)
    assert len(result) == PASSAGES
    assert result.to_bytes() == index.to_bytes()


@pytest.mark.parametrize("query", QUERIES)
def test_bm25_query_100k(benchmark, query: str) -> None:
    ids, texts = corpus()
    index = built()
    found, scores = index.search(query, 10)
    want = reference.bm25_reference(dict(zip(ids.tolist(), texts, strict=True)), query, 10, K1, B)
    assert found.tolist() == want[0]
    assert scores.tolist() == pytest.approx(want[1], rel=1e-9)
    result = benchmark(index.search, query, 10)
    assert result[0].tolist() == want[0]


RECALL_QUERIES = 200
RECALL_K = 20


@pytest.mark.parametrize("n", [10_000, 100_000])
def test_bm25_recall_queries(benchmark, n: int) -> None:
    """All `RECALL_QUERIES` queries, top 20: divide the time by 200 for one query."""
    ids, texts, queries = recall_corpus(n)
    index = build(ids, texts)
    docs = dict(zip(ids.tolist(), texts, strict=True))
    for query in queries[:2]:
        found, scores = index.search(query, RECALL_K)
        want = reference.bm25_reference(docs, query, RECALL_K, K1, B)
        assert found.tolist() == want[0]
        assert scores.tolist() == pytest.approx(want[1], rel=1e-12)

    # A query made only of stopwords finds nothing, so not every query fills its 20.
    hits = sum(len(index.search(q, RECALL_K)[0]) for q in queries)
    assert hits > 0.95 * RECALL_K * len(queries)

    def run() -> int:
        return sum(len(index.search(q, RECALL_K)[0]) for q in queries)

    assert benchmark(run) == hits


def test_bm25_round_trip_100k(benchmark) -> None:
    index = built()
    data = index.to_bytes()
    back = benchmark.pedantic(_core.Bm25Index.from_bytes, args=(data,), rounds=3, iterations=1)
    assert len(back) == PASSAGES
    for query in QUERIES:
        assert back.search(query, 10)[0].tolist() == index.search(query, 10)[0].tolist()
