//! `count_tokens`, `count_tokens_many`, `encode_tokens` and `token_bytes` as the binding calls
//! them: any encoding name (the known ones and anything else, which must be an error), any
//! UTF-8 text including the empty one.
#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use fadeway_core::tokens::{self, Encoding};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Name {
    Known(u8),
    Other(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    name: Name,
    text: String,
    more: Vec<String>,
}

/// Each encoding's token bytes, read once per process (the binding's `token_bytes`).
fn table(enc: Encoding) -> &'static [Vec<u8>] {
    static TABLES: [OnceLock<Vec<Vec<u8>>>; 2] = [OnceLock::new(), OnceLock::new()];
    let i = Encoding::NAMES.iter().position(|&n| n == enc.name()).expect("a known name");
    TABLES[i].get_or_init(|| tokens::token_bytes(enc))
}

fuzz_target!(|input: Input| {
    let name = match &input.name {
        Name::Known(i) => Encoding::NAMES[*i as usize % Encoding::NAMES.len()].to_string(),
        Name::Other(s) => s.clone(),
    };
    let enc = match Encoding::from_name(&name) {
        Ok(enc) => enc,
        Err(_) => {
            assert!(!Encoding::NAMES.contains(&name.as_str()), "a known name was refused");
            return;
        }
    };
    assert_eq!(enc.name(), name);
    let ids = tokens::encode(enc, &input.text);
    let n = tokens::count(enc, &input.text);
    assert_eq!(n, ids.len(), "count and encode disagree");
    assert_eq!(input.text.is_empty(), n == 0);
    // The ids decode back to the text through the token table.
    let table = table(enc);
    let mut decoded = Vec::with_capacity(input.text.len());
    for &id in &ids {
        decoded.extend_from_slice(&table[id as usize]);
    }
    assert_eq!(decoded, input.text.as_bytes(), "the tokens do not spell the text");
    let mut texts = input.more;
    texts.push(input.text);
    let counts = tokens::count_many(enc, &texts);
    assert_eq!(counts.len(), texts.len());
    for (text, &c) in texts.iter().zip(&counts) {
        assert_eq!(c, tokens::count(enc, text));
    }
});
