"""The days a message names (`fadeway.recall.dates`), as recall reads them."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fadeway.recall.dates import Span, named_spans, on_the_days


def _day(year, month, day):
    return Span(year, (month, day), (month, day))


def _month(year, month):
    return Span(year, (month, 1), (month, 31))


@pytest.mark.parametrize(
    ("text", "spans"),
    [
        ("What did Gina find on 1 February, 2023?", [_day(2023, 2, 1)]),
        ("What did Tim finish reading on 8th December, 2023?", [_day(2023, 12, 8)]),
        ("Where was the photo shared on December 1,2023 taken?", [_day(2023, 12, 1)]),
        ("What did Joanna watch on October 13, 2023?", [_day(2023, 10, 13)]),
        ("notes from 2023-05-08", [_day(2023, 5, 8)]),
        ("What happened in April 2022?", [_month(2022, 4)]),
        ("Sept. 2021 and Jan 2020", [_month(2021, 9), _month(2020, 1)]),
        ("When did Melanie go camping in June?", [_month(None, 6)]),
        ("What did we plan for May 3?", [_day(None, 5, 3)]),
        ("How often did she swim in 2023?", [Span(2023, (1, 1), (12, 31))]),
        ("Where was John between August 11 and August 15 2023?", [Span(2023, (8, 11), (8, 15))]),
        ("from May 3 to May 9", [Span(None, (5, 3), (5, 9))]),
        # Two days, not a stretch: the year of the one that has it goes to the other.
        ("on May 3 and May 9, 2023", [_day(2023, 5, 3), _day(2023, 5, 9)]),
        # Not dates: "may" the verb, a bare number, a day no month has, a lone lower-case
        # abbreviation.
        ("It may rain; you may go.", []),
        ("I have 2000 dollars and 12 may come", []),
        ("on February 30, 2023", []),
        ("on February 29, 2023", []),
        ("on February 29, 2024", [_day(2024, 2, 29)]),
        ("a dec of cards, mar the wall", []),
    ],
)
def test_the_days_a_message_names(text, spans):
    assert named_spans(text) == spans


_SPANS = st.builds(
    lambda year, month, day, length: Span(
        year, (month, day), ((month, min(day + length, 31)) if length >= 0 else (month, day))
    ),
    st.one_of(st.none(), st.integers(2019, 2027)),
    st.integers(1, 12),
    st.integers(1, 31),
    st.integers(0, 40),
)


@given(
    _SPANS,
    st.floats(1.55e9, 1.8e9, allow_nan=False),
    st.integers(0, 3),
    st.integers(0, 10),
)
def test_a_span_holds_the_days_it_names_read_as_dates(span, at, before, after):
    """A span's stretches (Unix seconds, as the store is searched) hold a time as the calendar
    says: the time's UTC day lies from `before` days before the span's first day to `after`
    days after its last, in the span's year or, for a span of any year, in the time's year or a
    year either side of it. `on_the_days` (no days around) says the same."""
    day = datetime.fromtimestamp(at, UTC).date()
    years = [span.year] if span.year is not None else [day.year - 1, day.year, day.year + 1]

    def want(before, after):
        return any(
            _date(year, *span.first) - timedelta(days=before)
            <= day
            <= _date(year, *span.last) + timedelta(days=after)
            for year in years
        )

    assert _holds(span, at, before, after) == want(before, after)
    assert on_the_days([span], [at]) == [want(0, 0)]


def _holds(span, at, before, after):
    """Whether one of `span`'s stretches, in the time's year or a year either side, holds `at`."""
    year = datetime.fromtimestamp(at, UTC).year
    return any(s <= at < e for s, e in span.stretches(range(year - 1, year + 2), before, after))


def _date(year, month, day):
    """The date, a day past the month's end read as its last (a month's span ends on 31)."""
    return date(year, month, min(day, calendar.monthrange(year, month)[1]))


def test_a_day_holds_its_own_times_and_the_days_after_it_allows():
    day = _day(2023, 5, 8)
    start = datetime(2023, 5, 8, tzinfo=UTC)
    assert _holds(day, start.timestamp(), 0, 0)
    assert _holds(day, (start + timedelta(hours=23, minutes=59)).timestamp(), 0, 0)
    assert not _holds(day, (start + timedelta(days=1)).timestamp(), 0, 0)
    assert _holds(day, (start + timedelta(days=3, hours=12)).timestamp(), 0, 3)
    assert not _holds(day, (start + timedelta(days=4)).timestamp(), 0, 3)
    assert _holds(day, (start - timedelta(hours=1)).timestamp(), 1, 0)
    # A day of any year holds it in every year, and on the first of a year the last's too.
    assert _holds(_day(None, 5, 8), datetime(2031, 5, 8, 12, tzinfo=UTC).timestamp(), 0, 0)
    new_year = datetime(2031, 1, 1, 0, 30, tzinfo=UTC).timestamp()
    assert on_the_days([_day(None, 12, 31), _day(None, 1, 1)], [new_year, new_year - 3600]) == [
        True,
        True,
    ]


def test_without_dates_keeps_every_other_word():
    from fadeway.recall.dates import without_dates

    asked = "What did I plant on January 3, 2026 and in May? It may rain."
    assert without_dates(asked).split() == "What did I plant on and in ? It may rain.".split()


def test_a_message_of_many_dates_is_read_for_its_first_few():
    """A hostile message naming thousands of dates costs no more than reading it: only the
    first MOST_DATES are kept (each costs recall a read of the store), and "between" is looked
    for just before a date, not over all the text before it."""
    from fadeway.recall.dates import MOST_DATES, without_dates

    text = "between Jan 1 and Jan 2 " * 20_000
    spans = named_spans(text)
    assert spans == [Span(None, (1, 1), (1, 2))] * (MOST_DATES // 2)
    assert without_dates(text).count("Jan") == 2 * 20_000 - MOST_DATES


# A Friday, 15:00 UTC.
_FRIDAY = datetime(2026, 1, 2, 15, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "spans"),
    [
        ("What did we decide yesterday?", [_day(2026, 1, 1)]),
        ("and today?", [_day(2026, 1, 2)]),
        ("three days ago", [_day(2025, 12, 30)]),
        ("10 days ago", [_day(2025, 12, 23)]),
        ("a week ago", [Span(2025, (12, 23), (12, 29))]),
        # From last week's Monday to yesterday, across the new year: a span for each year.
        ("last week", [Span(2025, (12, 22), (12, 31)), _day(2026, 1, 1)]),
        ("this week", [Span(2025, (12, 29), (12, 31)), Span(2026, (1, 1), (1, 2))]),
        ("last month", [_month(2025, 12)]),
        ("2 months ago", [Span(2025, (11, 1), (11, 30))]),
        ("last Friday", [_day(2025, 12, 26)]),
        ("on Monday", [_day(2025, 12, 29)]),
        ("on Friday", [_day(2026, 1, 2)]),
        ("last year", [Span(2025, (1, 1), (12, 31))]),
        # Written-out dates first, then the days named from now.
        ("yesterday, or on 8 May 2023", [_day(2023, 5, 8), _day(2026, 1, 1)]),
    ],
)
def test_the_days_a_message_names_from_its_time(text, spans):
    assert named_spans(text, _FRIDAY) == spans
    assert named_spans(text) == [s for s in spans if s == _day(2023, 5, 8)]  # no time, none


def test_without_dates_leaves_out_the_days_named_from_now_only_given_now():
    from fadeway.recall.dates import without_dates

    asked = "What did we plant yesterday and last week?"
    assert without_dates(asked, _FRIDAY).split() == "What did we plant and ?".split()
    assert without_dates(asked) == asked


def test_days_at_the_calendar_s_ends_are_left_out_not_raised():
    """A memory may be told any time from year 1 to 9999: a day named past the calendar's
    first or last day names nothing, and recall goes on."""
    first = datetime(1, 1, 2, 12, tzinfo=UTC).timestamp()
    assert named_spans("three days ago", first) == []
    assert named_spans("yesterday", first) == [_day(1, 1, 1)]
    assert named_spans("2 months ago and last year", first) == []
    assert Span(1, (1, 1), (1, 1)).stretches([1], 1, 3) == []
    assert Span(9999, (12, 31), (12, 31)).stretches([9999], 1, 3) == []
    assert Span(None, (1, 1), (1, 1)).stretches([1, 2], 1, 0) == Span(2, (1, 1), (1, 1)).stretches(
        [], 1, 0
    )
