//! Deterministic inputs for the benches: a fixed-seed xorshift generator and the workloads of the
//! Python benches (`benches/*.py` at the repository root), rebuilt here without numpy.

// Each bench compiles its own copy of this module and uses only part of it; dead_code cannot see
// what the other benches use.
#![allow(dead_code)]

/// The benches' clock: 2026-01-01 00:00 UTC, as in `benches/compare_activation.py`.
pub const NOW: f64 = 1_767_225_600.0;
/// One seed for every input, so that every run measures the same data.
pub const SEED: u64 = 20_261;

const SECONDS_PER_MINUTE: f64 = 60.0;
const MINUTES_PER_YEAR: f64 = 525_600.0;
const MAX_TRACES_PER_EPISODE: u64 = 39;

/// xorshift64* (Vigna): no dependency, and the same numbers on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        // Any seed, 0 included, gives a non-zero state.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo)
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range(0, items.len() as u64) as usize]
    }

    /// Standard normal, by Box-Muller.
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (1.0 - self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Log-normal around `median`.
    pub fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.normal()).exp()
    }

    /// A Zipf-like rank from 1, `P(k) ~ k^-a` (numpy's `zipf`), from the continuous Pareto.
    pub fn zipf(&mut self, a: f64) -> u64 {
        (1.0 - self.uniform()).powf(-1.0 / (a - 1.0)).min(1e18) as u64
    }
}

/// `n` traces as CSR `(offsets, at, score)` in episodes of 1 to 39 traces (20 on average), ages
/// log-uniform from a minute to a year, scores in (0, 1] (`compare_activation.trace_log`).
pub fn trace_log(n: usize, seed: u64) -> (Vec<i64>, Vec<f64>, Vec<f64>) {
    let mut rng = Rng::new(seed);
    let mut offsets = vec![0];
    let mut end = 0;
    while end < n {
        end = (end + rng.range(1, MAX_TRACES_PER_EPISODE + 1) as usize).min(n);
        offsets.push(end as i64);
    }
    let at = (0..n).map(|_| NOW - SECONDS_PER_MINUTE * MINUTES_PER_YEAR.powf(rng.uniform()));
    let at = at.collect();
    let score = (0..n).map(|_| 1.0 - rng.uniform()).collect();
    (offsets, at, score)
}

/// The same traces as appended: sorted by time, each with its episode id (`in_log_order`).
pub fn in_log_order(offsets: &[i64], at: &[f64], score: &[f64]) -> (Vec<i64>, Vec<f64>, Vec<f64>) {
    let mut traces: Vec<(f64, i64, f64)> = Vec::with_capacity(at.len());
    for (g, w) in offsets.windows(2).enumerate() {
        for i in w[0] as usize..w[1] as usize {
            traces.push((at[i], g as i64, score[i]));
        }
    }
    traces.sort_by(|a, b| a.0.total_cmp(&b.0));
    let group = traces.iter().map(|t| t.1).collect();
    let at = traces.iter().map(|t| t.0).collect();
    let score = traces.iter().map(|t| t.2).collect();
    (group, at, score)
}

/// The activations of `n` episodes of 20 traces each (`episode_activations`).
pub fn episode_activations(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            (0..20)
                .map(|_| {
                    let minutes = MINUTES_PER_YEAR.powf(rng.uniform());
                    (1.0 - rng.uniform()) / minutes.max(1.0).sqrt()
                })
                .sum()
        })
        .collect()
}

/// One memory's fade decision (`decision_memory`): 10,000 episodes of 20 traces, their token
/// sizes (log-normal around 2,000), the tie keys, a view of all of them and a landing at half.
pub struct Decision {
    pub offsets: Vec<i64>,
    pub at: Vec<f64>,
    pub score: Vec<f64>,
    pub tie: Vec<i64>,
    pub sizes: Vec<i64>,
    pub view: i64,
    pub landing: i64,
}

pub fn decision_memory(seed: u64) -> Decision {
    const EPISODES: usize = 10_000;
    const TRACES_PER_EPISODE: usize = 20;
    let mut rng = Rng::new(seed);
    let n = EPISODES * TRACES_PER_EPISODE;
    let offsets = (0..=EPISODES).map(|e| (e * TRACES_PER_EPISODE) as i64).collect();
    let at = (0..n).map(|_| NOW - SECONDS_PER_MINUTE * MINUTES_PER_YEAR.powf(rng.uniform()));
    let at = at.collect();
    let score = (0..n).map(|_| 1.0 - rng.uniform()).collect();
    let tie = (0..EPISODES as i64).collect();
    let sizes: Vec<i64> =
        (0..EPISODES).map(|_| (rng.lognormal(2_000.0, 0.8).round() as i64).max(1)).collect();
    let view = sizes.iter().sum();
    Decision { offsets, at, score, tie, sizes, view, landing: view / 2 }
}

/// `n` units of a conversation (`compare_split.conversation`): token sizes log-normal around
/// 150 (at least 1) and a random score for each of the `n - 1` boundaries.
pub fn conversation(n: usize, seed: u64) -> (Vec<i64>, Vec<f64>) {
    let mut rng = Rng::new(seed);
    let sizes = (0..n).map(|_| (rng.lognormal(150.0, 0.8).round() as i64).max(1)).collect();
    let scores = (0..n.saturating_sub(1)).map(|_| rng.uniform()).collect();
    (sizes, scores)
}

/// The vocabulary of `benches/bench_bm25.py`: four stopwords, then 20,000 words of which every
/// third is a plural.
pub fn bm25_vocabulary() -> Vec<String> {
    let stop = ["the", "of", "and", "is"].map(String::from);
    let words = (0..20_000).map(|j| format!("w{j}{}", if j % 3 == 0 { "s" } else { "" }));
    stop.into_iter().chain(words).collect()
}

/// `n` texts of `lo..=hi` words drawn from `vocabulary` with Zipf-like ranks (exponent 1.3).
pub fn zipf_texts(rng: &mut Rng, vocabulary: &[String], n: usize, lo: u64, hi: u64) -> Vec<String> {
    (0..n)
        .map(|_| {
            let words = rng.range(lo, hi + 1);
            let drawn: Vec<&str> = (0..words)
                .map(|_| {
                    vocabulary[((rng.zipf(1.3) - 1) % vocabulary.len() as u64) as usize].as_str()
                })
                .collect();
            drawn.join(" ")
        })
        .collect()
}

const COMMON: &str = "the of and to a in is it you that he was for on are with as I his they be \
at one have this from or had by not word but what some we can out other were all there when up \
use your how said an each she which do their time if will way about many then them write would \
like so these her long make thing see him two has look more day could go come did number sound no \
most people my over know water than call first who may down side been now find any new work part \
take get place made live where after back little only round man year came show every good me give \
our under name very through just form sentence great think say help low line differ turn cause \
much mean before move right boy old too same tell does set three want air well also play small end \
put home read hand port large spell add even land here must big high such follow act why ask men \
change went light kind off need house picture try us again animal point mother world near build";
const RARE: &str = "asynchronous idempotency serialization misconfigured hyperparameter \
reproducibility microservice observability latency throughput backpressure retry timeout webhook \
middleware authentication deduplication tokenizer embedding retrieval summarization conversation \
forgetting significance consolidation episodic reranking quantization Kubernetes PostgreSQL \
SQLite Redis Terraform PyTorch numpy FastAPI GraphQL OAuth reimbursement itinerary \
questionnaire troubleshooting onboarding refactoring bottleneck orchestration Wednesday February";
const NAMES: &[&str] =
    &["Alice", "Bob", "Priya", "Mateo", "Yuki", "Olusegun", "Ingrid", "Dmitri", "Fatima", "Chen"];
const CONTRACTIONS: &[&str] = &["don't", "it's", "we'll", "I'm", "they've", "you're", "can't"];
const NON_ASCII: &[&str] = &["Zürich", "São Paulo", "Dvořák", "café", "naïve", "€12", "—", "…"];
const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ve", "dra", "sto", "qui", "zen", "pha", "tor", "bel", "gri", "nus", "ox",
    "ly", "an", "cor", "vel", "tri", "mon", "sa", "ru", "fen", "gal", "pi", "ter", "vos", "ad",
];
const CODE: &[&str] = &[
    "def fetch_user(user_id: int) -> dict:\n    resp = client.get(f\"/users/{user_id}\")\n    \
     return resp.json()\n",
    "SELECT id, role, created_at FROM messages WHERE episode_id = $1 ORDER BY seq LIMIT 50;\n",
    "{\"model\": \"gpt-4o\", \"temperature\": 0.2, \"max_tokens\": 512, \"stream\": false}\n",
];

/// Chat-like English in the manner of `compare_tokens.chat_text`: common words, rarer jargon, a
/// long tail of made-up names (Zipf-skewed, so a few recur), numbers, contractions, some
/// non-ASCII; messages of sentences, lists and code.
pub struct ChatText {
    rng: Rng,
    common: Vec<&'static str>,
    rare: Vec<&'static str>,
}

impl ChatText {
    pub fn new(seed: u64) -> Self {
        ChatText {
            rng: Rng::new(seed),
            common: COMMON.split_whitespace().collect(),
            rare: RARE.split_whitespace().collect(),
        }
    }

    /// A made-up word: the same for the same Zipf-drawn number, so that a few recur.
    fn tail_word(&mut self) -> String {
        let mut word_rng = Rng::new(self.rng.zipf(1.2));
        let syllables = word_rng.range(2, 5);
        let word: String = (0..syllables).map(|_| *word_rng.pick(SYLLABLES)).collect();
        if word_rng.uniform() < 0.4 {
            let mut chars = word.chars();
            chars.next().map_or(String::new(), |c| c.to_uppercase().chain(chars).collect())
        } else {
            word
        }
    }

    pub fn sentence(&mut self) -> String {
        let n = self.rng.range(4, 21);
        let mut words: Vec<String> = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let roll = self.rng.uniform();
            let word = if roll < 0.74 {
                (*self.rng.pick(&self.common)).to_string()
            } else if roll < 0.84 {
                (*self.rng.pick(&self.rare)).to_string()
            } else if roll < 0.89 {
                self.tail_word()
            } else if roll < 0.93 {
                (*self.rng.pick(NAMES)).to_string()
            } else if roll < 0.96 {
                (*self.rng.pick(CONTRACTIONS)).to_string()
            } else if roll < 0.985 {
                self.rng.range(0, 100_000).to_string()
            } else {
                (*self.rng.pick(NON_ASCII)).to_string()
            };
            words.push(word);
        }
        let mut text = words.join(" ");
        if let Some(first) = text.get(..1) {
            text = first.to_uppercase() + &text[1..];
        }
        text.push(*self.rng.pick(&['.', '.', '.', '?', '!', ':']));
        text
    }

    pub fn message(&mut self) -> String {
        let shape = self.rng.uniform();
        if shape < 0.6 {
            let n = self.rng.range(1, 7);
            (0..n).map(|_| self.sentence()).collect::<Vec<_>>().join(" ")
        } else if shape < 0.8 {
            let items: Vec<String> = (0..3).map(|_| format!("- {}", self.sentence())).collect();
            format!("## {}\n\n{}", self.sentence(), items.join("\n"))
        } else if shape < 0.9 {
            let code = *self.rng.pick(CODE);
            format!("{}\n\n```\n{code}```\n\n{}", self.sentence(), self.sentence())
        } else {
            format!("**{}**: {}", self.rng.pick(NAMES), self.sentence())
        }
    }

    /// At least `n_bytes` of messages, each with its role, as a conversation's text.
    pub fn text(&mut self, n_bytes: usize) -> String {
        let mut text = String::with_capacity(n_bytes + 1024);
        while text.len() < n_bytes {
            let role = if self.rng.uniform() < 0.45 { "user" } else { "assistant" };
            text.push_str(role);
            text.push_str(": ");
            text.push_str(&self.message());
            text.push_str("\n\n");
        }
        text
    }
}

/// `text` cut into consecutive passages of at least `n_bytes`, each ending where a space begins
/// the next (`compare_tokens.passages`).
pub fn passages(text: &str, n_bytes: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut from = (start + n_bytes).min(text.len());
        while !text.is_char_boundary(from) {
            from += 1;
        }
        let end = text[from..].find(' ').map_or(text.len(), |j| from + j);
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// Asserts `got` within `relative` of `want`, entry by entry (numpy's `allclose` with `atol=0`).
pub fn assert_close(got: &[f64], want: &[f64], relative: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= relative * w.abs(), "entry {i}: {g} vs {w}");
    }
}
