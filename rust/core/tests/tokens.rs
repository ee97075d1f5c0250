//! Token counts: exact reference counts, and properties that tie the fast counting path to an
//! independent one.
//!
//! The reference counts come from tiktoken's `encode_ordinary` with an `Encoding` built from the
//! ranks this crate embeds (`tests/reference.py::tiktoken_encoding`); the Python tests check the
//! same strings. `count` runs fadeway's own pre-tokeniser and merge loop, `encode` runs
//! `bpe-openai`'s regex and backtracking encoder, so `count == encode.len()` is a differential test.

use fadeway_core::tokens::{count, count_many, encode, Encoding};
use fadeway_core::CoreError;
use proptest::prelude::*;

const ENCODINGS: [Encoding; 2] = [Encoding::O200kBase, Encoding::Cl100kBase];

/// (text, o200k_base count, cl100k_base count), from tiktoken over the same ranks.
const REFERENCE_COUNTS: &[(&str, usize, usize)] = &[
    ("", 0, 0),
    ("hello world", 2, 2),
    ("Hello, world! How's it going?", 9, 9),
    ("I'm sure they'll say it's fine; we've DONE IT'S WORK, haven't we?", 16, 21),
    ("Zürich café naïve résumé", 7, 9),
    ("Привет, мир! Как дела?", 8, 12),
    ("日本語のテキストを数える。", 10, 13),
    ("👍🏽 great work 🚀🚀", 9, 14),
    ("👨\u{200d}👩\u{200d}👧\u{200d}👦 family", 12, 19),
    ("def square(x: int) -> int:\n    return x ** 2  # the square\n", 20, 20),
    ("for (let i = 0; i < n; i++) { total += a[i]; }", 21, 21),
    ("\n\n\n\n", 1, 1),
    ("\t\t  \n  x", 3, 3),
    ("a \n\n  \n b  ", 5, 5),
    ("1234567890 3.14159 1,000,000", 15, 15),
    ("HTTPServer getHTTPResponseCode XMLHttpRequest", 8, 7),
    ("supercalifragilisticexpialidocious", 10, 11),
    ("https://example.com/a/b?c=d&e=f", 11, 11),
    ("it'ſ ſtill", 7, 8),
    ("a\u{a0}b\u{3000}c x\u{2028}y", 8, 9),
    ("e\u{301} a\u{308} n\u{303}", 6, 8),
    ("don\u{2019}t stop", 3, 3),
    // Contractions followed by letters, where splitting them off (or not) changes the count.
    (CONTRACTIONS, 34, 41),
];

const CONTRACTIONS: &str = "'seach 'teach 'mafter 'dafter 'reamong 'vedark 'lldark I'dagain \
    we'reamong they'vecall you'lldark it'seach don'tearly I'mafter";

/// Long runs, built rather than spelled out: (fragment, repeats, o200k_base, cl100k_base).
const REFERENCE_RUNS: &[(&str, usize, usize, usize)] =
    &[(" ", 100, 2, 2), ("=", 80, 1, 1), ("a", 100, 13, 13), ("ab", 40, 20, 40)];

#[test]
fn counts_equal_tiktoken_on_known_strings() {
    for &(text, o200k, cl100k) in REFERENCE_COUNTS {
        assert_eq!(count(Encoding::O200kBase, text), o200k, "o200k_base, {text:?}");
        assert_eq!(count(Encoding::Cl100kBase, text), cl100k, "cl100k_base, {text:?}");
    }
    let shouted = CONTRACTIONS.to_uppercase();
    assert_eq!(count(Encoding::O200kBase, &shouted), 53);
    assert_eq!(count(Encoding::Cl100kBase, &shouted), 50);
    let spaced = format!("a{}b", " ".repeat(50));
    assert_eq!(count(Encoding::O200kBase, &spaced), 3);
    assert_eq!(count(Encoding::Cl100kBase, &spaced), 3);
}

#[test]
fn counts_equal_tiktoken_on_long_runs() {
    for &(fragment, repeats, o200k, cl100k) in REFERENCE_RUNS {
        let text = fragment.repeat(repeats);
        assert_eq!(
            count(Encoding::O200kBase, &text),
            o200k,
            "o200k_base, {fragment:?} x {repeats}"
        );
        assert_eq!(
            count(Encoding::Cl100kBase, &text),
            cl100k,
            "cl100k_base, {fragment:?} x {repeats}"
        );
    }
}

#[test]
fn count_many_is_count_of_each_text_in_order() {
    let texts: Vec<&str> = REFERENCE_COUNTS.iter().map(|&(text, _, _)| text).collect();
    for encoding in ENCODINGS {
        let expected: Vec<usize> = texts.iter().map(|t| count(encoding, t)).collect();
        assert_eq!(count_many(encoding, &texts), expected);
    }
    assert!(count_many::<&str>(Encoding::O200kBase, &[]).is_empty());
}

#[test]
fn names_round_trip_and_unknown_names_list_the_allowed_ones() {
    for encoding in ENCODINGS {
        assert_eq!(Encoding::from_name(encoding.name()), Ok(encoding));
    }
    let Err(err) = Encoding::from_name("p50k_base") else { panic!("p50k_base is not supported") };
    assert!(matches!(&err, CoreError::UnknownName { given, .. } if given == "p50k_base"));
    let message = err.to_string();
    assert!(message.contains("o200k_base") && message.contains("cl100k_base"), "{message}");
}

#[test]
fn memoised_pieces_do_not_leak_between_encodings() {
    // "abababab…" and the tail words count differently under the two encodings; counting them
    // alternately on one thread must still give each encoding its own answer.
    let text = "zorquelintrabod abababababab Vosmerchatonix";
    let expected: Vec<usize> = ENCODINGS.iter().map(|&e| encode(e, text).len()).collect();
    for _ in 0..3 {
        for (encoding, want) in ENCODINGS.iter().zip(&expected) {
            assert_eq!(count(*encoding, text), *want, "{encoding:?}");
        }
    }
}

/// Characters that steer the pre-tokeniser: every class boundary in the regexes (letters of
/// each case, digits, apostrophes and contractions, spaces, newlines, other whitespace,
/// punctuation, '/'), plus non-ASCII that must be handed to the regex: Unicode letters, marks,
/// digits and spaces, the long s that folds to 's', title case, emoji, and controls.
const TRICKY: &[&str] = &[
    " ", " ", "  ", "\n", "\r", "\r\n", "\t", "\x0b", "\x0c", "a", "z", "e", "s", "t", "l", "v",
    "r", "d", "m", "A", "Z", "S", "L", "E", "0", "7", "42", "'", "'s", "'LL", "'re", "'Ve", "!",
    ".", ",", "/", "-", "_", "=", "(", ")", "\"", "#", "\x00", "\x1c", "\x7f", "é", "ß", "Ж", "ж",
    "ǅ", "ʰ", "ſ", "K", "\u{301}", "٣", "\u{a0}", "\u{3000}", "\u{2028}", "\u{85}", "😀", "👍🏽",
    "日本", "—", "’",
];

fn tricky_text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TRICKY), 0..48).prop_map(|parts| parts.concat())
}

/// Long runs (past the stack merge loop's limit) of one tricky fragment, between others.
fn runs() -> impl Strategy<Value = String> {
    (tricky_text(), prop::sample::select(TRICKY), 1usize..200, tricky_text())
        .prop_map(|(before, fragment, repeats, after)| before + &fragment.repeat(repeats) + &after)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn count_is_encode_len_on_any_unicode(text in any::<String>()) {
        for encoding in ENCODINGS {
            prop_assert_eq!(count(encoding, &text), encode(encoding, &text).len());
        }
    }

    #[test]
    fn count_is_encode_len_on_tricky_text(text in tricky_text()) {
        for encoding in ENCODINGS {
            prop_assert_eq!(count(encoding, &text), encode(encoding, &text).len());
        }
    }

    #[test]
    fn count_is_encode_len_on_long_runs(text in runs()) {
        for encoding in ENCODINGS {
            prop_assert_eq!(count(encoding, &text), encode(encoding, &text).len());
        }
    }

    #[test]
    fn counts_add_up_over_a_split_at_a_newline(a in tricky_text(), b in tricky_text()) {
        // A piece never spans "x\n" followed by a letter-initial text, so counts add.
        let (a, b) = (format!("{a}x\n"), format!("q{b}"));
        for encoding in ENCODINGS {
            let whole = count(encoding, &(a.clone() + &b));
            prop_assert_eq!(whole, count(encoding, &a) + count(encoding, &b));
        }
    }
}
