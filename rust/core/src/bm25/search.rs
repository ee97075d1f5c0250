//! Top-k BM25 search: MaxScore dynamic pruning (Turtle & Flood 1995) over the posting lists, and
//! the exhaustive term-at-a-time search it is tested against.
//!
//! Both return the same ids with the same scores to the last bit, in the same order (best first,
//! ties to the lower id): a document's score is always summed over the query's tokens in query
//! order, starting from zero, whatever order the pruned search visits the terms in.
//!
//! MaxScore over windows of slots (as Lucene's `MaxScoreBulkScorer` does). Each distinct query
//! term has an upper bound on what it adds to any live document (`count * idf * the largest tf
//! factor of its postings`, see [`TfBound`]). Terms are sorted by bound; the weakest terms whose
//! bounds sum below the k-th best score so far (the threshold) are *non-essential*: a document
//! holding only them cannot enter the top k. Per window of slots (16 at first, doubling to
//! `WINDOW`), the essential terms' postings are summed term at a time into the window's cells;
//! a cell whose partial score plus the non-essential bounds reaches the threshold survives, and
//! the non-essential lists, strongest first, are merged with the survivors, dropping each one
//! that can no longer make it. Survivors get their exact score from the forward index. Common
//! words, whose lists hold most documents and whose idf is small, become non-essential after
//! the first window, so most of their postings are never scored. Partial scores use a tabulated
//! tf factor ([`Factors`]); bounds are compared with a relative slack of a few ulps per token
//! ([`Bound`]) so that rounding never prunes a document that belongs in the top k, and a bound
//! equal to the threshold is kept (the document could tie and win on its lower id).

use std::collections::BinaryHeap;

use super::{for_each_token, idf, term_score, weighed, Bm25Index, Doc, DEAD};

thread_local! {
    /// The per-slot score accumulator of the exhaustive search, kept per thread between
    /// queries and left all zero after each (only touched cells are written, and taken back).
    static SCRATCH: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Slots scored together by the pruned search (its window of cells is 16 KiB, in L1). Windows
/// start at `FIRST_WINDOW` slots and double: until `k` hits are kept nothing is pruned, so the
/// first ones are kept small to set the threshold early.
const WINDOW: u32 = 2048;
const FIRST_WINDOW: u32 = 16;

/// Indexes with fewer slots are searched exhaustively (see [`Bm25Index::search`]).
const PRUNE_MIN_SLOTS: usize = 32_768;

thread_local! {
    /// The pruned search's window of partial scores, all zero between windows.
    static WINDOW_SCRATCH: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Up to this many `(tf, shortest length)` points bound one term's contribution.
const TF_BOUND_POINTS: usize = 4;

/// An upper bound on one term's BM25 factor `tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avgdl))`
/// over its postings that holds for every `avgdl`: the factor grows with `tf` and shrinks with
/// `len`, so the Pareto points `(tf, shortest len with that tf or more)` bound it, and the
/// maximum over them is exact for the postings seen. Kept as it is when documents leave (then it
/// may be loose, never too low) and rebuilt by compaction. Past `TF_BOUND_POINTS` points the two
/// of highest tf merge into `(higher tf, shorter len)`, which bounds both.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TfBound {
    /// Sorted by tf ascending (and so by len ascending); unused points have tf 0.
    points: [(u32, u32); TF_BOUND_POINTS],
}

impl TfBound {
    pub(super) fn add(&mut self, tf: u32, len: u32) {
        let used = self.points.iter().take_while(|p| p.0 > 0).count();
        if self.points[..used].iter().any(|&(t, l)| t >= tf && l <= len) {
            return;
        }
        let mut next = [(0u32, 0u32); TF_BOUND_POINTS + 1];
        let mut n = 0;
        for &(t, l) in &self.points[..used] {
            if !(t <= tf && l >= len) {
                next[n] = (t, l);
                n += 1;
            }
        }
        next[n] = (tf, len);
        n += 1;
        next[..n].sort_unstable();
        if n > TF_BOUND_POINTS {
            next[n - 2] = (next[n - 1].0, next[n - 2].1);
            n -= 1;
        }
        self.points = [(0, 0); TF_BOUND_POINTS];
        self.points[..n].copy_from_slice(&next[..n]);
    }

    /// The largest contribution any posting seen can make, with the scoring expression itself.
    fn max_score(&self, idf: f64, avgdl: f64, k1: f64, b: f64) -> f64 {
        self.points
            .iter()
            .take_while(|p| p.0 > 0)
            .map(|&(tf, len)| term_score(idf, f64::from(tf), f64::from(len), avgdl, k1, b))
            .fold(0.0, f64::max)
    }
}

/// One distinct query term during a pruned search.
struct Cursor<'a> {
    postings: &'a [(u32, u32)],
    at: usize,
    /// `idf * count` (count: how many times the query holds the term): times the tf factor,
    /// the term's share of a partial score.
    weight: f64,
    /// `count` times the term's largest contribution: no document gets more from it.
    bound: f64,
}

impl Cursor<'_> {
    fn slot(&self) -> u32 {
        self.postings.get(self.at).map_or(u32::MAX, |p| p.0)
    }
}

/// A document's exact score for one query, from the forward index: each distinct term's
/// contribution, summed over the query's tokens in order, as the exhaustive search sums them
/// (so the pruned, counted and chosen-document scores equal its own to the bit).
struct Exact<'a> {
    /// `(term, idf)` by distinct-term index.
    terms: &'a [(u32, f64)],
    /// Each query token's distinct-term index, in order.
    order: &'a [usize],
    avgdl: f64,
    k1: f64,
    b: f64,
    contribution: Vec<f64>,
}

impl<'a> Exact<'a> {
    fn new(terms: &'a [(u32, f64)], order: &'a [usize], avgdl: f64, k1: f64, b: f64) -> Self {
        Exact { terms, order, avgdl, k1, b, contribution: vec![0.0; terms.len()] }
    }

    fn score(&mut self, doc: &Doc) -> f64 {
        let len = f64::from(doc.len);
        for (u, &(term, idf)) in self.terms.iter().enumerate() {
            self.contribution[u] = match doc.terms.binary_search_by_key(&term, |p| p.0) {
                Ok(at) => {
                    let tf = f64::from(doc.terms[at].1);
                    term_score(idf, tf, len, self.avgdl, self.k1, self.b)
                }
                Err(_) => 0.0,
            };
        }
        self.order.iter().fold(0.0, |acc, &u| acc + self.contribution[u])
    }
}

/// The BM25 tf factor `tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avgdl))` of one query,
/// tabulated for small `tf` and `len`: partial scores are only compared with bounds (with slack),
/// so `idf * factor` may differ from the exact expression by an ulp or two, and the two divisions
/// per posting were most of the cost of scoring one.
struct Factors {
    table: Vec<f64>,
    avgdl: f64,
    k1: f64,
    b: f64,
}

const FACTOR_TFS: u32 = 4;
const FACTOR_LENS: u32 = 128;

impl Factors {
    fn new(avgdl: f64, k1: f64, b: f64) -> Self {
        let mut table = Vec::with_capacity((FACTOR_TFS * FACTOR_LENS) as usize);
        for tf in 1..=FACTOR_TFS {
            for len in 0..FACTOR_LENS {
                table.push(term_score(1.0, f64::from(tf), f64::from(len), avgdl, k1, b));
            }
        }
        Factors { table, avgdl, k1, b }
    }

    #[inline]
    fn get(&self, tf: u32, len: u32) -> f64 {
        if tf <= FACTOR_TFS && len < FACTOR_LENS {
            self.table[((tf - 1) * FACTOR_LENS + len) as usize]
        } else {
            term_score(1.0, f64::from(tf), f64::from(len), self.avgdl, self.k1, self.b)
        }
    }
}

/// The kept hits of a search: a bounded max-heap whose top is the worst kept hit.
struct TopK {
    heap: BinaryHeap<Hit>,
    k: usize,
    /// The score a document must reach to enter (it enters on a tie only with a lower id):
    /// the worst kept score once `k` are kept, minus infinity before.
    threshold: f64,
}

impl TopK {
    fn new(k: usize) -> Self {
        TopK { heap: BinaryHeap::with_capacity(k.min(1024) + 1), k, threshold: f64::NEG_INFINITY }
    }

    /// Offers a hit; it is kept if it ranks above the worst kept one or fewer than `k` are kept.
    fn offer(&mut self, id: i64, score: f64) {
        let hit = Hit(id, score);
        if self.heap.len() < self.k {
            self.heap.push(hit);
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if hit < *worst {
                *worst = hit;
            }
        }
        if self.heap.len() == self.k {
            self.threshold = self.heap.peek().map_or(f64::NEG_INFINITY, |h| h.1);
        }
    }

    fn into_sorted(self) -> Vec<(i64, f64)> {
        self.heap.into_sorted_vec().into_iter().map(|Hit(id, score)| (id, score)).collect()
    }
}

/// Whether a summed bound can still reach the threshold, with slack for rounding: each of the
/// document's exact score and a partial score or bound is a sum of at most `tokens` floats,
/// each term within a few ulps of the exact one.
struct Bound {
    slack: f64,
}

impl Bound {
    fn new(tokens: usize) -> Self {
        Bound { slack: 1.0 + (4 * tokens + 16) as f64 * f64::EPSILON }
    }

    #[inline]
    fn reaches(&self, bound: f64, threshold: f64) -> bool {
        bound * self.slack >= threshold
    }
}

impl Bm25Index {
    /// The `k` best documents for `query` as `(id, score)`, best first, ties to the lower id. Only
    /// documents matching at least one query token are returned, so there may be fewer than `k`.
    /// Pruned (see the module documentation); equal to the exhaustive search.
    pub fn search(&self, query: &str, k: usize) -> Vec<(i64, f64)> {
        // With k at least the corpus nothing can be pruned, and below a few windows of slots
        // pruning saves less than it costs (10k passages: 0.11 ms pruned, 0.095 exhaustive).
        if k >= self.len() || self.docs.len() < PRUNE_MIN_SLOTS {
            return self.counted(query, k);
        }
        self.pruned(query, k)
    }

    /// The counted search for any `k`, so that the tests can compare it with
    /// [`Bm25Index::search_exhaustive`] for every `k` and index size.
    #[cfg(any(test, feature = "testing"))]
    #[doc(hidden)]
    pub fn search_counted(&self, query: &str, k: usize) -> Vec<(i64, f64)> {
        self.counted(query, k)
    }

    /// The MaxScore search for any `k`, so that the tests can compare it with
    /// [`Bm25Index::search_exhaustive`] for every `k` and index size.
    #[cfg(any(test, feature = "testing"))]
    #[doc(hidden)]
    pub fn search_pruned(&self, query: &str, k: usize) -> Vec<(i64, f64)> {
        self.pruned(query, k)
    }

    /// The exhaustive search for any `k`: the reference the pruned search is tested against.
    #[cfg(any(test, feature = "testing"))]
    #[doc(hidden)]
    pub fn search_exhaustive(&self, query: &str, k: usize) -> Vec<(i64, f64)> {
        self.exhaustive(query, k)
    }

    /// Each of `ids`' scores for `query`, in their order: as [`Bm25Index::search`] scores a
    /// document (the query's tokens summed in order, to the bit), 0 for an id no live document
    /// has or one that matches no token. For ranking a few documents chosen by something else
    /// (recall's passages of a day a message names) without searching the whole index.
    pub fn scores(&self, query: &str, ids: &[i64]) -> Vec<f64> {
        let n = self.len();
        if n == 0 || ids.is_empty() {
            return vec![0.0; ids.len()];
        }
        let avgdl = self.total_len as f64 / n as f64;
        let (known, order) = self.query_terms(query);
        let terms: Vec<(u32, f64)> = known.iter().map(|&(term, idf, _)| (term, idf)).collect();
        let mut exact = Exact::new(&terms, &order, avgdl, self.k1, self.b);
        ids.iter()
            .map(|id| match self.slot_of.get(id) {
                Some(&slot) => exact.score(&self.docs[slot as usize]),
                None => 0.0,
            })
            .collect()
    }

    /// The MaxScore search (what [`Bm25Index::search`] runs for `k` below the corpus size).
    fn pruned(&self, query: &str, k: usize) -> Vec<(i64, f64)> {
        let n = self.len();
        if n == 0 || k == 0 {
            return Vec::new();
        }
        let (k1, b) = (self.k1, self.b);
        let avgdl = self.total_len as f64 / n as f64;
        // The query's known terms: `order` holds each token's distinct-term index, in order.
        let (known, order) = self.query_terms(query);
        if known.is_empty() {
            return Vec::new();
        }
        // (term, idf) by distinct-term index, for the exact score.
        let terms: Vec<(u32, f64)> = known.iter().map(|&(term, idf, _)| (term, idf)).collect();
        let mut cursors: Vec<Cursor> = known
            .iter()
            .map(|&(term, idf, count)| Cursor {
                postings: &self.postings[term as usize],
                at: 0,
                weight: idf * count,
                bound: self.tf_bounds[term as usize].max_score(idf, avgdl, k1, b) * count,
            })
            .collect();
        let factors = Factors::new(avgdl, k1, b);
        // Weakest bound first; `below[i]` bounds what terms `0..i` give any document together.
        cursors.sort_by(|x, y| x.bound.total_cmp(&y.bound));
        let mut below = vec![0.0; cursors.len() + 1];
        for (i, c) in cursors.iter().enumerate() {
            below[i + 1] = below[i] + c.bound;
        }
        let check = Bound::new(order.len());
        let mut top = TopK::new(k);
        let mut exact = Exact::new(&terms, &order, avgdl, k1, b);
        let slots = self.docs.len() as u32;
        let mut survivors: Vec<(u32, f64)> = Vec::new();
        WINDOW_SCRATCH.with_borrow_mut(|acc| {
            acc.resize(WINDOW as usize, 0.0);
            let mut base = 0u32;
            let mut window = FIRST_WINDOW;
            while base < slots {
                // Terms `..essential` are non-essential: they alone cannot reach the threshold.
                let threshold = top.threshold;
                let essential =
                    (0..cursors.len()).find(|&i| check.reaches(below[i + 1], threshold));
                let Some(essential) = essential else { break };
                let next = cursors[essential..].iter().map(Cursor::slot).min().unwrap_or(u32::MAX);
                if next >= slots {
                    break;
                }
                base = base.max(next);
                let end = base.saturating_add(window).min(slots);
                window = (window * 2).min(WINDOW);
                // Essential postings of the window, term at a time into the window's cells.
                for c in &mut cursors[essential..] {
                    while let Some(&(slot, tf)) = c.postings.get(c.at) {
                        if slot >= end {
                            break;
                        }
                        let len = self.lens[slot as usize];
                        if len != DEAD {
                            acc[(slot - base) as usize] += c.weight * factors.get(tf, len);
                        }
                        c.at += 1;
                    }
                }
                // Documents that may still enter, with their partial scores.
                let floor = below[essential];
                survivors.clear();
                for (j, cell) in acc[..(end - base) as usize].iter_mut().enumerate() {
                    let partial = std::mem::take(cell);
                    if partial != 0.0 && check.reaches(partial + floor, top.threshold) {
                        survivors.push((base + j as u32, partial));
                    }
                }
                // Non-essential terms, strongest first, merged with the survivors (both in slot
                // order): each list is walked once per window instead of searched per document.
                for i in (0..essential).rev() {
                    if survivors.is_empty() {
                        break;
                    }
                    let c = &mut cursors[i];
                    let threshold = top.threshold;
                    survivors.retain_mut(|(slot, partial)| {
                        while c.postings.get(c.at).is_some_and(|p| p.0 < *slot) {
                            c.at += 1;
                        }
                        if let Some(&(s, tf)) = c.postings.get(c.at) {
                            if s == *slot {
                                *partial += c.weight * factors.get(tf, self.lens[s as usize]);
                            }
                        }
                        check.reaches(*partial + below[i], threshold)
                    });
                }
                for &(slot, _) in &survivors {
                    let doc = &self.docs[slot as usize];
                    let score = exact.score(doc);
                    if check.reaches(score, top.threshold) {
                        top.offer(doc.id, score);
                    }
                }
                base = end;
            }
        });
        top.into_sorted()
    }

    /// The exhaustive search when the query holds a term more than once (a long query, such as
    /// the recent conversation, repeats its common words), else the exhaustive search itself.
    /// The exhaustive search walks a term's postings once per occurrence; here each distinct
    /// term's are walked once, adding `count` times its score (a sum in another order, so only
    /// close to the exact one). Only documents whose close score may reach the `k`-th best one
    /// (with slack for rounding, as the pruned search compares bounds) get their exact score, from
    /// the forward index: the same ids and scores, to the bit (about `k` of them: the slack is
    /// a few ulps). On the recent conversations of `benches/recall_latency.py` (80 tokens, 62
    /// distinct) over its 10k facts, through the binding: p50 0.46 -> 0.28 ms.
    fn counted(&self, query: &str, k: usize) -> Vec<(i64, f64)> {
        let n = self.len();
        if n == 0 || k == 0 {
            return Vec::new();
        }
        let (terms, order) = self.query_terms(query);
        if terms.len() == order.len() || k >= n {
            return self.exhaustive(query, k); // nothing repeated, or every match kept anyway
        }
        let (k1, b) = (self.k1, self.b);
        let avgdl = self.total_len as f64 / n as f64;
        let check = Bound::new(order.len());
        SCRATCH.with_borrow_mut(|acc| {
            if acc.len() < self.docs.len() {
                acc.resize(self.docs.len(), 0.0);
            }
            let mut touched: Vec<u32> = Vec::new();
            for &(term, idf, count) in &terms {
                for &(slot, tf) in &self.postings[term as usize] {
                    let len = self.lens[slot as usize];
                    if len == DEAD {
                        continue;
                    }
                    let s = count * term_score(idf, f64::from(tf), f64::from(len), avgdl, k1, b);
                    let cell = &mut acc[slot as usize];
                    if *cell == 0.0 {
                        touched.push(slot);
                    }
                    *cell += s;
                }
            }
            // The k-th best close score: no document below it (with slack) can enter.
            let mut close = TopK::new(k);
            for &slot in &touched {
                close.offer(i64::from(slot), acc[slot as usize]);
            }
            let threshold = close.threshold;
            let mut top = TopK::new(k);
            let idfs: Vec<(u32, f64)> = terms.iter().map(|&(term, idf, _)| (term, idf)).collect();
            let mut exact = Exact::new(&idfs, &order, avgdl, k1, b);
            for &slot in &touched {
                let score = std::mem::take(&mut acc[slot as usize]);
                // Both the close and the exact score may be off by the slack: twice over.
                if !check.reaches(score * check.slack, threshold) {
                    continue;
                }
                let doc = &self.docs[slot as usize];
                top.offer(doc.id, exact.score(doc));
            }
            top.into_sorted()
        })
    }

    /// The query's known terms as `(term, idf, count)`, distinct, in first-seen order, and each
    /// token's place among them, in order.
    fn query_terms(&self, query: &str) -> (Vec<(u32, f64, f64)>, Vec<usize>) {
        let n = self.len();
        let mut terms: Vec<(u32, f64, f64)> = Vec::new();
        let mut order: Vec<usize> = Vec::new();
        let mut buf = String::new();
        for_each_token(query, self.analyzer, &mut buf, |t| {
            let Some(&term) = self.term_ids.get(t) else { return };
            let df = self.df[term as usize] as usize;
            if !weighed(n, df, self.max_df) {
                return;
            }
            if let Some(u) = terms.iter().position(|c| c.0 == term) {
                terms[u].2 += 1.0;
                order.push(u);
            } else {
                order.push(terms.len());
                terms.push((term, idf(n, df), 1.0));
            }
        });
        (terms, order)
    }

    /// Every posting of every query term scored into a per-slot accumulator, then the top `k`:
    /// the reference the pruned search is tested against, and the faster path when `k` is at
    /// least the corpus size.
    fn exhaustive(&self, query: &str, k: usize) -> Vec<(i64, f64)> {
        let n = self.len();
        if n == 0 || k == 0 {
            return Vec::new();
        }
        let (k1, b) = (self.k1, self.b);
        let avgdl = self.total_len as f64 / n as f64;
        SCRATCH.with_borrow_mut(|acc| {
            if acc.len() < self.docs.len() {
                acc.resize(self.docs.len(), 0.0);
            }
            let mut touched: Vec<u32> = Vec::new();
            let mut buf = String::new();
            for_each_token(query, self.analyzer, &mut buf, |t| {
                let Some(&term) = self.term_ids.get(t) else { return };
                let df = self.df[term as usize] as usize;
                if !weighed(n, df, self.max_df) {
                    return;
                }
                let idf = idf(n, df);
                for &(slot, tf) in &self.postings[term as usize] {
                    let len = self.lens[slot as usize];
                    if len == DEAD {
                        continue;
                    }
                    let len = f64::from(len);
                    let s = term_score(idf, f64::from(tf), len, avgdl, k1, b);
                    let cell = &mut acc[slot as usize];
                    if *cell == 0.0 {
                        touched.push(slot);
                    }
                    *cell += s;
                }
            });
            // Every touched cell is taken back to zero here, whatever k is.
            let hits = touched
                .iter()
                .map(|&s| (self.docs[s as usize].id, std::mem::take(&mut acc[s as usize])));
            top_k(hits, k)
        })
    }
}

/// A hit ordered by rank: `a < b` when `a` is better (higher score, then lower id), so a
/// max-heap of hits keeps the worst kept hit on top.
#[derive(Clone, Copy)]
struct Hit(i64, f64);

impl PartialEq for Hit {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Hit {}

impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Hit {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.1.total_cmp(&self.1).then(self.0.cmp(&other.0))
    }
}

/// The best `k` hits, best first, ties to the lower id. A bounded heap: most hits lose one
/// comparison against the worst kept one. Collecting every hit and `select_nth_unstable_by`
/// spent as long selecting as scoring on a query matching most of 100k documents.
pub(super) fn top_k(hits: impl Iterator<Item = (i64, f64)>, k: usize) -> Vec<(i64, f64)> {
    let mut top = TopK::new(k);
    for (id, score) in hits {
        top.offer(id, score);
    }
    top.into_sorted()
}
