"""Slow, obvious twins of fadeway's kernels, and references built from the same data.

Each function here is written to be read, not to be fast: the tests keep the Rust kernels equal to
these. A plain module of functions; add a twin per kernel.

Token estimation (the issue "Token estimation with a real BPE"):

- `tiktoken_encoding(name)` builds a `tiktoken.Encoding` from the ranks the Rust crate embeds
  (`fadeway._core.token_bytes`), with OpenAI's published pre-tokenisation regex, so the two
  tokenisers share every rank and differ only in code. Nothing is downloaded.
- `slow_count(name, text)` pre-tokenises with the same regex (the `regex` module, which knows
  `\\p{..}` classes and possessive quantifiers) and runs the classic rank-merge loop on each piece.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from fadeway import _core

if TYPE_CHECKING:
    import regex
    import tiktoken

ENCODING_NAMES = ("o200k_base", "cl100k_base")

# The pre-tokenisation patterns exactly as tiktoken publishes them (tiktoken_ext/openai_public.py).
PATTERNS: dict[str, str] = {
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""  # noqa: E501
        r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    "o200k_base": (
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
        r"""\p{N}{1,3}|"""
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*|"""
        r"""\s*[\r\n]+|"""
        r"""\s+(?!\S)|"""
        r"""\s+"""
    ),
}


@functools.cache
def mergeable_ranks(name: str) -> dict[bytes, int]:
    """The encoding's ranks as tiktoken wants them: token bytes -> token id (= merge rank)."""
    return {token: rank for rank, token in enumerate(_core.token_bytes(name))}


@functools.cache
def tiktoken_encoding(name: str) -> tiktoken.Encoding:
    """A tiktoken `Encoding` over the same ranks and OpenAI's regex, without special tokens."""
    import tiktoken

    return tiktoken.Encoding(
        name=f"fadeway-{name}",
        pat_str=PATTERNS[name],
        mergeable_ranks=mergeable_ranks(name),
        special_tokens={},
    )


@functools.cache
def _pattern(name: str) -> regex.Pattern[str]:
    import regex

    return regex.compile(PATTERNS[name])


def bpe_merge(piece: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    """Byte-pair encode one pre-tokenised piece: start from single bytes and, while any adjacent
    pair is itself a token, merge the pair with the lowest rank (leftmost on ties)."""
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best_rank: int | None = None
        best_at = -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best_rank, best_at = rank, i
        if best_rank is None:
            break
        parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
    return parts


def slow_encode(name: str, text: str) -> list[int]:
    """The token ids of `text`: regex pre-tokenisation, then `bpe_merge` on each piece."""
    ranks = mergeable_ranks(name)
    tokens: list[int] = []
    for piece in _pattern(name).findall(text):
        tokens.extend(ranks[part] for part in bpe_merge(piece.encode("utf-8"), ranks))
    return tokens


def slow_count(name: str, text: str) -> int:
    """The number of tokens `text` encodes to; the twin of `fadeway._core.count_tokens`."""
    return len(slow_encode(name, text))


# -- hashing embeddings ---------------------------------------------------------------------------
# The twin of `fadeway._core.hash_embed` (rust/core/src/embed.rs): the same features, hash, weights
# and normalisation, written out with Python ints, a Counter and float64. (Imports here, not at the
# top: this section is appended to a shared file.)

_MASK64 = (1 << 64) - 1
FNV_OFFSET = 0xCBF2_9CE4_8422_2325
FNV_PRIME = 0x0000_0100_0000_01B3
#: Feature kind -> (the tag mixed into its hash, its weight).
HASH_FEATURES = {"word": (1, 1.0), "bigram": (2, 0.5), "char_ngram": (3, 0.3)}
CHAR_NGRAM_SIZES = range(3, 6)
#: A row whose norm is below this fraction of its features' total weight cancelled out: zeros.
HASH_CANCELLED = 1e-9


def _fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51_AFD7_ED55_8CCD) & _MASK64
    h ^= h >> 33
    h = (h * 0xC4CE_B9FE_1A85_EC53) & _MASK64
    return h ^ (h >> 33)


def feature_hash_reference(tag: int, data: bytes) -> int:
    """FNV-1a over the bytes, from the offset basis xor the kind's tag; then MurmurHash3's
    fmix64. All modulo 2**64."""
    h = FNV_OFFSET ^ tag
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & _MASK64
    return _fmix64(h)


@functools.cache
def _word_pattern() -> regex.Pattern[str]:
    import regex

    # Rust's `char::is_alphanumeric`: the derived property Alphabetic, or general category N*.
    return regex.compile(r"[\p{Alphabetic}\p{N}]+")


def hash_embed_words(text: str) -> list[str]:
    """Maximal alphanumeric runs, each lowercased one character at a time (no context rules)."""
    return ["".join(c.lower() for c in run) for run in _word_pattern().findall(text)]


def hash_embed_features(text: str) -> list[tuple[str, bytes]]:
    """Every feature occurrence of `text`: words, adjacent-word bigrams, and the 3..5-character
    n-grams of each word padded as `<word>`."""
    words = hash_embed_words(text)
    features: list[tuple[str, bytes]] = []
    for i, word in enumerate(words):
        features.append(("word", word.encode()))
        if i + 1 < len(words):
            features.append(("bigram", f"{word} {words[i + 1]}".encode()))
        padded = f"<{word}>"
        for n in CHAR_NGRAM_SIZES:
            for j in range(len(padded) - n + 1):
                features.append(("char_ngram", padded[j : j + n].encode()))
    return features


def hash_embed_reference(texts: list[str], dim: int) -> npt.NDArray[np.float32]:
    """The twin of `fadeway._core.hash_embed`: each distinct feature adds
    ±weight·(1 + ln tf) to bucket hash % dim (minus when the hash's top bit is set), then each row
    is scaled to unit length; a row that cancelled out (norm below HASH_CANCELLED times the sum
    of the values' magnitudes) is zeros."""
    out = np.zeros((len(texts), dim), dtype=np.float64)
    for row, text in zip(out, texts, strict=True):
        mass = 0.0
        for (kind, data), tf in Counter(hash_embed_features(text)).items():
            tag, weight = HASH_FEATURES[kind]
            h = feature_hash_reference(tag, data)
            value = weight * (1.0 + math.log(tf))
            mass += value
            row[h % dim] += -value if h >> 63 else value
        norm = math.sqrt(float(row @ row))
        row[:] = row / norm if norm > HASH_CANCELLED * mass else 0.0
    return out.astype(np.float32)


# Boundary-rank splitting (spec "Episodes"): the twin of `fadeway._core.split_episodes`.


def split_reference(
    sizes: list[int], scores: list[float], min_size: int, max_size: int
) -> list[int]:
    """The unit indices where episodes start (0 excluded), by the rule read literally.

    A stretch that fits in `max_size`, or is one unit, is an episode. Any other stretch is cut at
    its highest-scored boundary (ties: the earliest) among those leaving both sides at least
    `min_size`; if none does, among those whose smaller side is largest. Then each side again.
    """
    cuts: list[int] = []

    def split_stretch(a: int, b: int) -> None:
        if b - a < 2 or sum(sizes[a:b]) <= max_size:
            return
        sides = {c: (sum(sizes[a:c]), sum(sizes[c:b])) for c in range(a + 1, b)}
        allowed = [c for c, (left, right) in sides.items() if min(left, right) >= min_size]
        if not allowed:
            largest = max(min(side) for side in sides.values())
            allowed = [c for c, side in sides.items() if min(side) == largest]
        # Boundary c - 1 sits before unit c.
        cut = max(allowed, key=lambda c: (scores[c - 1], -c))
        split_stretch(a, cut)
        cuts.append(cut)
        split_stretch(cut, b)

    split_stretch(0, len(sizes))
    return cuts


# Activation, significance and the fade (spec "Activation", "Significance", "Forgetting"): the
# twins of `fadeway._core.activation`, `significance`, `activation_log_order`, `fade_order` and
# `fade`. Traces are (at, score) pairs, grouped per episode; times are Unix seconds.

SECONDS_PER_MINUTE = 60.0


def trace_weight_reference(age_seconds: float) -> float:
    """One over the square root of the trace's age in minutes, at most 1 (the first minute, and
    the future, count in full)."""
    import math

    return 1.0 / math.sqrt(max(1.0, age_seconds / SECONDS_PER_MINUTE))


def activation_reference(groups: list[list[tuple[float, float]]], now: float) -> list[float]:
    """Each episode's activation at `now`: Σ score / √max(1, minutes(now − at)) over its traces."""
    return [
        sum(score * trace_weight_reference(now - at) for at, score in traces) for traces in groups
    ]


def significance_reference(groups: list[list[tuple[float, float]]]) -> list[float]:
    """Each episode's significance: the plain sum of its traces' scores, never faded."""
    return [sum(score for _, score in traces) for traces in groups]


def fade_order_reference(activation: list[float], tie: list[int]) -> list[int]:
    """Episode indices, least active first; ties by `tie`, then by index."""
    return sorted(range(len(activation)), key=lambda i: (activation[i], tie[i], i))


def fade_reference(
    activation: list[float], tie: list[int], sizes: list[int], view: int, landing: int
) -> list[int]:
    """A fade read literally: take episodes in order while the projected view is above the
    landing; each picked episode takes its size out of the projected view."""
    picked: list[int] = []
    projected = view
    for episode in fade_order_reference(activation, tie):
        if projected <= landing:
            break
        projected -= sizes[episode]
        picked.append(episode)
    return picked


# Reciprocal rank fusion (issue 5, item 4): the twin of `fadeway._core.rrf`.


def rrf_reference(
    lists: list[list[int]], weights: list[float], k: float, limit: int
) -> tuple[list[int], list[float]]:
    """Ids best first and their scores, at most `limit`: an id at rank r (from 1) of a list of
    weight w earns w / (k + r), at its first rank only when repeated within the list; its score is
    the sum over lists. Ties: the best rank in any list, then the smaller id."""
    terms: dict[int, list[float]] = {}
    best_rank: dict[int, int] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        seen: set[int] = set()
        for rank, id_ in enumerate(ranked, start=1):
            if id_ in seen:
                continue
            seen.add(id_)
            terms.setdefault(id_, []).append(weight / (k + rank))
            best_rank[id_] = min(best_rank.get(id_, rank), rank)
    scores: dict[int, float] = {}
    for id_, earned in terms.items():
        # Smallest first, one addition at a time from +0.0, as the kernel adds: the result is
        # then the same whatever the order of the lists (and `sum` may compensate on 3.12+).
        total = 0.0
        for term in sorted(earned):
            total += term
        scores[id_] = total
    order = sorted(scores, key=lambda i: (-scores[i], best_rank[i], i))[:limit]
    return order, [scores[i] for i in order]


# BM25 (issue 5, item 3): the twin of `fadeway._core.Bm25Index`, scored from scratch each call.

BM25_STOPWORDS = frozenset(
    ("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is")
    + ("it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there")
    + ("these", "they", "this", "to", "was", "will", "with")
)
#: What the "english" stopwords drop besides BM25_STOPWORDS (written out again, not read from
#: the kernel: a word missing from either list fails the twin test).
BM25_MORE_STOPWORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself its itself them theirs themselves what which who whom those am were been
    being have has had having do does did doing because until while about against between through
    during before after above below from up down out off over under again further once here when
    where why how all any both each few more most other some nor only own same so than too very s
    t can just don should now d ll m o re ve y""".split()
)


@functools.cache
def _bm25_run_pattern() -> regex.Pattern[str]:
    import regex

    # Rust's `char::is_alphanumeric` is Unicode Alphabetic or a number (Nd, Nl, No).
    return regex.compile(r"[\p{Alphabetic}\p{N}]+")


def s_stem_reference(word: str) -> str:
    """Harman's S-stemmer on words of more than three characters; the first matching rule wins."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-2] + "e"
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def bm25_tokens_reference(text: str, stopwords: bool | str, stem: bool) -> list[str]:
    """Alphanumeric runs, lowercased; stopwords dropped after lowercasing (True or "lucene":
    Lucene's set; "english": that and more), then stemmed."""
    tokens = [run.lower() for run in _bm25_run_pattern().findall(text)]
    if stopwords in (True, "lucene", "english"):
        tokens = [t for t in tokens if t not in BM25_STOPWORDS]
    if stopwords == "english":
        tokens = [t for t in tokens if t not in BM25_MORE_STOPWORDS]
    return [s_stem_reference(t) for t in tokens] if stem else tokens


def bm25_reference(
    docs: dict[int, str],
    query: str,
    k: int,
    k1: float,
    b: float,
    stopwords: bool | str = True,
    stem: bool = True,
    max_df: float = 1.0,
) -> tuple[list[int], list[float]]:
    """Okapi BM25 with Lucene's idf, ln(1 + (N - df + 0.5) / (df + 0.5)), summed over the query's
    tokens (repeats count again), a token in more than `max_df` of max(N, 64) documents left out.
    Documents matching no token are left out; best first, ties to the lower id; at most k."""
    tokens = {i: bm25_tokens_reference(t, stopwords, stem) for i, t in docs.items()}
    n = len(tokens)
    if n == 0 or k == 0:
        return [], []
    avgdl = sum(len(t) for t in tokens.values()) / n
    scores: dict[int, float] = {}
    for q in bm25_tokens_reference(query, stopwords, stem):
        df = sum(q in t for t in tokens.values())
        if df == 0 or df > max_df * max(n, 64):
            continue
        idf = math.log1p((n - df + 0.5) / (df + 0.5))
        for i, t in tokens.items():
            tf = t.count(q)
            if tf:
                # The kernel's expression, in its order, so the two agree to rounding.
                term = idf * (tf * (k1 + 1.0)) / (tf + k1 * (1.0 - b + b * len(t) / avgdl))
                scores[i] = scores.get(i, 0.0) + term
    order = sorted(scores, key=lambda i: (-scores[i], i))[:k]
    return order, [scores[i] for i in order]


def facts_of_reference(episodes, facts, acks, states, graph=None, awaiting=None):
    """The facts of each episode in `states`, read literally from the store's lists: a note's
    facts belong to every episode that acknowledged the note (with the graph: each as the held
    fact it stands as, once, retired ones and those of notes from `awaiting` on left out)."""
    out = {}
    for e in episodes:
        if e.state not in states:
            continue
        notes = [note for episode, note in acks if episode == e.n]
        if notes:
            out[e.n] = [f for note in notes for f in facts if f.note == note]
    if graph is None:
        return out
    by_n = {f.n: f for f in facts}
    taken = {e: [f for f in fs if awaiting is None or f.note < awaiting] for e, fs in out.items()}
    return {e: [by_n[n] for n in graph.shown(f.n for f in fs)] for e, fs in taken.items()}


def window_reference(text: str, query: str, most: int, size: int) -> str:
    """`recall.block.window`, plainly: each word checked against the query's terms, the best
    run of `size` by a convolution (the first best), the speaker label kept."""
    words = text.split()
    if len(words) <= most:
        return text
    label = words[0] if words[0].endswith(":") and len(words[0]) > 1 else ""
    wanted = set(_core.tokenize(query))
    hits = np.array([bool(wanted & set(_core.tokenize(w))) for w in words], dtype=np.int32)
    start = int(np.argmax(np.convolve(hits, np.ones(size, dtype=np.int32), mode="valid")))
    end = start + size
    head = [label] if label and start > 0 else []
    cut_before = ["…"] if start > (1 if label else 0) else []
    cut_after = ["…"] if end < len(words) else []
    return " ".join([*head, *cut_before, *words[start:end], *cut_after])


def without_markers_reference(text: str) -> str:
    """`neutralise.without_markers` with every text folded character by character (no shortcut
    for ASCII with ellipses)."""
    from fadeway.neutralise import _folded, _marker_brackets

    folded, index = _folded(text)
    out = list(text)
    for at, safe in _marker_brackets(folded):
        out[at if index is None else index[at]] = safe
    return "".join(out)
