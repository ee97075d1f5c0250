"""Token counting throughput: fadeway against tiktoken and a pure-Python BPE, in one run.

    python benches/compare_tokens.py [--mb 3] [--out benches/RESULTS-tokens.md]

All three count with the same ranks: tiktoken's `Encoding` and the slow twin are built from the
ranks fadeway embeds (`tests/reference.py`), so the counts must be identical; the script checks
that before it times anything. The text is chat-like English generated here from a fixed seed
(`chat_text`), so nothing is downloaded and every run measures the same bytes. Each figure is the
best of several repeats on one thread; ratios are against tiktoken.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import reference  # noqa: E402  (from tests/, put on the path above)
from fadeway import _core  # noqa: E402

SEED = 20260
PASSAGE_BYTES = 130
BIG_TEXT_BYTES = 3_000_000
SLOW_SAMPLE_BYTES = 100_000
REPEATS = 7

# Common English words, then longer and rarer ones (several tokens each), so that the text is not
# all single-token words.
_COMMON = """the of and to a in is it you that he was for on are with as I his they be at one have
this from or had by not word but what some we can out other were all there when up use your how
said an each she which do their time if will way about many then them write would like so these
her long make thing see him two has look more day could go come did number sound no most people my
over know water than call first who may down side been now find any new work part take get place
made live where after back little only round man year came show every good me give our under name
very through just form sentence great think say help low line differ turn cause much mean before
move right boy old too same tell does set three want air well also play small end put home read
hand port large spell add even land here must big high such follow act why ask men change went
light kind off need house picture try us again animal point mother world near build self earth
father head stand own page should country found answer school grow study still learn plant cover
food sun four between state keep eye never last let thought city tree cross farm hard start might
story saw far sea draw left late run while press close night real life few north open seem
together next white children begin got walk example ease paper group always music those both mark
often letter until mile river car feet care second book carry took science eat room friend began
idea fish mountain stop once base hear horse cut sure watch color face wood main enough plain girl
usual young ready above ever red list though feel talk bird soon body dog family direct pose leave
song measure door product black short numeral class wind question happen complete ship area half
rock order fire south problem piece told knew pass since top whole king space heard best hour
better true during hundred five remember step early hold west ground interest reach fast verb sing
listen six table travel less morning ten simple several vowel toward war lay against pattern slow
center love person money serve appear road map rain rule govern pull cold notice voice unit power
town fine certain fly fall lead cry dark machine note wait plan figure star box noun field rest
correct able pound done beauty drive stood contain front teach week final gave green oh quick
develop ocean warm free minute strong special mind behind clear tail produce fact street inch
multiply nothing course stay wheel full force blue object decide surface deep moon island foot
system busy test record boat common gold possible plane stead dry wonder laugh thousand ago ran
check game shape equate hot miss brought heat snow tire bring yes distant fill east paint language
among"""
_RARE = """asynchronous idempotency serialization deserialization misconfigured hyperparameter
reproducibility microservice observability latency throughput backpressure retry timeout webhook
middleware authentication authorization deduplication tokenizer embedding retrieval summarization
conversation forgetting significance consolidation episodic semantic reranking quantization
Kubernetes PostgreSQL SQLite Redis Terraform PyTorch numpy msgspec FastAPI GraphQL OAuth
unsubscribe reimbursement itinerary questionnaire acknowledgement troubleshooting
onboarding offboarding refactoring bottleneck cryptographic heuristics orchestration
photosynthesis mitochondria archaeological extraordinary counterintuitive indistinguishable
Wednesday February September Thursday Singapore Amsterdam Melbourne Barcelona"""
_NAMES = "Alice Bob Priya Mateo Yuki Olusegun Ingrid Dmitri Fatima Liam Chen Aisha Noah Sofia"
COMMON, RARE, NAMES = _COMMON.split(), _RARE.split(), _NAMES.split()
# A little non-ASCII, as chat has: names, quotes, dashes, currency, an emoji now and then.
NON_ASCII = ["Zürich", "São Paulo", "Dvořák", "café", "naïve", "résumé", "Malmö", "€12", "—", "…"]
EMOJI = ["🙂", "👍", "🚀", "✅"]
# The long tail: made-up names, products and jargon, drawn with a Zipf-like skew so a few recur
# and most are seen once or twice, as in real conversations (so that no cache sees only repeats).
_SYLLABLES = """ka lo mi ve dra sto qui zen pha tor bel gri nus ox ly an cor vel tri mon sa ru fen
gal pi ter vos ad ul mer cha bri ton zu ep ix dor lin kel ro"""
SYLLABLES = _SYLLABLES.split()
CONTRACTIONS = ["don't", "it's", "we'll", "I'm", "they've", "you're", "can't", "she'd"]
CODE = [
    (
        "def fetch_user(user_id: int) -> dict:\n"
        '    resp = client.get(f"/users/{user_id}", timeout=30)\n'
        "    resp.raise_for_status()\n    return resp.json()\n"
    ),
    "for (let i = 0; i < items.length; i++) {\n  total += items[i].price * items[i].qty;\n}\n",
    "SELECT id, role, created_at FROM messages WHERE episode_id = $1 ORDER BY seq LIMIT 50;\n",
    '{"model": "gpt-4o", "temperature": 0.2, "max_tokens": 512, "stream": false}\n',
    "$ pip install -e . && pytest -q --maxfail=1\n",
]


def _tail_word(rng: random.Random) -> str:
    # Seeding a private generator with a Zipf-skewed index makes word n the same every time.
    n = int(rng.paretovariate(0.2))
    word_rng = random.Random(n)
    word = "".join(word_rng.choice(SYLLABLES) for _ in range(word_rng.randint(2, 4)))
    return word.capitalize() if word_rng.random() < 0.4 else word


def _sentence(rng: random.Random) -> str:
    words = []
    for _ in range(rng.randint(4, 20)):
        roll = rng.random()
        if roll < 0.74:
            words.append(rng.choice(COMMON))
        elif roll < 0.84:
            words.append(rng.choice(RARE))
        elif roll < 0.89:
            words.append(_tail_word(rng))
        elif roll < 0.93:
            words.append(rng.choice(NAMES))
        elif roll < 0.96:
            words.append(rng.choice(CONTRACTIONS))
        elif roll < 0.985:
            words.append(str(rng.choice([rng.randint(0, 99), rng.randint(100, 99_999)])))
        else:
            words.append(rng.choice(NON_ASCII))
    if rng.random() < 0.15:
        words.insert(
            rng.randrange(len(words)), f"`{rng.choice(RARE).lower()}_{rng.choice(COMMON)}`"
        )
    if rng.random() < 0.05:
        words.append(f"(see https://docs.example.com/{rng.choice(COMMON)}/{rng.randint(1, 999)})")
    text = " ".join(words)
    if rng.random() < 0.25:
        text = text.replace(" ", ", ", 1)
    text = text[0].upper() + text[1:] + rng.choice(".....?!:")
    if rng.random() < 0.03:
        text += " " + rng.choice(EMOJI)
    return text


def _message(rng: random.Random) -> str:
    shape = rng.random()
    if shape < 0.6:
        return " ".join(_sentence(rng) for _ in range(rng.randint(1, 6)))
    if shape < 0.8:
        items = [f"{'-' if rng.random() < 0.5 else '1.'} {_sentence(rng)}" for _ in range(3)]
        return f"## {_sentence(rng).rstrip('.?!:')}\n\n" + "\n".join(items)
    if shape < 0.9:
        return f"{_sentence(rng)}\n\n```\n{rng.choice(CODE)}```\n\n{_sentence(rng)}"
    return f"**{rng.choice(NAMES)}** at {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}: " + (
        _sentence(rng)
    )


def chat_text(n_bytes: int, seed: int = SEED) -> str:
    """Chat-like English of at least `n_bytes` UTF-8 bytes, the same for the same seed."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < n_bytes:
        role = "user" if rng.random() < 0.45 else "assistant"
        part = f"{role}: {_message(rng)}\n\n"
        parts.append(part)
        size += len(part.encode("utf-8"))
    return "".join(parts)


def passages(text: str, n_bytes: int = PASSAGE_BYTES) -> list[str]:
    """`text` cut into consecutive passages of at least `n_bytes` UTF-8 bytes, each ending where
    a space begins the next (a passage is a sentence or a message, not a cut through a word)."""
    data = text.encode("utf-8")
    out = []
    start = 0
    while start < len(data):
        end = data.find(b" ", start + n_bytes)
        end = len(data) if end < 0 else end
        out.append(data[start:end].decode("utf-8"))
        start = end
    return out


def best_seconds(run: Callable[[], object], repeats: int = REPEATS) -> float:
    """The shortest of `repeats` wall-clock timings of `run()`."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def measure(name: str, text: str, parts: list[str], slow_text: str) -> list[tuple[str, ...]]:
    """Rows of (implementation, MB/s on the text, MB/s on passages, ns per passage, ratios)."""
    enc = reference.tiktoken_encoding(name)
    big_bytes = len(text.encode("utf-8"))
    part_bytes = sum(len(p.encode("utf-8")) for p in parts)
    slow_bytes = len(slow_text.encode("utf-8"))
    slow_parts = passages(slow_text)

    expected = len(enc.encode_ordinary(text))
    expected_parts = [len(enc.encode_ordinary(p)) for p in parts]
    assert _core.count_tokens(name, text) == expected, "fadeway and tiktoken disagree"
    assert _core.count_tokens_many(name, parts).tolist() == expected_parts
    assert reference.slow_count(name, slow_text) == len(enc.encode_ordinary(slow_text))

    def loop(count: Callable[[str], int], items: list[str]) -> Callable[[], object]:
        return lambda: [count(p) for p in items]

    def count_fadeway(p: str) -> int:
        return _core.count_tokens(name, p)

    def count_tiktoken(p: str) -> int:
        return len(enc.encode_ordinary(p))

    def count_slow(p: str) -> int:
        return reference.slow_count(name, p)

    timings = {
        "fadeway `count_tokens`": (
            best_seconds(lambda: _core.count_tokens(name, text)) / big_bytes,
            best_seconds(loop(count_fadeway, parts)) / len(parts),
        ),
        "fadeway `count_tokens_many`": (
            None,
            best_seconds(lambda: _core.count_tokens_many(name, parts)) / len(parts),
        ),
        "tiktoken `encode_ordinary`": (
            best_seconds(lambda: enc.encode_ordinary(text)) / big_bytes,
            best_seconds(loop(count_tiktoken, parts)) / len(parts),
        ),
        "pure Python (`tests/reference.slow_count`)": (
            best_seconds(lambda: count_slow(slow_text), repeats=1) / slow_bytes,
            best_seconds(loop(count_slow, slow_parts), repeats=1) / len(slow_parts),
        ),
    }
    peer_byte, peer_part = timings["tiktoken `encode_ordinary`"]
    mean_part_bytes = part_bytes / len(parts)
    rows = []
    for label, (per_byte, per_part) in timings.items():
        rows.append(
            (
                label,
                "—" if per_byte is None else f"{1e-6 / per_byte:.1f}",
                f"{mean_part_bytes * 1e-6 / per_part:.1f}",
                f"{per_part * 1e9:,.0f}",
                "—" if per_byte is None else f"{peer_byte / per_byte:.2f}×",
                f"{peer_part / per_part:.2f}×",
            )
        )
    return rows


HEADER = (
    "implementation",
    "big text MB/s",
    "passages MB/s",
    "ns / passage",
    "vs tiktoken (text)",
    "vs tiktoken (passage)",
)


def markdown_table(rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + " --- |" * len(HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=BIG_TEXT_BYTES / 1e6, help="text size in MB")
    parser.add_argument("--out", type=Path, help="also write the tables to this markdown file")
    args = parser.parse_args()

    text = chat_text(int(args.mb * 1e6))
    parts = passages(text)
    slow_text = chat_text(SLOW_SAMPLE_BYTES, seed=SEED + 1)
    mean_bytes = sum(len(p.encode()) for p in parts) / len(parts)
    non_ascii = sum(not p.isascii() for p in parts) / len(parts)
    summary = (
        f"Text: {len(text.encode()) / 1e6:.2f} MB of generated chat-like English (seed {SEED}; "
        f"{non_ascii:.0%} of passages have some non-ASCII), cut into {len(parts):,} passages of "
        f"{PASSAGE_BYTES}+ bytes ending before a space (mean {mean_bytes:.0f} bytes). The "
        f"pure-Python twin runs on a {SLOW_SAMPLE_BYTES // 1000} kB sample. One thread, best of "
        f"{REPEATS}; every count is checked equal to tiktoken's before timing. Goal (issue): at "
        "least 150 MB/s per thread on English text and under 1 µs to count a 130-byte passage.\n\n"
        "fadeway memoises, per thread, the counts of pieces that are several tokens (rare words); "
        "the text's long tail of made-up names keeps about one such piece in eight new, as in real "
        "chat. `count_tokens` is timed in a Python loop, call by call; `count_tokens_many` takes "
        "the whole list in one call with the GIL released."
    )
    sections = [summary]
    for name in reference.ENCODING_NAMES:
        sections.append(f"### {name}\n\n{markdown_table(measure(name, text, parts, slow_text))}")
    report = "\n\n".join(sections)
    print(report)
    if args.out:
        machine = (
            f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}"
        )
        args.out.write_text(
            f"# Token counting benchmark\n\n"
            f"Command: `python benches/compare_tokens.py --out {args.out}`  \n"
            f"Date: {datetime.date.today().isoformat()}  \n"
            f"Machine: 2 cores ({machine}), a VM other jobs may share: hence best-of-{REPEATS}\n\n"
            f"{report}\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
