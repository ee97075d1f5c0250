"""Stored text is data, never instructions (ARCHITECTURE: "Contracts": "Stored text that looks
like a block marker is neutralised so no block can be closed early"). `neutralise` is applied to
every piece of stored text a block shows:

- Line breaks (any Unicode line break, with the blanks around it) become one space, so a stored
  text cannot start a line: no forged "## " heading, "- [" fact or excerpt header, "Milestones:".
- Anything that reads as a recall block marker has its brackets replaced by parentheses:
  `(/assistant_recent_memories)`, visible, plainly not the marker, and idempotent. It is read
  loosely, on a folded copy (any case, NFKC so fullwidth and styled letters count, look-alike
  letters of other scripts mapped to Latin, invisible characters dropped): the words
  "assistant recent memories" (or the singular) with anything but letters between them, and
  next to them a bracket, angle bracket or typographic quotation mark of any kind, before
  (with or without a slash of any kind) or after. Parentheses are the safe form.
- An excerpt's text is the one stored text that starts a line of its own; when its first
  visible character (folded) is a dash, "#", "*", "+", ">", a bullet or a bracket, it is escaped
  with a backslash, markdown's own escape (`neutralise_line`).
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = ["fold", "neutralise", "neutralise_line", "reads_as_marker", "without_markers"]


# A line break (everything str.splitlines splits on) with the blanks around it.
_LINE_BREAK = re.compile(r"\s*[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]\s*")


# Every opening and closing bracket or quotation mark of Unicode's basic plane (categories Ps
# and Pi, Pe and Pf, as Python 3.11 reads them), and the angle brackets of a tag.
_OPENERS = "<" + (
    "([{\u00ab\u0f3a\u0f3c\u169b\u2018\u201a\u201b\u201c\u201e\u201f\u2039\u2045\u207d\u208d"
    "\u2308\u230a\u2329\u2768\u276a\u276c\u276e\u2770\u2772\u2774\u27c5\u27e6\u27e8\u27ea"
    "\u27ec\u27ee\u2983\u2985\u2987\u2989\u298b\u298d\u298f\u2991\u2993\u2995\u2997\u29d8"
    "\u29da\u29fc\u2e02\u2e04\u2e09\u2e0c\u2e1c\u2e20\u2e22\u2e24\u2e26\u2e28\u2e42\u2e55"
    "\u2e57\u2e59\u2e5b\u3008\u300a\u300c\u300e\u3010\u3014\u3016\u3018\u301a\u301d\ufd3f"
    "\ufe17\ufe35\ufe37\ufe39\ufe3b\ufe3d\ufe3f\ufe41\ufe43\ufe47\ufe59\ufe5b\ufe5d\uff08"
    "\uff3b\uff5b\uff5f\uff62"
)


_CLOSERS = ">" + (
    ")]}\u00bb\u0f3b\u0f3d\u169c\u2019\u201d\u203a\u2046\u207e\u208e\u2309\u230b\u232a\u2769"
    "\u276b\u276d\u276f\u2771\u2773\u2775\u27c6\u27e7\u27e9\u27eb\u27ed\u27ef\u2984\u2986"
    "\u2988\u298a\u298c\u298e\u2990\u2992\u2994\u2996\u2998\u29d9\u29db\u29fd\u2e03\u2e05"
    "\u2e0a\u2e0d\u2e1d\u2e21\u2e23\u2e25\u2e27\u2e29\u2e56\u2e58\u2e5a\u2e5c\u3009\u300b"
    "\u300d\u300f\u3011\u3015\u3017\u3019\u301b\u301e\u301f\ufd3e\ufe18\ufe36\ufe38\ufe3a"
    "\ufe3c\ufe3e\ufe40\ufe42\ufe44\ufe48\ufe5a\ufe5c\ufe5e\uff09\uff3d\uff5d\uff60\uff63"
)


# Slashes and their look-alikes (fullwidth ones fold to these).
_SLASHES = "/\\\u2215\u2044\u29f8\u29f9\u2571\u2572\u27cb\u27cd\u2cfa\u30fb\u3033"


# What may stand between the letters of the marker's words, between the words and its
# brackets (and slash), and still read as one marker: blanks, control characters (C0 and C1),
# joiners and dashes, as in "[-/assistant_recent_memories]". Unicode's other spaces too (`\s`,
# `str.isspace`); what shows nothing else is left out of the folded copy.
_GAPS = frozenset(
    " "
    + "".join(map(chr, [*range(0x20), *range(0x7F, 0xA0)]))
    + "_.-:+"
    + "".join(map(chr, range(0x2010, 0x2016)))
)


# Any number of them; possessive, so that a long run costs one pass.
_GAP = "[\\s" + "".join(map(re.escape, sorted(_GAPS))) + "]*+"


# Between the words: those, and up to three of anything else but letters and digits.
_SEPARATOR = _GAP + r"(?:[\W_]" + _GAP + r"){0,3}"


_OPEN_SAFE, _CLOSE_SAFE = "(", ")"
_WORDS = re.compile(
    _SEPARATOR.join(
        _GAP.join(re.escape(c) for c in word) for word in ("assistant", "recent", "memor")
    )
    + _GAP
    + r"(?:y|i"
    + _GAP
    + "e"
    + _GAP
    + "s)"
)


# What would make an excerpt's first character start a line of the block (a list item, a
# heading, a bracketed header): read on the folded copy, so a look-alike counts too. Dashes
# are told by their category; parentheses and quotation marks start ordinary sentences.
_LINE_STARTERS = frozenset(
    "#*+>\u2212\u2022\u2043\u25e6"
    + "".join(c for c in _OPENERS if c not in "({" and unicodedata.category(c) == "Ps")
)


# Look-alikes of the marker's Latin letters from other scripts (Cyrillic, Greek, Armenian),
# which NFKC leaves apart.
_HOMOGLYPHS = str.maketrans(
    {
        "\u0430": "a",
        "\u0251": "a",
        "\u03b1": "a",
        "\u0455": "s",
        "\u0456": "i",
        "\u0131": "i",
        "\u03b9": "i",
        "\u04cf": "i",
        "\u0435": "e",
        "\u03b5": "e",
        "\u04bd": "e",
        "\u0441": "c",
        "\u03f2": "c",
        "\u043e": "o",
        "\u03bf": "o",
        "\u0585": "o",
        "\u0440": "p",
        "\u0442": "t",
        "\u03c4": "t",
        "\u043c": "m",
        "\u043f": "n",
        "\u03b7": "n",
        "\u0433": "r",
        "\u0443": "y",
        "\u04af": "y",
        "\u03b3": "y",
    }
)


# Blank letters that render as a space or nothing (Hangul fillers, the Braille blank).
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def _shows_nothing(ch: str) -> bool:
    """A format character (tags, variation selectors, zero widths), a combining mark or a
    blank letter: nothing of its own to see."""
    return ch in _BLANK_LETTERS or unicodedata.category(ch) in ("Cf", "Mn", "Me")


def _folded(text: str) -> tuple[str, list[int] | None]:
    """A lower-cased NFKC copy of `text` and, unless the copy is aligned with it, the index in
    `text` of each character of the copy. Characters that show nothing of their own (format
    characters such as tags and variation selectors, combining marks, blank letters) are left
    out of the copy, so that they cannot hide a marker, and look-alike letters of other scripts
    read as the Latin ones."""
    if text.isascii():
        return text.lower(), None
    chars: list[str] = []
    index: list[int] = []
    category, normalize, blank = unicodedata.category, unicodedata.normalize, _BLANK_LETTERS
    for i, ch in enumerate(text):
        if ch.isascii():  # most of most texts: folded by lower(), shows something
            chars.append(ch.lower())
            index.append(i)
        elif ch not in blank and category(ch) not in ("Cf", "Mn", "Me"):
            folded = normalize("NFKC", ch).casefold()
            chars.append(folded)
            index.extend([i] * len(folded))
    # Look-alikes map one to one, so the index holds.
    return "".join(chars).translate(_HOMOGLYPHS), index


def fold(text: str) -> str:
    """`text` as the marker is read: lower-cased NFKC, look-alike letters of other scripts as
    the Latin ones, what shows nothing left out."""
    return _folded(text)[0]


def _marker_brackets(folded: str) -> list[tuple[int, str]]:
    """Where the brackets of each marker in a folded copy are, with the safe character each
    becomes: a bracket (or a slash and a bracket) before the marker's words, a bracket after.
    What `_GAPS` holds, and any space, may stand between them."""

    def between(ch: str) -> bool:
        return ch in _GAPS or ch.isspace()

    out = []
    for m in _WORDS.finditer(folded):
        i = m.start() - 1
        while i >= 0 and between(folded[i]):
            i -= 1
        if i >= 0 and folded[i] in _SLASHES:
            i -= 1
            while i >= 0 and between(folded[i]):
                i -= 1
        if i >= 0 and folded[i] in _OPENERS:
            out.append((i, _OPEN_SAFE))
        j = m.end()
        while j < len(folded) and between(folded[j]):
            j += 1
        if j < len(folded) and folded[j] in _CLOSERS:
            out.append((j, _CLOSE_SAFE))
    return out


def without_markers(text: str) -> str:
    """`text` with the brackets of every marker in it made parentheses: the words stay
    visible, but nothing reads as the block opening or closing."""
    if not text.isascii():
        # An excerpt cut to its window is ASCII but for its ellipses, which fold to three dots:
        # that copy is the folded one, and the character-by-character fold is needed only
        # when it holds the marker's words.
        dotted = text.replace("\u2026", "...")
        if dotted.isascii() and _WORDS.search(dotted.lower()) is None:
            return text
    folded, index = _folded(text)
    swaps = _marker_brackets(folded)
    if not swaps:
        return text
    out = list(text)
    for at, safe in swaps:
        out[at if index is None else index[at]] = safe
    return "".join(out)


# Cached: a block being fitted to its size is rendered again and again with the same texts.
@functools.lru_cache(maxsize=4096)
def neutralise(text: str) -> str:
    """`text` as one line that cannot open or close a block, nor start a line of one."""
    return without_markers(_LINE_BREAK.sub(" ", text).strip())


@functools.lru_cache(maxsize=4096)
def neutralise_line(text: str) -> str:
    """Neutralised text that starts a line of its own (an excerpt's text)."""
    text = neutralise(text)
    first = next((ch for ch in text if not _shows_nothing(ch) and not ch.isspace()), "")
    first = unicodedata.normalize("NFKC", first)[:1]
    return (
        "\\" + text
        if first and (first in _LINE_STARTERS or unicodedata.category(first) == "Pd")
        else text
    )


def reads_as_marker(text: str) -> bool:
    """Whether `text`, folded, holds the marker's words."""
    return _WORDS.search(_folded(text)[0]) is not None
