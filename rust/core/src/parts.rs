//! The parts of a message (spec: "Recall").
//!
//! "The message is split into its parts (sentences and lines, short ones joined, long ones
//! windowed), so a question tacked onto a long correction gets its own memories."
//!
//! [`split_parts`] works in three passes over the message's characters, each linear:
//!
//! 1. Segments. A segment ends after a line break or a sentence end, together with all the
//!    whitespace that follows, so the next segment starts at a visible character and no segment
//!    is whitespace only (leading whitespace stays with the first). A sentence ends after a run of
//!    `.` `?` `!` `…` and the closing quotes or brackets after it, when whitespace or the end of
//!    the text follows; a mark directly followed by anything else (3.5, v1.2.3, example.com/a?b,
//!    "e.g.,") never ends one, and a period after a known abbreviation (`Dr.`, `vs.`) or a dotted
//!    one (`e.g.`, `U.S.`) does not either. The CJK marks `。？！` end a sentence with no space
//!    after them, since CJK text has none.
//! 2. Joins. A segment whose visible length (first to last non-whitespace character) is under
//!    `min_chars` is joined with the following one while the join spans at most `max_chars`;
//!    one that cannot go forward (the last, or one before a long segment) joins the previous
//!    part when that fits. Joins are greedy left to right.
//! 3. Windows. A segment longer than `max_chars` is cut into windows of at most `max_chars`
//!    overlapping by at most `overlap`: each window ends at the last word edge (a whitespace on
//!    either side) in its second half, and the next starts at the first word edge within
//!    `overlap` before that end; with no edge the cut is hard (one 10k-character word).
//!
//! Whitespace is Python's `str.isspace` (Rust's `char::is_whitespace` plus U+001C..U+001F), so
//! this split and the Python layer's `str.strip` agree on what is blank.
//!
//! Design log. A forward-only rule (the spec's "joined with the following") left a short line
//! before a long paragraph on its own ("Sure." as a search query); joining backwards as a
//! fallback costs nothing. Rejected: treating a period before a lowercase word as no sentence
//! end (a common splitter rule), because chat is often written in lowercase and "fixed it. also
//! who owns checkout?" must split; and listing "etc." as an abbreviation, which would glue the
//! question onto "..., docs, etc." sentences. Splitting a wrong abbreviation is cheap: the piece
//! is short and joins its neighbour.

use crate::CoreError;

/// Abbreviations (lowercase, without their final period) after which a period and a space do
/// not end a sentence. Dotted ones (e.g., i.e., U.S.) are recognised by shape instead.
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "cf", "approx", "ca", "fig", "figs",
    "vol", "pp", "ch", "sec", "eq", "viz", "al",
];

/// The longest word looked at behind a period when testing for an abbreviation; longer words
/// are none, and the bound keeps the test O(1).
const ABBREVIATION_MAX_CHARS: usize = 12;

/// The character spans `[start, end)` of the parts of `text`, in order, as Unicode scalar
/// offsets (the indices of a Python `str`). Their union is every character of `text`: spans
/// that are not windows of one long segment touch end to start, so the whitespace between
/// sentences belongs to a span. No span is longer than `max_chars` or empty. The one exception to
/// coverage: a text that is empty or only whitespace has no parts. See the module documentation
/// for the rules. Time is linear in the text for fixed limits (`O(n * max / (max - overlap))`:
/// windows are that many).
///
/// Errors: `max_chars == 0`, `overlap >= max_chars`, or `min_chars > max_chars`.
pub fn split_parts(
    text: &str,
    min_chars: usize,
    max_chars: usize,
    overlap: usize,
) -> Result<Vec<(usize, usize)>, CoreError> {
    validate_parts(min_chars, max_chars, overlap)?;
    let chars: Vec<char> = text.chars().collect();
    if chars.iter().all(|&c| is_space(c)) {
        return Ok(Vec::new());
    }
    let joined = join_short(&segments(&chars), min_chars, max_chars);
    let mut spans = Vec::with_capacity(joined.len());
    for seg in joined {
        if seg.end - seg.start > max_chars {
            windows(&chars, seg.start, seg.end, max_chars, overlap, &mut spans);
        } else {
            spans.push((seg.start, seg.end));
        }
    }
    Ok(spans)
}

/// The checks of [`split_parts`]: `0 < max_chars`, `min_chars <= max_chars` and
/// `overlap < max_chars`.
fn validate_parts(min_chars: usize, max_chars: usize, overlap: usize) -> Result<(), CoreError> {
    if max_chars == 0 || overlap >= max_chars || min_chars > max_chars {
        return Err(CoreError::InvalidArgument(format!(
            "min_chars {min_chars}, max_chars {max_chars} and overlap {overlap} must satisfy \
             min_chars <= max_chars, 0 < max_chars and overlap < max_chars"
        )));
    }
    Ok(())
}

/// Python's `str.isspace`: Unicode White_Space plus the information separators U+001C..U+001F.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.splitlines` boundaries.
fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\u{0b}'
            | '\u{0c}'
            | '\u{1c}'
            | '\u{1d}'
            | '\u{1e}'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

fn is_cjk_stop(c: char) -> bool {
    matches!(c, '。' | '？' | '！')
}

fn is_terminator(c: char) -> bool {
    matches!(c, '.' | '?' | '!' | '…') || is_cjk_stop(c)
}

/// Closing quotes and brackets that stay with the sentence they close.
fn is_closer(c: char) -> bool {
    matches!(
        c,
        '"' | '\''
            | ')'
            | ']'
            | '}'
            | '”'
            | '’'
            | '»'
            | '›'
            | '」'
            | '』'
            | '）'
            | '】'
            | '〕'
            | '〉'
            | '》'
            | '］'
            | '｝'
    )
}

/// A stretch `[start, end)` with its visible characters at `[content_start, content_end)`.
#[derive(Clone, Copy, Debug)]
struct Segment {
    start: usize,
    content_start: usize,
    content_end: usize,
    end: usize,
}

impl Segment {
    fn visible(&self) -> usize {
        self.content_end - self.content_start
    }

    fn join(self, next: Segment) -> Segment {
        Segment { content_end: next.content_end, end: next.end, ..self }
    }
}

/// Cuts a text that is not all whitespace into segments that touch and cover it.
fn segments(chars: &[char]) -> Vec<Segment> {
    let n = chars.len();
    let skip_space = |mut i: usize| {
        while i < n && is_space(chars[i]) {
            i += 1;
        }
        i
    };
    let mut out = Vec::new();
    let (mut start, mut content_start, mut content_end) = (0, None, 0);
    let mut i = 0;
    while i < n {
        let c = chars[i];
        // Where the current segment would end: after this break or sentence, and its whitespace.
        let mut cut = None;
        if is_space(c) {
            if is_line_break(c) && content_start.is_some() {
                cut = Some(skip_space(i));
            }
            i += 1;
        } else if is_terminator(c) {
            content_start.get_or_insert(i);
            let run_start = i;
            while i < n && is_terminator(chars[i]) {
                i += 1;
            }
            let run_end = i;
            while i < n && is_closer(chars[i]) {
                i += 1;
            }
            content_end = i;
            if ends_sentence(chars, run_start, run_end, i) {
                cut = Some(skip_space(i));
            }
        } else {
            content_start.get_or_insert(i);
            i += 1;
            content_end = i;
        }
        if let (Some(q), Some(cs)) = (cut, content_start) {
            if q < n {
                out.push(Segment { start, content_start: cs, content_end, end: q });
                (start, content_start) = (q, None);
            }
            i = q;
        }
    }
    // The text is not all whitespace, so the last segment has content.
    let cs = content_start.unwrap_or(start);
    out.push(Segment { start, content_start: cs, content_end, end: n });
    out
}

/// Whether the terminators `chars[run_start..run_end]`, closers up to `after`, end a sentence.
fn ends_sentence(chars: &[char], run_start: usize, run_end: usize, after: usize) -> bool {
    if chars[run_start..run_end].iter().any(|&c| is_cjk_stop(c)) {
        return true;
    }
    if after < chars.len() && !is_space(chars[after]) {
        return false;
    }
    !(run_end - run_start == 1 && chars[run_start] == '.' && is_abbreviation(chars, run_start))
}

/// Whether the word just before the period at `dot` is an abbreviation.
fn is_abbreviation(chars: &[char], dot: usize) -> bool {
    let mut from = dot;
    while from > 0 && !is_space(chars[from - 1]) {
        if dot - from >= ABBREVIATION_MAX_CHARS {
            return false;
        }
        from -= 1;
    }
    // Opening quotes and brackets before the word are not part of it: "(e.g. 3.5)".
    let word: String = chars[from..dot]
        .iter()
        .skip_while(|c| !c.is_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if ABBREVIATIONS.contains(&word.as_str()) {
        return true;
    }
    let mut pieces = word.split('.');
    let dotted = pieces.clone().count() >= 2;
    dotted && pieces.all(|p| p.chars().count() == 1 && p.chars().all(char::is_alphabetic))
}

/// Joins segments under `min` visible characters to a neighbour (see the module documentation).
fn join_short(segs: &[Segment], min: usize, max: usize) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::with_capacity(segs.len());
    let mut pending: Option<Segment> = None;
    for &seg in segs {
        pending = Some(match pending {
            Some(cur) if cur.visible() < min && seg.end - cur.start <= max => cur.join(seg),
            Some(cur) => {
                push_or_join_back(&mut out, cur, min, max);
                seg
            }
            None => seg,
        });
    }
    if let Some(cur) = pending {
        push_or_join_back(&mut out, cur, min, max);
    }
    out
}

/// Pushes a finished part, joining it to the previous one when it is short and the join fits.
fn push_or_join_back(out: &mut Vec<Segment>, cur: Segment, min: usize, max: usize) {
    match out.last_mut() {
        Some(prev) if cur.visible() < min && cur.end - prev.start <= max => {
            *prev = prev.join(cur);
        }
        _ => out.push(cur),
    }
}

/// Cuts `[start, end)`, longer than `max`, into overlapping windows (module documentation).
fn windows(
    chars: &[char],
    mut start: usize,
    end: usize,
    max: usize,
    overlap: usize,
    out: &mut Vec<(usize, usize)>,
) {
    // Between two characters, at least one of them whitespace.
    let edge = |p: usize| is_space(chars[p - 1]) || is_space(chars[p]);
    while end - start > max {
        let hi = start + max;
        // A cut at or after `lo` leaves the next window's start past this one's (progress), and
        // keeps windows at least half full.
        let lo = start + (overlap + 1).max(max / 2);
        let cut = (lo..=hi).rev().find(|&p| edge(p)).unwrap_or(hi);
        out.push((start, cut));
        let from = cut - overlap;
        start = (from..=cut).find(|&p| edge(p)).unwrap_or(from);
    }
    out.push((start, end));
}
