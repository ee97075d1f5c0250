"""The token-estimation kernel, `fadeway._core.count_tokens` and `count_tokens_many`.

Counts must equal tiktoken's `encode_ordinary` exactly. The reference is a tiktoken `Encoding`
built from the ranks fadeway embeds (`reference.tiktoken_encoding`; tiktoken's own downloads are
never used), and the pure-Python twin `reference.slow_count` on short strings. The hard-coded
counts below were obtained from that reference and are also checked in `rust/core/tests/tokens.rs`.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference
from fadeway import _core

ENCODINGS = reference.ENCODING_NAMES

CONTRACTIONS = (
    "'seach 'teach 'mafter 'dafter 'reamong 'vedark 'lldark I'dagain "
    "we'reamong they'vecall you'lldark it'seach don'tearly I'mafter"
)

# (text, o200k_base count, cl100k_base count), from tiktoken over the same ranks.
REFERENCE_COUNTS = [
    ("", 0, 0),
    ("hello world", 2, 2),
    ("Hello, world! How's it going?", 9, 9),
    ("I'm sure they'll say it's fine; we've DONE IT'S WORK, haven't we?", 16, 21),
    ("Zürich café naïve résumé", 7, 9),
    ("Привет, мир! Как дела?", 8, 12),
    ("日本語のテキストを数える。", 10, 13),
    ("👍🏽 great work 🚀🚀", 9, 14),
    ("👨\u200d👩\u200d👧\u200d👦 family", 12, 19),
    ("def square(x: int) -> int:\n    return x ** 2  # the square\n", 20, 20),
    ("for (let i = 0; i < n; i++) { total += a[i]; }", 21, 21),
    (" " * 100, 2, 2),
    ("a" + " " * 50 + "b", 3, 3),
    ("\n\n\n\n", 1, 1),
    ("\t\t  \n  x", 3, 3),
    ("a \n\n  \n b  ", 5, 5),
    ("1234567890 3.14159 1,000,000", 15, 15),
    ("HTTPServer getHTTPResponseCode XMLHttpRequest", 8, 7),
    ("supercalifragilisticexpialidocious", 10, 11),
    ("https://example.com/a/b?c=d&e=f", 11, 11),
    ("it'ſ ſtill", 7, 8),
    ("a\u00a0b\u3000c x\u2028y", 8, 9),
    ("e\u0301 a\u0308 n\u0303", 6, 8),
    ("don\u2019t stop", 3, 3),
    ("=" * 80, 1, 1),
    ("a" * 100, 13, 13),
    ("ab" * 40, 20, 40),
    (CONTRACTIONS, 34, 41),
    (CONTRACTIONS.upper(), 53, 50),
]

# Strings that steer the pre-tokeniser across every class boundary of OpenAI's regexes, plus
# non-ASCII that fadeway hands to its regex (letters, marks, Unicode digits and spaces, the long s
# that folds to 's', title case, emoji) and controls.
TRICKY = [
    " ", "  ", "\n", "\r", "\r\n", "\t", "\x0b", "\x0c", "a", "z", "e", "s", "t", "l", "v", "r",
    "d", "m", "A", "Z", "S", "L", "E", "0", "7", "42", "'", "'s", "'LL", "'re", "'Ve", "!", ".",
    ",", "/", "-", "_", "=", "(", ")", '"', "#", "\x00", "\x1c", "\x7f", "é", "ß", "Ж", "ж", "ǅ",
    "ʰ", "ſ", "\u212a", "\u0301", "٣", "\u00a0", "\u3000", "\u2028", "\u0085", "😀", "👍🏽", "日本",
    "—", "’", " the", " memory", "Hello",
]  # fmt: skip

tricky_text = st.lists(st.sampled_from(TRICKY), max_size=40).map("".join)
any_text = st.one_of(st.text(), tricky_text)


@pytest.fixture(scope="module")
def tiktoken_encodings() -> dict[str, object]:
    pytest.importorskip("tiktoken")
    return {name: reference.tiktoken_encoding(name) for name in ENCODINGS}


@pytest.fixture(scope="module")
def slow_twin() -> None:
    pytest.importorskip("regex")


@pytest.mark.parametrize(("text", "o200k", "cl100k"), REFERENCE_COUNTS)
def test_counts_equal_reference_counts(text: str, o200k: int, cl100k: int) -> None:
    assert _core.count_tokens("o200k_base", text) == o200k
    assert _core.count_tokens("cl100k_base", text) == cl100k


@pytest.mark.parametrize(("text", "o200k", "cl100k"), REFERENCE_COUNTS)
def test_reference_counts_are_tiktokens(
    tiktoken_encodings: dict, text: str, o200k: int, cl100k: int
) -> None:
    assert len(tiktoken_encodings["o200k_base"].encode_ordinary(text)) == o200k
    assert len(tiktoken_encodings["cl100k_base"].encode_ordinary(text)) == cl100k


@settings(max_examples=400, deadline=None)
@given(text=any_text)
def test_counts_equal_tiktoken(tiktoken_encodings: dict, text: str) -> None:
    for name in ENCODINGS:
        assert _core.count_tokens(name, text) == len(tiktoken_encodings[name].encode_ordinary(text))


# The slow twin's `regex` module follows the newest Unicode (17 in its 2026 releases); tiktoken
# and the core match with the older tables of Rust's regex crates, so they tell letters apart
# differently on code points assigned since (U+323B0, CJK Extension J, is a letter to one and
# unassigned to the others). The twin is compared on code points this Python's Unicode assigns.
assigned_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cn",)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(assigned_text, st.lists(st.sampled_from(TRICKY), max_size=12).map("".join)))
def test_short_counts_equal_tiktoken_and_the_slow_twin(
    tiktoken_encodings: dict, slow_twin: None, text: str
) -> None:
    for name in ENCODINGS:
        expected = len(tiktoken_encodings[name].encode_ordinary(text))
        assert reference.slow_count(name, text) == expected
        assert _core.count_tokens(name, text) == expected


def test_token_bytes_are_the_ranks_in_id_order() -> None:
    for name in ENCODINGS:
        ranks = _core.token_bytes(name)
        assert len(set(ranks)) == len(ranks)
        assert sorted(ranks[:256], key=lambda b: b) == [bytes([i]) for i in range(256)]
        assert _core.encode_tokens(name, "hello world") == [
            ranks.index(b"hello"),
            ranks.index(b" world"),
        ]


@pytest.mark.parametrize(
    "call",
    [
        lambda name: _core.count_tokens(name, "hello"),
        lambda name: _core.count_tokens_many(name, ["hello"]),
        lambda name: _core.encode_tokens(name, "hello"),
        lambda name: _core.token_bytes(name),
    ],
    ids=["count_tokens", "count_tokens_many", "encode_tokens", "token_bytes"],
)
def test_unknown_encoding_is_a_value_error_naming_the_allowed_ones(call) -> None:
    with pytest.raises(ValueError, match="p50k_base") as raised:
        call("p50k_base")
    assert "o200k_base" in str(raised.value)
    assert "cl100k_base" in str(raised.value)


@pytest.mark.parametrize("name", ENCODINGS)
def test_count_tokens_many_is_an_int64_array_of_the_counts(name: str) -> None:
    texts = [text for text, _, _ in REFERENCE_COUNTS]
    counts = _core.count_tokens_many(name, texts)
    assert isinstance(counts, np.ndarray)
    assert counts.dtype == np.int64
    assert counts.shape == (len(texts),)
    assert counts.tolist() == [_core.count_tokens(name, text) for text in texts]

    empty = _core.count_tokens_many(name, [])
    assert empty.dtype == np.int64
    assert empty.shape == (0,)
    assert _core.count_tokens_many(name, tuple(texts)).tolist() == counts.tolist()


def test_count_tokens_many_wants_a_sequence_of_str() -> None:
    with pytest.raises(TypeError):
        _core.count_tokens_many("o200k_base", "one string")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _core.count_tokens_many("o200k_base", ["fine", b"bytes"])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "count",
    [
        lambda text: _core.count_tokens_many("o200k_base", [text] * 40),
        lambda text: _core.count_tokens("o200k_base", text * 40),
    ],
    ids=["count_tokens_many", "count_tokens on a long text"],
)
def test_counting_a_batch_releases_the_gil(count) -> None:
    # With a long switch interval the worker keeps the GIL from `started.set()` until the call,
    # and from the call's return until it records `finished`. So this thread can observe
    # `finished` still False only if the call itself released the GIL.
    text = "The quick brown fox jumps over the lazy dog, twice. " * 20_000  # ~1 MB
    started = threading.Event()
    finished = False
    observed_inside: list[bool] = []

    def worker() -> None:
        nonlocal finished
        started.set()
        count(text)
        finished = True

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        thread = threading.Thread(target=worker)
        thread.start()
        started.wait()
        observed_inside.append(not finished)
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert observed_inside == [True]
