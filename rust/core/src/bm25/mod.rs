//! Okapi BM25 over an incremental inverted index (issue 5, item 3: lexical recall).
//!
//! Documents are added by integer id without a rebuild and removed by id; a removed document is
//! never returned and its length leaves `N` and `avgdl` at once. The score of document `d` for a
//! query is, summed over the query's tokens (a token repeated in the query counts each time):
//!
//! ```text
//! idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avgdl))
//! idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
//! ```
//!
//! The idf is Lucene's, which stays positive for terms in more than half the documents (the
//! original `ln((N - df + 0.5) / (df + 0.5))` goes negative there and would rank a document lower
//! for matching). `k1` and `b` are passed in; fadeway names them once in `_constants.py`. Only
//! documents that match at least one query token are returned, best first, ties to the lower id.
//!
//! A query token found in more than a share `max_df` of the documents (1: none) is left out of
//! the query, as a stopword of this index ([`weighed`]): in a conversation of two, each one's
//! name is in most turns (said or addressed), and Lucene's idf still weighs it at about ln 2, so
//! a question naming both ranks every short turn that names one above the turn it asks about.
//!
//! Tokens ([`tokenize`]): maximal runs of `char::is_alphanumeric` characters, lowercased (a run
//! that is not ASCII goes through `str::to_lowercase`, which applies the final-sigma rule as
//! Python's `str.lower` does); optionally stopwords ([`Stopwords`]) are dropped and the
//! rest stemmed by Harman's S-stemmer ([`s_stem`]).
//!
//! Design log (100k synthetic passages of ~60 words, see `benches/bench_bm25.py`):
//! - Term ids come from a hash map keyed by the term, probed with a reused buffer so that a token
//!   already seen allocates nothing. std's SipHash was replaced by an Fx-style multiply hash: the
//!   keys are short words, where SipHash's setup dominates. (Hash flooding is not a concern for a
//!   per-user memory; if it becomes one, only `TermHasher` changes.)
//! - Tokenizing and term lookup are most of `add` and only read the index, so a large batch is
//!   split across up to `MAX_INDEX_THREADS` scoped threads (new terms get provisional ids), then
//!   new terms are numbered chunk by chunk in order, which gives each the id one pass would:
//!   100k passages 0.56 s -> 0.29 s on 2 cores. Postings are still appended on one thread.
//! - Postings are per-term vectors of `(slot, tf)` in slot order; a slot is a document's position
//!   in insertion order. Each live document also keeps its `(term, tf)` pairs (the forward index)
//!   so that removal updates only its own terms' document frequencies and serialization writes
//!   documents, not postings. A removed document's postings stay (its slot's length becomes
//!   `DEAD` and scoring skips it) until compaction: cutting them out of the posting lists at once
//!   cost ~0.47 ms per single-document removal at 100k passages (common terms have 50k
//!   postings). Slots of removed documents stay as tombstones rather than being reused, so
//!   postings stay sorted; once tombstones outnumber live documents (and there are at least
//!   `COMPACT_MIN_TOMBSTONES`) one pass renumbers slots, drops dead postings and unused terms, so
//!   churn costs amortised O(1) per removal and search never does more than twice its work.
//! - Scores accumulate in a dense per-slot array (a zero means untouched: every contribution is
//!   positive), kept per thread and re-zeroed by taking only the touched cells: a fresh
//!   `vec![0.0; slots]` per query cost ~0.5 ms at 100k slots in page faults alone. The top k
//!   come from a bounded heap (see `top_k`). This is now the exhaustive search.
//! - `search` prunes with MaxScore (see `search.rs`), exact to the bit against
//!   the exhaustive search. Measured on the recall case of `benches/bench_bm25.py` (passages of
//!   8-40 words, 200 queries of 5-30 words, top 20; a 2-core machine under load, best of 7):
//!   100k passages 0.97 -> 0.65 ms per query in Rust (p50 0.96 -> 0.58, p95 1.70 -> 1.44),
//!   1.18 -> 0.64 ms through the binding (pytest-benchmark minimum); at 10k the
//!   pruned search took 0.11 ms against 0.095, so indexes under `PRUNE_MIN_SLOTS` stay
//!   exhaustive. What limits it: a query of common words has a threshold (~14) only a little
//!   above the summed bounds of its commonest terms (~11), so the medium-frequency terms stay
//!   essential (35-45% of the postings are still scored) and most documents they touch must be
//!   checked against a non-essential list. What was tried: document at a time over the
//!   essential lists with a galloping probe per candidate (0.65 ms; finding the next document
//!   over ~10 cursors and the searches in the long lists dominated); windows of 2048 slots
//!   scored term at a time (0.59 ms; the same, a linear scan before galloping); a tf-factor table
//!   instead of two divisions per posting (no change: not the bottleneck); merging the
//!   non-essential lists with the window's survivors instead of probing (no change, kept as the
//!   simpler code); threshold seeding is not needed, it settles within the first window. Block-max
//!   bounds would not help this vocabulary: a block of a common term almost always holds a short
//!   document with tf 2-3, so its block maximum is its global one.
//! - Below `PRUNE_MIN_SLOTS` a query that repeats a term (recall searches the facts with the
//!   recent conversation, which repeats its common words) walks each distinct term's postings
//!   once and scores exactly only the documents that may enter (`counted` in `search.rs`): 10k
//!   facts, queries of ~80 tokens, 0.46 -> 0.28 ms at p50 through the binding.
//! - Per-term bounds (`TfBound` in `search.rs`): the Pareto points `(tf, shortest length)` of the
//!   term's postings, valid for every `avgdl`, updated in O(1) by `add`, left loose by `remove`
//!   (never too low) and rebuilt by compaction; not serialized (rebuilt with the postings).
//!
//! Serialization ([`Bm25Index::to_bytes`]): magic `FWBM`, a version byte, the tokenizer flags
//! (bit 1: stem; the rest: 0 no stopwords, 1 Lucene's, 5 English), k1, b and `max_df` (since
//! version 2), the used terms, then each live document's id and `(term, tf)` pairs, all
//! little-endian, closed by an FNV-1a 64 checksum of everything before it.
//! [`Bm25Index::from_bytes`] checks the checksum and every length, id and term index, and
//! rebuilds the postings.

mod search;

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use crate::CoreError;
use search::TfBound;

/// Lucene's classic English stop set: what [`Stopwords::Lucene`] drops.
pub const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// The rest of a common English stop list (pronouns, auxiliaries, question words, the fragments
/// of contractions): what [`Stopwords::English`] drops besides [`STOPWORDS`]. Searching sealed
/// conversation, words such as "what", "did" or the "s" of "Gina's" carry no topic, and Lucene's
/// idf still weighs a word in most passages at about ln 2.
pub const MORE_STOPWORDS: &[&str] = &[
    "i",
    "me",
    "my",
    "myself",
    "we",
    "our",
    "ours",
    "ourselves",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "he",
    "him",
    "his",
    "himself",
    "she",
    "her",
    "hers",
    "herself",
    "its",
    "itself",
    "them",
    "theirs",
    "themselves",
    "what",
    "which",
    "who",
    "whom",
    "those",
    "am",
    "were",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "do",
    "does",
    "did",
    "doing",
    "because",
    "until",
    "while",
    "about",
    "against",
    "between",
    "through",
    "during",
    "before",
    "after",
    "above",
    "below",
    "from",
    "up",
    "down",
    "out",
    "off",
    "over",
    "under",
    "again",
    "further",
    "once",
    "here",
    "when",
    "where",
    "why",
    "how",
    "all",
    "any",
    "both",
    "each",
    "few",
    "more",
    "most",
    "other",
    "some",
    "nor",
    "only",
    "own",
    "same",
    "so",
    "than",
    "too",
    "very",
    "s",
    "t",
    "can",
    "just",
    "don",
    "should",
    "now",
    "d",
    "ll",
    "m",
    "o",
    "re",
    "ve",
    "y",
];

/// Which stopwords an [`Analyzer`] drops (matched after lowercasing, before stemming).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopwords {
    /// None: every token is kept.
    None,
    /// [`STOPWORDS`].
    Lucene,
    /// [`STOPWORDS`] and [`MORE_STOPWORDS`].
    English,
}

impl Stopwords {
    /// Whether `word` is dropped; a `match` compiles to a switch on the length and a few
    /// comparisons, where `STOPWORDS.contains` compared against all 33 (about a tenth of
    /// indexing).
    fn drops(self, word: &str) -> bool {
        match self {
            Stopwords::None => false,
            Stopwords::Lucene => is_lucene_stopword(word),
            Stopwords::English => is_lucene_stopword(word) || is_more_stopword(word),
        }
    }
}

fn is_lucene_stopword(word: &str) -> bool {
    matches!(
        word,
        "a" | "an"
            | "and"
            | "are"
            | "as"
            | "at"
            | "be"
            | "but"
            | "by"
            | "for"
            | "if"
            | "in"
            | "into"
            | "is"
            | "it"
            | "no"
            | "not"
            | "of"
            | "on"
            | "or"
            | "such"
            | "that"
            | "the"
            | "their"
            | "then"
            | "there"
            | "these"
            | "they"
            | "this"
            | "to"
            | "was"
            | "will"
            | "with"
    )
}

fn is_more_stopword(word: &str) -> bool {
    matches!(
        word,
        "i" | "me"
            | "my"
            | "myself"
            | "we"
            | "our"
            | "ours"
            | "ourselves"
            | "you"
            | "your"
            | "yours"
            | "yourself"
            | "yourselves"
            | "he"
            | "him"
            | "his"
            | "himself"
            | "she"
            | "her"
            | "hers"
            | "herself"
            | "its"
            | "itself"
            | "them"
            | "theirs"
            | "themselves"
            | "what"
            | "which"
            | "who"
            | "whom"
            | "those"
            | "am"
            | "were"
            | "been"
            | "being"
            | "have"
            | "has"
            | "had"
            | "having"
            | "do"
            | "does"
            | "did"
            | "doing"
            | "because"
            | "until"
            | "while"
            | "about"
            | "against"
            | "between"
            | "through"
            | "during"
            | "before"
            | "after"
            | "above"
            | "below"
            | "from"
            | "up"
            | "down"
            | "out"
            | "off"
            | "over"
            | "under"
            | "again"
            | "further"
            | "once"
            | "here"
            | "when"
            | "where"
            | "why"
            | "how"
            | "all"
            | "any"
            | "both"
            | "each"
            | "few"
            | "more"
            | "most"
            | "other"
            | "some"
            | "nor"
            | "only"
            | "own"
            | "same"
            | "so"
            | "than"
            | "too"
            | "very"
            | "s"
            | "t"
            | "can"
            | "just"
            | "don"
            | "should"
            | "now"
            | "d"
            | "ll"
            | "m"
            | "o"
            | "re"
            | "ve"
            | "y"
    )
}

/// How text becomes tokens: both the documents and the queries of one index use the same rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Analyzer {
    /// The stopwords dropped.
    pub stopwords: Stopwords,
    /// Strip plural suffixes with [`s_stem`].
    pub stem: bool,
}

/// Harman's S-stemmer (Harman 1991, "How effective is suffixing?"), applied to words longer than
/// three characters so that short words ("its", "gas", "bus") stay whole. The first rule that
/// matches wins:
/// - `-ies` -> `-y`, unless `-eies` or `-aies`;
/// - `-es` -> `-e`, unless `-aes`, `-ees` or `-oes`;
/// - `-s` -> removed, unless `-us` or `-ss`.
pub fn s_stem(word: &str) -> String {
    let (stem, suffix) = s_stem_parts(word);
    [stem, suffix].concat()
}

/// The stem as a prefix of `word` plus the suffix to append (`"y"`, `"e"` or nothing).
fn s_stem_parts(word: &str) -> (&str, &'static str) {
    if word.chars().nth(3).is_none() {
        return (word, "");
    }
    let ends = |s: &str| word.ends_with(s);
    if ends("ies") && !ends("eies") && !ends("aies") {
        (&word[..word.len() - 3], "y")
    } else if ends("es") && !ends("aes") && !ends("ees") && !ends("oes") {
        (&word[..word.len() - 2], "e")
    } else if ends("s") && !ends("us") && !ends("ss") {
        (&word[..word.len() - 1], "")
    } else {
        (word, "")
    }
}

/// The tokens of `text` under `analyzer`, in order (see the module documentation).
pub fn tokenize(text: &str, analyzer: Analyzer) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut buf = String::new();
    for_each_token(text, analyzer, &mut buf, |t| tokens.push(t.to_owned()));
    tokens
}

/// Whether Python's `str.split()` splits at `c`: Unicode's White_Space, and the four ASCII
/// information separators (U+001C to U+001F) that Python counts as space too.
fn splits_words(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The best window of a long excerpt: the run of `size` consecutive words of `text` (split as
/// Python's `str.split()` splits it) that holds the most words with a token in `wanted`, each
/// word tokenized alone as [`tokenize`] with `analyzer` reads it; the first such run. Returns its
/// first word and the text's number of words (a text of at most `size` words: 0).
pub fn best_window(
    text: &str,
    wanted: &HashSet<String>,
    size: usize,
    analyzer: Analyzer,
) -> (usize, usize) {
    let mut buf = String::new();
    let hits: Vec<u32> = text
        .split(splits_words)
        .filter(|word| !word.is_empty())
        .map(|word| {
            let mut hit = false;
            for_each_token(word, analyzer, &mut buf, |t| hit |= wanted.contains(t));
            u32::from(hit)
        })
        .collect();
    let n = hits.len();
    if size == 0 || n <= size {
        return (0, n);
    }
    let mut run: u32 = hits[..size].iter().sum();
    let (mut best, mut start) = (run, 0);
    for i in size..n {
        run = run + hits[i] - hits[i - size];
        if run > best {
            best = run;
            start = i - size + 1;
        }
    }
    (start, n)
}

/// Calls `f` with each token of `text`, reusing `buf` so that tokenizing allocates only when a
/// token is longer than any before it.
fn for_each_token(text: &str, analyzer: Analyzer, buf: &mut String, mut f: impl FnMut(&str)) {
    let mut start = None;
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        match (c.is_alphanumeric() && i < text.len(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                start = None;
                let run = &text[s..i];
                buf.clear();
                if run.is_ascii() {
                    buf.extend(run.bytes().map(|b| char::from(b.to_ascii_lowercase())));
                } else {
                    buf.push_str(&run.to_lowercase());
                }
                if analyzer.stopwords.drops(buf) {
                    continue;
                }
                if analyzer.stem {
                    let (stem, suffix) = s_stem_parts(buf);
                    let keep = stem.len();
                    buf.truncate(keep);
                    buf.push_str(suffix);
                }
                f(buf);
            }
            _ => {}
        }
    }
}

/// An Fx-style hash for short string keys (see the design log).
#[derive(Default)]
struct TermHasher(u64);

impl Hasher for TermHasher {
    fn write(&mut self, bytes: &[u8]) {
        const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(c);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(SEED);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(SEED);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type TermMap = HashMap<Box<str>, u32, BuildHasherDefault<TermHasher>>;

/// One document's entry: its id, its length in tokens and its `(term, tf)` pairs sorted by term.
/// A removed document keeps its slot with no pairs and `live == false`.
#[derive(Debug, Clone)]
struct Doc {
    id: i64,
    len: u32,
    live: bool,
    terms: Box<[(u32, u32)]>,
}

/// An incremental BM25 index. See the module documentation for the scoring and the layout.
#[derive(Debug, Clone)]
pub struct Bm25Index {
    k1: f64,
    b: f64,
    analyzer: Analyzer,
    term_ids: TermMap,
    /// Term text by term id (for serialization).
    term_text: Vec<Box<str>>,
    /// `(slot, tf)` per term id, sorted by slot. Removed documents' postings stay until the next
    /// compaction; their slot's length is `DEAD`, so scoring skips them.
    postings: Vec<Vec<(u32, u32)>>,
    /// Live documents per term id (the `df` of the idf).
    df: Vec<u32>,
    /// Per term id, a bound on its tf factor over its postings (for pruning; see `search`).
    tf_bounds: Vec<TfBound>,
    docs: Vec<Doc>,
    /// Each slot's document length again, apart from `docs`: scoring reads 4 bytes per posting
    /// instead of a 32-byte `Doc`.
    lens: Vec<u32>,
    slot_of: HashMap<i64, u32>,
    total_len: u64,
    /// The share of the documents past which a query term is left out (see the module docs).
    max_df: f64,
}

/// The checks of [`Bm25Index::new`]: `k1` finite and >= 0, `b` in `[0, 1]`.
fn validate_bm25_params(k1: f64, b: f64) -> Result<(), CoreError> {
    if !(k1.is_finite() && k1 >= 0.0) {
        return Err(CoreError::InvalidArgument(format!(
            "k1 is {k1}; it must be a finite number >= 0"
        )));
    }
    if !(0.0..=1.0).contains(&b) {
        return Err(CoreError::InvalidArgument(format!("b is {b}; it must be in [0, 1]")));
    }
    Ok(())
}

impl Bm25Index {
    /// An empty index. Errors: `k1` not finite or negative, `b` outside `[0, 1]`.
    pub fn new(k1: f64, b: f64, analyzer: Analyzer) -> Result<Self, CoreError> {
        validate_bm25_params(k1, b)?;
        Ok(Bm25Index {
            k1,
            b,
            analyzer,
            term_ids: TermMap::default(),
            term_text: Vec::new(),
            postings: Vec::new(),
            df: Vec::new(),
            tf_bounds: Vec::new(),
            docs: Vec::new(),
            lens: Vec::new(),
            slot_of: HashMap::new(),
            total_len: 0,
            max_df: 1.0,
        })
    }

    /// This index with query terms in more than a share `max_df` of its documents left out
    /// ([`weighed`]). Errors: `max_df` not in `(0, 1]`.
    pub fn with_max_df(mut self, max_df: f64) -> Result<Self, CoreError> {
        if !(max_df > 0.0 && max_df <= 1.0) {
            return Err(CoreError::InvalidArgument(format!(
                "max_df is {max_df}; it must be in (0, 1]"
            )));
        }
        self.max_df = max_df;
        Ok(self)
    }

    pub fn max_df(&self) -> f64 {
        self.max_df
    }

    pub fn k1(&self) -> f64 {
        self.k1
    }

    pub fn b(&self) -> f64 {
        self.b
    }

    pub fn analyzer(&self) -> Analyzer {
        self.analyzer
    }

    /// The number of live documents.
    pub fn len(&self) -> usize {
        self.slot_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slot_of.is_empty()
    }

    /// Whether a live document has this id.
    pub fn contains(&self, id: i64) -> bool {
        self.slot_of.contains_key(&id)
    }

    /// Adds `texts[j]` under `ids[j]`. All or nothing: errors (lengths differ, an id already in the
    /// index or repeated in `ids`, more documents than `u32` slots) leave the index unchanged.
    pub fn add<S: AsRef<str> + Sync>(&mut self, ids: &[i64], texts: &[S]) -> Result<(), CoreError> {
        self.validate_bm25_add(ids, texts.len())?;
        // Tokenizing and looking terms up is most of the work and reads the index only, so it
        // runs on several threads; new terms are then numbered one chunk at a time, in order,
        // which gives every term the id a single pass would have given it.
        let threads = crate::parallel::threads()
            .min(MAX_INDEX_THREADS)
            .min(texts.len() / MIN_DOCS_PER_THREAD)
            .max(1);
        let per = texts.len().div_ceil(threads).max(1);
        let chunks: Vec<Chunk> = if threads == 1 {
            vec![self.tokenize_chunk(texts)]
        } else {
            let this = &*self;
            std::thread::scope(|scope| {
                let handles: Vec<_> = texts
                    .chunks(per)
                    .map(|part| scope.spawn(move || this.tokenize_chunk(part)))
                    .collect();
                // A tokenizing thread does not panic; if one did, its documents are indexed
                // here on this thread instead, so the result is the same.
                handles
                    .into_iter()
                    .zip(texts.chunks(per))
                    .map(|(h, part)| h.join().unwrap_or_else(|_| this.tokenize_chunk(part)))
                    .collect()
            })
        };
        let mut ids = ids.iter();
        let mut doc_terms: Vec<u32> = Vec::new();
        for chunk in chunks {
            let global: Vec<u32> = chunk.new_terms.into_iter().map(|t| self.term_id(t)).collect();
            let mut from = 0;
            for (&end, &id) in chunk.ends.iter().zip(&mut ids) {
                doc_terms.clear();
                doc_terms.extend(chunk.terms[from..end].iter().map(|&t| {
                    if t & NEW_TERM == 0 {
                        t
                    } else {
                        global[(t & !NEW_TERM) as usize]
                    }
                }));
                from = end;
                let len = doc_terms.len();
                self.push_doc(id, len as u64, counts(&mut doc_terms));
            }
        }
        Ok(())
    }

    /// The checks of [`Bm25Index::add`], made before anything changes: one text per id, ids new
    /// to the index and unique, and room for the documents and for new terms.
    fn validate_bm25_add(&self, ids: &[i64], n_texts: usize) -> Result<(), CoreError> {
        if ids.len() != n_texts {
            return Err(CoreError::InvalidArgument(format!(
                "ids has {} entries but texts has {n_texts}; they must be the same length",
                ids.len(),
            )));
        }
        let mut seen = HashMap::with_capacity(ids.len());
        for (j, &id) in ids.iter().enumerate() {
            if self.slot_of.contains_key(&id) {
                return Err(CoreError::InvalidArgument(format!(
                    "ids[{j}] is {id}, which is already in the index; remove it first"
                )));
            }
            if let Some(first) = seen.insert(id, j) {
                return Err(CoreError::InvalidArgument(format!(
                    "ids[{j}] is {id}, which ids[{first}] already holds; ids must be unique"
                )));
            }
        }
        if u32::try_from(self.docs.len() + ids.len()).is_err() {
            return Err(CoreError::InvalidArgument(format!(
                "the index would hold more than {} document slots",
                u32::MAX
            )));
        }
        if self.term_text.len() >= NEW_TERM as usize {
            return Err(CoreError::InvalidArgument(format!(
                "the index already holds {} distinct terms, the most it can",
                self.term_text.len()
            )));
        }
        Ok(())
    }

    /// The id of `term`, numbering it next if it is new.
    fn term_id(&mut self, term: Box<str>) -> u32 {
        if let Some(&id) = self.term_ids.get(&term) {
            return id;
        }
        // `add` checks that the count stays below NEW_TERM, far below u32::MAX.
        let id = self.term_text.len() as u32;
        self.term_text.push(term.clone());
        self.term_ids.insert(term, id);
        self.postings.push(Vec::new());
        self.df.push(0);
        self.tf_bounds.push(TfBound::default());
        id
    }

    /// The term ids of each text of `texts`, read-only: a term the index knows gets its id, a new
    /// one `NEW_TERM | i` where `i` is its place in the chunk's `new_terms` (first seen first).
    fn tokenize_chunk<S: AsRef<str>>(&self, texts: &[S]) -> Chunk {
        let mut chunk = Chunk {
            terms: Vec::new(),
            ends: Vec::with_capacity(texts.len()),
            new_terms: Vec::new(),
        };
        let mut local = TermMap::default();
        let mut buf = String::new();
        for text in texts {
            for_each_token(text.as_ref(), self.analyzer, &mut buf, |t| {
                let id = match self.term_ids.get(t) {
                    Some(&id) => id,
                    None => match local.get(t) {
                        Some(&i) => NEW_TERM | i,
                        None => {
                            let i = chunk.new_terms.len() as u32;
                            local.insert(t.into(), i);
                            chunk.new_terms.push(t.into());
                            NEW_TERM | i
                        }
                    },
                };
                chunk.terms.push(id);
            });
            chunk.ends.push(chunk.terms.len());
        }
        chunk
    }

    /// Appends a live document with its `(term, tf)` pairs sorted by term; the caller has checked
    /// the id, the slot count and the term ids.
    fn push_doc(&mut self, id: i64, len: u64, terms: Box<[(u32, u32)]>) {
        let slot = self.docs.len() as u32;
        let len32 = len.min(u64::from(DEAD - 1)) as u32;
        for &(term, tf) in terms.iter() {
            self.postings[term as usize].push((slot, tf));
            self.df[term as usize] += 1;
            self.tf_bounds[term as usize].add(tf, len32);
        }
        self.docs.push(Doc { id, len: len32, live: true, terms });
        self.lens.push(len32);
        self.slot_of.insert(id, slot);
        self.total_len += len;
    }

    /// Removes the documents with these ids; ids not in the index are ignored. Returns how many
    /// were removed.
    pub fn remove(&mut self, ids: &[i64]) -> usize {
        let mut removed = 0;
        for id in ids {
            let Some(slot) = self.slot_of.remove(id) else { continue };
            let doc = &mut self.docs[slot as usize];
            doc.live = false;
            self.total_len -= u64::from(doc.len);
            for &(t, _) in doc.terms.iter() {
                self.df[t as usize] -= 1;
            }
            doc.terms = Box::new([]);
            self.lens[slot as usize] = DEAD;
            removed += 1;
        }
        let dead = self.docs.len() - self.len();
        if dead >= COMPACT_MIN_TOMBSTONES && dead > self.len() {
            self.compact();
        }
        removed
    }

    /// Drops the tombstones of removed documents and the terms no live document uses,
    /// renumbering slots and term ids in their old order (so postings and each document's pairs
    /// stay sorted). Scores do not change: they depend only on live documents.
    fn compact(&mut self) {
        let mut slot_map = vec![u32::MAX; self.docs.len()];
        let mut next = 0u32;
        for (old, doc) in self.docs.iter().enumerate() {
            if doc.live {
                slot_map[old] = next;
                next += 1;
            }
        }
        let mut term_map = vec![u32::MAX; self.postings.len()];
        let mut next = 0u32;
        for (old, &df) in self.df.iter().enumerate() {
            if df > 0 {
                term_map[old] = next;
                next += 1;
            }
        }
        self.docs.retain(|d| d.live);
        self.lens = self.docs.iter().map(|d| d.len).collect();
        for doc in &mut self.docs {
            for pair in doc.terms.iter_mut() {
                pair.0 = term_map[pair.0 as usize];
            }
        }
        let postings = std::mem::take(&mut self.postings);
        self.postings =
            postings.into_iter().zip(&self.df).filter(|(_, &df)| df > 0).map(|(p, _)| p).collect();
        self.df.retain(|&df| df > 0);
        // Bounds are rebuilt from the live documents only, so they are tight again.
        self.tf_bounds = vec![TfBound::default(); self.df.len()];
        for doc in &self.docs {
            for &(t, tf) in doc.terms.iter() {
                self.tf_bounds[t as usize].add(tf, doc.len);
            }
        }
        for list in &mut self.postings {
            list.retain(|&(slot, _)| slot_map[slot as usize] != u32::MAX);
            for pair in list.iter_mut() {
                pair.0 = slot_map[pair.0 as usize];
            }
        }
        let texts = std::mem::take(&mut self.term_text);
        self.term_text = texts
            .into_iter()
            .zip(&term_map)
            .filter(|(_, &t)| t != u32::MAX)
            .map(|(x, _)| x)
            .collect();
        self.term_ids.retain(|_, t| term_map[*t as usize] != u32::MAX);
        for t in self.term_ids.values_mut() {
            *t = term_map[*t as usize];
        }
        for slot in self.slot_of.values_mut() {
            *slot = slot_map[*slot as usize];
        }
    }

    /// The index as bytes that [`Bm25Index::from_bytes`] reads back (format in the module docs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        let stopwords = match self.analyzer.stopwords {
            Stopwords::None => 0,
            Stopwords::Lucene => 1,
            Stopwords::English => 5, // 4 alone is kept unused: English includes Lucene's set
        };
        out.push(stopwords | (u8::from(self.analyzer.stem) << 1));
        out.extend_from_slice(&self.k1.to_le_bytes());
        out.extend_from_slice(&self.b.to_le_bytes());
        out.extend_from_slice(&self.max_df.to_le_bytes());
        // Only terms some live document uses are written, renumbered densely.
        let mut renumber = vec![u32::MAX; self.term_text.len()];
        let mut used = 0u32;
        for (t, &df) in self.df.iter().enumerate() {
            if df > 0 {
                renumber[t] = used;
                used += 1;
            }
        }
        out.extend_from_slice(&used.to_le_bytes());
        for (t, text) in self.term_text.iter().enumerate() {
            if renumber[t] != u32::MAX {
                out.extend_from_slice(&(text.len() as u32).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
        }
        out.extend_from_slice(&(self.len() as u32).to_le_bytes());
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for doc in self.docs.iter().filter(|d| d.live) {
            out.extend_from_slice(&doc.id.to_le_bytes());
            out.extend_from_slice(&(doc.terms.len() as u32).to_le_bytes());
            pairs.clear();
            pairs.extend(doc.terms.iter().map(|&(t, tf)| (renumber[t as usize], tf)));
            // Renumbering keeps the old order of used terms, so the pairs stay sorted.
            for &(t, tf) in &pairs {
                out.extend_from_slice(&t.to_le_bytes());
                out.extend_from_slice(&tf.to_le_bytes());
            }
        }
        let sum = fnv1a(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// Reads an index written by [`Bm25Index::to_bytes`]. Errors (never a panic) for a wrong
    /// magic, version or checksum, a truncated or overlong input, bad parameters, a term that is
    /// not UTF-8 or repeated, a repeated document id, or pairs out of order or out of range.
    pub fn from_bytes(data: &[u8]) -> Result<Self, CoreError> {
        let corrupt = |what: &str| {
            CoreError::InvalidArgument(format!("BM25 index bytes are corrupt: {what}"))
        };
        if data.len() < MAGIC.len() + 2 + 8 || &data[..MAGIC.len()] != MAGIC {
            return Err(corrupt("they do not start with the BM25 index header"));
        }
        let version = data[MAGIC.len()];
        if !(1..=VERSION).contains(&version) {
            return Err(corrupt(&format!(
                "format version {version} is not one of the supported versions 1 to {VERSION}"
            )));
        }
        let (body, sum) = data.split_at(data.len() - 8);
        if fnv1a(body).to_le_bytes() != sum {
            return Err(corrupt("the checksum does not match"));
        }
        let mut r = Reader { data: body, at: MAGIC.len() + 1 };
        let flags = r.u8()?;
        let stopwords = match flags & !2 {
            0 => Stopwords::None,
            1 => Stopwords::Lucene,
            5 => Stopwords::English,
            _ => return Err(corrupt(&format!("unknown tokenizer flags {flags}"))),
        };
        let analyzer = Analyzer { stopwords, stem: flags & 2 != 0 };
        let (k1, b) = (r.f64()?, r.f64()?);
        let max_df = if version >= 2 { r.f64()? } else { 1.0 }; // version 1 left none out
        let mut index = Bm25Index::new(k1, b, analyzer)?.with_max_df(max_df)?;
        let n_terms = r.u32()?;
        for _ in 0..n_terms {
            let len = r.u32()? as usize;
            let text =
                std::str::from_utf8(r.bytes(len)?).map_err(|_| corrupt("a term is not UTF-8"))?;
            let term = index.term_text.len() as u32;
            if index.term_ids.insert(text.into(), term).is_some() {
                return Err(corrupt(&format!("term {text:?} appears twice")));
            }
            index.term_text.push(text.into());
            index.postings.push(Vec::new());
            index.df.push(0);
            index.tf_bounds.push(TfBound::default());
        }
        let n_docs = r.u32()?;
        for _ in 0..n_docs {
            let id = r.i64()?;
            let n_pairs = r.u32()? as usize;
            // Each pair is 8 bytes; checking first keeps a corrupt count from allocating.
            if n_pairs > r.remaining() / 8 {
                return Err(corrupt("a document has more pairs than bytes remain"));
            }
            let mut terms = Vec::with_capacity(n_pairs);
            let mut len = 0u64;
            for _ in 0..n_pairs {
                let (t, tf) = (r.u32()?, r.u32()?);
                if t >= n_terms || tf == 0 || terms.last().is_some_and(|&(p, _)| p >= t) {
                    return Err(corrupt(&format!("document {id} has a bad (term, tf) pair")));
                }
                len += u64::from(tf);
                terms.push((t, tf));
            }
            if index.slot_of.contains_key(&id) {
                return Err(corrupt(&format!("document id {id} appears twice")));
            }
            index.push_doc(id, len, terms.into_boxed_slice());
        }
        if r.remaining() != 0 {
            return Err(corrupt("bytes remain after the last document"));
        }
        Ok(index)
    }
}

/// Marks a term id in a [`Chunk`] as an index into its `new_terms`; real term ids stay below it.
const NEW_TERM: u32 = 1 << 31;

/// Threads that tokenize one `add` at most, and the fewest documents worth a thread of their own.
const MAX_INDEX_THREADS: usize = 8;
const MIN_DOCS_PER_THREAD: usize = 2048;

/// The tokens of consecutive texts as term ids (see [`Bm25Index::tokenize_chunk`]): text `j`'s
/// ids are `terms[ends[j - 1]..ends[j]]`.
struct Chunk {
    terms: Vec<u32>,
    ends: Vec<usize>,
    new_terms: Vec<Box<str>>,
}

/// The length of a removed document's slot: scoring skips its leftover postings.
const DEAD: u32 = u32::MAX;

/// Tombstones below this count are never compacted away: a small index is not worth the pass.
const COMPACT_MIN_TOMBSTONES: usize = 1024;

const MAGIC: &[u8; 4] = b"FWBM";
/// The format written: 2 added `max_df` after `b`; version 1 is still read (as `max_df` 1).
const VERSION: u8 = 2;

/// The fewest documents `max_df` is taken a share of ([`weighed`]): in a small index a term in a
/// few of its documents still tells them apart.
pub const MAX_DF_MIN_DOCS: usize = 64;

/// Whether a query term in `df` of `n` live documents is weighed: it is in some document, and in
/// no more than a share `max_df` of them, or of `MAX_DF_MIN_DOCS` in a smaller index.
#[inline]
fn weighed(n: usize, df: usize, max_df: f64) -> bool {
    df > 0 && df as f64 <= max_df * n.max(MAX_DF_MIN_DOCS) as f64
}

/// Lucene's BM25 idf for `df` of `n` documents (see the module documentation).
#[inline]
fn idf(n: usize, df: usize) -> f64 {
    let (n, df) = (n as f64, df as f64);
    ((n - df + 0.5) / (df + 0.5)).ln_1p()
}

/// One query token's contribution to one document: the same expression, in the same order, as
/// the naive twin and the Python twin, so they agree to rounding.
#[inline]
fn term_score(idf: f64, tf: f64, len: f64, avgdl: f64, k1: f64, b: f64) -> f64 {
    idf * (tf * (k1 + 1.0)) / (tf + k1 * (1.0 - b + b * len / avgdl))
}

/// Sorts term ids and counts each: `(term, tf)` sorted by term.
fn counts(terms: &mut [u32]) -> Box<[(u32, u32)]> {
    terms.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &t in terms.iter() {
        match out.last_mut() {
            Some((last, tf)) if *last == t => *tf += 1,
            _ => out.push((t, 1)),
        }
    }
    out.into_boxed_slice()
}

/// FNV-1a, 64-bit: the checksum of the serialized index.
fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in data {
        h = (h ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A cursor over serialized bytes whose reads fail instead of panicking.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.data.len() - self.at
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], CoreError> {
        if n > self.remaining() {
            return Err(CoreError::InvalidArgument(
                "BM25 index bytes are corrupt: they end early".into(),
            ));
        }
        let out = &self.data[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], CoreError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, CoreError> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, CoreError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, CoreError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    fn f64(&mut self) -> Result<f64, CoreError> {
        Ok(f64::from_le_bytes(self.array()?))
    }
}

/// The slow, obvious BM25 over `docs` as `(id, text)`: every document tokenized and scored from
/// scratch with the formula of the module documentation. The twin the index is tested against.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn search_naive(
    docs: &[(i64, &str)],
    query: &str,
    k: usize,
    k1: f64,
    b: f64,
    analyzer: Analyzer,
) -> Vec<(i64, f64)> {
    search_naive_max_df(docs, query, k, (k1, b, 1.0), analyzer)
}

/// [`search_naive`] with the query terms in more than a share `max_df` of the documents left
/// out; `params` is `(k1, b, max_df)`.
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn search_naive_max_df(
    docs: &[(i64, &str)],
    query: &str,
    k: usize,
    params: (f64, f64, f64),
    analyzer: Analyzer,
) -> Vec<(i64, f64)> {
    let (k1, b, max_df) = params;
    let tokenized: Vec<(i64, Vec<String>)> =
        docs.iter().map(|&(id, text)| (id, tokenize(text, analyzer))).collect();
    let n = tokenized.len();
    if n == 0 || k == 0 {
        return Vec::new();
    }
    let total: usize = tokenized.iter().map(|(_, t)| t.len()).sum();
    let avgdl = total as f64 / n as f64;
    let mut scores: Vec<f64> = vec![0.0; n];
    for q in tokenize(query, analyzer) {
        let df = tokenized.iter().filter(|(_, t)| t.contains(&q)).count();
        if !weighed(n, df, max_df) {
            continue;
        }
        for (d, (_, tokens)) in tokenized.iter().enumerate() {
            let tf = tokens.iter().filter(|t| **t == q).count();
            if tf > 0 {
                let len = tokens.len() as f64;
                scores[d] += term_score(idf(n, df), tf as f64, len, avgdl, k1, b);
            }
        }
    }
    let hits = tokenized.iter().zip(scores).filter(|(_, s)| *s > 0.0).map(|((id, _), s)| (*id, s));
    search::top_k(hits, k)
}
