"""The parts of a message through `fadeway.parts.message_parts` (spec "Recall").

The spec's case (a question tacked onto a long correction gets its own part) and the sentence
rules are checked on examples; hypothesis checks the promises on any text: every visible
character lies in a part, no part is longer than `max_chars`, parts are in order and each is its
span's text stripped.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fadeway import _constants as C
from fadeway import _core
from fadeway.recall.parts import Part, message_parts

CORRECTION = (
    "No, that is wrong: the checkout service moved to the payments team in March, not to "
    "platform. The old runbook still names platform and should be fixed before the next release. "
    "Billing alerts now page the payments on-call rotation instead of the platform one, and the "
    "dashboards were moved with them. "
)


def texts(text: str, **limits: int) -> list[str]:
    return [p.text for p in message_parts(text, **limits)]


def test_a_question_after_a_long_correction_gets_its_own_part() -> None:
    parts = message_parts(CORRECTION + "Also, who owns checkout?")
    assert parts[-1].text == "Also, who owns checkout?"
    assert len(parts) == 4
    assert all(len(p.text) < len(CORRECTION) for p in parts)


def test_abbreviations_decimals_versions_and_urls_do_not_end_sentences() -> None:
    text = "e.g. 3.5 is fine. Next?"
    assert texts(text, min_chars=0) == ["e.g. 3.5 is fine.", "Next?"]
    # With the default floor, "Next?" is short and joins the sentence before it.
    assert texts(text) == [text]
    text = 'Ask Dr. Smith about v1.2.3 on example.com/a?b=1 today. He said "done." Then go!'
    assert texts(text, min_chars=0) == [
        "Ask Dr. Smith about v1.2.3 on example.com/a?b=1 today.",
        'He said "done."',
        "Then go!",
    ]


def test_lines_and_cjk() -> None:
    assert texts("- ship the pricing page\n- fix the refund line\n\nthanks", min_chars=0) == [
        "- ship the pricing page",
        "- fix the refund line",
        "thanks",
    ]
    assert texts("今天天气很好。我们去公园吧！你来吗？", min_chars=0) == [
        "今天天气很好。",
        "我们去公园吧！",
        "你来吗？",
    ]


def test_a_long_word_is_windowed() -> None:
    parts = message_parts("x" * 10_000)
    assert [(p.start, p.end) for p in parts[:2]] == [(0, 400), (320, 720)]
    assert parts[-1].end == 10_000
    assert all(len(p.text) <= C.PART_MAX_CHARS for p in parts)


def test_blank_messages_have_no_parts() -> None:
    assert message_parts("") == []
    assert message_parts(" \n\t\u3000\x1c") == []


def test_parts_are_frozen_values() -> None:
    part = message_parts("Who owns checkout?")[0]
    assert part == Part("Who owns checkout?", 0, 18)
    with pytest.raises(AttributeError):
        part.text = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("min_chars", "max_chars", "overlap"),
    [(0, 0, 0), (1, 10, 10), (11, 10, 0), (-1, 10, 0), (0, 10, -1)],
)
def test_invalid_limits(min_chars: int, max_chars: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="must"):
        message_parts("x", min_chars=min_chars, max_chars=max_chars, overlap=overlap)


BOUNDARY_CHARS = st.sampled_from(list("ab .?!…。？」\"'()\n\r\t\x1c\u3000e.g3"))
MESSAGE_CHARS = BOUNDARY_CHARS | st.characters()
# The Rust split takes text that UTF-8 can hold; `message_parts` replaces lone surrogates first.
RAW_CHARS = BOUNDARY_CHARS | st.characters(exclude_categories=("Cs",))


@st.composite
def limits(draw: st.DrawFn) -> dict[str, int]:
    max_chars = draw(st.integers(1, 60))
    return {
        "min_chars": draw(st.integers(0, max_chars)),
        "max_chars": max_chars,
        "overlap": draw(st.integers(0, max_chars - 1)),
    }


@settings(max_examples=300, deadline=None)
@given(st.text(MESSAGE_CHARS, max_size=300), limits())
def test_parts_cover_the_message_in_order(text: str, lim: dict[str, int]) -> None:
    parts = message_parts(text, **lim)
    covered = [False] * len(text)
    for p in parts:
        assert 0 <= p.start < p.end <= len(text)
        assert p.end - p.start <= lim["max_chars"]
        assert p.text == text[p.start : p.end].strip() != ""
        covered[p.start : p.end] = [True] * (p.end - p.start)
    assert all(covered[i] for i, c in enumerate(text) if not c.isspace())
    assert [p.start for p in parts] == sorted(p.start for p in parts)
    assert message_parts(text, **lim) == parts


@settings(max_examples=200, deadline=None)
@given(st.text(RAW_CHARS, max_size=300), limits())
def test_raw_spans_touch_or_overlap_and_cover_everything(text: str, lim: dict[str, int]) -> None:
    spans = _core.split_parts(text, lim["min_chars"], lim["max_chars"], lim["overlap"])
    if text.strip() == "":
        assert spans == []
        return
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (s0, e0), (s1, e1) in itertools.pairwise(spans):
        assert s0 < s1 <= e0 <= e1


def test_a_lone_surrogate_keeps_its_place():
    text = "First sentence here is long enough. \ud800 Second one?"
    parts = message_parts(text, min_chars=1)
    assert [p.text for p in parts] == [text[p.start : p.end].strip() for p in parts]
    assert "".join(text[p.start : p.end] for p in parts) == text
