//! Token estimation with real byte-pair encodings (o200k_base, cl100k_base).
//!
//! The ranks are embedded in the build by `bpe-openai` (its build script serialises the
//! `.tiktoken` files shipped inside the crate), so nothing is downloaded at run time. Counts equal
//! tiktoken's `encode_ordinary` exactly: `tests/test_tokens_core.py` checks them against a tiktoken
//! `Encoding` built from these same ranks and against the slow twin in `tests/reference.py`;
//! `rust/core/tests/tokens.rs` checks `count` against `bpe-openai`'s own regex and encoder.
//!
//! Design log. Measured on 3 MB of generated chat-like English (`benches/compare_tokens.py`; ~10%
//! of its pieces are several tokens, an eighth of those new), one thread of a busy 2-core VM, so
//! read the figures as ratios; the tables are in `benches/RESULTS-tokens.md`.
//!
//! - tiktoken on the same ranks, through Python: ~15-25 MB/s.
//! - `bpe_openai::Tokenizer::count`, the starting point: ~45 MB/s and ~2.9 µs per 130-byte
//!   passage. Half of it is the pre-tokeniser, a multi-pattern `regex-automata` search anchored at
//!   every piece (~110 MB/s alone); half the backtracking encoder, which allocates two buffers per
//!   piece although nine English pieces in ten (" the", " memory", ",") are a single token.
//! - Kept, in the order they paid off:
//!   1. A hand-written scanner that reproduces OpenAI's two regexes on ASCII and hands a piece to
//!      the regex whenever it would have to classify a non-ASCII character, so the pieces are the
//!      regex's by construction (~300 MB/s alone).
//!   2. tiktoken's shortcut, a whole-piece lookup, in an open-addressing table of the tokens of up
//!      to 8 bytes packed into words. A `HashSet<&[u8]>` with a cheap hasher spent a fifth of the
//!      time hashing and a tenth in `memcmp`; packing tokens of up to 16 bytes gained nothing for
//!      three times the memory; a one-multiply hash beat a two-round mix by ~5%.
//!   3. For pieces that are not one token, tiktoken's merge loop on the stack (two-byte ranks come
//!      from a 64 Ki-entry array), with counts memoised per thread in a small direct-mapped table:
//!      a conversation repeats its rare words. `bpe`'s encoder took ~250-350 ns a piece; the loop
//!      alone ~260; with the memo the average cost falls to ~150 on documentation text and lower
//!      on chat. A memo four times larger gained ~5%.
//!   4. The contraction check inlined up to the apostrophe, the rest cold: ~8%.
//! - Together: ~4x `bpe-openai` and ~10x tiktoken on English, under 1 µs a passage. On text that
//!   is mostly non-ASCII (Cyrillic, CJK) every piece goes through the regex: ~60 MB/s, still above
//!   `bpe-openai`'s 50.
//! - Rejected: counting a batch on several threads (the caller owns its threads; the bindings
//!   release the GIL instead), and memoising whole texts (chat text rarely repeats verbatim).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::LazyLock;

use crate::CoreError;
use bpe_openai::byte_pair_encoding::BytePairEncoding;
use bpe_openai::Tokenizer;

/// The byte-pair encodings the estimator knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// GPT-4o, GPT-4.1, o-series, GPT-5 and newer.
    O200kBase,
    /// GPT-4, GPT-3.5-turbo and the ada-002 embeddings.
    Cl100kBase,
}

impl Encoding {
    pub const NAMES: &'static [&'static str] = &["o200k_base", "cl100k_base"];

    pub fn from_name(name: &str) -> Result<Self, CoreError> {
        match name {
            "o200k_base" => Ok(Encoding::O200kBase),
            "cl100k_base" => Ok(Encoding::Cl100kBase),
            _ => Err(CoreError::UnknownName {
                what: "encoding",
                given: name.to_owned(),
                allowed: Self::NAMES,
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    fn tokenizer(self) -> &'static Tokenizer {
        match self {
            Encoding::O200kBase => bpe_openai::o200k_base(),
            Encoding::Cl100kBase => bpe_openai::cl100k_base(),
        }
    }

    fn ranks(self) -> &'static Ranks {
        match self {
            Encoding::O200kBase => &O200K_RANKS,
            Encoding::Cl100kBase => &CL100K_RANKS,
        }
    }
}

/// The number of tokens `text` encodes to (ordinary text: special tokens are not recognised).
pub fn count(encoding: Encoding, text: &str) -> usize {
    let tokenizer = encoding.tokenizer();
    let ranks = encoding.ranks();
    let bytes = text.as_bytes();
    let mut total = 0;
    let mut start = 0;
    while start < bytes.len() {
        let end = match encoding {
            Encoding::O200kBase => o200k_piece_end(bytes, start),
            Encoding::Cl100kBase => cl100k_piece_end(bytes, start),
        }
        .unwrap_or_else(|| regex_piece_end(tokenizer, text, start));
        total += ranks.count_piece(&tokenizer.bpe, bytes, start, end);
        start = end;
    }
    total
}

/// Token counts of many texts, in order, on the calling thread.
pub fn count_many<S: AsRef<str>>(encoding: Encoding, texts: &[S]) -> Vec<usize> {
    texts.iter().map(|t| count(encoding, t.as_ref())).collect()
}

/// The token ids of `text`, by `bpe-openai`'s own pre-tokeniser and encoder (no shortcuts), so
/// that `count(text) == encode(text).len()` checks the counting path against an independent one.
pub fn encode(encoding: Encoding, text: &str) -> Vec<u32> {
    encoding.tokenizer().encode(text)
}

/// The bytes of every token, indexed by token id (the encoding's mergeable ranks).
pub fn token_bytes(encoding: Encoding) -> Vec<Vec<u8>> {
    let bpe = &encoding.tokenizer().bpe;
    (0..bpe.num_tokens()).map(|id| bpe.token_bytes(id as u32).to_vec()).collect()
}

// ---------------------------------------------------------------------------------------------
// Ranks: the id of a token from its bytes. Most pieces and merge candidates are at most 8 bytes;
// those live packed in an open-addressing table, so a lookup is one multiply-hash and a compare
// of two words, with no pointer to chase.

/// Tokens up to this many bytes are packed: their bytes in a word, their length beside it.
const PACKED_MAX: usize = 8;
/// Pieces up to this many bytes are merged on the stack; longer ones by `bpe`'s encoder, which
/// is linear where the merge loop is quadratic.
const MERGE_MAX: usize = 64;
const HASH_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;
const NO_RANK: u32 = u32::MAX;
/// Pieces of up to `MEMO_MAX` bytes that are not one token have their counts memoised per
/// thread, in a direct-mapped table of `MEMO_SLOTS` entries per encoding (128 KiB).
const MEMO_MAX: usize = 30;
const MEMO_SLOTS: usize = 4096;

/// A memoised count: the piece's bytes (zero-padded), its length and its token count.
#[derive(Clone, Copy)]
struct MemoEntry {
    bytes: [u8; MEMO_MAX],
    len: u8,
    count: u8,
}

thread_local! {
    /// Both encodings' entries, allocated on first use: `2 * MEMO_SLOTS` of them.
    static MEMO: RefCell<Vec<MemoEntry>> = const { RefCell::new(Vec::new()) };
}

impl MemoEntry {
    const EMPTY: MemoEntry = MemoEntry { bytes: [0; MEMO_MAX], len: 0, count: 0 };

    /// The count memoised for `piece` (at most `MEMO_MAX` bytes) at slot `at`, if that is it.
    fn recall(at: usize, piece: &[u8]) -> Option<usize> {
        let found = MEMO.try_with(|memo| {
            let memo = memo.borrow();
            let entry = memo.get(at)?;
            (usize::from(entry.len) == piece.len() && entry.bytes.starts_with(piece))
                .then_some(usize::from(entry.count))
        });
        // A thread being torn down has no memo; count without it.
        found.ok().flatten()
    }

    fn remember(at: usize, piece: &[u8], count: usize) {
        let mut entry = MemoEntry { len: piece.len() as u8, count: count as u8, ..Self::EMPTY };
        entry.bytes[..piece.len()].copy_from_slice(piece);
        let _ = MEMO.try_with(|memo| {
            let mut memo = memo.borrow_mut();
            if memo.is_empty() {
                memo.resize(2 * MEMO_SLOTS, Self::EMPTY);
            }
            memo[at] = entry;
        });
    }
}

#[derive(Clone, Copy, Default)]
struct Slot {
    bytes: u64,
    /// `length << 24 | rank`; `0` marks an empty slot (a token has at least one byte).
    meta: u32,
}

struct Ranks {
    /// The rank of every two-byte token, indexed by `first | second << 8`: every initial pair
    /// of the merge loop is looked up here, in 256 KiB instead of the big table.
    pairs: Vec<u32>,
    /// Tokens of up to `PACKED_MAX` bytes; a power of two of slots, at most 80% full (half
    /// full measured no faster and takes twice the memory).
    packed: Vec<Slot>,
    shift: u32,
    longer: HashMap<&'static [u8], u32, BuildHasherDefault<PieceHasher>>,
    /// Where this encoding's entries start in the per-thread memo.
    memo_offset: usize,
}

static O200K_RANKS: LazyLock<Ranks> = LazyLock::new(|| Ranks::new(Encoding::O200kBase, 0));
static CL100K_RANKS: LazyLock<Ranks> =
    LazyLock::new(|| Ranks::new(Encoding::Cl100kBase, MEMO_SLOTS));

impl Ranks {
    fn new(encoding: Encoding, memo_offset: usize) -> Self {
        let bpe = &encoding.tokenizer().bpe;
        let tokens = (0..bpe.num_tokens() as u32).map(|rank| (bpe.token_bytes(rank), rank));
        let (short, longer): (Vec<_>, _) = tokens.partition(|(bytes, _)| bytes.len() <= PACKED_MAX);
        let slots = (short.len() + short.len() / 4).next_power_of_two().max(2);
        let mut ranks = Ranks {
            pairs: vec![NO_RANK; 1 << 16],
            packed: vec![Slot::default(); slots],
            shift: 64 - slots.trailing_zeros(),
            longer: longer.into_iter().collect(),
            memo_offset,
        };
        for (bytes, rank) in short {
            if let &[first, second] = bytes {
                ranks.pairs[usize::from(first) | usize::from(second) << 8] = rank;
            }
            let packed = pack_at(bytes, 0, bytes.len());
            let mut slot = ranks.slot(packed, bytes.len());
            while ranks.packed[slot].meta != 0 {
                slot = (slot + 1) & (slots - 1);
            }
            ranks.packed[slot] = Slot { bytes: packed, meta: (bytes.len() as u32) << 24 | rank };
        }
        ranks
    }

    #[inline]
    fn slot(&self, packed: u64, len: usize) -> usize {
        // Fibonacci hashing: one multiply, keep the top bits (they depend on every input bit).
        (packed.wrapping_add(len as u64).wrapping_mul(HASH_MULTIPLIER) >> self.shift) as usize
    }

    /// The rank (token id) of `text[start..end]`, or `NO_RANK` if those bytes are not one token.
    #[inline]
    fn rank(&self, text: &[u8], start: usize, end: usize) -> u32 {
        if end - start == 2 {
            return self.pairs[usize::from(text[start]) | usize::from(text[start + 1]) << 8];
        }
        if end - start > PACKED_MAX {
            return self.longer.get(&text[start..end]).copied().unwrap_or(NO_RANK);
        }
        let packed = pack_at(text, start, end - start);
        let len = (end - start) as u32;
        let mask = self.packed.len() - 1;
        let mut slot = self.slot(packed, end - start);
        loop {
            let Slot { bytes: found, meta } = self.packed[slot];
            if meta == 0 {
                return NO_RANK;
            }
            if found == packed && meta >> 24 == len {
                return meta & 0x00FF_FFFF;
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The number of tokens of one pre-tokenised piece: one if it is a token (tiktoken's
    /// shortcut too), else the merge loop's count, memoised per thread for short pieces (a
    /// conversation repeats its rare words: names, identifiers, jargon).
    #[inline]
    fn count_piece(&self, bpe: &BytePairEncoding, text: &[u8], start: usize, end: usize) -> usize {
        if end - start == 1 || self.rank(text, start, end) != NO_RANK {
            return 1;
        }
        if end - start > MERGE_MAX {
            return bpe.count(&text[start..end]);
        }
        let piece = &text[start..end];
        if piece.len() > MEMO_MAX {
            return self.merge_count(text, start, end);
        }
        let mut hasher = PieceHasher::default();
        hasher.write(piece);
        let at = self.memo_offset + (hasher.finish() as usize & (MEMO_SLOTS - 1));
        if let Some(count) = MemoEntry::recall(at, piece) {
            return count;
        }
        let count = self.merge_count(text, start, end);
        MemoEntry::remember(at, piece, count);
        count
    }

    /// tiktoken's merge loop, counting: merge the adjacent pair whose bytes have the lowest rank,
    /// leftmost first, until no adjacent pair is a token.
    fn merge_count(&self, text: &[u8], start: usize, end: usize) -> usize {
        // Part `k` is `text[starts[k]..starts[k + 1]]`; `pair[k]` the rank of parts k and k+1.
        let mut starts = [0usize; MERGE_MAX + 1];
        let mut pair = [NO_RANK; MERGE_MAX];
        let mut parts = end - start;
        for (k, at) in starts.iter_mut().enumerate().take(parts + 1) {
            *at = start + k;
        }
        for (k, rank) in pair.iter_mut().enumerate().take(parts - 1) {
            *rank = self.rank(text, start + k, start + k + 2);
        }
        loop {
            let (mut best, mut best_rank) = (0, NO_RANK);
            for (k, &rank) in pair[..parts - 1].iter().enumerate() {
                if rank < best_rank {
                    (best, best_rank) = (k, rank);
                }
            }
            if best_rank == NO_RANK {
                return parts;
            }
            starts.copy_within(best + 2..=parts, best + 1);
            if best + 2 < parts {
                pair.copy_within(best + 2..parts - 1, best + 1);
            }
            parts -= 1;
            let span = |k: usize| self.rank(text, starts[k], starts[k + 2]);
            pair[best] = if best + 1 < parts { span(best) } else { NO_RANK };
            if best > 0 {
                pair[best - 1] = span(best - 1);
            }
        }
    }
}

/// `text[start..start + len]` (`1 <= len <= PACKED_MAX`) as a little-endian word, zero above:
/// one unaligned load and a mask where 8 bytes remain (a variable-length copy costs a `memcpy`).
#[inline]
fn pack_at(text: &[u8], start: usize, len: usize) -> u64 {
    let word = match text[start..].first_chunk::<PACKED_MAX>() {
        Some(chunk) => u64::from_le_bytes(*chunk),
        None => {
            let mut buf = [0u8; PACKED_MAX];
            for (to, from) in buf.iter_mut().zip(&text[start..]) {
                *to = *from;
            }
            u64::from_le_bytes(buf)
        }
    };
    word & (u64::MAX >> (64 - 8 * len))
}

/// Multiply-rotate over 8-byte words with a final mix, for the longer tokens (SipHash's setup
/// dominates on inputs this short).
#[derive(Default)]
struct PieceHasher(u64);

impl PieceHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(26) ^ word).wrapping_mul(HASH_MULTIPLIER);
    }
}

impl Hasher for PieceHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut buf = [0u8; 8];
            buf.copy_from_slice(word);
            self.mix(u64::from_le_bytes(buf));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.mix(u64::from_le_bytes(buf));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let h = self.0 ^ (self.0 >> 32);
        h.wrapping_mul(HASH_MULTIPLIER) ^ (h >> 29)
    }
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenisation. Each `*_piece_end` reproduces one of OpenAI's regexes (quoted above it),
// alternative by alternative in priority order, for a piece starting at `start`. Every character
// it looks at is classified by `class`, which answers `None` for non-ASCII; the `?` then hands
// the piece to the regex. So a piece is only decided here when every character the regex would
// have looked at is ASCII, where the classes below are exact.

const UPPER: u8 = 1; // \p{Lu}
const LOWER: u8 = 2; // \p{Ll}
const DIGIT: u8 = 4; // \p{N}
const SPACE: u8 = 8; // \s (Unicode White_Space): \t \n \v \f \r and ' '
const NEWLINE: u8 = 16; // [\r\n]
const OTHER: u8 = 32; // [^\s\p{L}\p{N}]: punctuation, symbols and the other controls
const LETTER: u8 = UPPER | LOWER;
/// `[^\r\n\p{L}\p{N}]`: the optional character before a word.
const WORD_PREFIX: u8 = OTHER | 64;

const ASCII_CLASSES: [u8; 128] = {
    let mut table = [OTHER; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        table[b] = match c {
            b'A'..=b'Z' => UPPER,
            b'a'..=b'z' => LOWER,
            b'0'..=b'9' => DIGIT,
            b'\r' | b'\n' => SPACE | NEWLINE,
            b'\t' | 0x0B | 0x0C | b' ' => SPACE | 64,
            _ => OTHER,
        };
        b += 1;
    }
    table
};

/// The class bits of `bytes[i]`: `Some(0)` past the end, `None` for a non-ASCII byte.
#[inline]
fn class(bytes: &[u8], i: usize) -> Option<u8> {
    match bytes.get(i) {
        None => Some(0),
        Some(&b) if b < 128 => Some(ASCII_CLASSES[b as usize]),
        Some(_) => None,
    }
}

/// The end of the run of characters in `wanted` starting at `i`.
#[inline]
fn run_end(bytes: &[u8], mut i: usize, wanted: u8) -> Option<usize> {
    while class(bytes, i)? & wanted != 0 {
        i += 1;
    }
    Some(i)
}

/// The end of `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `i`, or `i` if it does not match there.
#[inline(always)]
fn contraction_end(bytes: &[u8], i: usize) -> Option<usize> {
    if bytes.get(i) == Some(&b'\'') {
        quoted_contraction_end(bytes, i)
    } else {
        Some(i)
    }
}

#[cold]
fn quoted_contraction_end(bytes: &[u8], i: usize) -> Option<usize> {
    class(bytes, i + 1)?;
    let second = |want: u8| -> Option<bool> {
        class(bytes, i + 2)?;
        Some(bytes.get(i + 2).map(u8::to_ascii_lowercase) == Some(want))
    };
    Some(match bytes.get(i + 1).map(u8::to_ascii_lowercase) {
        Some(b's' | b't' | b'm' | b'd') => i + 2,
        Some(b'r' | b'v') if second(b'e')? => i + 3,
        Some(b'l') if second(b'l')? => i + 3,
        _ => i,
    })
}

/// The end of a whitespace piece at `start` (`bytes[start]` is whitespace), for both regexes:
/// `\s*[\r\n]` takes the run up to its last newline; `\s+(?!\S)` all of it but the last
/// character before non-space, or all of it at the end of the text; `\s`/`\s+` a lone character.
/// `end_of_text_first`: cl100k tries `\s++$` before `\s*[\r\n]`; o200k has no such alternative.
#[inline]
fn space_piece_end(bytes: &[u8], start: usize, end_of_text_first: bool) -> Option<usize> {
    let end = run_end(bytes, start, SPACE)?;
    if end_of_text_first && end == bytes.len() {
        return Some(end);
    }
    if let Some(last_newline) = bytes[start..end].iter().rposition(|&b| b == b'\n' || b == b'\r') {
        return Some(start + last_newline + 1);
    }
    Some(if end == bytes.len() || end - start == 1 { end } else { end - 1 })
}

/// o200k_base:
/// `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
/// `|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`
/// `|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
fn o200k_piece_end(bytes: &[u8], start: usize) -> Option<usize> {
    let first = class(bytes, start)?;
    // The two word alternatives. In ASCII no character is both upper and lower case, so they
    // match exactly when an upper run, a lower run, or both follow the optional prefix.
    let word = if first & WORD_PREFIX != 0 { start + 1 } else { start };
    let upper_end = run_end(bytes, word, UPPER)?;
    let lower_end = run_end(bytes, upper_end, LOWER)?;
    if lower_end > word {
        return contraction_end(bytes, lower_end);
    }
    if first & DIGIT != 0 {
        let mut end = start + 1;
        while end < start + 3 && class(bytes, end)? & DIGIT != 0 {
            end += 1;
        }
        return Some(end);
    }
    if let Some(end) = punctuation_end(bytes, start, b"\r\n/")? {
        return Some(end);
    }
    space_piece_end(bytes, start, false)
}

/// cl100k_base:
/// `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+`
/// `|\s++$|\s*[\r\n]|\s+(?!\S)|\s`
fn cl100k_piece_end(bytes: &[u8], start: usize) -> Option<usize> {
    let first = class(bytes, start)?;
    let contraction = contraction_end(bytes, start)?;
    if contraction > start {
        return Some(contraction);
    }
    let word = if first & WORD_PREFIX != 0 { start + 1 } else { start };
    let word_end = run_end(bytes, word, LETTER)?;
    if word_end > word {
        return Some(word_end);
    }
    if first & DIGIT != 0 {
        let mut end = start + 1;
        while end < start + 3 && class(bytes, end)? & DIGIT != 0 {
            end += 1;
        }
        return Some(end);
    }
    if let Some(end) = punctuation_end(bytes, start, b"\r\n")? {
        return Some(end);
    }
    space_piece_end(bytes, start, true)
}

/// ` ?[^\s\p{L}\p{N}]+[<trailing>]*` at `start`: `Some(None)` when it does not match.
#[inline]
fn punctuation_end(bytes: &[u8], start: usize, trailing: &[u8]) -> Option<Option<usize>> {
    let symbols = if bytes[start] == b' ' { start + 1 } else { start };
    if class(bytes, symbols)? & OTHER == 0 {
        return Some(None);
    }
    let mut end = run_end(bytes, symbols, OTHER)?;
    // The trailing set is ASCII, so a non-ASCII character simply ends it: no hand-off needed.
    while bytes.get(end).is_some_and(|b| trailing.contains(b)) {
        end += 1;
    }
    Some(Some(end))
}

/// The end of the piece at `start` by `bpe-openai`'s regex, for pieces the scanner hands off.
#[cold]
fn regex_piece_end(tokenizer: &Tokenizer, text: &str, start: usize) -> usize {
    // The patterns have no look-behind and only an end-of-text anchor, so matching the rest of
    // the text finds the same piece as matching at `start` inside the whole text.
    let piece = tokenizer.split(&text[start..]).next().map_or(0, str::len);
    // The regex always consumes at least one character; never loop if that were to change.
    let min = text[start..].chars().next().map_or(1, char::len_utf8);
    start + piece.max(min)
}
