//! The parts of a message: table tests of the spec's cases (a question after a long correction,
//! abbreviations and decimals, lines, CJK, windows) and property tests of the promises (the spans
//! cover the text in order, none longer than max_chars, deterministic).

use fadeway_core::parts::split_parts;
use fadeway_core::CoreError;
use proptest::prelude::*;

/// Python's `str.isspace`, as the split reads whitespace.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The parts' texts, trimmed.
fn parts(text: &str, min: usize, max: usize, overlap: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let spans = split_parts(text, min, max, overlap).expect("valid limits");
    spans.iter().map(|&(s, e)| chars[s..e].iter().collect::<String>().trim().into()).collect()
}

#[test]
fn a_question_after_a_long_correction_gets_its_own_part() {
    let correction = "No, that is wrong: the checkout service moved to the payments team \
        in March, not to platform. The old runbook still names platform and should be fixed. \
        Billing alerts now page the payments on-call rotation instead of the platform one. ";
    let got = parts(&format!("{correction}Who owns the checkout service now?"), 16, 400, 80);
    assert_eq!(got.last().map(String::as_str), Some("Who owns the checkout service now?"));
    assert!(got.len() >= 3, "{got:?}");
    // A short question joins only the last sentence, not the whole correction.
    let got = parts(&format!("{correction}Also, who owns checkout?"), 40, 400, 80);
    let last = got.last().expect("parts");
    assert!(last.starts_with("Billing alerts") && last.ends_with("who owns checkout?"));
}

#[test]
fn abbreviations_decimals_and_urls() {
    let text = "Use e.g. 3.5 or v1.2.3 from example.com/a?b=1 for now. Next?";
    assert_eq!(
        parts(text, 0, 400, 0),
        ["Use e.g. 3.5 or v1.2.3 from example.com/a?b=1 for now.", "Next?"]
    );
    assert_eq!(
        parts("Ask Dr. Smith. He said \"done.\" Then (fine!) ok", 0, 400, 0),
        ["Ask Dr. Smith.", "He said \"done.\"", "Then (fine!)", "ok"]
    );
    assert_eq!(parts("Wait... what?! Yes…", 0, 400, 0), ["Wait...", "what?!", "Yes…"]);
    // Short ones are joined; the last with the one before.
    assert_eq!(
        parts("Ok. Fine. This one is long enough.", 10, 400, 0),
        ["Ok. Fine. This one is long enough."]
    );
    assert_eq!(parts("This one is long enough. Ok.", 10, 400, 0), ["This one is long enough. Ok."]);
}

#[test]
fn lines_and_cjk() {
    let text = "  first line\r\n\n- second line\nthird";
    assert_eq!(split_parts(text, 0, 400, 0), Ok(vec![(0, 15), (15, 29), (29, 34)]));
    assert_eq!(
        parts("今天天气很好。我们去公园吧！你来吗？好", 0, 400, 0),
        ["今天天气很好。", "我们去公园吧！", "你来吗？", "好"]
    );
    assert_eq!(parts("他说：「好。」然后走了。", 0, 400, 0), ["他说：「好。」", "然后走了。"]);
}

#[test]
fn a_long_word_is_windowed() {
    let word = "x".repeat(10_000);
    let spans = split_parts(&word, 40, 400, 80).expect("valid");
    assert_eq!(spans.first(), Some(&(0, 400)));
    assert_eq!(spans.get(1), Some(&(320, 720)));
    assert_eq!(spans.last().map(|s| s.1), Some(10_000));
    // Words are kept whole where there are spaces.
    let words = "alpha beta gamma delta ".repeat(100);
    for (s, e) in split_parts(&words, 0, 50, 10).expect("valid") {
        let chars: Vec<char> = words.chars().collect();
        assert!(s == 0 || is_space(chars[s - 1]) || is_space(chars[s]), "{s}");
        assert!(e == chars.len() || is_space(chars[e - 1]) || is_space(chars[e]), "{e}");
    }
}

#[test]
fn empty_blank_and_errors() {
    assert_eq!(split_parts("", 1, 10, 0), Ok(vec![]));
    assert_eq!(split_parts(" \n\t\u{1c}\u{3000}", 1, 10, 0), Ok(vec![]));
    for (min, max, overlap) in [(0, 0, 0), (1, 10, 10), (11, 10, 0)] {
        assert!(matches!(split_parts("x", min, max, overlap), Err(CoreError::InvalidArgument(_))));
    }
}

proptest! {
    #[test]
    fn spans_cover_in_order_and_fit(
        text in "[a-c .?!…。？」\"\n\r\t\u{1c}3]{0,300}",
        min in 0usize..30,
        max in 1usize..60,
        overlap in 0usize..60,
    ) {
        let (min, overlap) = (min.min(max), overlap % max);
        let spans = split_parts(&text, min, max, overlap).expect("valid limits");
        prop_assert_eq!(&spans, &split_parts(&text, min, max, overlap).expect("valid"));
        let n = text.chars().count();
        if text.chars().all(is_space) {
            prop_assert!(spans.is_empty());
            return Ok(());
        }
        prop_assert_eq!(spans.first().map(|s| s.0), Some(0));
        prop_assert_eq!(spans.last().map(|s| s.1), Some(n));
        for &(s, e) in &spans {
            prop_assert!(s < e && e - s <= max, "{:?}", (s, e));
        }
        for w in spans.windows(2) {
            // Ordered, and no gap between neighbours.
            prop_assert!(w[0].0 < w[1].0 && w[1].0 <= w[0].1, "{:?}", w);
        }
    }
}

proptest! {
    /// Any text (every Unicode scalar), and limits up to overlap = max - 1, where windows advance
    /// by one character.
    #[test]
    fn any_text_any_limits(text in "\\PC{0,200}|[x .\n]{0,400}", max in 1usize..40, seed in 0usize..1000) {
        let (min, overlap) = (seed % (max + 1), seed % max);
        let spans = split_parts(&text, min, max, overlap).expect("valid limits");
        let n = text.chars().count();
        if text.chars().all(is_space) {
            prop_assert!(spans.is_empty());
        } else {
            prop_assert_eq!(spans.first().map(|s| s.0), Some(0));
            prop_assert_eq!(spans.last().map(|s| s.1), Some(n));
        }
        for w in spans.windows(2) {
            prop_assert!(w[0].0 < w[1].0 && w[1].0 <= w[0].1 && w[0].1 <= w[1].1, "{:?}", w);
        }
        prop_assert!(spans.iter().all(|&(s, e)| s < e && e - s <= max));
    }
}

#[test]
fn a_long_text_runs_in_one_pass() {
    // A million characters of short sentences, long words and blank runs.
    let text =
        "Ok. e.g. 3.5 is fine!\n\n".repeat(20_000) + &"y".repeat(300_000) + &" ".repeat(50_000);
    let n = text.chars().count();
    let spans = split_parts(&text, 40, 400, 80).expect("valid");
    assert_eq!(spans.last().map(|s| s.1), Some(n));
    assert!(spans.iter().all(|&(s, e)| e - s <= 400));
}
