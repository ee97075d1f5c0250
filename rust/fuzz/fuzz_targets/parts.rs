//! `split_parts(text, min_chars, max_chars, overlap)` as the binding calls it: any UTF-8 text and
//! any counts (the binding turns negative ones into errors itself and passes the rest, huge ones
//! included). Checks the documented contract: spans in order, none empty or over `max_chars`,
//! their union every character of a text that is not all whitespace.
#![no_main]

use arbitrary::Arbitrary;
use fadeway_core::parts;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Count {
    Small(u8),
    Any(usize),
}

impl Count {
    fn get(&self) -> usize {
        match *self {
            Count::Small(n) => usize::from(n),
            Count::Any(n) => n,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    text: String,
    min_chars: Count,
    max_chars: Count,
    overlap: Count,
}

fuzz_target!(|input: Input| {
    let (min, max, overlap) = (input.min_chars.get(), input.max_chars.get(), input.overlap.get());
    let Ok(spans) = parts::split_parts(&input.text, min, max, overlap) else {
        assert!(max == 0 || overlap >= max || min > max, "valid limits refused");
        return;
    };
    let n = input.text.chars().count();
    if spans.is_empty() {
        // Python's `str.isspace`: Rust's whitespace and U+001C..U+001F.
        let blank = |c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c);
        assert!(input.text.chars().all(blank), "no parts for {n} chars");
        return;
    }
    let mut covered = 0;
    for &(start, end) in &spans {
        assert!(start < end && end <= n, "bad span {start}..{end} of {n}");
        assert!(end - start <= max, "span longer than max_chars");
        assert!(start <= covered, "a gap before {start}");
        covered = covered.max(end);
    }
    assert_eq!(spans[0].0, 0);
    assert_eq!(covered, n, "the spans do not reach the end");
});
