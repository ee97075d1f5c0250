"""The days a message names ("in April 2022", "on 8 May 2023", "May 3", "2023-05-08", "in
2023"), so that recall can lift the passages said on them (MECHANISM: "Recall": what is relevant
comes back; a question about a day is about what was said that day).

Dates written out are read; days named from the message's own time ("yesterday", "last week",
"3 days ago", "last Friday") when that time is given (decorate gives it). A day or month named
without a year takes the year of the nearest date the message names with one ("between August
11 and August 15 2023"), else it stands for that day or month in any year. "may" in lower case
is read as a month only beside a year ("it may rain" names no day), and a bare year only after a
word that sets a time ("in 2023", "since 2021"), not as any four-digit number.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from .. import _constants as C
from ..store import Transaction

__all__ = ["Span", "named_spans", "on_the_days", "said_on", "without_dates"]

_MONTHS = {
    name: i
    for i in range(1, 13)
    for name in (calendar.month_name[i].lower(), calendar.month_abbr[i].lower())
}
_MONTHS["sept"] = 9
# Longest first: "september" before "sept" before "sep".
_MONTH = rf"(?:{'|'.join(sorted(_MONTHS, key=len, reverse=True))})\.?"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?:1[89]|2\d)\d\d"
_SETS_A_TIME = (
    r"in|of|during|since|by|before|after|from|until|till|through|throughout|early|late|mid"
    r"|summer|winter|spring|fall|autumn|year"
)
_DATES = re.compile(
    rf"""
    \b(?P<iso_y>{_YEAR})-(?P<iso_m>0?[1-9]|1[0-2])-(?P<iso_d>[12]\d|3[01]|0?[1-9])\b
    | \b(?P<dm_d>{_DAY})\s+(?:of\s+)?(?P<dm_m>{_MONTH})(?:,?\s+(?P<dm_y>{_YEAR}))?\b
    | \b(?P<md_m>{_MONTH})\s+(?P<md_d>{_DAY})\b(?!\d)(?:,?\s*(?P<md_y>{_YEAR})\b)?
    | \b(?P<my_m>{_MONTH}),?\s+(?P<my_y>{_YEAR})\b
    | \b(?P<m>{_MONTH})(?![\w.])
    | \b(?:{_SETS_A_TIME})\s+(?P<y>{_YEAR})\b(?![-/]\d)
    """,
    re.IGNORECASE | re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Span:
    """Days a message names: from (month, day) `first` to `last`, both included, in `year`
    (None: that stretch of any year)."""

    year: int | None
    first: tuple[int, int]
    last: tuple[int, int]

    def stretches(self, years: Iterable[int], before: int, after: int) -> list[tuple[float, float]]:
        """These days, from `before` days before them to `after` days after, as (start, end)
        Unix seconds, end excluded: once, or once in each of `years` for a span of any year."""
        out = []
        for year in (self.year,) if self.year is not None else years:
            try:
                first = _day(year, *self.first) - timedelta(days=before)
                last = _day(year, *self.last) + timedelta(days=after + 1)
            except (OverflowError, ValueError):
                continue  # past the calendar's first or last day (year 1, year 9999)
            out.append((_seconds(first), _seconds(last)))
        return out


def on_the_days(spans: Sequence[Span], times: Sequence[float]) -> list[bool]:
    """For each time (Unix seconds), whether it falls on a day `spans` name (that very day).
    The spans' stretches are reckoned once, for the years the times fall in (a span of any
    year holds a time near a new year in the next or last)."""
    if not spans:
        return [False] * len(times)
    years = {year for at in times for year in range(_date(at).year - 1, _date(at).year + 2)}
    days = [stretch for span in spans for stretch in span.stretches(sorted(years), 0, 0)]
    return [any(start <= at < end for start, end in days) for at in times]


def said_on(tx: Transaction, spans: Sequence[Span], most: int) -> list[int]:
    """The passages said on the days `spans` name, then those said up to
    RECALL_DATE_BEFORE_DAYS before them or RECALL_DATE_AFTER_DAYS after, each the earliest
    first. A span of more than `most` passages (a year, a busy month) gives none: its days pick
    out too little to be worth a search of their own (its passages are still lifted among
    those found); days around it of more than `most` give only the span's own."""
    times = tx.passage_times() if spans else None
    if times is None:
        return []
    years = range(_date(times[0]).year, _date(times[1]).year + 1)
    near = (C.RECALL_DATE_BEFORE_DAYS, C.RECALL_DATE_AFTER_DAYS)
    on, around = dict[int, None](), dict[int, None]()
    for span in spans:
        days = _between(tx, span.stretches(years, 0, 0), most + 1)
        if len(days) <= most:
            on.update(dict.fromkeys(days))
            near_days = _between(tx, span.stretches(years, *near), most + 1)
            if len(near_days) <= most:
                around.update(dict.fromkeys(near_days))
    return list(on | around)


def _between(tx: Transaction, stretches: Sequence[tuple[float, float]], most: int) -> list[int]:
    """The passages said in `stretches`, at most `most`."""
    found: list[int] = []
    for start, end in stretches:
        found += tx.passages_between(start, end, most - len(found))
        if len(found) >= most:
            break
    return found


def named_spans(text: str, now: float | None = None) -> list[Span]:
    """The days `text` names, in the order it names them (see the module's docstring); "between
    A and B" or "from A to B" is one span from A to B. Given the message's time `now`, also
    the days it names from there ("yesterday", "last week", `_RELATIVE`). At most the first
    MOST_DATES dates of each kind are read: a message that names more is no question about a
    day (and each costs recall a read of the store)."""
    relative = [span for _, spans in _relative(text, now) for span in spans]
    return _absolute(text) + relative


def _absolute(text: str) -> list[Span]:
    """The days `text` names by their dates."""
    found: list[tuple[int | None, int | None, int | None]] = []  # (year, month, day)
    places: list[tuple[int, int]] = []
    for match, read in _dates(text):
        found.append(read)
        places.append(match.span())
    years = [year for year, _, _ in found]
    spans = []
    for i, (year, month, day) in enumerate(found):
        if year is None:
            year = next((y for y in years[i + 1 :] if y is not None), None)
            year = year or next((y for y in reversed(years[:i]) if y is not None), None)
        if month is None:  # a year
            spans.append(Span(year, (1, 1), (12, 31)))
        elif day is None:
            spans.append(Span(year, (month, 1), (month, 31)))
        else:
            spans.append(Span(year, (month, day), (month, day)))
    return _joined(text, spans, places)


def without_dates(text: str, now: float | None = None) -> str:
    """`text` with the dates it names left out (those from `now` too, given it): the words to
    rank a day's passages by (its date's own numbers would match any passage that says "3" or
    "2026", and "yesterday" any that says yesterday)."""
    places = [m.span() for m, _ in _dates(text)] + [m.span() for m, _ in _relative(text, now)]
    kept, at = [], 0
    for start, end in sorted(places):
        kept.append(text[at:start])
        at = max(at, end)
    return " ".join([*kept, text[at:]])


_WEEKDAYS = tuple(name.lower() for name in calendar.day_name)
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_RELATIVE = re.compile(
    rf"""
    \b(?P<today>today|tonight|this\s+(?:morning|afternoon|evening))\b
    | \b(?P<yesterday>yesterday|last\s+night)\b
    | \b(?P<count>\d{{1,3}}|{"|".join(_COUNTS)})\s+(?P<unit>day|week|month)s?\s+ago\b
    | \b(?P<which>last|this)\s+(?P<what>week|month|year|{"|".join(_WEEKDAYS)})\b
    | \bon\s+(?P<weekday>{"|".join(_WEEKDAYS)})\b
    """,
    re.IGNORECASE | re.VERBOSE,
)


def _relative(text: str, now: float | None) -> list[tuple[re.Match[str], list[Span]]]:
    """Each day `text` names from the time `now` (UTC days), as written and as spans: today;
    yesterday; N days, weeks (that day and three either side) or months ago; last or this
    week (from Monday; last week runs up to yesterday), month or year; last Monday (the one
    before today); on Monday (the last one, today included). None without `now`."""
    if now is None:
        return []
    today = _date(now)
    out = []
    for match in _RELATIVE.finditer(text):
        try:
            first, last = _days_from(today, match.groupdict())
        except (OverflowError, ValueError):
            continue  # before the calendar's first day (a time in year 1)
        out.append((match, _spans_between(first, min(last, today))))
        if len(out) == MOST_DATES:
            break
    return out


def _days_from(today: date, g: dict[str, str | None]) -> tuple[date, date]:
    """The first and last day one match of `_RELATIVE` (its groups `g`) names from `today`."""
    if g["today"]:
        return today, today
    if g["yesterday"]:
        return today - timedelta(days=1), today - timedelta(days=1)
    if g["count"] and g["unit"]:
        n = _COUNTS.get(g["count"].lower()) or int(g["count"])
        unit = g["unit"].lower()
        if unit == "day":
            return today - timedelta(days=n), today - timedelta(days=n)
        if unit == "week":
            return today - timedelta(days=7 * n + 3), today - timedelta(days=7 * n - 3)
        return _month_span(today, n)
    if g["which"] and g["what"]:
        return _this_or_last(today, g["which"].lower(), g["what"].lower())
    day = _weekday(today, (g["weekday"] or "").lower(), before_today=False)
    return day, day


def _this_or_last(today: date, which: str, what: str) -> tuple[date, date]:
    """The days "this week", "last month", "last Friday" ... name, seen from `today`."""
    if what in _WEEKDAYS:
        day = _weekday(today, what, before_today=which == "last")
        return day, day
    if what == "week":
        monday = today - timedelta(days=today.weekday())
        if which == "this":
            return monday, today
        return monday - timedelta(days=7), today - timedelta(days=1)
    if what == "month":
        return _month_span(today, 0 if which == "this" else 1)
    year = today.year - (0 if which == "this" else 1)
    return date(year, 1, 1), date(year, 12, 31)


def _weekday(today: date, name: str, *, before_today: bool) -> date:
    """The last day named `name` ("monday") up to today, or before today."""
    back = (today.weekday() - _WEEKDAYS.index(name)) % 7
    return today - timedelta(days=back or (7 if before_today else 0))


def _month_span(today: date, back: int) -> tuple[date, date]:
    """The first and last day of the calendar month `back` months before today's."""
    months = today.year * 12 + today.month - 1 - back
    year, month = divmod(months, 12)
    return date(year, month + 1, 1), _day(year, month + 1, 31)


def _spans_between(first: date, last: date) -> list[Span]:
    """The days from `first` to `last` as spans, one for each year they reach."""
    return [
        Span(
            year,
            (first.month, first.day) if year == first.year else (1, 1),
            (last.month, last.day) if year == last.year else (12, 31),
        )
        for year in range(first.year, last.year + 1)
    ]


def _dates(text: str) -> Iterator[tuple[re.Match[str], tuple[int | None, int | None, int | None]]]:
    """Each date `text` names, as it is written and as (year, month, day): the first
    MOST_DATES."""
    read_so_far = 0
    for match in _DATES.finditer(text):
        read = _read(match)
        if read is not None:
            yield match, read
            read_so_far += 1
            if read_so_far == MOST_DATES:
                return


#: The most dates read of one message.
MOST_DATES = 8


_FROM = re.compile(r"\b(?:between|from)\s+$", re.IGNORECASE)
_FROM_REACH = 40  # characters before a date where its "between" may be
_TO = re.compile(r"\s*(?:and|to|until|till|through|-|\u2013)\s*", re.IGNORECASE)


def _joined(text: str, spans: list[Span], places: list[tuple[int, int]]) -> list[Span]:
    """`spans` with each "between A and B" (or "from A to B") made one span, A's start to B's
    end, when both are in one year (or in any) and A comes first."""
    out: list[Span] = []
    i = 0
    while i < len(spans):
        a = spans[i]
        if i + 1 < len(spans):
            b, (_, a_end), (b_start, _) = spans[i + 1], places[i], places[i + 1]
            if (
                _FROM.search(text, max(0, places[i][0] - _FROM_REACH), places[i][0])
                and _TO.fullmatch(text, a_end, b_start)
                and a.year == b.year
                and a.first <= b.last
            ):
                out.append(Span(a.year, a.first, b.last))
                i += 2
                continue
        out.append(a)
        i += 1
    return out


def _read(match: re.Match[str]) -> tuple[int | None, int | None, int | None] | None:
    """(year, month, day) of one date, None where it names none; None when it is no date
    ("may" as a verb, "February 30")."""
    g = match.groupdict()
    year: int | None
    day: int | None
    if g["iso_y"]:
        year, month, day = int(g["iso_y"]), int(g["iso_m"]), int(g["iso_d"])
    elif g["dm_d"]:
        if _verb(g["dm_m"]) and not g["dm_y"]:
            return None  # "12 may come"
        year, month, day = _int(g["dm_y"]), _month(g["dm_m"]), _number(g["dm_d"])
    elif g["md_m"]:
        if _verb(g["md_m"]) and not g["md_y"]:
            return None  # "you may 2 ..."
        year, month, day = _int(g["md_y"]), _month(g["md_m"]), _number(g["md_d"])
    elif g["my_m"]:
        year, month, day = int(g["my_y"]), _month(g["my_m"]), None
    elif g["m"]:
        name = g["m"]
        if _verb(name):
            return None  # "it may rain"
        if len(name.rstrip(".")) == 3 and not name[0].isupper():
            return None  # "mar", "dec", ... lower-case and alone: likely a word
        year, month, day = None, _month(name), None
    else:
        return int(g["y"]), None, None
    if day is not None and day > calendar.monthrange(year or 2000, month)[1]:
        return None  # February 30, or the 29th of a year that has none
    return year, month, day


def _verb(name: str) -> bool:
    """Whether a month's name may be the verb "may": written so, in lower case."""
    return name.rstrip(".") == "may"


def _day(year: int, month: int, day: int) -> date:
    """The date, a day past a short month's end read as its last day (a month's span ends on
    the 31st)."""
    return date(year, month, min(day, calendar.monthrange(year, month)[1]))


def _date(at: float) -> date:
    return datetime.fromtimestamp(at, UTC).date()


def _seconds(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def _month(name: str) -> int:
    return _MONTHS[name.rstrip(".").lower()]


def _number(day: str) -> int:
    return int(re.sub(r"\D", "", day))


def _int(text: str | None) -> int | None:
    return int(text) if text else None
